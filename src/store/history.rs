//! The history of saved runs: listing them, printing one as `run` did, exporting one as JSON
//! or CSV, and importing a result document measured elsewhere.

use anyhow::{Context, Result};

use super::db::{self, Db, Filter, RunRow, Source, StudyGroup};
use crate::model::headline::{describe, RunHeadline};
use crate::model::points_of_planned;
use crate::text::printable;
use crate::text::table::{comment, units_line, Column, Style, Table};

/// One line of the `history` listing: a run, or the runs of one study folded together.
#[derive(Debug, Clone, PartialEq)]
pub enum Line {
    Run(RunRow),
    Study(StudyGroup),
}

impl Line {
    /// The run id the line is ordered by (newest first).
    fn id(&self) -> i64 {
        match self {
            Line::Run(r) => r.id,
            Line::Study(g) => g.newest_run,
        }
    }
}

/// The widths the listing's longest free-text columns are cut to, in terminal columns: a
/// longer text is cut with an ellipsis, so that one imported label cannot push the headline
/// off every line. The table renderer sizes every column to its content within these.
const W_LABEL: usize = 24;
const W_SERVER: usize = 22;
const W_HOST: usize = 16;

/// `text` made printable and cut to at most `width` terminal columns, ended with "…" when it
/// was wider. Not padded: the table renderer aligns it.
pub fn clip(text: &str, width: usize) -> String {
    use unicode_width::UnicodeWidthChar;
    let text = printable(text);
    let total: usize = text.chars().map(|c| c.width().unwrap_or(0)).sum();
    if total <= width {
        return text.into_owned();
    }
    let mut out = String::new();
    let mut used = 0;
    if width > 0 {
        for c in text.chars() {
            let w = c.width().unwrap_or(0);
            if used + w > width - 1 {
                break;
            }
            out.push(c);
            used += w;
        }
        out.push('…');
    }
    out
}

/// A stored start time as listed: to the second ("2025-01-31T12:00:00Z"); the database
/// keeps milliseconds.
fn started(s: &str) -> String {
    match (s.get(..19), s.ends_with('Z')) {
        (Some(head), true) if s.len() > 20 && s.as_bytes().get(19) == Some(&b'.') => {
            format!("{head}Z")
        }
        _ => s.to_owned(),
    }
}

/// The units of the `history` view, stated once above it.
pub const UNITS: &str = "times in us, rates in Mbit/s, transactions per second (in the headline)";

/// The `history` listing: one line per run, newest first.
pub fn format_history(rows: &[RunRow]) -> String {
    let lines: Vec<Line> = rows.iter().cloned().map(Line::Run).collect();
    format_lines(&lines)
}

/// The `history` listing of runs and folded studies, in the order given, as a plain table.
pub fn format_lines(lines: &[Line]) -> String {
    render_lines(lines, Style::Plain)
}

/// The `history` listing of runs and folded studies, in the order given.
pub fn render_lines(lines: &[Line], style: Style) -> String {
    let mut t = Table::new(vec![
        Column::right("id"),
        Column::left("started (UTC)"),
        Column::left("source"),
        Column::left("pattern"),
        Column::left("via"),
        Column::left("label"),
        Column::left("server"),
        Column::left("client host"),
        Column::right("points"),
        Column::left("headline"),
    ]);
    for l in lines {
        // Every text field may come from an imported file: the renderer escapes it, so that
        // none can clear the screen or forge a line of the listing.
        t.row(match l {
            Line::Run(r) => run_cells(r),
            Line::Study(g) => study_cells(g),
        });
    }
    t.render(style)
}

