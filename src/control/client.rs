//! The client side of the control protocol: one session per test, one call per point.

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::auth::{Nonce, Psk};
use super::framing::{read_frame, receive, receive_by, write_frame, Received};
use super::limits::Limits;
use super::machine::{ClientAction, ClientMachine, ClientSetup};
use super::protocol::{PointSpec, ServerMeasurement, ServerMessage, TestSpec};
use super::refusal::{RefusalKind, ServerRefusal};
use super::worker::{
    join_senders, join_workers, run_worker, senders_done, stop_at, Handle, Joined, WorkerPlan,
    WorkerResult,
};
use crate::env::Environment;
use crate::pattern::crr::{self, CrrPlan, CrrStats, CrrTarget};
use crate::pattern::exchange::ExchangeStats;
use crate::pattern::stream::{EndSignal, IntervalEvent, StreamStats};
use crate::pattern::{self, CpuTime, DataChannel, PatternKind, Role, Side};
use crate::transport::{Cookie, EffectiveOptions, SocketOptions, Transport, TransportConfig};

/// Client-side settings that the server does not need to know.
#[derive(Debug, Clone)]
pub struct ClientSide {
    pub socket: SocketOptions,
    pub cpus: Vec<usize>,
    pub io_timeout: Duration,
    pub loss_timeout: Duration,
    /// Exchanges: keep each round trip with its time (for `--load`'s time series).
    pub rtt_series: bool,
    /// Read this host's network counters and CPU time around each point.
    pub host_counters: bool,
}

/// Everything both sides measured for one point, before it is summarised.
pub struct PointOutcome {
    /// Client's stream statistics, per data connection in connection order.
    pub client_streams: Vec<(u32, StreamStats)>,
    pub exchanges: Vec<ExchangeStats>,
    pub crr: Option<CrrStats>,
    pub server: ServerMeasurement,
    pub client_socket: Vec<EffectiveOptions>,
    pub server_socket: Vec<EffectiveOptions>,
    pub client_cpu: CpuTime,
    /// The client host's network counters and CPU shares over the point (from before its data
    /// connections were reported connected to after its data threads ended).
    pub client_instruments: Option<crate::instruments::HostInstruments>,
}

pub struct Session {
    ctrl: TcpStream,
    /// What the control protocol allows next (see machine/).
    machine: ClientMachine,
    pub server_addr: SocketAddr,
    pub server_env: Environment,
    pub limits: Limits,
    /// Set when the server saw our control connection come from another address: "server
    /// sees A, this side is B".
    pub middlebox: Option<String>,
    transport: Box<dyn Transport>,
    endpoint: String,
    cookie: Cookie,
    spec: TestSpec,
}

/// Resolves HOST[:PORT] (IPv6 as [addr]:port) with `default_port`.
pub fn resolve(target: &str, default_port: u16) -> Result<SocketAddr> {
    let with_port = if target.parse::<std::net::Ipv6Addr>().is_ok() {
        format!("[{target}]:{default_port}")
    } else if target.rsplit_once(':').is_some_and(|(h, p)| {
        !h.is_empty() && !h.ends_with(':') && p.chars().all(|c| c.is_ascii_digit())
    }) {
        target.to_owned()
    } else {
        format!("{target}:{default_port}")
    };
    let mut addrs = with_port
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve server address '{target}'"))?;
    addrs
        .next()
        .with_context(|| format!("server address '{target}' resolves to nothing"))
}

/// Performs the machine's actions up to the first one that is the driver's to act on, reading
/// the server's frames (each complete by the machine's deadline) while the machine waits for
/// them.
fn next_event(ctrl: &mut TcpStream, m: &mut ClientMachine) -> Result<ClientAction> {
    loop {
        match m.poll_action() {
            Some(ClientAction::Send(msg)) => write_frame(ctrl, &msg)?,
            Some(ClientAction::Warn(w)) => eprintln!("{w}"),
            Some(ClientAction::Close { reason }) => return Err(anyhow::Error::msg(reason)),
            Some(ClientAction::Refused(r)) => return Err(r.into()),
            Some(other) => return Ok(other),
            None if m.awaiting_server() => {
                let deadline = m.next_deadline();
                let received = match deadline {
                    Some(d) => receive_by(ctrl, d),
                    None => receive(ctrl),
                };
                feed(m, received, deadline);
            }
            None => bail!("internal error: the control protocol waits for nothing"),
        }
    }
}

