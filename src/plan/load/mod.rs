//! Background load beside a measured test (`--load`): flows of their own, on a control
//! session of their own, to the same server as the measured test, running from just before
//! its timed phase to after it. For pingpong and rr the same point is also measured idle
//! first, so that latency idle and loaded are side by side.
//!
//! UDP load runs as back-to-back intervals, each a stream point of the load session paced
//! at the rate the [`pacer::ClosedLoopPacer`] sets from the receiver's count of the interval
//! before. TCP load runs as one stream point of N streams long enough to outlast the measured
//! point (another follows if it does not), with the server's interval reports.

pub mod pacer;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

pub use crate::request::load_spec::LoadSpec;

use super::runner::{PointRunner, RunOutcome};
use super::{PlannedPoint, RunPlan};
use crate::control::client::{ClientSide, PointOutcome, Session};
use crate::model::load::{
    LatencyFigures, LoadInterval, LoadResult, RttSeries, UnderLoad, RPM_STATISTIC,
};
use crate::model::RunDocument;
use crate::pattern::stream::{IntervalEvent, Pace};
use crate::pattern::{PatternKind, Role};
use crate::request::{LoadRequest, Request};
use crate::stats::LatencyRecorder;
use crate::transport::TransportKind;
use crate::units::Rate;
use pacer::{ClosedLoopPacer, ReceiverReport};

/// Length of one closed-loop interval of UDP load: short enough that the pacer corrects
/// a few times over a one-second test, long enough that the gap between intervals is a small
/// part of it. That gap is the control exchange (a few round trips) and the receiver's wait
/// for stragglers: up to 50 ms, and 500 ms (stream::DRAIN_IDLE) after an interval that lost
/// datagrams. The pacer counts the gaps against the load, and each interval's sending time
/// is reported (`sending_ns`).
pub const UDP_INTERVAL: Duration = Duration::from_millis(500);
/// How long the load runs before the measured test starts opening its connections: the
/// load's own setup and the first queue build-up.
pub const LEAD: Duration = Duration::from_millis(300);
/// TCP load: interval reports of the server's receivers.
const TCP_REPORT_INTERVAL: Duration = Duration::from_millis(250);
/// UDP load datagrams: payload bytes, as a UDP stream's default.
pub const UDP_LOAD_SIZE: u64 = 1400;

/// What one run's load and its idle twin gave, carried in the run's [`RunOutcome`].
#[derive(Debug, Clone, Default)]
pub struct LoadFigures {
    pub load: Option<LoadResult>,
    pub under_load: Option<UnderLoad>,
}

/// `--load`'s checks that need only the request (the share of a lab link is resolved by
/// [`resolve`] once the lab is known).
pub fn check(r: &Request, load: &LoadRequest) -> Result<()> {
    if r.transport == TransportKind::Mpi {
        bail!("--load runs its flows to a wirebench server: it does not work with -t mpi");
    }
    if r.server.one_port {
        bail!("--load opens data ports of its own: it does not work with --one-port");
    }
    let exchange = matches!(r.pattern, PatternKind::Pingpong | PatternKind::Rr);
    if load.only && !exchange {
        bail!("--load-only applies to pingpong and rr (which otherwise measure idle first)");
    }
    Ok(())
}

/// The load with a share of the lab link turned into a UDP rate: that share of the link's
/// a->b rate on the wire, as UDP payload of [`UDP_LOAD_SIZE`]-byte datagrams.
pub fn resolve(spec: LoadSpec, lab: Option<&crate::lab::LabState>) -> Result<LoadSpec> {
    let LoadSpec::Utilisation(share) = spec else {
        return Ok(spec);
    };
    let Some(lab) = lab else {
        bail!("--load {spec} is a share of a lab link's rate: use it with `wirebench lab run`, or give udp:RATE");
    };
    let Some(rate) = lab.config.forward.rate_bits_per_s else {
        bail!("--load {spec}: the lab link a->b has no rate (give the lab --rate, or --load udp:RATE)");
    };
    Ok(LoadSpec::Udp(
        share * crate::lab::goodput::udp(rate, lab.config.mtu, UDP_LOAD_SIZE, lab.config.framing),
    ))
}

/// A [`PointRunner`] that runs `inner`'s points with background load beside them.
pub struct LoadedRunner<'a> {
    inner: &'a mut dyn PointRunner,
    request: &'a Request,
    /// As given (for the report) and as run (a lab share resolved).
    given: LoadSpec,
    spec: LoadSpec,
    only: bool,
    pattern: PatternKind,
    session: Option<Session>,
    plan: Option<RunPlan>,
}

