//! The server's budgets and the stopping of tests: whatever a
//! client asks, `wirebench serve` refuses what would exhaust it with a readable error, ends
//! every point within its duration limit, stops its senders when the client leaves, and keeps
//! serving the next client. Every bound here is generous: these tests assert outcomes and
//! error texts, never how fast a loaded machine is.

// Helpers outside #[test] fns fail their test by panicking, as the tests do (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{bin, connect_from, refusal, run, run_bounded, run_json, u, Server, FINISH};
use wirebench::control::framing::{read_frame, write_frame};
use wirebench::control::protocol::{
    ClientMessage, PointSpec, ServerMessage, TestSpec, MAGIC, PROTOCOL_VERSION,
};
use wirebench::control::refusal::{RefusalKind, ServerRefusal};
use wirebench::pattern::{Direction, FastPaths, PatternKind};
use wirebench::transport::SocketOptions;

fn fails_with(args: &[&str], needle: &str) -> String {
    let out = run_bounded(args);
    let line = refusal(&out, &format!("{args:?}"));
    assert!(
        line.contains(needle),
        "{args:?}: error '{line}' should mention '{needle}'"
    );
    line
}

/// The server still measures an ordinary test.
fn still_serves(addr: &str) {
    let v = run_json(&["pingpong", "--to", addr, "-n", "50"]);
    assert_eq!(u(&v["points"][0]["latency"]["rtt"]["samples"]), 50);
}

/// A client that speaks the control protocol itself, to ask a server for what the real
/// client refuses before connecting.
struct RawClient {
    ctrl: TcpStream,
}

impl RawClient {
    /// Connects and opens `test`; Err(refusal) when the server refuses it.
    fn open(addr: &str, test: &TestSpec) -> Result<RawClient, ServerRefusal> {
        RawClient::open_from(addr, None, test)
    }

    /// As [`RawClient::open`], from the loopback address `from` (another client to the
    /// server's per-client limits).
    fn open_from(
        addr: &str,
        from: Option<&str>,
        test: &TestSpec,
    ) -> Result<RawClient, ServerRefusal> {
        let mut ctrl = match from {
            None => TcpStream::connect(addr).unwrap(),
            Some(ip) => connect_from(ip, addr),
        };
        ctrl.set_read_timeout(Some(FINISH)).unwrap();
        write_frame(
            &mut ctrl,
            &ClientMessage::Hello {
                magic: MAGIC.into(),
                protocol: PROTOCOL_VERSION,
                version: "test".into(),
                nonce: None,
            },
        )
        .unwrap();
        match read_frame::<ServerMessage>(&mut ctrl).unwrap() {
            ServerMessage::Welcome { .. } => {}
            other => panic!("expected welcome, got {other:?}"),
        }
        write_frame(&mut ctrl, &ClientMessage::Open { spec: test.clone() }).unwrap();
        match read_frame::<ServerMessage>(&mut ctrl).unwrap() {
            ServerMessage::Opened { .. } => Ok(RawClient { ctrl }),
            other => Err(other
                .refusal()
                .unwrap_or_else(|| panic!("expected opened, got {other:?}"))),
        }
    }

    /// Asks for `point`: Ok(()) when accepted, Err(refusal) when refused.
    fn point(&mut self, point: &PointSpec) -> Result<(), ServerRefusal> {
        write_frame(
            &mut self.ctrl,
            &ClientMessage::Point {
                spec: point.clone(),
            },
        )
        .unwrap();
        match read_frame::<ServerMessage>(&mut self.ctrl).unwrap() {
            ServerMessage::PointAccepted => Ok(()),
            other => Err(other
                .refusal()
                .unwrap_or_else(|| panic!("expected an answer to the point, got {other:?}"))),
        }
    }
}

fn stream_test(transport: &str, direction: Direction, streams: u32, batch: u32) -> TestSpec {
    TestSpec {
        write_size: None,
        think_ns: None,
        length_prefix: 0,
        tls: false,
        path_timing: false,
        open_loop: None,
        pattern: PatternKind::Stream,
        transport: wirebench::transport::TransportKind::from_name(transport).unwrap(),
        streams,
        direction,
        spin: false,
        server_cpus: vec![],
        interval_ms: None,
        burst: 1,
        fast: FastPaths {
            batch,
            ..FastPaths::default()
        },
        one_port: false,
    }
}

