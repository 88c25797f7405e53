//! The wirebench server: answers any number of clients at once, each test on its own
//! threads with its own data listener, and never lets one client's misbehaviour reach another.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::access::ClientKey;
use super::admission::{Acceptor, AccessConfig, Admitted, Slots};
use super::auth::{Nonce, Psk, AUTH_FAILED, NEEDS_KEY};
use super::framing::{read_frame, read_frame_by, write_frame};
use super::limits::{Budget, Limits};
use super::oneport::DataRoutes;
use super::protocol::{
    ClientMessage, PointSpec, ServerMessage, ServerReport, TestSpec, MAGIC, PROTOCOL_VERSION,
};
use super::rate::RateBudget;
use super::worker::{
    join_senders, run_worker, senders_done, Handle, Joined, WorkerPlan, WorkerResult,
};
use crate::env::Environment;
use crate::pattern::stream::EndSignal;
use crate::pattern::{self, crr, DataChannel, PatternKind, Role, Side};
use crate::transport::{self, Cookie, HandedOverListener, Listener, Transport};

/// The documented default control port.
pub const DEFAULT_PORT: u16 = 5320;

/// How long after accept a session has to finish its handshake: the hello (which must come
/// within admission::HELLO_DEADLINE), the key exchange and the test request. Each is a
/// deadline for the whole frame, not a timeout per read.
const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(15);
/// How long a session may sit idle between points: the next request must be complete by then.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

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
    let result = session(&mut stream, &hello, accepted, &config, &routes);
    drop(slot);
    if let Err(e) = result {
        // Tell the client why, if it is still listening; a failed write changes nothing.
        let _ = write_frame(
            &mut stream,
            &ServerMessage::Error {
                message: format!("{e:#}"),
            },
        );
        if config.log {
            let why = format!("{e:#}");
            eprintln!(
                "wirebench serve: session from {peer} ended: {}",
                crate::text::printable(&why)
            );
        }
    } else if config.log {
        eprintln!("wirebench serve: session from {peer} done");
    }
}

/// What a key exchange settled: the server's proof for its Welcome and the test cookie.
struct Keyed {
    proof: String,
    cookie: Cookie,
}

/// The server's side of the key exchange, when it has a key.
fn authenticate(
    ctrl: &mut TcpStream,
    psk: &Psk,
    client_nonce: Option<&str>,
    deadline: Instant,
) -> Result<Keyed> {
    let Some(client) = client_nonce else {
        bail!(NEEDS_KEY);
    };
    let Some(client) = Nonce::from_hex(client) else {
        bail!("malformed hello: the client nonce is not 32 bytes of hex");
    };
    let server = Nonce::random()?;
    write_frame(
        ctrl,
        &ServerMessage::Challenge {
            nonce: server.to_hex(),
        },
    )?;
    match read_frame_by::<ClientMessage>(ctrl, deadline)? {
        ClientMessage::Auth { proof } if psk.verify_client(&server, &client, &proof) => Ok(Keyed {
            proof: psk.server_proof(&server, &client),
            cookie: psk.cookie(&server, &client),
        }),
        ClientMessage::Auth { .. } => bail!(AUTH_FAILED),
        other => bail!("expected the key exchange, got {}", name(&other)),
    }
}

