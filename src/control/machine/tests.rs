//! The two machines against each other and alone, in memory: no sockets, no threads, no
//! sleeps. Time is whatever `Instant` a test passes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::control::auth::{Nonce, Psk, AUTH_FAILED, NEEDS_KEY};
use crate::control::framing::{receive, write_frame, Received};
use crate::control::limits::Limits;
use crate::control::protocol::{
    ClientMessage, PointSpec, ServerMeasurement, ServerMessage, TestSpec, MAGIC, PROTOCOL_VERSION,
};
use crate::control::refusal::{Refusal, RefusalKind, ServerRefusal};
use crate::env::Environment;
use crate::pattern::{Direction, FastPaths, PatternKind};
use crate::transport::{Cookie, EffectiveOptions, SocketOptions, TransportKind};

const SERVER: &str = "127.0.0.1:5320";
const CLIENT: &str = "127.0.0.1:40000";
const IO: Duration = Duration::from_secs(2);

fn spec(direction: Direction, streams: u32) -> TestSpec {
    TestSpec {
        write_size: None,
        think_ns: None,
        length_prefix: 0,
        tls: false,
        path_timing: false,
        open_loop: None,
        pattern: PatternKind::Stream,
        transport: TransportKind::Tcp,
        streams,
        direction,
        spin: false,
        server_cpus: vec![],
        interval_ms: None,
        burst: 1,
        fast: FastPaths {
            batch: 1,
            ..FastPaths::default()
        },
        one_port: false,
    }
}

fn point(duration_ms: u64) -> PointSpec {
    PointSpec {
        request_size: 1000,
        response_size: 1000,
        read_size: 1000,
        duration_ms: Some(duration_ms),
        bytes: None,
        iterations: None,
        warmup: 0,
        pace: None,
        server_socket: SocketOptions::default(),
        buffers_fixed: false,
        rate_per_s: None,
    }
}

fn key() -> Psk {
    Psk::new(b"0123456789abcdef0123456789abcdef").unwrap()
}

fn nonce(b: u8) -> Nonce {
    Nonce::from_hex(&format!("{b:02x}").repeat(32)).unwrap()
}

fn server_at(t0: Instant, limits: Limits, psk: Option<Psk>) -> ServerMachine {
    ServerMachine::new(ServerSetup {
        limits,
        psk: psk.map(Arc::new),
        io_timeout: IO,
        accepted: t0,
        environment: Environment::default(),
        client_seen_as: Some(CLIENT.into()),
        server_nonce: nonce(0x11),
        cookie: Cookie([7; 16]),
    })
}

fn client_at(t0: Instant, spec: TestSpec, psk: Option<Psk>) -> ClientMachine {
    let nonce = psk.as_ref().map(|_| nonce(0x22));
    ClientMachine::new(
        t0,
        ClientSetup {
            server: SERVER.into(),
            spec,
            psk,
            nonce,
            timeout: IO,
            local_addr: Some(CLIENT.into()),
        },
    )
}

/// Through the real framing and JSON, as on the wire: the machines must speak exactly the
/// protocol's messages.
fn wire<T: serde::Serialize + serde::de::DeserializeOwned>(m: &T) -> T {
    let mut buf = Vec::new();
    write_frame(&mut buf, m).unwrap();
    match receive::<T>(&mut buf.as_slice()) {
        Received::Message(m) => m,
        _ => panic!("a message did not survive the wire"),
    }
}

/// Both machines, the frames moved between them, and what each gave its driver.
struct Pair {
    c: ClientMachine,
    s: ServerMachine,
    now: Instant,
    client: Vec<ClientAction>,
    server: Vec<ServerAction>,
}

impl Pair {
    fn new(spec: TestSpec, limits: Limits, keys: (Option<Psk>, Option<Psk>)) -> Pair {
        let t0 = Instant::now();
        let mut s = server_at(t0, limits, keys.1);
        let mut c = client_at(t0, spec, keys.0);
        // Admission hands the server the client's hello first.
        let Some(ClientAction::Send(hello)) = c.poll_action() else {
            panic!("the client starts with its hello");
        };
        s.handle(t0, wire(&hello));
        Pair {
            c,
            s,
            now: t0,
            client: Vec::new(),
            server: Vec::new(),
        }
    }

    /// Moves frames until neither side has one to send.
    fn run(&mut self) {
        loop {
            let mut moved = false;
            while let Some(a) = self.c.poll_action() {
                match a {
                    ClientAction::Send(m) => {
                        self.s.handle(self.now, wire(&m));
                        moved = true;
                    }
                    other => self.client.push(other),
                }
            }
            while let Some(a) = self.s.poll_action() {
                match a {
                    ServerAction::Send(m) => {
                        self.c.handle(self.now, wire(&m));
                        moved = true;
                    }
                    other => self.server.push(other),
                }
            }
            if !moved {
                return;
            }
        }
    }

    /// Opens the test: the server's driver makes its listener when asked.
    fn open(&mut self) -> Opened {
        self.run();
        let Some(ServerAction::OpenTest { spec, .. }) = self.server.pop() else {
            panic!(
                "the server was not asked to open the test: {:?}",
                self.server
            );
        };
        let caps = spec.transport.capabilities().unwrap();
        self.s.test_opened(self.now, "127.0.0.1:5321".into(), caps);
        self.run();
        match self.client.pop() {
            Some(ClientAction::Opened(o)) => *o,
            other => panic!("the client did not open: {other:?}"),
        }
    }

