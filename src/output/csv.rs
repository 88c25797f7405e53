//! `--csv`: a header and one row per point, printed as each point completes, and after a
//! point with several streams one row per stream. Written by the
//! `csv` crate (RFC 4180): a field with a comma, a quote or a line end is quoted, so a reason
//! or a host name keeps its text.

use super::columns::{self, Column, Row};
use super::Output;
use crate::model::{PointResult, RunDocument};
use crate::plan::sink::Sink;

/// Rows, each written and flushed as its point completes.
pub struct CsvSink {
    out: Output,
    /// Set when the run is saved: its id in the results database.
    run_id: Option<i64>,
    /// The columns written, in order.
    columns: Vec<&'static Column>,
}

impl CsvSink {
    pub fn new(out: Output) -> CsvSink {
        CsvSink {
            out,
            run_id: None,
            columns: columns::CSV.iter().collect(),
        }
    }

    /// Only these columns, in this order (`--columns`); None: all of them. An unknown name
    /// is an error.
    pub fn with_columns(mut self, names: Option<&[String]>) -> anyhow::Result<CsvSink> {
        self.columns = chosen(names)?;
        Ok(self)
    }
}

/// The columns `names` picks, in its order (every column when None).
fn chosen(names: Option<&[String]>) -> anyhow::Result<Vec<&'static Column>> {
    let Some(names) = names else {
        return Ok(columns::CSV.iter().collect());
    };
    names
        .iter()
        .map(|n| {
            columns::known(n).map_err(|e| anyhow::anyhow!("--columns: {e}"))?;
            columns::CSV
                .iter()
                .find(|c| c.name == n.trim())
                .ok_or_else(|| anyhow::anyhow!("--columns: unknown column '{n}'"))
        })
        .collect()
}

impl Default for CsvSink {
    fn default() -> Self {
        CsvSink::new(Output::stdout())
    }
}

/// The header and the rows of every point of `report`, as one CSV text (`export --csv`);
/// `run_id` is its id in the results database, `names` the columns (`--columns`; None: all).
pub fn to_string(
    report: &RunDocument,
    run_id: Option<i64>,
    names: Option<&[String]>,
) -> anyhow::Result<String> {
    let cols = chosen(names)?;
    let mut text = encode(header_of(&cols))?;
    for p in &report.points {
        text.extend(rows(&cols, report, run_id, p)?);
    }
    Ok(String::from_utf8(text)?)
}

/// The column names, each with its unit.
pub fn header() -> Vec<&'static str> {
    columns::CSV.iter().map(|c| c.name).collect()
}

fn header_of(cols: &[&Column]) -> Vec<&'static str> {
    cols.iter().map(|c| c.name).collect()
}

/// A point's row and, when it has several streams, each stream's, as CSV text.
fn rows(
    cols: &[&Column],
    report: &RunDocument,
    run_id: Option<i64>,
    point: &PointResult,
) -> anyhow::Result<Vec<u8>> {
    let mut text = Vec::new();
    for r in Row::all_of(report, run_id, point) {
        text.extend(encode(cols.iter().map(|c| (c.get)(&r).csv()))?);
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
        self.out.write_all(&encode(header_of(&self.columns))?)
    }
    fn point(&mut self, report: &RunDocument, p: &PointResult) -> anyhow::Result<()> {
        self.out
            .write_all(&rows(&self.columns, report, self.run_id, p)?)
    }
    fn saved_as(&mut self, id: i64) {
        self.run_id = Some(id);
    }
    fn finish(&mut self, _: &RunDocument) -> anyhow::Result<()> {
        Ok(())
    }
}
