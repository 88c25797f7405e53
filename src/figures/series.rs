//! Turns saved results into figures: which values go on which axis, with which label and
//! unit. Drawing is [`super::plots`]' job.
//!
//! The figures of one call describe runs of one pattern: a latency and a throughput are not
//! put on the same axis.

use super::plots::{
    fmt_bytes_param, Axis, Band, Chart, Figure, HLine, HeatCell, Heatmap, LegendAt, Line, Scale,
    Ticks,
};
use crate::model::vocab::CcName;
use crate::model::PointKey;
use crate::model::{PointResult, RunDocument};

/// A run with the name it has in legends.
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    pub id: i64,
    pub report: &'a RunDocument,
}

impl Run<'_> {
    /// How legends and titles name the run: "#12", or "#12 (nodelay)" with its `--label`.
    pub fn name(&self) -> String {
        match self
            .report
            .label
            .as_deref()
            .filter(|l| !l.trim().is_empty())
        {
            Some(l) => format!("#{} ({})", self.id, crate::text::printable(l.trim())),
            None => format!("#{}", self.id),
        }
    }
}

/// A parameter a run can sweep, and so a possible x axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Param {
    Size,
    Sndbuf,
    Rcvbuf,
    ServerSndbuf,
    ServerRcvbuf,
}

const PARAMS: [Param; 5] = [
    Param::Size,
    Param::Sndbuf,
    Param::Rcvbuf,
    Param::ServerSndbuf,
    Param::ServerRcvbuf,
];

impl Param {
    pub fn of(self, k: &PointKey) -> u64 {
        match self {
            Param::Size => k.size,
            Param::Sndbuf => k.sndbuf,
            Param::Rcvbuf => k.rcvbuf,
            Param::ServerSndbuf => k.server_sndbuf,
            Param::ServerRcvbuf => k.server_rcvbuf,
        }
    }

    fn swept(self, r: &RunDocument) -> bool {
        let s = &r.swept;
        match self {
            Param::Size => s.size,
            Param::Sndbuf => s.sndbuf,
            Param::Rcvbuf => s.rcvbuf,
            Param::ServerSndbuf => s.server_sndbuf,
            Param::ServerRcvbuf => s.server_rcvbuf,
        }
    }

    /// Short name for legends and titles.
    fn name(self, pattern: &str) -> &'static str {
        match self {
            Param::Size => match pattern {
                "stream" => "write size",
                "rr" | "crr" => "request size",
                _ => "message size",
            },
            Param::Sndbuf => "send buffer",
            Param::Rcvbuf => "receive buffer",
            Param::ServerSndbuf => "server send buffer",
            Param::ServerRcvbuf => "server receive buffer",
        }
    }

    /// Axis label with its unit.
    fn axis_label(self, pattern: &str) -> String {
        match self {
            Param::Size => format!("{} (bytes)", self.name(pattern)),
            _ => format!("{} requested, SO_*BUF (bytes)", self.name(pattern)),
        }
    }
}

/// The parameter figures are drawn against: the message size when any run sweeps it, else
/// the first swept buffer (throughput against window size), else the size.
pub fn x_param(runs: &[Run]) -> Param {
    PARAMS
        .into_iter()
        .find(|p| runs.iter().any(|r| p.swept(r.report)))
        .unwrap_or(Param::Size)
}

/// Log scale when the values span more than `ratio`; all must be positive.
fn scale_for(values: impl Iterator<Item = f64>, ratio: f64) -> Scale {
    let vs: Vec<f64> = values.filter(|v| v.is_finite()).collect();
    let lo = vs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = vs.iter().copied().fold(0.0, f64::max);
    if lo > 0.0 && hi / lo > ratio {
        Scale::Log
    } else {
        Scale::Linear
    }
}

/// A point's values of some swept parameters, and its algorithm in a congestion-control
/// sweep.
type OtherValues = (Vec<u64>, Option<CcName>);

/// The points of a run split by the parameters other than `x`: one curve each.
struct Group<'a> {
    /// Empty when the run has a single group.
    label: String,
    points: Vec<&'a PointResult>,
}

