//! Runs a plan: starts a local server when none is given, opens the session, measures every
//! point (with repeats), and hands each result to the output as soon as it exists, so that a
//! failure half-way keeps everything measured before it.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use anyhow::{Context, Result};

use super::{PlannedPoint, RunPlan};
use crate::control::admission::AccessConfig;
use crate::control::auth::Psk;
use crate::control::client::{resolve, ClientSide, PointOutcome, Session};
use crate::control::server::{Server, ServerConfig, DEFAULT_PORT};
use crate::model::stream::IntervalEvent;
use crate::model::{RunDocument, ServerInfo, Settings, SweepGroup, SCHEMA, SCHEMA_VERSION};
use crate::pattern::PatternKind;
use crate::plan::point_result::{headline_value, summarize};
use crate::plan::sink::Sink;
use crate::request::Request;
use crate::stats::sweep::{derive, LeftOut, SweepPoint};
use crate::transport::TransportKind;

/// Set by the first Ctrl-C: the run stops after the point in progress and keeps what it has.
static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether Ctrl-C was pressed (a study stops after its current run).
pub fn interrupted() -> bool {
    INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst)
}

/// The first Ctrl-C ends the run after its current point, with every finished point reported
/// (and saved); a second one ends the process at once, after `before_exit` (the caller's
/// last chance to keep what it holds, such as the recovery file of a run the results
/// database could not take: the run's end is skipped).
pub fn stop_on_ctrl_c(before_exit: fn()) {
    let _ = ctrlc::set_handler(move || {
        if INTERRUPTED.swap(true, std::sync::atomic::Ordering::SeqCst) {
            before_exit();
            std::process::exit(130);
        }
        eprintln!("wirebench: interrupted: finishing the current point (Ctrl-C again to quit now)");
    });
}

/// Minimum runs before --until-ci may stop (netperf's -i default minimum is 3 too).
const UNTIL_CI_MIN_RUNS: u32 = 3;

pub fn new_report(plan: &RunPlan, request: &Request) -> RunDocument {
    let args = request;
    let t = &plan.test;
    RunDocument {
        schema: SCHEMA.into(),
        schema_version: SCHEMA_VERSION,
        wirebench_version: env!("CARGO_PKG_VERSION").into(),
        started_at: crate::env::now_rfc3339(),
        finished_at: None,
        command: std::env::args().collect(),
        label: args.output.label.clone(),
        pattern: t.pattern,
        transport: t.transport,
        server: ServerInfo {
            address: args.server.to.clone(),
            self_hosted: args.server.to.is_none(),
            one_port: t.one_port,
            middlebox: None,
        },
        client_environment: crate::env::Environment::capture(),
        server_environment: None,
        settings: Settings {
            streams: t.streams,
            direction: t.direction,
            burst: t.burst,
            warmup: args.stop.warmup,
            duration_ns: plan
                .points
                .first()
                .and_then(|p| p.spec.duration_ms)
                .map(|ms| ms.saturating_mul(1_000_000)),
            bytes: args.stop.bytes,
            iterations: args.stop.iterations,
            rate: args.traffic.rate,
            pace_burst: args.traffic.pace_burst,
            interval_ns: args.traffic.interval.map(crate::pattern::duration_ns),
            write_size: t.write_size,
            think_ns: t.think_ns,
            length_prefix_bytes: t.length_prefix,
            arrivals: match t.pattern {
                PatternKind::Pingpong | PatternKind::Rr => Some(
                    t.open_loop
                        .map_or(crate::model::vocab::Arrivals::Closed, |o| o.arrivals),
                ),
                _ => None,
            },
            open_loop: t.open_loop,
            nodelay: args.socket.nodelay || plan.nodelay_auto,
            nodelay_auto: plan.nodelay_auto,
            // One algorithm for the whole run; a sweep's are in the points' keys.
            cc: plan.client.socket.cc.clone(),
            mss: args.socket.mss,
            spin: args.socket.spin,
            client_cpus: args.socket.cpu.clone(),
            server_cpus: args.socket.server_cpu.clone(),
            confidence: plan.confidence,
            repeat: plan.repeat,
            until_ci: plan.until_ci,
            max_repeat: plan.max_repeat,
            io_timeout_ns: crate::pattern::duration_ns(args.timeouts.io),
            loss_timeout_ns: crate::pattern::duration_ns(args.timeouts.loss),
            fast: t.fast.clone(),
            encoding: (t.transport == crate::transport::TransportKind::Grpc)
                .then_some(request.local.encoding),
            tls: (t.transport == crate::transport::TransportKind::Grpc).then_some(t.tls),
            path_timing: t.path_timing,
        },
        swept: plan.swept,
        points: Vec::new(),
        sweep_metrics: Vec::new(),
        anomalies: Vec::new(),
        lab: None,
        complete: false,
        error: None,
        // Every point the plan holds, so that a run cut short (Ctrl-C, a lost server, a
        // kill) says how many of them it measured.
        planned_points: u32::try_from(plan.points.len()).ok(),
        mesh: None,
    }
}

