//! Interval lines: each stream's as it goes, the server's after the point, and their sums.

use super::{marked, table_line, TableSink};
use crate::model::stream::IntervalEvent;
use crate::model::vocab::Role;
use crate::model::{DirectionTotal, StreamResult};
use crate::output::Output;
use crate::units::{format_us, mbit};

impl TableSink {
    /// The server's intervals of each stream, which arrive with the point's result.
    pub(super) fn server_intervals(&self, s: &StreamResult) -> anyhow::Result<()> {
        self.line("  server side:")?;
        for st in &s.streams {
            let (stats, role) = if st.direction == "server_to_client" {
                (&st.sender, Role::Sender)
            } else {
                (&st.receiver, Role::Receiver)
            };
            for iv in &stats.intervals {
                print_interval(
                    &self.out,
                    &IntervalEvent {
                        stream: st.index,
                        role,
                        interval: *iv,
                    },
                )?;
            }
        }
        Ok(())
    }
}

/// The receivers' sum over -P streams interval by interval on one clock, in the per-stream
/// interval lines' columns (iperf3's `[SUM]`); a sum the guard found impossible is marked,
/// with its reason.
pub(super) fn sum_interval_lines(t: &DirectionTotal) -> Vec<String> {
    t.receiver_intervals
        .iter()
        .map(|iv| {
            let reason = if iv.validity.is_invalid() {
                format!("  ! not valid: {}", iv.validity.reason())
            } else {
                String::new()
            };
            format!(
                "  [SUM] {:>8} {:7.2}-{:<7.2} s {:>14} B {:>10} Mbit/s{reason}",
                "received",
                iv.start_ns as f64 / 1e9,
                iv.end_ns as f64 / 1e9,
                iv.bytes,
                marked(mbit(iv.bits_per_s), &iv.validity),
            )
        })
        .collect()
}

/// One interval line; senders on TCP add the kernel's view of the connection.
pub(super) fn print_interval(out: &Output, ev: &IntervalEvent) -> anyhow::Result<()> {
    let iv = &ev.interval;
    let acked = iv
        .acked_bits_per_s()
        .map(|r| format!("  acked {} Mbit/s", mbit(r)))
        .unwrap_or_default();
    let tcp = iv
        .tcp_info
        .map(|t| {
            format!(
                "{acked}  rtt {} rttvar {} cwnd {} seg retr {} unacked {} B delivery {} Mbit/s{}",
                format_us(f64::from(t.rtt_us) * 1e3),
                format_us(f64::from(t.rttvar_us) * 1e3),
                t.snd_cwnd,
                iv.retransmits.unwrap_or(0),
                t.unacked_bytes,
                mbit(t.delivery_rate_bits_per_s as f64),
                if t.pacing_rate_bits_per_s > 0 {
                    format!(" pacing {} Mbit/s", mbit(t.pacing_rate_bits_per_s as f64))
                } else {
                    String::new()
                }
            )
        })
        .unwrap_or_default();
    table_line(
        out,
        &format!(
            "  [{:>3}] {:>8} {:7.2}-{:<7.2} s {:>14} B {:>10} Mbit/s{}",
            ev.stream,
            match ev.role {
                Role::Sender => "sent",
                _ => "received",
            },
            iv.start_ns as f64 / 1e9,
            iv.end_ns as f64 / 1e9,
            iv.bytes,
            mbit(iv.bits_per_s),
            if matches!(ev.role, Role::Sender) {
                tcp
            } else {
                String::new()
            }
        ),
    )
}
