//! The server's side of the control protocol, without I/O (see mod.rs for the shape).
//!
//! ```text
//! Hello --hello--> [Auth --auth-->] Open --open--> Opening --test_opened--> Idle
//! Idle --point--> Preparing --point_ready--> Setup --connections + connected--> Running
//! Running --(send_done) end_point + own senders done--> Ending --point_finished--> Idle
//! Idle|Open --bye--> finished; any refusal, timeout, garbage or close --> closed
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{client_message_name as name, Outbox, PointRoles};
use crate::control::admission::HELLO_DEADLINE;
use crate::control::auth::{Nonce, Psk, AUTH_FAILED, NEEDS_KEY};
use crate::control::budget::Footprint;
use crate::control::limits::Limits;
use crate::control::protocol::{
    ClientMessage, PointSpec, ServerMeasurement, ServerMessage, TestSpec, MAGIC, PROTOCOL_VERSION,
};
use crate::control::refusal::Refusal;
use crate::env::Environment;
use crate::pattern::{self, Side};
use crate::transport::{Capabilities, Cookie, EffectiveOptions};
use crate::units::format_seconds;

/// How long after accept a session has to finish its handshake: the hello (which must come
/// within admission::HELLO_DEADLINE), the key exchange and the test request. Each is a
/// deadline for the whole frame, not a timeout per read.
pub const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(15);
/// How long a session may sit idle between points: the next request must be complete by then.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Before a client's average rate is held against `--max-rate`: a TCP start's first burst
/// is not the test's rate.
pub const RATE_WINDOW: Duration = Duration::from_secs(1);

/// What a server session starts from.
pub struct ServerSetup {
    pub limits: Limits,
    pub psk: Option<Arc<Psk>>,
    /// Bound on the data connections' setup; three of it are a point's grace.
    pub io_timeout: Duration,
    /// When the control connection was accepted: the handshake's deadlines count from it.
    pub accepted: Instant,
    /// What the Welcome tells about this host.
    pub environment: Environment,
    /// The address this control connection comes from, as the server sees it.
    pub client_seen_as: Option<String>,
    /// This session's random values, drawn by the driver so that the machine stays
    /// deterministic: the challenge's nonce (with a key) and the test cookie (without one).
    pub server_nonce: Nonce,
    pub cookie: Cookie,
}