fn point(request_size: u64, read_size: u64) -> PointSpec {
    PointSpec {
        request_size,
        response_size: 1,
        read_size,
        duration_ms: Some(1000),
        bytes: None,
        iterations: None,
        warmup: 0,
        pace: None,
        server_socket: SocketOptions::default(),
        buffers_fixed: false,
        rate_per_s: None,
    }
}

/// Defect 1: `--read-size 64M --batch 1024` over UDP asked the server for 64 GiB and aborted
/// it. The client now refuses it before connecting; a client that asks anyway is refused by
/// the server, in both directions, and the server serves the next client.
#[test]
fn a_udp_batch_of_huge_reads_is_refused_not_a_crash() {
    let server = Server::start(&[]);
    for reverse in [false, true] {
        let mut args = vec![
            "run",
            "stream",
            "-t",
            "udp",
            "--read-size",
            "64M",
            "--batch",
            "1024",
            "-d",
            "1s",
            "--to",
            &server.addr,
        ];
        if reverse {
            args.push("-R");
        }
        fails_with(
            &args,
            "--read-size of 67108864 bytes: one udp message holds at most 65507 bytes",
        );
    }
    // Forward: the server's receivers would read 1024 x 64 MiB each.
    let mut c = RawClient::open(
        &server.addr,
        &stream_test("udp", Direction::Forward, 1, 1024),
    )
    .expect("test opens");
    let e = c.point(&point(1000, 64 << 20)).unwrap_err();
    assert!(e.is(RefusalKind::Limit), "{e}");
    assert!(e.message.contains("read size of 67108864 bytes"), "{e}");
    assert!(e.message.contains("65507"), "{e}");
    // Reverse: the server's senders would write 1024 datagrams of 64 MiB each.
    let mut c = RawClient::open(
        &server.addr,
        &stream_test("udp", Direction::Reverse, 1, 1024),
    )
    .expect("test opens");
    let e = c.point(&point(64 << 20, 65_536)).unwrap_err();
    assert!(e.is(RefusalKind::Limit), "{e}");
    assert!(
        e.message.contains("request/message size of 67108864 bytes"),
        "{e}"
    );
    // Sizes a datagram holds, but batches no open server should hold for one test.
    let mut c = RawClient::open(
        &server.addr,
        &stream_test("udp", Direction::Forward, 8, 1024),
    )
    .expect("test opens");
    let e = c.point(&point(1000, 65_536)).unwrap_err();
    assert!(e.is(RefusalKind::Limit), "{e}");
    assert!(e.message.contains("--max-test-memory"), "{e}");
    still_serves(&server.addr);
}

/// Defect 5: 16 ping-pong connections of 64 MiB held 1 GiB of the server's memory.
#[test]
fn sixteen_pingpongs_of_64_mib_are_refused_naming_the_memory_budget() {
    let server = Server::start(&[]);
    let line = fails_with(
        &[
            "run",
            "pingpong",
            "-P",
            "16",
            "--size",
            "64M",
            "-n",
            "10",
            "--to",
            &server.addr,
        ],
        "memory budget per test is 256.0 MiB (--max-test-memory)",
    );
    assert!(
        line.contains("server (over a limit): this point needs 2048.0 MiB of buffers"),
        "{line}"
    );
    // The operator can set a smaller budget.
    let small = Server::start(&["--max-test-memory", "1M"]);
    fails_with(
        &[
            "run",
            "pingpong",
            "--size",
            "1M",
            "-n",
            "10",
            "--to",
            &small.addr,
        ],
        "memory budget per test is 1.0 MiB",
    );
    still_serves(&server.addr);
    still_serves(&small.addr);
}