/// Where a plan's points are measured: a wirebench server over the control protocol
/// ([`ControlRunner`]), or anything else that produces both sides' figures for a point (the
/// other rank of an MPI job). The runner around it (repeats, summaries, output) is the same.
pub trait PointRunner {
    /// Before the first point: reaches the other side and fills in the report's server part.
    fn open(&mut self, plan: &RunPlan, report: &mut RunDocument) -> Result<()>;
    /// One run of one point, with what was measured beside it. `live` receives this side's
    /// interval reports as they happen.
    fn run_point(
        &mut self,
        planned: &PlannedPoint,
        client: &ClientSide,
        live: Option<mpsc::Sender<IntervalEvent>>,
    ) -> Result<RunOutcome>;
    /// Ends the test politely; called once the points are done, also after a failure.
    fn close(&mut self);
    /// Before each run of each point: which one it is (`--trace` names its files by it).
    fn next_run(&mut self, _point: usize, _run: u32) {}
}

/// What one run of one point gave: both sides' figures, and beside them what was measured
/// around that run. Each runner fills the field of what it measures and hands on the rest of
/// its inner runner's outcome, so nothing measured in a run outlives it in a runner's state.
pub struct RunOutcome {
    /// Both sides' figures of the run.
    pub measured: PointOutcome,
    /// With --trace: the capture of this run.
    pub trace: Option<crate::trace::TraceSummary>,
    /// With --load: the background load of this run, and for exchanges the same point idle.
    pub load: Option<super::load::LoadFigures>,
    /// With --compete: the flows' shares in this run.
    pub fairness: Option<crate::model::fairness::FairnessResult>,
}

impl RunOutcome {
    /// A run with nothing measured beside it.
    pub fn of(measured: PointOutcome) -> RunOutcome {
        RunOutcome {
            measured,
            trace: None,
            load: None,
            fairness: None,
        }
    }
}

/// The usual runner: a session with a wirebench server, started on loopback when `--to`
/// is not given.
pub struct ControlRunner<'a> {
    args: &'a Request,
    session: Option<Session>,
    tracer: Option<super::trace::Tracer>,
}