    /// A point up to its running data plane.
    fn start(&mut self, p: &PointSpec, connections: u32) {
        self.c.start_point(self.now, p, IO);
        self.run();
        assert!(matches!(
            self.server.pop(),
            Some(ServerAction::PreparePoint { .. })
        ));
        self.s.point_ready(self.now);
        self.run();
        assert!(matches!(self.client.pop(), Some(ClientAction::OpenData)));
        for _ in 0..connections {
            self.s
                .data_connection_arrived(self.now, EffectiveOptions::default());
        }
        self.c.data_connected(self.now);
        self.run();
        assert!(matches!(self.server.pop(), Some(ServerAction::RunData)));
        assert!(matches!(
            self.client.pop(),
            Some(ClientAction::RunData { .. })
        ));
    }

    /// Ends a running point: the server's report goes to the client.
    fn finish(&mut self, report: ServerMeasurement) -> ServerMeasurement {
        self.c.workers_finished(self.now);
        self.run();
        assert!(matches!(self.server.pop(), Some(ServerAction::EndData)));
        self.s.point_finished(self.now, report);
        self.run();
        match self.client.pop() {
            Some(ClientAction::PointDone(r)) => *r,
            other => panic!("no point result: {other:?}"),
        }
    }
}

/// The refusal the machine ended with (its last action), or None if it goes on.
fn server_closed(s: &mut ServerMachine) -> Option<Refusal> {
    let mut last = None;
    while let Some(a) = s.poll_action() {
        if let ServerAction::Close { refusal } = a {
            last = Some(refusal);
        }
    }
    last
}

/// The line the client's session ended with (its own reason, or the server's refusal as
/// the user reads it), or None if it goes on.
fn client_closed(c: &mut ClientMachine) -> Option<String> {
    let mut last = None;
    while let Some(a) = c.poll_action() {
        match a {
            ClientAction::Close { reason } => last = Some(reason),
            ClientAction::Refused(r) => last = Some(r.to_string()),
            _ => {}
        }
    }
    last
}

/// The server's refusal the client's session ended on, or None.
fn client_refused(c: &mut ClientMachine) -> Option<ServerRefusal> {
    let mut last = None;
    while let Some(a) = c.poll_action() {
        if let ClientAction::Refused(r) = a {
            last = Some(r);
        }
    }
    last
}

/// The server's sent messages, draining its queue.
fn server_sent(s: &mut ServerMachine) -> Vec<ServerMessage> {
    std::iter::from_fn(|| s.poll_action())
        .filter_map(|a| match a {
            ServerAction::Send(m) => Some(m),
            _ => None,
        })
        .collect()
}

fn hello(protocol: u32, nonce: Option<String>) -> ClientMessage {
    ClientMessage::Hello {
        magic: MAGIC.into(),
        protocol,
        version: "test".into(),
        nonce,
    }
}

/// A keyless server past its Welcome, waiting for the test request.
fn welcomed_server(t0: Instant, limits: Limits) -> ServerMachine {
    let mut s = server_at(t0, limits, None);
    s.handle(t0, hello(PROTOCOL_VERSION, None));
    assert!(matches!(
        server_sent(&mut s)[..],
        [ServerMessage::Welcome { .. }]
    ));
    s
}

/// A keyless server with its test open, idle between points.
fn idle_server(t0: Instant, limits: Limits, spec: TestSpec) -> ServerMachine {
    let mut s = welcomed_server(t0, limits);
    s.handle(t0, ClientMessage::Open { spec });
    assert!(matches!(
        s.poll_action(),
        Some(ServerAction::OpenTest { .. })
    ));
    let caps = TransportKind::Tcp.capabilities().unwrap();
    s.test_opened(t0, "127.0.0.1:5321".into(), caps);
    assert!(matches!(
        server_sent(&mut s)[..],
        [ServerMessage::Opened {
            cookie: Some(_),
            ..
        }]
    ));
    s
}

/// A server with one point accepted and its setup deadline running from `t`.
fn server_in_setup(t: Instant, spec: TestSpec) -> ServerMachine {
    let mut s = idle_server(t, Limits::default(), spec);
    s.handle(t, ClientMessage::Point { spec: point(1000) });
    assert!(matches!(
        s.poll_action(),
        Some(ServerAction::PreparePoint { .. })
    ));
    s.point_ready(t);
    assert_eq!(server_sent(&mut s), vec![ServerMessage::PointAccepted]);
    s
}

// ---- the two sides together ----

#[test]
fn a_whole_session_of_several_points_runs_between_the_machines() {
    let mut p = Pair::new(spec(Direction::Forward, 2), Limits::default(), (None, None));
    let opened = p.open();
    assert_eq!(opened.endpoint, "127.0.0.1:5321");
    assert_eq!(opened.cookie, Cookie([7; 16]));
    assert_eq!(opened.middlebox, None);
    assert!(!opened.spec.one_port);
    for (i, size) in [1000u64, 2000, 4000].into_iter().enumerate() {
        let mut pt = point(1000);
        pt.request_size = size;
        p.start(&pt, 2);
        // The client sends on both connections; the server learns what each sent.
        p.c.senders_finished(p.now, vec![10 + i as u64, 20]);
        p.run();
        match p.server.pop() {
            Some(ServerAction::PeerSendersDone { sent }) => {
                assert_eq!(sent, vec![10 + i as u64, 20])
            }
            other => panic!("{other:?}"),
        }
        let report = ServerMeasurement {
            cpu: crate::pattern::CpuTime {
                user_ns: i as u64,
                system_ns: 0,
            },
            ..ServerMeasurement::default()
        };
        assert_eq!(p.finish(report.clone()), report);
    }
    p.c.bye(p.now);
    p.run();
    assert!(matches!(p.server.pop(), Some(ServerAction::Finished)));
    assert!(p.s.is_ended() && p.c.is_ended());
    assert!(p.client.is_empty() && p.server.is_empty());
}

