//! What a study found, point by point: each run's figures, their mean and interval over the
//! repetitions, which points stand out from their neighbours, and what the searches found.
//! Pure functions over stored run documents, so `study show` and the study's own end agree.

use serde::Serialize;

use super::apply::{value_label, value_number};
use super::file::StudyFile;
use super::store::{Kind, Status, StudyRun};
use crate::model::RunDocument;
use crate::pattern::PatternKind;
use crate::stats::ci::MeanCi;

/// One figure of one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunFigure {
    pub name: &'static str,
    /// "sender" or "receiver" where the figure belongs to one side.
    pub side: Option<&'static str>,
    pub unit: &'static str,
    pub value: f64,
    pub valid: bool,
    /// Why not, when it is not.
    pub invalid_reason: Option<String>,
}

impl RunFigure {
    fn new(
        name: &'static str,
        side: Option<&'static str>,
        unit: &'static str,
        value: f64,
        (valid, invalid_reason): (bool, Option<String>),
    ) -> RunFigure {
        RunFigure {
            name,
            side,
            unit,
            value,
            valid,
            invalid_reason,
        }
    }
}

/// The figures a study compares, from a run of one point: the headline first.
pub fn run_figures(r: &RunDocument) -> Vec<RunFigure> {
    let Some(p) = r.points.first() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    match r.pattern {
        PatternKind::Stream => {
            if let Some(s) = &p.stream {
                type Total = crate::model::DirectionTotal;
                let sum = |f: fn(&Total) -> f64| s.totals.iter().map(f).sum::<f64>();
                // Valid when every direction's figure is; else the first direction's reason.
                let judged = |valid: fn(&Total) -> Option<bool>,
                              reason: fn(&Total) -> Option<String>| {
                    (
                        s.totals.iter().all(|t| valid(t) != Some(false)),
                        s.totals.iter().find_map(reason),
                    )
                };
                let receiver = judged(|t| t.receiver_valid, |t| t.receiver_invalid_reason.clone());
                let sender = judged(|t| t.sender_valid, |t| t.sender_invalid_reason.clone());
                let (rx, tx) = (Some("receiver"), Some("sender"));
                out.push(RunFigure::new(
                    "throughput",
                    rx,
                    "bit/s",
                    sum(|t| t.receiver_bits_per_s),
                    receiver,
                ));
                out.push(RunFigure::new(
                    "throughput",
                    tx,
                    "bit/s",
                    sum(|t| t.sender_bits_per_s),
                    sender.clone(),
                ));
                // A TCP sender's rate counts the bytes handed to the kernel, some still in its
                // socket buffer when its phase ends (108 Mbit/s "sent" on a 100 Mbit/s link in
                // a 2 s run); what the peer acknowledged over the same phase is the sender's
                // figure to hold against the link and the receiver.
                let acked: Option<f64> = s.totals.iter().map(|t| t.acked_bits_per_s).sum();
                if let Some(acked) = acked {
                    out.push(RunFigure::new(
                        "acked throughput",
                        tx,
                        "bit/s",
                        acked,
                        sender,
                    ));
                }
                if let Some(share) = s.loss_share() {
                    out.push(RunFigure::new("loss", None, "share", share, (true, None)));
                }
            }
        }
        PatternKind::Pingpong | PatternKind::Rr | PatternKind::Crr => {
            let Some(l) = &p.latency else {
                return out;
            };
            let v = || {
                (
                    l.validity.valid != Some(false),
                    l.validity.invalid_reason.clone(),
                )
            };
            // With --path-timing, each stage's mean: a study over sizes then gives the stages
            // against message size, as the send and receive path times of [Moldeklev et al.
            // n.d.] (the means add up to the mean round trip; medians would not).
            let stages = p.path_timing.iter().flat_map(|t| &t.stages);
            let stage_figures: Vec<RunFigure> = stages
                .map(|s| RunFigure::new(s.name.label(), None, "ns", s.mean_ns, v()))
                .collect();
            if r.pattern == PatternKind::Pingpong {
                if let Some(ns) = l.one_way_mean_ns {
                    out.push(RunFigure::new("one-way latency", None, "ns", ns, v()));
                }
                out.push(RunFigure::new(
                    "throughput",
                    None,
                    "bit/s",
                    l.throughput_bits_per_s,
                    v(),
                ));
                out.extend(stage_figures);
                return out;
            }
            out.push(RunFigure::new(
                "transactions",
                None,
                "1/s",
                l.transactions_per_s,
                v(),
            ));
            if let Some(t) = &l.think {
                // The chunk server of [Petri and Eickermann 2007]: its rate "corrected for
                // rendering time".
                let rate = t.corrected_transactions_per_s;
                let bits = (p.request_size + p.response_size) as f64 * 8.0;
                out.push(RunFigure::new(
                    "transactions without think time",
                    None,
                    "1/s",
                    rate,
                    v(),
                ));
                out.push(RunFigure::new(
                    "throughput without think time",
                    None,
                    "bit/s",
                    rate * bits,
                    v(),
                ));
            }
            out.push(RunFigure::new(
                "round-trip time",
                None,
                "ns",
                l.rtt.mean_ns,
                v(),
            ));
            out.extend(stage_figures);
        }
    }
    out
}