impl<'a> LoadedRunner<'a> {
    /// `spec` as [`resolve`] gave it; `given` as the user wrote it.
    pub fn new(
        inner: &'a mut dyn PointRunner,
        request: &'a Request,
        given: LoadSpec,
        spec: LoadSpec,
        only: bool,
    ) -> LoadedRunner<'a> {
        LoadedRunner {
            inner,
            request,
            given,
            spec,
            only,
            pattern: request.pattern,
            session: None,
            plan: None,
        }
    }
}

/// The load's own request: a forward stream of `spec` to `server`, with `base`'s
/// credentials, transport settings and timeouts, in points of `chunk`.
fn load_request(spec: LoadSpec, base: &Request, server: SocketAddr, chunk: Duration) -> Request {
    let (transport, streams, rate, interval) = match spec {
        LoadSpec::Tcp(n) => (TransportKind::Tcp, n, None, Some(TCP_REPORT_INTERVAL)),
        LoadSpec::Udp(b) | LoadSpec::Utilisation(b) => {
            (TransportKind::Udp, 1, Some(Rate::BitsPerSecond(b)), None)
        }
    };
    let mut r = Request::new(PatternKind::Stream, transport);
    r.server.to = Some(server.to_string());
    r.server.psk_file = base.server.psk_file.clone();
    r.local = base.local.clone();
    r.timeouts = base.timeouts.clone();
    r.traffic.parallel = streams;
    r.traffic.rate = rate;
    r.traffic.interval = interval;
    r.stop.duration = Some(chunk);
    r.stop.warmup = 0;
    if transport == TransportKind::Udp {
        r.sizes.size = Some(vec![UDP_LOAD_SIZE]);
    }
    r.output.save = false;
    r
}

/// How long one stream point of the load lasts.
fn chunk_length(spec: LoadSpec, measured: Option<Duration>) -> Duration {
    match spec {
        // A TCP load's streams keep their windows only while they last: one point covers the
        // lead, the measured phase and as much again after it.
        LoadSpec::Tcp(_) => LEAD * 2 + measured.unwrap_or(Duration::from_secs(1)) * 2,
        _ => UDP_INTERVAL,
    }
}

impl PointRunner for LoadedRunner<'_> {
    fn open(&mut self, plan: &RunPlan, report: &mut RunDocument) -> Result<()> {
        self.inner.open(plan, report)?;
        let server: SocketAddr = report
            .server
            .address
            .as_deref()
            .and_then(|a| a.parse().ok())
            .context("background load: the measured test's server address is not known")?;
        let measured = plan
            .points
            .iter()
            .filter_map(|p| p.spec.duration_ms)
            .max()
            .map(Duration::from_millis);
        let load_plan = super::build(&load_request(
            self.spec,
            self.request,
            server,
            chunk_length(self.spec, measured),
        ))
        .context("background load")?;
        let psk = crate::control::auth::Psk::load(self.request.server.psk_file.as_deref())?;
        let session = Session::open(
            server,
            load_plan.test.clone(),
            &self.request.local,
            self.request.timeouts.io,
            psk.as_ref(),
        )
        .context("background load: opening its session with the server")?;
        self.session = Some(session);
        self.plan = Some(load_plan);
        Ok(())
    }

    fn run_point(
        &mut self,
        planned: &PlannedPoint,
        client: &ClientSide,
        live: Option<mpsc::Sender<IntervalEvent>>,
    ) -> Result<RunOutcome> {
        let exchange = matches!(self.pattern, PatternKind::Pingpong | PatternKind::Rr);
        // Only the idle run's figures are kept: what was measured beside it (a trace) is
        // measured again beside the loaded run, which the point reports.
        let idle = if exchange && !self.only {
            Some(self.inner.run_point(planned, client, None)?.measured)
        } else {
            None
        };
        let (Some(session), Some(plan)) = (self.session.as_mut(), self.plan.as_ref()) else {
            bail!("background load: no session with the server");
        };
        let stop = AtomicBool::new(false);
        let (started_tx, started_rx) = mpsc::channel::<Instant>();
        let spec = self.spec;
        let inner = &mut *self.inner;
        let (outcome, load, measured) = std::thread::scope(|scope| {
            let stop = &stop;
            let load = scope.spawn(move || run_load(session, plan, spec, stop, started_tx));
            // The load's first interval has begun (or the load failed at once).
            let load_started = started_rx.recv().ok();
            if load_started.is_some() {
                std::thread::sleep(LEAD);
            }
            let began = Instant::now();
            let outcome = load_started.map(|_| inner.run_point(planned, client, live));
            let ended = Instant::now();
            stop.store(true, Ordering::SeqCst);
            let load = load
                .join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("the load thread panicked")));
            (outcome, load, (began, ended))
        });
        let load = load.context("background load")?;
        let outcome =
            outcome.context("background load: it ended before the measured test began")??;
        let result = load.result(&self.given, spec, measured);
        let under_load = exchange
            .then(|| {
                Some(UnderLoad {
                    idle: idle.as_ref().and_then(round_trips),
                    loaded: round_trips(&outcome.measured)?,
                    rpm_statistic: RPM_STATISTIC.into(),
                })
            })
            .flatten();
        Ok(RunOutcome {
            load: Some(LoadFigures {
                load: Some(result),
                under_load,
            }),
            ..outcome
        })
    }

    fn close(&mut self) {
        if let Some(s) = self.session.take() {
            s.close();
        }
        self.inner.close();
    }

    fn next_run(&mut self, point: usize, run: u32) {
        self.inner.next_run(point, run);
    }
}