fn groups<'a>(r: &'a RunDocument, x: Param) -> Vec<Group<'a>> {
    let others: Vec<Param> = PARAMS
        .into_iter()
        .filter(|p| *p != x && p.swept(r))
        .collect();
    // A congestion-control sweep's algorithm tells curves apart too (it has no order to be an
    // x axis).
    let mut out: Vec<(OtherValues, Group)> = Vec::new();
    for p in &r.points {
        let key = (
            others.iter().map(|o| o.of(&p.key)).collect::<Vec<u64>>(),
            p.key.cc,
        );
        match out.iter_mut().find(|(k, _)| *k == key) {
            Some((_, g)) => g.points.push(p),
            None => {
                let label = others
                    .iter()
                    .zip(&key.0)
                    .map(|(o, v)| format!("{} {}", o.name(r.pattern.name()), fmt_bytes_param(*v)))
                    .chain(p.key.cc.map(|c| format!("cc {c}")))
                    .collect::<Vec<_>>()
                    .join(", ");
                out.push((
                    key,
                    Group {
                        label,
                        points: vec![p],
                    },
                ))
            }
        }
    }
    let mut groups: Vec<Group> = out.into_iter().map(|(_, g)| g).collect();
    for g in &mut groups {
        g.points.sort_by_key(|p| x.of(&p.key));
    }
    groups
}

/// A curve's legend: the run (when several are overlaid), its group and what it shows.
fn label(runs: &[Run], run: &Run, group: &str, what: &str) -> String {
    let mut parts = Vec::new();
    if runs.len() > 1 {
        parts.push(run.name());
    }
    if !group.is_empty() {
        parts.push(group.to_owned());
    }
    if !what.is_empty() {
        parts.push(what.to_owned());
    }
    parts.join(" ")
}

/// A curve of a line chart: its legend, whether dashed, and the y value of a point.
type Side<'f> = (&'f str, bool, &'f dyn Fn(&PointResult) -> Option<f64>);

fn pattern_of<'a>(runs: &[Run<'a>]) -> &'a str {
    runs.first().map_or("", |r| r.report.pattern.name())
}

/// One curve per run, group and side: (x, y) for every point that has a value. A point of a
/// buffer sweep at 0 (autotuning) has no place on the axis and becomes a reference line.
fn curves(runs: &[Run], x: Param, sides: &[Side]) -> (Vec<Line>, Vec<HLine>) {
    let mut lines = Vec::new();
    let mut hlines = Vec::new();
    let mut colour = 0;
    for run in runs {
        for g in groups(run.report, x) {
            for (what, dashed, value) in sides {
                let mut points = Vec::new();
                for p in &g.points {
                    let Some(y) = value(p) else { continue };
                    let xv = x.of(&p.key);
                    if xv == 0 && x != Param::Size {
                        // One reference line per curve pair: the receiver's (solid) side.
                        if *dashed {
                            continue;
                        }
                        hlines.push(HLine {
                            label: label(runs, run, &g.label, &format!("{what}, autotuned buffer")),
                            colour,
                            y,
                        });
                    } else {
                        points.push((xv as f64, y));
                    }
                }
                if !points.is_empty() {
                    lines.push(Line {
                        label: label(runs, run, &g.label, what),
                        colour,
                        dashed: *dashed,
                        markers: true,
                        points,
                    });
                }
            }
            colour += 1;
        }
    }
    (lines, hlines)
}

fn x_axis(runs: &[Run], x: Param, lines: &[Line]) -> Axis {
    Axis {
        label: x.axis_label(pattern_of(runs)),
        // Byte sweeps are mostly geometric: a log axis from a factor of 4 on.
        scale: scale_for(lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)), 3.5),
        ticks: Ticks::Bytes,
        from_zero: false,
    }
}

const MBIT_AXIS: &str = "throughput (Mbit/s, 10^6 bit/s)";