impl<'a> ControlRunner<'a> {
    pub fn new(args: &'a Request) -> ControlRunner<'a> {
        ControlRunner {
            args,
            session: None,
            tracer: None,
        }
    }
}

impl PointRunner for ControlRunner<'_> {
    fn open(&mut self, plan: &RunPlan, report: &mut RunDocument) -> Result<()> {
        let args = self.args;
        let psk = Psk::load(args.server.psk_file.as_deref())?.map(Arc::new);
        let addr = match &args.server.to {
            Some(target) => resolve(target, DEFAULT_PORT)?,
            None => {
                // The user's own server on loopback: every feature, no budgets.
                let config = ServerConfig {
                    limits: crate::control::limits::Limits::local(),
                    io_timeout: args.timeouts.io,
                    transport: args.local.clone(),
                    access: AccessConfig {
                        psk: psk.clone(),
                        ..AccessConfig::default()
                    },
                    ..ServerConfig::default()
                };
                let server = Server::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), config)
                    .context("starting the local server")?;
                server.spawn()?
            }
        };
        report.server.address = Some(addr.to_string());
        let session = Session::open(
            addr,
            plan.test.clone(),
            &args.local,
            args.timeouts.io,
            psk.as_deref(),
        )?;
        report.server_environment = Some(session.server_env.clone());
        report.server.one_port = session.one_port();
        report.server.middlebox = session.middlebox.clone();
        if let Some(t) = &args.trace {
            self.tracer = Some(super::trace::Tracer::new(t, plan, args, report, &session)?);
        }
        self.session = Some(session);
        Ok(())
    }

    fn next_run(&mut self, point: usize, run: u32) {
        if let Some(t) = self.tracer.as_mut() {
            t.next_run(point, run);
        }
    }

    fn run_point(
        &mut self,
        planned: &PlannedPoint,
        client: &ClientSide,
        live: Option<mpsc::Sender<IntervalEvent>>,
    ) -> Result<RunOutcome> {
        let Some(session) = self.session.as_mut() else {
            anyhow::bail!("no session with the server");
        };
        // The capture starts before the data connections are opened (their handshakes
        // carry the window scale) and ends once the point's last segments are in.
        let capture = self.tracer.as_mut().map(|t| t.start()).transpose()?;
        let outcome = session.run_point(&planned.spec, client, live);
        if let (Some(t), Some(c)) = (self.tracer.as_mut(), capture) {
            let finished = t.finish(c, outcome.as_ref().ok());
            let outcome = outcome?;
            return Ok(RunOutcome {
                trace: Some(finished?),
                ..RunOutcome::of(outcome)
            });
        }
        outcome.map(RunOutcome::of)
    }

    fn close(&mut self) {
        if let Some(s) = self.session.take() {
            s.close();
        }
    }
}

/// Runs the plan with `runner` measuring each point, filling `report` and feeding `sink`;
/// `runner` is closed however it ends. An error leaves `report` with every point measured
/// before it.
pub fn run_with(
    plan: &RunPlan,
    report: &mut RunDocument,
    sink: &mut dyn Sink,
    runner: &mut dyn PointRunner,
) -> Result<()> {
    let result = run_points(plan, report, sink, runner);
    runner.close();
    result
}

/// How long the run's points take by their time limits (runs per point included); None when
/// a point stops after a count of bytes or messages, whose time is not known ahead.
fn expected_seconds(plan: &RunPlan) -> Option<f64> {
    let ms: Option<u64> = plan.points.iter().map(|p| p.spec.duration_ms).sum();
    Some(ms? as f64 / 1e3 * f64::from(plan.repeat.max(1)))
}

