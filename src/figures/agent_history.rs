//! `wirebench report --source agent`: an agent's saved runs as figures over time, one per
//! (target, test) label `TARGET/TEST`, in one self-contained HTML page (inline SVG and CSS, no
//! network, as `wirebench report` of run ids). Regressions the agent found and runs whose
//! figures are not valid are marked on the figure and listed under it, never drawn as plain
//! points.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Result};

use super::html_report::{esc, CHECK_SCRIPT, STYLE};
use super::measured_unit;
use super::plots::{
    auto_scale, fmt_num, render_svg, Axis, Band, Chart, Figure, LegendAt, Line, Scale, StyleKey,
    Ticks,
};
use crate::model::headline::headline;
use crate::model::vocab::{PatternKind, TransportKind};
use crate::model::RunDocument;

/// One saved agent run as the page takes it: its id, the label it was saved under, the
/// regression verdict the agent stored with it (if any) and its result document.
#[derive(Debug, Clone, Copy)]
pub struct HistoryRun<'a> {
    pub id: i64,
    pub label: &'a str,
    pub regression: Option<&'a str>,
    pub report: &'a RunDocument,
}

/// What a figure of a label shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// Latency quantiles: one-way (half the round trip) for ping-pong, the transaction's
    /// round trip for rr and crr.
    Latency { one_way: bool },
    /// Sender and receiver throughput.
    Stream,
}

/// One run's figures, in base units (ns, bit/s, a fraction lost).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub id: i64,
    /// The run's finish time (its start when it has none), seconds since the Unix epoch.
    pub at_unix_s: f64,
    /// The same as text, RFC 3339 UTC.
    pub at: String,
    /// Latency: (median, p90, p99) in ns; None for a stream or a run without latencies.
    pub latency_ns: Option<(f64, f64, f64)>,
    /// Stream: (sender, receiver) in bit/s, summed over streams.
    pub stream_bits_per_s: Option<(f64, f64)>,
    /// Lost / sent, only where the transport can lose a message.
    pub loss: Option<f64>,
    /// Why the run's headline figures are not valid measurements (the physics guard's note),
    /// or that the run is incomplete; None for a valid run.
    pub not_valid: Option<String>,
    pub regression: Option<String>,
}

impl Sample {
    /// The figure the label's line is drawn at: the median latency or the receiver's rate.
    pub fn headline(&self) -> Option<f64> {
        self.latency_ns
            .map(|l| l.0)
            .or(self.stream_bits_per_s.map(|s| s.1))
    }
}

/// Every run of one label and kind, oldest first.
#[derive(Debug, Clone, PartialEq)]
pub struct LabelSeries {
    pub label: String,
    pub kind: Kind,
    /// The transports its runs used (one, unless the config changed), as `--transport`
    /// names them.
    pub transports: Vec<String>,
    /// Whether some run's transport can lose a message (UDP, raw): only then is a loss drawn.
    pub lossy: bool,
    /// The request sizes (bytes) of its runs' first points, ascending: more than one when the
    /// test's config changed, which moves its figures as much as the network does.
    pub sizes: Vec<u64>,
    pub samples: Vec<Sample>,
}

impl LabelSeries {
    pub fn regressions(&self) -> usize {
        self.samples
            .iter()
            .filter(|s| s.regression.is_some())
            .count()
    }

    pub fn not_valid(&self) -> usize {
        self.samples
            .iter()
            .filter(|s| s.not_valid.is_some())
            .count()
    }
}

fn unix_seconds(t: &str) -> Option<f64> {
    humantime::parse_rfc3339_weak(t)
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_secs_f64())
}

fn rfc3339(secs: f64) -> String {
    let t = UNIX_EPOCH + Duration::from_secs_f64(secs.max(0.0));
    humantime::format_rfc3339_millis(t).to_string()
}

fn kind_of(doc: &RunDocument) -> Kind {
    match doc.pattern {
        PatternKind::Stream => Kind::Stream,
        p => Kind::Latency {
            one_way: p == PatternKind::Pingpong,
        },
    }
}

fn can_lose(t: TransportKind) -> bool {
    // Over TCP, QUIC or a Unix socket `lost` is 0 by construction: a 0 drawn would claim a
    // measurement never made.
    matches!(t, TransportKind::Udp | TransportKind::Raw)
}

