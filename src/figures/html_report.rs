//! `wirebench report`: one self-contained HTML file (inline SVG and CSS, no network) with the
//! figures of one or more runs, their derived metrics, points and environments.

use anyhow::Result;

use super::plots::{fmt_num, render_svg, Figure};
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

fn opt_num(v: Option<f64>) -> String {
    v.map(fmt_num).unwrap_or_else(|| "-".into())
}

fn runs_table(runs: &[Run]) -> String {
    let mut s = String::from(
        "<table><tr><th>run</th><th>started (UTC)</th><th>pattern</th><th>transport</th><th>server</th><th>client host</th><th>points</th><th>headline</th><th>command</th></tr>\n",
    );
    for run in runs {
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
            esc(&describe(r.pattern.name(), &headline(r))),
            esc(&r.command.join(" ")),
        ));
    }
    s.push_str("</table>\n");
    s
}

fn metrics_table(runs: &[Run]) -> Option<String> {
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
                    "t0 {}, r_inf {} Mbit/s, n_1/2 {} B, R² {:.5} ({} sizes)",
                    crate::units::format_us(f.t0_ns),
                    fmt_num(f.r_inf_bits_per_s / 1e6),
                    fmt_num(f.n_half_bytes),
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
                fmt_num(m.t0_ns / 1e3),
                opt_num(m.t0_ci_ns.map(|c| c / 1e3)),
                m.t0_size,
                if m.r_max_at_largest == Some(true) { "≥ " } else { "" },
                fmt_num(m.r_max_bits_per_s / 1e6),
                m.r_max_ci_bits_per_s
                    .map(|(lo, hi)| format!("{} to {}", fmt_num(lo / 1e6), fmt_num(hi / 1e6)))
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
        "<table><tr><th>run</th><th>t0 = RTT/2 of the smallest message (µs, ± CI)</th><th>r_max (Mbit/s, [CI])</th><th>n_1/2 (B)</th><th>fit t(n) = t0 + n/r_inf</th></tr>\n{rows}</table>\n"
    ))
}

fn points_table(run: &Run) -> String {
    let r = run.report;
    let unit = r
        .points
        .first()
        .map(|p| p.headline.unit.clone())
        .unwrap_or_default();
    let name = r
        .points
        .first()
        .map(|p| p.headline.name.clone())
        .unwrap_or_default();
    let mut s = format!(
        "<table><tr><th>point</th><th>runs</th><th>{} ({}), mean</th><th>± CI over runs</th><th>samples</th><th>p50 / p99 round trip (µs)</th><th>not valid (! after a figure)</th></tr>\n",
        esc(&name),
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
            opt_num(m.map(|m| m.mean)),
            opt_num(m.and_then(|m| m.half_width)),
            l.map_or("-".into(), |l| l.rtt.samples.to_string()),
            l.map_or("-".into(), |l| format!(
                "{}{} / {}{}",
                fmt_num(l.rtt.median_ns as f64 / 1e3),
                p50.mark(),
                fmt_num(l.rtt.p99_ns as f64 / 1e3),
                p99.mark()
            )),
            esc(verdict.reason()),
        ));
    }
    s.push_str("</table>\n");
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
        fmt_num(st.confidence * 100.0),
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
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>wirebench report: runs {}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>wirebench report: runs {}</h1>\n<p>Generated by wirebench {} at {}. Rates are Mbit/s = 10<sup>6</sup> bit/s of payload; sizes are bytes (K = 1024); CI = confidence interval half-width.</p>\n<h2>Runs</h2>\n{}",
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
            series::signature(&group),
            "NetPIPE's signature graph: throughput against the one-way time of a transfer; the knee shows the latency at which the network's bandwidth takes over.",
        )?;
        page.figure(
            series::distribution(&group, point, DistributionKind::Histogram),
            "Share of the timed samples in each of 20 logarithmic bins per decade.",
        )?;
        page.figure(
            series::distribution(&group, point, DistributionKind::Cdf),
            "Cumulative distribution of the timed samples.",
        )?;
        page.figure(
            series::distribution(&group, point, DistributionKind::Percentiles),
            "Latency by percentile: each further nine (90%, 99%, 99.9%, ...) takes the same width, so that the tail the CDF squeezes against 1 shows; the curve ends at the slowest sample.",
        )?;
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
}
