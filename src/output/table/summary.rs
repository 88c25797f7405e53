//! The run's summary at the end: anomalies, each sweep group's metrics, and the run's notes.

use super::TableSink;
use crate::model::RunDocument;
use crate::units::{format_us, mbit, us};

impl TableSink {
    /// A line per point flagged as an anomaly along the sweep.
    pub(super) fn anomalies(&self, r: &RunDocument) -> anyhow::Result<()> {
        for a in &r.anomalies {
            let Some(p) = r.points.get(a.point) else {
                continue;
            };
            let k = &p.key;
            let against = |rel: Option<f64>, which: &str| {
                rel.map(|r| format!("{:+.0}% against the {which}", r * 100.0))
            };
            let sides: Vec<String> = [
                against(a.vs_previous, "previous point"),
                against(a.vs_next, "next"),
            ]
            .into_iter()
            .flatten()
            .collect();
            let peak = a.vs_previous.or(a.vs_next).is_some_and(|r| r > 0.0);
            // In the units of the tables above it: a latency in us, a rate in Mbit/s.
            let value = match p.headline.unit.as_str() {
                "ns" => format_us(a.value),
                "bit/s" => crate::units::format_mbit_s(a.value),
                unit => format!("{} {unit}", four_digits(a.value)),
            };
            self.line(&format!(
                "# anomaly along {}: the point at size {} B, sndbuf {}, rcvbuf {}{} ({} {}) is {}{}: a {} worth a second look (--repeat 5)",
                a.axis,
                k.size,
                k.sndbuf,
                k.rcvbuf,
                k.cc.map(|c| format!(", cc {c}")).unwrap_or_default(),
                p.headline.name,
                value,
                sides.join(" and "),
                if sides.len() == 1 { " (an end of the sweep)" } else { "" },
                if peak { "peak" } else { "dip" }
            ))?;
        }
        Ok(())
    }

    /// Each sweep group's t0, r_max, n_1/2 and fit, with what was left out of them.
    pub(super) fn sweep_metrics(&self, r: &RunDocument) -> anyhow::Result<()> {
        for g in &r.sweep_metrics {
            let m = &g.metrics;
            if self.swept.sndbuf
                || self.swept.rcvbuf
                || self.swept.server_sndbuf
                || self.swept.server_rcvbuf
                || self.swept.cc
            {
                self.line(&format!(
                    "# sweep group: sndbuf {} rcvbuf {} server sndbuf {} server rcvbuf {} (0 = autotuning){}",
                    g.sndbuf,
                    g.rcvbuf,
                    g.server_sndbuf,
                    g.server_rcvbuf,
                    g.cc.map(|c| format!(", congestion control {c}")).unwrap_or_default()
                ))?;
            }
            if !m.left_out.is_empty() {
                self.line(&format!(
                    "# left out of t0, r_max, n_1/2 and the fit, their figures not being valid: {}",
                    m.left_out
                        .iter()
                        .map(|l| format!("{} B ({})", l.size, l.reason))
                        .collect::<Vec<_>>()
                        .join(", ")
                ))?;
            }
            self.line(&format!(
                "# t0 = RTT/2 of the smallest message ({} B) = {}{}",
                m.t0_size,
                format_us(m.t0_ns),
                m.t0_ci_ns
                    .map(|c| format!(" ±{}", us(c)))
                    .unwrap_or_default()
            ))?;
            self.line(&format!(
                "# r_max = {} Mbit/s at {} B{}",
                mbit(m.r_max_bits_per_s),
                m.r_max_size,
                m.r_max_ci_bits_per_s
                    .map(|(lo, hi)| format!(" [{} .. {}]", mbit(lo), mbit(hi)))
                    .unwrap_or_default()
            ))?;
            if let Some(note) = &m.r_max_note {
                self.line(&format!("#   {note}"))?;
            }
            match m.n_half_bytes {
                Some(n) => self.line(&format!(
                    "# n_1/2 = {n:.0} B (size reaching r_max/2, linear interpolation){}",
                    m.n_half_note
                        .as_deref()
                        .map(|n| format!("; {n}"))
                        .unwrap_or_default()
                ))?,
                None => self.line("# n_1/2: not reached in the measured sizes")?,
            }
            match m.valid_fit() {
                Some(f) => self.line(&format!(
                    "# fit t(n) = t0 + n/r_inf over {} sizes: t0 = {}, r_inf = {} Mbit/s, n_1/2 = r_inf*t0 = {:.0} B, R^2 = {:.5}",
                    f.points,
                    format_us(f.t0_ns),
                    mbit(f.r_inf_bits_per_s),
                    f.n_half_bytes,
                    f.r_squared
                ))?,
                None => self.line(&format!(
                    "# fit t(n) = t0 + n/r_inf over {} sizes: no valid fit: {}",
                    m.points,
                    m.fit_reason()
                ))?,
            }
        }
        Ok(())
    }