/// A figure over a point's runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PointFigure {
    pub name: &'static str,
    pub side: Option<&'static str>,
    pub unit: &'static str,
    /// Over the valid runs only; None when no run's figure is valid.
    pub over_runs: Option<MeanCi>,
    /// Runs whose figure is not a measurement (left out of the mean), with the first reason.
    pub invalid_runs: u32,
    pub invalid_reason: Option<String>,
}

/// One point of the study, as measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PointSummary {
    pub index: usize,
    pub coords: Vec<usize>,
    /// "axis=label" for each axis.
    pub labels: Vec<String>,
    pub run_ids: Vec<i64>,
    pub rerun_ids: Vec<i64>,
    pub failed: u32,
    pub figures: Vec<PointFigure>,
    pub search: Option<SearchSummary>,
    /// Counter deltas summed over the point's runs: "client.Udp.RcvbufErrors",
    /// "server.TcpExt.TCPTimeouts", "lab.forward.queue_dropped_segments" (only those that
    /// changed).
    pub counters: Vec<(String, i64)>,
    /// Where the point's lost messages (or TCP's dropped segments) were lost, summed over its
    /// runs; None when nothing was lost or retransmitted, or nothing was counted.
    pub loss: Option<String>,
}

/// Every counter delta of the runs, summed, by side.
fn counters(reports: &[RunDocument]) -> Vec<(String, i64)> {
    let mut sum: std::collections::BTreeMap<String, i64> = Default::default();
    for r in reports {
        let Some(c) = r.points.first().and_then(|p| p.counters.as_ref()) else {
            continue;
        };
        for (side, host) in [("client", &c.client), ("server", &c.server)] {
            let Some(h) = host else { continue };
            for (k, v) in &h.kernel {
                *sum.entry(format!("{side}.{k}")).or_default() += v;
            }
        }
        if let Some(lab) = &c.lab {
            for (dir, d) in [("forward", &lab.forward), ("back", &lab.back)] {
                for (k, v) in [
                    ("queue_dropped_segments", d.queue_dropped_segments),
                    ("random_loss_udp", d.random_loss_udp),
                    ("random_loss_other", d.random_loss_other),
                ] {
                    *sum.entry(format!("lab.{dir}.{k}")).or_default() += v as i64;
                }
            }
        }
    }
    sum.into_iter().filter(|(_, v)| *v != 0).collect()
}