/// Sends what the machine has queued, without waiting for the server.
fn flush(ctrl: &mut TcpStream, m: &mut ClientMachine) -> Result<()> {
    while let Some(a) = m.poll_action() {
        match a {
            ClientAction::Send(msg) => write_frame(ctrl, &msg)?,
            ClientAction::Warn(w) => eprintln!("{w}"),
            ClientAction::Close { reason } => return Err(anyhow::Error::msg(reason)),
            ClientAction::Refused(r) => return Err(r.into()),
            other => return Err(out_of_turn(&other)),
        }
    }
    Ok(())
}

fn feed(m: &mut ClientMachine, received: Received<ServerMessage>, deadline: Option<Instant>) {
    let now = Instant::now();
    match received {
        Received::Message(msg) => m.handle(now, msg),
        Received::Garbage(why) => m.handle_garbage(now, &why),
        // The read ran to its deadline (a socket's timeout may wake a hair before it).
        Received::TimedOut => m.handle_timeout(deadline.map_or(now, |d| now.max(d))),
        Received::Closed => m.handle_closed(now),
        Received::Failed(e) => m.handle_failed(now, &format!("{e:#}")),
    }
}

fn out_of_turn(a: &ClientAction) -> anyhow::Error {
    anyhow::anyhow!("internal error: the control protocol asked for {a:?} out of turn")
}

/// The error the server sent when it ended a point itself (its duration limit, its bit
/// rate), if one is waiting on the control connection or arrives within a moment: it closed
/// the data connections, so the data path's own error ("connection reset") says less.
fn server_reason(ctrl: &mut TcpStream) -> Option<anyhow::Error> {
    ctrl.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let refusal = read_frame::<ServerMessage>(ctrl).ok()?.refusal()?;
    Some(refusal.into())
}

/// The longest a client waits, once, for a busy server that said when it expects room: a
/// full server whose waiting session yields its slot soon (admission::YIELD_AFTER) is worth
/// a short wait; a longer estimate is the user's to act on.
pub const BUSY_RETRY_MAX: Duration = Duration::from_secs(5);

/// How long to wait before trying `e`'s server again: when it refused as busy and said when it
/// expects room, within [`BUSY_RETRY_MAX`].
pub fn busy_retry(e: &anyhow::Error) -> Option<Duration> {
    let r = ServerRefusal::of(e)?;
    r.retry_after
        .filter(|wait| r.is(RefusalKind::Busy) && *wait <= BUSY_RETRY_MAX)
}

impl Session {
    /// Connects, checks the server speaks our protocol (and, with a key, that both ends hold
    /// it), and opens the test. A server that is busy and says it has room within
    /// [`BUSY_RETRY_MAX`] is asked once more after that wait: nothing of the test has started
    /// yet, so asking again is asking afresh.
    pub fn open(
        addr: SocketAddr,
        spec: TestSpec,
        transport: &TransportConfig,
        timeout: Duration,
        psk: Option<&Psk>,
    ) -> Result<Session> {
        match Session::open_once(addr, spec.clone(), transport, timeout, psk) {
            Err(e) => match busy_retry(&e) {
                Some(wait) => {
                    eprintln!(
                        "wirebench: {}; trying once more",
                        crate::error::one_line(&e)
                    );
                    thread::sleep(wait);
                    Session::open_once(addr, spec, transport, timeout, psk)
                }
                None => Err(e),
            },
            opened => opened,
        }
    }

    fn open_once(
        addr: SocketAddr,
        spec: TestSpec,
        transport: &TransportConfig,
        timeout: Duration,
        psk: Option<&Psk>,
    ) -> Result<Session> {
        let transport = spec.transport.open(transport)?;
        let mut ctrl = TcpStream::connect_timeout(&addr, timeout)
            .with_context(|| format!("cannot reach a wirebench server at {addr}"))?;
        ctrl.set_nodelay(true)?;
        ctrl.set_read_timeout(Some(timeout))?;
        ctrl.set_write_timeout(Some(timeout))?;
        let nonce = psk.map(|_| Nonce::random()).transpose()?;
        let mut machine = ClientMachine::new(
            Instant::now(),
            ClientSetup {
                server: addr.to_string(),
                spec,
                psk: psk.cloned(),
                nonce,
                timeout,
                local_addr: ctrl.local_addr().ok().map(|a| a.to_string()),
            },
        );
        if let Some(ClientAction::Send(hello)) = machine.poll_action() {
            if let Err(e) = write_frame(&mut ctrl, &hello) {
                // A server that refuses at accept (access list, limits) may have closed
                // before the hello was written: its reason may still be waiting to be read.
                if let Some(refusal) = read_frame::<ServerMessage>(&mut ctrl)
                    .ok()
                    .and_then(|m| m.refusal())
                {
                    return Err(refusal.into());
                }
                return Err(e);
            }
        }
        let opened = match next_event(&mut ctrl, &mut machine)? {
            ClientAction::Opened(o) => *o,
            other => return Err(out_of_turn(&other)),
        };
        Ok(Session {
            server_addr: addr,
            ctrl,
            machine,
            server_env: opened.server_env,
            limits: opened.limits,
            middlebox: opened.middlebox,
            transport,
            endpoint: opened.endpoint,
            cookie: opened.cookie,
            spec: opened.spec,
        })
    }

