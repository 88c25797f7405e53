//! The wirebench server: answers any number of clients at once, each test on its own
//! threads with its own data listener, and never lets one client's misbehaviour reach another.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::access::ClientKey;
use super::admission::{Acceptor, AccessConfig, Admitted, SessionSlot, Slots};
use super::auth::Nonce;
use super::budget::{Budget, Footprint};
use super::counters::ServerCounters;
use super::framing::{receive, receive_by, write_frame, Received};
use super::limits::Limits;
use super::machine::{ServerAction, ServerMachine, ServerSetup};
use super::oneport::DataRoutes;
use super::protocol::{ClientMessage, PointSpec, ServerMeasurement, ServerMessage, TestSpec};
use super::rate::RateBudget;
use super::refusal::Refusal;
use super::worker::{
    join_senders, run_worker, senders_done, Handle, Joined, WorkerPlan, WorkerResult,
};
use crate::env::Environment;
use crate::pattern::stream::EndSignal;
use crate::pattern::{self, crr, DataChannel, PatternKind, Role, Side};
use crate::transport::{self, Cookie, HandedOverListener, Listener, Transport};

/// The documented default control port.
pub const DEFAULT_PORT: u16 = 5320;

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub limits: Limits,
    /// Bound on every data-path send and receive, and on connection setup.
    pub io_timeout: Duration,
    /// Log one line per session to stderr.
    pub log: bool,
    /// This side's transport settings (interface, certificates).
    pub transport: crate::transport::TransportConfig,
    /// Who may connect, how much one client may hold, and the pre-shared key.
    pub access: AccessConfig,
    /// What all running points hold together, against the limits' totals.
    pub budget: Arc<Budget>,
    /// The bit rates all running points reserve, in all and per client.
    pub rates: Arc<RateBudget>,
    /// Sessions, refusals and bytes moved since the server started (`serve --metrics`).
    pub counters: Arc<ServerCounters>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            limits: Limits::default(),
            io_timeout: Duration::from_secs(10),
            log: false,
            transport: Default::default(),
            access: AccessConfig::default(),
            budget: Arc::default(),
            rates: Arc::default(),
            counters: Arc::default(),
        }
    }
}

pub struct Server {
    listener: TcpListener,
    config: Arc<ServerConfig>,
    slots: Arc<Slots>,
    routes: Arc<DataRoutes>,
}

impl Server {
    pub fn bind(addr: SocketAddr, config: ServerConfig) -> Result<Server> {
        let listener =
            TcpListener::bind(addr).with_context(|| format!("cannot listen on {addr}"))?;
        Ok(Server {
            listener,
            config: Arc::new(config),
            slots: Arc::new(Slots::default()),
            routes: Arc::new(DataRoutes::default()),
        })
    }

    pub fn local_addr(&self) -> Result<SocketAddr> {
        Ok(self.listener.local_addr()?)
    }

    /// Accepts clients forever: admission on this thread, one thread per admitted session.
    pub fn serve(self) -> Result<()> {
        let mut acceptor = Acceptor::new(
            &self.listener,
            &self.config.access,
            self.config.limits.max_sessions,
            &self.routes,
            Arc::clone(&self.slots),
            self.config.log,
            Arc::clone(&self.config.counters),
        );
        let (config, routes) = (&self.config, &self.routes);
        acceptor
            .run(&mut |admitted| {
                let peer = admitted.peer;
                let config = Arc::clone(config);
                let routes = Arc::clone(routes);
                let spawned = thread::Builder::new()
                    .name("wb-session".into())
                    .spawn(move || session_thread(admitted, config, routes));
                // The connection and its slot went with the closure: both are given back.
                if let Err(e) = spawned {
                    eprintln!("wirebench serve: no thread for the session from {peer}: {e}");
                }
            })
            .context("the control listener failed")
    }

    /// Serves in a background thread (the self-hosted server of `wirebench run`).
    pub fn spawn(self) -> Result<SocketAddr> {
        let addr = self.local_addr()?;
        thread::Builder::new()
            .name("wb-server".into())
            .spawn(move || self.serve())?;
        Ok(addr)
    }
}

