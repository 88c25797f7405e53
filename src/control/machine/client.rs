//! The client's side of the control protocol, without I/O (see mod.rs for the shape).
//!
//! ```text
//! Welcome --challenge--> KeyedWelcome --welcome--> Opening --opened--> Idle
//! Welcome --welcome--> Opening
//! Idle --start_point--> Accepting --point_accepted--> Connecting --data_connected--> Go
//! Go --go--> Running --(own send_done, peer's send_done), workers_finished--> Result
//! Result --point_result--> Idle --bye--> ended
//! ```

use std::time::{Duration, Instant};

use super::{Outbox, PointRoles};
use crate::control::auth::{Nonce, Psk, NEEDS_KEY, PSK_ENV};
use crate::control::limits::Limits;
use crate::control::protocol::{
    ClientMessage, PointSpec, ServerMeasurement, ServerMessage, TestSpec, MAGIC, PROTOCOL_VERSION,
};
use crate::control::refusal::{RefusalKind, ServerRefusal};
use crate::env::Environment;
use crate::pattern::Side;
use crate::transport::{Cookie, EffectiveOptions};

/// What a client session starts from.
pub struct ClientSetup {
    /// The server as errors name it.
    pub server: String,
    pub spec: TestSpec,
    /// With a key, the client proves it holds it and demands the server's proof.
    pub psk: Option<Psk>,
    /// This side's nonce of the key exchange, drawn by the driver (present with a key).
    pub nonce: Option<Nonce>,
    /// How long each answer of the handshake may take.
    pub timeout: Duration,
    /// This end's address of the control connection, to compare with where the server sees
    /// it come from.
    pub local_addr: Option<String>,
}

/// What the handshake settled: the session's facts for the driver.
#[derive(Debug, Clone)]
pub struct Opened {
    pub server_env: Environment,
    pub limits: Limits,
    /// "server sees A, this side is B" when something sits in the control path.
    pub middlebox: Option<String>,
    pub endpoint: String,
    pub cookie: Cookie,
    /// The test as opened (one_port set when a middlebox was seen and TCP can go through it).
    pub spec: TestSpec,
}

#[derive(Debug)]
pub enum ClientAction {
    Send(ClientMessage),
    /// A warning for the user; the session goes on.
    Warn(String),
    /// The test is open: points may start.
    Opened(Box<Opened>),
    /// The point is accepted: open the data connections, then call `data_connected`.
    OpenData,
    /// Go came: start the data plane's workers. Call `senders_finished` when this side's
    /// senders are done (if it has any), then read the peer's SendDone (if it has receivers),
    /// then `workers_finished` once every worker is.
    RunData {
        server_socket: Vec<EffectiveOptions>,
    },
    /// The server's senders are done and sent this much: tell this side's receivers.
    PeerSendersDone {
        sent: Vec<u64>,
    },
    /// The server's side of the point.
    PointDone(Box<ServerMeasurement>),
    /// The session ends on this error.
    Close {
        reason: String,
    },
    /// The server refused (or ended the test): the session ends on its refusal.
    Refused(ServerRefusal),
}

#[derive(Debug)]
struct Run {
    senders_done: bool,
    peer_senders_done: bool,
    /// Since when the peer's SendDone is awaited (this side's senders are done).
    waiting_since: Option<Instant>,
}

#[derive(Debug)]
enum State {
    Welcome {
        since: Instant,
    },
    KeyedWelcome {
        since: Instant,
        server: Nonce,
    },
    Opening {
        since: Instant,
        cookie: Option<Cookie>,
    },
    Idle,
    Accepting {
        since: Instant,
    },
    Connecting,
    Go {
        since: Instant,
    },
    Running(Run),
    Result {
        since: Instant,
    },
    Ended,
}

pub struct ClientMachine {
    server: String,
    spec: TestSpec,
    psk: Option<Psk>,
    nonce: Option<Nonce>,
    timeout: Duration,
    local_addr: Option<String>,
    /// From the Welcome, until the test is opened.
    welcome: Option<(Environment, Limits, Option<String>)>,
    /// The server's duration limit: a point without a duration may take that long.
    max_duration_ms: u64,
    roles: PointRoles,
    /// The running point's bound on each data-plane step and on the wait for the server.
    io_timeout: Duration,
    point_wait: Duration,
    state: State,
    out: Outbox<ClientAction>,
    bye_said: bool,
}