#[derive(Debug)]
pub enum ServerAction {
    Send(ServerMessage),
    /// Make the test's data listener (or its one-port route) with this cookie, then call
    /// `test_opened`.
    OpenTest {
        spec: TestSpec,
        cookie: Cookie,
    },
    /// Reserve what the point holds (the shared budget, the bit rate) and configure the
    /// listener, then call `point_ready`; then accept the data connections by `next_deadline`,
    /// calling `data_connection_arrived` for each.
    PreparePoint {
        point: PointSpec,
        footprint: Footprint,
        /// The bit rate the point may move and what set it (see rate.rs).
        rate: Option<(f64, &'static str)>,
    },
    /// Go is sent: start the data plane's workers. While it runs, report the senders' end
    /// (`senders_finished`), the bytes received (`data_progress`) and time (`handle_timeout`).
    RunData,
    /// The client's senders are done and sent this much: tell this side's receivers.
    PeerSendersDone {
        sent: Vec<u64>,
    },
    /// The point is over on the control connection: stop and join the workers, then call
    /// `point_finished` with the report (or fail the session).
    EndData,
    /// The session ends on this refusal; the driver tells the client if it can.
    Close {
        refusal: Refusal,
    },
    /// The client said goodbye.
    Finished,
}

/// The absolute deadlines and budgets of one running point, from its Go.
#[derive(Debug, Clone)]
pub struct PointWatch {
    pub started: Instant,
    /// When the server gives up waiting for the client: the point's duration plus the
    /// grace, or the server's duration limit, whichever is sooner.
    pub deadline: Instant,
    /// Whether that deadline is the server's duration limit (else the point's own).
    pub limit_reached: bool,
    max_duration_ms: u64,
    /// The bit rate the point reserved and what set it (see rate.rs).
    rate: Option<(f64, &'static str)>,
    /// Bytes a paced sender may be ahead of its rate: one step (burst x write) per data
    /// connection, since a step leaves at its start (ten 128 KiB writes at 10 Mbit/s are 11
    /// writes at 1 s, 10.5% over the average).
    step_bytes: u64,
    io_timeout: Duration,
}

impl PointWatch {
    /// Every point, its warm-up and byte- or iteration-bound ones included, ends within the
    /// server's duration limit plus the grace a client that is done needs to say so.
    pub fn new(
        started: Instant,
        limits: &Limits,
        io_timeout: Duration,
        point: &PointSpec,
        streams: u32,
        rate: Option<(f64, &'static str)>,
    ) -> PointWatch {
        let grace = 3 * io_timeout;
        let limit = Duration::from_millis(limits.max_duration_ms) + grace;
        // A paced warm-up takes its known time before the timed phase (check_fit made sure
        // both fit in the limit).
        let warmup = point.pace.map_or(Duration::ZERO, |p| {
            Duration::try_from_secs_f64(p.end_ns(point.warmup) / 1e9)
                .unwrap_or(limit)
                .min(limit)
        });
        let own = Duration::from_millis(point.duration_ms.unwrap_or(limits.max_duration_ms));
        let wait = own + grace + warmup;
        PointWatch {
            started,
            deadline: started + wait.min(limit),
            limit_reached: limit <= wait,
            max_duration_ms: limits.max_duration_ms,
            rate,
            step_bytes: point
                .request_size
                .saturating_mul(point.pace.map_or(1, |p| p.burst))
                .saturating_mul(u64::from(streams)),
            io_timeout,
        }
    }

    /// Fails once the deadline has passed.
    pub fn expired(&self, now: Instant) -> Result<(), Refusal> {
        if now < self.deadline {
            return Ok(());
        }
        if self.limit_reached {
            return Err(Refusal::limit(format!(
                "the server's duration limit of {} was reached (--max-duration; warm-up and byte- or iteration-bound points count too)",
                format_seconds(self.max_duration_ms as f64 / 1e3)
            )));
        }
        Err(Refusal::invalid(format!(
            "the client did not end the point within {} after its duration (the warm-up counts: an unpaced warm-up is not given time of its own)",
            format_seconds((3 * self.io_timeout).as_secs_f64())
        )))
    }

    /// Fails when `received` bytes by `now` exceed the server's bit rate on average.
    pub fn check_rate(&self, now: Instant, received: u64) -> Result<(), Refusal> {
        let Some((limit, what)) = self.rate else {
            return Ok(());
        };
        let elapsed = now.saturating_duration_since(self.started);
        if elapsed < RATE_WINDOW {
            return Ok(());
        }
        let ahead = received.saturating_sub(self.step_bytes);
        let bps = ahead as f64 * 8.0 / elapsed.as_secs_f64();
        // 1% above the limit, for the step a paced sender lets out at once.
        if bps > limit * 1.01 {
            return Err(Refusal::limit(format!(
                "the test moved {} on average, above the {} it may move on this server ({what})",
                crate::units::format_mbit_s(bps),
                crate::units::format_mbit_s(limit)
            )));
        }
        Ok(())
    }

    /// The deadline, then the rate.
    pub fn check(&self, now: Instant, received: u64) -> Result<(), Refusal> {
        self.expired(now)?;
        self.check_rate(now, received)
    }
}

/// What the session's test settled.
struct Test {
    spec: TestSpec,
    caps: Capabilities,
    roles: PointRoles,
    connections: u32,
}

/// A running point's control side.
struct Run {
    watch: PointWatch,
    /// This side's senders are done and their SendDone is sent.
    senders_done: bool,
    /// The client's SendDone came (or this side has no receivers to wait for it).
    peer_senders_done: bool,
    /// A message the client sent while this side's senders still ran (its own SendDone in a
    /// bidirectional stream): taken when they are done, as if it came then.
    early: Option<ClientMessage>,
}

enum State {
    Hello,
    Auth {
        client: Nonce,
    },
    Open,
    /// The driver makes the listener.
    Opening {
        spec: TestSpec,
    },
    Idle {
        since: Instant,
    },
    /// The driver reserves what the point holds.
    Preparing {
        point: PointSpec,
        rate: Option<(f64, &'static str)>,
    },
    Setup {
        point: PointSpec,
        rate: Option<(f64, &'static str)>,
        deadline: Instant,
        arrived: Vec<EffectiveOptions>,
        connected: bool,
    },
    Running(Box<Run>),
    /// The driver joins the workers and makes the report.
    Ending,
    Ended,
}

pub struct ServerMachine {
    limits: Limits,
    psk: Option<Arc<Psk>>,
    io_timeout: Duration,
    accepted: Instant,
    environment: Environment,
    client_seen_as: Option<String>,
    server_nonce: Nonce,
    cookie: Cookie,
    /// The cookie was derived by both ends in the key exchange: it is never sent.
    cookie_derived: bool,
    test: Option<Test>,
    state: State,
    out: Outbox<ServerAction>,
}

impl ServerMachine {
    pub fn new(setup: ServerSetup) -> ServerMachine {
        ServerMachine {
            limits: setup.limits,
            psk: setup.psk,
            io_timeout: setup.io_timeout,
            accepted: setup.accepted,
            environment: setup.environment,
            client_seen_as: setup.client_seen_as,
            server_nonce: setup.server_nonce,
            cookie: setup.cookie,
            cookie_derived: false,
            test: None,
            state: State::Hello,
            out: Outbox::default(),
        }
    }

    pub fn poll_action(&mut self) -> Option<ServerAction> {
        self.out.actions.pop_front()
    }

    /// When `handle_timeout` must be called if nothing else happened; None while the
    /// machine waits for the driver alone.
    pub fn next_deadline(&self) -> Option<Instant> {
        match &self.state {
            State::Hello => Some(self.accepted + HELLO_DEADLINE),
            State::Auth { .. } | State::Open => Some(self.accepted + HANDSHAKE_DEADLINE),
            State::Idle { since } => Some(*since + IDLE_TIMEOUT),
            State::Setup { deadline, .. } => Some(*deadline),
            State::Running(run) => Some(run.watch.deadline),
            State::Opening { .. } | State::Preparing { .. } | State::Ending | State::Ended => None,
        }
    }

    /// The machine waits for the client's next request (its key, its test, its next point),
    /// not for a step of a point: the waits a full server may cut short (admission::Slots).
    pub fn awaits_request(&self) -> bool {
        matches!(
            self.state,
            State::Auth { .. } | State::Open | State::Idle { .. }
        )
    }

    /// The session is over (its last action is queued).
    pub fn is_ended(&self) -> bool {
        self.out.ended
    }

    fn send(&mut self, m: ServerMessage) {
        self.out.push(ServerAction::Send(m));
    }

    fn close(&mut self, refusal: Refusal) {
        self.state = State::Ended;
        self.out.end(ServerAction::Close { refusal });
    }

    /// The session ends on a request the protocol does not allow now.
    fn invalid(&mut self, reason: impl Into<String>) {
        self.close(Refusal::invalid(reason));
    }

    /// The session ends on a failure of the driver's own (a budget refused, the data plane
    /// failed, a listener could not be made).
    pub fn fail(&mut self, _now: Instant, refusal: Refusal) {
        if !self.out.ended {
            self.close(refusal);
        }
    }

    /// A frame that did not decode: the session ends with why.
    pub fn handle_garbage(&mut self, _now: Instant, reason: &str) {
        if !self.out.ended {
            self.invalid(reason);
        }
    }

    /// The client closed the control connection.
    pub fn handle_closed(&mut self, _now: Instant) {
        match self.state {
            State::Ended => {}
            State::Running(_) => {
                self.invalid("the client closed the control connection during the point")
            }
            _ => self.invalid("control connection closed by peer"),
        }
    }

    /// Time has come to `now`: ends the session if the current wait has run out.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.next_deadline().is_none_or(|d| now < d) {
            return;
        }
        let refusal = match &self.state {
            State::Hello => Refusal::invalid(format!(
                "no complete hello within {} of connecting",
                format_seconds(HELLO_DEADLINE.as_secs_f64())
            )),
            State::Setup { arrived, .. } => {
                let n = self.test.as_ref().map_or(0, |t| t.connections);
                if (arrived.len() as u32) < n {
                    Refusal::invalid(format!(
                        "data connection {} of {n} did not arrive",
                        arrived.len() + 1
                    ))
                } else {
                    Refusal::invalid("control connection timed out")
                }
            }
            State::Running(run) => match run.watch.expired(now) {
                Err(why) => why,
                Ok(()) => return,
            },
            _ => Refusal::invalid("control connection timed out"),
        };
        self.close(refusal);
    }

