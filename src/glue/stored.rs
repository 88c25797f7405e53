//! A stored run printed and exported through the same sinks as a live one: `show` prints it
//! as `run` did, `export` writes its document as JSON, CSV or iperf3's JSON.

use anyhow::{Context, Result};

use crate::model::RunDocument;
use crate::output::handle::Capture;
use crate::output::table::TableSink;
use crate::plan::sink::Sink;
use crate::text::table::Style;

/// Prints a run to stdout as `run` printed it (the client's live interval lines excepted:
/// they were never part of the result), as a plain or a Markdown table, with only the
/// columns that show `columns` (CSV names) when given.
pub fn show(r: &RunDocument, style: Style, columns: Option<&[String]>) -> Result<()> {
    render(r, TableSink::new(), style, columns)?;
    if let Some(e) = &r.error {
        println!("# error: {}", crate::text::printable(e));
    }
    Ok(())
}

/// Run `r` through `sink` as a table, as the runner fed it.
fn render(
    r: &RunDocument,
    sink: TableSink,
    style: Style,
    columns: Option<&[String]>,
) -> Result<()> {
    let mut sink = sink
        .with_style(style)
        .with_columns(columns.map(<[String]>::to_vec));
    let mut so_far = r.clone();
    so_far.points.clear();
    sink.begin(&so_far)?;
    for p in &r.points {
        sink.point(&so_far, p)?;
        so_far.points.push(p.clone());
    }
    sink.finish(r)
}

/// Run `r` as the Markdown table `run --format markdown` prints (`export --format markdown`).
pub fn export_markdown(r: &RunDocument, columns: Option<&[String]>) -> Result<String> {
    let c = Capture::default();
    render(r, TableSink::to(c.output()), Style::Markdown, columns)?;
    Ok(c.text())
}

pub fn export_json(r: &RunDocument) -> Result<String> {
    Ok(crate::output::json::to_string(r).context("encoding the result")? + "\n")
}

/// The `run --csv` rows of run `id`, only `columns` in that order when given.
pub fn export_csv(r: &RunDocument, id: i64, columns: Option<&[String]>) -> Result<String> {
    crate::output::csv::to_string(r, Some(id), columns).context("encoding the result as CSV")
}

/// Point `point` of a stream run (the only one when None) as iperf3's `-J` document.
pub fn export_iperf3(r: &RunDocument, point: Option<usize>) -> Result<String> {
    crate::output::iperf3::to_string(r, point)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `export --format markdown --columns`: the stored run's table as Markdown, the columns
    /// that show the named ones in the table's order, every row as many cells as its header.
    #[test]
    fn a_stored_run_exports_as_a_markdown_table_of_the_columns_asked_for() {
        let r = crate::store::db::tests::report("rr", 2, 30_000.0);
        let names = ["rtt_p99_ns".to_owned(), "request_size_bytes".to_owned()];
        let text = export_markdown(&r, Some(&names)).unwrap();
        let rows: Vec<&str> = text.lines().filter(|l| l.starts_with('|')).collect();
        assert_eq!(rows[0], "| req(B) | p99(us) |", "{text}");
        assert_eq!(rows[1], "|---:|---:|", "{text}");
        assert_eq!(rows.len(), 4, "{text}");
        assert!(rows.iter().all(|l| l.matches('|').count() == 3), "{text}");
        let whole = export_markdown(&r, None).unwrap();
        assert!(whole.contains("| req(B) | resp(B) | txns |"), "{whole}");
    }
}