impl ClientMachine {
    /// Starts a session: the Hello is the first action.
    pub fn new(now: Instant, setup: ClientSetup) -> ClientMachine {
        let mut m = ClientMachine {
            roles: PointRoles::of(Side::Client, &setup.spec),
            server: setup.server,
            spec: setup.spec,
            psk: setup.psk,
            nonce: setup.nonce,
            timeout: setup.timeout,
            local_addr: setup.local_addr,
            welcome: None,
            max_duration_ms: 0,
            io_timeout: setup.timeout,
            point_wait: setup.timeout,
            state: State::Welcome { since: now },
            out: Outbox::default(),
            bye_said: false,
        };
        m.send(ClientMessage::Hello {
            magic: MAGIC.into(),
            protocol: PROTOCOL_VERSION,
            version: env!("CARGO_PKG_VERSION").into(),
            nonce: m.nonce.as_ref().map(Nonce::to_hex),
        });
        m
    }

    pub fn poll_action(&mut self) -> Option<ClientAction> {
        self.out.actions.pop_front()
    }

    /// Whether the next input is the server's: the driver reads a frame by `next_deadline`.
    pub fn awaiting_server(&self) -> bool {
        match &self.state {
            State::Welcome { .. }
            | State::KeyedWelcome { .. }
            | State::Opening { .. }
            | State::Accepting { .. }
            | State::Go { .. }
            | State::Result { .. } => true,
            State::Running(run) => run.waiting_since.is_some(),
            State::Idle | State::Connecting | State::Ended => false,
        }
    }

    pub fn next_deadline(&self) -> Option<Instant> {
        match &self.state {
            State::Welcome { since }
            | State::KeyedWelcome { since, .. }
            | State::Opening { since, .. } => Some(*since + self.timeout),
            State::Accepting { since } | State::Go { since } => Some(*since + self.io_timeout),
            State::Running(run) => run.waiting_since.map(|s| s + self.point_wait),
            State::Result { since } => Some(*since + self.point_wait),
            State::Idle | State::Connecting | State::Ended => None,
        }
    }

    pub fn is_ended(&self) -> bool {
        self.out.ended
    }

    fn send(&mut self, m: ClientMessage) {
        self.out.push(ClientAction::Send(m));
    }

    fn close(&mut self, reason: impl Into<String>) {
        self.state = State::Ended;
        self.out.end(ClientAction::Close {
            reason: reason.into(),
        });
    }

    fn refused(&mut self, refusal: ServerRefusal) {
        if !self.out.ended {
            self.state = State::Ended;
            self.out.end(ClientAction::Refused(refusal));
        }
    }

    /// Before the server has answered at all, every failure says it did not answer as one.
    fn close_reading(&mut self, why: &str) {
        match self.state {
            State::Ended => {}
            State::Welcome { .. } => {
                let reason = format!(
                    "{} did not answer as a wirebench server: {why}",
                    self.server
                );
                self.close(reason)
            }
            _ => self.close(why),
        }
    }

    pub fn handle_garbage(&mut self, _now: Instant, reason: &str) {
        self.close_reading(reason);
    }

    /// The control connection failed (an I/O error other than a close or a timeout).
    pub fn handle_failed(&mut self, _now: Instant, why: &str) {
        self.close_reading(why);
    }

    pub fn handle_closed(&mut self, _now: Instant) {
        self.close_reading("control connection closed by peer");
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        if self.next_deadline().is_some_and(|d| now >= d) {
            self.close_reading("control connection timed out");
        }
    }

    /// A failure of the driver's own ends the session.
    pub fn fail(&mut self, _now: Instant, reason: impl Into<String>) {
        if !self.out.ended {
            self.close(reason);
        }
    }

    /// Ends the test politely. Said even after the session failed on this side (a refused
    /// point): a server that is still waiting ends its session quietly instead of on a close.
    pub fn bye(&mut self, _now: Instant) {
        if !self.bye_said {
            self.bye_said = true;
            self.out
                .actions
                .push_back(ClientAction::Send(ClientMessage::Bye));
            self.state = State::Ended;
            self.out.ended = true;
        }
    }

