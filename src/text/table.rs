//! The one text table renderer behind every table wirebench prints: columns sized to their
//! content (by display width, after escaping what came from elsewhere), so they align whatever
//! the content, plain or as a Markdown table (hyperfine's `--export-markdown` is what people
//! paste into issues).
//!
//! Two shapes. A [`Table`] is known whole before it is printed (history, comparisons, a mesh
//! matrix): each column is as wide as its widest cell. A [`LiveTable`] prints each row as its
//! point completes (a sweep may run for minutes, and a reader wants each row when it is
//! measured): its columns start as wide as their headers (or a stated minimum), and a row
//! with a wider cell widens that column and prints the header again above it, as `vmstat`
//! repeats its header, so every row lines up with the header right above it.

use std::borrow::Cow;

use unicode_width::UnicodeWidthStr;

use super::printable;

/// Where a cell sits in its column: text left, numbers right.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// A column: its header (with the unit in it, "mean(us)") and its alignment.
#[derive(Clone, Debug)]
pub struct Column {
    pub header: String,
    pub align: Align,
    /// The least width, where a live table knows its cells run wider than its header.
    pub min_width: usize,
}

impl Column {
    /// A text column.
    pub fn left(header: impl Into<String>) -> Column {
        Column {
            header: header.into(),
            align: Align::Left,
            min_width: 0,
        }
    }

    /// A number column.
    pub fn right(header: impl Into<String>) -> Column {
        Column {
            header: header.into(),
            align: Align::Right,
            min_width: 0,
        }
    }

    /// At least `width` wide.
    pub fn min_width(mut self, width: usize) -> Column {
        self.min_width = width;
        self
    }
}

/// How a table is written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Style {
    /// Columns padded with spaces, two between columns, a terminal's table.
    #[default]
    Plain,
    /// A GitHub-flavoured Markdown table; notes follow it as a list.
    Markdown,
}

/// What a table holds: rows of cells, and notes said under the row before them.
#[derive(Clone, Debug)]
enum Line {
    Row(Vec<String>),
    Note(String),
}

/// A table known whole before it is printed.
#[derive(Clone, Debug)]
pub struct Table {
    columns: Vec<Column>,
    lines: Vec<Line>,
    /// Spaces before every line of a plain table.
    indent: usize,
    /// How a Markdown table's notes name the row they are said of.
    note_label: NoteLabel,
}

/// How the notes listed after a Markdown table name the row each is said of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NoteLabel {
    /// By the row's first cell (a size, a transport): what names the row when every column
    /// is there.
    #[default]
    FirstCell,
    /// "row N" (from 1): when columns were left out, the first cell may be any figure.
    RowNumber,
}

/// The gap between two columns of a plain table.
const GAP: &str = "  ";

/// A cell as it is printed: control characters escaped, so that a peer's or a file's text
/// can move no cursor and its width is the width it takes.
fn safe(cell: &str) -> Cow<'_, str> {
    printable(cell)
}

fn width(s: &str) -> usize {
    UnicodeWidthStr::width(s)
}

/// `cell` padded to `w` on the side its alignment leaves free.
fn pad(cell: &str, w: usize, align: Align) -> String {
    let fill = " ".repeat(w.saturating_sub(width(cell)));
    match align {
        Align::Left => format!("{cell}{fill}"),
        Align::Right => format!("{fill}{cell}"),
    }
}

/// A plain line: the cells padded to their widths, the last left-aligned cell not padded (no
/// trailing spaces).
fn plain_line(columns: &[Column], widths: &[usize], cells: &[Cow<'_, str>]) -> String {
    let mut line = String::new();
    for (i, (c, w)) in columns.iter().zip(widths).enumerate() {
        if i > 0 {
            line.push_str(GAP);
        }
        let cell = cells.get(i).map_or("", |c| c.as_ref());
        line.push_str(&pad(cell, *w, c.align));
    }
    line.truncate(line.trim_end().len());
    line
}

/// A Markdown cell: its pipes escaped, so they do not split it.
fn markdown_cell(cell: &str) -> String {
    safe(cell).replace('|', "\\|")
}

fn markdown_line<'a>(cells: impl Iterator<Item = &'a str>) -> String {
    let cells: Vec<String> = cells.map(markdown_cell).collect();
    format!("| {} |", cells.join(" | "))
}