    /// A message from the client.
    pub fn handle(&mut self, now: Instant, msg: ClientMessage) {
        match std::mem::replace(&mut self.state, State::Ended) {
            State::Ended => {}
            State::Hello => self.on_hello(msg),
            State::Auth { client } => self.on_auth(&client, msg),
            State::Open => self.on_open(msg),
            State::Idle { .. } => self.on_idle(now, msg),
            State::Setup {
                point,
                rate,
                deadline,
                arrived,
                connected,
            } => match msg {
                ClientMessage::Connected if !connected => {
                    self.state = State::Setup {
                        point,
                        rate,
                        deadline,
                        arrived,
                        connected: true,
                    };
                    self.maybe_go(now);
                }
                other => self.invalid(format!(
                    "expected control message connected, got {}",
                    name(&other)
                )),
            },
            State::Running(mut run) => {
                let sending = self.test.as_ref().is_some_and(|t| t.roles.senders);
                if sending && !run.senders_done {
                    if run.early.is_some() {
                        self.invalid("unexpected control message while the server was sending");
                    } else {
                        run.early = Some(msg);
                        self.state = State::Running(run);
                    }
                    return;
                }
                self.state = State::Running(run);
                self.on_running(msg);
            }
            // The driver is busy on its own: any message now is out of order.
            State::Opening { .. } | State::Preparing { .. } | State::Ending => {
                self.invalid(format!("unexpected control message {}", name(&msg)))
            }
        }
    }

