//! `wirebench compare-transports`: the same ping-pong size sweep over several transports, and
//! Table 1 of [Local ATM computing n.d.] (REFERENCES.md) for today's stacks: t0, r_max and n_1/2 per transport with confidence
//! intervals over independent runs, and each one's overhead against the lowest layer measured.

use crate::model::transports::{Comparison, Estimate, Overhead, SerialisationShare, TransportRow};
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::model::{PointResult, RunDocument};
use crate::plan::sink::Sink;
use crate::request::Request;
use crate::stats::ci::parse_confidence;
use crate::stats::sweep::SweepMetrics;
use crate::transport::TransportKind;

use crate::plan::runner;

/// What `compare-transports` measures: the same ping-pong size sweep over each transport.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareRequest {
    /// HOST[:PORT]; None: a server on loopback inside this process.
    pub to: Option<String>,
    pub psk_file: Option<std::path::PathBuf>,
    /// None: every transport that can run here.
    pub transports: Option<Vec<Entry>>,
    /// The sweep's sizes; sizes above a transport's largest message are left out for it.
    pub sizes: Vec<u64>,
    /// Time per size and run.
    pub duration: Duration,
    /// Independent sweeps per transport, interleaved.
    pub runs: u32,
    /// An entry's label; None: the lowest layer measured.
    pub baseline: Option<String>,
    /// Percent: 90, 95 or 99.
    pub confidence: u32,
    pub io_timeout: Duration,
    pub local: crate::transport::TransportConfig,
    /// Progress on stderr (when it is a terminal).
    pub progress: bool,
    /// Save every sweep in the results database (labelled with the transport and run).
    pub save: bool,
    /// The database (None: the default path).
    pub db: Option<std::path::PathBuf>,
}

/// One run's serialisation share at its smallest and its largest size (grpc).
type EndShares = (Option<f64>, Option<f64>);

/// One row of the comparison: a transport, and optionally another server to reach it through
/// (a relay in the path, as PVM's daemon route against its direct one), under a label.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub label: String,
    pub kind: TransportKind,
    /// HOST[:PORT] of the server (or relay) for this row alone; None: the comparison's.
    pub via: Option<String>,
    /// grpc: how its messages carry their bytes (`grpc/doubles`); None: the comparison's.
    pub encoding: Option<crate::model::vocab::Encoding>,
}

impl Entry {
    pub fn of(kind: TransportKind) -> Entry {
        Entry {
            label: kind.name().to_owned(),
            kind,
            via: None,
            encoding: None,
        }
    }
}

/// `[LABEL=]KIND[/ENCODING][@HOST[:PORT]]`: `tcp`, `grpc/doubles`, `routed=tcp@10.0.0.3:5301`.
/// Without a label, the entry's own text names the row.
pub fn parse_entry(s: &str) -> std::result::Result<Entry, String> {
    let (label, rest) = match s.split_once('=') {
        Some((l, r)) => (Some(l), r),
        None => (None, s),
    };
    let (kind, via) = match rest.split_once('@') {
        Some((k, v)) => (k, Some(v)),
        None => (rest, None),
    };
    let (kind, encoding) = match kind.split_once('/') {
        Some((k, e)) => {
            let e = <crate::model::vocab::Encoding as clap::ValueEnum>::from_str(e, true).map_err(
                |_| format!("unknown encoding '{e}' in '{s}' (available: bytes, doubles, records)"),
            )?;
            (k, Some(e))
        }
        None => (kind, None),
    };
    if let Some(l) = label {
        if l.is_empty()
            || !l
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
        {
            return Err(format!(
                "bad entry label '{l}' in '{s}': letters, digits, - _ . / only"
            ));
        }
    }
    if via.is_some_and(str::is_empty) {
        return Err(format!("'{s}': no server after '@' (KIND@HOST[:PORT])"));
    }
    let kind = TransportKind::from_name(kind).map_err(|_| {
        format!(
            "unknown transport '{kind}' in '{s}' (available: {}; an entry is [LABEL=]KIND[@HOST[:PORT]])",
            crate::transport::names()
        )
    })?;
    if encoding.is_some() && kind != TransportKind::Grpc {
        return Err(format!(
            "'{s}': an encoding applies to grpc alone (messages of {kind} carry plain bytes)"
        ));
    }
    Ok(Entry {
        label: label.unwrap_or(s).to_owned(),
        kind,
        via: via.map(str::to_owned),
        encoding,
    })
}

