//! The counter deltas of every point of a study grid, as a table for a terminal or a page.

use crate::figures::grid::StudyGrid;
use crate::text::table::{Column, Style, Table};

/// The counter deltas of every point: columns are the counters that changed anywhere.
#[derive(Debug, Clone, PartialEq)]
pub struct CounterTable {
    pub columns: Vec<String>,
    /// (the point's coordinates, a delta per column; `None` where the point has none).
    pub rows: Vec<(String, Vec<Option<i64>>)>,
}

pub fn counter_table(grid: &StudyGrid) -> Option<CounterTable> {
    let mut columns: Vec<String> = Vec::new();
    for (name, delta) in grid.cells.iter().flat_map(|c| &c.counters) {
        if *delta != 0 && !columns.contains(name) {
            columns.push(name.clone());
        }
    }
    if columns.is_empty() {
        return None;
    }
    let rows = grid
        .cells
        .iter()
        .map(|c| {
            let deltas = columns
                .iter()
                .map(|col| c.counters.iter().find(|(n, _)| n == col).map(|(_, d)| *d))
                .collect();
            (grid.describe_cell(c), deltas)
        })
        .collect();
    Some(CounterTable { columns, rows })
}

impl CounterTable {
    /// Plain text for a terminal: aligned columns, "-" where a point has no such counter.
    /// The renderer escapes the names: they come from a study file.
    pub fn to_text(&self) -> String {
        self.render(Style::Plain)
    }

    /// The table as text, plain or as Markdown.
    pub fn render(&self, style: Style) -> String {
        let mut columns = vec![Column::left("point")];
        columns.extend(self.columns.iter().map(|c| Column::right(c.clone())));
        let mut t = Table::new(columns);
        for (name, ds) in &self.rows {
            let mut row = vec![name.clone()];
            row.extend(
                ds.iter()
                    .map(|d| d.map_or("-".to_owned(), |d| d.to_string())),
            );
            t.row(row);
        }
        t.render(style)
    }

    pub fn to_html(&self) -> String {
        use crate::figures::html_report::esc;
        let mut s = String::from("<table><tr><th>point</th>");
        for c in &self.columns {
            s.push_str(&format!("<th>{}</th>", esc(c)));
        }
        s.push_str("</tr>\n");
        for (name, ds) in &self.rows {
            s.push_str(&format!("<tr><td>{}</td>", esc(name)));
            for d in ds {
                s.push_str(&format!(
                    "<td class=\"n\">{}</td>",
                    d.map_or("-".to_owned(), |d| d.to_string())
                ));
            }
            s.push_str("</tr>\n");
        }
        s.push_str("</table>\n");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figures::grid::tests::window_study;

    #[test]
    fn counters_show_the_columns_that_changed() {
        let t = counter_table(&window_study()).unwrap();
        assert_eq!(t.columns, ["retransmits"]);
        assert_eq!(t.rows.len(), 12);
        assert_eq!(
            t.rows[1],
            ("window 4K, write_size 1K, path wan".into(), vec![Some(3)])
        );
        let text = t.to_text();
        assert_eq!(text.lines().count(), 13);
        // The widest point, "window 16K, write_size 1K, path lan", is 35 characters.
        let header = format!("point{}  retransmits\n", " ".repeat(30));
        assert!(text.starts_with(&header), "{text}");
        let row = format!("\nwindow 4K, write_size 1K, path wan{}3\n", " ".repeat(13));
        assert!(text.contains(&row), "{text}");
        assert!(t.to_html().contains("<td class=\"n\">3</td>"));
        let odd = CounterTable {
            columns: vec!["drops\u{1b}[2J".into()],
            rows: vec![("p".into(), vec![None])],
        };
        let shown = odd.to_text();
        assert!(!shown.contains('\u{1b}'), "{shown}");
        assert_eq!(
            shown,
            format!("point  drops\\u{{1b}}[2J\np    {}-\n", " ".repeat(15))
        );
        let mut g = window_study();
        for c in &mut g.cells {
            c.counters.retain(|(n, _)| n == "drops");
        }
        assert_eq!(counter_table(&g), None);
    }

    #[test]
    fn counters_align_whatever_the_names_and_deltas() {
        use crate::text::table::{check_aligned, Align};
        let t = CounterTable {
            columns: vec!["client.TcpExt.TCPLostRetransmit".into(), "x".into()],
            rows: vec![
                ("a".into(), vec![Some(i64::MAX), None]),
                (
                    "naïve point with a forty-character name".into(),
                    vec![Some(-3), Some(0)],
                ),
            ],
        };
        let text = t.to_text();
        assert_eq!(
            check_aligned(&text, &[Align::Left, Align::Right, Align::Right], ""),
            Ok(()),
            "{text}"
        );
        let md = t.render(Style::Markdown);
        assert!(md.lines().all(|l| l.matches('|').count() == 4), "{md}");
    }
}