#[test]
fn a_reverse_point_ends_after_the_servers_send_done() {
    let mut p = Pair::new(spec(Direction::Reverse, 1), Limits::default(), (None, None));
    p.open();
    p.start(&point(500), 1);
    // The client has no senders: it waits for the server's, from Go on.
    assert!(p.c.awaiting_server());
    p.s.senders_finished(p.now, vec![42]);
    p.run();
    match p.client.pop() {
        Some(ClientAction::PeerSendersDone { sent }) => assert_eq!(sent, vec![42]),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        p.finish(ServerMeasurement::default()),
        ServerMeasurement::default()
    );
}

#[test]
fn in_a_bidirectional_point_the_clients_early_send_done_waits_for_the_servers_senders() {
    let mut p = Pair::new(spec(Direction::Bidir, 1), Limits::default(), (None, None));
    p.open();
    p.start(&point(500), 2);
    p.c.senders_finished(p.now, vec![5]);
    p.run();
    // The server's own senders still run: the client's SendDone is held, as it always was.
    assert!(p.server.is_empty(), "{:?}", p.server);
    p.s.senders_finished(p.now, vec![6]);
    p.run();
    assert!(matches!(
        p.server.pop(),
        Some(ServerAction::PeerSendersDone { .. })
    ));
    match p.client.pop() {
        Some(ClientAction::PeerSendersDone { sent }) => assert_eq!(sent, vec![6]),
        other => panic!("{other:?}"),
    }
    p.finish(ServerMeasurement::default());
}

#[test]
fn with_a_key_both_ends_prove_it_and_derive_the_same_cookie_unsent() {
    let mut p = Pair::new(
        spec(Direction::Forward, 1),
        Limits::default(),
        (Some(key()), Some(key())),
    );
    let opened = p.open();
    let k = key();
    assert_eq!(opened.cookie, k.cookie(&nonce(0x11), &nonce(0x22)));
    assert_ne!(
        opened.cookie,
        Cookie([7; 16]),
        "the random cookie is not used"
    );
}

// ---- the server alone: order ----

#[test]
fn a_point_before_the_test_spec_is_refused() {
    let t = Instant::now();
    let mut s = welcomed_server(t, Limits::default());
    s.handle(t, ClientMessage::Point { spec: point(1000) });
    assert_eq!(
        server_closed(&mut s),
        Some(Refusal::invalid("expected a test request, got point"))
    );
    assert!(s.is_ended());
}

#[test]
fn a_second_hello_is_refused_in_the_handshake_and_between_points() {
    let t = Instant::now();
    let mut s = welcomed_server(t, Limits::default());
    s.handle(t, hello(PROTOCOL_VERSION, None));
    assert_eq!(
        server_closed(&mut s),
        Some(Refusal::invalid("expected a test request, got hello"))
    );
    let mut s = idle_server(t, Limits::default(), spec(Direction::Forward, 1));
    s.handle(t, hello(PROTOCOL_VERSION, None));
    assert_eq!(
        server_closed(&mut s),
        Some(Refusal::invalid("unexpected control message hello"))
    );
}

#[test]
fn a_stop_without_a_point_is_refused() {
    let t = Instant::now();
    for (m, name) in [
        (ClientMessage::EndPoint, "end_point"),
        (ClientMessage::SendDone { sent: vec![1] }, "send_done"),
        (ClientMessage::Connected, "connected"),
    ] {
        let mut s = idle_server(t, Limits::default(), spec(Direction::Forward, 1));
        s.handle(t, m);
        assert_eq!(
            server_closed(&mut s),
            Some(Refusal::invalid(format!(
                "unexpected control message {name}"
            )))
        );
    }
}

#[test]
fn a_second_test_spec_is_refused() {
    let t = Instant::now();
    let mut s = idle_server(t, Limits::default(), spec(Direction::Forward, 1));
    s.handle(
        t,
        ClientMessage::Open {
            spec: spec(Direction::Forward, 1),
        },
    );
    assert_eq!(
        server_closed(&mut s),
        Some(Refusal::invalid("unexpected control message open"))
    );
}

#[test]
fn a_garbage_frame_ends_the_session_with_the_framings_reason() {
    let t = Instant::now();
    let mut s = idle_server(t, Limits::default(), spec(Direction::Forward, 1));
    let mut bytes = 4u32.to_be_bytes().to_vec();
    bytes.extend_from_slice(b"nope");
    let Received::Garbage(why) = receive::<ClientMessage>(&mut bytes.as_slice()) else {
        panic!("not garbage");
    };
    s.handle_garbage(t, &why);
    let reason = server_closed(&mut s).unwrap();
    assert_eq!(reason.kind, RefusalKind::Invalid);
    assert!(
        reason.message.starts_with("malformed control message: "),
        "{reason}"
    );
    // Nothing after the end: a late message is ignored, not answered.
    s.handle(t, ClientMessage::Bye);
    assert!(s.poll_action().is_none());
}

