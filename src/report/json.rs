//! `--json`: one document on stdout at the end, nothing else there.

use super::model::{PointResult, RunReport};
use super::Sink;
use crate::plan::RunPlan;

pub struct JsonSink;

impl Sink for JsonSink {
    fn begin(&mut self, _: &RunReport, _: &RunPlan) {}
    fn point(&mut self, _: &RunReport, _: &PointResult) {}
    fn finish(&mut self, report: &RunReport) {
        match to_string(report) {
            Ok(s) => println!("{s}"),
            Err(e) => eprintln!("wirebench: error: cannot encode the result as JSON: {e}"),
        }
    }
}

/// Pretty JSON. serde_json refuses NaN and infinities by writing null, and the model keeps
/// unknowns as null, so the document always parses.
pub fn to_string(report: &RunReport) -> serde_json::Result<String> {
    serde_json::to_string_pretty(report)
}
