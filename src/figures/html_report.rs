//! `wirebench report`: one self-contained HTML file (inline SVG and CSS, no network) with the
//! figures of one or more runs, their derived metrics, points and environments.

use anyhow::Result;

use super::plots::{fmt_num, render_svg, Figure};
use super::rate_unit_for_max;
use super::series::{self, DistributionKind, IntervalKind, Run};
use crate::model::headline::{describe, headline};
use crate::model::host::Environment;

/// Interval time series drawn per run: a long sweep with --interval would otherwise bury the
/// report under near-identical figures.
pub const MAX_INTERVAL_POINTS: usize = 4;

pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

pub(crate) const STYLE: &str = "
body { font-family: sans-serif; margin: 2em auto; max-width: 1100px; color: #222; padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { font-size: 1.3em; margin-top: 2em; border-bottom: 1px solid #ccc; }
h3 { font-size: 1.1em; }
figure { margin: 1.5em 0; } figure svg { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.9em; color: #444; margin-top: 0.3em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.8em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f4f4f4; } code { font-size: 0.95em; }
.warn { color: #a30; }
";

/// Marks the page once every figure has drawn something, so a headless browser can check
/// rendering from the DOM alone.
pub(crate) const CHECK_SCRIPT: &str = "<script>
(function () {
  var svgs = document.querySelectorAll('figure svg');
  var drawn = 0;
  for (var i = 0; i < svgs.length; i++) {
    var box = svgs[i].getBBox();
    if (svgs[i].childElementCount > 0 && box.width > 0 && box.height > 0) { drawn++; }
  }
  document.body.setAttribute('data-figures', String(svgs.length));
  document.body.setAttribute('data-figures-drawn', String(drawn));
})();
</script>";

struct Page {
    html: String,
    figures: usize,
}

impl Page {
    fn figure(&mut self, fig: Option<Figure>, caption: &str) -> Result<()> {
        let Some(fig) = fig else { return Ok(()) };
        let svg = render_svg(&fig)?;
        self.figures += 1;
        self.html.push_str(&format!(
            "<figure>\n{svg}\n<figcaption>Figure {}. {}</figcaption>\n</figure>\n",
            self.figures,
            esc(caption)
        ));
        Ok(())
    }
}

/// A number for a table cell: as [`fmt_num`] (at most 4 significant digits), but never in
/// scientific notation, which tick labels may use and tables must not (a reader compares
/// cells digit by digit).
fn table_num(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let a = v.abs();
    if a >= 1e4 {
        return format!("{v:.0}");
    }
    if a != 0.0 && a < 1e-3 {
        let s = format!("{v:.6}");
        return s.trim_end_matches('0').trim_end_matches('.').to_owned();
    }
    fmt_num(v)
}

fn opt_num(v: Option<f64>) -> String {
    v.map(table_num).unwrap_or_else(|| "-".into())
}

/// A latency figure in ns for a table or text of the page: in µs, the page's unit of time.
fn us_num(ns: f64) -> String {
    table_num(ns / 1e3)
}

/// The runs table's headline: as `model::headline::describe` gives it in text, but in the
/// table's rate unit and the page's µs.
fn headline_text(
    pattern: &str,
    h: &crate::model::headline::RunHeadline,
    rate: (&str, f64),
) -> String {
    let m = if h.invalid() { "!" } else { "" };
    let lat = h.latency_ns.map(us_num);
    let bps = h.throughput_bits_per_s.map(|b| table_num(b / rate.1));
    let unit = rate.0;
    let parts: Vec<String> = match pattern {
        "pingpong" => vec![
            lat.map(|v| format!("t0 (one-way) {v}{m} µs")),
            bps.map(|v| format!("r_max {v}{m} {unit}")),
        ],
        "rr" | "crr" => vec![
            h.transactions_per_s
                .map(|v| format!("peak {}{m} txn/s", table_num(v))),
            lat.map(|v| format!("best round trip {v}{m} µs")),
        ],
        _ => vec![bps.map(|v| format!("peak receiver {v}{m} {unit}"))],
    }
    .into_iter()
    .flatten()
    .collect();
    if parts.is_empty() {
        // A mesh's note is its headline (or the mesh's own words when it has none).
        return describe(pattern, h);
    }
    match &h.note {
        Some(note) => format!("{} ({note})", parts.join(", ")),
        None => parts.join(", "),
    }
}

fn runs_table(runs: &[Run]) -> String {
    let heads: Vec<_> = runs.iter().map(|r| headline(r.report)).collect();
    let rate = rate_unit_for_max(
        heads
            .iter()
            .filter_map(|h| h.throughput_bits_per_s)
            .fold(0.0, f64::max),
    );
    let mut s = format!(
        "<table><tr><th>run</th><th>started (UTC)</th><th>pattern</th><th>transport</th><th>server</th><th>client host</th><th>points</th><th>headline (µs, {})</th><th>command</th></tr>\n",
        rate.0
    );
    for (run, h) in runs.iter().zip(&heads) {
        let r = run.report;
        s.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}{}</td><td>{}</td><td class=\"n\">{}{}</td><td>{}</td><td><code>{}</code></td></tr>\n",
            esc(&run.name()),
            esc(&r.started_at),
            esc(r.pattern.name()),
            esc(r.transport.name()),
            esc(r.server.address.as_deref().unwrap_or("-")),
            if r.server.self_hosted { " (loopback, self-hosted)" } else { "" },
            esc(&r.client_environment.hostname),
            r.points.len(),
            if r.complete {
                String::new()
            } else {
                format!(" <span class=\"warn\">incomplete ({}){}</span>", esc(&r.points_of_planned()), r.error.as_deref().map(|e| format!(": {}", esc(e))).unwrap_or_default())
            },
            esc(&headline_text(r.pattern.name(), h, rate)),
            esc(&r.command.join(" ")),
        ));
    }
    s.push_str("</table>\n");
    s
}