    /// A message from the server.
    pub fn handle(&mut self, now: Instant, msg: ServerMessage) {
        // The server's refusal, whenever it comes, is the session's end and its reason.
        if let Some(refusal) = msg.refusal() {
            self.refused(refusal);
            return;
        }
        match std::mem::replace(&mut self.state, State::Ended) {
            State::Ended => {}
            State::Welcome { .. } => self.on_first_answer(now, msg),
            State::KeyedWelcome { server, .. } => self.on_keyed_welcome(now, &server, msg),
            State::Opening { cookie, .. } => self.on_opened(cookie, msg),
            State::Accepting { .. } => match msg {
                ServerMessage::PointAccepted => {
                    self.out.push(ClientAction::OpenData);
                    self.state = State::Connecting;
                }
                _ => self.close("unexpected answer to a point request"),
            },
            State::Go { .. } => match msg {
                ServerMessage::Go { socket } => {
                    self.out.push(ClientAction::RunData {
                        server_socket: socket,
                    });
                    let senders = self.roles.senders;
                    self.state = State::Running(Run {
                        senders_done: !senders,
                        peer_senders_done: self.roles.receivers == 0,
                        waiting_since: (!senders && self.roles.receivers > 0).then_some(now),
                    });
                }
                _ => self.close("unexpected answer after connecting"),
            },
            State::Running(mut run) => match msg {
                ServerMessage::SendDone { sent } if !run.peer_senders_done => {
                    if let Err(why) = self.roles.check_peer_senders(&sent) {
                        return self.close(why.message);
                    }
                    run.peer_senders_done = true;
                    run.waiting_since = None;
                    self.state = State::Running(run);
                    self.out.push(ClientAction::PeerSendersDone { sent });
                }
                _ => self.close("unexpected control message while receiving"),
            },
            State::Result { .. } => match msg {
                ServerMessage::PointResult { report } => {
                    // The server's words end up in tables and logs: escaped where they enter.
                    let report = crate::text::sanitized(report);
                    self.out.push(ClientAction::PointDone(Box::new(report)));
                    self.state = State::Idle;
                }
                _ => self.close("unexpected answer at the end of a point"),
            },
            State::Idle | State::Connecting => {
                self.close("unexpected control message from the server between steps")
            }
        }
    }

    fn on_first_answer(&mut self, now: Instant, msg: ServerMessage) {
        let server = self.server.clone();
        match (msg, &self.psk, &self.nonce) {
            (ServerMessage::Challenge { .. }, None, _) => self.refused(ServerRefusal {
                kind: Some(RefusalKind::NotAuthorised),
                message: NEEDS_KEY.into(),
                retry_after: None,
            }),
            (ServerMessage::Challenge { nonce }, Some(psk), Some(client)) => {
                let Some(theirs) = Nonce::from_hex(&nonce) else {
                    return self.close(format!("{server} sent a malformed challenge"));
                };
                let proof = psk.client_proof(&theirs, client);
                self.send(ClientMessage::Auth { proof });
                self.state = State::KeyedWelcome {
                    since: now,
                    server: theirs,
                };
            }
            (ServerMessage::Welcome { .. }, Some(_), _) => self.close(format!(
                "{server} runs without a pre-shared key: this client has one (--psk-file or {PSK_ENV}) and talks only to a server that proves it holds it"
            )),
            (msg, _, _) => self.on_welcome(now, msg, None),
        }
    }

    fn on_keyed_welcome(&mut self, now: Instant, server: &Nonce, msg: ServerMessage) {
        let (Some(psk), Some(client)) = (&self.psk, &self.nonce) else {
            return self.close("internal error: a key exchange without a key");
        };
        let proven = matches!(&msg, ServerMessage::Welcome { proof: Some(p), .. }
            if psk.verify_server(server, client, p));
        if !proven {
            return self.close(format!(
                "{} did not prove it holds the pre-shared key: authentication failed",
                self.server
            ));
        }
        let cookie = psk.cookie(server, client);
        self.on_welcome(now, msg, Some(cookie));
    }