/// The round trips of one run of an exchange, every connection's merged.
fn round_trips(o: &PointOutcome) -> Option<LatencyFigures> {
    let mut rec = LatencyRecorder::new();
    let mut series = Vec::new();
    for x in &o.exchanges {
        rec.merge(&x.rtt);
        series.extend_from_slice(&x.series);
    }
    LatencyFigures::of(&rec, RttSeries::thinned(series))
}

/// What the load did over one measured point: its intervals on the load's clock.
struct LoadRun {
    first: Option<Instant>,
    last_end: Option<Instant>,
    intervals: Vec<LoadInterval>,
    sent: u64,
    lost: u64,
    bytes: u64,
    /// The senders' timed phases, summed over the intervals.
    sending_ns: u64,
}

impl LoadRun {
    fn result(&self, given: &LoadSpec, spec: LoadSpec, measured: (Instant, Instant)) -> LoadResult {
        let elapsed_ns = self.intervals.last().map(|i| i.end_ns).unwrap_or(0);
        let udp = !matches!(spec, LoadSpec::Tcp(_));
        LoadResult {
            spec: given.to_string(),
            transport: if udp {
                TransportKind::Udp
            } else {
                TransportKind::Tcp
            }
            .name()
            .into(),
            streams: match spec {
                LoadSpec::Tcp(n) => n,
                _ => 1,
            },
            target_bits_per_s: match spec {
                LoadSpec::Udp(b) | LoadSpec::Utilisation(b) => Some(b),
                LoadSpec::Tcp(_) => None,
            },
            achieved_bits_per_s: if elapsed_ns > 0 {
                self.bytes as f64 * 8e9 / elapsed_ns as f64
            } else {
                0.0
            },
            datagrams_sent: udp.then_some(self.sent),
            datagrams_lost: udp.then_some(self.lost),
            elapsed_ns,
            sending_ns: self.sending_ns,
            covered: self.first.is_some_and(|f| f <= measured.0)
                && self.last_end.is_some_and(|e| e >= measured.1),
            intervals: self.intervals.clone(),
        }
    }
}

/// Runs load intervals on `session` until `stop` is set (the interval in progress is
/// finished: the load outlasts the measured test). `started` is told when the first begins.
fn run_load(
    session: &mut Session,
    plan: &RunPlan,
    spec: LoadSpec,
    stop: &AtomicBool,
    started: mpsc::Sender<Instant>,
) -> Result<LoadRun> {
    let Some(base) = plan.points.first() else {
        bail!("no load point was planned");
    };
    let mut pacer = match spec {
        LoadSpec::Udp(b) | LoadSpec::Utilisation(b) => Some(ClosedLoopPacer::new(b)),
        LoadSpec::Tcp(_) => None,
    };
    let mut run = LoadRun {
        first: None,
        last_end: None,
        intervals: Vec::new(),
        sent: 0,
        lost: 0,
        bytes: 0,
        sending_ns: 0,
    };
    let mut started = Some(started);
    loop {
        let mut point = base.spec.clone();
        if let Some(p) = &pacer {
            point.pace = Some(Pace {
                interval_ns: point.request_size as f64 * 8e9 / p.rate(),
                burst: 1,
            });
        }
        let begun = Instant::now();
        let t0 = *run.first.get_or_insert(begun);
        if let Some(tx) = started.take() {
            let _ = tx.send(begun);
        }
        let outcome = session.run_point(&point, &plan.client, None)?;
        let ended = Instant::now();
        run.last_end = Some(ended);
        let start_ns = begun.duration_since(t0).as_nanos() as u64;
        let end_ns = ended.duration_since(t0).as_nanos() as u64;
        let receivers = outcome
            .server
            .streams
            .iter()
            .filter(|s| s.role == Some(Role::Receiver));
        let sending_ns = outcome
            .client_streams
            .iter()
            .filter(|(_, s)| s.role == Some(Role::Sender))
            .map(|(_, s)| s.elapsed_ns)
            .max()
            .unwrap_or(0);
        run.sending_ns += sending_ns;
        let (mut bytes, mut sent, mut lost) = (0u64, 0u64, 0u64);
        for s in receivers.clone() {
            bytes += s.bytes_total;
            if let Some(l) = &s.loss {
                sent += l.sent;
                lost += l.lost;
            }
        }
        run.bytes += bytes;
        run.sent += sent;
        run.lost += lost;
        match pacer.as_mut() {
            Some(p) => {
                let paced = p.rate();
                let report = ReceiverReport {
                    received_bytes: bytes,
                    elapsed_ns: end_ns - start_ns,
                };
                run.intervals.push(LoadInterval {
                    start_ns,
                    end_ns,
                    paced_bits_per_s: Some(paced),
                    received_bits_per_s: report.bits_per_s().unwrap_or(0.0),
                    received_bytes: bytes,
                    lost: Some(lost),
                    sending_ns: Some(sending_ns),
                });
                p.report(report);
            }
            None => run
                .intervals
                .extend(tcp_intervals(receivers, start_ns, end_ns)),
        }
        if stop.load(Ordering::SeqCst) {
            return Ok(run);
        }
    }
}