fn metrics_table(runs: &[Run]) -> Option<String> {
    // The table's rates: r_max, its interval, and the fits' r_inf.
    let max_rate = runs
        .iter()
        .flat_map(|r| r.report.sweep_metrics.iter())
        .flat_map(|g| {
            let m = &g.metrics;
            [
                Some(m.r_max_bits_per_s),
                m.r_max_ci_bits_per_s.map(|c| c.1),
                m.valid_fit().map(|f| f.r_inf_bits_per_s),
            ]
        })
        .flatten()
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let (rate_name, per) = rate_unit_for_max(max_rate);
    let mut rows = String::new();
    for run in runs {
        for g in &run.report.sweep_metrics {
            let m = &g.metrics;
            let bufs = if run.report.swept.sndbuf
                || run.report.swept.rcvbuf
                || run.report.swept.server_sndbuf
                || run.report.swept.server_rcvbuf
            {
                format!(
                    " (sndbuf {}, rcvbuf {}, server {}/{})",
                    g.sndbuf, g.rcvbuf, g.server_sndbuf, g.server_rcvbuf
                )
            } else {
                String::new()
            };
            // A fit that is not valid is never shown as a result: its reason instead (the
            // fitted numbers stay in the JSON for inspection).
            let fit = match m.valid_fit() {
                Some(f) => esc(&format!(
                    "t0 {} µs, r_inf {} {rate_name}, n_1/2 {} B, R² {:.5} ({} sizes)",
                    us_num(f.t0_ns),
                    table_num(f.r_inf_bits_per_s / per),
                    table_num(f.n_half_bytes),
                    f.r_squared,
                    f.points
                )),
                None => format!(
                    "<span class=\"warn\">no valid fit: {}</span>",
                    esc(&m.fit_reason())
                ),
            };
            let note = |n: &Option<String>| {
                n.as_deref()
                    .map(|n| format!("<br><span class=\"warn\">{}</span>", esc(n)))
                    .unwrap_or_default()
            };
            let left_out = if m.left_out.is_empty() {
                String::new()
            } else {
                format!(
                    "<br><span class=\"warn\">left out, not valid: {}</span>",
                    esc(&m
                        .left_out
                        .iter()
                        .map(|l| format!("{} B ({})", l.size, l.reason))
                        .collect::<Vec<_>>()
                        .join(", "))
                )
            };
            rows.push_str(&format!(
                "<tr><td>{}{}{}</td><td class=\"n\">{} ± {} (at {} B)</td><td class=\"n\">{}{} [{}] (at {} B){}</td><td class=\"n\">{}{}</td><td>{}</td></tr>\n",
                esc(&run.name()),
                esc(&bufs),
                left_out,
                us_num(m.t0_ns),
                opt_num(m.t0_ci_ns.map(|c| c / 1e3)),
                m.t0_size,
                if m.r_max_at_largest == Some(true) { "≥ " } else { "" },
                table_num(m.r_max_bits_per_s / per),
                m.r_max_ci_bits_per_s
                    .map(|(lo, hi)| format!("{} to {}", table_num(lo / per), table_num(hi / per)))
                    .unwrap_or_else(|| "-".into()),
                m.r_max_size,
                note(&m.r_max_note),
                opt_num(m.n_half_bytes),
                note(&m.n_half_note),
                fit,
            ));
        }
    }
    if rows.is_empty() {
        return None;
    }
    Some(format!(
        "<table><tr><th>run</th><th>t0 = RTT/2 of the smallest message (µs, ± CI)</th><th>r_max ({rate_name}, [CI])</th><th>n_1/2 (B)</th><th>fit t(n) = t0 + n/r_inf</th></tr>\n{rows}</table>\n"
    ))
}

/// The points table's headline column: its unit and the divisor from the stored unit. A
/// latency in ns is given in µs; a rate in the unit of the table's largest rate (the mean's
/// interval included).
fn headline_unit(r: &crate::model::RunDocument) -> (String, f64) {
    let unit = r
        .points
        .first()
        .map(|p| p.headline.unit.as_str())
        .unwrap_or_default();
    match unit {
        "ns" => ("µs".into(), 1e3),
        "bit/s" => {
            let max = r
                .points
                .iter()
                .filter_map(|p| p.headline.over_runs.as_ref())
                .map(|m| m.mean + m.half_width.unwrap_or(0.0))
                .filter(|v| v.is_finite())
                .fold(0.0, f64::max);
            let (name, per) = rate_unit_for_max(max);
            (name.into(), per)
        }
        u => (u.into(), 1.0),
    }
}