#[test]
fn a_hello_from_another_protocol_version_or_another_program_is_refused() {
    let t = Instant::now();
    let mut s = server_at(t, Limits::default(), None);
    s.handle(t, hello(PROTOCOL_VERSION + 1, None));
    assert_eq!(
        server_closed(&mut s),
        Some(Refusal::invalid(format!(
            "client speaks control protocol {}, this server speaks {PROTOCOL_VERSION}: use the same wirebench version on both ends",
            PROTOCOL_VERSION + 1
        )))
    );
    // Version 1 reported times in seconds: a peer of it is refused the same way.
    let mut s = server_at(t, Limits::default(), None);
    s.handle(t, hello(1, None));
    assert_eq!(
        server_closed(&mut s),
        Some(Refusal::invalid(format!(
            "client speaks control protocol 1, this server speaks {PROTOCOL_VERSION}: use the same wirebench version on both ends"
        )))
    );
    let mut s = server_at(t, Limits::default(), None);
    s.handle(
        t,
        ClientMessage::Hello {
            magic: "iperf".into(),
            protocol: PROTOCOL_VERSION,
            version: "x".into(),
            nonce: None,
        },
    );
    assert_eq!(
        server_closed(&mut s),
        Some(Refusal::invalid("expected a wirebench hello"))
    );
}

#[test]
fn a_bye_ends_the_session_quietly_before_or_after_the_test() {
    let t = Instant::now();
    let mut s = welcomed_server(t, Limits::default());
    s.handle(t, ClientMessage::Bye);
    assert!(matches!(s.poll_action(), Some(ServerAction::Finished)));
    let mut s = idle_server(t, Limits::default(), spec(Direction::Forward, 1));
    s.handle(t, ClientMessage::Bye);
    assert!(matches!(s.poll_action(), Some(ServerAction::Finished)));
    assert!(s.poll_action().is_none() && s.is_ended());
}

// ---- the server alone: the key exchange ----

fn keyed_server_challenged(t: Instant) -> ServerMachine {
    let mut s = server_at(t, Limits::default(), Some(key()));
    s.handle(t, hello(PROTOCOL_VERSION, Some(nonce(0x22).to_hex())));
    assert_eq!(
        server_sent(&mut s),
        vec![ServerMessage::Challenge {
            nonce: nonce(0x11).to_hex()
        }]
    );
    s
}

#[test]
fn a_wrong_proof_fails_authentication_without_a_welcome() {
    let t = Instant::now();
    let mut s = keyed_server_challenged(t);
    let other = Psk::new(b"another key, just as long......").unwrap();
    s.handle(
        t,
        ClientMessage::Auth {
            proof: other.client_proof(&nonce(0x11), &nonce(0x22)),
        },
    );
    assert_eq!(
        server_closed(&mut s),
        Some(Refusal::not_authorised(AUTH_FAILED))
    );
    // A proof that is not even hex fails the same way.
    let mut s = keyed_server_challenged(t);
    s.handle(t, ClientMessage::Auth { proof: "zz".into() });
    assert_eq!(
        server_closed(&mut s),
        Some(Refusal::not_authorised(AUTH_FAILED))
    );
}

#[test]
fn a_missing_proof_is_refused() {
    let t = Instant::now();
    // A client without a key: no nonce in its hello.
    let mut s = server_at(t, Limits::default(), Some(key()));
    s.handle(t, hello(PROTOCOL_VERSION, None));
    assert_eq!(
        server_closed(&mut s),
        Some(Refusal::not_authorised(NEEDS_KEY))
    );
    // A client that skips the proof.
    let mut s = keyed_server_challenged(t);
    s.handle(
        t,
        ClientMessage::Open {
            spec: spec(Direction::Forward, 1),
        },
    );
    assert_eq!(
        server_closed(&mut s),
        Some(Refusal::invalid("expected the key exchange, got open"))
    );
    // A nonce that is not 32 bytes of hex.
    let mut s = server_at(t, Limits::default(), Some(key()));
    s.handle(t, hello(PROTOCOL_VERSION, Some("abcd".into())));
    assert_eq!(
        server_closed(&mut s),
        Some(Refusal::invalid(
            "malformed hello: the client nonce is not 32 bytes of hex"
        ))
    );
}

#[test]
fn a_proof_before_the_challenge_is_refused() {
    let t = Instant::now();
    let k = key();
    let proof = k.client_proof(&nonce(0x11), &nonce(0x22));
    let mut s = server_at(t, Limits::default(), Some(key()));
    s.handle(
        t,
        ClientMessage::Auth {
            proof: proof.clone(),
        },
    );
    assert_eq!(
        server_closed(&mut s),
        Some(Refusal::invalid("expected a wirebench hello"))
    );
    // A keyless server has no challenge: a proof is out of order there too.
    let mut s = welcomed_server(t, Limits::default());
    s.handle(t, ClientMessage::Auth { proof });
    assert_eq!(
        server_closed(&mut s),
        Some(Refusal::invalid("expected a test request, got auth"))
    );
}

// ---- the server alone: limits ----

#[test]
fn too_many_streams_are_refused_with_the_limits_words() {
    let t = Instant::now();
    let mut s = welcomed_server(t, Limits::default());
    s.handle(
        t,
        ClientMessage::Open {
            spec: spec(Direction::Forward, 200),
        },
    );
    assert_eq!(
        server_closed(&mut s),
        Some(Refusal::limit(
            "200 parallel streams requested; this server allows 1 to 128"
        ))
    );
}

#[test]
fn a_message_too_large_is_refused_and_the_session_goes_on() {
    let t = Instant::now();
    let limits = Limits {
        max_message: 1 << 20,
        ..Limits::default()
    };
    let mut s = idle_server(t, limits, spec(Direction::Forward, 1));
    let mut big = point(1000);
    big.request_size = 2 << 20;
    s.handle(t, ClientMessage::Point { spec: big });
    assert_eq!(
        server_sent(&mut s),
        vec![ServerMessage::from(Refusal::limit(
            "request/message size of 2097152 bytes; this server allows 0 to 1048576 bytes"
        ))]
    );
    assert!(!s.is_ended());
    // The refusal restarted the idle wait, and a fitting point is taken.
    let later = t + Duration::from_secs(30);
    s.handle(later, ClientMessage::Point { spec: point(1000) });
    assert_eq!(s.next_deadline(), None, "the driver prepares the point");
    assert!(matches!(
        s.poll_action(),
        Some(ServerAction::PreparePoint { .. })
    ));
}

