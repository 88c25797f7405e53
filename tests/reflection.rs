//! The server sends a test's traffic to
//! no address the client has not shown it owns; silent connections to a data port do not
//! make a test fail; the relay is bounded; the client counts a sweep before building it,
//! imports no unbounded file and prints no peer's or file's escape sequence.
//!
//! The control protocol is driven by hand where a test must act as a hostile client would.

// Helpers outside #[test] fns fail their test by panicking, as the tests do (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::{Child, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{bin, run, run_bounded, run_json, Server};
use wirebench::control::framing::{read_frame, write_frame};
use wirebench::control::protocol::{
    ClientMessage, PointSpec, ServerMessage, TestSpec, MAGIC, PROTOCOL_VERSION,
};
use wirebench::control::refusal::RefusalKind;
use wirebench::pattern::{Direction, FastPaths, PatternKind};
use wirebench::transport::SocketOptions;

/// Generous: CI is a loaded 2-CPU machine. Nothing here waits this long when it works.
const PATIENCE: Duration = common::FINISH;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Sends a client's hello on `ctrl` and reads the server's answer.
fn say_hello(ctrl: &mut TcpStream) -> anyhow::Result<ServerMessage> {
    write_frame(
        ctrl,
        &ClientMessage::Hello {
            magic: MAGIC.into(),
            protocol: PROTOCOL_VERSION,
            version: env!("CARGO_PKG_VERSION").into(),
            nonce: None,
        },
    )?;
    read_frame::<ServerMessage>(ctrl)
}

/// A control connection driven by hand, from 127.0.0.1.
struct Control {
    ctrl: TcpStream,
}

impl Control {
    fn connect(server: &str) -> Control {
        let mut ctrl = TcpStream::connect(server).expect("control connection");
        ctrl.set_read_timeout(Some(PATIENCE)).unwrap();
        match say_hello(&mut ctrl) {
            Ok(ServerMessage::Welcome { .. }) => {}
            other => panic!("expected welcome, got {other:?}"),
        }
        Control { ctrl }
    }

    /// Opens a one-stream test and one point of it; returns the data endpoint and cookie.
    fn open(
        &mut self,
        transport: &str,
        pattern: PatternKind,
        direction: Direction,
    ) -> (String, String) {
        let spec = TestSpec {
            write_size: None,
            think_ns: None,
            length_prefix: 0,
            tls: false,
            path_timing: false,
            open_loop: None,
            pattern,
            transport: wirebench::transport::TransportKind::from_name(transport).unwrap(),
            streams: 1,
            direction,
            spin: false,
            server_cpus: Vec::new(),
            interval_ms: None,
            burst: 1,
            fast: FastPaths {
                batch: 1,
                ..FastPaths::default()
            },
            one_port: false,
        };
        write_frame(&mut self.ctrl, &ClientMessage::Open { spec }).unwrap();
        let (endpoint, cookie) = match self.reply() {
            ServerMessage::Opened { endpoint, cookie } => (endpoint, cookie),
            other => panic!("expected opened, got {other:?}"),
        };
        let point = PointSpec {
            request_size: 1000,
            response_size: 1000,
            read_size: 1000,
            duration_ms: Some(2000),
            bytes: None,
            iterations: None,
            warmup: 0,
            pace: None,
            server_socket: SocketOptions::default(),
            buffers_fixed: false,
            rate_per_s: None,
        };
        write_frame(&mut self.ctrl, &ClientMessage::Point { spec: point }).unwrap();
        match self.reply() {
            ServerMessage::PointAccepted => {}
            other => panic!("expected point_accepted, got {other:?}"),
        }
        // Without a pre-shared key the server sends the cookie in the clear.
        (endpoint, cookie.expect("a keyless server sends the cookie"))
    }

    fn reply(&mut self) -> ServerMessage {
        read_frame::<ServerMessage>(&mut self.ctrl).expect("a reply from the server")
    }
}