/// Throughput against message size (or the swept buffer): sender and receiver for streams,
/// 2n/RTT for ping-pong, request plus response payload for rr and crr.
pub fn throughput(runs: &[Run]) -> Option<Figure> {
    let pattern = pattern_of(runs);
    let x = x_param(runs);
    let (lines, hlines) = if pattern == "stream" {
        let dirs = ["client_to_server", "server_to_client"];
        let both = runs.iter().any(|r| {
            r.report.points.iter().any(|p| {
                p.stream.as_ref().is_some_and(|s| {
                    dirs.iter()
                        .all(|d| s.totals.iter().any(|t| t.direction == *d))
                })
            })
        });
        let total = |dir: &'static str, sender: bool| {
            move |p: &PointResult| -> Option<f64> {
                let t = p
                    .stream
                    .as_ref()?
                    .totals
                    .iter()
                    .find(|t| t.direction == dir)?;
                // A rate that is not a measurement is not drawn (the points table marks it).
                let verdict = if sender {
                    t.sender_validity()
                } else {
                    t.receiver_validity()
                };
                if verdict.is_invalid() {
                    return None;
                }
                Some(
                    if sender {
                        t.sender_bits_per_s
                    } else {
                        t.receiver_bits_per_s
                    } / 1e6,
                )
            }
        };
        let (c2s_s, c2s_r, s2c_s, s2c_r) = (
            total(dirs[0], true),
            total(dirs[0], false),
            total(dirs[1], true),
            total(dirs[1], false),
        );
        let mut sides: Vec<Side> = Vec::new();
        if both {
            sides.push(("client to server, sender", true, &c2s_s));
            sides.push(("client to server, receiver", false, &c2s_r));
            sides.push(("server to client, sender", true, &s2c_s));
            sides.push(("server to client, receiver", false, &s2c_r));
            curves(runs, x, &sides)
        } else {
            // One direction per run: whichever it has.
            let sender = |p: &PointResult| c2s_s(p).or_else(|| s2c_s(p));
            let receiver = |p: &PointResult| c2s_r(p).or_else(|| s2c_r(p));
            sides.push(("sender", true, &sender));
            sides.push(("receiver", false, &receiver));
            curves(runs, x, &sides)
        }
    } else {
        let what = if pattern == "pingpong" {
            "2n/RTT"
        } else {
            "request + response payload"
        };
        let value = |p: &PointResult| Some(valid_latency(p)?.throughput_bits_per_s / 1e6);
        curves(runs, x, &[(what, false, &value)])
    };
    if lines.is_empty() && hlines.is_empty() {
        return None;
    }
    Some(Figure::Chart(Chart {
        title: format!("Throughput against {}", x.name(pattern)),
        x: x_axis(runs, x, &lines),
        y: Axis {
            label: MBIT_AXIS.into(),
            scale: Scale::Linear,
            ticks: Ticks::Number,
            from_zero: true,
        },
        bands: Vec::new(),
        lines,
        hlines,
        legend: LegendAt::UpperLeft,
        error_bars: Vec::new(),
        invalid: Vec::new(),
        style_keys: Vec::new(),
        sequential_colours: None,
    }))
}

/// Latency in microseconds as the table shows it: one-way (RTT/2) for ping-pong, the whole
/// transaction for rr and crr.
fn latency_factor(pattern: &str) -> f64 {
    if pattern == "pingpong" {
        0.5e-3
    } else {
        1e-3
    }
}

fn latency_axis_label(pattern: &str) -> &'static str {
    if pattern == "pingpong" {
        "one-way latency, RTT/2 (µs)"
    } else {
        "transaction round-trip time (µs)"
    }
}

/// A point's latency figures, unless they are not valid (too few samples): figures leave
/// those out, and the report's points table marks them.
fn valid_latency(p: &PointResult) -> Option<&crate::model::LatencyResult> {
    p.latency.as_ref().filter(|l| !l.validity.is_invalid())
}

/// How many of the runs' points have a figure that is not valid, and so is not drawn.
pub fn invalid_points(runs: &[Run]) -> usize {
    runs.iter()
        .flat_map(|r| r.report.points.iter())
        .filter(|p| {
            p.latency.as_ref().is_some_and(|l| l.validity.is_invalid())
                || p.stream.as_ref().is_some_and(|s| {
                    s.totals.iter().any(|t| {
                        t.sender_validity().is_invalid() || t.receiver_validity().is_invalid()
                    })
                })
        })
        .count()
}

