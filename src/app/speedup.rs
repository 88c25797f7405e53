//! What `wirebench app` reports: per point the sequential baseline, the parallel time,
//! speedup and efficiency with their confidence intervals, and the share of time each rank
//! spent inside sends and receives.

use anyhow::{anyhow, Result};
use serde::{Deserialize, Serialize};

use super::{jacobi, Kernel, Repetition};
use crate::stats::ci::MeanCi;
use crate::text::table::{units_line, Column, Style, Table};

/// The document of one `wirebench app` run (`--json`, and what the results database keeps).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppReport {
    /// "wirebench.app"
    pub schema: String,
    /// matmul, jacobi or chunks.
    pub kernel: String,
    pub transport: String,
    pub ranks: usize,
    /// The process grid, rows x columns ("2x2").
    pub grid: String,
    /// "local processes" or "mpirun".
    pub launch: String,
    /// Lab namespaces the ranks' data ran in (PREFIX<rank>), if any.
    pub netns_prefix: Option<String>,
    pub started_at: String,
    pub finished_at: String,
    /// The host of rank 0.
    pub host: String,
    /// Kernel settings beyond the size (stop rule, chunk plan), as `key=value`.
    pub settings: Vec<String>,
    pub repetitions: u64,
    pub warmup: u64,
    pub points: Vec<AppPoint>,
    /// Background load beside the whole job (`--load`), null without it.
    #[serde(default)]
    pub load: Option<AppLoad>,
}

/// The background load beside a job ([Local ATM computing n.d.] ran its kernels on a silent
/// Ethernet and beside 30% load), as the load's receiver counted it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppLoad {
    /// `--load` as given ("udp:30M", "tcp:4").
    pub spec: String,
    /// The wirebench server the load went to, HOST:PORT (loopback: self-hosted).
    pub server: String,
    /// "udp" or "tcp".
    pub transport: String,
    /// UDP: the payload rate the load was held at, bit/s; null for TCP.
    pub target_bits_per_s: Option<f64>,
    /// Payload bits the receiver counted over the load's whole time, per second.
    pub achieved_bits_per_s: f64,
    /// UDP: datagrams sent and lost over the whole load; null for TCP.
    pub datagrams_sent: Option<u64>,
    pub datagrams_lost: Option<u64>,
    /// From the load's first interval's start to its last one's end, nanoseconds.
    pub elapsed_ns: u64,
    /// The load ran from before the job's first repetition to after its last.
    pub covered: bool,
}

impl AppLoad {
    /// One line for the table's head.
    pub fn describe(&self) -> String {
        let lost = match (self.datagrams_sent, self.datagrams_lost) {
            (Some(s), Some(l)) if s > 0 => {
                format!(
                    ", {l} of {s} datagrams lost ({:.2}%)",
                    l as f64 * 100.0 / s as f64
                )
            }
            _ => String::new(),
        };
        format!(
            "background load {} to {}: {} of {} payload received over {:.1} s{}{lost}{}",
            self.spec,
            self.server,
            crate::units::format_mbit_s(self.achieved_bits_per_s),
            self.transport,
            self.elapsed_ns as f64 / 1e9,
            self.target_bits_per_s
                .map(|t| format!(" (held at {})", crate::units::format_mbit_s(t)))
                .unwrap_or_default(),
            if self.covered {
                ""
            } else {
                "; NOT over the whole job: some repetitions ran without it"
            }
        )
    }
}

pub const SCHEMA: &str = "wirebench.app";

/// One size (or the one chunk plan).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppPoint {
    /// Matrix or grid size n (n x n); None for chunks.
    pub n: Option<u64>,
    /// Sequential baseline on rank 0, seconds.
    pub sequential_s: MeanCi,
    /// Parallel time (the longest rank's, from the common start), seconds.
    pub parallel_s: MeanCi,
    /// Baseline over parallel time, per repetition.
    pub speedup: MeanCi,
    /// Mean speedup / P.
    pub efficiency: f64,
    /// Time inside sends and receives over the time in the kernel, all ranks together.
    pub comm_share: f64,
    pub ranks: Vec<RankFigures>,
    /// What was checked, and held, in every repetition.
    pub check: String,
    /// Jacobi: the sweeps made and the last residual (the same as the sequential run's).
    pub relaxation: Option<jacobi::Converged>,
}

