//! A ping-pong or request/response point's row, or the line that says none completed.

use super::{Rows, RunColumn, TableSink};
use crate::model::vocab::PatternKind;
use crate::model::{PointResult, RunDocument};
use crate::output::columns::{self, Row};

impl TableSink {
    /// The ping-pong and request/response tables' columns, and how many come before the
    /// swept buffers' columns.
    pub(super) fn latency_columns(&self) -> (Vec<RunColumn>, usize) {
        let (mut cols, before): (Vec<RunColumn>, usize) = match self.pattern {
            Some(PatternKind::Rr) if self.open_loop => (
                columns::OPEN_LOOP.iter().map(RunColumn::figure).collect(),
                2,
            ),
            Some(PatternKind::Pingpong) => {
                (columns::PINGPONG.iter().map(RunColumn::figure).collect(), 1)
            }
            Some(PatternKind::Rr | PatternKind::Crr) => {
                (columns::RR.iter().map(RunColumn::figure).collect(), 2)
            }
            _ => (Vec::new(), 0),
        };
        if self.think {
            cols.push(RunColumn::figure(&columns::THINK_TPS));
        }
        if self.pattern == Some(PatternKind::Crr) {
            cols.push(RunColumn::figure(&columns::SETUP));
        } else if self.unreliable {
            cols.push(RunColumn::figure(&columns::LOST));
        }
        (cols, before)
    }

    /// A ping-pong or request/response point's row and its footnotes; without a completed
    /// exchange, its size and swept settings and "no completed WHAT" after them.
    pub(super) fn exchange_row(
        &self,
        r: &RunDocument,
        p: &PointResult,
        what: &str,
    ) -> anyhow::Result<Rows> {
        let row = Row::point(r, None, p);
        let Some(l) = &p.latency else {
            // Only what identifies the point: its sizes and swept settings.
            let cells = self
                .layout
                .iter()
                .map(|c| match c {
                    RunColumn::Figure { column, .. }
                        if !matches!(
                            column.column.name,
                            "size_bytes" | "request_size_bytes" | "response_size_bytes"
                        ) =>
                    {
                        String::new()
                    }
                    c => c.cell(&row, &Default::default(), true),
                })
                .collect();
            self.row_then(cells, Some(&format!("no completed {what}")))?;
            return Ok(Rows::Unmeasured);
        };
        self.row(self.cells(&row, &l.validity, true))?;
        self.footnote("", &l.validity)?;
        self.footnote("", &l.percentile_validity("p99"))?;
        if let Some(o) = &l.open_loop {
            self.footnote("", &l.percentile_validity("p99.9"))?;
            if let Some(why) = &o.overload {
                self.under(&format!(
                    "! offered {:.0}/s, achieved {:.0}/s: {why}",
                    o.offered_per_s, o.achieved_per_s
                ))?;
            }
        }
        Ok(Rows::Measured)
    }
}