fn session(
    ctrl: &mut TcpStream,
    hello: &[u8],
    accepted: Instant,
    config: &ServerConfig,
    routes: &Arc<DataRoutes>,
) -> Result<()> {
    ctrl.set_nodelay(true)?;
    ctrl.set_write_timeout(Some(config.io_timeout))?;
    let handshake_done = accepted + HANDSHAKE_DEADLINE;
    let client_nonce = match read_frame::<ClientMessage>(&mut &hello[..])? {
        ClientMessage::Hello {
            magic,
            protocol,
            nonce,
            ..
        } if magic == MAGIC => {
            if protocol != PROTOCOL_VERSION {
                bail!(
                    "client speaks control protocol {protocol}, this server speaks {PROTOCOL_VERSION}: use the same wirebench version on both ends"
                );
            }
            nonce
        }
        _ => bail!("expected a wirebench hello"),
    };
    // A keyless server answers a client with a key as always: the client, which wants the
    // server to prove it holds the key, is the one to refuse.
    let keyed = match &config.access.psk {
        Some(psk) => Some(authenticate(
            ctrl,
            psk,
            client_nonce.as_deref(),
            handshake_done,
        )?),
        None => None,
    };
    write_frame(
        ctrl,
        &ServerMessage::Welcome {
            protocol: PROTOCOL_VERSION,
            version: env!("CARGO_PKG_VERSION").into(),
            environment: Environment::capture(),
            limits: config.limits.clone(),
            client_seen_as: ctrl.peer_addr().ok().map(|a| a.to_string()),
            proof: keyed.as_ref().map(|k| k.proof.clone()),
        },
    )?;
    let spec = match read_frame_by::<ClientMessage>(ctrl, handshake_done)? {
        ClientMessage::Open { spec } => spec,
        ClientMessage::Bye => return Ok(()),
        other => bail!("expected a test request, got {}", name(&other)),
    };
    config
        .limits
        .check_test(&spec)
        .map_err(anyhow::Error::msg)?;
    let transport = spec.transport.open(&config.transport)?;
    let local_ip = ctrl.local_addr()?.ip();
    // With a key, the cookie is derived on both ends and never sent.
    let (cookie, sent_cookie) = match &keyed {
        Some(k) => (k.cookie, None),
        None => {
            let c = Cookie::random()?;
            (c, Some(c.to_hex()))
        }
    };
    // A --one-port test's route closes when the session ends (the guard drops).
    let mut _route = None;
    let mut listener: Box<dyn Listener> = if spec.one_port {
        if !super::oneport::carries(spec.transport) {
            bail!("one-port tests carry data on the control port's TCP: tcp only");
        }
        let connections = pattern::connection_count(spec.pattern, spec.direction, spec.streams);
        let capacity = super::oneport::queue_capacity(connections);
        let (route, handed) = DataRoutes::open(routes, &cookie, capacity);
        _route = Some(route);
        Box::new(HandedOverListener::new(handed))
    } else {
        transport.listen(local_ip, ctrl.peer_addr()?.ip())?
    };
    write_frame(
        ctrl,
        &ServerMessage::Opened {
            endpoint: listener.endpoint(),
            cookie: sent_cookie,
        },
    )?;
    loop {
        match read_frame_by::<ClientMessage>(ctrl, Instant::now() + IDLE_TIMEOUT)? {
            ClientMessage::Point { spec: point } => {
                if let Err(msg) = config.limits.check_point(&point) {
                    write_frame(ctrl, &ServerMessage::Error { message: msg })?;
                    continue;
                }
                let ctx = PointContext {
                    ctrl: &mut *ctrl,
                    config,
                    test: &spec,
                    point: &point,
                    transport: transport.as_ref(),
                    listener: listener.as_mut(),
                    cookie: &cookie,
                };
                let report = run_point(ctx)?;
                write_frame(ctrl, &ServerMessage::PointResult { report })?;
            }
            ClientMessage::Bye => return Ok(()),
            other => bail!("unexpected control message {}", name(&other)),
        }
    }
}

fn name(m: &ClientMessage) -> &'static str {
    match m {
        ClientMessage::Hello { .. } => "hello",
        ClientMessage::Auth { .. } => "auth",
        ClientMessage::Open { .. } => "open",
        ClientMessage::Point { .. } => "point",
        ClientMessage::Connected => "connected",
        ClientMessage::SendDone { .. } => "send_done",
        ClientMessage::EndPoint => "end_point",
        ClientMessage::Bye => "bye",
    }
}

struct PointContext<'a> {
    ctrl: &'a mut TcpStream,
    config: &'a ServerConfig,
    test: &'a TestSpec,
    point: &'a PointSpec,
    transport: &'a dyn Transport,
    listener: &'a mut dyn Listener,
    cookie: &'a Cookie,
}

/// How long the server waits for the client to finish a point.
fn point_wait(config: &ServerConfig, point: &PointSpec) -> Duration {
    let d = point.duration_ms.unwrap_or(config.limits.max_duration_ms);
    Duration::from_millis(d) + 3 * config.io_timeout
}

/// How often the control side of a running point looks at its senders, its deadline, the
/// client's rate and whether the client is still there.
const WATCH_SLICE: Duration = Duration::from_millis(20);

/// Before a client's average rate is held against `--max-rate`: a TCP start's first burst
/// is not the test's rate.
const RATE_WINDOW: Duration = Duration::from_secs(1);