/// Rows ordered by an estimate, in groups of rows within noise of each other: a row joins the
/// group before it when its interval overlaps the interval of any row already in it. Rows
/// without an interval are left out: nothing says whether they differ.
pub fn order_within_noise(
    rows: &[(String, Option<Estimate>)],
    lowest_first: bool,
) -> Vec<Vec<String>> {
    let mut ranked: Vec<(&str, f64, f64)> = rows
        .iter()
        .filter_map(|(name, e)| {
            let e = e.as_ref()?;
            let h = e.ci_half_width?;
            Some((name.as_str(), e.mean - h, e.mean + h))
        })
        .collect();
    let mid = |r: &(&str, f64, f64)| (r.1 + r.2) / 2.0;
    ranked.sort_by(|a, b| {
        let o = mid(a).total_cmp(&mid(b));
        if lowest_first {
            o
        } else {
            o.reverse()
        }
    });
    let mut groups: Vec<Vec<String>> = Vec::new();
    let mut spans: Vec<(f64, f64)> = Vec::new();
    for (name, lo, hi) in ranked {
        match (groups.last_mut(), spans.last_mut()) {
            (Some(g), Some(span)) if lo <= span.1 && hi >= span.0 => {
                g.push(name.to_owned());
                *span = (span.0.min(lo), span.1.max(hi));
            }
            _ => {
                groups.push(vec![name.to_owned()]);
                spans.push((lo, hi));
            }
        }
    }
    groups
}

/// Prints nothing: compare-transports renders its own table at the end. Keeps the id the
/// results database gives the sweep, when it is saved.
#[derive(Default)]
struct Quiet(std::rc::Rc<std::cell::Cell<Option<i64>>>);

impl Sink for Quiet {
    fn begin(&mut self, _: &RunDocument) -> anyhow::Result<()> {
        Ok(())
    }
    fn point(&mut self, _: &RunDocument, _: &PointResult) -> anyhow::Result<()> {
        Ok(())
    }
    fn finish(&mut self, _: &RunDocument) -> anyhow::Result<()> {
        Ok(())
    }
    fn progress(&self, _: u64, _: Option<f64>) -> indicatif::ProgressBar {
        indicatif::ProgressBar::hidden()
    }
    fn saved_as(&mut self, id: i64) {
        self.0.set(Some(id));
    }
}

fn default_transports(c: &CompareRequest) -> Vec<Entry> {
    let root = nix::unistd::geteuid().is_root();
    TransportKind::SERVED
        .into_iter()
        .filter(|&k| k != TransportKind::Raw || root)
        .filter(|&k| k != TransportKind::Unix || c.to.is_none())
        .map(Entry::of)
        .collect()
}

/// One entry's sweep, as `run pingpong` would be asked for it.
fn sweep_request(c: &CompareRequest, entry: &Entry, sizes: &[u64]) -> Result<Request> {
    let kind = entry.kind;
    let mut r = Request::new(crate::pattern::PatternKind::Pingpong, kind);
    r.server.to = entry.via.clone().or_else(|| c.to.clone());
    r.server.psk_file = c.psk_file.clone();
    r.local = c.local.clone();
    if let Some(e) = entry.encoding {
        r.local.encoding = e;
    }
    // --tls is grpc's: every other entry runs as ever.
    r.local.tls = c.local.tls && kind == TransportKind::Grpc;
    r.sizes.size = Some(sizes.to_vec());
    r.stop.duration = Some(c.duration);
    r.timeouts.io = c.io_timeout;
    r.statistics.confidence = c.confidence;
    r.output.save = c.save;
    r.output.db = c.db.clone();
    // Nagle would hold the last segment of every message above the MSS for an ACK: off, as
    // NetPIPE does, wherever TCP options apply.
    r.socket.nodelay = kind.open(&r.local)?.capabilities().tcp_options;
    Ok(r)
}

/// What one sweep is, for the progress line: "tcp, 12 sizes, run 2 of 3".
fn sweep_text(label: &str, sizes: &[u64], run: u32, runs: u32) -> String {
    format!("{label}, {} sizes, run {} of {runs}", sizes.len(), run + 1)
}