#[test]
fn a_duration_over_max_duration_is_refused() {
    let t = Instant::now();
    let mut s = idle_server(t, Limits::default(), spec(Direction::Forward, 1));
    s.handle(
        t,
        ClientMessage::Point {
            spec: point(7_200_000),
        },
    );
    assert_eq!(
        server_sent(&mut s),
        vec![ServerMessage::from(Refusal::limit(
            "duration of 7200 s; this server allows at most 3600 s"
        ))]
    );
}

#[test]
fn a_point_over_the_memory_budget_ends_the_session() {
    let t = Instant::now();
    let limits = Limits {
        max_test_memory: 1 << 20,
        ..Limits::default()
    };
    let mut s = idle_server(t, limits, spec(Direction::Forward, 1));
    let mut p = point(1000);
    p.server_socket.rcvbuf = 64 << 20;
    s.handle(t, ClientMessage::Point { spec: p });
    let reason = server_closed(&mut s).unwrap();
    assert_eq!(reason.kind, RefusalKind::Limit);
    assert!(reason.message.contains("(--max-test-memory)"), "{reason}");
}

#[test]
fn a_one_port_test_over_udp_is_refused() {
    let t = Instant::now();
    let mut s = welcomed_server(t, Limits::default());
    let mut sp = spec(Direction::Forward, 1);
    sp.transport = TransportKind::Udp;
    sp.one_port = true;
    s.handle(t, ClientMessage::Open { spec: sp });
    assert_eq!(
        server_closed(&mut s),
        Some(Refusal::invalid(
            "one-port tests carry data on the control port's TCP: tcp only"
        ))
    );
}

// ---- the server alone: deadlines, by passing instants ----

#[test]
fn a_hello_not_in_time_and_a_handshake_not_in_time_are_refused() {
    let t = Instant::now();
    let mut s = server_at(t, Limits::default(), None);
    s.handle_timeout(t + Duration::from_millis(4999));
    assert!(s.poll_action().is_none());
    assert_eq!(s.next_deadline(), Some(t + Duration::from_secs(5)));
    s.handle_timeout(t + Duration::from_secs(5));
    assert_eq!(
        server_closed(&mut s),
        Some(Refusal::invalid(
            "no complete hello within 5.000 s of connecting"
        ))
    );
    // The test request is due 15 s after accept, however early the hello was.
    let mut s = welcomed_server(t, Limits::default());
    assert_eq!(s.next_deadline(), Some(t + Duration::from_secs(15)));
    s.handle_timeout(t + Duration::from_secs(15));
    assert_eq!(
        server_closed(&mut s),
        Some(Refusal::invalid("control connection timed out"))
    );
}

#[test]
fn an_idle_session_times_out_a_minute_after_its_last_answer() {
    let t = Instant::now();
    let mut s = idle_server(t, Limits::default(), spec(Direction::Forward, 1));
    s.handle_timeout(t + Duration::from_secs(59));
    assert!(s.poll_action().is_none());
    s.handle_timeout(t + Duration::from_secs(60));
    assert_eq!(
        server_closed(&mut s),
        Some(Refusal::invalid("control connection timed out"))
    );
}

#[test]
fn the_setup_deadline_names_the_data_connection_that_did_not_arrive() {
    let t = Instant::now();
    let mut s = server_in_setup(t, spec(Direction::Forward, 2));
    assert_eq!(s.next_deadline(), Some(t + IO));
    s.data_connection_arrived(t, EffectiveOptions::default());
    s.handle_timeout(t + IO - Duration::from_millis(1));
    assert!(s.poll_action().is_none());
    s.handle_timeout(t + IO);
    assert_eq!(
        server_closed(&mut s),
        Some(Refusal::invalid("data connection 2 of 2 did not arrive"))
    );
    // All connections in, but no Connected from the client by the same deadline.
    let mut s = server_in_setup(t, spec(Direction::Forward, 1));
    s.data_connection_arrived(t, EffectiveOptions::default());
    s.handle_timeout(t + IO);
    assert_eq!(
        server_closed(&mut s),
        Some(Refusal::invalid("control connection timed out"))
    );
    // Anything but Connected in the setup is out of order.
    let mut s = server_in_setup(t, spec(Direction::Forward, 1));
    s.handle(t, ClientMessage::EndPoint);
    assert_eq!(
        server_closed(&mut s),
        Some(Refusal::invalid(
            "expected control message connected, got end_point"
        ))
    );
}

/// A server whose forward point runs since `t` (the client sends, the server receives).
fn running_server(t: Instant, limits: Limits, direction: Direction) -> ServerMachine {
    let mut s = idle_server(t, limits, spec(direction, 1));
    s.handle(t, ClientMessage::Point { spec: point(1000) });
    assert!(matches!(
        s.poll_action(),
        Some(ServerAction::PreparePoint { .. })
    ));
    s.point_ready(t);
    let n = if direction == Direction::Bidir { 2 } else { 1 };
    for _ in 0..n {
        s.data_connection_arrived(t, EffectiveOptions::default());
    }
    s.handle(t, ClientMessage::Connected);
    let sent = server_sent(&mut s);
    assert!(matches!(
        sent[..],
        [ServerMessage::PointAccepted, ServerMessage::Go { .. }]
    ));
    s
}