/// "link 31, receiver socket 300 of 331 lost; TCP: 12 segments retransmitted, 1 RTO".
fn loss_where(reports: &[RunDocument]) -> Option<String> {
    use crate::instruments::Place;
    let places = [
        Place::SenderSocket,
        Place::Queue,
        Place::Link,
        Place::ReceiverSocket,
    ];
    let mut at = [0u64; 4];
    let (mut lost, mut unexplained, mut retrans, mut rto, mut any) = (0, 0, 0, 0, false);
    for r in reports {
        for a in r
            .points
            .first()
            .map(|p| &p.loss_attribution[..])
            .unwrap_or_default()
        {
            any = true;
            for (k, p) in places.iter().enumerate() {
                at[k] += a.at(*p);
            }
            lost += a.lost.unwrap_or(0);
            unexplained += a.unexplained.unwrap_or(0);
            if let Some(t) = &a.tcp {
                retrans += t.retransmitted_segments;
                rto += t.rto_timeouts;
            }
        }
    }
    if !any || (lost == 0 && retrans == 0 && at.iter().all(|&n| n == 0)) {
        return None;
    }
    let mut parts: Vec<String> = places
        .iter()
        .zip(at)
        .filter(|(_, n)| *n > 0)
        .map(|(p, n)| format!("{} {n}", p.name()))
        .collect();
    if unexplained > 0 {
        parts.push(format!("unexplained {unexplained}"));
    }
    let mut text = if lost > 0 {
        format!("{lost} lost: {}", parts.join(", "))
    } else {
        parts.join(", ")
    };
    if retrans > 0 {
        if !text.is_empty() {
            text.push_str("; ");
        }
        text.push_str(&format!(
            "TCP retransmitted {retrans} segments ({rto} RTO timeouts)"
        ));
    }
    Some(text)
}

/// What a point's search found, over its repetitions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchSummary {
    /// The highest rate that met the target, per repetition (None: not even the lowest).
    pub best_bits_per_s: Vec<Option<f64>>,
    pub over_runs: Option<MeanCi>,
}

/// Every point's summary, from the study's rows and the documents of their runs (`load`).
pub fn points(
    file: &StudyFile,
    coords: &[Vec<usize>],
    rows: &[StudyRun],
    confidence: f64,
    mut load: impl FnMut(i64) -> Option<RunDocument>,
) -> Vec<PointSummary> {
    coords
        .iter()
        .enumerate()
        .map(|(index, c)| {
            let mine: Vec<&StudyRun> = rows.iter().filter(|r| r.point == index).collect();
            let ids = |k: Kind| -> Vec<i64> {
                mine.iter()
                    .filter(|r| r.kind == k && r.status == Status::Done)
                    .filter_map(|r| r.run_id)
                    .collect()
            };
            let (run_ids, rerun_ids) = (ids(Kind::Measure), ids(Kind::Rerun));
            let searches: Vec<&&StudyRun> =
                mine.iter().filter(|r| r.kind == Kind::Search).collect();
            let measured_ids: Vec<i64> = if searches.is_empty() {
                run_ids.iter().chain(&rerun_ids).copied().collect()
            } else {
                searches.iter().filter_map(|r| r.run_id).collect()
            };
            let reports: Vec<RunDocument> =
                measured_ids.iter().filter_map(|&id| load(id)).collect();
            let docs: Vec<Vec<RunFigure>> = reports.iter().map(run_figures).collect();
            let search = (!searches.is_empty()).then(|| {
                let best: Vec<Option<f64>> = searches.iter().map(|r| r.rate_bits_per_s).collect();
                let found: Vec<f64> = best.iter().flatten().copied().collect();
                SearchSummary {
                    over_runs: MeanCi::from_samples(&found, confidence),
                    best_bits_per_s: best,
                }
            });
            PointSummary {
                index,
                coords: c.clone(),
                labels: file
                    .axes
                    .iter()
                    .zip(c)
                    .map(|(a, &k)| format!("{}={}", a.name, value_label(a, k)))
                    .collect(),
                run_ids,
                rerun_ids,
                failed: mine
                    .iter()
                    .filter(|r| r.status == Status::Failed && r.kind != Kind::Probe)
                    .count() as u32,
                figures: combine(&docs, confidence),
                search,
                counters: counters(&reports),
                loss: loss_where(&reports),
            }
        })
        .collect()
}

/// Per figure (name and side, in the first run's order): the mean over the runs whose
/// figure is valid.
fn combine(runs: &[Vec<RunFigure>], confidence: f64) -> Vec<PointFigure> {
    let Some(first) = runs.first() else {
        return Vec::new();
    };
    first
        .iter()
        .map(|f| {
            let same: Vec<&RunFigure> = runs
                .iter()
                .filter_map(|r| r.iter().find(|g| g.name == f.name && g.side == f.side))
                .collect();
            let valid: Vec<f64> = same.iter().filter(|g| g.valid).map(|g| g.value).collect();
            let invalid: Vec<&&RunFigure> = same.iter().filter(|g| !g.valid).collect();
            PointFigure {
                name: f.name,
                side: f.side,
                unit: f.unit,
                over_runs: MeanCi::from_samples(&valid, confidence),
                invalid_runs: invalid.len() as u32,
                invalid_reason: invalid.first().and_then(|g| g.invalid_reason.clone()),
            }
        })
        .collect()
}