/// One rank's means over the repetitions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankFigures {
    pub rank: usize,
    /// Time in the kernel, seconds.
    pub total_s: f64,
    /// Of which inside sends and receives (packing included), seconds.
    pub comm_s: f64,
    pub comm_share: f64,
    /// Payload bytes received per repetition.
    pub received_bytes: u64,
}

fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = xs.collect();
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

/// The point of `reps` (rank 0's repetitions at size `n`).
pub fn point(
    kernel: &Kernel,
    n: Option<usize>,
    reps: &[Repetition],
    relaxation: Option<jacobi::Converged>,
    confidence: f64,
) -> Result<AppPoint> {
    let ci = |xs: Vec<f64>, what: &str| {
        MeanCi::from_samples(&xs, confidence).ok_or_else(|| anyhow!("no {what} to report"))
    };
    let secs = |ns: u64| ns as f64 * 1e-9;
    let parallel: Vec<f64> = reps
        .iter()
        .map(|r| secs(r.ranks.iter().map(|s| s.total_ns).max().unwrap_or(0)))
        .collect();
    let sequential: Vec<f64> = reps.iter().map(|r| r.sequential.as_secs_f64()).collect();
    let speedup: Vec<f64> = sequential
        .iter()
        .zip(&parallel)
        .map(|(s, p)| ratio(*s, *p))
        .collect();
    let size = reps.first().map_or(0, |r| r.ranks.len());
    let ranks: Vec<RankFigures> = (0..size)
        .map(|rank| {
            let total = mean(reps.iter().map(|r| secs(r.ranks[rank].total_ns)));
            let comm = mean(reps.iter().map(|r| secs(r.ranks[rank].comm_ns)));
            RankFigures {
                rank,
                total_s: total,
                comm_s: comm,
                comm_share: ratio(comm, total),
                received_bytes: reps.last().map_or(0, |r| r.ranks[rank].received),
            }
        })
        .collect();
    let all_comm: f64 = ranks.iter().map(|r| r.comm_s).sum();
    let all_total: f64 = ranks.iter().map(|r| r.total_s).sum();
    let speedup = ci(speedup, "speedup")?;
    let check = match kernel {
        Kernel::Matmul { .. } => {
            let n = n.unwrap_or_default();
            format!(
                "C equals the sequential product exactly (all {} entries)",
                n * n
            )
        }
        Kernel::Jacobi { .. } => {
            "the same sweeps to the same residual as the sequential run, bit for bit".into()
        }
        Kernel::Chunks(plan) => format!(
            "the clients received the whole volume ({} bytes)",
            plan.volume
        ),
    };
    Ok(AppPoint {
        n: n.map(|n| n as u64),
        efficiency: speedup.mean / size.max(1) as f64,
        sequential_s: ci(sequential, "baseline")?,
        parallel_s: ci(parallel, "parallel time")?,
        speedup,
        comm_share: ratio(all_comm, all_total),
        ranks,
        check,
        relaxation,
    })
}

fn with_ci(m: &MeanCi, scale: f64) -> String {
    match m.half_width {
        Some(h) => format!("{:.3} ±{:.3}", m.mean * scale, h * scale),
        None => format!("{:.3}", m.mean * scale),
    }
}

/// The table `wirebench app` prints.
pub fn table(r: &AppReport) -> String {
    render(r, Style::Plain)
}