    /// A Welcome of this protocol version: the test is asked for.
    fn on_welcome(&mut self, now: Instant, msg: ServerMessage, cookie: Option<Cookie>) {
        let (environment, limits, seen_as) = match msg {
            ServerMessage::Welcome {
                protocol,
                environment,
                limits,
                client_seen_as,
                ..
            } if protocol == PROTOCOL_VERSION => {
                // The server's words end up in tables and logs: escaped where they enter.
                (crate::text::sanitized(environment), limits, client_seen_as)
            }
            ServerMessage::Welcome { protocol, .. } => {
                return self.close(format!(
                    "{} speaks control protocol {protocol}, this client speaks {PROTOCOL_VERSION}: use the same wirebench version on both ends",
                    self.server
                ))
            }
            _ => {
                return self.close(format!(
                    "{} did not answer as a wirebench server of this version",
                    self.server
                ))
            }
        };
        // Data connections to the server's own data ports would bypass a relay or proxy in
        // front of it (or fail to pass it): with TCP they then go through the control port.
        let middlebox = match (seen_as, &self.local_addr) {
            (Some(seen), Some(local)) if seen != *local => {
                // The server's words: escaped before they reach a terminal.
                let seen = crate::text::printable(&seen).into_owned();
                Some(format!("server sees {seen}, this side is {local}"))
            }
            _ => None,
        };
        if let Some(m) = &middlebox {
            if crate::control::oneport::carries(self.spec.transport) {
                self.spec.one_port = true;
            } else {
                self.out.push(ClientAction::Warn(format!(
                    "wirebench: warning: a relay, proxy or NAT is in the control path ({m}); {} data goes to the server's own address, not through it",
                    self.spec.transport
                )));
            }
        }
        self.max_duration_ms = limits.max_duration_ms;
        self.welcome = Some((environment, limits, middlebox));
        self.send(ClientMessage::Open {
            spec: self.spec.clone(),
        });
        self.state = State::Opening { since: now, cookie };
        // The key is not needed past the handshake.
        self.psk = None;
    }

    fn on_opened(&mut self, derived: Option<Cookie>, msg: ServerMessage) {
        let (endpoint, cookie) = match (msg, derived) {
            // After a key exchange the cookie is derived here, never taken from the wire.
            (ServerMessage::Opened { endpoint, .. }, Some(derived)) => (endpoint, derived),
            (
                ServerMessage::Opened {
                    endpoint,
                    cookie: Some(cookie),
                },
                None,
            ) => match Cookie::from_hex(&cookie) {
                Some(c) => (endpoint, c),
                None => return self.close("server sent a malformed test cookie"),
            },
            _ => return self.close("unexpected answer to the test request"),
        };
        let Some((server_env, limits, middlebox)) = self.welcome.take() else {
            return self.close("internal error: a test opened without a welcome");
        };
        self.out.push(ClientAction::Opened(Box::new(Opened {
            server_env,
            limits,
            middlebox,
            endpoint,
            cookie,
            spec: self.spec.clone(),
        })));
        self.state = State::Idle;
    }

    /// Asks for a point. The server may take `io_timeout` for each answer before the point
    /// runs, and the point's duration (or its duration limit) plus three of it at the end.
    pub fn start_point(&mut self, now: Instant, point: &PointSpec, io_timeout: Duration) {
        if !matches!(self.state, State::Idle) {
            return self.misuse("start_point");
        }
        let max_duration_ms = self.max_duration_ms;
        self.io_timeout = io_timeout;
        self.point_wait =
            Duration::from_millis(point.duration_ms.unwrap_or(max_duration_ms)) + 3 * io_timeout;
        self.send(ClientMessage::Point {
            spec: point.clone(),
        });
        self.state = State::Accepting { since: now };
    }

    /// Every data connection is open.
    pub fn data_connected(&mut self, now: Instant) {
        if !matches!(self.state, State::Connecting) {
            return self.misuse("data_connected");
        }
        self.send(ClientMessage::Connected);
        self.state = State::Go { since: now };
    }

    /// This side's senders are done; `sent` is what each sent in its timed phase.
    pub fn senders_finished(&mut self, now: Instant, sent: Vec<u64>) {
        match &mut self.state {
            State::Running(run) if !run.senders_done => {
                run.senders_done = true;
                if !run.peer_senders_done {
                    run.waiting_since = Some(now);
                }
            }
            _ => return self.misuse("senders_finished"),
        }
        self.send(ClientMessage::SendDone { sent });
    }

    /// Every worker of the point is done: the point ends.
    pub fn workers_finished(&mut self, now: Instant) {
        match &self.state {
            State::Running(run) if run.senders_done && run.peer_senders_done => {}
            _ => return self.misuse("workers_finished"),
        }
        self.send(ClientMessage::EndPoint);
        self.state = State::Result { since: now };
    }

    fn misuse(&mut self, what: &str) {
        if !self.out.ended {
            self.close(format!(
                "internal error: {what} out of turn in the control protocol"
            ));
        }
    }
}