fn session_thread(admitted: Admitted, config: Arc<ServerConfig>, routes: Arc<DataRoutes>) {
    let Admitted {
        mut stream,
        peer,
        accepted,
        hello,
        slot,
    } = admitted;
    let counted = config.counters.session();
    let result = session(&mut stream, &hello, accepted, &config, &routes, &slot);
    let last = slot.last_one();
    drop(slot);
    if let Err(e) = result {
        // Tell the client why, if it is still listening; a failed write changes nothing.
        let refusal = Refusal::of(&e);
        config.counters.refused(refusal.kind);
        if config.log {
            eprintln!(
                "wirebench serve: session from {peer} ended ({}): {}",
                refusal.kind,
                crate::text::printable(&refusal.message)
            );
        }
        let _ = write_frame(&mut stream, &ServerMessage::from(refusal));
    } else if config.log {
        eprintln!("wirebench serve: session from {peer} done");
    }
    drop(stream);
    drop(counted);
    if last {
        // The server is idle: what the burst's threads freed goes back to the system.
        crate::sys::return_free_memory();
    }
}

/// What a test's data plane stands on while its session lasts.
struct TestIo {
    transport: Box<dyn Transport>,
    listener: Box<dyn Listener>,
    cookie: Cookie,
    spec: TestSpec,
    /// A --one-port test's route closes when the session ends (the guard drops).
    _route: Option<super::oneport::Route>,
}

/// Performs the machine's actions until one is the driver's to act on (None: the machine waits
/// for the client). A Close is the session's error.
fn pump(ctrl: &mut TcpStream, m: &mut ServerMachine) -> Result<Option<ServerAction>> {
    while let Some(a) = m.poll_action() {
        match a {
            ServerAction::Send(msg) => write_frame(ctrl, &msg)?,
            ServerAction::Close { refusal } => return Err(refusal.into()),
            other => return Ok(Some(other)),
        }
    }
    Ok(None)
}

/// Gives the machine what a read of the control connection gave.
fn feed(
    m: &mut ServerMachine,
    received: Received<ClientMessage>,
    deadline: Option<Instant>,
) -> Result<()> {
    let now = Instant::now();
    match received {
        Received::Message(msg) => m.handle(now, msg),
        Received::Garbage(why) => m.handle_garbage(now, &why),
        // The read ran to its deadline (a socket's timeout may wake a hair before it).
        Received::TimedOut => m.handle_timeout(deadline.map_or(now, |d| now.max(d))),
        Received::Closed => m.handle_closed(now),
        Received::Failed(e) => return Err(e),
    }
    Ok(())
}

fn out_of_turn(a: &ServerAction) -> anyhow::Error {
    anyhow::anyhow!("internal error: the control protocol asked for {a:?} out of turn")
}

fn session(
    ctrl: &mut TcpStream,
    hello: &[u8],
    accepted: Instant,
    config: &ServerConfig,
    routes: &Arc<DataRoutes>,
    slot: &SessionSlot,
) -> Result<()> {
    ctrl.set_nodelay(true)?;
    ctrl.set_write_timeout(Some(config.io_timeout))?;
    let mut m = ServerMachine::new(ServerSetup {
        limits: config.limits.clone(),
        psk: config.access.psk.clone(),
        io_timeout: config.io_timeout,
        accepted,
        environment: Environment::capture(),
        client_seen_as: ctrl.peer_addr().ok().map(|a| a.to_string()),
        server_nonce: Nonce::random()?,
        cookie: Cookie::random()?,
    });
    // Admission read the hello whole, within its own deadline.
    feed(&mut m, receive(&mut &hello[..]), None)?;
    let mut test: Option<TestIo> = None;
    loop {
        match pump(ctrl, &mut m)? {
            None => {
                let deadline = m.next_deadline();
                // While it waits for a request, a full server may give this slot to another
                // client (and wake the read): then the session ends, whatever came.
                let idle = m.awaits_request();
                if idle {
                    slot.waiting(ctrl);
                }
                let received = match deadline {
                    Some(d) => receive_by(ctrl, d),
                    None => receive(ctrl),
                };
                if idle {
                    slot.working()?;
                }
                feed(&mut m, received, deadline)?;
            }
            Some(ServerAction::Finished) => return Ok(()),
            Some(ServerAction::OpenTest { spec, cookie }) => {
                let io = open_test(ctrl, config, routes, spec, cookie)?;
                let caps = io.transport.capabilities();
                m.test_opened(Instant::now(), io.listener.endpoint(), caps);
                test = Some(io);
            }
            Some(ServerAction::PreparePoint {
                point,
                footprint,
                rate,
            }) => {
                let Some(io) = test.as_mut() else {
                    bail!("internal error: a point without a test");
                };
                let ctx = PointContext {
                    ctrl: &mut *ctrl,
                    machine: &mut m,
                    config,
                    test: &io.spec,
                    point: &point,
                    transport: io.transport.as_ref(),
                    listener: io.listener.as_mut(),
                    cookie: &io.cookie,
                };
                let report = run_point(ctx, footprint, rate)?;
                config.counters.point(&report);
                m.point_finished(Instant::now(), report);
            }
            Some(other) => return Err(out_of_turn(&other)),
        }
    }
}