/// A point that stands out from both neighbours along an axis.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StudyAnomaly {
    pub point: usize,
    pub axis: String,
    /// "window=4K, write_size=2048".
    pub at: String,
    pub figure: String,
    /// Against the nearest valid point before its band; NaN (null in JSON) for the first
    /// point of the axis, which is judged on its one side.
    pub vs_previous: f64,
    /// Against the nearest valid point after its band; NaN for the last point.
    pub vs_next: f64,
    /// Set when the point has no valid figure at all between two neighbours that have one
    /// (a collapse: [Müller et al. 1997]'s near 1 KB, a stalled connection): why its runs are
    /// not valid.
    /// `vs_previous` and `vs_next` are then NaN.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_valid: Option<String>,
}

impl StudyAnomaly {
    pub fn describe(&self) -> String {
        if let Some(why) = &self.not_valid {
            return format!(
                "no valid {} at {} between valid points along {}: {why}",
                self.figure, self.at, self.axis
            );
        }
        let side = if self.vs_previous.is_nan() {
            self.vs_next
        } else {
            self.vs_previous
        };
        let kind = if side > 0.0 { "peak" } else { "dip" };
        let against = |r: f64, which: &str| {
            (!r.is_nan()).then(|| format!("{:+.0}% against the {which} value", r * 100.0))
        };
        let sides: Vec<String> = [
            against(self.vs_previous, "previous"),
            against(self.vs_next, "next"),
        ]
        .into_iter()
        .flatten()
        .collect();
        format!(
            "{kind} at {} along {}: {} {}",
            self.at,
            self.axis,
            self.figure,
            sides.join(", ")
        )
    }
}

/// The headline figure's outliers along every axis whose values are all numbers, the other
/// axes held fixed (see [`crate::stats::anomaly::outliers`]).
pub fn anomalies(file: &StudyFile, points: &[PointSummary], threshold: f64) -> Vec<StudyAnomaly> {
    let headline = |p: &PointSummary| -> Option<f64> {
        p.figures
            .first()
            .and_then(|f| f.over_runs.as_ref())
            .map(|m| m.mean)
    };
    let figure_name = points
        .iter()
        .find_map(|p| p.figures.first())
        .map(|f| match f.side {
            Some(s) => format!("{} {}", s, f.name),
            None => f.name.to_string(),
        })
        .unwrap_or_default();
    let mut out = Vec::new();
    for (a, axis) in file.axes.iter().enumerate() {
        let numeric = (0..axis.values.len()).all(|k| value_number(axis, k).is_some());
        if !numeric || axis.values.len() < 3 {
            continue;
        }
        // The lines along this axis: points equal in every other coordinate.
        let mut lines: Vec<Vec<&PointSummary>> = Vec::new();
        for p in points {
            let key = |q: &PointSummary| {
                q.coords
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != a)
                    .map(|(_, c)| *c)
                    .collect::<Vec<_>>()
            };
            match lines.iter_mut().find(|l| key(l[0]) == key(p)) {
                Some(l) => l.push(p),
                None => lines.push(vec![p]),
            }
        }
        for mut line in lines {
            line.sort_by(|x, y| {
                let (vx, vy) = (
                    value_number(axis, x.coords[a]),
                    value_number(axis, y.coords[a]),
                );
                vx.partial_cmp(&vy).unwrap_or(std::cmp::Ordering::Equal)
            });
            let values: Vec<Option<f64>> = line.iter().map(|p| headline(p)).collect();
            // A band of points without a valid figure, with valid points on both sides.
            let not_valid = |k: usize| {
                values[k].is_none() && line[k].figures.first().is_some_and(|f| f.invalid_runs > 0)
            };
            let mut k = 1;
            while k + 1 < line.len() {
                if !(not_valid(k) && values[k - 1].is_some()) {
                    k += 1;
                    continue;
                }
                let mut end = k;
                while end + 1 < line.len() && not_valid(end + 1) {
                    end += 1;
                }
                if end + 1 < line.len() && values[end + 1].is_some() {
                    for p in &line[k..=end] {
                        out.push(StudyAnomaly {
                            point: p.index,
                            axis: axis.name.clone(),
                            at: p.labels.join(", "),
                            figure: figure_name.clone(),
                            vs_previous: f64::NAN,
                            vs_next: f64::NAN,
                            not_valid: p.figures.first().and_then(|f| f.invalid_reason.clone()),
                        });
                    }
                }
                k = end + 1;
            }
            for o in crate::stats::anomaly::outliers(&values, threshold) {
                let p = line[o.index];
                out.push(StudyAnomaly {
                    point: p.index,
                    axis: axis.name.clone(),
                    at: p.labels.join(", "),
                    figure: figure_name.clone(),
                    vs_previous: o.vs_previous.unwrap_or(f64::NAN),
                    vs_next: o.vs_next.unwrap_or(f64::NAN),
                    not_valid: None,
                });
            }
        }
    }
    out
}