    fn on_hello(&mut self, msg: ClientMessage) {
        let nonce = match msg {
            ClientMessage::Hello {
                magic,
                protocol,
                nonce,
                ..
            } if magic == MAGIC => {
                if protocol != PROTOCOL_VERSION {
                    return self.invalid(format!(
                        "client speaks control protocol {protocol}, this server speaks {PROTOCOL_VERSION}: use the same wirebench version on both ends"
                    ));
                }
                nonce
            }
            _ => return self.invalid("expected a wirebench hello"),
        };
        // A keyless server answers a client with a key as always: the client, which wants the
        // server to prove it holds the key, is the one to refuse.
        if self.psk.is_none() {
            self.welcome(None);
            self.state = State::Open;
            return;
        }
        let Some(client) = nonce else {
            return self.close(Refusal::not_authorised(NEEDS_KEY));
        };
        let Some(client) = Nonce::from_hex(&client) else {
            return self.invalid("malformed hello: the client nonce is not 32 bytes of hex");
        };
        self.send(ServerMessage::Challenge {
            nonce: self.server_nonce.to_hex(),
        });
        self.state = State::Auth { client };
    }

    fn on_auth(&mut self, client: &Nonce, msg: ClientMessage) {
        let Some(psk) = self.psk.clone() else {
            return self.invalid("expected a test request, got auth");
        };
        match msg {
            ClientMessage::Auth { proof }
                if psk.verify_client(&self.server_nonce, client, &proof) =>
            {
                self.cookie = psk.cookie(&self.server_nonce, client);
                self.cookie_derived = true;
                self.welcome(Some(psk.server_proof(&self.server_nonce, client)));
                self.state = State::Open;
            }
            ClientMessage::Auth { .. } => self.close(Refusal::not_authorised(AUTH_FAILED)),
            other => self.invalid(format!("expected the key exchange, got {}", name(&other))),
        }
    }

