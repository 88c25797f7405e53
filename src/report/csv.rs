//! `--csv`: a header and one row per point, printed as each point completes. Written by the
//! `csv` crate (RFC 4180): a field with a comma, a quote or a line end is quoted, so a reason
//! or a host name keeps its text.

use super::columns::{self, Row};
use super::model::{PointResult, RunReport};
use super::{Output, Sink};
use crate::plan::RunPlan;

/// Rows, each written and flushed as its point completes.
pub struct CsvSink {
    out: Output,
}

impl CsvSink {
    pub fn new(out: Output) -> CsvSink {
        CsvSink { out }
    }
}

impl Default for CsvSink {
    fn default() -> Self {
        CsvSink::new(Output::stdout())
    }
}

/// The header and a row per point of `report`, as one CSV text (`export --csv`).
pub fn to_string(report: &RunReport) -> anyhow::Result<String> {
    let mut text = encode(header())?;
    for p in &report.points {
        text.extend(encode(row(report, p))?);
    }
    Ok(String::from_utf8(text)?)
}

/// The column names, each with its unit.
pub fn header() -> Vec<&'static str> {
    columns::CSV.iter().map(|c| c.name).collect()
}

/// A point's fields, in the header's order.
pub fn row(report: &RunReport, point: &PointResult) -> Vec<String> {
    let r = Row { report, point };
    columns::CSV.iter().map(|c| (c.get)(&r).csv()).collect()
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
    fn begin(&mut self, _: &RunReport, _: &RunPlan) -> anyhow::Result<()> {
        self.out.write_all(&encode(header())?)
    }
    fn point(&mut self, report: &RunReport, p: &PointResult) -> anyhow::Result<()> {
        self.out.write_all(&encode(row(report, p))?)
    }
    fn finish(&mut self, _: &RunReport) -> anyhow::Result<()> {
        Ok(())
    }
}