/// Latency against message size: the mean, the median and a band from the median to the
/// 99th percentile.
pub fn latency(runs: &[Run]) -> Option<Figure> {
    let pattern = pattern_of(runs);
    if pattern == "stream" {
        return None;
    }
    let x = x_param(runs);
    let f = latency_factor(pattern);
    let mean = move |p: &PointResult| Some(valid_latency(p)?.rtt.mean_ns * f);
    let median = move |p: &PointResult| Some(valid_latency(p)?.rtt.median_ns as f64 * f);
    let (mut lines, hlines) = curves(
        runs,
        x,
        &[("mean", false, &mean), ("median", true, &median)],
    );
    // Bands: same runs, groups and colours as the curves.
    let mut bands = Vec::new();
    let mut colour = 0;
    for run in runs {
        for g in groups(run.report, x) {
            let points: Vec<(f64, f64, f64)> = g
                .points
                .iter()
                .filter(|p| x == Param::Size || x.of(&p.key) > 0)
                .filter_map(|p| {
                    let r = &valid_latency(p)?.rtt;
                    Some((
                        x.of(&p.key) as f64,
                        r.median_ns as f64 * f,
                        r.p99_ns as f64 * f,
                    ))
                })
                .collect();
            if !points.is_empty() {
                bands.push(Band {
                    label: label(runs, run, &g.label, "p50 to p99"),
                    colour,
                    points,
                });
            }
            colour += 1;
        }
    }
    // Medians are dashed and without markers, so that means stand out.
    for l in &mut lines {
        if l.dashed {
            l.markers = false;
        }
    }
    if lines.is_empty() {
        return None;
    }
    let ys = bands
        .iter()
        .flat_map(|b| b.points.iter().flat_map(|p| [p.1, p.2]))
        .chain(lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)));
    Some(Figure::Chart(Chart {
        title: format!("Latency against {}", x.name(pattern)),
        x: x_axis(runs, x, &lines),
        y: Axis {
            label: latency_axis_label(pattern).into(),
            scale: scale_for(ys, 20.0),
            ticks: Ticks::Number,
            from_zero: true,
        },
        bands,
        lines,
        hlines,
        legend: LegendAt::UpperLeft,
        error_bars: Vec::new(),
        invalid: Vec::new(),
        style_keys: Vec::new(),
        sequential_colours: None,
    }))
}

/// NetPIPE's signature graph: throughput against the time one transfer takes (ping-pong).
pub fn signature(runs: &[Run]) -> Option<Figure> {
    if pattern_of(runs) != "pingpong" {
        return None;
    }
    let mut lines = Vec::new();
    let mut colour = 0;
    for run in runs {
        for g in groups(run.report, Param::Size) {
            let points: Vec<(f64, f64)> = g
                .points
                .iter()
                .filter_map(|p| {
                    let l = valid_latency(p)?;
                    Some((l.one_way_mean_ns? / 1e3, l.throughput_bits_per_s / 1e6))
                })
                .collect();
            if !points.is_empty() {
                lines.push(Line {
                    label: label(runs, run, &g.label, "2n/RTT"),
                    colour,
                    dashed: false,
                    markers: true,
                    points,
                });
            }
            colour += 1;
        }
    }
    if lines.is_empty() {
        return None;
    }
    Some(Figure::Chart(Chart {
        title: "NetPIPE signature: throughput against transfer time".into(),
        x: Axis {
            label: "transfer time, RTT/2 (µs)".into(),
            scale: scale_for(lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)), 2.0),
            ticks: Ticks::Number,
            from_zero: false,
        },
        y: Axis {
            label: MBIT_AXIS.into(),
            scale: Scale::Linear,
            ticks: Ticks::Number,
            from_zero: true,
        },
        bands: Vec::new(),
        lines,
        hlines: Vec::new(),
        legend: LegendAt::UpperLeft,
        error_bars: Vec::new(),
        invalid: Vec::new(),
        style_keys: Vec::new(),
        sequential_colours: None,
    }))
}

/// The point a distribution figure shows: `index` if given, else the run's first point that
/// has a distribution.
pub fn point_of(r: &RunDocument, index: Option<usize>) -> Option<&PointResult> {
    let has = |p: &&PointResult| {
        p.latency
            .as_ref()
            .is_some_and(|l| !l.distribution.is_empty())
    };
    match index {
        Some(i) => r.points.iter().find(|p| p.index == i).filter(has),
        None => r.points.iter().find(has),
    }
}

/// "64 B" or "64 B, send buffer 16K": what identifies a point in a title or legend.
pub fn describe_point(r: &RunDocument, p: &PointResult) -> String {
    let mut s = format!("{} B", p.key.size);
    for param in &PARAMS[1..] {
        if param.swept(r) {
            s.push_str(&format!(
                ", {} {}",
                param.name(r.pattern.name()),
                fmt_bytes_param(param.of(&p.key))
            ));
        }
    }
    if let Some(cc) = p.key.cc {
        s.push_str(&format!(", cc {cc}"));
    }
    s
}