    fn welcome(&mut self, proof: Option<String>) {
        self.send(ServerMessage::Welcome {
            protocol: PROTOCOL_VERSION,
            version: env!("CARGO_PKG_VERSION").into(),
            environment: self.environment.clone(),
            limits: self.limits.clone(),
            client_seen_as: self.client_seen_as.clone(),
            proof,
        });
    }

    fn on_open(&mut self, msg: ClientMessage) {
        let spec = match msg {
            ClientMessage::Open { spec } => spec,
            ClientMessage::Bye => return self.out.end(ServerAction::Finished),
            other => return self.invalid(format!("expected a test request, got {}", name(&other))),
        };
        if let Err(why) = self.limits.check_test(&spec) {
            return self.close(why);
        }
        if spec.one_port && !crate::control::oneport::carries(spec.transport) {
            return self.invalid("one-port tests carry data on the control port's TCP: tcp only");
        }
        self.out.push(ServerAction::OpenTest {
            spec: spec.clone(),
            cookie: self.cookie,
        });
        self.state = State::Opening { spec };
    }

    /// The driver made the test's listener: `endpoint` is where the data connections go.
    pub fn test_opened(&mut self, now: Instant, endpoint: String, caps: Capabilities) {
        let State::Opening { spec } = std::mem::replace(&mut self.state, State::Ended) else {
            return self.misuse("test_opened");
        };
        self.send(ServerMessage::Opened {
            endpoint,
            // With a key, the cookie is derived on both ends and never sent.
            cookie: (!self.cookie_derived).then(|| self.cookie.to_hex()),
        });
        self.test = Some(Test {
            roles: PointRoles::of(Side::Server, &spec),
            connections: pattern::connection_count(spec.pattern, spec.direction, spec.streams),
            spec,
            caps,
        });
        self.state = State::Idle { since: now };
    }

    fn on_idle(&mut self, now: Instant, msg: ClientMessage) {
        let point = match msg {
            ClientMessage::Point { spec } => spec,
            ClientMessage::Bye => return self.out.end(ServerAction::Finished),
            other => return self.invalid(format!("unexpected control message {}", name(&other))),
        };
        let Some(test) = &self.test else {
            return self.misuse("a point without a test");
        };
        // A point's own fields out of bounds: refused, and the session goes on.
        if let Err(refusal) = self.limits.check_point(&point) {
            self.send(refusal.into());
            self.state = State::Idle { since: now };
            return;
        }
        // What the point would hold, checked before anything is allocated.
        let footprint = match self.limits.check_fit(&test.spec, &point, &test.caps) {
            Ok(f) => f,
            Err(why) => return self.close(why),
        };
        let rate = crate::control::rate::point_limit(&self.limits, &test.spec, &point);
        self.out.push(ServerAction::PreparePoint {
            point: point.clone(),
            footprint,
            rate,
        });
        self.state = State::Preparing { point, rate };
    }

    /// The point's resources are held and the listener configured: the client may connect.
    /// One deadline for the whole setup, not one per connection: a client that let each of
    /// 128 connections arrive just inside --io-timeout held the point for 21 minutes.
    pub fn point_ready(&mut self, now: Instant) {
        let State::Preparing { point, rate } = std::mem::replace(&mut self.state, State::Ended)
        else {
            return self.misuse("point_ready");
        };
        self.send(ServerMessage::PointAccepted);
        self.state = State::Setup {
            point,
            rate,
            deadline: now + self.io_timeout,
            arrived: Vec::new(),
            connected: false,
        };
        // crr has no standing connections: only the client's Connected is awaited.
        self.maybe_go(now);
    }