    /// Whether data connections go to the control port.
    pub fn one_port(&self) -> bool {
        self.spec.one_port
    }

    /// The TCP ports that tell the data connections apart for a capture: the server's data
    /// port, and the control connection's client port when data shares the control port.
    /// None for transports other than TCP.
    pub fn data_ports(&self) -> Option<(u16, Option<u16>)> {
        if self.spec.transport != crate::transport::TransportKind::Tcp {
            return None;
        }
        if self.endpoint == crate::transport::CONTROL_PORT_ENDPOINT {
            let ctrl = self.ctrl.local_addr().ok()?.port();
            return Some((self.server_addr.port(), Some(ctrl)));
        }
        Some((self.endpoint.parse().ok()?, None))
    }

    /// Runs one point. `live` receives the client's interval reports as they happen.
    pub fn run_point(
        &mut self,
        point: &PointSpec,
        client: &ClientSide,
        live: Option<mpsc::Sender<IntervalEvent>>,
    ) -> Result<PointOutcome> {
        let spec = &self.spec;
        let caps = self.transport.capabilities();
        self.machine
            .start_point(Instant::now(), point, client.io_timeout);
        match next_event(&mut self.ctrl, &mut self.machine)? {
            ClientAction::OpenData => {}
            other => return Err(out_of_turn(&other)),
        }
        let n = pattern::connection_count(spec.pattern, spec.direction, spec.streams);
        let mut channels = Vec::with_capacity(n as usize);
        let mut client_socket = Vec::with_capacity(n as usize);
        for _ in 0..n {
            // Connection setup is timed on its own: TCP's handshake, QUIC's TLS handshake,
            // the UDP and raw hello: none of it is in the data-path figures.
            let started = Instant::now();
            let conn = self.transport.connect(
                self.server_addr,
                &self.endpoint,
                &client.socket,
                &self.cookie,
                client.io_timeout,
            )?;
            let setup_ns = started.elapsed().as_nanos() as u64;
            let mut effective = conn.effective_options(&client.socket);
            effective.setup_ns = Some(setup_ns);
            client_socket.push(effective);
            channels.push(DataChannel::new(conn, caps, spec.spin, client.io_timeout)?);
        }
        // Read before the server is told to start, so that no data moves while it is read.
        let instruments = client
            .host_counters
            .then(crate::instruments::HostBefore::take);
        self.machine.data_connected(Instant::now());
        // The point runs once Go is here; the machine's deadlines give the server the point's
        // whole duration to answer at its end.
        let server_socket = match next_event(&mut self.ctrl, &mut self.machine)? {
            ClientAction::RunData { server_socket } => server_socket,
            other => return Err(out_of_turn(&other)),
        };

        let roles: Vec<Role> = (0..n)
            .map(|i| pattern::role(Side::Client, spec.pattern, spec.direction, spec.streams, i))
            .collect();
        let ends: Vec<EndSignal> = (0..n).map(|_| EndSignal::default()).collect();
        let stop = AtomicBool::new(false);
        let cpu_for =
            |i: usize| (!client.cpus.is_empty()).then(|| client.cpus[i % client.cpus.len()]);
        let (ctrl, machine) = (&mut self.ctrl, &mut self.machine);
        let transport = self.transport.as_ref();
        let (server, endpoint, cookie) = (self.server_addr, self.endpoint.as_str(), &self.cookie);

        let (results, crr_result, control) = thread::scope(|scope| {
            let mut handles: Vec<_> = channels
                .into_iter()
                .enumerate()
                .map(|(i, ch)| {
                    let plan = WorkerPlan {
                        role: roles[i],
                        index: i as u32,
                        test: spec,
                        point,
                        io_timeout: client.io_timeout,
                        loss_timeout: client.loss_timeout,
                        cpu: cpu_for(i),
                        end: &ends[i],
                        stop: &stop,
                        live: live.clone(),
                        rtt_series: client.rtt_series,
                    };
                    Some(scope.spawn(move || run_worker(ch, plan)))
                })
                .collect();
            let crr_handle = (spec.pattern == PatternKind::Crr).then(|| {
                let cpu = cpu_for(0);
                scope.spawn(move || -> Result<CrrStats> {
                    if let Some(c) = cpu {
                        crate::sys::pin_current_thread(c)?;
                    }
                    let target = CrrTarget {
                        transport,
                        server,
                        endpoint,
                        opts: &client.socket,
                        cookie,
                    };
                    let plan = CrrPlan {
                        request_size: point.request_size as usize,
                        response_size: point.response_size as usize,
                        stop: stop_at(point),
                        warmup: point.warmup,
                        spin: spec.spin,
                        io_timeout: client.io_timeout,
                    };
                    crr::run_client(&target, &plan)
                })
            });
            // crr has no standing connections: the point ends when its client loop does.
            let crr_result = crr_handle.map(|h| h.join());
            let mut results: Vec<Option<Joined>> = (0..n).map(|_| None).collect();
            let control = drive_point(ctrl, machine, &roles, &mut handles, &mut results, &ends);
            if control.is_err() {
                for e in &ends {
                    e.abort.store(true, Ordering::SeqCst);
                }
            }
            stop.store(true, Ordering::SeqCst);
            for (h, r) in handles.iter_mut().zip(results.iter_mut()) {
                if let Some(h) = h.take() {
                    *r = Some(h.join());
                }
            }
            (results, crr_result, control)
        });
        let client_instruments = instruments.map(|i| i.finish());

        let mut out = PointOutcome {
            client_streams: Vec::new(),
            exchanges: Vec::new(),
            crr: None,
            server: ServerMeasurement::default(),
            client_socket,
            server_socket,
            client_cpu: CpuTime::default(),
            client_instruments,
        };
        let mut first_error: Option<anyhow::Error> = None;
        for (i, r) in results.into_iter().enumerate() {
            match r {
                Some(Ok(Ok(WorkerResult::Stream(s)))) => {
                    out.client_cpu.add(s.cpu);
                    out.client_streams.push((i as u32, s));
                }
                Some(Ok(Ok(WorkerResult::Exchange(x)))) => {
                    out.client_cpu.add(x.cpu);
                    out.exchanges.push(x);
                }
                Some(Ok(Ok(WorkerResult::Responder(_)))) | None => {}
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
        match crr_result {
            Some(Ok(Ok(c))) => {
                out.client_cpu.add(c.cpu);
                out.crr = Some(c);
            }
            Some(Ok(Err(e))) => {
                first_error.get_or_insert(e);
            }
            Some(Err(_)) => {
                first_error.get_or_insert(anyhow::anyhow!("a data thread panicked"));
            }
            None => {}
        }
        // The server ended the point itself (a limit reached) and said why on the control
        // connection: that is the cause, and the data threads' errors ("stopped: the test was
        // ended on the control connection") are its consequence.
        let control = match control {
            Err(e) if ServerRefusal::of(&e).is_some() => return Err(e),
            other => other,
        };
        // Otherwise a data-path failure explains a control failure better than the other way
        // round, unless the server's reason is still waiting on the control connection.
        if let Some(e) = first_error {
            return Err(server_reason(&mut self.ctrl).unwrap_or(e));
        }
        control?;
        out.server = match next_event(&mut self.ctrl, &mut self.machine)? {
            ClientAction::PointDone(report) => *report,
            other => return Err(out_of_turn(&other)),
        };
        Ok(out)
    }

    /// Ends the test politely.
    pub fn close(mut self) {
        self.machine.bye(Instant::now());
        let _ = flush(&mut self.ctrl, &mut self.machine);
    }
}

/// The client's control side of a running point (mirror of the server's): report when its
/// senders are done, learn when the server's are, let every worker finish, end the point.
/// What is said when is the machine's; this side only joins and signals the workers.
fn drive_point(
    ctrl: &mut TcpStream,
    machine: &mut ClientMachine,
    roles: &[Role],
    handles: &mut [Option<Handle<'_>>],
    results: &mut [Option<Joined>],
    ends: &[EndSignal],
) -> Result<()> {
    if roles.contains(&Role::Sender) {
        let sent = join_senders(roles, handles, results);
        machine.senders_finished(Instant::now(), sent);
        flush(ctrl, machine)?;
    }
    if roles.contains(&Role::Receiver) {
        let sent = match next_event(ctrl, machine)? {
            ClientAction::PeerSendersDone { sent } => sent,
            other => return Err(out_of_turn(&other)),
        };
        senders_done(roles, ends, &sent)?;
    }
    // Receivers and requesters finish on their own now; the point ends when they have.
    join_workers(roles, None, handles, results);
    machine.workers_finished(Instant::now());
    flush(ctrl, machine)
}