/// A point as a figure title names it, kept short so that the title fits:
/// "size 128K, sndbuf 64K".
pub fn short_point(r: &RunDocument, p: &PointResult) -> String {
    let mut s = format!("size {}", crate::units::format_bytes(p.key.size));
    for (param, name) in [
        (Param::Sndbuf, "sndbuf"),
        (Param::Rcvbuf, "rcvbuf"),
        (Param::ServerSndbuf, "server sndbuf"),
        (Param::ServerRcvbuf, "server rcvbuf"),
    ] {
        if param.swept(r) {
            s.push_str(&format!(", {name} {}", fmt_bytes_param(param.of(&p.key))));
        }
    }
    if let Some(cc) = p.key.cc {
        s.push_str(&format!(", cc {cc}"));
    }
    s
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DistributionKind {
    Histogram,
    Cdf,
}

/// The latency distribution of one point per run: a histogram (share of samples per bin,
/// drawn as steps) or the cumulative distribution.
pub fn distribution(runs: &[Run], index: Option<usize>, kind: DistributionKind) -> Option<Figure> {
    let pattern = pattern_of(runs);
    if pattern == "stream" {
        return None;
    }
    let f = latency_factor(pattern);
    let mut lines = Vec::new();
    let mut titles = Vec::new();
    for (colour, run) in runs.iter().enumerate() {
        let Some(p) = point_of(run.report, index) else {
            continue;
        };
        let bins = &p.latency.as_ref()?.distribution;
        let total: u64 = bins.iter().map(|b| b.count).sum();
        if total == 0 {
            continue;
        }
        let mut points = Vec::new();
        match kind {
            DistributionKind::Histogram => {
                let mut prev_high: Option<f64> = None;
                for b in bins {
                    let share = b.count as f64 / total as f64 * 100.0;
                    let (lo, hi) = (b.low_ns * f, b.high_ns * f);
                    match prev_high {
                        Some(ph) if (lo - ph).abs() > ph * 1e-9 => {
                            points.push((ph, 0.0));
                            points.push((lo, 0.0));
                        }
                        None => points.push((lo, 0.0)),
                        _ => {}
                    }
                    points.push((lo, share));
                    points.push((hi, share));
                    prev_high = Some(hi);
                }
                if let Some(ph) = prev_high {
                    points.push((ph, 0.0));
                }
            }
            DistributionKind::Cdf => {
                let mut seen = 0u64;
                points.push((bins[0].low_ns * f, 0.0));
                for b in bins {
                    seen += b.count;
                    points.push((b.high_ns * f, seen as f64 / total as f64));
                }
            }
        }
        let what = short_point(run.report, p);
        titles.push(what.clone());
        lines.push(Line {
            label: if runs.len() > 1 {
                format!("{} at {what}, {total} samples", run.name())
            } else {
                format!("{what}, {total} samples")
            },
            colour,
            dashed: false,
            markers: false,
            points,
        });
    }
    if lines.is_empty() {
        return None;
    }
    titles.dedup();
    let at = if titles.len() == 1 {
        format!(" at {}", titles[0])
    } else {
        String::new()
    };
    let (title, y_label, legend) = match kind {
        DistributionKind::Histogram => (
            format!("Latency histogram{at}"),
            "share of samples per bin (%), 20 bins per decade",
            LegendAt::UpperRight,
        ),
        DistributionKind::Cdf => (
            format!("Latency distribution (CDF){at}"),
            "fraction of samples at or below",
            LegendAt::LowerRight,
        ),
    };
    Some(Figure::Chart(Chart {
        title,
        x: Axis {
            label: latency_axis_label(pattern).into(),
            scale: scale_for(lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)), 3.0),
            ticks: Ticks::Number,
            from_zero: false,
        },
        y: Axis {
            label: y_label.into(),
            scale: Scale::Linear,
            ticks: Ticks::Number,
            from_zero: true,
        },
        bands: Vec::new(),
        lines,
        hlines: Vec::new(),
        legend,
        error_bars: Vec::new(),
        invalid: Vec::new(),
        style_keys: Vec::new(),
        sequential_colours: None,
    }))
}

