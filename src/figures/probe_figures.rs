//! The figures of the kernel's TCP state beside a segment trace (`wirebench trace plot`
//! when the pcap has its tcp_probe sidecar): congestion window and slow-start threshold,
//! smoothed RTT, the windows, and snd_una/snd_nxt against the same time axis as the
//! segment figures (seconds since the capture's first segment), and the congestion window
//! in bytes beside the bytes outstanding.

use super::plots::{Axis, Chart, Figure, LegendAt, Line, Scale, Ticks};
use crate::model::trace::{FlowSummary, ProbeRole};
use crate::trace::probe::{self, ProbeSample, INFINITE_SSTHRESH};
use crate::trace::Flow;

/// Which tcp_probe series a figure draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeFigure {
    /// snd_cwnd and ssthresh of the senders' sockets, segments.
    Cwnd,
    /// srtt of the senders' sockets, microseconds.
    Srtt,
    /// snd_wnd of the senders' sockets and rcv_wnd of the receivers', bytes.
    Windows,
    /// snd_una and snd_nxt of the senders' sockets, bytes since their first sample.
    SndUna,
}

impl ProbeFigure {
    pub const ALL: [ProbeFigure; 4] = [
        ProbeFigure::Cwnd,
        ProbeFigure::Srtt,
        ProbeFigure::Windows,
        ProbeFigure::SndUna,
    ];

    /// The figure's file name part.
    pub fn name(self) -> &'static str {
        match self {
            ProbeFigure::Cwnd => "cwnd",
            ProbeFigure::Srtt => "srtt",
            ProbeFigure::Windows => "probe-windows",
            ProbeFigure::SndUna => "snd-una",
        }
    }

    fn title(self) -> &'static str {
        match self {
            ProbeFigure::Cwnd => {
                "Congestion window and slow-start threshold (tcp_probe, sender's socket)"
            }
            ProbeFigure::Srtt => "Smoothed RTT (tcp_probe srtt, sender's socket)",
            ProbeFigure::Windows => {
                "Windows (tcp_probe: snd_wnd at the sender, rcv_wnd at the receiver)"
            }
            ProbeFigure::SndUna => {
                "Sequence space (tcp_probe snd_una and snd_nxt, sender's socket)"
            }
        }
    }

    fn y(self) -> (&'static str, Ticks) {
        match self {
            ProbeFigure::Cwnd => ("segments", Ticks::Number),
            ProbeFigure::Srtt => ("microseconds", Ticks::Number),
            ProbeFigure::Windows | ProbeFigure::SndUna => ("bytes", Ticks::Bytes),
        }
    }
}

/// One socket's samples with what the join with the capture gave it.
struct Socket<'a> {
    samples: Vec<ProbeSample>,
    /// Index of its connection among the flows (the colour the segment figures give it).
    flow: Option<usize>,
    role: Option<ProbeRole>,
    label: String,
    summary: Option<&'a FlowSummary>,
}

fn sockets<'a>(flows: &'a [Flow], samples: &[ProbeSample]) -> Vec<Socket<'a>> {
    let summaries: Vec<FlowSummary> = flows.iter().map(|f| f.summary.clone()).collect();
    probe::by_socket(samples)
        .into_iter()
        .filter_map(|v| {
            let first = *v.first()?;
            let joined = probe::join(&summaries, first.sport, first.dport);
            let flow = joined.and_then(|(f, _)| summaries.iter().position(|s| s == f));
            Some(Socket {
                flow,
                role: joined.map(|(_, r)| r),
                label: match joined {
                    Some((f, _)) => format!("{} -> {}", f.sender, f.receiver),
                    None => format!(":{} -> :{}", first.sport, first.dport),
                },
                summary: flow.map(|i| &flows[i].summary),
                samples: v,
            })
        })
        .collect()
}