/// Runs the comparison; transports that fail are reported with their error, the others
/// keep their figures.
pub fn compare(c: &CompareRequest) -> Result<Comparison> {
    let confidence = parse_confidence(c.confidence).map_err(anyhow::Error::msg)?;
    if c.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let entries = c
        .transports
        .clone()
        .unwrap_or_else(|| default_transports(c));
    if entries.is_empty() {
        bail!("--transports names no transport");
    }
    for (i, e) in entries.iter().enumerate() {
        if entries[..i].iter().any(|o| o.label == e.label) {
            bail!(
                "--transports names '{}' twice: give one of them a label (LABEL=KIND...)",
                e.label
            );
        }
    }
    if let Some(b) = &c.baseline {
        if !entries.iter().any(|e| &e.label == b) {
            bail!("--baseline {b} is not among the transports compared");
        }
    }
    // Each entry's sizes and plan, checked before anything runs.
    let mut setups = Vec::new();
    for entry in &entries {
        let kind = entry.kind;
        let max = kind.open(&c.local)?.capabilities().max_message;
        let sizes: Vec<u64> = c.sizes.iter().copied().filter(|&s| s <= max).collect();
        if sizes.len() < 2 {
            bail!(
                "--size leaves fewer than two sizes for {} (largest message {max} B)",
                entry.label
            );
        }
        let request = sweep_request(c, entry, &sizes)?;
        let plan = crate::plan::build(&request)
            .with_context(|| format!("planning the {} sweep", entry.label))?;
        setups.push((entry, sizes, request, plan));
    }
    runner::stop_on_ctrl_c(crate::store::save::recover_before_exit);
    // A sweep takes about as long as it has sizes.
    let per_run: usize = setups.iter().map(|(_, sizes, _, _)| sizes.len()).sum();
    let mut progress = crate::progress::Progress::new(
        "compare-transports",
        u64::from(c.runs) * setups.len() as u64,
        (u64::from(c.runs) * per_run as u64) as f64,
        c.progress,
    );
    let mut step = 0;
    let mut metrics: Vec<Vec<SweepMetrics>> = vec![Vec::new(); setups.len()];
    let mut errors: Vec<Option<String>> = vec![None; setups.len()];
    let mut saved: Vec<Vec<i64>> = vec![Vec::new(); setups.len()];
    // grpc: each run's serialisation share at its smallest and largest size.
    let mut shares: Vec<Vec<EndShares>> = vec![Vec::new(); setups.len()];
    let started = crate::env::now_rfc3339();
    // Interleaved: run r of every transport before run r + 1 of any, so that a slow spell of
    // the host falls on all of them alike.
    for run in 0..c.runs {
        for (i, (entry, sizes, args, plan)) in setups.iter().enumerate() {
            let name = &entry.label;
            step += 1;
            if errors[i].is_some() {
                // A transport that failed is not measured again: its work is done.
                progress.done(sizes.len() as f64);
                continue;
            }
            progress.step(step, &sweep_text(name, sizes, run, c.runs));
            // Saved like every run, each sweep labelled with what it was part of.
            let mut output = args.output.clone();
            output.label = Some(format!(
                "compare-transports {started}: {name}, run {} of {}",
                run + 1,
                c.runs
            ));
            let quiet = Quiet::default();
            let id = quiet.0.clone();
            let (mut sink, saving) = crate::store::save::attach_as(
                &output,
                Box::new(quiet),
                crate::store::db::Source::CompareTransports,
            )?;
            let mut report = runner::new_report(plan, args);
            report.label = output.label.clone();
            let mut control = runner::ControlRunner::new(args);
            let result = runner::run_with(plan, &mut report, sink.as_mut(), &mut control);
            report.finished_at = Some(crate::env::now_rfc3339());
            report.complete = result.is_ok();
            report.error = result.as_ref().err().map(crate::error::one_line);
            sink.finish(&report)?;
            saving.outcome()?;
            saved[i].extend(id.get());
            progress.done(sizes.len() as f64);
            if entry.kind == TransportKind::Grpc {
                let share = |size: Option<&u64>| {
                    report
                        .points
                        .iter()
                        .find(|p| Some(&p.key.size) == size)
                        .and_then(|p| p.rpc.as_ref()?.share_of_rtt)
                };
                shares[i].push((share(sizes.first()), share(sizes.last())));
            }
            match result {
                Ok(()) => match report.sweep_metrics.first() {
                    Some(g) => metrics[i].push(g.metrics.clone()),
                    None => errors[i] = Some("no sweep metrics (no completed sizes)".into()),
                },
                Err(e) => errors[i] = Some(crate::error::one_line(&e)),
            }
        }
    }
    progress.finish();
    let mut rows: Vec<TransportRow> = setups
        .iter()
        .enumerate()
        .map(|(i, (entry, sizes, _, _))| {
            let mut r = row(
                entry.kind,
                sizes,
                &metrics[i],
                errors[i].clone(),
                confidence,
            );
            r.entry = entry.label.clone();
            r.via = entry.via.clone();
            if entry.kind == TransportKind::Grpc {
                let pick = |f: fn(&EndShares) -> Option<f64>| {
                    Estimate::of(
                        &shares[i].iter().filter_map(f).collect::<Vec<_>>(),
                        confidence,
                    )
                };
                r.serialisation = Some(SerialisationShare {
                    encoding: entry.encoding.unwrap_or(c.local.encoding),
                    smallest_size: sizes.first().copied().unwrap_or(0),
                    at_smallest: pick(|s| s.0),
                    largest_size: sizes.last().copied().unwrap_or(0),
                    at_largest: pick(|s| s.1),
                });
            }
            r.saved_runs = saved[i].clone();
            if c.local.tls && entry.kind == TransportKind::Grpc {
                // The row says what was measured: grpc's layer with TLS in it.
                r.layer = "RPC: protobuf over HTTP/2 over TLS 1.3 over TCP".to_owned();
            }
            r
        })
        .collect();
    // The default baseline: the lowest layer, reached directly.
    let baseline = c.baseline.clone().or_else(|| {
        rows.iter()
            .filter(|r| r.t0_ns.is_some())
            .min_by_key(|r| (r.transport.layer().rank, r.via.is_some()))
            .map(|r| r.entry.clone())
    });
    if let Some(base) = rows
        .iter()
        .find(|r| Some(&r.entry) == baseline.as_ref())
        .cloned()
    {
        for r in &mut rows {
            r.overhead = overhead(r, &base);
        }
    }
    let t0_order = order_within_noise(
        &rows
            .iter()
            .map(|r| (r.entry.clone(), r.t0_ns.clone()))
            .collect::<Vec<_>>(),
        true,
    );
    let r_max_order = order_within_noise(
        &rows
            .iter()
            .map(|r| (r.entry.clone(), r.r_max_bits_per_s.clone()))
            .collect::<Vec<_>>(),
        false,
    );
    Ok(Comparison {
        schema: "wirebench.compare_transports",
        // 2: every time in nanoseconds and every rate in bits per second (1 had seconds and
        // bytes per second). 3: rows are entries (a label, a route), ordered within noise.
        schema_version: 3,
        server: c.to.clone(),
        duration_per_size_ns: crate::pattern::duration_ns(c.duration),
        runs: c.runs,
        confidence,
        baseline,
        transports: rows,
        t0_order,
        r_max_order,
        client_environment: crate::env::Environment::capture(),
    })
}