/// The point's headline as a heatmap shows it, with its label.
fn heat_value(pattern: &str, p: &PointResult) -> Option<f64> {
    if p.figures_validity().is_invalid() {
        return None;
    }
    match pattern {
        "stream" => Some(
            p.stream
                .as_ref()?
                .totals
                .iter()
                .map(|t| t.receiver_bits_per_s)
                .sum::<f64>()
                / 1e6,
        ),
        "pingpong" => Some(p.latency.as_ref()?.one_way_mean_ns? / 1e3),
        _ => Some(p.latency.as_ref()?.transactions_per_s),
    }
}

fn heat_label(pattern: &str) -> &'static str {
    match pattern {
        "stream" => "receiver throughput (Mbit/s)",
        "pingpong" => "one-way latency, RTT/2 (µs)",
        _ => "transactions per second (1/s)",
    }
}

/// Most heatmaps one run gets when it sweeps more than two parameters.
pub const MAX_HEATMAPS: usize = 6;

/// A heatmap of the first two swept parameters of a run, one per combination of any
/// further swept parameters; none unless two parameters are swept.
pub fn heatmaps(run: &Run) -> Vec<Figure> {
    let r = run.report;
    let swept: Vec<Param> = PARAMS.into_iter().filter(|p| p.swept(r)).collect();
    let [xp, yp, rest @ ..] = swept.as_slice() else {
        return Vec::new();
    };
    let mut figures = Vec::new();
    let combo_of = |p: &PointResult| {
        (
            rest.iter().map(|o| o.of(&p.key)).collect::<Vec<u64>>(),
            p.key.cc,
        )
    };
    let mut combos: Vec<OtherValues> = Vec::new();
    for p in &r.points {
        let c = combo_of(p);
        if !combos.contains(&c) {
            combos.push(c);
        }
    }
    for combo in combos.into_iter().take(MAX_HEATMAPS) {
        let points: Vec<&PointResult> = r.points.iter().filter(|p| combo_of(p) == combo).collect();
        let mut xs: Vec<u64> = points.iter().map(|p| xp.of(&p.key)).collect();
        let mut ys: Vec<u64> = points.iter().map(|p| yp.of(&p.key)).collect();
        for v in [&mut xs, &mut ys] {
            v.sort_unstable();
            v.dedup();
        }
        let cells: Vec<HeatCell> = points
            .iter()
            .filter_map(|p| {
                let i = xs.iter().position(|v| *v == xp.of(&p.key))?;
                let j = ys.iter().position(|v| *v == yp.of(&p.key))?;
                Some(HeatCell::plain(i, j, heat_value(r.pattern.name(), p)?))
            })
            .collect();
        if cells.is_empty() {
            continue;
        }
        let fixed: Vec<String> = rest
            .iter()
            .zip(&combo.0)
            .map(|(o, v)| format!("{} {}", o.name(r.pattern.name()), fmt_bytes_param(*v)))
            .chain(combo.1.map(|c| format!("cc {c}")))
            .collect();
        figures.push(Figure::Heatmap(Heatmap {
            title: format!(
                "Run {}: {} by {}{}",
                run.name(),
                xp.name(r.pattern.name()),
                yp.name(r.pattern.name()),
                if fixed.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", fixed.join(", "))
                }
            ),
            x_label: xp.axis_label(r.pattern.name()),
            y_label: yp.axis_label(r.pattern.name()),
            x_values: xs.iter().map(|v| fmt_bytes_param(*v)).collect(),
            y_values: ys.iter().map(|v| fmt_bytes_param(*v)).collect(),
            cells,
            value_label: heat_label(r.pattern.name()).into(),
            log_colour: false,
        }));
    }
    figures
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntervalKind {
    Throughput,
    Cwnd,
    Rtt,
}

/// Points of a run that have interval reports.
pub fn points_with_intervals(r: &RunDocument) -> Vec<&PointResult> {
    r.points
        .iter()
        .filter(|p| {
            p.stream.as_ref().is_some_and(|s| {
                s.streams
                    .iter()
                    .any(|st| !st.sender.intervals.is_empty() || !st.receiver.intervals.is_empty())
            })
        })
        .collect()
}

