//! `--json`: one document on stdout at the end, nothing else there. `--json-stream`: one JSON
//! object per line as the run goes (begin, intervals, points, end), for a consumer that
//! follows a long sweep or a long stream live.

use std::io::Write;

use serde::Serialize;

use super::model::{PointResult, RunReport};
use super::{IntervalPrinter, Sink};
use crate::pattern::stream::IntervalEvent;
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

/// `--json-stream`: newline-delimited JSON, each line one object with a "type".
pub struct JsonStreamSink;

/// One line of the stream.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Line<'a> {
    /// The run as far as it is known before the first point (schema, settings, both ends).
    Begin {
        schema: &'static str,
        schema_version: u32,
        run: &'a RunReport,
    },
    Interval {
        stream: u32,
        role: crate::pattern::Role,
        interval: &'a crate::pattern::stream::Interval,
    },
    Point {
        point: &'a PointResult,
    },
    /// The whole document, as --json prints it.
    End {
        run: &'a RunReport,
    },
}

/// Writes one line and flushes it, so a reader sees each object as it is made. A failed
/// write (a closed pipe) is reported once on stderr; the run and its saving go on.
fn emit(line: &Line<'_>) {
    let text = match serde_json::to_string(line) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("wirebench: error: cannot encode a JSON line: {e}");
            return;
        }
    };
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{text}").and_then(|()| out.flush()).is_err() {
        super::stdout_closed();
    }
}

impl Sink for JsonStreamSink {
    fn begin(&mut self, report: &RunReport, _: &RunPlan) {
        emit(&Line::Begin {
            schema: "wirebench.run.stream",
            schema_version: 1,
            run: report,
        });
    }
    fn point(&mut self, _: &RunReport, point: &PointResult) {
        // The point carries its own index in the sweep.
        emit(&Line::Point { point });
    }
    fn finish(&mut self, report: &RunReport) {
        emit(&Line::End { run: report });
    }
    fn wants_intervals(&self) -> bool {
        true
    }
    fn interval_printer(&self) -> IntervalPrinter {
        Box::new(|ev: &IntervalEvent| {
            emit(&Line::Interval {
                stream: ev.stream,
                role: ev.role,
                interval: &ev.interval,
            })
        })
    }
}

/// Pretty JSON. serde_json refuses NaN and infinities by writing null, and the model keeps
/// unknowns as null, so the document always parses.
pub fn to_string(report: &RunReport) -> serde_json::Result<String> {
    serde_json::to_string_pretty(report)
}