    /// The data connections' setup time, the last point's warm-up transaction, and whether
    /// the run is incomplete.
    pub(super) fn run_notes(&self, r: &RunDocument) -> anyhow::Result<()> {
        let setups: Vec<u64> = r
            .points
            .iter()
            .flat_map(|p| p.socket.client.iter().filter_map(|e| e.setup_ns))
            .collect();
        if let (Some(min), false) = (setups.iter().min(), setups.is_empty()) {
            let mean = setups.iter().sum::<u64>() as f64 / setups.len() as f64;
            self.line(&format!(
                "# data connection setup, client side (connect, handshake, test cookie; not in the figures above): mean {}, min {} over {} connection{}",
                format_us(mean),
                format_us(*min as f64),
                setups.len(),
                if setups.len() == 1 { "" } else { "s" }
            ))?;
        }
        if let Some(x) = r.points.last().and_then(|p| p.rpc.as_ref()) {
            self.line(&rpc_note(x))?;
        }
        if let Some(p) = r.points.last() {
            if let Some(first) = p.latency.as_ref().and_then(|l| l.first_ns) {
                self.line(&format!(
                    "# first (warm-up) transaction of the last point: {} round trip, not in the statistics",
                    format_us(first as f64)
                ))?;
            }
        }
        if !r.complete {
            self.line(&format!("# incomplete: {}", r.points_of_planned()))?;
        }
        Ok(())
    }
}

/// The last point's serialisation (grpc): each codec step's mean per message on each end,
/// its p50 and p99 (one connection's; with several, the largest p99 of any, since two
/// histograms' percentiles do not merge into one), the messages it counts, and its share of
/// the mean round trip.
fn rpc_note(x: &crate::model::rpc::RpcResult) -> String {
    use crate::model::rpc::{merged, CodecTime, Serialisation};
    let step = |side: &[Serialisation], f: fn(&Serialisation) -> Option<CodecTime>| {
        let times: Vec<CodecTime> = side.iter().filter_map(f).collect();
        let tail = match times.as_slice() {
            [one] => format!(
                ", p50 {}, p99 {}",
                format_us(one.p50_ns as f64),
                format_us(one.p99_ns as f64)
            ),
            [] => String::new(),
            many => format!(
                ", p99 at most {} over {} connections",
                format_us(many.iter().map(|t| t.p99_ns).max().unwrap_or(0) as f64),
                many.len()
            ),
        };
        match merged(side, f) {
            Some((n, mean)) => format!("{}{tail} (n={n})", format_us(mean)),
            None => "-".into(),
        }
    };
    let server = if x.server.is_empty() {
        "server: not measured (no wirebench server)".to_owned()
    } else {
        format!(
            "server decode {}, encode {}",
            step(&x.server, |s| s.decode),
            step(&x.server, |s| s.encode)
        )
    };
    let share = match x.share_of_rtt {
        Some(s) => format!("; {:.1}% of the mean round trip", s * 100.0),
        None => String::new(),
    };
    format!(
        "# serialisation ({}), mean per message, last point, warm-up included: client encode {}, decode {}; {server}{share}",
        x.encoding,
        step(&x.client, |s| s.encode),
        step(&x.client, |s| s.decode),
    )
}

/// At least four significant digits, no more decimals than that needs ("14576", "6.500").
fn four_digits(v: f64) -> String {
    let magnitude = if v.abs() > 0.0 {
        v.abs().log10().floor() as i32
    } else {
        0
    };
    format!("{v:.*}", (3 - magnitude).max(0) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::rpc::{CodecTime, RpcResult, Serialisation};
    use crate::model::vocab::Encoding;

    fn side(encode: u64, decode: u64) -> Serialisation {
        let t = |ns: u64| {
            Some(CodecTime {
                count: 10,
                mean_ns: ns as f64,
                p50_ns: ns,
                p99_ns: 2 * ns,
            })
        };
        Serialisation {
            encoding: Encoding::Doubles,
            encode: t(encode),
            decode: t(decode),
        }
    }

    /// One connection: its mean, p50 and p99 per step; several: the largest p99, said so.
    #[test]
    fn the_serialisation_note_gives_percentiles_it_can_stand_behind() {
        let one = RpcResult::new(
            vec![side(1000, 2000)],
            vec![side(3000, 4000)],
            Some(100_000.0),
        )
        .unwrap();
        let note = rpc_note(&one);
        assert!(
            note.contains("client encode 1.00 us, p50 1.00 us, p99 2.00 us (n=10)"),
            "{note}"
        );
        assert!(note.contains("10.0% of the mean round trip"), "{note}");
        let two = RpcResult::new(
            vec![side(1000, 2000), side(3000, 2000)],
            vec![side(3000, 4000), side(3000, 4000)],
            Some(100_000.0),
        )
        .unwrap();
        let note = rpc_note(&two);
        assert!(
            note.contains("client encode 2.00 us, p99 at most 6.00 us over 2 connections (n=20)"),
            "{note}"
        );
    }
}