/// A time series of one point's interval reports: each side's throughput, or the sender
/// kernel's congestion window or smoothed RTT (TCP_INFO), per stream.
pub fn intervals(run: &Run, p: &PointResult, kind: IntervalKind) -> Option<Figure> {
    let s = p.stream.as_ref()?;
    let mut lines = Vec::new();
    let mut bands = Vec::new();
    let many = s.streams.len() > 1;
    for (colour, st) in s.streams.iter().enumerate() {
        let name = if many {
            format!("stream {} ", st.index)
        } else {
            String::new()
        };
        match kind {
            IntervalKind::Throughput => {
                for (side, stats, dashed) in [
                    ("sender", &st.sender, true),
                    ("receiver", &st.receiver, false),
                ] {
                    let points: Vec<(f64, f64)> = stats
                        .intervals
                        .iter()
                        .map(|iv| (iv.end_ns as f64 / 1e9, iv.bits_per_s / 1e6))
                        .collect();
                    if !points.is_empty() {
                        lines.push(Line {
                            label: format!("{name}{side}"),
                            colour,
                            dashed,
                            markers: points.len() <= 60,
                            points,
                        });
                    }
                }
            }
            IntervalKind::Cwnd | IntervalKind::Rtt => {
                let infos: Vec<(f64, crate::model::socket::TcpInfo)> = st
                    .sender
                    .intervals
                    .iter()
                    .filter_map(|iv| Some((iv.end_ns as f64 / 1e9, iv.tcp_info?)))
                    .collect();
                if infos.is_empty() {
                    continue;
                }
                let points: Vec<(f64, f64)> = infos
                    .iter()
                    .map(|(t, i)| match kind {
                        IntervalKind::Cwnd => (*t, f64::from(i.snd_cwnd)),
                        _ => (*t, f64::from(i.rtt_us) / 1e3),
                    })
                    .collect();
                if kind == IntervalKind::Rtt {
                    bands.push(Band {
                        label: format!("{name}rtt ± rttvar"),
                        colour,
                        points: infos
                            .iter()
                            .map(|(t, i)| {
                                let (rtt, var) = (f64::from(i.rtt_us), f64::from(i.rttvar_us));
                                (*t, (rtt - var).max(0.0) / 1e3, (rtt + var) / 1e3)
                            })
                            .collect(),
                    });
                }
                lines.push(Line {
                    label: format!(
                        "{name}{}",
                        if kind == IntervalKind::Cwnd {
                            "cwnd"
                        } else {
                            "smoothed rtt"
                        }
                    ),
                    colour,
                    dashed: false,
                    markers: points.len() <= 60,
                    points,
                });
            }
        }
    }
    if lines.is_empty() {
        return None;
    }
    let at = short_point(run.report, p);
    let (title, y) = match kind {
        IntervalKind::Throughput => (
            format!("Run {}: throughput over time, {at}", run.name()),
            MBIT_AXIS,
        ),
        IntervalKind::Cwnd => (
            format!("Run {}: congestion window, {at}", run.name()),
            "congestion window, TCP_INFO (segments)",
        ),
        IntervalKind::Rtt => (
            format!("Run {}: round-trip time, {at}", run.name()),
            "kernel's smoothed RTT, TCP_INFO (ms)",
        ),
    };
    Some(Figure::Chart(Chart {
        title,
        x: Axis {
            label: "time since the side's timed phase began (s)".into(),
            scale: Scale::Linear,
            ticks: Ticks::Number,
            from_zero: true,
        },
        y: Axis {
            label: y.into(),
            scale: Scale::Linear,
            ticks: Ticks::Number,
            from_zero: true,
        },
        bands,
        lines,
        hlines: Vec::new(),
        legend: LegendAt::LowerRight,
        error_bars: Vec::new(),
        invalid: Vec::new(),
        style_keys: Vec::new(),
        sequential_colours: None,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::db::tests::report;

    #[test]
    fn legends_and_titles_name_a_run_by_its_label() {
        let mut a = report("pingpong", 3, 20_000.0);
        a.label = Some("nodelay".into());
        let b = report("pingpong", 3, 30_000.0);
        let runs = [Run { id: 12, report: &a }, Run { id: 13, report: &b }];
        assert_eq!(runs[0].name(), "#12 (nodelay)");
        assert_eq!(runs[1].name(), "#13");
        let Some(Figure::Chart(c)) = throughput(&runs) else {
            panic!("no throughput chart")
        };
        let labels: Vec<&str> = c.lines.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(labels, ["#12 (nodelay) 2n/RTT", "#13 2n/RTT"]);
        // A label with a control character cannot reach a figure as one.
        a.label = Some("x\u{1b}[2J".into());
        let r = Run { id: 1, report: &a };
        assert_eq!(r.name(), "#1 (x\\u{1b}[2J)");
    }
}