/// One run's sample: the figures of its first point (the smallest message, as its
/// headline), its validity from the headline's verdict, its regression mark.
pub fn sample(run: &HistoryRun) -> Sample {
    let doc = run.report;
    let at_unix_s = doc
        .finished_at
        .as_deref()
        .and_then(unix_seconds)
        .or_else(|| unix_seconds(&doc.started_at))
        .unwrap_or(0.0);
    let h = headline(doc);
    let not_valid = if !doc.complete {
        Some(format!(
            "incomplete{}",
            doc.error
                .as_deref()
                .map(|e| format!(": {e}"))
                .unwrap_or_default()
        ))
    } else if h.invalid() {
        h.note.clone()
    } else {
        None
    };
    let mut s = Sample {
        id: run.id,
        at_unix_s,
        at: rfc3339(at_unix_s),
        latency_ns: None,
        stream_bits_per_s: None,
        loss: None,
        not_valid,
        regression: run.regression.map(str::to_owned),
    };
    let Some(p) = doc.points.first() else {
        return s;
    };
    let lossy = can_lose(doc.transport);
    if let Some(l) = &p.latency {
        let scale = if doc.pattern == PatternKind::Pingpong {
            0.5
        } else {
            1.0
        };
        s.latency_ns = Some((
            l.rtt.median_ns as f64 * scale,
            l.rtt.p90_ns as f64 * scale,
            l.rtt.p99_ns as f64 * scale,
        ));
        let tried = l.transactions + l.lost;
        if lossy && tried > 0 {
            s.loss = Some(l.lost as f64 / tried as f64);
        }
    }
    if let Some(st) = p.stream.as_ref().filter(|st| !st.totals.is_empty()) {
        s.stream_bits_per_s = Some((
            st.totals.iter().map(|t| t.sender_bits_per_s).sum(),
            st.totals.iter().map(|t| t.receiver_bits_per_s).sum(),
        ));
        let (sent, lost) = st
            .totals
            .iter()
            .filter_map(|t| t.loss.as_ref())
            .fold((0u64, 0u64), |(a, b), l| (a + l.sent, b + l.lost));
        if lossy && sent > 0 {
            s.loss = Some(lost as f64 / sent as f64);
        }
    }
    s
}

/// The runs grouped by (label, kind), labels in order, each group's samples ordered by finish
/// time (then id).
pub fn series(runs: &[HistoryRun]) -> Vec<LabelSeries> {
    let mut groups: BTreeMap<(String, Kind), LabelSeries> = BTreeMap::new();
    for run in runs {
        let kind = kind_of(run.report);
        let g = groups
            .entry((run.label.to_owned(), kind))
            .or_insert_with(|| LabelSeries {
                label: run.label.to_owned(),
                kind,
                transports: Vec::new(),
                lossy: false,
                sizes: Vec::new(),
                samples: Vec::new(),
            });
        if let Some(p) = run.report.points.first() {
            if let Err(at) = g.sizes.binary_search(&p.request_size) {
                g.sizes.insert(at, p.request_size);
            }
        }
        let t = run.report.transport.name().to_owned();
        if !g.transports.contains(&t) {
            g.transports.push(t);
        }
        g.lossy |= can_lose(run.report.transport);
        g.samples.push(sample(run));
    }
    let mut out: Vec<LabelSeries> = groups.into_values().collect();
    for g in &mut out {
        g.samples
            .sort_by(|a, b| a.at_unix_s.total_cmp(&b.at_unix_s).then(a.id.cmp(&b.id)));
    }
    out
}

/// The time axis of every figure on the page: clock times, with the date when the runs span
/// more than one UTC day; its label names the day(s).
fn time_axis(all: &[LabelSeries]) -> Axis {
    let times = all
        .iter()
        .flat_map(|g| g.samples.iter().map(|s| s.at_unix_s));
    let lo = times.clone().reduce(f64::min).unwrap_or(0.0);
    let hi = times.reduce(f64::max).unwrap_or(0.0);
    let (d0, d1) = (rfc3339(lo)[..10].to_owned(), rfc3339(hi)[..10].to_owned());
    let with_date = d0 != d1;
    let days = if with_date {
        format!("{d0} to {d1}")
    } else {
        d0
    };
    Axis {
        label: format!("run finish time (UTC, {days})"),
        scale: Scale::Linear,
        ticks: Ticks::Utc { with_date },
        from_zero: false,
    }
}