/// A figure in its usual unit for people.
pub fn format_value(value: f64, unit: &str) -> String {
    match unit {
        "bit/s" => crate::units::format_mbit_s(value),
        "ns" => crate::units::format_us(value),
        "1/s" if value.abs() < 100.0 => format!("{value:.3}/s"),
        "1/s" => format!("{value:.0}/s"),
        "share" => format!("{:.3}%", value * 100.0),
        _ => format!("{value} {unit}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figure(v: f64) -> PointFigure {
        PointFigure {
            name: "throughput",
            side: Some("receiver"),
            unit: "bit/s",
            over_runs: MeanCi::from_samples(&[v], 0.95),
            invalid_runs: 0,
            invalid_reason: None,
        }
    }

    #[test]
    fn a_peak_is_found_along_its_axis_and_not_along_the_other() {
        let f = StudyFile::parse(
            "name = \"t\"\n[[axis]]\nname = \"window\"\nvalues = [1, 2, 3, 4]\n[[axis]]\nname = \"write_size\"\nvalues = [10, 20]\n",
        )
        .unwrap();
        // Throughput by window for write_size 10: 1, 2, 9, 4 (a peak at window 3); write
        // size 20: smooth.
        let grid = [[1.0, 1.0], [2.0, 2.0], [9.0, 3.0], [4.0, 4.0]];
        let mut points = Vec::new();
        for (w, row) in grid.iter().enumerate() {
            for (s, &value) in row.iter().enumerate() {
                points.push(PointSummary {
                    index: points.len(),
                    coords: vec![w, s],
                    labels: vec![
                        format!("window={}", w + 1),
                        format!("write_size={}", (s + 1) * 10),
                    ],
                    run_ids: vec![],
                    rerun_ids: vec![],
                    failed: 0,
                    figures: vec![figure(value)],
                    search: None,
                    counters: vec![],
                    loss: None,
                });
            }
        }
        let a = anomalies(&f, &points, 0.5);
        assert_eq!(a.len(), 1, "{a:?}");
        assert_eq!(a[0].point, 4);
        assert_eq!(a[0].axis, "window");
        assert_eq!(a[0].at, "window=3, write_size=10");
        assert!((a[0].vs_previous - 3.5).abs() < 1e-12);
        // The same line with window 2 not valid (a stalled connection): flagged as such.
        let mut stalled = points.clone();
        stalled[2].figures[0].over_runs = None;
        stalled[2].figures[0].invalid_runs = 3;
        stalled[2].figures[0].invalid_reason = Some("below the floor of 10 reads".into());
        let a = anomalies(&f, &stalled, 0.5);
        let b: Vec<_> = a.iter().filter(|a| a.not_valid.is_some()).collect();
        assert_eq!(b.len(), 1, "{a:?}");
        assert_eq!(b[0].point, 2);
        assert_eq!(
            b[0].describe(),
            "no valid receiver throughput at window=2, write_size=10 between valid points along window: below the floor of 10 reads"
        );
        // A band of two (windows 2 and 3) between valid neighbours: both flagged.
        stalled[4].figures[0].over_runs = None;
        stalled[4].figures[0].invalid_runs = 1;
        stalled[4].figures[0].invalid_reason = Some("below the floor of 10 reads".into());
        let a = anomalies(&f, &stalled, 0.5);
        let b: Vec<usize> = a
            .iter()
            .filter(|a| a.not_valid.is_some())
            .map(|a| a.point)
            .collect();
        assert_eq!(b, vec![2, 4], "{a:?}");
        let a = anomalies(&f, &points, 0.5);
        assert!(a[0]
            .describe()
            .starts_with("peak at window=3, write_size=10 along window"));
    }

    #[test]
    fn a_tcp_stream_shows_what_its_sender_had_acknowledged_beside_what_it_wrote() {
        use crate::model::{DirectionTotal, StreamResult};
        let stream = |acked: Option<f64>| {
            let mut r = crate::store::db::tests::report("stream", 1, 1.0);
            r.points[0].stream = Some(StreamResult {
                streams: Vec::new(),
                totals: vec![DirectionTotal {
                    direction: "client_to_server".into(),
                    streams: 1,
                    sender_bits_per_s: 108e6,
                    acked_bits_per_s: acked,
                    receiver_bits_per_s: 95.6e6,
                    ..DirectionTotal::default()
                }],
            });
            run_figures(&r)
        };
        let names = |f: &[RunFigure]| -> Vec<String> {
            f.iter()
                .map(|x| format!("{} {}", x.side.unwrap_or("-"), x.name))
                .collect()
        };
        let tcp = stream(Some(95.5e6));
        assert_eq!(
            names(&tcp),
            [
                "receiver throughput",
                "sender throughput",
                "sender acked throughput"
            ]
        );
        assert_eq!(tcp[2].value, 95.5e6);
        assert_eq!(tcp[1].value, 108e6);
        // Without TCP_INFO (UDP, or an older result) there is nothing acknowledged to show.
        assert_eq!(
            names(&stream(None)),
            ["receiver throughput", "sender throughput"]
        );
    }

    #[test]
    fn a_ping_pong_with_path_timing_shows_each_stage_mean_after_its_headline() {
        use crate::model::path::{PathClock, PathTiming, Stage, StageName};
        let mut r = crate::store::db::tests::report("pingpong", 1, 20_000.0);
        let stage = |name, mean_ns| Stage {
            name,
            merged: Vec::new(),
            samples: 10,
            min_ns: 1,
            p50_ns: 2,
            p99_ns: 3,
            mean_ns,
        };
        r.points[0].path_timing = Some(PathTiming {
            messages: 10,
            incomplete: 0,
            clock: PathClock::Shared,
            stages: vec![
                stage(StageName::ClientSendToQueue, 1500.0),
                stage(StageName::WireOut, 8000.0),
            ],
            rtt_min_ns: 1,
            rtt_p50_ns: 2,
            rtt_p99_ns: 3,
            rtt_mean_ns: 20_000.0,
            residual_mean_ns: 0.0,
            residual_max_abs_ns: 0,
            client_driver_to_ack: None,
            validity: crate::stats::Validity::default(),
            wire_both: None,
            cost: None,
            notes: Vec::new(),
        });
        let f = run_figures(&r);
        let names: Vec<&str> = f.iter().map(|x| x.name).collect();
        assert_eq!(
            names,
            [
                "one-way latency",
                "throughput",
                "client send→queue",
                "wire out"
            ]
        );
        assert_eq!((f[3].unit, f[3].value), ("ns", 8000.0));
    }

    #[test]
    fn invalid_runs_stay_out_of_the_mean() {
        let run = |v: f64, valid: bool| RunFigure {
            name: "throughput",
            side: Some("receiver"),
            unit: "bit/s",
            value: v,
            valid,
            invalid_reason: (!valid).then(|| "too short".to_string()),
        };
        let c = combine(
            &[
                vec![run(10.0, true)],
                vec![run(1e12, false)],
                vec![run(20.0, true)],
            ],
            0.95,
        );
        assert_eq!(c[0].over_runs.as_ref().unwrap().mean, 15.0);
        assert_eq!(c[0].over_runs.as_ref().unwrap().n, 2);
        assert_eq!(c[0].invalid_runs, 1);
        assert_eq!(c[0].invalid_reason.as_deref(), Some("too short"));
    }
}