#[test]
fn a_point_past_its_deadline_is_ended_with_the_reason() {
    let t = Instant::now();
    let mut s = running_server(t, Limits::default(), Direction::Forward);
    // 1 s of point plus three io timeouts of grace.
    let deadline = t + Duration::from_secs(1) + 3 * IO;
    assert_eq!(s.next_deadline(), Some(deadline));
    s.handle_timeout(deadline - Duration::from_millis(1));
    assert!(s.poll_action().is_none());
    s.handle_timeout(deadline);
    assert_eq!(
        server_closed(&mut s),
        Some(Refusal::invalid("the client did not end the point within 6.000 s after its duration (the warm-up counts: an unpaced warm-up is not given time of its own)"))
    );
    // A point longer than the server allows ends at the server's limit, which says so.
    let limits = Limits {
        max_duration_ms: 500,
        ..Limits::default()
    };
    let mut s = idle_server(t, limits, spec(Direction::Forward, 1));
    let mut p = point(1000);
    p.duration_ms = None;
    p.bytes = Some(1 << 30);
    s.handle(t, ClientMessage::Point { spec: p });
    s.poll_action();
    s.point_ready(t);
    s.data_connection_arrived(t, EffectiveOptions::default());
    s.handle(t, ClientMessage::Connected);
    s.handle_timeout(t + Duration::from_millis(500) + 3 * IO);
    assert_eq!(
        server_closed(&mut s),
        Some(Refusal::limit("the server's duration limit of 500.0 ms was reached (--max-duration; warm-up and byte- or iteration-bound points count too)"))
    );
}

#[test]
fn a_client_over_the_servers_rate_is_ended() {
    let t = Instant::now();
    let limits = Limits {
        max_rate_bps: 8_000_000,
        ..Limits::default()
    };
    let mut s = running_server(t, limits, Direction::Forward);
    // Within the first second a burst is not the rate.
    s.data_progress(t + Duration::from_millis(500), 10_000_000);
    assert!(s.poll_action().is_none());
    s.data_progress(t + Duration::from_secs(2), 2_000_000);
    assert!(s.poll_action().is_none());
    s.data_progress(t + Duration::from_secs(2), 3_000_000);
    let reason = server_closed(&mut s).unwrap();
    assert_eq!(reason.kind, RefusalKind::Limit);
    assert!(
        reason
            .message
            .contains("above the 8.00 Mbit/s it may move on this server (--max-rate)"),
        "{reason}"
    );
}

#[test]
fn a_client_that_leaves_during_a_point_is_named() {
    let t = Instant::now();
    let mut s = running_server(t, Limits::default(), Direction::Forward);
    s.handle_closed(t);
    assert_eq!(
        server_closed(&mut s),
        Some(Refusal::invalid(
            "the client closed the control connection during the point"
        ))
    );
    let mut s = idle_server(t, Limits::default(), spec(Direction::Forward, 1));
    s.handle_closed(t);
    assert_eq!(
        server_closed(&mut s),
        Some(Refusal::invalid("control connection closed by peer"))
    );
}

#[test]
fn a_running_point_takes_the_clients_messages_in_their_order_only() {
    let t = Instant::now();
    // Forward: the server receives, so the client's SendDone comes before its EndPoint.
    let mut s = running_server(t, Limits::default(), Direction::Forward);
    s.handle(t, ClientMessage::EndPoint);
    assert_eq!(
        server_closed(&mut s),
        Some(Refusal::invalid(
            "expected control message send_done, got end_point"
        ))
    );
    // A SendDone of the wrong size.
    let mut s = running_server(t, Limits::default(), Direction::Forward);
    s.handle(t, ClientMessage::SendDone { sent: vec![1, 2] });
    assert_eq!(
        server_closed(&mut s),
        Some(Refusal::invalid(
            "peer reported 2 sending streams, expected 1"
        ))
    );
    // Reverse: the server sends; one early message is held, a second is too many.
    let mut s = running_server(t, Limits::default(), Direction::Reverse);
    s.handle(t, ClientMessage::EndPoint);
    assert!(s.poll_action().is_none());
    s.handle(t, ClientMessage::EndPoint);
    assert_eq!(
        server_closed(&mut s),
        Some(Refusal::invalid(
            "unexpected control message while the server was sending"
        ))
    );
    // The held EndPoint ends the point once the server's senders are done.
    let mut s = running_server(t, Limits::default(), Direction::Reverse);
    s.handle(t, ClientMessage::EndPoint);
    s.senders_finished(t, vec![3]);
    assert_eq!(
        server_sent(&mut s),
        vec![ServerMessage::SendDone { sent: vec![3] }]
    );
    let mut s = running_server(t, Limits::default(), Direction::Reverse);
    s.handle(t, ClientMessage::EndPoint);
    s.senders_finished(t, vec![3]);
    let actions: Vec<_> = std::iter::from_fn(|| s.poll_action()).collect();
    assert!(
        matches!(actions.last(), Some(ServerAction::EndData)),
        "{actions:?}"
    );
}

// ---- the client alone ----

fn client_answered(spec: TestSpec, psk: Option<Psk>, answer: ServerMessage) -> ClientMachine {
    let t = Instant::now();
    let mut c = client_at(t, spec, psk);
    assert!(matches!(c.poll_action(), Some(ClientAction::Send(_))));
    c.handle(t, answer);
    c
}