fn row(
    kind: TransportKind,
    sizes: &[u64],
    runs: &[SweepMetrics],
    error: Option<String>,
    confidence: f64,
) -> TransportRow {
    let pick = |f: &dyn Fn(&SweepMetrics) -> Option<f64>| -> Vec<f64> {
        runs.iter().filter_map(f).collect()
    };
    let mut t0 = Estimate::of(&pick(&|m| Some(m.t0_ns)), confidence);
    let mut r_max = Estimate::of(&pick(&|m| Some(m.r_max_bits_per_s)), confidence);
    // One run: the within-run intervals of the sweep are the best available.
    if let (Some(t), [m]) = (t0.as_mut(), runs) {
        t.ci_half_width = m.t0_ci_ns;
    }
    if let (Some(r), [m]) = (r_max.as_mut(), runs) {
        r.ci_half_width = m.r_max_ci_bits_per_s.map(|(lo, hi)| (hi - lo) / 2.0);
    }
    let n_half = Estimate::of(&pick(&|m| m.n_half_bytes), confidence);
    let fit_t0 = pick(&|m| m.fit.as_ref().map(|f| f.t0_ns));
    let fit_r = pick(&|m| m.fit.as_ref().map(|f| f.r_inf_bits_per_s));
    let fit_invalid_reason = if runs.is_empty() {
        Some("no sweep measured".to_owned())
    } else {
        runs.iter()
            .enumerate()
            .find(|(_, m)| m.valid_fit().is_none())
            .map(|(k, m)| {
                if runs.len() == 1 {
                    m.fit_reason()
                } else {
                    format!("run {} of {}: {}", k + 1, runs.len(), m.fit_reason())
                }
            })
    };
    let at_largest = runs
        .iter()
        .filter(|m| m.r_max_at_largest == Some(true))
        .count();
    let r_max_note = (at_largest > 0).then(|| {
        format!(
            "r_max at the largest size ({} B) in {at_largest} of {} run(s): the curve had not flattened, r_max is a lower bound and n_1/2 only an estimate against it",
            runs.iter().filter_map(|m| m.largest_size).max().unwrap_or(0),
            runs.len()
        )
    });
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    // The size where r_max was reached in most runs.
    let mut at: Vec<u64> = runs.iter().map(|m| m.r_max_size).collect();
    at.sort_unstable();
    let r_max_size = at
        .iter()
        .max_by_key(|s| at.iter().filter(|x| x == s).count())
        .copied();
    TransportRow {
        entry: kind.name().to_owned(),
        transport: kind,
        via: None,
        layer: kind.layer().what.to_owned(),
        saved_runs: Vec::new(),
        sizes: sizes.to_vec(),
        t0_ns: t0,
        t0_size: runs.first().map(|m| m.t0_size),
        r_max_bits_per_s: r_max,
        r_max_size,
        n_half_bytes: n_half,
        r_max_at_largest: at_largest > 0,
        r_max_note,
        fit_t0_ns: mean(&fit_t0),
        fit_r_inf_bits_per_s: mean(&fit_r),
        fit_valid: fit_invalid_reason.is_none(),
        fit_invalid_reason,
        overhead: None,
        error,
        serialisation: None,
    }
}