fn points_table(run: &Run) -> String {
    let r = run.report;
    let name = r
        .points
        .first()
        .map(|p| p.headline.name.clone())
        .unwrap_or_default();
    let (unit, per) = headline_unit(r);
    // "one-way latency (RTT/2), mean" says it is a mean already.
    let head = if name.ends_with("mean") {
        format!("{name} ({unit})")
    } else {
        format!("{name} ({unit}), mean")
    };
    let mut s = format!(
        "<table><tr><th>point</th><th>runs</th><th>{}</th><th>± CI over runs ({})</th><th>samples</th><th>p50 / p99 round trip (µs)</th><th>not valid (! after a figure)</th></tr>\n",
        esc(&head),
        esc(&unit)
    );
    for p in &r.points {
        let m = p.headline.over_runs.as_ref();
        let l = p.latency.as_ref();
        // Every figure of the row with its verdict: the headline's over the runs, and the
        // last run's latency point or stream sums.
        let verdict = crate::model::point_validity(p);
        // The percentiles printed here against their sample floors (10 / (1 - p)): each
        // marked, and its reason added to the row's.
        let pct = |name: &str| {
            l.map(|l| {
                crate::stats::validity::all([
                    (String::new(), &l.validity),
                    (String::new(), &l.percentile_validity(name)),
                ])
            })
            .unwrap_or_default()
        };
        let (p50, p99) = (pct("p50"), pct("p99"));
        let verdict = crate::stats::validity::all([
            (String::new(), &verdict),
            (
                String::new(),
                &l.map(|l| l.percentile_validity("p50")).unwrap_or_default(),
            ),
            (
                String::new(),
                &l.map(|l| l.percentile_validity("p99")).unwrap_or_default(),
            ),
        ]);
        let mark = p.headline.validity.mark();
        s.push_str(&format!(
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}{mark}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"warn\">{}</td></tr>\n",
            esc(&series::describe_point(r, p)),
            p.runs,
            opt_num(m.map(|m| m.mean / per)),
            opt_num(m.and_then(|m| m.half_width).map(|h| h / per)),
            l.map_or("-".into(), |l| l.rtt.samples.to_string()),
            l.map_or("-".into(), |l| format!(
                "{}{} / {}{}",
                us_num(l.rtt.median_ns as f64),
                p50.mark(),
                us_num(l.rtt.p99_ns as f64),
                p99.mark()
            )),
            esc(verdict.reason()),
        ));
    }
    s.push_str("</table>\n");
    s
}

/// grpc: each point's serialisation apart from its calls ([Local ATM computing n.d.] split
/// PVM's pack from its send): the four steps of a call, count-weighted means over the data
/// connections (warm-up included), and their share of the mean round trip. Empty for a run
/// without them.
fn serialisation_table(run: &Run) -> String {
    use crate::model::rpc::merged;
    let r = run.report;
    if r.points.iter().all(|p| p.rpc.is_none()) {
        return String::new();
    }
    let mut s = String::from(
        "<table><tr><th>point</th><th>encoding</th><th>client encode (µs, mean / p99)</th><th>server decode (µs, mean / p99)</th><th>server encode (µs, mean / p99)</th><th>client decode (µs, mean / p99)</th><th>messages (client encoded)</th><th>share of the round trip</th></tr>\n",
    );
    for p in &r.points {
        let Some(rpc) = &p.rpc else {
            continue;
        };
        // The mean over the connections, and the largest p99 of any (one connection's own).
        let step = |side: &[crate::model::rpc::Serialisation],
                    f: fn(
            &crate::model::rpc::Serialisation,
        ) -> Option<crate::model::rpc::CodecTime>| {
            let p99 = side.iter().filter_map(f).map(|t| t.p99_ns).max();
            match (merged(side, f), p99) {
                (Some((_, mean)), Some(p99)) => {
                    format!("{} / {}", us_num(mean), us_num(p99 as f64))
                }
                _ => "-".into(),
            }
        };
        s.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>\n",
            esc(&series::describe_point(r, p)),
            rpc.encoding.name(),
            step(&rpc.client, |s| s.encode),
            step(&rpc.server, |s| s.decode),
            step(&rpc.server, |s| s.encode),
            step(&rpc.client, |s| s.decode),
            merged(&rpc.client, |s| s.encode).map_or("-".into(), |(n, _)| n.to_string()),
            rpc.share_of_rtt
                .map_or("-".into(), |x| format!("{:.1}%", x * 100.0)),
        ));
    }
    s.push_str("</table>\n<p>Each end's encode and decode time per message, timed apart from the call (warm-up messages included); the share is the four steps over the mean round trip.</p>\n");
    s
}