/// The total budgets: a point that would take the server over its memory or data connections
/// of all running tests is refused as "server busy", and the reservation of a point returns
/// when it ends.
#[test]
fn total_budgets_refuse_what_running_tests_leave_no_room_for() {
    let server = Server::start(&[
        "--max-memory",
        "4M",
        "--max-streams-total",
        "4",
        "--io-timeout",
        "20s",
    ]);
    // A point that is accepted holds its reservation (3 MiB, 3 connections) while it waits
    // for its connections, up to the server's --io-timeout.
    let mut holder = RawClient::open(&server.addr, &stream_test("tcp", Direction::Forward, 3, 1))
        .expect("test opens");
    holder
        .point(&point(1 << 20, 1 << 20))
        .expect("point accepted");
    let line = fails_with(
        &[
            "run",
            "stream",
            "--size",
            "2M",
            "--read-size",
            "2M",
            "-d",
            "200ms",
            "--to",
            &server.addr,
        ],
        "(--max-memory)",
    );
    assert!(line.contains("server (busy, try again later): "), "{line}");
    let line = fails_with(
        &[
            "run",
            "stream",
            "-P",
            "2",
            "--size",
            "1K",
            "-d",
            "200ms",
            "--to",
            &server.addr,
        ],
        "(--max-streams-total)",
    );
    assert!(line.contains("server (busy, try again later): "), "{line}");
    drop(holder);
    // Once the holder's point is over (its client gone), the room is back.
    let until = Instant::now() + FINISH;
    loop {
        let out = run(&[
            "run",
            "stream",
            "-P",
            "2",
            "--size",
            "1K",
            "-d",
            "200ms",
            "--to",
            &server.addr,
            "--json",
        ]);
        if out.status.success() {
            break;
        }
        assert!(Instant::now() < until, "the reservation was never returned");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Defect 2, as reported: 1 MiB writes paced at 1 bit/s (one write every 97 days) held a
/// slot after the client was killed. The server refuses such pacing outright, so the client
/// fails at once and a server with one slot serves the next client.
#[test]
fn a_pacing_step_of_days_is_refused_and_the_slot_stays_free() {
    let server = Server::start(&["--max-sessions", "1"]);
    // Refused at once: fails_with bounds the client (run_bounded's minute, far short of a
    // step of 97 days), with no wall-clock bound of its own.
    fails_with(
        &[
            "run",
            "stream",
            "-R",
            "--bytes",
            "2M",
            "--size",
            "1M",
            "--rate",
            "1bit",
            "--warmup",
            "0",
            "--to",
            &server.addr,
        ],
        "this server paces at most 1.000 s per step",
    );
    still_serves(&server.addr);
}

/// Defect 2, the mechanism: a server's paced sender between two writes notices that the
/// client's control connection closed (kill -9) and ends the session within seconds, so that
/// a server with one slot serves the next client.
#[test]
fn a_killed_clients_paced_test_frees_its_slot() {
    let server = Server::start(&["--max-sessions", "1"]);
    // One 1000-byte write a second for a minute: the sender sleeps almost all the time.
    let mut victim = bin()
        .args([
            "run",
            "stream",
            "-R",
            "-d",
            "60s",
            "--size",
            "1000",
            "--rate",
            "8k",
            "--warmup",
            "0",
            "--interval",
            "1s",
            "--no-save",
            "--to",
            &server.addr,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kill it once the point runs: its first interval report is printed live.
    let (tx, reports) = mpsc::channel();
    let stdout = BufReader::new(victim.stdout.take().unwrap());
    std::thread::spawn(move || {
        for l in stdout.lines().map_while(Result::ok) {
            if l.contains("] received") {
                let _ = tx.send(());
            }
        }
    });
    reports
        .recv_timeout(FINISH)
        .expect("the paced test runs and reports its first interval");
    victim.kill().unwrap();
    victim.wait().unwrap();
    let line = server
        .wait_for("ended", FINISH)
        .expect("the session ends after its client's death (or it hangs)");
    assert!(
        line.contains("the client closed the control connection during the point"),
        "{line}"
    );
    still_serves(&server.addr);
}

/// Defect 6: `--max-duration` bounds every point, byte- and iteration-bound ones and their
/// warm-up included; the client prints the server's reason.
#[test]
fn the_duration_limit_ends_byte_and_iteration_bound_points() {
    // The duration limit must be what ends each point, not the I/O timeout: at 1 s a data
    // connection made late, or a write or read held up by a host too loaded to run the client
    // for a second, could end a point first with another error. 5 s leaves a loaded host that
    // room; the limit then ends a point 16 s after it began (1 s plus 3 x --io-timeout), each
    // client well within run_bounded's minute. One at a time, as before: run at once, the
    // four (two of them unpaced) are a load of their own.
    let server = Server::start(&["--max-duration", "1s", "--io-timeout", "5s"]);
    let limit = "the server's duration limit of 1.000 s was reached";
    let cases = [
        // Forward: the client sends 100 GB (paced, to spare the machine's CPUs).
        &[
            "run",
            "stream",
            "--bytes",
            "100G",
            "--rate",
            "100M",
            "--to",
            &server.addr,
        ][..],
        // Reverse: the server would send them.
        &[
            "run",
            "stream",
            "-R",
            "--bytes",
            "100G",
            "--rate",
            "100M",
            "--to",
            &server.addr,
        ][..],
        // Transactions: a hundred million of them.
        &["run", "pingpong", "-n", "100000000", "--to", &server.addr][..],
        // Warm-up: a million writes (the most a server allows) of 1 MiB, 1 TB, before the
        // clock would start. Of 64 KiB (64 GB) was too few: loopback at 4 GB/s moves it within
        // the 16 s the limit and its grace allow, and the point then ended without reaching
        // the limit.
        &[
            "run",
            "stream",
            "--warmup",
            "1000000",
            "--size",
            "1M",
            "-n",
            "10",
            "--to",
            &server.addr,
        ][..],
    ];
    // fails_with runs each client bounded (run_bounded: a minute, then the test fails), which
    // is the hang guard: no bound on how long the server took is asserted.
    for args in cases {
        let line = fails_with(args, limit);
        assert!(
            line.contains("server (over a limit): the server's duration limit"),
            "{line}"
        );
    }
    // A paced warm-up that cannot fit is refused before it starts.
    fails_with(
        &[
            "run",
            "stream",
            "--warmup",
            "1000",
            "--size",
            "1000",
            "--rate",
            "80k",
            "-d",
            "1s",
            "--to",
            &server.addr,
        ],
        "exceeds this server's duration limit of 1.000 s",
    );
    still_serves(&server.addr);
}

/// `--max-rate`: the server's own senders must be paced within it, and a client whose data
/// arrives faster on average is stopped.
#[test]
fn the_bit_rate_limit_holds_both_directions() {
    let server = Server::start(&["--max-rate", "10M"]);
    fails_with(
        &[
            "run", "stream", "-R", "-d", "1s", "--to", &server.addr,
        ],
        "the server would send unpaced; this server sends at most 10.00 Mbit/s per test (--max-rate)",
    );
    fails_with(
        &[
            "run",
            "stream",
            "-R",
            "-d",
            "1s",
            "--rate",
            "20M",
            "--to",
            &server.addr,
        ],
        "(--max-rate)",
    );
    run_json(&[
        "stream",
        "-R",
        "-d",
        "1s",
        "--rate",
        "5M",
        "--to",
        &server.addr,
    ]);
    // Unpaced over loopback: far above 10 Mbit/s, as data sent to the server or as
    // transactions it answers.
    for args in [
        &["run", "stream", "-d", "20s", "--to", &server.addr][..],
        &[
            "run",
            "pingpong",
            "--size",
            "64K",
            "-d",
            "20s",
            "--to",
            &server.addr,
        ][..],
    ] {
        // Stopped by the server, as its error says; fails_with bounds the client (run_bounded's
        // minute) instead of asserting how long it ran.
        fails_with(
            args,
            "above the 10.00 Mbit/s it may move on this server (--max-rate)",
        );
    }
    still_serves(&server.addr);
}

/// `--max-rate-total` and `--max-rate-per-client`: a point reserves its rate (its --rate in
/// all, or the whole per-test cap when unpaced) before it starts, and one that would go over
/// what running points hold is refused until they end.
#[test]
fn rate_reservations_hold_the_total_and_each_clients_share() {
    let server = Server::start(&[
        "--max-rate-total",
        "30M",
        "--max-rate-per-client",
        "20M",
        // The accepted points below hold their reservations until their data connections,
        // which never come, are given up on after --io-timeout, and they must still hold them
        // at the last refusal: with 2 s a host too loaded to start the refused client in time
        // could let them lapse first. 20 s (as in the test above) leaves it that room; the
        // loop at the end then waits the reservations out (a minute is its hang guard).
        "--io-timeout",
        "20s",
    ]);
    // 1250-byte writes every 1 ms: 10 Mbit/s.
    let paced = |mbit: f64| PointSpec {
        pace: Some(wirebench::pattern::stream::Pace {
            interval_ns: 1e7 / mbit,
            burst: 1,
        }),
        ..point(1250, 65_536)
    };
    let test = stream_test("tcp", Direction::Forward, 1, 16);
    // 127.0.0.1 holds 15 of its 20 Mbit/s (accepted points hold their reservation until
    // they end: here, until the data connections fail to arrive within --io-timeout).
    let mut a = RawClient::open(&server.addr, &test).unwrap();
    a.point(&paced(15.0)).unwrap();
    let line = fails_with(
        &[
            "run",
            "stream",
            "--rate",
            "10M",
            "-d",
            "1s",
            "--to",
            &server.addr,
        ],
        "(--max-rate-per-client)",
    );
    assert!(line.contains("server (busy, try again later): "), "{line}");
    // Another client has its own share, within the total: 15 + 10 of 30.
    let mut b = RawClient::open_from(&server.addr, Some("127.0.0.2"), &test).unwrap();
    b.point(&paced(10.0)).unwrap();
    let mut c = RawClient::open_from(&server.addr, Some("127.0.0.3"), &test).unwrap();
    let e = c.point(&paced(10.0)).unwrap_err();
    assert!(
        e.is(RefusalKind::Busy) && e.message.contains("(--max-rate-total)"),
        "{e}"
    );
    // An unpaced point reserves the whole cap (20 Mbit/s, the per-client limit). A refused
    // point ends its session, so this is a session of its own.
    let mut c = RawClient::open_from(&server.addr, Some("127.0.0.3"), &test).unwrap();
    let e = c.point(&point(1250, 65_536)).unwrap_err();
    assert!(e.is(RefusalKind::Busy), "{e}");
    assert!(
        e.message.contains("this point may move 20.00 Mbit/s"),
        "{e}"
    );
    drop((a, b, c));
    // Once those points have ended, the same request fits and runs.
    let until = Instant::now() + FINISH;
    loop {
        let out = run_bounded(&[
            "run",
            "stream",
            "--rate",
            "10M",
            "-d",
            "500ms",
            "--json",
            "--no-save",
            "--to",
            &server.addr,
        ]);
        if out.status.success() {
            break;
        }
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--max-rate"), "{err}");
        assert!(
            Instant::now() < until,
            "the reservations never came back: {err}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Spin (a CPU per stream), busy-poll and raw frames are the operator's to allow.
#[test]
fn spin_busy_poll_and_raw_need_the_operators_permission() {
    let server = Server::start(&[]);
    fails_with(
        &["run", "stream", "--spin", "-d", "200ms", "--to", &server.addr],
        "server (refused by policy): spin (busy-polling data sockets) is not permitted on this server; its operator can allow it with --permit spin",
    );
    fails_with(
        &[
            "run",
            "stream",
            "-t",
            "udp",
            "--busy-poll",
            "50",
            "-d",
            "200ms",
            "--to",
            &server.addr,
        ],
        "--permit busy-poll",
    );
    fails_with(
        &[
            "run",
            "stream",
            "-t",
            "raw",
            "-d",
            "200ms",
            "--to",
            &server.addr,
        ],
        "--permit raw",
    );
    let open = Server::start(&["--permit", "spin,busy-poll,raw"]);
    run_json(&["stream", "--spin", "-d", "200ms", "--to", &open.addr]);
    run_json(&[
        "stream",
        "-t",
        "udp",
        "--busy-poll",
        "50",
        "--rate",
        "10M",
        "-d",
        "200ms",
        "--to",
        &open.addr,
    ]);
    // Raw frames need root for packet sockets; without it the refusal is not the permit's.
    let raw = run(&[
        "run", "stream", "-t", "raw", "-d", "200ms", "--to", &open.addr,
    ]);
    let err = String::from_utf8_lossy(&raw.stderr);
    assert!(!err.contains("not permitted"), "{err}");
    // The self-hosted server of `wirebench run` allows everything.
    run_json(&["stream", "--spin", "-d", "200ms"]);
    still_serves(&server.addr);
}

/// Every new limit is listed in `serve --help`.
#[test]
fn serve_help_lists_the_budgets() {
    let out = run(&["serve", "--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--max-test-memory",
        "--max-memory",
        "--max-streams-total",
        "--max-rate",
        "--permit",
    ] {
        assert!(help.contains(flag), "{flag} missing from serve --help");
    }
}
