//! `--csv`: a header and one row per point, printed as each point completes, and after a
//! point with several streams one row per stream. Written by the
//! `csv` crate (RFC 4180): a field with a comma, a quote or a line end is quoted, so a reason
//! or a host name keeps its text.

use super::columns::{self, Row};
use super::Output;
use crate::model::{PointResult, RunDocument};
use crate::plan::sink::Sink;

/// Rows, each written and flushed as its point completes.
pub struct CsvSink {
    out: Output,
    /// Set when the run is saved: its id in the results database.
    run_id: Option<i64>,
}

impl CsvSink {
    pub fn new(out: Output) -> CsvSink {
        CsvSink { out, run_id: None }
    }
}

impl Default for CsvSink {
    fn default() -> Self {
        CsvSink::new(Output::stdout())
    }
}

/// The header and the rows of every point of `report`, as one CSV text (`export --csv`);
/// `run_id` is its id in the results database.
pub fn to_string(report: &RunDocument, run_id: Option<i64>) -> anyhow::Result<String> {
    let mut text = encode(header())?;
    for p in &report.points {
        text.extend(rows(report, run_id, p)?);
    }
    Ok(String::from_utf8(text)?)
}

/// The column names, each with its unit.
pub fn header() -> Vec<&'static str> {
    columns::CSV.iter().map(|c| c.name).collect()
}

/// A point's row and, when it has several streams, each stream's, as CSV text.
fn rows(report: &RunDocument, run_id: Option<i64>, point: &PointResult) -> anyhow::Result<Vec<u8>> {
    let mut text = Vec::new();
    for r in Row::all_of(report, run_id, point) {
        text.extend(encode(columns::CSV.iter().map(|c| (c.get)(&r).csv()))?);
    }
    Ok(text)
}

/// One record as CSV text, quoted where it needs to be.
fn encode<I, T>(fields: I) -> anyhow::Result<Vec<u8>>
where
    I: IntoIterator<Item = T>,
    T: AsRef<[u8]>,
{
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(fields)?;
    w.into_inner().map_err(|e| anyhow::anyhow!("{}", e.error()))
}

impl Sink for CsvSink {
    fn begin(&mut self, _: &RunDocument) -> anyhow::Result<()> {
        self.out.write_all(&encode(header())?)
    }
    fn point(&mut self, report: &RunDocument, p: &PointResult) -> anyhow::Result<()> {
        self.out.write_all(&rows(report, self.run_id, p)?)
    }
    fn saved_as(&mut self, id: i64) {
        self.run_id = Some(id);
    }
    fn finish(&mut self, _: &RunDocument) -> anyhow::Result<()> {
        Ok(())
    }
}