fn run_points(
    plan: &RunPlan,
    report: &mut RunDocument,
    sink: &mut dyn Sink,
    runner: &mut dyn PointRunner,
) -> Result<()> {
    runner.open(plan, report)?;
    sink.begin(report)?;

    let progress = sink.progress(plan.points.len() as u64, expected_seconds(plan));
    for (index, planned) in plan.points.iter().enumerate() {
        let client = ClientSide {
            socket: planned.client_socket.clone(),
            ..plan.client.clone()
        };
        let max_runs = if plan.until_ci.is_some() {
            plan.max_repeat
        } else {
            plan.repeat
        };
        let mut runs: Vec<PointOutcome> = Vec::new();
        let mut values = Vec::new();
        // A failed write of an interval line ends the run once the point is kept.
        let mut unshown: Result<()> = Ok(());
        // The lab link's drops over the last run, read outside it (they take a few process
        // starts and a round trip to the delay line).
        let mut lab_counters = None;
        let mut trace = None;
        let mut load = None;
        let mut fairness = None;
        for run_no in 0..max_runs {
            runner.next_run(index, run_no);
            let lab_before = report.lab.as_ref().map(crate::lab::link_counters);
            let (outcome, shown) = run_one(runner, planned, &client, plan, sink);
            if let (Some(lab), Some(before)) = (&report.lab, &lab_before) {
                lab_counters = Some(crate::lab::link_counters(lab).since(before));
            }
            let outcome = outcome.with_context(|| {
                format!("point {} (size {} bytes)", index + 1, planned.key.size)
            })?;
            // A repeated point keeps, of each kind, the side result of its latest run that
            // had one.
            trace = outcome.trace.or(trace);
            load = outcome.load.or(load);
            fairness = outcome.fairness.or(fairness);
            let outcome = outcome.measured;
            if unshown.is_ok() {
                unshown = shown;
            }
            if let Some(v) = headline_value(&plan.test, &outcome) {
                values.push(v);
            }
            runs.push(outcome);
            if let Some(target) = plan.until_ci {
                let n = run_no + 1;
                // A value that is not a measurement (below the floors of stats::validity)
                // cannot make the interval meet its target: the repeats go on.
                let xs: Vec<f64> = values.iter().map(|(x, _)| *x).collect();
                let met = values.iter().all(|(_, v)| !v.is_invalid())
                    && crate::stats::MeanCi::from_samples(&xs, plan.confidence)
                        .and_then(|m| m.relative_half_width())
                        .is_some_and(|w| w <= target);
                if n >= UNTIL_CI_MIN_RUNS && met {
                    break;
                }
            }
        }
        if let Some(result) = summarize(
            index,
            &plan.test,
            planned,
            &runs,
            values,
            plan.confidence,
            plan.until_ci,
        ) {
            let mut result = result;
            result.trace = trace;
            if let Some(l) = load {
                result.load = l.load;
                result.under_load = l.under_load;
            }
            result.fairness = fairness;
            if let Some(lab) = &report.lab {
                add_theoretical_goodput(lab, plan.test.transport, &mut result);
            }
            let same_host = super::instrumented::same_host(
                report.server.self_hosted,
                report.server.address.as_deref(),
            );
            if let Some(last) = runs.last() {
                super::instrumented::fill(
                    &mut result,
                    last,
                    same_host,
                    lab_counters,
                    plan.test.transport,
                    report.lab.as_ref().map(|l| l.config.mtu),
                );
            }
            // The physics guard, before the point is shown, kept, fitted or compared.
            super::guard::point(&mut result, guard_facts(plan, report, same_host));
            let shown = progress.suspend(|| sink.point(report, &result));
            report.points.push(result);
            if unshown.is_ok() {
                unshown = shown;
            }
        }
        if let Err(e) = unshown {
            progress.finish_and_clear();
            report.sweep_metrics = sweep_metrics(plan, report);
            report.anomalies = anomalies(plan, report);
            return Err(e);
        }
        progress.inc(1);
        if INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) && index + 1 < plan.points.len() {
            progress.finish_and_clear();
            report.sweep_metrics = sweep_metrics(plan, report);
            report.anomalies = anomalies(plan, report);
            anyhow::bail!(
                "interrupted after {} of {} points",
                report.points.len(),
                plan.points.len()
            );
        }
    }
    progress.finish_and_clear();
    report.sweep_metrics = sweep_metrics(plan, report);
    report.anomalies = anomalies(plan, report);
    Ok(())
}