/// The absolute deadlines and budgets of one running point, from its Go.
struct PointWatch<'a> {
    started: Instant,
    /// When the server gives up waiting for the client: the point's duration plus the
    /// grace, or the server's duration limit, whichever is sooner.
    deadline: Instant,
    /// Whether that deadline is the server's duration limit (else the point's own).
    limit_reached: bool,
    limits: &'a Limits,
    /// The bit rate the point reserved and what set it (see rate.rs).
    rate: Option<(f64, &'static str)>,
    /// Bytes a paced sender may be ahead of its rate: one step (burst x write) per data
    /// connection, since a step leaves at its start (ten 128 KiB writes at 10 Mbit/s are 11
    /// writes at 1 s, 10.5% over the average).
    step_bytes: u64,
    io_timeout: Duration,
}

impl<'a> PointWatch<'a> {
    /// Every point, its warm-up and byte- or iteration-bound ones included, ends within the
    /// server's duration limit plus the grace a client that is done needs to say so.
    fn new(
        config: &'a ServerConfig,
        point: &PointSpec,
        streams: u32,
        rate: Option<(f64, &'static str)>,
    ) -> PointWatch<'a> {
        let started = Instant::now();
        let grace = 3 * config.io_timeout;
        let limit = Duration::from_millis(config.limits.max_duration_ms) + grace;
        // A paced warm-up takes its known time before the timed phase (check_fit made sure
        // both fit in the limit).
        let warmup = point.pace.map_or(Duration::ZERO, |p| {
            Duration::try_from_secs_f64(p.end_ns(point.warmup) / 1e9)
                .unwrap_or(limit)
                .min(limit)
        });
        let wait = point_wait(config, point) + warmup;
        PointWatch {
            started,
            deadline: started + wait.min(limit),
            limit_reached: limit <= wait,
            limits: &config.limits,
            rate,
            step_bytes: point
                .request_size
                .saturating_mul(point.pace.map_or(1, |p| p.burst))
                .saturating_mul(u64::from(streams)),
            io_timeout: config.io_timeout,
        }
    }

    /// Fails once the deadline has passed or the data arriving on `ends` exceeds the
    /// server's bit rate.
    fn check(&self, ends: &[EndSignal]) -> Result<()> {
        let now = Instant::now();
        if now >= self.deadline {
            if self.limit_reached {
                bail!(
                    "the server's duration limit of {} s was reached (--max-duration; warm-up and byte- or iteration-bound points count too)",
                    self.limits.max_duration_ms as f64 / 1000.0
                );
            }
            bail!(
                "the client did not end the point within {} s after its duration (the warm-up counts: an unpaced warm-up is not given time of its own)",
                (3 * self.io_timeout).as_secs_f64()
            );
        }
        let elapsed = now.saturating_duration_since(self.started);
        if let Some((limit, what)) = self.rate {
            if elapsed >= RATE_WINDOW {
                let bytes: u64 = ends
                    .iter()
                    .map(|e| e.received.load(Ordering::Relaxed))
                    .sum();
                let ahead = bytes.saturating_sub(self.step_bytes);
                let bps = ahead as f64 * 8.0 / elapsed.as_secs_f64();
                // 1% above the limit, for the step a paced sender lets out at once.
                if bps > limit * 1.01 {
                    bail!(
                        "the test moved {:.3} Mbit/s on average, above the {:.3} Mbit/s it may move on this server ({what})",
                        bps / 1e6,
                        limit / 1e6
                    );
                }
            }
        }
        Ok(())
    }

    /// Waits up to one slice for the control connection to become readable: Ok(true) when a
    /// frame is there, Ok(false) after a quiet slice; an error when the client closed it or
    /// it failed (the client is gone: everything this point sends must stop).
    fn readable(&self, ctrl: &mut TcpStream) -> Result<bool> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        ctrl.set_read_timeout(Some(left.clamp(Duration::from_millis(1), WATCH_SLICE)))?;
        match ctrl.peek(&mut [0u8; 1]) {
            Ok(0) => bail!("the client closed the control connection during the point"),
            Ok(_) => {
                ctrl.set_read_timeout(Some(self.io_timeout))?;
                Ok(true)
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
                Ok(false)
            }
            Err(e) => Err(anyhow::Error::new(e).context("the control connection failed")),
        }
    }

    /// The client's next control message, waiting no longer than the deadline and ending the
    /// wait when the client leaves or exceeds the rate.
    fn next_message(&self, ctrl: &mut TcpStream, ends: &[EndSignal]) -> Result<ClientMessage> {
        loop {
            self.check(ends)?;
            if self.readable(ctrl)? {
                return read_frame::<ClientMessage>(ctrl);
            }
        }
    }
}