/// `--path-timing`: each point's stages (mean and p50 per round trip, µs), the round trip,
/// the residual, the clock and what stamping cost. Empty for a run without it.
fn path_table(run: &Run) -> String {
    use crate::model::path::PathClock;
    let r = run.report;
    let points = series::path_points(std::slice::from_ref(run));
    if points.is_empty() {
        return String::new();
    }
    let stages: Vec<crate::model::path::StageName> = crate::model::path::StageName::SHOWN
        .into_iter()
        .filter(|s| {
            points
                .iter()
                .any(|(_, _, t)| t.stages.iter().any(|x| x.name == *s))
        })
        .collect();
    let mut s = String::from("<table><tr><th>point</th><th>round trips</th>");
    for st in &stages {
        s.push_str(&format!("<th>{} (µs, mean / p50)</th>", esc(st.label())));
    }
    s.push_str("<th>round trip (µs, mean / p50)</th><th>residual (µs, mean / largest in size)</th><th>clock</th><th>stamping cost (stamped / unstamped p50, 95% interval)</th></tr>\n");
    let mut merged_any = false;
    for (_, p, t) in &points {
        s.push_str(&format!(
            "<tr><td>{}</td><td class=\"n\">{}</td>",
            esc(&series::describe_point(r, p)),
            t.messages
        ));
        for st in &stages {
            let cell = match t.stages.iter().find(|x| x.name == *st) {
                Some(x) => {
                    merged_any |= !x.merged.is_empty();
                    format!(
                        "{} / {}{}",
                        us_num(x.mean_ns),
                        us_num(x.p50_ns as f64),
                        if x.merged.is_empty() { "" } else { " +" }
                    )
                }
                None => "-".into(),
            };
            s.push_str(&format!("<td class=\"n\">{cell}</td>"));
        }
        let clock = match &t.clock {
            PathClock::Shared => "one clock".to_owned(),
            PathClock::Separate {
                offset_ns,
                error_ns,
            } => format!(
                "separate, offset {} ± {} µs",
                us_num(*offset_ns as f64),
                us_num(*error_ns as f64)
            ),
        };
        let cost = t.cost.as_ref().map_or("-".to_owned(), |c| {
            format!(
                "{} [{}, {}] ({} unstamped)",
                table_num(c.ratio),
                table_num(c.ratio_low),
                table_num(c.ratio_high),
                c.unstamped
            )
        });
        s.push_str(&format!(
            "<td class=\"n\">{} / {}</td><td class=\"n\">{} / {}</td><td>{}</td><td>{}</td></tr>\n",
            us_num(t.rtt_mean_ns),
            us_num(t.rtt_p50_ns as f64),
            us_num(t.residual_mean_ns),
            us_num(t.residual_max_abs_ns as f64),
            esc(&clock),
            esc(&cost),
        ));
    }
    s.push_str("</table>\n<p>Each round trip split at the kernel's software time stamps of both ends: the stages' means add up to the mean round trip less the residual (the clocks' disagreement and the time between a clock reading and its system call). With separate clocks the one-way stages rest on the offset estimate; wire out+back does not.");
    if merged_any {
        s.push_str(
            " +: the stage stands for a neighbour too, a device giving no stamp between them.",
        );
    }
    s.push_str("</p>\n");
    for (name, _, t) in &points {
        for n in &t.notes {
            s.push_str(&format!("<p>{}: {}</p>\n", esc(name), esc(n)));
        }
    }
    s
}

fn env_rows(side: &str, e: &Environment) -> String {
    format!(
        "<tr><td>{side}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td></tr>\n",
        esc(&e.hostname),
        esc(&e.kernel),
        esc(&e.cpu_model),
        e.cpus,
        esc(&e.wirebench_version),
        esc(e.default_cc.as_deref().unwrap_or("-")),
    )
}

fn environment(run: &Run) -> String {
    let r = run.report;
    let st = &r.settings;
    let mut s = String::from(
        "<table><tr><th>side</th><th>host</th><th>kernel</th><th>CPU</th><th>CPUs</th><th>wirebench</th><th>default cc</th></tr>\n",
    );
    s.push_str(&env_rows("client", &r.client_environment));
    if let Some(e) = &r.server_environment {
        s.push_str(&env_rows("server", e));
    }
    s.push_str("</table>\n");
    let stop: Vec<String> = [
        st.duration_ns
            .map(|d| crate::units::format_seconds(d as f64 / 1e9)),
        st.bytes.map(|b| format!("{b} bytes")),
        st.iterations.map(|n| format!("{n} iterations")),
    ]
    .into_iter()
    .flatten()
    .collect();
    s.push_str(&format!(
        "<p>Started {}, finished {}. {} stream(s), direction {}, warm-up {} iterations, stop after {}, {}% confidence, {} run(s) per point{}{}{}.</p>\n",
        esc(&r.started_at),
        esc(r.finished_at.as_deref().unwrap_or("-")),
        st.streams,
        esc(st.direction.name()),
        st.warmup,
        esc(&stop.join(" or ")),
        table_num(st.confidence * 100.0),
        st.repeat,
        if st.nodelay_auto {
            ", TCP_NODELAY (wirebench's choice for a bulk TCP stream under BBR; --nagle keeps Nagle on)"
        } else if st.nodelay {
            ", TCP_NODELAY"
        } else {
            ""
        },
        st.cc.as_deref().map(|c| format!(", congestion control {}", esc(c))).unwrap_or_default(),
        st.rate.map(|c| format!(", rate {}", esc(&c.to_string()))).unwrap_or_default(),
    ));
    s
}