    /// One more data connection arrived; `socket` is what its options became.
    pub fn data_connection_arrived(&mut self, now: Instant, socket: EffectiveOptions) {
        let n = self.test.as_ref().map_or(0, |t| t.connections) as usize;
        match &mut self.state {
            State::Setup { arrived, .. } if arrived.len() < n => arrived.push(socket),
            _ => return self.misuse("data_connection_arrived"),
        }
        self.maybe_go(now);
    }

    fn maybe_go(&mut self, now: Instant) {
        let n = self.test.as_ref().map_or(0, |t| t.connections);
        let ready = matches!(&self.state, State::Setup { arrived, connected: true, .. }
            if arrived.len() as u32 == n);
        if !ready {
            return;
        }
        let State::Setup {
            point,
            rate,
            arrived,
            ..
        } = std::mem::replace(&mut self.state, State::Ended)
        else {
            return;
        };
        let receivers = self.test.as_ref().map_or(0, |t| t.roles.receivers);
        self.send(ServerMessage::Go { socket: arrived });
        self.out.push(ServerAction::RunData);
        self.state = State::Running(Box::new(Run {
            watch: PointWatch::new(now, &self.limits, self.io_timeout, &point, n, rate),
            senders_done: false,
            peer_senders_done: receivers == 0,
            early: None,
        }));
    }

    /// This side's senders are done; `sent` is what each sent in its timed phase.
    pub fn senders_finished(&mut self, _now: Instant, sent: Vec<u64>) {
        let State::Running(run) = &mut self.state else {
            return self.misuse("senders_finished");
        };
        run.senders_done = true;
        let early = run.early.take();
        self.send(ServerMessage::SendDone { sent });
        // The point ends on the client's EndPoint: one that came early is taken now.
        if let Some(m) = early {
            self.on_running(m);
        }
    }

    /// The data plane has received `received` bytes in all by `now`: held against the rate.
    pub fn data_progress(&mut self, now: Instant, received: u64) {
        if let State::Running(run) = &self.state {
            if let Err(why) = run.watch.check_rate(now, received) {
                self.close(why);
            }
        }
    }

    /// A message of the running point, in its turn: the client's SendDone (if this side
    /// receives), then its EndPoint.
    fn on_running(&mut self, msg: ClientMessage) {
        let receivers = self.test.as_ref().map(|t| t.roles);
        let State::Running(run) = &mut self.state else {
            return;
        };
        if !run.peer_senders_done {
            let sent = match msg {
                ClientMessage::SendDone { sent } => sent,
                other => {
                    return self.invalid(format!(
                        "expected control message send_done, got {}",
                        name(&other)
                    ))
                }
            };
            if let Some(Err(why)) = receivers.map(|r| r.check_peer_senders(&sent)) {
                return self.close(why);
            }
            run.peer_senders_done = true;
            self.out.push(ServerAction::PeerSendersDone { sent });
            return;
        }
        if !matches!(msg, ClientMessage::EndPoint) {
            return self.invalid(format!(
                "expected control message end_point, got {}",
                name(&msg)
            ));
        }
        self.out.push(ServerAction::EndData);
        self.state = State::Ending;
    }

    /// The workers are joined and this is the server's side of the point.
    pub fn point_finished(&mut self, now: Instant, report: ServerMeasurement) {
        if !matches!(self.state, State::Ending) {
            return self.misuse("point_finished");
        }
        self.send(ServerMessage::PointResult { report });
        self.state = State::Idle { since: now };
    }

    /// A driver called an input out of its turn: a bug of the driver, ended like any other
    /// failure rather than a panic.
    fn misuse(&mut self, what: &str) {
        if !self.out.ended {
            self.close(Refusal::internal(format!(
                "internal error: {what} out of turn in the control protocol"
            )));
        }
    }
}