fn run_point(ctx: PointContext<'_>) -> Result<ServerReport> {
    let PointContext {
        ctrl,
        config,
        test,
        point,
        transport,
        listener,
        cookie,
    } = ctx;
    let caps = transport.capabilities();
    // What the point will hold, charged before anything is allocated; the reservation is
    // returned when this function returns, however the point ends.
    let footprint = config
        .limits
        .check_fit(test, point, &caps)
        .map_err(anyhow::Error::msg)?;
    let _held = config
        .budget
        .reserve(footprint, &config.limits)
        .map_err(anyhow::Error::msg)?;
    // The rate the point may move, reserved against the server's and this client's shares
    // and held to while it runs.
    let rate = super::rate::point_limit(&config.limits, test, point);
    let _rate_held = match rate {
        Some((bps, _)) => Some(
            config
                .rates
                .reserve(ClientKey::of(ctrl.peer_addr()?.ip()), bps, &config.limits)
                .map_err(anyhow::Error::msg)?,
        ),
        None => None,
    };
    listener.configure(&point.server_socket)?;
    write_frame(ctrl, &ServerMessage::PointAccepted)?;

    let n = pattern::connection_count(test.pattern, test.direction, test.streams);
    let mut channels = Vec::with_capacity(n as usize);
    let mut socket = Vec::with_capacity(n as usize);
    // One deadline for the whole setup, not one per connection: a client that let each of
    // 128 connections arrive just inside --io-timeout held the point for 21 minutes.
    let setup_deadline = Instant::now() + config.io_timeout;
    for i in 0..n {
        let missing = || format!("data connection {} of {n} did not arrive", i + 1);
        let left = transport::remaining(setup_deadline).with_context(missing)?;
        let conn = listener.accept(cookie, left)?.with_context(missing)?;
        socket.push(conn.effective_options(&point.server_socket));
        channels.push(DataChannel::new(conn, caps, test.spin, config.io_timeout)?);
    }
    match read_frame_by::<ClientMessage>(ctrl, setup_deadline)? {
        ClientMessage::Connected => {}
        other => bail!("expected control message connected, got {}", name(&other)),
    }
    write_frame(ctrl, &ServerMessage::Go { socket })?;
    let watch = PointWatch::new(config, point, n, rate);

    let stop = AtomicBool::new(false);
    let ends: Vec<EndSignal> = (0..n).map(|_| EndSignal::default()).collect();
    let roles: Vec<Role> = (0..n)
        .map(|i| pattern::role(Side::Server, test.pattern, test.direction, test.streams, i))
        .collect();
    let cpu_for = |i: usize| {
        (!test.server_cpus.is_empty()).then(|| test.server_cpus[i % test.server_cpus.len()])
    };

    thread::scope(|scope| -> Result<ServerReport> {
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
        let control = drive_point(ctrl, &roles, &mut handles, &mut results, &ends, &watch);
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
        let mut report = ServerReport::default();
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
            None => Ok(report),
        }
    })
}

