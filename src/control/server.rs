//! The wirebench server: answers any number of clients at once, each test on its own
//! threads with its own data listener, and never lets one client's misbehaviour reach another.

use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::framing::{read_frame, write_frame};
use super::limits::Limits;
use super::oneport::DataRoutes;
use super::protocol::{
    ClientMessage, PointSpec, ServerMessage, ServerReport, TestSpec, MAGIC, PROTOCOL_VERSION,
};
use super::worker::{
    join_senders, run_worker, senders_done, Handle, Joined, WorkerPlan, WorkerResult,
};
use crate::env::Environment;
use crate::pattern::stream::EndSignal;
use crate::pattern::{self, crr, DataChannel, PatternKind, Role, Side};
use crate::transport::{self, Cookie, HandedOverListener, Listener, Transport, DATA_PREFIX};

/// The documented default control port.
pub const DEFAULT_PORT: u16 = 5320;

/// How long a new connection may take to say Hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a session may sit idle between points.
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
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            limits: Limits::default(),
            io_timeout: Duration::from_secs(10),
            log: false,
            transport: Default::default(),
        }
    }
}

pub struct Server {
    listener: TcpListener,
    config: Arc<ServerConfig>,
    sessions: Arc<AtomicU32>,
    routes: Arc<DataRoutes>,
}

impl Server {
    pub fn bind(addr: SocketAddr, config: ServerConfig) -> Result<Server> {
        let listener =
            TcpListener::bind(addr).with_context(|| format!("cannot listen on {addr}"))?;
        Ok(Server {
            listener,
            config: Arc::new(config),
            sessions: Arc::new(AtomicU32::new(0)),
            routes: Arc::new(DataRoutes::default()),
        })
    }

    pub fn local_addr(&self) -> Result<SocketAddr> {
        Ok(self.listener.local_addr()?)
    }

