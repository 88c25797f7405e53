//! A stored run printed and exported through the same sinks as a live one: `show` prints it
//! as `run` did, `export` writes its document as JSON, CSV or iperf3's JSON.

use anyhow::{Context, Result};

use crate::model::RunDocument;
use crate::output::table::TableSink;
use crate::plan::sink::Sink;

/// Prints a run to stdout as `run` printed it (the client's live interval lines excepted:
/// they were never part of the result).
pub fn show(r: &RunDocument) -> Result<()> {
    let mut sink = TableSink::new();
    let mut so_far = r.clone();
    so_far.points.clear();
    sink.begin(&so_far)?;
    for p in &r.points {
        sink.point(&so_far, p)?;
        so_far.points.push(p.clone());
    }
    sink.finish(r)?;
    if let Some(e) = &r.error {
        println!("# error: {}", crate::text::printable(e));
    }
    Ok(())
}

pub fn export_json(r: &RunDocument) -> Result<String> {
    Ok(crate::output::json::to_string(r).context("encoding the result")? + "\n")
}

/// The `run --csv` rows of run `id`.
pub fn export_csv(r: &RunDocument, id: i64) -> Result<String> {
    crate::output::csv::to_string(r, Some(id), None).context("encoding the result as CSV")
}

/// Point `point` of a stream run (the only one when None) as iperf3's `-J` document.
pub fn export_iperf3(r: &RunDocument, point: Option<usize>) -> Result<String> {
    crate::output::iperf3::to_string(r, point)
}
