//! The history of saved runs: listing them, printing one as `run` did, exporting one as JSON
//! or CSV, and importing a result document measured elsewhere.

use anyhow::{Context, Result};

use super::db::{self, Db, Filter, RunRow, Source};
use crate::model::headline::{describe, RunHeadline};
use crate::model::points_of_planned;
use crate::text::printable;

/// The `history` listing: one line per run, newest first.
pub fn format_history(rows: &[RunRow]) -> String {
    let mut out = format!(
        "{:>5}  {:<24} {:<8} {:<4} {:<22} {:<16} {:>6}  {}\n",
        "id", "started (UTC)", "pattern", "via", "server", "client host", "points", "headline"
    );
    for r in rows {
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
        // Every text field may come from an imported file: escaped, so that none can clear
        // the screen or forge a line of the listing.
        out.push_str(&format!(
            "{:>5}  {:<24} {:<8} {:<4} {:<22} {:<16} {:>6}  {}{}\n",
            r.id,
            printable(&r.started_at),
            printable(&r.pattern),
            printable(&r.transport),
            printable(r.server_address.as_deref().unwrap_or("-")),
            printable(r.client_host.as_deref().unwrap_or("-")),
            r.points,
            printable(&describe(&r.pattern, &h)),
            if notes.is_empty() {
                String::new()
            } else {
                format!(" [{}]", notes.join(", "))
            }
        ));
    }
    out
}

pub fn history(db: &Db, filter: &Filter) -> Result<String> {
    let rows = db.list(filter)?;
    if rows.is_empty() {
        return Ok(format!(
            "# no saved runs match in {}\n",
            db.path().display()
        ));
    }
    Ok(format_history(&rows))
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
        };
        let text = format_history(&[row]);
        assert!(!text.contains('\x1b') && !text.contains('\x07'), "{text}");
        assert_eq!(text.lines().count(), 2, "{text}");
    }
}