/// The senders' sockets; every socket when none could be matched to a captured connection.
fn senders<'s, 'a>(all: &'s [Socket<'a>]) -> Vec<&'s Socket<'a>> {
    let s: Vec<&Socket> = all
        .iter()
        .filter(|k| k.role == Some(ProbeRole::Sender))
        .collect();
    if s.is_empty() && all.iter().all(|k| k.role.is_none()) {
        all.iter().collect()
    } else {
        s
    }
}

/// Points (seconds since `origin_ns`, value) of the samples within [from, to] (ns since
/// the origin) for which `value` gives one.
fn points(
    samples: &[ProbeSample],
    origin_ns: u64,
    from: u64,
    to: u64,
    value: impl Fn(&ProbeSample) -> Option<f64>,
) -> Vec<(f64, f64)> {
    samples
        .iter()
        .filter(|s| s.t_ns >= origin_ns && (from..=to).contains(&(s.t_ns - origin_ns)))
        .filter_map(|s| Some(((s.t_ns - origin_ns) as f64 / 1e9, value(s)?)))
        .collect()
}

fn line(label: String, colour: usize, dashed: bool, points: Vec<(f64, f64)>) -> Option<Line> {
    if points.is_empty() {
        return None;
    }
    Some(Line {
        label,
        colour,
        dashed,
        markers: points.len() <= 60,
        points,
    })
}

/// The figure `kind` of the tcp_probe `samples` beside the capture's `flows`, whose first
/// segment was at `origin_ns` (CLOCK_REALTIME, the samples' clock), between `from_ns` and
/// `to_ns` after it. None when nothing falls within.
pub fn figure(
    flows: &[Flow],
    samples: &[ProbeSample],
    origin_ns: u64,
    kind: ProbeFigure,
    from_ns: Option<u64>,
    to_ns: Option<u64>,
) -> Option<Figure> {
    let (from, to) = (from_ns.unwrap_or(0), to_ns.unwrap_or(u64::MAX));
    let all = sockets(flows, samples);
    let mut lines = Vec::new();
    let mut drawn = 0usize;
    for (i, k) in senders(&all).into_iter().enumerate() {
        let colour = k.flow.unwrap_or(flows.len() + i);
        let pts =
            |f: &dyn Fn(&ProbeSample) -> Option<f64>| points(&k.samples, origin_ns, from, to, f);
        let before = lines.len();
        match kind {
            ProbeFigure::Cwnd => {
                lines.extend(line(
                    format!("{} snd_cwnd", k.label),
                    colour,
                    false,
                    pts(&|s| Some(f64::from(s.snd_cwnd))),
                ));
                let finite = |s: &ProbeSample| {
                    (s.ssthresh < INFINITE_SSTHRESH).then_some(f64::from(s.ssthresh))
                };
                lines.extend(line(
                    format!("{} ssthresh", k.label),
                    colour,
                    true,
                    pts(&finite),
                ));
            }
            ProbeFigure::Srtt => {
                let srtt = |s: &ProbeSample| (s.srtt_us > 0).then_some(f64::from(s.srtt_us));
                lines.extend(line(format!("{} srtt", k.label), colour, false, pts(&srtt)));
            }
            ProbeFigure::Windows => {
                lines.extend(line(
                    format!("{} snd_wnd (sender)", k.label),
                    colour,
                    false,
                    pts(&|s| Some(f64::from(s.snd_wnd))),
                ));
            }
            ProbeFigure::SndUna => {
                let base = k.samples.first().map_or(0, |s| s.snd_una);
                let rel = |v: u32| f64::from(v.wrapping_sub(base));
                lines.extend(line(
                    format!("{} snd_una", k.label),
                    colour,
                    false,
                    pts(&|s| Some(rel(s.snd_una))),
                ));
                lines.extend(line(
                    format!("{} snd_nxt", k.label),
                    colour,
                    true,
                    pts(&|s| Some(rel(s.snd_nxt))),
                ));
            }
        }
        if lines.len() > before {
            drawn += pts(&|_| Some(0.0)).len();
        }
    }
    if kind == ProbeFigure::Windows {
        for (i, k) in all.iter().enumerate() {
            if k.role != Some(ProbeRole::Receiver) {
                continue;
            }
            let colour = k.flow.unwrap_or(flows.len() + i);
            let pts = points(&k.samples, origin_ns, from, to, |s| {
                Some(f64::from(s.rcv_wnd))
            });
            let n = pts.len();
            if let Some(l) = line(format!("{} rcv_wnd (receiver)", k.label), colour, true, pts) {
                drawn += n;
                lines.push(l);
            }
        }
    }
    if lines.is_empty() {
        return None;
    }
    let (ylabel, ticks) = kind.y();
    Some(Figure::Chart(Chart {
        title: format!("{}, {drawn} samples", kind.title()),
        x: Axis {
            label: "time since the capture's first segment (s)".into(),
            scale: Scale::Linear,
            ticks: Ticks::Number,
            from_zero: false,
        },
        y: Axis {
            label: ylabel.into(),
            scale: Scale::Linear,
            ticks,
            from_zero: true,
        },
        bands: vec![],
        lines,
        hlines: vec![],
        legend: LegendAt::UpperRight,
        error_bars: vec![],
        invalid: vec![],
        regressions: vec![],
        style_keys: vec![],
        sequential_colours: None,
    }))
}