/// The figure of a label's headline figures over time: its line through the valid runs,
/// red triangles at regressions, grey crosses at runs that are not valid.
pub fn chart(g: &LabelSeries, x: &Axis) -> Option<Chart> {
    let valid = || g.samples.iter().filter(|s| s.not_valid.is_none());
    let mut c = Chart {
        title: String::new(),
        x: x.clone(),
        y: x.clone(),
        bands: vec![],
        lines: vec![],
        hlines: vec![],
        legend: LegendAt::Best,
        error_bars: vec![],
        invalid: vec![],
        regressions: vec![],
        style_keys: vec![],
        sequential_colours: None,
    };
    let divisor;
    match g.kind {
        Kind::Latency { one_way } => {
            let max = g
                .samples
                .iter()
                .filter_map(|s| s.latency_ns.map(|l| l.2))
                .fold(0.0, f64::max);
            let unit = measured_unit("ns", max);
            divisor = unit.divisor;
            let what = if one_way {
                "one-way latency (RTT/2)"
            } else {
                "round trip"
            };
            c.title = format!("{}: {what} over time", crate::text::printable(&g.label));
            c.y = Axis {
                label: format!("{what} ({})", unit.name),
                scale: auto_scale(
                    g.samples
                        .iter()
                        .filter_map(|s| s.latency_ns)
                        .flat_map(|l| [l.0, l.2]),
                    false,
                ),
                ticks: Ticks::Number,
                from_zero: false,
            };
            c.bands.push(Band {
                label: "p90 to p99".into(),
                colour: 0,
                points: valid()
                    .filter_map(|s| {
                        s.latency_ns
                            .map(|l| (s.at_unix_s, l.1 / divisor, l.2 / divisor))
                    })
                    .collect(),
            });
            c.lines.push(Line {
                label: "median".into(),
                colour: 0,
                dashed: false,
                markers: true,
                points: valid()
                    .filter_map(|s| s.latency_ns.map(|l| (s.at_unix_s, l.0 / divisor)))
                    .collect(),
            });
        }
        Kind::Stream => {
            let max = g
                .samples
                .iter()
                .filter_map(|s| s.stream_bits_per_s.map(|r| r.0.max(r.1)))
                .fold(0.0, f64::max);
            let unit = measured_unit("bit/s", max);
            divisor = unit.divisor;
            c.title = format!("{}: throughput over time", crate::text::printable(&g.label));
            c.y = Axis {
                label: format!("throughput ({})", unit.name),
                scale: Scale::Linear,
                ticks: Ticks::Number,
                from_zero: true,
            };
            c.lines.push(Line {
                label: "receiver".into(),
                colour: 0,
                dashed: false,
                markers: true,
                points: valid()
                    .filter_map(|s| s.stream_bits_per_s.map(|r| (s.at_unix_s, r.1 / divisor)))
                    .collect(),
            });
            c.lines.push(Line {
                label: "sender".into(),
                colour: 1,
                dashed: true,
                markers: false,
                points: valid()
                    .filter_map(|s| s.stream_bits_per_s.map(|r| (s.at_unix_s, r.0 / divisor)))
                    .collect(),
            });
        }
    }
    for s in &g.samples {
        let Some(y) = s.headline() else { continue };
        let p = (s.at_unix_s, y / divisor);
        if s.not_valid.is_some() {
            c.invalid.push(p);
        }
        if s.regression.is_some() {
            c.regressions.push(p);
        }
    }
    let drawn = c.lines.iter().any(|l| !l.points.is_empty()) || !c.invalid.is_empty();
    drawn.then_some(c)
}