/// The test's transport and data listener: its own ports, or the control port's route.
fn open_test(
    ctrl: &TcpStream,
    config: &ServerConfig,
    routes: &Arc<DataRoutes>,
    spec: TestSpec,
    cookie: Cookie,
) -> Result<TestIo> {
    // TLS is the one transport setting the client chooses for the test (grpc --tls).
    let transport = spec.transport.open(&crate::transport::TransportConfig {
        tls: spec.tls,
        ..config.transport.clone()
    })?;
    let mut route = None;
    let listener: Box<dyn Listener> = if spec.one_port {
        let connections = pattern::connection_count(spec.pattern, spec.direction, spec.streams);
        let capacity = super::oneport::queue_capacity(connections);
        let (r, handed) = DataRoutes::open(routes, &cookie, capacity);
        route = Some(r);
        Box::new(HandedOverListener::new(handed))
    } else {
        transport.listen(ctrl.local_addr()?.ip(), ctrl.peer_addr()?.ip())?
    };
    Ok(TestIo {
        transport,
        listener,
        cookie,
        spec,
        _route: route,
    })
}

struct PointContext<'a> {
    ctrl: &'a mut TcpStream,
    machine: &'a mut ServerMachine,
    config: &'a ServerConfig,
    test: &'a TestSpec,
    point: &'a PointSpec,
    transport: &'a dyn Transport,
    listener: &'a mut dyn Listener,
    cookie: &'a Cookie,
}

/// How often the control side of a running point looks at its senders, its deadline, the
/// client's rate and whether the client is still there.
const WATCH_SLICE: Duration = Duration::from_millis(20);

/// Waits up to one slice (and no later than `deadline`) for the control connection to become
/// readable: Some(true) when a frame is there, Some(false) after a quiet slice, None when the
/// client closed it; an error when it failed (the client is gone: everything this point sends
/// must stop).
fn readable(
    ctrl: &mut TcpStream,
    deadline: Option<Instant>,
    io_timeout: Duration,
) -> Result<Option<bool>> {
    let left = deadline.map_or(WATCH_SLICE, |d| d.saturating_duration_since(Instant::now()));
    ctrl.set_read_timeout(Some(left.clamp(Duration::from_millis(1), WATCH_SLICE)))?;
    match ctrl.peek(&mut [0u8; 1]) {
        Ok(0) => Ok(None),
        Ok(_) => {
            ctrl.set_read_timeout(Some(io_timeout))?;
            Ok(Some(true))
        }
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock
                    | std::io::ErrorKind::TimedOut
                    | std::io::ErrorKind::Interrupted
            ) =>
        {
            Ok(Some(false))
        }
        Err(e) => Err(anyhow::Error::new(e).context("the control connection failed")),
    }
}