/// Over a lab link, the goodput its rate allows next to each measured direction. The client
/// runs on host a, so client-to-server traffic crosses the link's a->b direction.
fn add_theoretical_goodput(
    lab: &crate::lab::LabState,
    transport: TransportKind,
    result: &mut crate::model::PointResult,
) {
    use crate::lab::goodput;
    let size = result.key.size;
    let (mtu, framing) = (lab.config.mtu, lab.config.framing);
    let Some(stream) = result.stream.as_mut() else {
        return;
    };
    for t in &mut stream.totals {
        let dir = if t.direction == "client_to_server" {
            &lab.config.forward
        } else {
            &lab.config.back
        };
        // With random loss, each message keeps the link's goodput only when all its frames
        // arrive (for TCP an upper bound: see `goodput::loss_share`).
        t.theoretical_goodput_bits_per_s = dir.rate_bits_per_s.and_then(|r| match transport {
            TransportKind::Tcp => Some(
                goodput::tcp(r, mtu, framing).tcp_bits_per_s * goodput::loss_share(dir.loss, 1),
            ),
            TransportKind::Udp => Some(
                goodput::udp(r, mtu, size, framing)
                    * goodput::loss_share(dir.loss, goodput::udp_frames(size, mtu)),
            ),
            TransportKind::Raw => Some(
                goodput::raw(r, mtu, size, framing)
                    * goodput::loss_share(dir.loss, goodput::raw_frames(size, mtu)),
            ),
            _ => None,
        });
    }
}

/// What the physics guard knows of this run besides a point's own figures.
fn guard_facts<'a>(
    plan: &RunPlan,
    report: &'a RunDocument,
    same_host: bool,
) -> super::guard::Facts<'a> {
    super::guard::Facts {
        transport: plan.test.transport,
        lab: report.lab.as_ref().map(|l| &l.config),
        same_host,
        pingpong: plan.test.pattern == PatternKind::Pingpong,
    }
}

/// One run of one point, with live interval reports printed as they arrive; next to the
/// outcome, the first failure to print one (the point's figures stand without them).
fn run_one(
    runner: &mut dyn PointRunner,
    planned: &PlannedPoint,
    client: &ClientSide,
    plan: &RunPlan,
    sink: &mut dyn Sink,
) -> (Result<RunOutcome>, Result<()>) {
    if plan.test.interval_ms.is_none() || !sink.wants_intervals() {
        return (runner.run_point(planned, client, None), Ok(()));
    }
    let (tx, rx) = mpsc::channel::<IntervalEvent>();
    let mut printer = sink.interval_printer();
    std::thread::scope(|scope| {
        let handle = scope.spawn(move || {
            let mut printed = Ok(());
            while let Ok(ev) = rx.recv_timeout(Duration::from_secs(3600)) {
                // After a failed write the rest are received and dropped: the measuring
                // side never blocks on its reports.
                if printed.is_ok() {
                    printed = printer(&ev);
                }
            }
            printed
        });
        let result = runner.run_point(planned, client, Some(tx));
        let printed = handle
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the interval printer failed")));
        (result, printed)
    })
}

/// What the points of one size sweep share: the four buffers and the algorithm.
type SweepGroupKey = (
    u64,
    u64,
    u64,
    u64,
    Option<crate::transport::sockopt::CcName>,
);