fn cookie_bytes(hex: &str) -> [u8; 16] {
    let mut b = [0u8; 16];
    for (i, byte) in b.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
    }
    b
}

/// Defect 3: a client on the control connection opens a reverse UDP test and sends the data
/// hello, with the right cookie, from another address (127.0.0.2 stands for a spoofed
/// source: a victim's address). Before, the server connected its data socket to that address
/// and sent the test's datagrams there. Now the victim's socket receives nothing, not even
/// the handshake's answer, and the test ends with a refusal on the control connection.
#[test]
fn a_udp_data_hello_from_another_address_than_the_control_peer_gets_nothing_sent_to_it() {
    let server = Server::start(&["--io-timeout", "3s"]);
    let mut c = Control::connect(&server.addr);
    let (endpoint, cookie) = c.open("udp", PatternKind::Stream, Direction::Reverse);
    let port: u16 = endpoint.parse().unwrap();
    let data_port = SocketAddr::new("127.0.0.1".parse().unwrap(), port);

    let victim = UdpSocket::bind("127.0.0.2:0").expect("a second loopback address");
    victim
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut hello = [0u8; 28];
    hello[..4].copy_from_slice(b"WBH1");
    hello[4..20].copy_from_slice(&cookie_bytes(&cookie));
    hello[20..28].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
    let mut received = 0usize;
    let mut buf = [0u8; 65536];
    // The spoofed hellos go on until the server has given up on the data connection (its 3 s
    // accept ran out and it said so on the control connection), however late a loaded host
    // lets that happen: a server that took a hello would have been sending meanwhile. Not a
    // fixed window, which a slow server could outlast.
    let reply = std::thread::scope(|sc| {
        let answer = sc.spawn(|| c.reply());
        let until = Instant::now() + PATIENCE;
        while !answer.is_finished() {
            assert!(
                Instant::now() < until,
                "no answer on the control connection within {PATIENCE:?}"
            );
            let _ = victim.send_to(&hello, data_port);
            if let Ok((n, _)) = victim.recv_from(&mut buf) {
                received += n;
            }
        }
        answer.join().unwrap()
    });
    assert_eq!(
        received, 0,
        "the server sent {received} bytes to the spoofed address"
    );
    // The server had no data connection when its accept ran out: it says so.
    match reply {
        ServerMessage::Error { kind, message, .. } => {
            assert_eq!(kind, Some(RefusalKind::Invalid), "{message}");
            assert!(message.contains("did not arrive"), "{message}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    // And afterwards, still nothing for the victim.
    victim
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    assert!(victim.recv_from(&mut buf).is_err());
}

/// The same server still runs a reverse UDP test whose hello comes from the control peer.
#[test]
fn a_reverse_udp_test_from_the_control_peer_still_runs() {
    let server = Server::start(&[]);
    // run_json asserts that the run succeeded and is complete.
    run_json(&[
        "stream",
        "-t",
        "udp",
        "-R",
        "--size",
        "1000",
        "--rate",
        "10M",
        "-d",
        "1s",
        "--warmup",
        "0",
        "--to",
        &server.addr,
        "--no-save",
    ]);
}

/// Defect 7: silent connections to a test's data port, opened before the client's own,
/// made the test fail (each was waited on for its cookie in turn, 5 s apiece, and the
/// server's 10 s accept ran out). Now they are waited on together and the client's
/// connection is admitted when its cookie comes: the server says Go.
#[test]
fn silent_connections_to_the_data_port_do_not_make_the_test_fail() {
    // A minute's accept, not the default 10 s, which a loaded host could use up before it
    // admitted the client's connection: the squatters of the old code, waited on 5 s apiece,
    // still take 250 s for 50 of them, far beyond it.
    let server = Server::start(&["--io-timeout", "60s"]);
    for squatters in [2, 50] {
        let mut c = Control::connect(&server.addr);
        let (endpoint, cookie) = c.open("tcp", PatternKind::Stream, Direction::Forward);
        let port: u16 = endpoint.parse().unwrap();
        let data_port = SocketAddr::new("127.0.0.1".parse().unwrap(), port);
        let silent: Vec<TcpStream> = (0..squatters)
            .map(|_| TcpStream::connect(data_port).expect("a squatter connects"))
            .collect();
        // Let the server take the squatters first, as a racing attacker's would be.
        std::thread::sleep(Duration::from_millis(300));
        let mut data = TcpStream::connect(data_port).expect("the client's data connection");
        data.write_all(&cookie_bytes(&cookie)).unwrap();
        write_frame(&mut c.ctrl, &ClientMessage::Connected).unwrap();
        match c.reply() {
            ServerMessage::Go { .. } => {}
            other => panic!("{squatters} squatters: expected go, got {other:?}"),
        }
        drop(silent);
    }
}

/// A `wirebench relay` with the given options in front of `forward`; its log on `log`.
struct Relay {
    child: Child,
    addr: String,
    log: mpsc::Receiver<String>,
}

impl Relay {
    fn start(forward: &str, extra: &[&str]) -> Relay {
        let mut child = bin()
            .args([
                "relay",
                "--listen",
                "127.0.0.1:0",
                "--forward",
                forward,
                "-v",
            ])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("relay starts");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let first = lines.next().expect("relay prints its address").unwrap();
        let addr = first.split_whitespace().nth(3).unwrap().to_owned();
        let (tx, log) = mpsc::channel();
        std::thread::spawn(move || {
            for l in lines.map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        Relay { child, addr, log }
    }

    /// Waits for a log line containing `needle`.
    fn wait_for(&self, needle: &str) -> String {
        let until = Instant::now() + PATIENCE;
        while Instant::now() < until {
            if let Ok(l) = self.log.recv_timeout(Duration::from_millis(200)) {
                if l.contains(needle) {
                    return l;
                }
            }
        }
        panic!("the relay never logged '{needle}'");
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads until end of stream or an error: the other end closed the connection.
fn closed_within(mut s: &TcpStream, limit: Duration) -> bool {
    s.set_read_timeout(Some(limit)).unwrap();
    let mut b = [0u8; 1024];
    loop {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return false,
            Err(_) => return true,
        }
    }
}

/// Defect 8: `--buffer 64G` aborted the relay on its first connection (the allocation
/// failed). Now it is a one-line refusal at start.
#[test]
fn the_relay_refuses_a_huge_buffer_in_one_line() {
    // Before, the relay started (and aborted at its first connection).
    let out = run_bounded(&[
        "relay",
        "--listen",
        "127.0.0.1:0",
        "--forward",
        "127.0.0.1:1",
        "--buffer",
        "64G",
    ]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("--buffer") && err.contains("16 MiB"), "{err}");
}

/// Defect 8: the relay held any number of connections, idle or not, forever. Now one over
/// --max-connections is closed on arrival, and an idle pair is closed after --idle-timeout,
/// which gives its place back.
#[test]
fn the_relay_caps_connections_and_closes_idle_ones() {
    let backend = TcpListener::bind("127.0.0.1:0").unwrap();
    let backend_addr = backend.local_addr().unwrap().to_string();
    let (held_tx, held) = mpsc::channel();
    std::thread::spawn(move || {
        for s in backend.incoming().map_while(Result::ok) {
            // Kept open and silent: the relay alone decides when the pair ends.
            let _ = held_tx.send(s);
        }
    });
    // The third connection must come while the first two pairs are held: with an idle timeout
    // of 2 s, a host too loaded to relay two connections in that time could let it run out
    // first, and the third would be relayed. 20 s leaves a loaded host room and keeps the test short; the idle
    // timeout is then waited for as long as it takes (PATIENCE is the hang guard).
    let relay = Relay::start(
        &backend_addr,
        &["--max-connections", "2", "--idle-timeout", "20s"],
    );
    let a = TcpStream::connect(&relay.addr).unwrap();
    let b = TcpStream::connect(&relay.addr).unwrap();
    let _ha = held.recv_timeout(PATIENCE).expect("first pair forwarded");
    let _hb = held.recv_timeout(PATIENCE).expect("second pair forwarded");
    let c = TcpStream::connect(&relay.addr).unwrap();
    assert!(closed_within(&c, PATIENCE), "a third connection was kept");
    relay.wait_for("--max-connections");
    assert!(
        held.recv_timeout(Duration::from_millis(500)).is_err(),
        "the third connection reached the backend"
    );
    // The first two say nothing either way: the idle timeout closes them.
    assert!(closed_within(&a, PATIENCE), "an idle pair was kept");
    assert!(closed_within(&b, PATIENCE), "an idle pair was kept");
    relay.wait_for("--idle-timeout");
    // Their places are free again (given back just after the pair's log line: a connection
    // that races it is refused, and the next one is relayed).
    let until = Instant::now() + PATIENCE;
    let mut kept = Vec::new();
    loop {
        kept.push(TcpStream::connect(&relay.addr).unwrap());
        if held.recv_timeout(Duration::from_secs(1)).is_ok() {
            break;
        }
        assert!(
            Instant::now() < until,
            "no new connection is relayed once the idle ones are gone"
        );
    }
}

/// 400 connections that sent nothing once pinned the relay. The server hung up
/// on each at its 5 s hello deadline, but the relay only passed that end on and waited for the
/// client's: it held 513 threads until its idle timeout two minutes later, and closed every
/// new client on accept meanwhile. Now a pair ends when either side closes, one source holds
/// at most `--max-per-source` pairs (64), and another source is relayed during the flood.
#[test]
fn a_silent_flood_from_one_source_neither_pins_the_relay_nor_shuts_out_others() {
    let server = Server::start(&[]);
    // An idle timeout far beyond this test's patience: only the server's hang-up can end them.
    let relay = Relay::start(&server.addr, &["--idle-timeout", "600s"]);
    let flood: Vec<TcpStream> = (0..400)
        .map(|_| TcpStream::connect(&relay.addr).expect("connect to the relay"))
        .collect();
    relay.wait_for("(--max-per-source)");

    // Another source gets its hello answered while the flood holds its share.
    let other = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    other
        .bind(&"127.0.0.2:0".parse::<SocketAddr>().unwrap().into())
        .expect("a second loopback address");
    other
        .connect(&relay.addr.parse::<SocketAddr>().unwrap().into())
        .unwrap();
    let mut other: TcpStream = other.into();
    other.set_read_timeout(Some(PATIENCE)).unwrap();
    match say_hello(&mut other) {
        Ok(ServerMessage::Welcome { .. }) => {}
        other => panic!("a client from another source was not relayed: {other:?}"),
    }
    drop(other);

    // Every flood connection ends (refused at once, or its pair closed when the server hung
    // up), long before the relay's idle timeout.
    for s in &flood {
        assert!(closed_within(s, PATIENCE), "a silent pair was kept");
    }
    drop(flood);
    // And the relay carries a whole test from the flooding source again.
    run_json(&[
        "pingpong",
        "--size",
        "64",
        "-n",
        "50",
        "--warmup",
        "0",
        "--one-port",
        "--to",
        &relay.addr,
        "--no-save",
    ]);
}

/// Defect 8: a peer that stops reading held a relay pair (and its threads) for ever with a
/// full send buffer. Now a write that makes no progress for --write-timeout closes the pair.
#[test]
fn the_relay_closes_a_pair_whose_reader_stopped_reading() {
    let backend = TcpListener::bind("127.0.0.1:0").unwrap();
    let backend_addr = backend.local_addr().unwrap().to_string();
    let (held_tx, held) = mpsc::channel();
    std::thread::spawn(move || {
        for s in backend.incoming().map_while(Result::ok) {
            let _ = held_tx.send(s); // never read
        }
    });
    let relay = Relay::start(
        &backend_addr,
        &["--write-timeout", "1s", "--idle-timeout", "600s"],
    );
    let mut client = TcpStream::connect(&relay.addr).unwrap();
    let _h = held.recv_timeout(PATIENCE).expect("pair forwarded");
    // A write of ours that times out means the pair is still open (full, not closed).
    client
        .set_write_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let chunk = vec![0u8; 64 << 10];
    let started = Instant::now();
    let mut closed = false;
    while started.elapsed() < PATIENCE {
        match client.write(&chunk) {
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => {
                closed = true;
                break;
            }
        }
    }
    assert!(closed, "the relay kept a pair whose reader never reads");
    relay.wait_for("--write-timeout");
}

/// Defect 9: a sweep of 10^8 points was built (6.8 GB in 12 s) before it was counted. Now it
/// is refused at once, with its count and the limit.
#[test]
fn a_sweep_of_a_hundred_million_points_is_refused_before_it_is_built() {
    let out = run_bounded(&[
        "run",
        "pingpong",
        "--size",
        "1..10000:+1",
        "--sndbuf",
        "1..10000:+1",
        "--no-save",
    ]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("100000000 points (10000 sizes x 10000 sndbuf")
            && err.contains("at most 100000"),
        "{err}"
    );
}

fn results(args: &[&str], db: &str) -> Output {
    let mut all = args.to_vec();
    all.extend_from_slice(&["--db", db]);
    run(&all)
}

fn tmp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "wirebench-reflection-{}-{name}",
        std::process::id()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Defect 9: `import` read any size (`/dev/zero` until memory ran out). Now a stream that is
/// no document, and a file over the cap, are one-line refusals, quickly.
#[test]
fn import_refuses_endless_and_oversized_input() {
    let dir = tmp_dir("import");
    let db = dir.join("r.sqlite").display().to_string();
    let out = run_bounded(&["import", "/dev/zero", "--db", &db]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("not a JSON document"), "{err}");

    // A sparse file of 300 MiB: judged by its size, nothing read.
    let big = dir.join("big.json");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(300 << 20)
        .unwrap();
    let out = results(&["import", &big.display().to_string()], &db);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("at most 256 MiB"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Defect 9: `show` and `history` printed the control characters and escape sequences of an
/// imported file as they were (a screen clear, a forged line). Now none reaches the output.
#[test]
fn show_and_history_print_no_escape_sequence_from_an_imported_file() {
    let dir = tmp_dir("escape");
    let db = dir.join("r.sqlite").display().to_string();
    let mut doc = run_json(&["pingpong", "-n", "50", "--no-save"]);
    let evil = "evil\u{1b}[2J\u{1b}]0;owned\u{7}\nforged line";
    doc["client_environment"]["hostname"] = evil.into();
    doc["client_environment"]["kernel"] = evil.into();
    if let Some(s) = doc.get_mut("server_environment").filter(|s| s.is_object()) {
        s["hostname"] = evil.into();
    }
    let file = dir.join("evil.json");
    std::fs::write(&file, serde_json::to_string(&doc).unwrap()).unwrap();
    let out = results(&["import", &file.display().to_string()], &db);
    assert!(out.status.success(), "{}", text(&out.stderr));

    for args in [&["history"][..], &["show", "last"][..]] {
        let out = results(args, &db);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        let shown = text(&out.stdout);
        assert!(
            !shown.contains('\u{1b}') && !shown.contains('\u{7}'),
            "{args:?} printed a control character:\n{shown}"
        );
        assert!(
            !shown.lines().any(|l| l.starts_with("forged line")),
            "{args:?} printed a forged line:\n{shown}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