fn run_cells(r: &RunRow) -> Vec<String> {
    let h = RunHeadline {
        latency_ns: r.latency_ns,
        throughput_bits_per_s: r.throughput_bits_per_s,
        transactions_per_s: r.transactions_per_s,
        note: r.headline_note.clone(),
    };
    let mut notes = Vec::new();
    if !r.complete {
        notes.push(format!(
            "incomplete: {}",
            points_of_planned(
                r.points.max(0) as u64,
                r.planned_points.map(|p| p.max(0) as u64)
            )
        ));
    }
    if r.source == "import" {
        notes.push("imported".to_owned());
    }
    if r.regression.is_some() {
        notes.push("REGRESSION".to_owned());
    }
    let mut rest = describe(&r.pattern, &h);
    if !notes.is_empty() {
        rest.push_str(&format!(" [{}]", notes.join(", ")));
    }
    vec![
        r.id.to_string(),
        started(&r.started_at),
        r.source.clone(),
        r.pattern.clone(),
        r.transport.clone(),
        clip(r.label.as_deref().unwrap_or("-"), W_LABEL),
        clip(r.server_address.as_deref().unwrap_or("-"), W_SERVER),
        clip(r.client_host.as_deref().unwrap_or("-"), W_HOST),
        r.points.to_string(),
        rest,
    ]
}

fn study_cells(g: &StudyGroup) -> Vec<String> {
    let mut rest = format!(
        "{} run{} of study #{} (--source study lists them)",
        g.runs,
        if g.runs == 1 { "" } else { "s" },
        g.study_id
    );
    if g.incomplete > 0 {
        rest.push_str(&format!(" [{} incomplete]", g.incomplete));
    }
    vec![
        g.newest_run.to_string(),
        started(&g.started_at),
        "study".into(),
        g.pattern.clone().unwrap_or_else(|| "mixed".into()),
        g.transport.clone().unwrap_or_else(|| "mixed".into()),
        clip(&format!("study {} #{}", g.name, g.study_id), W_LABEL),
        "-".into(),
        "-".into(),
        g.points.to_string(),
        rest,
    ]
}

/// The lines `history` shows: the runs matching `filter`, newest first, with the runs of each
/// study folded into one line (where its newest run would be) when `fold_studies`. The
/// limit counts lines.
pub fn lines(db: &Db, filter: &Filter, fold_studies: bool) -> Result<Vec<Line>> {
    let runs = db.list_rows(filter, fold_studies)?;
    if !fold_studies {
        return Ok(runs.into_iter().map(Line::Run).collect());
    }
    let groups = db.study_groups(filter)?;
    let mut all: Vec<Line> = runs
        .into_iter()
        .map(Line::Run)
        .chain(groups.into_iter().map(Line::Study))
        .collect();
    all.sort_by_key(|l| std::cmp::Reverse(l.id()));
    if let Some(n) = filter.limit {
        all.truncate(n as usize);
    }
    Ok(all)
}

/// The `history` text: its units and the listing, or a line saying that nothing matched.
pub fn history(db: &Db, filter: &Filter, fold_studies: bool, style: Style) -> Result<String> {
    let lines = lines(db, filter, fold_studies)?;
    if lines.is_empty() {
        return Ok(comment(
            style,
            &format!("no saved runs match in {}", db.path().display()),
        ));
    }
    Ok(units_line(style, UNITS) + &render_lines(&lines, style))
}

/// Reads `from` to its end as UTF-8 text, refusing it once it has more than `cap` bytes or
/// once its first bytes show it is no JSON document (a stream of zeros stops at once).
fn read_capped(from: impl std::io::Read, cap: u64) -> Result<String> {
    read_capped_sized(from, cap, 0)
}

/// [`read_capped`] into a buffer of `size_hint` bytes to begin with (a regular file's size):
/// a buffer that grows by doubling holds up to twice the document while it grows.
fn read_capped_sized(from: impl std::io::Read, cap: u64, size_hint: u64) -> Result<String> {
    use std::io::Read;
    let mut bytes = Vec::with_capacity(size_hint.min(cap) as usize + 1);
    let mut limited = from.take(cap + 1);
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        let n = match limited.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        bytes.extend_from_slice(&chunk[..n]);
        if bytes.len() as u64 > cap {
            anyhow::bail!(
                "more than {} MiB: larger than any result document",
                cap >> 20
            );
        }
        if let Some(&first) = bytes.iter().find(|b| !b.is_ascii_whitespace()) {
            if first != b'{' {
                anyhow::bail!("not a JSON document (a result document starts with '{{')");
            }
        }
    }
    String::from_utf8(bytes).context("not UTF-8 text")
}