fn run_point(
    ctx: PointContext<'_>,
    footprint: Footprint,
    rate: Option<(f64, &'static str)>,
) -> Result<ServerMeasurement> {
    let PointContext {
        ctrl,
        machine,
        config,
        test,
        point,
        transport,
        listener,
        cookie,
    } = ctx;
    let caps = transport.capabilities();
    // What the point will hold (the machine checked it fits), reserved before anything is
    // allocated; the reservation is returned when this function returns, however the point
    // ends.
    let _held = config.budget.reserve(footprint, &config.limits)?;
    // The rate the point may move, reserved against the server's and this client's shares
    // (the machine holds the point to it while it runs).
    let _rate_held = match rate {
        Some((bps, _)) => Some(config.rates.reserve(
            ClientKey::of(ctrl.peer_addr()?.ip()),
            bps,
            &config.limits,
        )?),
        None => None,
    };
    listener.configure(&point.server_socket)?;
    listener.limit_message(point.request_size.max(point.response_size));
    // Read before the point is accepted, so that no data of it moves while it is read.
    let instruments = crate::instruments::HostBefore::take();
    machine.point_ready(Instant::now());

    let n = pattern::connection_count(test.pattern, test.direction, test.streams);
    let mut channels = Vec::with_capacity(n as usize);
    // One deadline for the whole setup (the machine's), for the connections and the
    // client's Connected alike.
    let mut started = pump(ctrl, machine)?;
    for _ in 0..n {
        let deadline = machine.next_deadline();
        let conn = match deadline.and_then(transport::remaining) {
            Some(left) => listener.accept(cookie, left)?,
            None => None,
        };
        let Some(conn) = conn else {
            let now = Instant::now();
            machine.handle_timeout(deadline.map_or(now, |d| now.max(d)));
            pump(ctrl, machine)?;
            bail!("internal error: the setup deadline passed unnoticed");
        };
        machine
            .data_connection_arrived(Instant::now(), conn.effective_options(&point.server_socket));
        channels.push(DataChannel::new(conn, caps, test.spin, config.io_timeout)?);
        started = started.or(pump(ctrl, machine)?);
    }
    // Then the client's Connected, by the same deadline.
    let started = loop {
        if let Some(action) = started {
            break action;
        }
        let deadline = machine.next_deadline();
        let received = match deadline {
            Some(d) => receive_by(ctrl, d),
            None => receive(ctrl),
        };
        feed(machine, received, deadline)?;
        started = pump(ctrl, machine)?;
    };
    if !matches!(started, ServerAction::RunData) {
        return Err(out_of_turn(&started));
    }

    let stop = AtomicBool::new(false);
    let ends: Vec<EndSignal> = (0..n).map(|_| EndSignal::default()).collect();
    let roles: Vec<Role> = (0..n)
        .map(|i| pattern::role(Side::Server, test.pattern, test.direction, test.streams, i))
        .collect();
    let cpu_for = |i: usize| {
        (!test.server_cpus.is_empty()).then(|| test.server_cpus[i % test.server_cpus.len()])
    };

    thread::scope(|scope| -> Result<ServerMeasurement> {
        let mut handles = Vec::with_capacity(n as usize);
        for (i, ch) in channels.into_iter().enumerate() {
            let plan = WorkerPlan {
                role: roles[i],
                index: i as u32,
                test,
                point,
                io_timeout: config.io_timeout,
                loss_timeout: config.io_timeout,
                cpu: cpu_for(i),
                end: &ends[i],
                stop: &stop,
                live: None,
                rtt_series: false,
            };
            handles.push(Some(scope.spawn(move || run_worker(ch, plan))));
        }
        let crr_handle = (test.pattern == PatternKind::Crr).then(|| {
            let stop = &stop;
            let cpu = cpu_for(0);
            let listener = &mut *listener;
            scope.spawn(move || {
                if let Some(c) = cpu {
                    crate::sys::pin_current_thread(c)?;
                }
                crr::run_server(
                    listener,
                    caps,
                    cookie,
                    point.request_size as usize,
                    point.response_size as usize,
                    stop,
                    test.spin,
                    config.io_timeout,
                )
            })
        });

        let mut results: Vec<Option<Joined>> = (0..n).map(|_| None).collect();
        let watch = Watched {
            roles: &roles,
            ends: &ends,
            io_timeout: config.io_timeout,
        };
        let control = drive_point(ctrl, machine, &watch, &mut handles, &mut results);
        // Whatever happened on the control connection, let every worker finish.
        stop.store(true, Ordering::SeqCst);
        if control.is_err() {
            for e in &ends {
                e.abort.store(true, Ordering::SeqCst);
            }
        }
        for (h, r) in handles.iter_mut().zip(results.iter_mut()) {
            if let Some(h) = h.take() {
                *r = Some(h.join());
            }
        }
        let mut report = ServerMeasurement::default();
        let mut first_error: Option<anyhow::Error> = control.err();
        for (i, r) in results.into_iter().enumerate() {
            match r {
                Some(Ok(Ok(WorkerResult::Stream(s)))) => {
                    report.cpu.add(s.cpu);
                    report.streams.push(s);
                }
                Some(Ok(Ok(WorkerResult::Responder(r)))) => {
                    report.cpu.add(r.cpu);
                    report.responders.push(r);
                }
                Some(Ok(Ok(WorkerResult::Exchange(_)))) | None => {}
                Some(Ok(Err(e))) => {
                    first_error.get_or_insert(
                        anyhow::Error::new(e).context(format!("data connection {}", i + 1)),
                    );
                }
                Some(Err(_)) => {
                    first_error.get_or_insert(anyhow::anyhow!("a data thread panicked"));
                }
            }
        }
        if let Some(h) = crr_handle {
            match h.join() {
                Ok(Ok(r)) => {
                    report.cpu.add(r.cpu);
                    report.responders.push(r);
                }
                Ok(Err(e)) => {
                    first_error.get_or_insert(e);
                }
                Err(_) => {
                    first_error.get_or_insert(anyhow::anyhow!("a data thread panicked"));
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => {
                report.instruments = Some(instruments.finish());
                Ok(report)
            }
        }
    })
}

/// The data plane of a running point as its control side sees it.
struct Watched<'a> {
    roles: &'a [Role],
    ends: &'a [EndSignal],
    io_timeout: Duration,
}

/// The server's control side of a running point: every slice it tells the machine the time,
/// the bytes received and whether its senders are done, and passes on what the client says;
/// the machine decides what is answered and when the point ends (the client's EndPoint), is
/// over its deadline or rate, or is abandoned. A client that leaves (even killed, its data
/// connections silent) or overstays ends the point within a slice, and the caller stops the
/// workers.
fn drive_point(
    ctrl: &mut TcpStream,
    machine: &mut ServerMachine,
    watched: &Watched<'_>,
    handles: &mut [Option<Handle<'_>>],
    results: &mut [Option<Joined>],
) -> Result<()> {
    let roles = watched.roles;
    let mut senders_reported = !roles.contains(&Role::Sender);
    loop {
        match pump(ctrl, machine)? {
            Some(ServerAction::PeerSendersDone { sent }) => {
                senders_done(roles, watched.ends, &sent)?;
                continue;
            }
            Some(ServerAction::EndData) => return Ok(()),
            Some(other) => return Err(out_of_turn(&other)),
            None => {}
        }
        let running = roles
            .iter()
            .zip(handles.iter())
            .any(|(r, h)| *r == Role::Sender && h.as_ref().is_some_and(|h| !h.is_finished()));
        if !senders_reported && !running {
            let sent = join_senders(roles, handles, results);
            machine.senders_finished(Instant::now(), sent);
            senders_reported = true;
            continue;
        }
        let now = Instant::now();
        machine.handle_timeout(now);
        let received: u64 = watched
            .ends
            .iter()
            .map(|e| e.received.load(Ordering::Relaxed))
            .sum();
        machine.data_progress(now, received);
        if machine.is_ended() {
            continue;
        }
        match readable(ctrl, machine.next_deadline(), watched.io_timeout)? {
            Some(true) => feed(machine, receive(ctrl), None)?,
            Some(false) => {}
            None => machine.handle_closed(Instant::now()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ServerConfig;
    use crate::control::limits::Limits;
    use crate::control::machine::PointWatch;
    use crate::control::protocol::PointSpec;
    use crate::control::refusal::{Refusal, RefusalKind};
    use crate::pattern::stream::Pace;
    use crate::transport::SocketOptions;
    use std::time::{Duration, Instant};

    fn point(duration_ms: Option<u64>, pace: Option<Pace>, warmup: u64) -> PointSpec {
        PointSpec {
            request_size: 1000,
            response_size: 1,
            read_size: 1000,
            duration_ms,
            bytes: duration_ms.is_none().then_some(1 << 40),
            iterations: None,
            warmup,
            pace,
            server_socket: SocketOptions::default(),
            buffers_fixed: false,
            rate_per_s: None,
        }
    }

    fn config(max_duration_ms: u64, max_rate_bps: u64) -> ServerConfig {
        ServerConfig {
            limits: Limits {
                max_duration_ms,
                max_rate_bps,
                ..Limits::default()
            },
            io_timeout: Duration::from_secs(1),
            ..ServerConfig::default()
        }
    }

    fn watch(
        c: &ServerConfig,
        started: Instant,
        p: &PointSpec,
        streams: u32,
        rate: Option<(f64, &'static str)>,
    ) -> PointWatch {
        PointWatch::new(started, &c.limits, c.io_timeout, p, streams, rate)
    }

    #[test]
    fn a_byte_bound_point_ends_at_the_duration_limit_plus_the_grace() {
        let c = config(2000, 0);
        let t0 = Instant::now();
        let w = watch(&c, t0, &point(None, None, 0), 2, None);
        assert!(w.limit_reached);
        assert_eq!(w.deadline - w.started, Duration::from_secs(5));
        // A point with its own shorter duration ends at that plus the grace, and a paced
        // warm-up's known time is added to it.
        let w = watch(&c, t0, &point(Some(500), None, 0), 2, None);
        assert!(!w.limit_reached);
        assert_eq!(w.deadline - w.started, Duration::from_millis(3500));
        let pace = Pace {
            interval_ns: 1e7,
            burst: 1,
        };
        let w = watch(&c, t0, &point(Some(500), Some(pace), 100), 2, None);
        assert_eq!(w.deadline - w.started, Duration::from_millis(4500));
        // Never past the limit.
        let w = watch(&c, t0, &point(Some(2000), Some(pace), 100), 2, None);
        assert!(w.limit_reached);
        assert_eq!(w.deadline - w.started, Duration::from_secs(5));
    }

    #[test]
    fn a_passed_deadline_and_a_client_over_the_rate_end_the_point_readably() {
        let c = config(2000, 8_000_000);
        let t0 = Instant::now();
        let w = watch(&c, t0, &point(None, None, 0), 2, Some((8e6, "--max-rate")));
        assert!(w.check(t0, 0).is_ok());
        // 2 s in, 1 MB arrived on each of two streams: 8 Mbit/s, at the limit.
        let t2 = t0 + Duration::from_secs(2);
        assert!(w.check(t2, 2_000_000).is_ok());
        let e = w.check(t2, 2_300_000).unwrap_err();
        assert_eq!(e.kind, RefusalKind::Limit);
        assert!(
            e.message
                .contains("above the 8.00 Mbit/s it may move on this server (--max-rate)"),
            "{e}"
        );
        let e = w.check(w.deadline, 0).unwrap_err();
        assert_eq!(
            e,
            Refusal::limit("the server's duration limit of 2.000 s was reached (--max-duration; warm-up and byte- or iteration-bound points count too)")
        );
    }

    #[test]
    fn a_paced_sender_one_step_ahead_is_within_its_rate() {
        let c = config(60_000, 0);
        let mut p = point(None, None, 0);
        p.request_size = 131_072;
        let t0 = Instant::now();
        let w = watch(&c, t0, &p, 1, Some((10e6, "its --rate")));
        let t1 = t0 + Duration::from_secs(1);
        // 128 KiB writes at 10 Mbit/s leave every 104.9 ms, each at the start of its step:
        // 10 of them by 1 s are 10.49 Mbit/s on average, and within the rate.
        assert!(w.check(t1, 10 * 131_072).is_ok());
        let e = w.check(t1, 12 * 131_072).unwrap_err();
        assert!(e.message.contains("(its --rate)"), "{e}");
    }
}