/// The loss of a label over time, for transports that can lose a message; None otherwise
/// or when no run measured one.
pub fn loss_chart(g: &LabelSeries, x: &Axis) -> Option<Chart> {
    if !g.lossy || g.samples.iter().all(|s| s.loss.is_none()) {
        return None;
    }
    let at = |s: &Sample| s.loss.map(|l| (s.at_unix_s, l * 100.0));
    let valid: Vec<(f64, f64)> = g
        .samples
        .iter()
        .filter(|s| s.not_valid.is_none())
        .filter_map(at)
        .collect();
    Some(Chart {
        title: format!("{}: loss over time", crate::text::printable(&g.label)),
        x: x.clone(),
        y: Axis {
            label: "lost (% of messages sent)".into(),
            scale: Scale::Linear,
            ticks: Ticks::Number,
            from_zero: true,
        },
        bands: vec![],
        lines: vec![Line {
            label: "loss".into(),
            colour: 2,
            dashed: false,
            markers: true,
            points: valid,
        }],
        hlines: vec![],
        legend: LegendAt::Best,
        error_bars: vec![],
        invalid: g
            .samples
            .iter()
            .filter(|s| s.not_valid.is_some())
            .filter_map(at)
            .collect(),
        regressions: g
            .samples
            .iter()
            .filter(|s| s.regression.is_some())
            .filter_map(at)
            .collect(),
        style_keys: Vec::<StyleKey>::new(),
        sequential_colours: None,
    })
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// What the page is of, for its heading: the database and the selection.
pub struct Selection<'a> {
    pub db: &'a str,
    pub since: Option<&'a str>,
    pub targets: &'a [String],
    /// Runs selected but left out: their stored document could not be read (run id, why).
    pub unreadable: &'a [(i64, String)],
}

/// The page: per label, its figure(s) over time, then the regressions and the runs that are
/// not valid in tables under it. An error when there is no run.
pub fn build(runs: &[HistoryRun], sel: &Selection) -> Result<String> {
    if runs.is_empty() {
        bail!("no agent runs to report");
    }
    let all = series(runs);
    let x = time_axis(&all);
    let mut body = String::new();
    let mut figures = 0;
    let mut figure = |body: &mut String, c: Chart, caption: String| -> Result<()> {
        let svg = render_svg(&Figure::Chart(c))?;
        figures += 1;
        body.push_str(&format!(
            "<figure>\n{svg}\n<figcaption>Figure {figures}. {}</figcaption>\n</figure>\n",
            esc(&caption)
        ));
        Ok(())
    };
    for g in &all {
        let (what, marks) = match g.kind {
            Kind::Latency { one_way: true } => (
                "ping-pong, one-way latency (half the round trip): the line is the median, the band p90 to p99",
                "on the median",
            ),
            Kind::Latency { one_way: false } => (
                "request/response, round trip: the line is the median, the band p90 to p99",
                "on the median",
            ),
            Kind::Stream => (
                "stream, throughput of payload: receiver (solid) and sender (dashed), summed over streams",
                "on the receiver's rate",
            ),
        };
        let sizes: Vec<String> = g.sizes.iter().map(u64::to_string).collect();
        let sizes = match sizes.len() {
            0 => String::new(),
            1 => format!(", {} bytes per message", sizes[0]),
            _ => format!(
                ", <span class=\"warn\">message sizes changed: {} bytes</span> (the figures compare across the change only as far as the size does not matter)",
                sizes.join(", ")
            ),
        };
        let sizes = if g.kind == Kind::Stream {
            // A stream's "size" is its write size: a setting, not what is measured.
            sizes.replace("per message", "per write")
        } else {
            sizes
        };
        body.push_str(&format!(
            "<h2>{}</h2>\n<p>{} over {}{sizes}.</p>\n",
            esc(&crate::text::printable(&g.label)),
            plural(g.samples.len(), "run", "runs"),
            esc(&g.transports.join(", ")),
        ));
        let counts = format!(
            "{}; {}, {} not valid",
            plural(g.samples.len(), "run", "runs"),
            plural(g.regressions(), "regression", "regressions"),
            g.not_valid()
        );
        let caption = format!(
            "{}: {what}. {counts}. x: each run's finish time, UTC. Red triangles ({marks}): runs at which the agent found a regression; grey crosses: runs whose figures are not valid (not on the line); both listed below.",
            crate::text::printable(&g.label)
        );
        match chart(g, &x) {
            Some(c) => figure(&mut body, c, caption)?,
            None => {
                body.push_str("<p class=\"warn\">No run of this label has a figure to draw.</p>\n")
            }
        }
        if let Some(c) = loss_chart(g, &x) {
            let n = g.samples.iter().filter(|s| s.loss.is_some()).count();
            figure(
                &mut body,
                c,
                format!(
                    "{}: messages lost, % of those sent, per run. {}. x: each run's finish time, UTC. Red triangles: regressions; grey crosses: runs not valid.",
                    crate::text::printable(&g.label),
                    plural(n, "run", "runs")
                ),
            )?;
        }
        body.push_str(&marks_tables(g));
    }
    let since = sel
        .since
        .map(|s| format!(", runs started at or after {}", esc(s)))
        .unwrap_or_default();
    let targets = if sel.targets.is_empty() {
        String::new()
    } else {
        format!(
            ", targets {}",
            esc(&crate::text::printable(&sel.targets.join(", ")))
        )
    };
    let regressions: usize = all.iter().map(LabelSeries::regressions).sum();
    if !sel.unreadable.is_empty() {
        let rows: String = sel
            .unreadable
            .iter()
            .map(|(id, why)| {
                format!(
                    "<tr><td>{id}</td><td>{}</td></tr>\n",
                    esc(&crate::text::printable(why))
                )
            })
            .collect();
        body.push_str(&format!(
            "<h2>Runs left out</h2>\n<p class=\"warn\">{} selected could not be read from the database and {} not drawn:</p>\n<table>\n<tr><th>run</th><th>why</th></tr>\n{rows}</table>\n",
            plural(sel.unreadable.len(), "run", "runs"),
            if sel.unreadable.len() == 1 { "is" } else { "are" },
        ));
    }
    Ok(format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>wirebench report: agent runs</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>wirebench report: agent runs over time</h1>\n<p>Generated by wirebench {} at {}. {} of <code>wirebench agent</code> from {}{since}{targets}: {}, {}. One section per label <code>TARGET/TEST</code>. The time axis of every figure is the run's finish time in UTC. Latencies in µs; rates of payload in Mbit/s = 10<sup>6</sup> bit/s (Gbit/s = 10<sup>9</sup> bit/s from 10 Gbit/s; the axis says which). Marks: a red triangle is a run at which the agent's regression check (its recent runs against its baseline runs) found its headline figure worse beyond the threshold; a grey cross is a run whose figures the physics guard found not valid, or an incomplete run: not a measurement, so never on the line.</p>\n{body}{CHECK_SCRIPT}\n</body>\n</html>\n",
        env!("CARGO_PKG_VERSION"),
        humantime::format_rfc3339_seconds(SystemTime::now()),
        plural(runs.len(), "run", "runs"),
        esc(&crate::text::printable(sel.db)),
        plural(all.len(), "label", "labels"),
        plural(regressions, "regression", "regressions"),
    ))
}

