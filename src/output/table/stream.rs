//! A stream point's rows: per stream, the i/o paths, and each direction's sum with notes.

use super::intervals::sum_interval_lines;
use super::{marked, Rows, RunColumn, TableSink};
use crate::model::socket::RcvLowat;
use crate::model::stream::LinkCounters;
use crate::model::{DirectionTotal, PointResult, RunDocument, StreamResult};
use crate::output::columns::{self, Row};
use crate::stats::Validity;
use crate::units::mbit;

impl TableSink {
    /// The stream table's columns for this transport; the point's CPU figures are on the
    /// sum rows only.
    pub(super) fn stream_columns(&self) -> Vec<RunColumn> {
        let mut cols: Vec<RunColumn> = columns::STREAM_TABLE
            .iter()
            .map(RunColumn::figure)
            .collect();
        if self.acked {
            cols.push(RunColumn::figure(&columns::STREAM_ACKED));
        }
        cols.extend(columns::STREAM_RATES.iter().map(RunColumn::figure));
        if self.unreliable {
            cols.extend(columns::STREAM_LOSS.iter().map(RunColumn::figure));
        } else {
            cols.push(RunColumn::figure(&columns::STREAM_RETRANSMITS));
        }
        cols.extend(columns::STREAM_CPU.iter().map(|column| RunColumn::Figure {
            column,
            sums_only: true,
        }));
        cols
    }

    /// A stream point's rows; nothing without a stream result.
    pub(super) fn stream_rows(&self, r: &RunDocument, p: &PointResult) -> anyhow::Result<Rows> {
        let Some(s) = &p.stream else {
            return Ok(Rows::Unmeasured);
        };
        if self.intervals {
            // The client's own intervals were printed live; the server's arrive now.
            self.server_intervals(s)?;
        }
        // A stream's cells are judged by their side, not by a latency verdict.
        let no_latency = Validity::default();
        if s.streams.len() > s.totals.len() {
            for st in &s.streams {
                let row = Row {
                    stream: Some(st),
                    ..Row::point(r, None, p)
                };
                self.row(self.cells(&row, &no_latency, false))?;
            }
        }
        self.io_line(r, s)?;
        for t in &s.totals {
            self.total_rows(r, p, s, t)?;
        }
        Ok(Rows::Measured)
    }

    /// The i/o paths the streams used, with what was asked for and not used; said only when
    /// they are not plain writes and reads.
    fn io_line(&self, r: &RunDocument, s: &StreamResult) -> anyhow::Result<()> {
        let Some(st) = s.streams.first() else {
            return Ok(());
        };
        let mut fallbacks: Vec<&str> = s
            .streams
            .iter()
            .flat_map(|x| x.sender.fallbacks.iter().chain(x.receiver.fallbacks.iter()))
            .map(String::as_str)
            .collect();
        fallbacks.dedup();
        let zc = match (st.sender.zerocopy_completed, st.sender.zerocopy_copied) {
            (Some(done), Some(copied)) => {
                format!("; zero-copy sends completed {done}, of which the kernel copied {copied}")
            }
            _ => String::new(),
        };
        let tail = match st.receiver.untimed_tail_bytes {
            0 => String::new(),
            b => format!(
                " (its last {b} B untimed: they may have arrived outside its phase, ahead of its count when its clock started or after its last arrival stamp)"
            ),
        };
        let woken = match st.receiver.rcvlowat_bytes {
            Some(b) => format!(
                " woken at {b} B queued (SO_RCVLOWAT{})",
                match r.settings.fast.rcvlowat {
                    RcvLowat::Auto => ", auto: 1 ms at the warm-up's rate, at most one read",
                    _ => "",
                }
            ),
            None => String::new(),
        };
        if st.sender.io_path != "write"
            || st.receiver.io_path != "read"
            || !woken.is_empty()
            || !fallbacks.is_empty()
        {
            self.under(&format!(
                "i/o: sender {}, receiver {}{woken}{tail}{zc}{}",
                st.sender.io_path,
                st.receiver.io_path,
                if fallbacks.is_empty() {
                    String::new()
                } else {
                    format!("; NOT used: {}", fallbacks.join("; "))
                }
            ))?;
        }
        Ok(())
    }