fn welcome(protocol: u32, seen: &str, proof: Option<String>) -> ServerMessage {
    ServerMessage::Welcome {
        protocol,
        version: "x".into(),
        environment: Environment::default(),
        limits: Limits::default(),
        client_seen_as: Some(seen.into()),
        proof,
    }
}

#[test]
fn the_client_refuses_servers_that_do_not_match_its_key_or_version() {
    let sp = || spec(Direction::Forward, 1);
    let mut c = client_answered(
        sp(),
        None,
        ServerMessage::Challenge {
            nonce: nonce(1).to_hex(),
        },
    );
    let refused = client_refused(&mut c).unwrap();
    assert!(refused.is(RefusalKind::NotAuthorised));
    assert_eq!(
        refused.to_string(),
        format!("server (not authorised): {NEEDS_KEY}")
    );
    let mut c = client_answered(sp(), Some(key()), welcome(PROTOCOL_VERSION, CLIENT, None));
    let reason = client_closed(&mut c).unwrap();
    assert!(
        reason.starts_with(&format!("{SERVER} runs without a pre-shared key")),
        "{reason}"
    );
    let mut c = client_answered(sp(), None, welcome(PROTOCOL_VERSION + 1, CLIENT, None));
    assert_eq!(
        client_closed(&mut c),
        Some(format!(
            "{SERVER} speaks control protocol {}, this client speaks {PROTOCOL_VERSION}: use the same wirebench version on both ends",
            PROTOCOL_VERSION + 1
        ))
    );
    let mut c = client_answered(
        sp(),
        Some(key()),
        ServerMessage::Challenge { nonce: "x".into() },
    );
    assert_eq!(
        client_closed(&mut c),
        Some(format!("{SERVER} sent a malformed challenge"))
    );
    // A server whose proof is wrong.
    let mut c = client_answered(
        sp(),
        Some(key()),
        ServerMessage::Challenge {
            nonce: nonce(0x11).to_hex(),
        },
    );
    c.handle(
        Instant::now(),
        welcome(PROTOCOL_VERSION, CLIENT, Some("00".into())),
    );
    assert_eq!(
        client_closed(&mut c),
        Some(format!(
            "{SERVER} did not prove it holds the pre-shared key: authentication failed"
        ))
    );
}

#[test]
fn the_client_names_a_server_that_never_answered_as_one() {
    let t = Instant::now();
    let mut c = client_at(t, spec(Direction::Forward, 1), None);
    c.handle_garbage(t, "malformed control message: x");
    assert_eq!(
        client_closed(&mut c),
        Some(format!(
            "{SERVER} did not answer as a wirebench server: malformed control message: x"
        ))
    );
    let mut c = client_at(t, spec(Direction::Forward, 1), None);
    c.handle_timeout(t + IO - Duration::from_millis(1));
    assert!(!c.is_ended());
    c.handle_timeout(t + IO);
    assert_eq!(
        client_closed(&mut c),
        Some(format!(
            "{SERVER} did not answer as a wirebench server: control connection timed out"
        ))
    );
    // The server's refusal is passed on as the server's, with its kind.
    let mut c = client_at(t, spec(Direction::Forward, 1), None);
    c.handle(t, Refusal::policy("access denied: 127.0.0.1").into());
    assert_eq!(
        client_closed(&mut c).as_deref(),
        Some("server (refused by policy): access denied: 127.0.0.1")
    );
}