fn markdown_rule(columns: &[Column]) -> String {
    let rules: Vec<&str> = columns
        .iter()
        .map(|c| match c.align {
            Align::Left => ":---",
            Align::Right => "---:",
        })
        .collect();
    format!("|{}|", rules.join("|"))
}

/// `cells` as many as there are columns: missing cells empty, extra cells joined into the last.
fn fitted(n: usize, mut cells: Vec<String>) -> Vec<String> {
    if cells.len() > n && n > 0 {
        let extra = cells.split_off(n);
        if let Some(last) = cells.last_mut() {
            for e in extra {
                last.push(' ');
                last.push_str(&e);
            }
        }
    }
    cells.resize(n, String::new());
    cells
}

impl Table {
    pub fn new(columns: Vec<Column>) -> Table {
        Table {
            columns,
            lines: Vec::new(),
            indent: 0,
            note_label: NoteLabel::FirstCell,
        }
    }

    /// How the notes of a Markdown table name their row.
    pub fn note_label(mut self, label: NoteLabel) -> Table {
        self.note_label = label;
        self
    }

    /// Every line of a plain table starts with `n` spaces.
    pub fn indent(mut self, n: usize) -> Table {
        self.indent = n;
        self
    }

    /// Adds a row; missing cells are empty.
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        let cells = cells.into_iter().map(Into::into).collect();
        self.lines
            .push(Line::Row(fitted(self.columns.len(), cells)));
    }

    /// A line said under the row before it, outside the columns (a footnote, a reason).
    pub fn note(&mut self, text: impl Into<String>) {
        self.lines.push(Line::Note(text.into()));
    }

    /// How many rows (notes not counted).
    pub fn rows(&self) -> usize {
        self.lines
            .iter()
            .filter(|l| matches!(l, Line::Row(_)))
            .count()
    }

    pub fn is_empty(&self) -> bool {
        self.rows() == 0
    }

    /// The columns' headers, in order.
    pub fn headers(&self) -> impl Iterator<Item = &str> {
        self.columns.iter().map(|c| c.header.as_str())
    }

    /// Keeps the columns `keep` says yes to, in their order (`--columns`).
    pub fn retain_columns(&mut self, keep: impl Fn(usize, &Column) -> bool) {
        let kept: Vec<usize> = (0..self.columns.len())
            .filter(|&i| keep(i, &self.columns[i]))
            .collect();
        self.columns = kept.iter().map(|&i| self.columns[i].clone()).collect();
        for line in &mut self.lines {
            if let Line::Row(cells) = line {
                *cells = kept.iter().map(|&i| cells[i].clone()).collect();
            }
        }
    }

    /// Each column's width: its widest cell or header.
    fn widths(&self) -> Vec<usize> {
        self.columns
            .iter()
            .enumerate()
            .map(|(i, c)| {
                self.lines
                    .iter()
                    .filter_map(|l| match l {
                        Line::Row(cells) => Some(width(&safe(&cells[i]))),
                        Line::Note(_) => None,
                    })
                    .chain([width(&safe(&c.header)), c.min_width])
                    .max()
                    .unwrap_or(0)
            })
            .collect()
    }

    /// The table as text, every line ending in a newline.
    pub fn render(&self, style: Style) -> String {
        match style {
            Style::Plain => self.plain(),
            Style::Markdown => self.markdown(),
        }
    }

    fn plain(&self) -> String {
        let widths = self.widths();
        let indent = " ".repeat(self.indent);
        let headers: Vec<Cow<'_, str>> = self.columns.iter().map(|c| safe(&c.header)).collect();
        let mut out = format!("{indent}{}\n", plain_line(&self.columns, &widths, &headers));
        for line in &self.lines {
            match line {
                Line::Row(cells) => {
                    let cells: Vec<Cow<'_, str>> = cells.iter().map(|c| safe(c)).collect();
                    out.push_str(&format!(
                        "{indent}{}\n",
                        plain_line(&self.columns, &widths, &cells)
                    ));
                }
                Line::Note(text) => {
                    out.push_str(&format!("{indent}  {}\n", super::printable_lines(text)));
                }
            }
        }
        out
    }

    fn markdown(&self) -> String {
        let mut out = markdown_line(self.headers());
        out.push('\n');
        out.push_str(&markdown_rule(&self.columns));
        out.push('\n');
        let mut notes = Vec::new();
        let mut last_first_cell = String::new();
        let mut rows = 0;
        for line in &self.lines {
            match line {
                Line::Row(cells) => {
                    out.push_str(&markdown_line(cells.iter().map(String::as_str)));
                    out.push('\n');
                    rows += 1;
                    last_first_cell = match self.note_label {
                        NoteLabel::FirstCell => cells.first().cloned().unwrap_or_default(),
                        NoteLabel::RowNumber => format!("row {rows}"),
                    };
                }
                Line::Note(text) => notes.push(if last_first_cell.is_empty() {
                    format!("- {}", safe(text.trim()))
                } else {
                    format!("- {}: {}", safe(&last_first_cell), safe(text.trim()))
                }),
            }
        }
        if !notes.is_empty() {
            out.push('\n');
            for n in notes {
                out.push_str(&n);
                out.push('\n');
            }
        }
        out
    }
}