    /// One direction's sum row, its footnotes, and the notes under it: the sum's time span,
    /// its intervals, the senders' notes, the link's frames and the lab's goodput.
    fn total_rows(
        &self,
        r: &RunDocument,
        p: &PointResult,
        s: &StreamResult,
        t: &DirectionTotal,
    ) -> anyhow::Result<()> {
        // A stream's cells are judged by their side, not by a latency verdict.
        let no_latency = Validity::default();
        let row = Row {
            total: Some(t),
            ..Row::point(r, None, p)
        };
        self.row(self.cells(&row, &no_latency, true))?;
        let dir = if s.totals.len() > 1 {
            format!("{} ", t.direction)
        } else {
            String::new()
        };
        self.footnote(&format!("{dir}sender"), &t.sender_validity())?;
        self.footnote(&format!("{dir}receiver"), &t.receiver_validity())?;
        if let Some(line) = span_line(t) {
            self.under(&format!("{dir}{line}"))?;
        }
        if self.intervals {
            for line in sum_interval_lines(t) {
                self.said_under(&line, &line)?;
            }
        }
        let several = s.streams.len() > 1;
        for st in s.streams.iter().filter(|st| st.direction == t.direction) {
            if let Some(n) = &st.sender.note {
                let which = if several {
                    format!("stream {} ", st.index)
                } else {
                    String::new()
                };
                self.under(&format!("note: {dir}{which}sender: {n}"))?;
            }
        }
        if let Some(k) = &t.frames {
            self.under(&frames_line(k))?;
        }
        if let Some(g) = t.theoretical_goodput_bits_per_s {
            self.under(&format!(
                "link goodput allowed by the lab's rate{}: {} Mbit/s; receiver measured {}% of it",
                goodput_loss_note(r, &t.direction),
                mbit(g),
                marked(
                    format!("{:.2}", t.receiver_bits_per_s / g * 100.0),
                    &t.receiver_validity()
                )
            ))?;
        }
        Ok(())
    }
}

/// A sum over several streams on one clock: the window each side's total is over.
fn span_line(t: &DirectionTotal) -> Option<String> {
    let side = |name: &str, s: &Option<crate::model::span::TotalSpan>| {
        s.map(|s| format!("{name} over their {}", s.phrase()))
    };
    let parts: Vec<String> = [
        side("senders", &t.sender_span),
        side("receivers", &t.receiver_span),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!parts.is_empty()).then(|| {
        format!(
            "sum of {} streams on one clock: {}",
            t.streams,
            parts.join("; ")
        )
    })
}

/// " less its 2% loss per frame (...)" when the lab's direction loses frames: the goodput
/// then counts only messages whose every frame arrives (for TCP, an upper bound).
fn goodput_loss_note(r: &RunDocument, direction: &str) -> String {
    let Some(lab) = &r.lab else {
        return String::new();
    };
    let d = if direction == "client_to_server" {
        &lab.config.forward
    } else {
        &lab.config.back
    };
    if d.loss > 0.0 {
        format!(
            " less its {}% loss per frame ({})",
            d.loss * 100.0,
            if r.transport == crate::model::vocab::TransportKind::Tcp {
                "an upper bound: TCP resends what is lost and may slow down far below it"
            } else {
                "messages lost whole when any frame is"
            }
        )
    } else {
        String::new()
    }
}

/// The receivers' account of a transport's own numbered frames (raw), in one line.
fn frames_line(k: &LinkCounters) -> String {
    format!(
        "link frames (receiver, warm-up included): {} received, {} lost ({}%), {} reordered, {} duplicated, {} dropped late; {} messages incomplete",
        k.received,
        k.lost,
        pct(k.loss_ratio),
        k.reordered,
        k.duplicated,
        k.late,
        k.messages_incomplete
    )
}

/// A ratio in percent, to three decimals.
fn pct(x: f64) -> String {
    format!("{:.3}", x * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_frames_line_says_what_it_counts() {
        let k = LinkCounters {
            received: 12034,
            lost: 611,
            reordered: 3,
            late: 2,
            messages_incomplete: 590,
            ..LinkCounters::default()
        }
        .with_loss_ratio();
        assert_eq!(
            frames_line(&k),
            "link frames (receiver, warm-up included): 12034 received, 611 lost (4.832%), \
             3 reordered, 0 duplicated, 2 dropped late; 590 messages incomplete"
        );
    }
}