fn overhead(r: &TransportRow, base: &TransportRow) -> Option<Overhead> {
    let (t0, bt0) = (r.t0_ns.as_ref()?.mean, base.t0_ns.as_ref()?.mean);
    let (rm, brm) = (
        r.r_max_bits_per_s.as_ref()?.mean,
        base.r_max_bits_per_s.as_ref()?.mean,
    );
    Some(Overhead {
        t0_extra_ns: t0 - bt0,
        t0_ratio: t0 / bt0,
        r_max_ratio: rm / brm,
        n_half_ratio: match (&r.n_half_bytes, &base.n_half_bytes) {
            (Some(n), Some(b)) if b.mean > 0.0 => Some(n.mean / b.mean),
            _ => None,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::sweep::{derive, SweepPoint};

    fn sweep(points: &[(u64, f64)]) -> SweepMetrics {
        let pts: Vec<SweepPoint> = points
            .iter()
            .map(|&(size, one_way_s)| SweepPoint {
                size,
                one_way_ns: one_way_s * 1e9,
                one_way_ci_ns: None,
            })
            .collect();
        derive(&pts).unwrap()
    }

    #[test]
    fn a_row_shows_a_fit_only_when_every_run_has_a_valid_one() {
        // Run 1: t(n) = 10 us + n * 1 ns/B, still rising at 3000 B. Run 2: the line through
        // 1, 3 and 5 us at 1000, 2000 and 3000 B has t0 = -1 us.
        let linear = sweep(&[(1000, 11e-6), (2000, 12e-6), (3000, 13e-6)]);
        let negative = sweep(&[(1000, 1e-6), (2000, 3e-6), (3000, 5e-6)]);
        assert_eq!(linear.fit_valid, Some(true));
        assert_eq!(negative.fit_valid, Some(false));

        let one = row(
            TransportKind::Tcp,
            &[1000, 2000, 3000],
            std::slice::from_ref(&linear),
            None,
            0.95,
        );
        assert!(one.fit_valid && one.fit_invalid_reason.is_none());
        assert!((one.fit_t0_ns.unwrap() - 10e3).abs() < 1e-6);
        // 3000 B / 13 us is the peak: at the largest size.
        assert!(one.r_max_at_largest);
        assert_eq!(
            one.r_max_note.as_deref(),
            Some("r_max at the largest size (3000 B) in 1 of 1 run(s): the curve had not flattened, r_max is a lower bound and n_1/2 only an estimate against it")
        );

        let two = row(
            TransportKind::Tcp,
            &[1000, 2000, 3000],
            &[linear, negative],
            None,
            0.95,
        );
        assert!(!two.fit_valid);
        assert_eq!(
            two.fit_invalid_reason.as_deref(),
            Some("run 2 of 2: the fitted t0 is not positive (nor, then, n_1/2 = r_inf*t0): the one-way times are not a line t0 + n/r_inf over these sizes")
        );
        // The fitted numbers stay for inspection: the mean of 10 us and -1 us.
        assert!((two.fit_t0_ns.unwrap() - 4.5e3).abs() < 1e-6);
        // Run 2 peaked at its smallest size; run 1 at its largest: flagged, 1 of 2.
        assert!(two.r_max_note.unwrap().contains("in 1 of 2 run(s)"));

        let none = row(
            TransportKind::Udp,
            &[1, 2],
            &[],
            Some("refused".into()),
            0.95,
        );
        assert!(!none.fit_valid && !none.r_max_at_largest);
    }

    #[test]
    fn entries_name_a_transport_a_label_and_a_route() {
        assert_eq!(parse_entry("tcp").unwrap(), Entry::of(TransportKind::Tcp));
        let e = parse_entry("routed=tcp@10.0.0.3:5301").unwrap();
        assert_eq!(
            e,
            Entry {
                label: "routed".into(),
                kind: TransportKind::Tcp,
                via: Some("10.0.0.3:5301".into()),
                encoding: None,
            }
        );
        assert_eq!(parse_entry("udp@h").unwrap().label, "udp@h");
        let g = parse_entry("grpc/doubles").unwrap();
        assert_eq!(
            (g.label.as_str(), g.kind, g.encoding),
            (
                "grpc/doubles",
                TransportKind::Grpc,
                Some(crate::model::vocab::Encoding::Doubles)
            )
        );
        for bad in [
            "sctp",
            "=tcp",
            "a b=tcp",
            "tcp@",
            "x=pigeon@h",
            "tcp/doubles",
            "grpc/xml",
        ] {
            let err = parse_entry(bad).unwrap_err();
            assert_eq!(err.lines().count(), 1, "{bad}: {err}");
        }
    }

    fn est(mean: f64, h: f64) -> Option<Estimate> {
        Some(Estimate {
            mean,
            ci_half_width: Some(h),
            runs: 3,
        })
    }

    /// Overlapping intervals are one group, not a ranking; an overlap chains a third row in;
    /// a row without an interval is left out.
    #[test]
    fn rows_within_noise_are_grouped_not_ranked() {
        let rows = vec![
            ("tcp".to_string(), est(20.0, 1.0)),
            ("udp".to_string(), est(10.2, 0.5)),
            ("raw".to_string(), est(10.0, 0.5)),
            ("grpc".to_string(), est(60.0, 2.0)),
            ("quic".to_string(), est(21.5, 0.6)),
            ("unix".to_string(), None),
        ];
        let g = order_within_noise(&rows, true);
        assert_eq!(
            g,
            vec![
                vec!["raw".to_string(), "udp".into()],
                vec!["tcp".into(), "quic".into()],
                vec!["grpc".into()],
            ]
        );
        let g = order_within_noise(&rows, false);
        assert_eq!(g[0], vec!["grpc".to_string()]);
        assert_eq!(g[2], vec!["udp".to_string(), "raw".into()]);
        // Identical figures are never ranked, whatever the order they come in.
        let same = vec![
            ("a".to_string(), est(5.0, 0.1)),
            ("b".into(), est(5.0, 0.1)),
        ];
        assert_eq!(order_within_noise(&same, true).len(), 1);
    }

    #[test]
    fn the_progress_line_names_the_transport_and_run() {
        assert_eq!(
            sweep_text("mptcp", &[1, 2, 4], 1, 3),
            "mptcp, 3 sizes, run 2 of 3"
        );
    }
}
