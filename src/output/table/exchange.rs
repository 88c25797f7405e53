//! A ping-pong or request/response point's row, or the line that says none completed.

use super::{columns_line, Rows, TableSink};
use crate::model::vocab::PatternKind;
use crate::model::{PointResult, RunDocument};
use crate::output::columns::{self, Row, TableColumn};

impl TableSink {
    /// The ping-pong and request/response tables' columns, and how many come before the
    /// swept buffers' columns.
    fn latency_columns(&self) -> (Vec<&'static TableColumn>, usize) {
        let (mut cols, before): (Vec<&'static TableColumn>, usize) = match self.pattern {
            Some(PatternKind::Pingpong) => (columns::PINGPONG.iter().collect(), 1),
            Some(PatternKind::Rr | PatternKind::Crr) => (columns::RR.iter().collect(), 2),
            _ => (Vec::new(), 0),
        };
        if self.think {
            cols.push(&columns::THINK_TPS);
        }
        if self.pattern == Some(PatternKind::Crr) {
            cols.push(&columns::SETUP);
        } else if self.unreliable {
            cols.push(&columns::LOST);
        }
        (cols, before)
    }

    /// One line of the ping-pong or request/response table (the header or a point's row),
    /// each cell's text from `cell`, `bufs` after the columns that come before the swept
    /// buffers.
    pub(super) fn latency_line(&self, bufs: &str, cell: impl Fn(&TableColumn) -> String) -> String {
        let (cols, before) = self.latency_columns();
        columns_line(&cols, before, bufs, cell)
    }

    /// A ping-pong or request/response point's row and its footnotes; without a completed
    /// exchange, a line that says "no completed WHAT" at its `size`.
    pub(super) fn exchange_row(
        &self,
        r: &RunDocument,
        p: &PointResult,
        bufs: &str,
        size: u64,
        what: &str,
    ) -> anyhow::Result<Rows> {
        let Some(l) = &p.latency else {
            self.line(&format!("{size:>9}{bufs} no completed {what}"))?;
            return Ok(Rows::Unmeasured);
        };
        let row = Row::point(r, None, p);
        self.line(&self.latency_line(bufs, |c| c.text(&row, &l.validity)))?;
        self.footnote("", &l.validity)?;
        self.footnote("", &l.percentile_validity("p99"))?;
        Ok(Rows::Measured)
    }
}