#[test]
fn a_middlebox_sends_tcp_data_through_the_control_port_and_warns_otherwise() {
    let mut c = client_answered(
        spec(Direction::Forward, 1),
        None,
        welcome(PROTOCOL_VERSION, "10.0.0.1:999", None),
    );
    match c.poll_action() {
        Some(ClientAction::Send(ClientMessage::Open { spec })) => assert!(spec.one_port),
        other => panic!("{other:?}"),
    }
    let mut udp = spec(Direction::Forward, 1);
    udp.transport = TransportKind::Udp;
    let mut c = client_answered(udp, None, welcome(PROTOCOL_VERSION, "10.0.0.1:999", None));
    match c.poll_action() {
        Some(ClientAction::Warn(w)) => assert!(
            w.contains("(server sees 10.0.0.1:999, this side is 127.0.0.1:40000)"),
            "{w}"
        ),
        other => panic!("{other:?}"),
    }
    match c.poll_action() {
        Some(ClientAction::Send(ClientMessage::Open { spec })) => assert!(!spec.one_port),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_clients_point_deadlines_follow_the_point() {
    let mut p = Pair::new(spec(Direction::Forward, 1), Limits::default(), (None, None));
    p.open();
    let t = p.now;
    p.c.start_point(t, &point(1000), IO);
    // Each answer before the point runs is due within the io timeout.
    assert_eq!(p.c.next_deadline(), Some(t + IO));
    p.run();
    p.server.clear();
    p.s.point_ready(t);
    p.run();
    p.client.clear();
    // While the data connections open, the transport bounds the wait, not the protocol.
    assert_eq!(p.c.next_deadline(), None);
    p.c.data_connected(t);
    assert_eq!(p.c.next_deadline(), Some(t + IO));
    let mut c = p.c;
    // No Go in time.
    c.handle_timeout(t + IO);
    assert_eq!(
        client_closed(&mut c).as_deref(),
        Some("control connection timed out")
    );
}

#[test]
fn the_client_waits_for_the_result_the_points_duration_plus_grace() {
    let mut p = Pair::new(spec(Direction::Forward, 1), Limits::default(), (None, None));
    p.open();
    p.start(&point(1000), 1);
    let t = p.now + Duration::from_secs(1);
    p.c.senders_finished(t, vec![1]);
    // The client sends and does not receive: nothing is awaited from the server yet.
    assert!(!p.c.awaiting_server());
    p.c.workers_finished(t);
    let wait = Duration::from_secs(1) + 3 * IO;
    assert_eq!(p.c.next_deadline(), Some(t + wait));
    p.c.handle(t, ServerMessage::PointAccepted);
    assert_eq!(
        client_closed(&mut p.c).as_deref(),
        Some("unexpected answer at the end of a point")
    );
}

#[test]
fn a_driver_calling_out_of_turn_ends_the_session_instead_of_panicking() {
    let t = Instant::now();
    let mut c = client_at(t, spec(Direction::Forward, 1), None);
    c.start_point(t, &point(1000), IO);
    let reason = client_closed(&mut c).unwrap();
    assert!(reason.contains("start_point out of turn"), "{reason}");
    let mut s = server_at(t, Limits::default(), None);
    s.point_finished(t, ServerMeasurement::default());
    let reason = server_closed(&mut s).unwrap();
    assert_eq!(reason.kind, RefusalKind::Internal);
    assert!(
        reason.message.contains("point_finished out of turn"),
        "{reason}"
    );
}

#[test]
fn a_client_says_bye_once_even_after_the_server_refused_a_point() {
    let mut p = Pair::new(spec(Direction::Forward, 1), Limits::default(), (None, None));
    p.open();
    let mut big = point(1000);
    big.duration_ms = Some(7_200_000);
    p.c.start_point(p.now, &big, IO);
    p.run();
    match p.client.pop() {
        Some(ClientAction::Refused(r)) => {
            assert!(r.is(RefusalKind::Limit), "{r}");
            assert!(
                r.to_string()
                    .starts_with("server (over a limit): duration of 7200 s"),
                "{r}"
            );
        }
        other => panic!("not refused: {other:?}"),
    }
    // The server, which refused the point alone, is still idle: the Bye ends it quietly.
    p.c.bye(p.now);
    p.c.bye(p.now);
    p.run();
    assert!(matches!(p.server.pop(), Some(ServerAction::Finished)));
    assert!(p.server.is_empty() && p.client.is_empty());
}

// ---- versions: each side's refusal of a peer of another protocol, as the other reads it ----

/// A client before protocol 3 reads a refusal as `{"type":"error","message":...}` and ignores
/// what else the object holds: this server's refusal of its hello reaches it whole.
#[derive(Debug, serde::Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum OldServerMessage {
    Error { message: String },
}

#[test]
fn a_client_of_the_previous_protocol_reads_why_this_server_refuses_it() {
    let t = Instant::now();
    let mut s = server_at(t, Limits::default(), None);
    s.handle(t, hello(PROTOCOL_VERSION - 1, None));
    let refusal = server_closed(&mut s).unwrap();
    assert_eq!(refusal.kind, RefusalKind::Invalid);
    // What the driver writes, as that client decodes it.
    let mut buf = Vec::new();
    write_frame(&mut buf, &ServerMessage::from(refusal)).unwrap();
    let Received::Message(OldServerMessage::Error { message }) =
        receive::<OldServerMessage>(&mut buf.as_slice())
    else {
        panic!("an older client cannot read the refusal");
    };
    assert_eq!(
        message,
        format!(
            "client speaks control protocol {}, this server speaks {PROTOCOL_VERSION}: use the same wirebench version on both ends",
            PROTOCOL_VERSION - 1
        )
    );
}

#[test]
fn this_client_names_a_server_of_the_previous_protocol_in_one_line() {
    let t = Instant::now();
    // Such a server refuses this client's hello in its own words, without a kind.
    let old = format!(
        r#"{{"type":"error","message":"client speaks control protocol {PROTOCOL_VERSION}, this server speaks {}: use the same wirebench version on both ends"}}"#,
        PROTOCOL_VERSION - 1
    );
    let mut frame = (old.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(old.as_bytes());
    let Received::Message(refusal) = receive::<ServerMessage>(&mut frame.as_slice()) else {
        panic!("this client cannot read an older server's refusal");
    };
    let mut c = client_at(t, spec(Direction::Forward, 1), None);
    c.handle(t, refusal);
    assert_eq!(
        client_closed(&mut c),
        Some(format!(
            "server: client speaks control protocol {PROTOCOL_VERSION}, this server speaks {}: use the same wirebench version on both ends",
            PROTOCOL_VERSION - 1
        ))
    );
    // A server of that version that welcomed the hello anyway is refused by this client.
    let mut c = client_answered(
        spec(Direction::Forward, 1),
        None,
        welcome(PROTOCOL_VERSION - 1, CLIENT, None),
    );
    assert_eq!(
        client_closed(&mut c),
        Some(format!(
            "{SERVER} speaks control protocol {}, this client speaks {PROTOCOL_VERSION}: use the same wirebench version on both ends",
            PROTOCOL_VERSION - 1
        ))
    );
}

/// A busy server's hint reaches the client, which says when to try again.
#[test]
fn a_busy_refusal_tells_the_client_when_to_try_again() {
    let t = Instant::now();
    let mut c = client_at(t, spec(Direction::Forward, 1), None);
    let busy = Refusal::busy("server busy: 64 tests running, the limit is 64")
        .retry_after(Some(Duration::from_millis(1200)));
    c.handle(t, wire(&ServerMessage::from(busy)));
    let r = client_refused(&mut c).unwrap();
    assert!(r.is(RefusalKind::Busy));
    assert_eq!(r.retry_after, Some(Duration::from_millis(1200)));
    assert_eq!(
        r.to_string(),
        "server (busy, try again in 1.200 s): server busy: 64 tests running, the limit is 64"
    );
}
