//! `--json`: one document on stdout at the end, nothing else there. `--json-stream`: one JSON
//! object per line as the run goes (begin, intervals, points, end), for a consumer that
//! follows a long sweep or a long stream live.

use anyhow::Context;
use serde::Serialize;

use super::Output;
use crate::model::stream::IntervalEvent;
use crate::model::{PointResult, RunDocument};
use crate::plan::sink::{IntervalPrinter, Sink};

/// `--json`: the whole document once the run ends.
pub struct JsonSink {
    out: Output,
}

impl JsonSink {
    pub fn new(out: Output) -> JsonSink {
        JsonSink { out }
    }
}

impl Default for JsonSink {
    fn default() -> Self {
        JsonSink::new(Output::stdout())
    }
}

impl Sink for JsonSink {
    fn begin(&mut self, _: &RunDocument) -> anyhow::Result<()> {
        Ok(())
    }
    fn point(&mut self, _: &RunDocument, _: &PointResult) -> anyhow::Result<()> {
        Ok(())
    }
    fn finish(&mut self, report: &RunDocument) -> anyhow::Result<()> {
        let text = to_string(report).context("encoding the result as JSON")?;
        self.out.line(&text)
    }
}

/// `--json-stream`: newline-delimited JSON, each line one object with a "type".
pub struct JsonStreamSink {
    out: Output,
}

impl JsonStreamSink {
    pub fn new(out: Output) -> JsonStreamSink {
        JsonStreamSink { out }
    }
}

impl Default for JsonStreamSink {
    fn default() -> Self {
        JsonStreamSink::new(Output::stdout())
    }
}

/// One line of the stream.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Line<'a> {
    /// The run as far as it is known before the first point (schema, settings, both ends).
    Begin {
        schema: &'static str,
        schema_version: u32,
        run: &'a RunDocument,
    },
    Interval {
        stream: u32,
        role: crate::model::vocab::Role,
        interval: &'a crate::model::stream::Interval,
    },
    Point {
        point: &'a PointResult,
    },
    /// The whole document, as --json prints it.
    End {
        run: &'a RunDocument,
    },
}

/// Writes one line and flushes it, so a reader sees each object as it is made.
fn emit(out: &Output, line: &Line<'_>) -> anyhow::Result<()> {
    let text = serde_json::to_string(line).context("encoding a JSON line")?;
    out.line(&text)
}

impl Sink for JsonStreamSink {
    fn begin(&mut self, report: &RunDocument) -> anyhow::Result<()> {
        emit(
            &self.out,
            &Line::Begin {
                schema: "wirebench.run.stream",
                // 2 with version 2 of the run document it carries (times in nanoseconds).
                schema_version: 2,
                run: report,
            },
        )
    }
    fn point(&mut self, _: &RunDocument, point: &PointResult) -> anyhow::Result<()> {
        // The point carries its own index in the sweep.
        emit(&self.out, &Line::Point { point })
    }
    fn finish(&mut self, report: &RunDocument) -> anyhow::Result<()> {
        emit(&self.out, &Line::End { run: report })
    }
    fn wants_intervals(&self) -> bool {
        true
    }
    fn interval_printer(&self) -> IntervalPrinter {
        let out = self.out.clone();
        Box::new(move |ev: &IntervalEvent| {
            emit(
                &out,
                &Line::Interval {
                    stream: ev.stream,
                    role: ev.role,
                    interval: &ev.interval,
                },
            )
        })
    }
}

/// Pretty JSON. serde_json refuses NaN and infinities by writing null, and the model keeps
/// unknowns as null, so the document always parses.
pub fn to_string(report: &RunDocument) -> serde_json::Result<String> {
    crate::model::to_json(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Figures whose shortest decimal text is long or at the edge of f64's range: with
    /// serde_json's `float_roundtrip` they read back as the very same bits.
    #[test]
    fn awkward_floats_survive_the_document_bit_exactly() {
        let awkward = [0.1 + 0.2, 1e-300, f64::MAX / 3.0, 5e-324, 1.0 / 3.0];
        let mut r = crate::store::db::tests::report("pingpong", awkward.len(), 20_000.0);
        for (p, &x) in r.points.iter_mut().zip(&awkward) {
            let l = p.latency.as_mut().unwrap();
            l.rtt.mean_ns = x;
            l.throughput_bits_per_s = x;
            l.transactions_per_s = x;
            p.headline.values = vec![x];
        }
        for text in [to_string(&r).unwrap(), serde_json::to_string(&r).unwrap()] {
            let back: RunDocument = serde_json::from_str(&text).unwrap();
            for (p, &x) in back.points.iter().zip(&awkward) {
                let l = p.latency.as_ref().unwrap();
                for y in [
                    l.rtt.mean_ns,
                    l.throughput_bits_per_s,
                    l.transactions_per_s,
                    p.headline.values[0],
                ] {
                    assert_eq!(y.to_bits(), x.to_bits(), "{x:e} read back as {y:e}");
                }
            }
            assert_eq!(back, r);
            // The results database's reading path keeps them too.
            let stored = crate::store::db::parse_report(&text).unwrap();
            assert_eq!(stored.points, r.points);
        }
    }
}