/// Builds the report page. `point` picks the point of the distribution figures.
pub fn build(runs: &[Run], point: Option<usize>) -> Result<String> {
    let ids: Vec<String> = runs.iter().map(|r| format!("#{}", r.id)).collect();
    let mut page = Page {
        html: String::new(),
        figures: 0,
    };
    page.html.push_str(&format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>wirebench report: runs {}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>wirebench report: runs {}</h1>\n<p>Generated by wirebench {} at {}. Units: times in µs (each labelled one-way or round trip); rates of payload in Mbit/s = 10<sup>6</sup> bit/s, and a table whose largest rate reaches 10 Gbit/s gives all its rates in Gbit/s = 10<sup>9</sup> bit/s (its header says which); sizes in bytes with binary prefixes (K = 1024); CI = confidence interval half-width.</p>\n<h2>Runs</h2>\n{}",
        esc(&ids.join(", ")),
        esc(&ids.join(", ")),
        env!("CARGO_PKG_VERSION"),
        esc(&crate::env::now_rfc3339()),
        runs_table(runs),
    ));

    let mut patterns: Vec<&str> = Vec::new();
    for r in runs {
        if !patterns.contains(&r.report.pattern.name()) {
            patterns.push(r.report.pattern.name());
        }
    }
    for pattern in patterns {
        let group: Vec<Run> = runs
            .iter()
            .copied()
            .filter(|r| r.report.pattern.name() == pattern)
            .collect();
        page.html
            .push_str(&format!("<h2>Figures: {}</h2>\n", esc(pattern)));
        let throughput_caption = if pattern == "stream" {
            "Payload throughput: the sender's rate (dashed) over the sender's clock and the receiver's rate (solid) over the receiver's clock, summed over streams."
        } else if pattern == "pingpong" {
            "Throughput 2n/RTT of a ping-pong of n-byte messages."
        } else {
            "Request plus response payload per second."
        };
        let invalid = series::invalid_points(&group);
        if invalid > 0 {
            page.html.push_str(&format!(
                "<p class=\"warn\">The figures leave out the figures of {invalid} point(s) that are not valid measurements (below the floors of a timed phase or of a sample count); the Points table below marks them with ! and says why.</p>\n"
            ));
        }
        page.figure(series::throughput(&group), throughput_caption)?;
        page.figure(
            series::latency(&group),
            "Mean (solid, markers) and median (dashed) latency; the shaded band spans the 50th to the 99th percentile.",
        )?;
        page.figure(
            series::qps(&group),
            "Open loop: latency from each request's scheduled send (p50 solid; p99 and p99.9 dashed) against the replies per second achieved, one point per offered rate; where the curve turns up the server's queue sets the latency.",
        )?;
        page.figure(
            series::path(&group),
            "Path timing: each point's round trip split at the kernels' time stamps, a part per stage in the order a message meets them, each the stage's mean over the stamped round trips (the Points table gives each stage's median, the residual and the clock).",
        )?;
        page.figure(
            series::signature(&group),
            "NetPIPE's signature graph: throughput against the one-way time of a transfer; the knee shows the latency at which the network's bandwidth takes over.",
        )?;
        // A distribution whose latency is not valid is not drawn: each distribution's
        // caption names the points left out and why, or a line does when none is left.
        let left_out = series::distribution_left_out(&group, point);
        let left_out_note = if left_out.is_empty() {
            String::new()
        } else {
            format!(
                " Left out, {} point(s) whose latency is not valid: {}.",
                left_out.len(),
                left_out.join("; ")
            )
        };
        let mut drawn = 0;
        for (kind, caption) in [
            (
                DistributionKind::Histogram,
                "Share of the timed samples in each of 20 logarithmic bins per decade.",
            ),
            (
                DistributionKind::Cdf,
                "Cumulative distribution of the timed samples.",
            ),
            (
                DistributionKind::Percentiles,
                "Latency by percentile: each further nine (90%, 99%, 99.9%, ...) takes the same width, so that the tail the CDF squeezes against 1 shows; the curve ends at the slowest sample.",
            ),
        ] {
            let fig = series::distribution(&group, point, kind);
            drawn += usize::from(fig.is_some());
            page.figure(fig, &format!("{caption}{left_out_note}"))?;
        }
        if drawn == 0 && !left_out.is_empty() {
            page.html.push_str(&format!(
                "<p class=\"warn\">No latency distribution:{}</p>\n",
                esc(&left_out_note)
            ));
        }
        for run in &group {
            if let Some(mesh) = &run.report.mesh {
                for (_, h) in crate::figures::mesh_figures::heatmaps(mesh) {
                    page.figure(
                        Some(Figure::Heatmap(h)),
                        "Mesh: one cell per ordered pair of ranks (row: client or sending rank, column: server or receiving rank); a blank cell was not measured, or its figure is not a valid measurement. The run's JSON holds each cell's interval, percentiles and sample count.",
                    )?;
                }
            }
            for h in series::heatmaps(run) {
                page.figure(
                    Some(h),
                    "Each cell is one point of the sweep; a blank cell was not measured, or its figure is not a valid measurement. Buffer sizes are as requested (Linux doubles them; the effective values are in the JSON).",
                )?;
            }
            let with_intervals = series::points_with_intervals(run.report);
            for p in with_intervals.iter().take(MAX_INTERVAL_POINTS) {
                page.figure(
                    series::intervals(run, p, IntervalKind::Throughput),
                    "Interval reports: sender (dashed) and receiver (solid), each against its own clock.",
                )?;
                page.figure(
                    series::intervals(run, p, IntervalKind::Cwnd),
                    "The sender kernel's congestion window at the end of each interval (TCP_INFO).",
                )?;
                page.figure(
                    series::intervals(run, p, IntervalKind::Rtt),
                    "The sender kernel's smoothed round-trip time, with ± its variation as a band (TCP_INFO).",
                )?;
            }
            if with_intervals.len() > MAX_INTERVAL_POINTS {
                page.html.push_str(&format!(
                    "<p>Run #{}: time series of the first {MAX_INTERVAL_POINTS} of {} points with interval reports shown; <code>wirebench plot {} --kind intervals --point N</code> draws the others.</p>\n",
                    run.id,
                    with_intervals.len(),
                    run.id
                ));
            }
        }
    }

    if let Some(t) = metrics_table(runs) {
        page.html
            .push_str("<h2>Derived metrics (message-size sweeps)</h2>\n");
        page.html.push_str(&t);
    }
    page.html.push_str("<h2>Points</h2>\n");
    for run in runs {
        page.html
            .push_str(&format!("<h3>Run {}</h3>\n", esc(&run.name())));
        page.html.push_str(&points_table(run));
        page.html.push_str(&serialisation_table(run));
        page.html.push_str(&path_table(run));
    }
    page.html.push_str("<h2>Environment</h2>\n");
    for run in runs {
        page.html
            .push_str(&format!("<h3>Run {}</h3>\n", esc(&run.name())));
        page.html.push_str(&environment(run));
    }
    if page.figures == 0 {
        page.html
            .push_str("<p class=\"warn\">No figure: the runs have no measured point.</p>\n");
    }
    page.html.push_str(CHECK_SCRIPT);
    page.html.push_str("\n</body>\n</html>\n");
    Ok(page.html)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The points table marks a percentile below its sample floor with "!" as it marks other
    /// figures that are not measurements, and says why in the row.
    #[test]
    fn points_table_marks_percentiles_below_their_floor() {
        let mut r = crate::store::db::tests::report("pingpong", 2, 20_000.0);
        for (k, samples) in [(0, 500u64), (1, 1000)] {
            let l = r.points[k].latency.as_mut().unwrap();
            l.rtt.samples = samples;
            l.percentiles = crate::plan::guard::percentiles(l);
        }
        let html = points_table(&Run { id: 1, report: &r });
        let rows: Vec<&str> = html.lines().filter(|l| l.starts_with("<tr><td>")).collect();
        assert_eq!(rows.len(), 2, "{html}");
        // 500 samples: p50 stands (20 needed), p99 does not (1000).
        assert!(rows[0].contains("20 / 40!</td>"), "{}", rows[0]);
        assert!(
            rows[0].contains("p99 from 500 samples: below its floor of 1000"),
            "{}",
            rows[0]
        );
        // 1000 samples: both stand, nothing marked.
        assert!(rows[1].contains("20 / 40</td>"), "{}", rows[1]);
        assert!(!rows[1].contains("below its floor"), "{}", rows[1]);
    }

    /// A grpc run's report gives each point's serialisation steps and their share; a run
    /// without them has no such table.
    #[test]
    fn a_grpc_run_shows_its_serialisation_per_point() {
        use crate::model::rpc::{CodecTime, RpcResult, Serialisation};
        use crate::model::vocab::Encoding;
        let mut r = crate::store::db::tests::report("pingpong", 1, 20_000.0);
        assert_eq!(serialisation_table(&Run { id: 1, report: &r }), "");
        let t = |mean_ns: f64| {
            Some(CodecTime {
                count: 100,
                mean_ns,
                p50_ns: mean_ns as u64,
                p99_ns: mean_ns as u64,
            })
        };
        let side = |e: f64, d: f64| Serialisation {
            encoding: Encoding::Doubles,
            encode: t(e),
            decode: t(d),
        };
        r.points[0].rpc = RpcResult::new(
            vec![side(780.0, 950.0)],
            vec![side(760.0, 1090.0)],
            Some(50_000.0),
        );
        let html = serialisation_table(&Run { id: 1, report: &r });
        assert!(html.contains("<td>doubles</td><td class=\"n\">0.78 / 0.78</td><td class=\"n\">1.09 / 1.09</td><td class=\"n\">0.76 / 0.76</td><td class=\"n\">0.95 / 0.95</td><td class=\"n\">100</td><td class=\"n\">7.2%</td>"), "{html}");
    }

    /// A run with path timing has a stacked bar figure and a table of each point's stages;
    /// one without has neither.
    #[test]
    fn a_path_timed_run_shows_its_stages_per_point() {
        use crate::figures::series::path::tests::timing;
        use crate::model::path::{PathClock, StageName, StampCost};
        let mut r = crate::store::db::tests::report("pingpong", 2, 20_000.0);
        assert_eq!(path_table(&Run { id: 1, report: &r }), "");
        r.points[0].path_timing = Some(timing(1000));
        let mut t = timing(2000);
        t.stages.remove(1);
        t.stages[1].merged = vec![StageName::ClientQueueToDriver];
        t.clock = PathClock::Separate {
            offset_ns: -1500,
            error_ns: 250,
        };
        t.cost = Some(StampCost {
            unstamped: 2000,
            unstamped_p50_ns: 44_000,
            stamped_p50_ns: 45_000,
            ratio: 1.0227,
            ratio_low: 1.01,
            ratio_high: 1.04,
            method: "distribution-free".into(),
            read_ns: 700.0,
        });
        t.notes = vec!["the driver gives no TX_SOFTWARE stamp <lo>".into()];
        r.points[1].path_timing = Some(t);
        let html = path_table(&Run { id: 1, report: &r });
        assert!(html.contains("<th>client send→queue (µs, mean / p50)</th><th>client queue→driver (µs, mean / p50)</th><th>wire out (µs, mean / p50)</th>"), "{html}");
        assert!(html.contains("<tr><td>1 B</td><td class=\"n\">1000</td><td class=\"n\">1 / 1</td><td class=\"n\">2 / 2</td><td class=\"n\">3 / 3</td>"), "{html}");
        assert!(html.contains("<tr><td>2 B</td><td class=\"n\">2000</td><td class=\"n\">1 / 1</td><td class=\"n\">-</td><td class=\"n\">3 / 3 +</td>"), "{html}");
        assert!(html.contains("<td class=\"n\">45.5 / 45</td><td class=\"n\">0.5 / 2</td><td>one clock</td><td>-</td></tr>"), "{html}");
        assert!(html.contains("<td>separate, offset -1.5 ± 0.25 µs</td><td>1.023 [1.01, 1.04] (2000 unstamped)</td></tr>"), "{html}");
        assert!(
            html.contains("+: the stage stands for a neighbour too"),
            "{html}"
        );
        assert!(
            html.contains("<p>2: the driver gives no TX_SOFTWARE stamp &lt;lo&gt;</p>"),
            "{html}"
        );
        let page = build(&[Run { id: 1, report: &r }], None).unwrap();
        assert!(
            page.contains("kernel stamps (3000 round trips over 2 points)"),
            "no path figure"
        );
        assert!(
            page.contains("Path timing: each point&#39;s round trip split"),
            "no caption"
        );
        let plain = build(
            &[Run {
                id: 1,
                report: &crate::store::db::tests::report("pingpong", 2, 20_000.0),
            }],
            None,
        )
        .unwrap();
        assert!(!plain.contains("Path timing") && !plain.contains("round trips over"));
    }

    /// A stored stream run at about 21 Gbit/s: its receiver and sender each moved 5.25e9
    /// bytes in 2 s.
    fn stream_21_gbit() -> crate::model::RunDocument {
        let mut v = crate::store::db::tests::report_json("stream", 1, 1.0);
        let bits = 2.1e10;
        let side = |role: &str| {
            serde_json::json!({"role": role, "bytes_total": 5_250_100_000u64,
                "bytes_timed": 5_250_000_000u64, "messages_timed": 80_000, "elapsed_s": 2.0,
                "bits_per_s": bits, "io_path": "read"})
        };
        let p = &mut v["points"][0];
        p["latency"] = serde_json::Value::Null;
        p["headline"]["name"] = "receiver throughput, all streams".into();
        p["headline"]["unit"] = "bit/s".into();
        p["headline"]["values"] = serde_json::json!([bits]);
        p["headline"]["over_runs"]["mean"] = bits.into();
        p["stream"] = serde_json::json!({
            "streams": [{"index": 0, "direction": "client_to_server",
                         "sender": side("sender"), "receiver": side("receiver")}],
            "totals": [{"direction": "client_to_server", "streams": 1,
                        "sender_bits_per_s": bits, "receiver_bits_per_s": bits,
                        "bytes_sent": 5_250_100_000u64, "bytes_received": 5_250_100_000u64,
                        "send_failures": 0, "loss": null, "retransmits": 0,
                        "theoretical_goodput_bits_per_s": null}]
        });
        let mut r: crate::model::RunDocument =
            serde_json::from_value(crate::model::upgrade::v1_to_v2(v)).unwrap();
        r.fill_validity();
        r
    }

    /// The page's text without its tags (and so without the SVG's attributes).
    fn text_of(html: &str) -> String {
        let mut out = String::new();
        let mut in_tag = false;
        for c in html.chars() {
            match c {
                '<' => in_tag = true,
                '>' => {
                    in_tag = false;
                    out.push(' ');
                }
                c if !in_tag => out.push(c),
                _ => {}
            }
        }
        out
    }

    /// The report of a ~21 Gbit/s stream run beside a ping-pong run states its units once at
    /// the top and keeps to them: no number in scientific notation anywhere in its text, the
    /// stream's rates in Gbit/s (the table's largest reaches 10 Gbit/s), every latency in µs.
    #[test]
    fn the_report_keeps_one_unit_per_table_and_no_scientific_notation() {
        let stream = stream_21_gbit();
        assert!(!crate::model::point_validity(&stream.points[0]).is_invalid());
        let pingpong = crate::store::db::tests::report("pingpong", 2, 20_000.0);
        let html = build(
            &[
                Run {
                    id: 1,
                    report: &stream,
                },
                Run {
                    id: 2,
                    report: &pingpong,
                },
            ],
            None,
        )
        .unwrap();
        let text = text_of(&html);
        let chars: Vec<char> = text.chars().collect();
        for (i, w) in chars.windows(3).enumerate() {
            let scientific = w[0].is_ascii_digit()
                && w[1] == 'e'
                && (w[2].is_ascii_digit() || w[2] == '+' || w[2] == '-');
            let around: String = chars[i.saturating_sub(40)..(i + 40).min(chars.len())]
                .iter()
                .collect();
            assert!(!scientific, "scientific notation in {around:?}");
        }
        for bad in ["e10", "e+", "e9"] {
            assert!(!text.contains(bad), "{bad} in the page");
        }
        assert!(text.contains("Units: times in µs"), "{text}");
        // The stream's points table: its rates in Gbit/s, its header saying so.
        let points = &html[html.find("<h2>Points</h2>").unwrap()..];
        let stream_table = &points[..points.find("</table>").unwrap()];
        assert!(
            stream_table.contains("<th>receiver throughput, all streams (Gbit/s), mean</th>"),
            "{stream_table}"
        );
        assert!(stream_table.contains("<th>± CI over runs (Gbit/s)</th>"));
        assert!(
            stream_table.contains("<td class=\"n\">21</td>"),
            "{stream_table}"
        );
        assert!(!stream_table.contains("Mbit/s"), "{stream_table}");
        // The runs table gives the stream's headline in the same unit.
        assert!(html.contains("peak receiver 21 Gbit/s"), "{html}");
        // The ping-pong's points table: the one-way mean and the round trips in µs.
        let rest = &points[points.find("</table>").unwrap() + 8..];
        let pp_table = &rest[..rest.find("</table>").unwrap()];
        assert!(
            pp_table.contains("<th>one-way latency (RTT/2), mean (µs)</th>"),
            "{pp_table}"
        );
        assert!(pp_table.contains("<th>p50 / p99 round trip (µs)</th>"));
        // 20 us round trips: a one-way mean of 10 us, p50 20 and p99 40 us.
        assert!(pp_table.contains("<td class=\"n\">10</td>"), "{pp_table}");
        assert!(pp_table.contains("20 / 40"), "{pp_table}");
        // No latency anywhere headed in ns.
        for th in html.split("<th>").skip(1) {
            let th = &th[..th.find("</th>").unwrap_or(th.len())];
            assert!(!th.contains("ns)") && !th.contains("(ns"), "{th}");
        }
    }

    /// A ping-pong run whose point's latency is not valid is left out of the distribution
    /// figures, and each one's caption names it with the reason.
    #[test]
    fn distribution_captions_name_the_points_left_out() {
        let bins: Vec<crate::model::LatencyBin> = [(10e3, 20e3, 900), (100e3, 200e3, 100)]
            .iter()
            .map(|&(low_ns, high_ns, count)| crate::model::LatencyBin {
                low_ns,
                high_ns,
                count,
            })
            .collect();
        let mut valid = crate::store::db::tests::report("pingpong", 1, 20_000.0);
        if let Some(l) = valid.points[0].latency.as_mut() {
            l.distribution = bins;
        }
        let mut invalid = valid.clone();
        let why = crate::stats::validity::latency(5);
        if let Some(l) = invalid.points[0].latency.as_mut() {
            l.validity = why.clone();
        }
        let runs = [
            Run {
                id: 1,
                report: &valid,
            },
            Run {
                id: 2,
                report: &invalid,
            },
        ];
        let html = build(&runs, None).unwrap();
        let note = esc(&format!(
            " Left out, 1 point(s) whose latency is not valid: #2 at size 1: {}.</figcaption>",
            why.reason()
        ));
        let note = note.replace("&lt;/figcaption&gt;", "</figcaption>");
        assert_eq!(html.matches(&note).count(), 3, "{html}");
    }

    /// The kernel's smoothed RTT over time is in µs, as every other latency of the report
    /// (it was in ms).
    #[test]
    fn the_rtt_over_time_is_in_us() {
        let mut r = stream_21_gbit();
        let info = crate::model::socket::TcpInfo {
            rtt_us: 250,
            rttvar_us: 50,
            ..Default::default()
        };
        if let Some(s) = r.points[0].stream.as_mut() {
            s.streams[0].sender.intervals = vec![crate::model::stream::Interval {
                start_ns: 0,
                end_ns: 1_000_000_000,
                bytes: 1000,
                messages: 1,
                bits_per_s: 8000.0,
                tcp_info: Some(info),
                retransmits: None,
                acked_bytes: None,
            }];
        }
        let run = Run { id: 1, report: &r };
        let Some(Figure::Chart(c)) = series::intervals(&run, &r.points[0], IntervalKind::Rtt)
        else {
            panic!("no RTT figure");
        };
        assert_eq!(c.y.label, "kernel's smoothed RTT, TCP_INFO (µs)");
        assert_eq!(c.lines[0].points, [(1.0, 250.0)]);
        assert_eq!(c.bands[0].points, [(1.0, 200.0, 300.0)]);
    }
}