/// A line said about a whole table view, above or below it (what it shows, its units, a
/// footnote): "# text" in a plain view, where a reader or a script skips lines starting with
/// '#'; in Markdown, a paragraph of its own ("# " there would make a heading). Escaped.
pub fn comment(style: Style, text: &str) -> String {
    match style {
        Style::Plain => format!("# {}\n", safe(text)),
        Style::Markdown => format!("{}\n\n", safe(text)),
    }
}

/// The units line at the top of a table view that carries figures, stated once for the
/// whole view: "# units: times in us, rates in Mbit/s".
pub fn units_line(style: Style, units: &str) -> String {
    comment(style, &format!("units: {units}"))
}

/// A plain table printed a row at a time, as each row is measured.
#[derive(Clone, Debug)]
pub struct LiveTable {
    columns: Vec<Column>,
    widths: Vec<usize>,
    indent: usize,
}

impl LiveTable {
    /// Each column as wide as its header or its least width.
    pub fn new(columns: Vec<Column>) -> LiveTable {
        let widths = columns
            .iter()
            .map(|c| width(&safe(&c.header)).max(c.min_width))
            .collect();
        LiveTable {
            columns,
            widths,
            indent: 0,
        }
    }

    /// Every line starts with `n` spaces.
    pub fn indent(mut self, n: usize) -> LiveTable {
        self.indent = n;
        self
    }

    /// The header line.
    pub fn header(&self) -> String {
        let headers: Vec<Cow<'_, str>> = self.columns.iter().map(|c| safe(&c.header)).collect();
        format!(
            "{}{}",
            " ".repeat(self.indent),
            plain_line(&self.columns, &self.widths, &headers)
        )
    }

    /// The lines that print a row: the row, after the header again when a cell was wider
    /// than its column (which then stays that wide).
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) -> Vec<String> {
        let cells = fitted(
            self.columns.len(),
            cells.into_iter().map(Into::into).collect(),
        );
        let cells: Vec<Cow<'_, str>> = cells.iter().map(|c| safe(c)).collect();
        let mut widened = false;
        for (w, c) in self.widths.iter_mut().zip(&cells) {
            if width(c) > *w {
                *w = width(c);
                widened = true;
            }
        }
        let row = format!(
            "{}{}",
            " ".repeat(self.indent),
            plain_line(&self.columns, &self.widths, &cells)
        );
        if widened {
            vec![self.header(), row]
        } else {
            vec![row]
        }
    }

    /// The columns' widths now.
    pub fn widths(&self) -> &[usize] {
        &self.widths
    }
}