/// t0, r_max, n_1/2 and the Hockney fit for each group of points that differ only in size.
/// The points that stand out from both neighbours along each swept axis, among points that
/// share every other parameter; only valid headlines are compared.
fn anomalies(plan: &RunPlan, report: &RunDocument) -> Vec<crate::model::Anomaly> {
    use crate::plan::PointKey;
    use crate::transport::sockopt::CcName;
    type Axis = (&'static str, bool, fn(&PointKey) -> u64);
    let axes: [Axis; 5] = [
        ("size", plan.swept.size, |k| k.size),
        ("sndbuf", plan.swept.sndbuf, |k| k.sndbuf),
        ("rcvbuf", plan.swept.rcvbuf, |k| k.rcvbuf),
        ("server_sndbuf", plan.swept.server_sndbuf, |k| {
            k.server_sndbuf
        }),
        ("server_rcvbuf", plan.swept.server_rcvbuf, |k| {
            k.server_rcvbuf
        }),
    ];
    let mut out = Vec::new();
    for (position, (axis, swept, along)) in axes.into_iter().enumerate() {
        if !swept {
            continue;
        }
        // The other parameters, with this axis blanked: one line of points per value. An
        // algorithm has no order to be a neighbour along, so it only tells lines apart.
        let rest = |k: &PointKey| {
            let mut all = [k.size, k.sndbuf, k.rcvbuf, k.server_sndbuf, k.server_rcvbuf];
            all[position] = u64::MAX;
            (all, k.cc)
        };
        let mut lines: Vec<([u64; 5], Option<CcName>)> = Vec::new();
        for p in &report.points {
            let r = rest(&p.key);
            if !lines.contains(&r) {
                lines.push(r);
            }
        }
        for line in lines {
            let mut pts: Vec<(usize, &crate::model::PointResult)> = report
                .points
                .iter()
                .enumerate()
                .filter(|(_, p)| rest(&p.key) == line)
                .collect();
            pts.sort_by_key(|(_, p)| along(&p.key));
            let values: Vec<Option<f64>> = pts
                .iter()
                .map(|(_, p)| {
                    let h = &p.headline;
                    if h.validity.is_invalid() {
                        return None;
                    }
                    h.over_runs
                        .as_ref()
                        .map(|m| m.mean)
                        .or_else(|| h.values.first().copied())
                })
                .collect();
            for o in crate::stats::anomaly::outliers(&values, crate::model::ANOMALY_THRESHOLD) {
                out.push(crate::model::Anomaly {
                    axis: axis.to_owned(),
                    point: pts[o.index].0,
                    value: values[o.index].unwrap_or(f64::NAN),
                    vs_previous: o.vs_previous,
                    vs_next: o.vs_next,
                });
            }
        }
    }
    out
}

fn sweep_metrics(plan: &RunPlan, report: &RunDocument) -> Vec<SweepGroup> {
    if plan.test.pattern != PatternKind::Pingpong || !plan.swept.size {
        return Vec::new();
    }
    let mut groups: Vec<SweepGroup> = Vec::new();
    let mut keys: Vec<SweepGroupKey> = Vec::new();
    for p in &report.points {
        let k = (
            p.key.sndbuf,
            p.key.rcvbuf,
            p.key.server_sndbuf,
            p.key.server_rcvbuf,
            p.key.cc,
        );
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    for k in keys {
        // Points whose figures are not valid (too few samples) are left out, and said to be.
        let mut left_out = Vec::new();
        let pts: Vec<SweepPoint> = report
            .points
            .iter()
            .filter(|p| {
                (
                    p.key.sndbuf,
                    p.key.rcvbuf,
                    p.key.server_sndbuf,
                    p.key.server_rcvbuf,
                    p.key.cc,
                ) == k
            })
            .filter_map(|p| {
                let l = p.latency.as_ref()?;
                let one_way = l.one_way_mean_ns?;
                if l.validity.is_invalid() {
                    left_out.push(LeftOut {
                        size: p.key.size,
                        reason: l.validity.reason().to_owned(),
                    });
                    return None;
                }
                Some(SweepPoint {
                    size: p.key.size,
                    one_way_ns: one_way,
                    one_way_ci_ns: l.one_way_ci_ns,
                })
            })
            .collect();
        if let Some(mut metrics) = derive(&pts) {
            metrics.left_out = left_out;
            let same_host = super::instrumented::same_host(
                report.server.self_hosted,
                report.server.address.as_deref(),
            );
            super::guard::sweep(&mut metrics, guard_facts(plan, report, same_host));
            groups.push(SweepGroup {
                sndbuf: k.0,
                rcvbuf: k.1,
                server_sndbuf: k.2,
                server_rcvbuf: k.3,
                cc: k.4,
                metrics,
            });
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Request;
    use std::time::Duration;

    #[test]
    fn a_run_expects_its_points_time_limits_times_its_runs() {
        let mut r = Request::default();
        r.sizes.size = Some(vec![1, 1024, 4096]);
        r.stop.duration = Some(Duration::from_millis(2500));
        r.statistics.repeat = 2;
        let plan = crate::plan::build(&r).unwrap();
        assert_eq!(expected_seconds(&plan), Some(15.0));
        // A point that stops after a count has no time known ahead.
        r.stop.duration = None;
        r.stop.iterations = Some(1000);
        let plan = crate::plan::build(&r).unwrap();
        assert_eq!(expected_seconds(&plan), None);
    }
}