/// The tables under a label's figure: its regressions (time, run, verdict) and its runs that
/// are not valid (time, run, reason); nothing when it has neither.
fn marks_tables(g: &LabelSeries) -> String {
    let mut s = String::new();
    let rows = |pick: &dyn Fn(&Sample) -> Option<&String>| -> String {
        g.samples
            .iter()
            .filter_map(|x| pick(x).map(|t| (x, t)))
            .map(|(x, t)| {
                format!(
                    "<tr><td>{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td></tr>\n",
                    esc(&x.at),
                    x.id,
                    x.headline()
                        .map(|v| headline_text(g.kind, v))
                        .unwrap_or_else(|| "-".into()),
                    esc(&crate::text::printable(t))
                )
            })
            .collect()
    };
    if g.regressions() > 0 {
        s.push_str(&format!(
            "<h3>Regressions ({})</h3>\n<table class=\"regressions\"><tr><th>finished (UTC)</th><th>run</th><th>figure</th><th>what the agent found</th></tr>\n{}</table>\n",
            g.regressions(),
            rows(&|x| x.regression.as_ref())
        ));
    }
    if g.not_valid() > 0 {
        s.push_str(&format!(
            "<h3>Not valid ({})</h3>\n<table class=\"not-valid\"><tr><th>finished (UTC)</th><th>run</th><th>figure</th><th>why</th></tr>\n{}</table>\n",
            g.not_valid(),
            rows(&|x| x.not_valid.as_ref())
        ));
    }
    s
}