/// The server's control side of a running point: report when its own senders are done, learn
/// when the client's are, and wait for the client to end the point. Every wait looks at the
/// control connection and the point's deadline: a client that leaves (even killed, its data
/// connections silent) or overstays ends the point within a slice, and the caller stops the
/// workers.
fn drive_point(
    ctrl: &mut TcpStream,
    roles: &[Role],
    handles: &mut [Option<Handle<'_>>],
    results: &mut [Option<Joined>],
    ends: &[EndSignal],
    watch: &PointWatch<'_>,
) -> Result<()> {
    // A message the client sent while this side's senders still ran (its own SendDone in a
    // bidirectional stream).
    let mut early: Option<ClientMessage> = None;
    if roles.contains(&Role::Sender) {
        let running = |handles: &[Option<Handle<'_>>]| {
            roles
                .iter()
                .zip(handles)
                .any(|(r, h)| *r == Role::Sender && h.as_ref().is_some_and(|h| !h.is_finished()))
        };
        while running(handles) {
            watch.check(ends)?;
            if watch.readable(ctrl)? {
                if early.is_some() {
                    bail!("unexpected control message while the server was sending");
                }
                early = Some(read_frame::<ClientMessage>(ctrl)?);
            }
        }
        let sent = join_senders(roles, handles, results);
        write_frame(ctrl, &ServerMessage::SendDone { sent })?;
    }
    if roles.contains(&Role::Receiver) {
        let m = match early.take() {
            Some(m) => m,
            None => watch.next_message(ctrl, ends)?,
        };
        let sent = match m {
            ClientMessage::SendDone { sent } => sent,
            other => bail!("expected control message send_done, got {}", name(&other)),
        };
        senders_done(roles, ends, &sent)?;
    }
    let m = match early.take() {
        Some(m) => m,
        None => watch.next_message(ctrl, ends)?,
    };
    if name(&m) != "end_point" {
        bail!("expected control message end_point, got {}", name(&m));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{PointWatch, ServerConfig};
    use crate::control::limits::Limits;
    use crate::control::protocol::PointSpec;
    use crate::pattern::stream::{EndSignal, Pace};
    use crate::transport::SocketOptions;
    use std::sync::atomic::Ordering;
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

    #[test]
    fn a_byte_bound_point_ends_at_the_duration_limit_plus_the_grace() {
        let c = config(2000, 0);
        let w = PointWatch::new(&c, &point(None, None, 0), 2, None);
        assert!(w.limit_reached);
        assert_eq!(w.deadline - w.started, Duration::from_secs(5));
        // A point with its own shorter duration ends at that plus the grace, and a paced
        // warm-up's known time is added to it.
        let w = PointWatch::new(&c, &point(Some(500), None, 0), 2, None);
        assert!(!w.limit_reached);
        assert_eq!(w.deadline - w.started, Duration::from_millis(3500));
        let pace = Pace {
            interval_ns: 1e7,
            burst: 1,
        };
        let w = PointWatch::new(&c, &point(Some(500), Some(pace), 100), 2, None);
        assert_eq!(w.deadline - w.started, Duration::from_millis(4500));
        // Never past the limit.
        let w = PointWatch::new(&c, &point(Some(2000), Some(pace), 100), 2, None);
        assert!(w.limit_reached);
        assert_eq!(w.deadline - w.started, Duration::from_secs(5));
    }

    #[test]
    fn a_passed_deadline_and_a_client_over_the_rate_end_the_point_readably() {
        let c = config(2000, 8_000_000);
        let mut w = PointWatch::new(&c, &point(None, None, 0), 2, Some((8e6, "--max-rate")));
        let ends: Vec<EndSignal> = (0..2).map(|_| EndSignal::default()).collect();
        assert!(w.check(&ends).is_ok());
        // 2 s in, 1 MB arrived on each of two streams: 8 Mbit/s, at the limit.
        w.started = Instant::now() - Duration::from_secs(2);
        for e in &ends {
            e.received.store(1_000_000, Ordering::Relaxed);
        }
        assert!(w.check(&ends).is_ok());
        ends[0].received.store(1_300_000, Ordering::Relaxed);
        let e = w.check(&ends).unwrap_err().to_string();
        assert!(
            e.contains("above the 8.000 Mbit/s it may move on this server (--max-rate)"),
            "{e}"
        );
        w.deadline = Instant::now();
        let e = w.check(&ends).unwrap_err().to_string();
        assert_eq!(
            e,
            "the server's duration limit of 2 s was reached (--max-duration; warm-up and byte- or iteration-bound points count too)"
        );
    }

    #[test]
    fn a_paced_sender_one_step_ahead_is_within_its_rate() {
        let c = config(60_000, 0);
        let mut p = point(None, None, 0);
        p.request_size = 131_072;
        let mut w = PointWatch::new(&c, &p, 1, Some((10e6, "its --rate")));
        w.started = Instant::now() - Duration::from_secs(1);
        let ends = vec![EndSignal::default()];
        // 128 KiB writes at 10 Mbit/s leave every 104.9 ms, each at the start of its step:
        // 10 of them by 1 s are 10.49 Mbit/s on average, and within the rate.
        ends[0].received.store(10 * 131_072, Ordering::Relaxed);
        assert!(w.check(&ends).is_ok());
        ends[0].received.store(12 * 131_072, Ordering::Relaxed);
        let e = w.check(&ends).unwrap_err().to_string();
        assert!(e.contains("(its --rate)"), "{e}");
    }
}