/// Adds to the bytes-outstanding figure each sender's congestion window in bytes (snd_cwnd
/// times its connection's MSS as the capture gives it), dashed in the connection's colour:
/// what the window allowed beside what was in flight.
pub fn add_cwnd_bytes(
    outstanding: &mut Figure,
    flows: &[Flow],
    samples: &[ProbeSample],
    origin_ns: u64,
    from_ns: Option<u64>,
    to_ns: Option<u64>,
) {
    let Figure::Chart(chart) = outstanding else {
        return;
    };
    let (from, to) = (from_ns.unwrap_or(0), to_ns.unwrap_or(u64::MAX));
    for k in sockets(flows, samples) {
        let (Some(ProbeRole::Sender), Some(f), Some(i)) = (k.role, k.summary, k.flow) else {
            continue;
        };
        if f.mss == 0 {
            continue;
        }
        let mss = f64::from(f.mss);
        let pts = points(&k.samples, origin_ns, from, to, |s| {
            Some(f64::from(s.snd_cwnd) * mss)
        });
        if let Some(l) = line(
            format!("{} snd_cwnd x MSS {} (tcp_probe)", k.label, f.mss),
            i,
            true,
            pts,
        ) {
            chart.lines.push(l);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::FlowSeries;

    fn flow() -> Flow {
        let summary: FlowSummary = serde_json::from_value(serde_json::json!({
            "sender": "127.0.0.1:41000", "receiver": "127.0.0.1:5201", "duration_ns": 0,
            "data_segments": 0, "data_bytes": 0, "retransmitted_segments": 0,
            "repeated_bytes": 0, "unique_data_bytes": 0, "acks": 0, "segments_per_ack": null,
            "bytes_per_ack": null, "mss": 1000, "mss_from_syn": true, "sub_mss_segments": 0,
            "sub_mss_share": null, "window_shift": null, "delayed_acks": 0,
            "ack_baseline_ns": null, "median_gap_ns": null, "stops": 0, "stopped_ns": 0,
            "stop_threshold_ns": null
        }))
        .unwrap();
        Flow {
            summary,
            series: FlowSeries {
                segment_size: vec![],
                outstanding: vec![(0, 5000)],
                window: vec![],
            },
        }
    }

    fn sample(t_ns: u64, sport: u16, dport: u16, cwnd: u32, ssthresh: u32) -> ProbeSample {
        ProbeSample {
            t_ns,
            cpu: 0,
            cookie: u64::from(sport),
            sport,
            dport,
            data_len: 0,
            snd_nxt: 3000,
            snd_una: 1000,
            snd_cwnd: cwnd,
            ssthresh,
            snd_wnd: 1 << 20,
            rcv_wnd: 1 << 16,
            srtt_us: 40,
        }
    }

    const ORIGIN: u64 = 1_700_000_000_000_000_000;

    fn samples() -> Vec<ProbeSample> {
        vec![
            sample(ORIGIN + 500_000_000, 41000, 5201, 10, INFINITE_SSTHRESH),
            sample(ORIGIN + 1_500_000_000, 41000, 5201, 20, 15),
            sample(ORIGIN + 1_000_000_000, 5201, 41000, 10, INFINITE_SSTHRESH),
            // Before the capture's first segment: not drawn.
            sample(ORIGIN - 1, 41000, 5201, 99, 99),
        ]
    }

    /// The sender's cwnd in seconds since the capture's first segment, its finite
    /// ssthresh dashed; the receiver's socket is left out; the window selects.
    #[test]
    fn the_cwnd_figure_draws_the_senders_socket_on_the_captures_time_axis() {
        let f = [flow()];
        let Some(Figure::Chart(c)) = figure(&f, &samples(), ORIGIN, ProbeFigure::Cwnd, None, None)
        else {
            panic!("a chart");
        };
        assert_eq!(c.lines.len(), 2);
        assert_eq!(c.lines[0].points, vec![(0.5, 10.0), (1.5, 20.0)]);
        assert_eq!(
            c.lines[0].label,
            "127.0.0.1:41000 -> 127.0.0.1:5201 snd_cwnd"
        );
        assert_eq!(c.lines[1].points, vec![(1.5, 15.0)]);
        assert!(c.lines[1].dashed);
        assert!(c.title.ends_with(", 2 samples"), "{}", c.title);
        assert_eq!(c.y.label, "segments");
        let Some(Figure::Chart(w)) = figure(
            &f,
            &samples(),
            ORIGIN,
            ProbeFigure::Cwnd,
            Some(1_000_000_000),
            None,
        ) else {
            panic!("a chart");
        };
        assert_eq!(w.lines[0].points, vec![(1.5, 20.0)]);
        assert!(figure(
            &f,
            &samples(),
            ORIGIN,
            ProbeFigure::Srtt,
            Some(2_000_000_000),
            None
        )
        .is_none());
        assert!(super::super::plots::render_svg(&Figure::Chart(c)).is_ok());
    }

    #[test]
    fn the_windows_figure_has_the_senders_snd_wnd_and_the_receivers_rcv_wnd() {
        let f = [flow()];
        let Some(Figure::Chart(c)) =
            figure(&f, &samples(), ORIGIN, ProbeFigure::Windows, None, None)
        else {
            panic!("a chart");
        };
        assert_eq!(c.lines.len(), 2);
        assert_eq!(c.lines[1].points, vec![(1.0, 65536.0)]);
        assert!(c.lines[1].label.ends_with("rcv_wnd (receiver)"));
        let Some(Figure::Chart(u)) =
            figure(&f, &samples(), ORIGIN, ProbeFigure::SndUna, None, None)
        else {
            panic!("a chart");
        };
        assert_eq!(u.lines[1].points, vec![(0.5, 2000.0), (1.5, 2000.0)]);
    }

    #[test]
    fn the_outstanding_figure_gains_cwnd_times_mss() {
        let f = [flow()];
        let mut fig = crate::figures::trace_figures::figure(
            &f,
            crate::figures::trace_figures::TraceFigure::Outstanding,
            None,
            None,
        )
        .unwrap();
        add_cwnd_bytes(&mut fig, &f, &samples(), ORIGIN, None, None);
        let Figure::Chart(c) = fig else {
            panic!("a chart");
        };
        assert_eq!(c.lines.len(), 2);
        assert_eq!(c.lines[1].points, vec![(0.5, 10_000.0), (1.5, 20_000.0)]);
        assert!(c.lines[1].dashed);
    }
}