    /// Accepts clients forever, one thread per session.
    pub fn serve(self) -> Result<()> {
        for conn in self.listener.incoming() {
            let stream = match conn {
                Ok(s) => s,
                Err(e) => {
                    // Out of descriptors and the like: say so, wait a little, keep serving.
                    eprintln!("wirebench serve: accept failed: {e}");
                    thread::sleep(Duration::from_millis(50));
                    continue;
                }
            };
            let Some(stream) = self.routes.deliver_if_ready(stream) else {
                continue;
            };
            let config = Arc::clone(&self.config);
            let sessions = Arc::clone(&self.sessions);
            let routes = Arc::clone(&self.routes);
            let _ = thread::Builder::new()
                .name("wb-session".into())
                .spawn(move || session_thread(stream, config, sessions, routes));
        }
        Ok(())
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

fn session_thread(
    mut stream: TcpStream,
    config: Arc<ServerConfig>,
    sessions: Arc<AtomicU32>,
    routes: Arc<DataRoutes>,
) {
    // The first four bytes tell a control connection (a frame length) from a data
    // connection of a --one-port test (the data prefix).
    let mut first = [0u8; 4];
    if stream.set_read_timeout(Some(HELLO_TIMEOUT)).is_err()
        || stream.read_exact(&mut first).is_err()
    {
        return;
    }
    if first == DATA_PREFIX {
        routes.deliver(stream);
        return;
    }
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "?".into());
    let active = sessions.fetch_add(1, Ordering::SeqCst) + 1;
    let result = if active > config.limits.max_sessions {
        Err(anyhow::anyhow!(
            "server busy: {} tests running, the limit is {}",
            active - 1,
            config.limits.max_sessions
        ))
    } else {
        session(&mut stream, first, &config, &routes)
    };
    sessions.fetch_sub(1, Ordering::SeqCst);
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

fn session(
    ctrl: &mut TcpStream,
    first: [u8; 4],
    config: &ServerConfig,
    routes: &Arc<DataRoutes>,
) -> Result<()> {
    ctrl.set_nodelay(true)?;
    ctrl.set_read_timeout(Some(HELLO_TIMEOUT))?;
    ctrl.set_write_timeout(Some(config.io_timeout))?;
    match read_frame::<ClientMessage>(&mut first.as_slice().chain(&mut *ctrl))? {
        ClientMessage::Hello {
            magic, protocol, ..
        } if magic == MAGIC => {
            if protocol != PROTOCOL_VERSION {
                bail!(
                    "client speaks control protocol {protocol}, this server speaks {PROTOCOL_VERSION}: use the same wirebench version on both ends"
                );
            }
        }
        _ => bail!("expected a wirebench hello"),
    }
    write_frame(
        ctrl,
        &ServerMessage::Welcome {
            protocol: PROTOCOL_VERSION,
            version: env!("CARGO_PKG_VERSION").into(),
            environment: Environment::capture(),
            limits: config.limits.clone(),
            client_seen_as: ctrl.peer_addr().ok().map(|a| a.to_string()),
        },
    )?;
    ctrl.set_read_timeout(Some(IDLE_TIMEOUT))?;
    let spec = match read_frame::<ClientMessage>(ctrl)? {
        ClientMessage::Open { spec } => spec,
        ClientMessage::Bye => return Ok(()),
        other => bail!("expected a test request, got {}", name(&other)),
    };
    config
        .limits
        .check_test(&spec)
        .map_err(anyhow::Error::msg)?;
    let transport = transport::by_name(&spec.transport, &config.transport)?;
    let local_ip = ctrl.local_addr()?.ip();
    let cookie = Cookie::random()?;
    // A --one-port test's route closes when the session ends (the guard drops).
    let mut _route = None;
    let mut listener: Box<dyn Listener> = if spec.one_port {
        if !super::oneport::carries(transport.name()) {
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
            cookie: cookie.to_hex(),
        },
    )?;
    loop {
        ctrl.set_read_timeout(Some(IDLE_TIMEOUT))?;
        match read_frame::<ClientMessage>(ctrl)? {
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

fn expect(ctrl: &mut TcpStream, want: &str) -> Result<ClientMessage> {
    let m = read_frame::<ClientMessage>(ctrl)?;
    if name(&m) != want {
        bail!("expected control message {want}, got {}", name(&m));
    }
    Ok(m)
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
    listener.configure(&point.server_socket)?;
    write_frame(ctrl, &ServerMessage::PointAccepted)?;

    let n = pattern::connection_count(test.pattern, test.direction, test.streams);
    let mut channels = Vec::with_capacity(n as usize);
    let mut socket = Vec::with_capacity(n as usize);
    for i in 0..n {
        let conn = listener
            .accept(cookie, config.io_timeout)?
            .with_context(|| format!("data connection {} of {n} did not arrive", i + 1))?;
        socket.push(conn.effective_options(&point.server_socket));
        channels.push(DataChannel::new(conn, caps, test.spin, config.io_timeout)?);
    }
    ctrl.set_read_timeout(Some(config.io_timeout))?;
    expect(ctrl, "connected")?;
    write_frame(ctrl, &ServerMessage::Go { socket })?;
    ctrl.set_read_timeout(Some(point_wait(config, point)))?;

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
        let control = drive_point(ctrl, &roles, &mut handles, &mut results, &ends);
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
/// when the client's are, and wait for the client to end the point.
fn drive_point(
    ctrl: &mut TcpStream,
    roles: &[Role],
    handles: &mut [Option<Handle<'_>>],
    results: &mut [Option<Joined>],
    ends: &[EndSignal],
) -> Result<()> {
    if roles.contains(&Role::Sender) {
        let sent = join_senders(roles, handles, results);
        write_frame(ctrl, &ServerMessage::SendDone { sent })?;
    }
    if roles.contains(&Role::Receiver) {
        let sent = match read_frame::<ClientMessage>(ctrl)? {
            ClientMessage::SendDone { sent } => sent,
            other => bail!("expected control message send_done, got {}", name(&other)),
        };
        senders_done(roles, ends, &sent)?;
    }
    expect(ctrl, "end_point")?;
    Ok(())
}