/// The table `wirebench app` prints, plain or as Markdown: what ran, the units, a row per
/// size (a relaxation's sweeps under its row), and what was checked.
pub fn render(r: &AppReport, style: Style) -> String {
    let max_sweeps: Option<u64> = r
        .settings
        .iter()
        .find_map(|s| s.strip_prefix("max_iterations="))
        .and_then(|v| v.parse().ok());
    // A sentence of its own in Markdown, a line in a terminal.
    let end = if style == Style::Markdown {
        "\n\n"
    } else {
        "\n"
    };
    let mut out = format!(
        "{} over {} ranks ({} grid, {}), transport {}, {} repetitions (+{} warm-up), {}% CI{}{end}",
        r.kernel,
        r.ranks,
        r.grid,
        r.launch,
        r.transport,
        r.repetitions,
        r.warmup,
        r.points
            .first()
            .map_or(95.0, |p| p.speedup.confidence * 100.0),
        if r.settings.is_empty() {
            String::new()
        } else {
            format!(", {}", r.settings.join(" "))
        }
    );
    // The kernel's run times are in ms: a whole solve, not a message's latency.
    if let Some(load) = &r.load {
        out.push_str(&format!("{}{end}", load.describe()));
    }
    out.push_str(&units_line(
        style,
        "kernel run times in ms, communication shares in % of the time in the kernel",
    ));
    let mut t = Table::new(vec![
        Column::right("n"),
        Column::right("sequential(ms)"),
        Column::right("parallel(ms)"),
        Column::right("speedup"),
        Column::right("eff."),
        Column::right("comm(%)"),
        Column::left("comm per rank(%)"),
    ]);
    for p in &r.points {
        let per_rank: Vec<String> = p
            .ranks
            .iter()
            .map(|k| format!("{:.0}", k.comm_share * 100.0))
            .collect();
        t.row([
            p.n.map_or("-".into(), |n| n.to_string()),
            with_ci(&p.sequential_s, 1e3),
            with_ci(&p.parallel_s, 1e3),
            with_ci(&p.speedup, 1.0),
            format!("{:.2}", p.efficiency),
            format!("{:.0}", p.comm_share * 100.0),
            per_rank.join(" "),
        ]);
        if let Some(c) = p.relaxation {
            // A relaxation cut off by the sweep limit has not met its tolerance: say so.
            let stopped = if Some(c.iterations) == max_sweeps {
                " (stopped by --max-iterations)"
            } else {
                ""
            };
            t.note(format!(
                "{} sweeps, residual {:e}{stopped}",
                c.iterations, c.residual
            ));
        }
    }
    out.push_str(&t.render(style));
    if style == Style::Markdown {
        out.push('\n');
    }
    // One line when every point was checked the same way, else one per point: the checks
    // name their sizes (a matmul's entry count), so the first one does not speak for all.
    let mut checks: Vec<&str> = r.points.iter().map(|p| p.check.as_str()).collect();
    checks.dedup();
    if checks.len() == 1 {
        out.push_str(&format!("checked in every repetition: {}{end}", checks[0]));
    } else {
        for p in &r.points {
            let at = p.n.map(|n| format!(" at n={n}")).unwrap_or_default();
            out.push_str(&format!(
                "checked in every repetition{at}: {}{end}",
                p.check
            ));
        }
    }
    out
}