/// A run's headline figure for a table: µs for latencies, Mbit/s for rates.
fn headline_text(kind: Kind, v: f64) -> String {
    match kind {
        Kind::Latency { one_way: true } => format!("{} µs one-way", fmt_num(v / 1e3)),
        Kind::Latency { one_way: false } => format!("{} µs round trip", fmt_num(v / 1e3)),
        Kind::Stream => format!("{} Mbit/s receiver", fmt_num(v / 1e6)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Validity;
    use crate::store::db::tests::{report, report_json};

    /// A ping-pong run finished at `at` (seconds after 2026-03-30T00:00:00Z) with round trips
    /// of `rtt_ns` (median; p90 the same, p99 twice).
    fn pingpong(at: u64, rtt_ns: f64) -> RunDocument {
        let mut r = report("pingpong", 1, rtt_ns);
        r.finished_at = Some(rfc3339(1_774_828_800.0 + at as f64));
        r
    }

    fn stream(at: u64, bits: f64) -> RunDocument {
        let mut v = report_json("stream", 1, 1.0);
        let p = &mut v["points"][0];
        p["latency"] = serde_json::Value::Null;
        p["headline"]["unit"] = "bit/s".into();
        p["stream"] = serde_json::json!({
            "streams": [],
            "totals": [{"direction": "client_to_server", "streams": 1,
                        "sender_bits_per_s": bits * 1.01, "receiver_bits_per_s": bits,
                        "bytes_sent": 1_000_000_000u64, "bytes_received": 1_000_000_000u64,
                        "send_failures": 0, "loss": null, "retransmits": 0,
                        "theoretical_goodput_bits_per_s": null}]
        });
        let mut r: RunDocument =
            serde_json::from_value(crate::model::upgrade::v1_to_v2(v)).unwrap();
        r.finished_at = Some(rfc3339(1_774_828_800.0 + at as f64));
        r
    }

    fn run<'a>(id: i64, label: &'a str, doc: &'a RunDocument) -> HistoryRun<'a> {
        HistoryRun {
            id,
            label,
            regression: None,
            report: doc,
        }
    }

    #[test]
    fn runs_go_to_their_label_ordered_by_finish_time() {
        // Saved out of time order (ids are not times: an import, a clock step).
        let docs = [
            pingpong(120, 40_000.0),
            pingpong(60, 30_000.0),
            stream(90, 1e9),
            pingpong(30, 20_000.0),
            pingpong(30, 50_000.0),
        ];
        let labels = ["a/ping", "a/ping", "a/bulk", "b/ping", "a/ping"];
        let runs: Vec<HistoryRun> = docs
            .iter()
            .zip(labels)
            .enumerate()
            .map(|(i, (d, l))| run(i as i64 + 1, l, d))
            .collect();
        let s = series(&runs);
        let keys: Vec<(&str, Kind, Vec<i64>)> = s
            .iter()
            .map(|g| {
                (
                    g.label.as_str(),
                    g.kind,
                    g.samples.iter().map(|x| x.id).collect(),
                )
            })
            .collect();
        assert_eq!(
            keys,
            vec![
                ("a/bulk", Kind::Stream, vec![3]),
                ("a/ping", Kind::Latency { one_way: true }, vec![5, 2, 1]),
                ("b/ping", Kind::Latency { one_way: true }, vec![4]),
            ]
        );
        // Ping-pong: one-way, half the round trip; p99 twice the median in the fixture.
        assert_eq!(
            s[1].samples[0].latency_ns,
            Some((25_000.0, 25_000.0, 50_000.0))
        );
        assert_eq!(s[1].samples[0].at, "2026-03-30T00:00:30.000Z");
        assert_eq!(s[0].samples[0].stream_bits_per_s, Some((1.01e9, 1e9)));
        assert_eq!(s[1].sizes, vec![1]);
        // TCP cannot lose a message: no loss, and no loss figure.
        assert!(s
            .iter()
            .all(|g| !g.lossy && g.samples.iter().all(|x| x.loss.is_none())));
        let x = time_axis(&s);
        assert_eq!(x.ticks, Ticks::Utc { with_date: false });
        assert_eq!(x.label, "run finish time (UTC, 2026-03-30)");
        assert!(loss_chart(&s[1], &x).is_none());
    }

    #[test]
    fn regressions_and_runs_not_valid_are_marked_not_drawn_plain() {
        let mut docs: Vec<RunDocument> = (0..5).map(|i| pingpong(i * 60, 30_000.0)).collect();
        docs[2].points[0].latency.as_mut().unwrap().validity =
            Validity::invalid("latency below the wire's floor");
        docs[4].complete = false;
        docs[4].error = Some("server went away".into());
        // The config's size changed between the runs: the page says so.
        docs[3].points[0].request_size = 65536;
        let mut runs: Vec<HistoryRun> = docs
            .iter()
            .enumerate()
            .map(|(i, d)| run(i as i64 + 10, "a/ping", d))
            .collect();
        runs[1].regression = Some("one-way latency +40%");
        runs[2].regression = Some("one-way latency +60%");
        let s = series(&runs);
        assert_eq!(s.len(), 1);
        let g = &s[0];
        assert_eq!((g.regressions(), g.not_valid()), (2, 2));
        assert_eq!(
            g.samples[2].not_valid.as_deref(),
            Some("! not valid: latency below the wire's floor")
        );
        assert_eq!(
            g.samples[4].not_valid.as_deref(),
            Some("incomplete: server went away")
        );
        let c = chart(g, &time_axis(&s)).unwrap();
        let xs = |pts: &[(f64, f64)]| -> Vec<f64> {
            pts.iter().map(|p| p.0 - 1_774_828_800.0).collect()
        };
        // The line and the band hold the valid runs only; the others are crosses.
        assert_eq!(xs(&c.lines[0].points), vec![0.0, 60.0, 180.0]);
        assert_eq!(c.bands[0].points.len(), 3);
        assert_eq!(xs(&c.invalid), vec![120.0, 240.0]);
        // A regression is marked wherever its run is drawn, valid or not, at the median (µs).
        assert_eq!(
            c.regressions,
            vec![(1_774_828_860.0, 15.0), (1_774_828_920.0, 15.0)]
        );
        assert_eq!(c.y.label, "one-way latency (RTT/2) (µs)");
        let page = build(
            &runs,
            &Selection {
                db: "agent.db",
                since: None,
                targets: &[],
                unreadable: &[],
            },
        )
        .unwrap();
        assert_eq!(page.matches("<figure>").count(), 1);
        assert!(
            page.contains("5 runs; 2 regressions, 2 not valid"),
            "{page}"
        );
        assert!(page.contains("<h3>Regressions (2)</h3>"));
        assert!(
            page.contains("message sizes changed: 1, 65536 bytes"),
            "{page}"
        );
        assert!(page.contains("one-way latency +60%"));
        assert!(page.contains("<h3>Not valid (2)</h3>"));
        assert!(page.contains("incomplete: server went away"));
        assert!(page.contains("2026-03-30T00:01:00.000Z</td><td class=\"n\">11</td>"));
        // Drawn: one red triangle per regression, and one in the legend.
        assert_eq!(page.matches("fill=\"#C80000\"").count(), 3, "{page}");
    }

    #[test]
    fn a_lossy_transport_has_a_loss_figure_and_axes_span_days_with_dates() {
        let mut a = pingpong(0, 30_000.0);
        let mut b = pingpong(2 * 86_400, 30_000.0);
        for d in [&mut a, &mut b] {
            d.transport = TransportKind::Udp;
        }
        b.points[0].latency.as_mut().unwrap().lost = 10;
        let runs = [run(1, "a/udp", &a), run(2, "a/udp", &b)];
        let s = series(&runs);
        assert!(s[0].lossy);
        assert_eq!(s[0].samples[0].loss, Some(0.0));
        assert_eq!(s[0].samples[1].loss, Some(10.0 / 1010.0));
        let x = time_axis(&s);
        assert_eq!(x.ticks, Ticks::Utc { with_date: true });
        assert_eq!(x.label, "run finish time (UTC, 2026-03-30 to 2026-04-01)");
        let c = loss_chart(&s[0], &x).unwrap();
        assert_eq!(c.lines[0].points.len(), 2);
        assert_eq!(c.y.label, "lost (% of messages sent)");
    }

    #[test]
    fn no_runs_is_an_error() {
        let e = build(
            &[],
            &Selection {
                db: "x",
                since: None,
                targets: &[],
                unreadable: &[],
            },
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "no agent runs to report");
    }
}