/// The largest result document `import` reads: far more than any run writes (a sweep of
/// 100 000 points), far less than what would exhaust the memory of the host.
pub const MAX_IMPORT: u64 = 256 << 20;

/// Reads a result document (`-` for stdin) and saves it as a new, imported run.
pub fn import(db: &Db, file: &std::path::Path) -> Result<i64> {
    let text = if file.as_os_str() == "-" {
        read_capped(std::io::stdin().lock(), MAX_IMPORT).context("reading stdin")?
    } else {
        let f = std::fs::File::open(file).with_context(|| format!("reading {}", file.display()))?;
        // A regular file is judged by its size before a byte is read; anything else (a pipe,
        // /dev/zero) by reading at most one byte past the limit.
        let mut size = 0;
        if let Ok(m) = f.metadata() {
            if m.is_file() {
                size = m.len();
            }
            if m.is_file() && m.len() > MAX_IMPORT {
                anyhow::bail!(
                    "{}: {} bytes, larger than any result document (at most {} MiB are imported)",
                    file.display(),
                    m.len(),
                    MAX_IMPORT >> 20
                );
            }
        }
        read_capped_sized(f, MAX_IMPORT, size)
            .with_context(|| format!("reading {}", file.display()))?
    };
    let report = db::parse_report(&text).with_context(|| format!("{}", file.display()))?;
    // The text goes before the document is encoded again for the database.
    drop(text);
    db.insert_owned(report, Source::Import)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn reading_stops_past_the_cap_and_at_a_first_byte_no_document_has() {
        let big = std::io::repeat(b' ').take(10 << 20);
        let e = read_capped(big, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("more than 1 MiB"), "{e}");
        let e = read_capped(std::io::repeat(0), 1 << 20).unwrap_err();
        assert!(e.to_string().contains("not a JSON document"), "{e}");
        assert_eq!(read_capped(&b" {}"[..], 1 << 20).unwrap(), " {}");
    }

    #[test]
    fn an_incomplete_run_is_listed_with_the_points_it_planned() {
        let row = |planned| RunRow {
            id: 3,
            started_at: "2026-01-01T00:00:00Z".into(),
            pattern: "pingpong".into(),
            transport: "tcp".into(),
            server_address: None,
            client_host: None,
            points: 3,
            planned_points: planned,
            complete: false,
            source: "run".into(),
            latency_ns: Some(1000.0),
            throughput_bits_per_s: None,
            transactions_per_s: None,
            headline_note: None,
            regression: None,
            label: None,
            study_id: None,
        };
        let text = format_history(&[row(Some(7))]);
        assert!(
            text.contains("[incomplete: 3 of 7 planned points measured]"),
            "{text}"
        );
        let text = format_history(&[row(None)]);
        assert!(
            text.contains("[incomplete: 3 points measured (the planned total is not recorded)]"),
            "{text}"
        );
    }

    #[test]
    fn a_listing_escapes_what_an_imported_file_put_in_its_fields() {
        let row = RunRow {
            id: 1,
            started_at: "2026-01-01T00:00:00Z".into(),
            pattern: "pingpong".into(),
            transport: "tcp\x1b]0;title\x07".into(),
            server_address: Some("10.0.0.1\x07".into()),
            client_host: Some("evil\x1b[2J\nforged line".into()),
            points: 1,
            planned_points: None,
            complete: true,
            source: "import".into(),
            latency_ns: Some(1000.0),
            throughput_bits_per_s: None,
            transactions_per_s: None,
            headline_note: Some("note\x1b[31m".into()),
            regression: None,
            label: Some("label\x1b[2J".into()),
            study_id: None,
        };
        let text = format_history(&[row]);
        assert!(!text.contains('\x1b') && !text.contains('\x07'), "{text}");
        assert_eq!(text.lines().count(), 2, "{text}");
    }

    /// A database in a temporary directory with these runs: (pattern, transport, label,
    /// source, started_at).
    fn db_with(runs: &[(&str, &str, Option<&str>, Source, &str)]) -> (tempfile::TempDir, Db) {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open_or_create(&dir.path().join("r.sqlite")).unwrap();
        for &(pattern, transport, label, source, started) in runs {
            let mut r = db::tests::report(pattern, 2, 20_000.0);
            r.transport = serde_json::from_value(transport.into()).unwrap();
            r.label = label.map(str::to_owned);
            r.started_at = started.to_owned();
            db.insert(&r, source).unwrap();
        }
        (dir, db)
    }

    /// Records runs `run_ids` as those of a new study named `name`; returns its id.
    fn study(db: &Db, name: &str, run_ids: &[i64]) -> i64 {
        db.conn()
            .execute(
                "INSERT INTO studies (name, file_text, seed, started_at, status, schedule_json)
                 VALUES (?1, '', 1, '2026-01-01T00:00:00.000Z', 'done', '[]')",
                [name],
            )
            .unwrap();
        let sid = db.conn().last_insert_rowid();
        for (slot, id) in run_ids.iter().enumerate() {
            db.conn()
                .execute(
                    "INSERT INTO study_runs (study_id, slot, probe, point, repetition, kind,
                         status, run_id, attempts, finished_at)
                     VALUES (?1, ?2, 0, 0, 1, 'measure', 'done', ?3, 1, '2026-01-01T00:00:00Z')",
                    rusqlite::params![sid, slot as i64, id],
                )
                .unwrap();
        }
        sid
    }

    fn ids(db: &Db, f: &Filter) -> Vec<i64> {
        db.list(f).unwrap().iter().map(|r| r.id).collect()
    }

    const T1: &str = "2026-01-01T10:00:00.000Z";
    const T2: &str = "2026-02-01T10:00:00.000Z";
    const T3: &str = "2026-03-01T10:00:00.000Z";

    #[test]
    fn each_filter_keeps_only_the_runs_it_names() {
        let (_d, db) = db_with(&[
            (
                "pingpong",
                "tcp",
                Some("Before the firmware"),
                Source::Run,
                T1,
            ),
            ("stream", "mptcp", None, Source::Import, T2),
            (
                "pingpong",
                "quic",
                Some("after THE firmware"),
                Source::Mesh,
                T3,
            ),
            (
                "pingpong",
                "udp",
                Some("compare-transports x: udp, run 1 of 1"),
                Source::CompareTransports,
                T3,
            ),
        ]);
        let all = Filter::default();
        assert_eq!(ids(&db, &all), [4, 3, 2, 1]);
        let with = |f: fn(&mut Filter)| {
            let mut filter = Filter::default();
            f(&mut filter);
            ids(&db, &filter)
        };
        assert_eq!(with(|f| f.source = Some("mesh".into())), [3]);
        assert_eq!(with(|f| f.source = Some("import".into())), [2]);
        assert_eq!(with(|f| f.source = Some("compare-transports".into())), [4]);
        assert_eq!(with(|f| f.source = Some("study".into())), Vec::<i64>::new());
        // A substring of the label, in any case; runs without one never match.
        assert_eq!(with(|f| f.label = Some("the FIRMWARE".into())), [3, 1]);
        assert_eq!(with(|f| f.label = Some("before".into())), [1]);
        assert_eq!(with(|f| f.pattern = Some("stream".into())), [2]);
        assert_eq!(with(|f| f.transport = Some("mptcp".into())), [2]);
        assert_eq!(
            with(|f| f.since = Some("2026-02-01T10:00:00.000Z".into())),
            [4, 3, 2]
        );
        assert_eq!(
            with(|f| f.until = Some("2026-02-01T10:00:00.000Z".into())),
            [1]
        );
        assert_eq!(
            with(|f| {
                f.since = Some("2026-01-15T00:00:00.000Z".into());
                f.until = Some("2026-02-15T00:00:00.000Z".into());
            }),
            [2]
        );
        // Filters add up.
        assert_eq!(
            with(|f| {
                f.pattern = Some("pingpong".into());
                f.label = Some("firmware".into());
                f.source = Some("run".into());
            }),
            [1]
        );
        // The listing shows each run's source and label.
        let rows = db.list(&all).unwrap();
        assert_eq!(rows[1].source, "mesh");
        assert_eq!(rows[1].label.as_deref(), Some("after THE firmware"));
        let text = format_history(&rows);
        assert!(text.contains(" mesh "), "{text}");
        assert!(text.contains(" compare-transports "), "{text}");
    }

    #[test]
    fn a_label_set_later_is_what_the_filter_sees() {
        let (_d, db) = db_with(&[("pingpong", "tcp", None, Source::Run, T1)]);
        let mut r = db.load(1).unwrap();
        r.label = Some("relabelled".into());
        db.update(1, &r).unwrap();
        let f = Filter {
            label: Some("label".into()),
            ..Filter::default()
        };
        assert_eq!(ids(&db, &f), [1]);
    }

    #[test]
    fn the_runs_of_a_study_are_one_line_unless_all_are_asked_for() {
        let (_d, db) = db_with(&[
            ("pingpong", "tcp", Some("mine"), Source::Run, T1),
            ("pingpong", "tcp", Some("study s #1: a"), Source::Study, T1),
            ("pingpong", "udp", Some("study s #1: b"), Source::Study, T2),
            ("stream", "tcp", Some("later"), Source::Run, T2),
            ("pingpong", "tcp", Some("study s #1: c"), Source::Study, T3),
            // A study run whose study never recorded it (stopped in between) stays a run.
            ("pingpong", "tcp", Some("orphan"), Source::Study, T3),
        ]);
        let sid = study(&db, "s", &[2, 3, 5]);
        let f = Filter::default();
        let folded = lines(&db, &f, true).unwrap();
        let shape: Vec<(i64, bool)> = folded
            .iter()
            .map(|l| (l.id(), matches!(l, Line::Study(_))))
            .collect();
        assert_eq!(shape, [(6, false), (5, true), (4, false), (1, false)]);
        let Line::Study(g) = &folded[1] else {
            panic!("{folded:?}")
        };
        assert_eq!((g.study_id, g.runs, g.points), (sid, 3, 6));
        assert_eq!(g.name, "s");
        assert_eq!(
            (g.pattern.as_deref(), g.transport.as_deref()),
            (Some("pingpong"), None)
        );
        assert_eq!(g.started_at, T1);
        let text = format_lines(&folded);
        assert!(
            text.contains("3 runs of study #1 (--source study lists them)"),
            "{text}"
        );
        assert!(text.contains("study s #1"), "{text}");
        assert!(text.contains(" mixed "), "{text}");
        // Unfolded: every run; the study's are marked with it.
        let all = lines(&db, &f, false).unwrap();
        assert_eq!(all.len(), 6);
        let Line::Run(r) = &all[1] else {
            panic!("{all:?}")
        };
        assert_eq!(r.study_id, Some(sid));
        // The count is of the runs that match; the limit counts lines.
        let udp = Filter {
            transport: Some("udp".into()),
            ..Filter::default()
        };
        let Line::Study(g) = &lines(&db, &udp, true).unwrap()[0] else {
            panic!()
        };
        assert_eq!(
            (g.runs, g.newest_run, g.transport.as_deref()),
            (1, 3, Some("udp"))
        );
        let two = Filter {
            limit: Some(2),
            ..Filter::default()
        };
        let ids: Vec<i64> = lines(&db, &two, true)
            .unwrap()
            .iter()
            .map(Line::id)
            .collect();
        assert_eq!(ids, [6, 5]);
        let ids: Vec<i64> = lines(&db, &two, false)
            .unwrap()
            .iter()
            .map(Line::id)
            .collect();
        assert_eq!(ids, [6, 5]);
        // history --json stays one element per run.
        assert_eq!(db.list(&f).unwrap().len(), 6);
    }

    /// The terminal column at which `needle` starts on `line`.
    fn column(line: &str, needle: &str) -> usize {
        use unicode_width::UnicodeWidthStr;
        let at = line
            .find(needle)
            .unwrap_or_else(|| panic!("{needle:?} in {line:?}"));
        line[..at].width()
    }

    #[test]
    fn columns_stay_aligned_whatever_the_labels_and_transports() {
        let long = "a label far longer than the column it is given, with more";
        let (_d, db) = db_with(&[
            ("pingpong", "tcp", None, Source::Run, T1),
            ("pingpong", "mptcp", Some(long), Source::Run, T1),
            (
                "pingpong",
                "quic",
                Some("日本語のとても長いラベルです、本当に"),
                Source::Import,
                T1,
            ),
            (
                "pingpong",
                "unix",
                Some("short"),
                Source::CompareTransports,
                T1,
            ),
        ]);
        let text = format_history(&db.list(&Filter::default()).unwrap());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 5, "{text}");
        // Every line has its server, client host and points at the same columns as the
        // header has their titles.
        let server = column(lines[0], "server");
        let host = column(lines[0], "client host");
        let headline = column(lines[0], "headline");
        for l in &lines[1..] {
            assert_eq!(column(l, "192.0.2.7:5320"), server, "{text}");
            assert_eq!(column(l, "alpha"), host, "{text}");
            assert_eq!(column(l, "t0 "), headline, "{l}\n{text}");
        }
        // A long label is cut with an ellipsis at its width.
        assert!(text.contains("a label far longer than…"), "{text}");
        assert!(!text.contains("with more"), "{text}");
        assert!(text.contains(" mptcp "), "{text}");
        // Wide characters count as two columns.
        assert_eq!(clip("日本語", 5), "日本…");
        assert_eq!(clip("日本語", 6), "日本語");
        assert_eq!(clip("ab", 4), "ab");
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(clip("a\x1b[2Jb", 20), printable("a\x1b[2Jb"));
    }

    #[test]
    fn ids_and_points_widen_their_columns_rather_than_being_cut() {
        let row = |id: i64, points: i64| RunRow {
            id,
            started_at: T1.into(),
            pattern: "pingpong".into(),
            transport: "tcp".into(),
            server_address: None,
            client_host: None,
            points,
            planned_points: None,
            complete: true,
            source: "run".into(),
            label: None,
            study_id: None,
            latency_ns: Some(1000.0),
            throughput_bits_per_s: None,
            transactions_per_s: None,
            headline_note: None,
            regression: None,
        };
        let text = format_history(&[row(1234567, 1), row(1, 12345678)]);
        assert!(text.contains("1234567  2026-01-01T10:00:00Z "), "{text}");
        assert!(text.contains(" 12345678  "), "{text}");
        let lines: Vec<&str> = text.lines().collect();
        let at = column(lines[0], "headline");
        assert!(lines[1..].iter().all(|l| column(l, "t0 ") == at), "{text}");
    }

    #[test]
    fn the_listing_aligns_with_awkward_content_and_has_every_markdown_cell() {
        use crate::text::table::{check_aligned, Align};
        let row = |id: i64, transport: &str, label: Option<&str>, latency: Option<f64>| RunRow {
            id,
            started_at: T1.into(),
            pattern: "pingpong".into(),
            transport: transport.into(),
            server_address: Some("192.0.2.7:5320".into()),
            client_host: None,
            points: id * 1000,
            planned_points: None,
            complete: true,
            source: "run".into(),
            label: label.map(Into::into),
            study_id: None,
            latency_ns: latency,
            throughput_bits_per_s: latency.map(|l| l * 1e12),
            transactions_per_s: None,
            headline_note: None,
            regression: None,
        };
        let rows = [
            row(1, "tcp", None, Some(1e-3)),
            row(
                123456,
                "mptcp",
                Some("a forty-character label for this run ok"),
                Some(9.9e15),
            ),
            row(7, "quic", Some("naïve café"), None),
        ];
        let text = format_history(&rows);
        let mut aligns = vec![Align::Left; 10];
        aligns[0] = Align::Right;
        aligns[8] = Align::Right;
        assert_eq!(check_aligned(&text, &aligns, ""), Ok(()), "{text}");
        let lines: Vec<Line> = rows.iter().cloned().map(Line::Run).collect();
        let md = render_lines(&lines, Style::Markdown);
        let cells: Vec<usize> = md.lines().map(|l| l.matches('|').count()).collect();
        assert_eq!(cells, vec![11; 5], "{md}");
    }
}