/// Speedup against n with its confidence interval, and the ideal (P) as a reference line;
/// None for a single point (chunks), which a table says as well.
pub fn speedup_figure(r: &AppReport) -> Option<crate::figures::plots::Figure> {
    use crate::figures::plots::{
        Axis, Chart, ErrorBars, Figure, HLine, LegendAt, Line, Scale, Ticks,
    };
    let points: Vec<_> = r
        .points
        .iter()
        .filter_map(|p| Some((p.n? as f64, p)))
        .collect();
    if points.len() < 2 {
        return None;
    }
    Some(Figure::Chart(Chart {
        title: format!(
            "{} over {} ranks ({}), {}: speedup against the sequential baseline",
            r.kernel, r.ranks, r.grid, r.transport
        ),
        x: Axis {
            label: "n (n x n)".into(),
            // Linear: a log axis of numbers ticks only at powers of ten, often one of them.
            scale: Scale::Linear,
            ticks: Ticks::Number,
            from_zero: true,
        },
        y: Axis {
            label: "speedup".into(),
            scale: Scale::Linear,
            ticks: Ticks::Number,
            from_zero: true,
        },
        bands: Vec::new(),
        lines: vec![Line {
            label: "speedup (mean)".into(),
            colour: 0,
            dashed: false,
            markers: true,
            points: points.iter().map(|(x, p)| (*x, p.speedup.mean)).collect(),
        }],
        hlines: vec![HLine {
            label: format!("ideal ({} ranks)", r.ranks),
            colour: 1,
            y: r.ranks as f64,
        }],
        legend: LegendAt::Best,
        error_bars: vec![ErrorBars {
            colour: 0,
            points: points
                .iter()
                .filter_map(|(x, p)| {
                    let h = p.speedup.half_width?;
                    Some((*x, p.speedup.mean - h, p.speedup.mean + h))
                })
                .collect(),
        }],
        invalid: Vec::new(),
        regressions: vec![],
        style_keys: Vec::new(),
        sequential_colours: None,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::table::{check_aligned, Align};

    fn ci(xs: &[f64]) -> MeanCi {
        MeanCi::from_samples(xs, 0.95).unwrap()
    }

    fn point(n: Option<u64>, seconds: f64, ranks: usize) -> AppPoint {
        AppPoint {
            n,
            sequential_s: ci(&[seconds, seconds * 1.1]),
            parallel_s: ci(&[seconds / 3.0]),
            speedup: ci(&[3.0, 2.9, 3.1]),
            efficiency: 0.75,
            comm_share: 0.125,
            ranks: (0..ranks)
                .map(|rank| RankFigures {
                    rank,
                    total_s: 1.0,
                    comm_s: 0.5,
                    comm_share: 0.5,
                    received_bytes: 0,
                })
                .collect(),
            check: "the same sweeps".into(),
            relaxation: None,
        }
    }

    fn report() -> AppReport {
        let mut huge = point(Some(123_456_789), 98_765.432, 16);
        huge.relaxation = Some(jacobi::Converged {
            iterations: 1000,
            residual: 1e-300,
        });
        AppReport {
            schema: SCHEMA.into(),
            kernel: "jacobi".into(),
            transport: "mptcp".into(),
            ranks: 16,
            grid: "4x4".into(),
            launch: "local processes".into(),
            netns_prefix: None,
            started_at: String::new(),
            finished_at: String::new(),
            host: "naïve-host".into(),
            settings: vec!["max_iterations=1000".into()],
            repetitions: 2,
            warmup: 1,
            points: vec![point(Some(4), 1e-7, 2), huge, point(None, 0.5, 3)],
            load: None,
        }
    }

    /// The load beside a job is stated above its table, with what was lost and whether it
    /// covered the whole job.
    #[test]
    fn a_job_beside_load_says_so_above_its_table() {
        let mut r = report();
        r.load = Some(AppLoad {
            spec: "udp:30M".into(),
            server: "127.0.0.1:40000".into(),
            transport: "udp".into(),
            target_bits_per_s: Some(30e6),
            achieved_bits_per_s: 29.5e6,
            datagrams_sent: Some(10_000),
            datagrams_lost: Some(25),
            elapsed_ns: 12_300_000_000,
            covered: false,
        });
        let text = render(&r, Style::Plain);
        assert!(text.contains("background load udp:30M to 127.0.0.1:40000: 29.50 Mbit/s of udp payload received over 12.3 s (held at 30.00 Mbit/s), 25 of 10000 datagrams lost (0.25%); NOT over the whole job"), "{text}");
        let back: AppReport = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
        // A document saved before `load` existed still reads.
        let mut v = serde_json::to_value(report()).unwrap();
        v.as_object_mut().unwrap().remove("load");
        assert_eq!(serde_json::from_value::<AppReport>(v).unwrap().load, None);
    }

    #[test]
    fn the_speedup_table_aligns_with_huge_and_tiny_figures() {
        let text = table(&report());
        let rows: String = text
            .lines()
            .skip(2)
            .take_while(|l| !l.starts_with("checked"))
            .map(|l| format!("{l}\n"))
            .collect();
        let mut aligns = vec![Align::Right; 6];
        aligns.push(Align::Left);
        assert_eq!(
            check_aligned(&rows, &aligns, "  1000 sweeps"),
            Ok(()),
            "{text}"
        );
        assert!(text.contains("\n# units: kernel run times in ms"), "{text}");
        assert!(text.contains("(stopped by --max-iterations)"), "{text}");
        assert!(rows
            .lines()
            .next()
            .is_some_and(|h| h.contains("sequential(ms)")));
    }

    #[test]
    fn the_speedup_table_as_markdown_has_every_cell() {
        let text = render(&report(), Style::Markdown);
        let rows: Vec<&str> = text.lines().filter(|l| l.starts_with('|')).collect();
        assert_eq!(rows.len(), 5, "{text}");
        assert!(rows.iter().all(|l| l.matches('|').count() == 8), "{text}");
    }
}