/// Checks that a plain table's rows line up under its header: `text`'s first line is the
/// header (its headers hold no double space), each further line a row; a right-aligned cell
/// must end where its header ends, a left-aligned one start where its header starts. Lines
/// that start with `note_prefix` are notes and not checked. For the tests of every table
/// kind (counts chars: give it text whose characters are one column wide). The error names
/// the first line that does not line up.
pub fn check_aligned(text: &str, aligns: &[Align], note_prefix: &str) -> Result<(), String> {
    let mut lines = text.lines();
    let header: Vec<char> = lines.next().unwrap_or("").chars().collect();
    // The header's cells: runs of text separated by two or more spaces.
    let mut spans = Vec::new();
    let mut i = 0;
    while i < header.len() {
        if header[i] == ' ' {
            i += 1;
            continue;
        }
        let start = i;
        while i < header.len() && !(header[i] == ' ' && header.get(i + 1).is_none_or(|c| *c == ' '))
        {
            i += 1;
        }
        spans.push((start, i));
    }
    if spans.len() != aligns.len() {
        return Err(format!(
            "the header has {} columns, {} alignments given: {:?}",
            spans.len(),
            aligns.len(),
            header.iter().collect::<String>()
        ));
    }
    for line in lines {
        if !note_prefix.is_empty() && line.starts_with(note_prefix) {
            continue;
        }
        let row: Vec<char> = line.chars().collect();
        let at = |k: usize| row.get(k).copied().unwrap_or(' ');
        for ((start, end), align) in spans.iter().zip(aligns) {
            let blank = (*start..*end).all(|k| at(k) == ' ');
            let ok = blank
                || match align {
                    Align::Right => at(*end - 1) != ' ' && at(*end) == ' ',
                    Align::Left => at(*start) != ' ' && (*start == 0 || at(*start - 1) == ' '),
                };
            if !ok {
                return Err(format!(
                    "{line:?}: the cell under column {}..{} does not line up with its header {:?}",
                    start,
                    end,
                    header[*start..*end].iter().collect::<String>()
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The display columns where each cell of `line` starts and ends, given `widths`.
    fn spans(widths: &[usize]) -> Vec<(usize, usize)> {
        let mut at = 0;
        widths
            .iter()
            .map(|w| {
                let s = (at, at + w);
                at += w + GAP.len();
                s
            })
            .collect()
    }

    /// Every line's cells sit inside their column's span: a right-aligned cell ends at its
    /// span's end, a left-aligned one starts at its start.
    fn aligned(lines: &[&str], columns: &[Column], widths: &[usize]) {
        for line in lines {
            let chars: Vec<char> = line.chars().collect();
            for ((start, end), c) in spans(widths).into_iter().zip(columns) {
                // Display width equals chars here only for narrow text; tests that use wide
                // text check it separately.
                let cell: String = chars
                    .get(start..end.min(chars.len()))
                    .unwrap_or(&[])
                    .iter()
                    .collect();
                if cell.trim().is_empty() {
                    continue;
                }
                match c.align {
                    Align::Right => assert!(
                        !cell.ends_with(' '),
                        "{line:?}: right cell {cell:?} not at its end"
                    ),
                    Align::Left => assert!(
                        !cell.starts_with(' '),
                        "{line:?}: left cell {cell:?} not at its start"
                    ),
                }
                let before = start.checked_sub(1).and_then(|b| chars.get(b));
                assert!(
                    before.is_none_or(|c| *c == ' '),
                    "{line:?}: a cell runs into column {start}"
                );
            }
        }
    }

    fn awkward() -> Table {
        let mut t = Table::new(vec![
            Column::left("transport"),
            Column::right("t0(us)"),
            Column::right("Mbit/s"),
            Column::left("label"),
        ]);
        t.row(["tcp", "12.50", "94000.12", "a"]);
        t.row([
            "mptcp-and-a-much-longer-name",
            "0.01",
            "184467440737095516.15",
            "",
        ]);
        t.row(["raw", "1.2e-9", "-", "x\x1b[2J"]);
        t.note("! receiver: above the link's rate");
        t.row(["q|uic", "123456789012", "0.00", "naïve"]);
        t
    }

    #[test]
    fn plain_columns_align_whatever_the_content() {
        let t = awkward();
        let text = t.render(Style::Plain);
        let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with("  !")).collect();
        assert_eq!(lines.len(), 5, "{text}");
        aligned(&lines, &t.columns, &t.widths());
        assert!(text.contains("x\\u{1b}[2J"), "escaped: {text}");
        assert!(text.lines().all(|l| l == l.trim_end()), "trailing spaces");
        // The header's right-aligned unit ends where the numbers end.
        let header = lines[0];
        let row = lines[2];
        let end = |l: &str, w: &str| l.find(w).map(|i| i + w.len());
        assert_eq!(end(header, "Mbit/s"), end(row, "184467440737095516.15"));
    }

    #[test]
    fn the_alignment_check_finds_a_ragged_row() {
        let aligns = [Align::Left, Align::Right, Align::Right, Align::Left];
        let t = awkward();
        let text = t.render(Style::Plain);
        assert_eq!(check_aligned(&text, &aligns, "  !"), Ok(()));
        let ragged = "transport  t0(us)\ntcp         12.5\nmptcp    1.0\n";
        assert!(check_aligned(ragged, &[Align::Left, Align::Right], "").is_err());
        let pushed = "transport  t0(us)\nmptcp-long  1.0\n";
        assert!(check_aligned(pushed, &[Align::Left, Align::Right], "").is_err());
    }

    #[test]
    fn wide_characters_count_their_display_width() {
        let mut t = Table::new(vec![Column::left("host"), Column::right("n")]);
        t.row(["東京", "1"]);
        t.row(["ab", "22"]);
        let text = t.render(Style::Plain);
        let cols: Vec<usize> = text.lines().map(width).collect();
        assert_eq!(cols, vec![8, 8, 8], "{text}");
    }

    #[test]
    fn markdown_escapes_pipes_and_lists_notes_after_the_table() {
        let text = awkward().render(Style::Markdown);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "| transport | t0(us) | Mbit/s | label |");
        assert_eq!(lines[1], "|:---|---:|---:|:---|");
        assert!(text.contains("| q\\|uic |"), "{text}");
        assert!(
            text.contains("- raw: ! receiver: above the link's rate"),
            "{text}"
        );
        // Every row has as many cells as the header.
        for l in &lines[..6] {
            assert_eq!(l.replace("\\|", "").matches('|').count(), 5, "{l}");
        }
    }

    #[test]
    fn notes_may_name_their_row_by_number() {
        let text = awkward()
            .note_label(NoteLabel::RowNumber)
            .render(Style::Markdown);
        assert!(
            text.contains("- row 3: ! receiver: above the link's rate"),
            "{text}"
        );
    }

    #[test]
    fn retained_columns_keep_their_order_and_cells() {
        let mut t = awkward();
        t.retain_columns(|_, c| c.header != "t0(us)" && c.header != "label");
        assert_eq!(t.headers().collect::<Vec<_>>(), ["transport", "Mbit/s"]);
        let text = t.render(Style::Plain);
        assert!(text
            .lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("tcp") && l.ends_with("94000.12")));
    }

    #[test]
    fn a_live_row_wider_than_its_column_prints_the_header_again() {
        let mut t = LiveTable::new(vec![
            Column::right("size(B)").min_width(9),
            Column::right("Mbit/s"),
        ]);
        let mut lines = vec![t.header()];
        lines.extend(t.row(["64", "1.00"]));
        let widened = t.row(["1048576", "123456789.50"]);
        assert_eq!(widened.len(), 2, "{widened:?}");
        lines.extend(widened);
        lines.extend(t.row(["8", "0.5"]));
        assert_eq!(lines.len(), 5);
        // Each row lines up with the header above it.
        let end = |l: &str| l.len();
        assert_eq!(end(&lines[0]), end(&lines[1]));
        assert_eq!(end(&lines[2]), end(&lines[3]));
        assert_eq!(end(&lines[3]), end(&lines[4]));
        assert_eq!(lines[2].trim(), "size(B)        Mbit/s");
        assert_eq!(t.widths(), [9, 12]);
    }

    #[test]
    fn comments_are_hash_lines_in_plain_and_paragraphs_in_markdown() {
        assert_eq!(
            units_line(Style::Plain, "times in us"),
            "# units: times in us\n"
        );
        assert_eq!(comment(Style::Markdown, "a\x1b[2J"), "a\\u{1b}[2J\n\n");
    }

    #[test]
    fn short_rows_are_filled_and_long_rows_joined() {
        let mut t = Table::new(vec![Column::left("a"), Column::left("b")]);
        t.row(["1"]);
        t.row(["1", "2", "3"]);
        let text = t.render(Style::Plain);
        assert_eq!(text, "a  b\n1\n1  2 3\n");
    }
}