/// A TCP load point's server intervals, the streams' summed, on the load's clock: each
/// receiver's intervals are counted from its own timed phase's start, which is taken to be
/// the point's (`start_ns`); the last interval ends at `end_ns` at the latest.
fn tcp_intervals<'s>(
    receivers: impl Iterator<Item = &'s crate::pattern::stream::StreamStats>,
    start_ns: u64,
    end_ns: u64,
) -> Vec<LoadInterval> {
    let mut out: Vec<LoadInterval> = Vec::new();
    for s in receivers {
        for (k, i) in s.intervals.iter().enumerate() {
            if out.len() <= k {
                out.push(LoadInterval {
                    start_ns: (start_ns + i.start_ns).min(end_ns),
                    end_ns: (start_ns + i.end_ns).min(end_ns),
                    paced_bits_per_s: None,
                    received_bits_per_s: 0.0,
                    received_bytes: 0,
                    lost: None,
                    sending_ns: None,
                });
            }
            out[k].received_bytes += i.bytes;
        }
    }
    for i in &mut out {
        let ns = i.end_ns.saturating_sub(i.start_ns);
        i.received_bits_per_s = if ns > 0 {
            i.received_bytes as f64 * 8e9 / ns as f64
        } else {
            0.0
        };
    }
    out
}

/// Load for as long as something else runs that is not a measured point of a plan (the
/// application kernels, `app --load`): started before it, stopped after it, with the same
/// flows, pacing and figures as a run's `--load`.
pub struct Background {
    stop: std::sync::Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Result<LoadRun>>,
    given: LoadSpec,
    spec: LoadSpec,
    /// When the load's first interval began.
    began: Instant,
}

impl Background {
    /// Opens a load session with `server` (a wirebench server) and starts the load; returns
    /// once its first interval has begun and [`LEAD`] has passed. `base` gives the
    /// credentials, this side's transport settings and the timeouts.
    pub fn start(given: LoadSpec, base: &Request, server: SocketAddr) -> Result<Background> {
        let spec = resolve(given, None)?;
        let plan = super::build(&load_request(spec, base, server, chunk_length(spec, None)))
            .context("background load")?;
        let psk = crate::control::auth::Psk::load(base.server.psk_file.as_deref())?;
        let mut session = Session::open(
            server,
            plan.test.clone(),
            &base.local,
            base.timeouts.io,
            psk.as_ref(),
        )
        .with_context(|| format!("background load: opening its session with {server}"))?;
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let (started_tx, started_rx) = mpsc::channel::<Instant>();
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("wb-load".into())
            .spawn(move || {
                let run = run_load(&mut session, &plan, spec, &flag, started_tx);
                session.close();
                run
            })
            .context("starting the background load")?;
        let Ok(began) = started_rx.recv() else {
            let why = match thread.join() {
                Ok(Err(e)) => crate::error::one_line(&e),
                _ => "it ended before it began".into(),
            };
            bail!("background load: {why}");
        };
        std::thread::sleep(LEAD);
        Ok(Background {
            stop,
            thread,
            given,
            spec,
            began,
        })
    }

    /// Stops the load once its current interval ends, and says what it did; `measured` is
    /// when the loaded work began (after [`Background::start`] returned).
    pub fn stop(self, measured_from: Instant) -> Result<LoadResult> {
        let ended = Instant::now();
        self.stop.store(true, Ordering::SeqCst);
        let run = self
            .thread
            .join()
            .map_err(|_| anyhow::anyhow!("the load thread panicked"))?
            .context("background load")?;
        debug_assert!(self.began <= measured_from);
        Ok(run.result(&self.given, self.spec, (measured_from, ended)))
    }
}
