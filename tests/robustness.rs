//! Bad input gets one clear line and a non-zero exit; the server survives anything a client
//! sends and keeps serving the others.

// Helpers outside #[test] fns fail their test by panicking, as the tests do (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::Instant;

use common::{run, run_json, u, Server};

fn fails_with(args: &[&str], needle: &str) {
    let line = common::refusal(&run(args), &format!("{args:?}"));
    assert!(
        line.contains(needle),
        "{args:?}: error '{line}' should mention '{needle}'"
    );
}

#[test]
fn unknown_transport_is_one_clear_line() {
    fails_with(
        &["run", "pingpong", "-t", "carrier-pigeon"],
        "unknown transport 'carrier-pigeon' (available: tcp, udp, unix, mptcp, quic, raw, grpc)",
    );
}

/// A build without the `mpi` feature says how to get MPI, whatever the arguments.
#[cfg(not(feature = "mpi"))]
#[test]
fn mpi_without_the_feature_is_one_clear_line() {
    let msg =
        "this wirebench was built without MPI support; build with --features mpi (see README)";
    for args in [
        &["mpi"][..],
        &["mpi", "pingpong", "--size", "1..4M:*2", "-d", "1s"],
        &["mpi", "--help"],
        &["run", "pingpong", "-t", "mpi"],
    ] {
        fails_with(args, msg);
        assert_eq!(run(args).status.code(), Some(1), "{args:?}");
    }
}

#[test]
fn malformed_sizes_are_one_clear_line() {
    fails_with(&["run", "pingpong", "--size", "12Q"], "--size");
    fails_with(&["run", "pingpong", "--size", "64K..1K:*2"], "--size");
    fails_with(&["run", "pingpong", "--size", "1..1M:*1"], "--size");
    fails_with(&["run", "stream", "--size", "0"], "at least 1 byte");
    fails_with(&["run", "crr", "--size", "0"], "at least 1 byte");
}

#[test]
fn other_bad_options_are_one_clear_line() {
    fails_with(&["run", "pingpong", "--bogus"], "--bogus");
    fails_with(&["run", "stream", "-t", "udp", "--size", "70000"], "65507");
    fails_with(&["run", "stream", "-t", "udp", "--nodelay"], "TCP only");
    fails_with(&["run", "pingpong", "--cc", "no-such-cc"], "available:");
    // Every algorithm of a sweep is checked before the first point runs.
    let args = ["run", "pingpong", "--cc", "cubic,nosuchcc", "--json"];
    fails_with(&args, "`modprobe tcp_nosuchcc`");
    assert!(run(&args).stdout.is_empty(), "no point of the sweep ran");
    fails_with(
        &["run", "pingpong", "--cc", "reno,reno"],
        "--cc names 'reno' twice",
    );
    fails_with(
        &["run", "pingpong", "--cc", "cubic,"],
        "--cc names an empty algorithm",
    );
    fails_with(&["run", "pingpong", "--confidence", "42"], "--confidence");
    fails_with(&["run", "pingpong", "--reverse"], "stream pattern only");
    fails_with(&["run", "stream", "--rate", "fast"], "--rate");
    fails_with(&["run", "pingpong", "-d", "soon"], "soon");
    fails_with(&["run", "stream", "--rcvlowat", "0"], "\"off\"");
    fails_with(&["run", "stream", "--pace-burst", "4"], "needs --rate");
    fails_with(
        &["run", "stream", "--rate", "1M", "--pace-burst", "0"],
        "--pace-burst must be 1 to 65536",
    );
    fails_with(
        &["run", "stream", "--rate", "1M", "--pace-burst", "70000"],
        "--pace-burst must be 1 to 65536",
    );
    fails_with(&["run", "rr", "--pace-burst", "4"], "stream pattern only");
    fails_with(&["run", "stream", "--pace-burst", "many"], "--pace-burst");
    fails_with(&["run", "stream", "--rcvlowat", "soon"], "--rcvlowat");
    fails_with(
        &["run", "pingpong", "--rcvlowat", "64K"],
        "stream pattern only",
    );
    for t in ["unix", "mptcp", "udp"] {
        fails_with(
            &["run", "stream", "-t", t, "--rcvlowat", "64K"],
            "tcp streams",
        );
    }
}

/// `--write-size` splits byte-stream messages of pingpong and rr; `--think` waits between
/// transactions one at a time. What they cannot do is one line naming why.
#[test]
fn split_writes_and_think_time_refuse_what_they_cannot_do() {
    fails_with(
        &["run", "pingpong", "-t", "udp", "--size", "1K", "--write-size", "100"],
        "--write-size splits a message over several writes: a udp message is one datagram and cannot be split",
    );
    fails_with(
        &["run", "pingpong", "--write-size", "0"],
        "--write-size must be at least 1 byte",
    );
    fails_with(
        &["run", "crr", "--write-size", "100"],
        "--write-size applies to the stream, pingpong and rr patterns, not to crr",
    );
    fails_with(
        &["run", "stream", "--think", "10ms"],
        "--think applies to the pingpong and rr patterns, not to stream",
    );
    fails_with(
        &["run", "rr", "--think", "0s"],
        "--think must be longer than 0",
    );
    fails_with(
        &["run", "rr", "--think", "1ms", "--burst", "4"],
        "cannot be combined with --burst",
    );
    fails_with(&["run", "rr", "--think", "soon"], "--think");
}

/// Open-loop arrivals (`--arrivals`, rr's `--rate N/s`): what they cannot do is one line
/// naming why, before anything runs.
#[test]
fn open_loop_arrivals_refuse_what_they_cannot_do() {
    fails_with(&["run", "rr", "--rate", "0/s"], "offers no load");
    fails_with(&["run", "rr", "--rate", "fast"], "invalid request rate");
    fails_with(&["run", "rr", "--rate", "1.5/s"], "whole number");
    fails_with(
        &["run", "stream", "--arrivals", "poisson"],
        "--arrivals poisson applies to the rr pattern only",
    );
    fails_with(
        &["run", "pingpong", "--arrivals", "fixed", "--rate", "1k"],
        "--arrivals fixed applies to the rr pattern only",
    );
    fails_with(
        &["run", "rr", "-t", "udp", "--rate", "1k"],
        "needs a reliable, in-order transport (tcp, unix, mptcp, quic, grpc): udp is not one",
    );
    fails_with(&["run", "rr", "--arrivals", "poisson"], "needs --rate N/s");
    fails_with(
        &["run", "rr", "--rate", "1k", "--request-size", "0"],
        "a size of 0 is for closed-loop exchanges",
    );
    fails_with(
        &["run", "rr", "--rate", "1k", "--burst", "4"],
        "--burst shapes a closed loop",
    );
    fails_with(
        &["run", "rr", "--arrivals", "closed", "--rate", "1k"],
        "cannot be combined with --arrivals closed",
    );
    fails_with(
        &["run", "rr", "--seed", "3"],
        "--seed applies to rr with --arrivals",
    );
    fails_with(
        &["run", "rr", "--rate", "1k", "--max-in-flight", "0"],
        "--max-in-flight must be 1 to",
    );
    fails_with(
        &["run", "rr", "--rate", "1M", "-d", "10s"],
        "at most 4194304 are kept",
    );
}

#[test]
fn unreachable_server_is_one_clear_line() {
    // A port on loopback that nobody listens on: connection refused at once.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let to = format!("127.0.0.1:{port}");
    fails_with(
        &["run", "pingpong", "--to", &to],
        "cannot reach a wirebench server",
    );
}

#[test]
fn requests_over_the_server_limits_are_refused_with_the_reason() {
    let server = Server::start(&[
        "--max-message",
        "1K",
        "--max-duration",
        "2s",
        "--max-streams",
        "2",
    ]);
    fails_with(
        &["run", "pingpong", "--to", &server.addr, "--size", "4K"],
        "this server allows 0 to 1024 bytes",
    );
    fails_with(
        &["run", "pingpong", "--to", &server.addr, "-d", "5s"],
        "at most 2.000 s",
    );
    fails_with(
        &[
            "run",
            "stream",
            "--to",
            &server.addr,
            "-P",
            "3",
            "--size",
            "1K",
        ],
        "allows 1 to 2",
    );
    // The same server still measures a valid request.
    let v = run_json(&["pingpong", "--to", &server.addr, "-n", "100"]);
    assert_eq!(u(&v["points"][0]["latency"]["rtt"]["samples"]), 100);
}

#[test]
fn a_sweep_that_fails_half_way_keeps_what_it_measured() {
    let server = Server::start(&["--max-message", "1K"]);
    let out = run(&[
        "run",
        "pingpong",
        "--to",
        &server.addr,
        "--size",
        "64,512,4K",
        "-n",
        "50",
        "--json",
    ]);
    assert!(!out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON even on failure");
    assert_eq!(v["complete"], false);
    assert_eq!(v["points"].as_array().unwrap().len(), 2);
    assert!(v["error"].as_str().unwrap().contains("1024"));
}

/// Whether the server still holds `c` open, whatever it has sent on it so far: reading what
/// is there ends in a read that would block, not the end of the stream.
fn still_open(c: &mut TcpStream) -> bool {
    c.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 4096];
    let open = loop {
        match c.read(&mut buf) {
            Ok(0) => break false,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break true,
            Err(_) => break false,
        }
    };
    c.set_nonblocking(false).unwrap();
    open
}

#[test]
fn garbage_and_silent_clients_do_not_stop_the_server() {
    let server = Server::start(&[]);
    // Garbage: a huge length prefix, then random bytes.
    let mut g = TcpStream::connect(&server.addr).unwrap();
    g.write_all(&[0xff, 0xff, 0xff, 0xff, 1, 2, 3]).unwrap();
    g.set_read_timeout(Some(common::FINISH)).unwrap();
    let mut reply = Vec::new();
    let _ = g.read_to_end(&mut reply); // the server answers with an error frame and closes
    assert!(String::from_utf8_lossy(&reply).contains("malformed control frame"));
    // Valid framing, invalid JSON.
    let mut g2 = TcpStream::connect(&server.addr).unwrap();
    g2.write_all(&[0, 0, 0, 5, b'h', b'e', b'l', b'l', b'o'])
        .unwrap();
    // A data connection for the control port with a cookie no test has.
    let mut stray = TcpStream::connect(&server.addr).unwrap();
    stray.write_all(b"WBDT0123456789abcdef").unwrap();

    // Served without waiting for the others: both runs are answered while a client that says
    // nothing, one that stops after the data prefix and one that stalls after its hello are
    // all still held open (the server closes them only at its hello and handshake deadlines,
    // after 5 and 15 s). An attempt that a host too loaded to serve two runs in 5 s let reach
    // a deadline tells nothing, and the next has fresh ones; a server that waits on them never
    // gets through an attempt and fails once a minute has passed.
    let until = Instant::now() + common::FINISH;
    loop {
        let mut silent = TcpStream::connect(&server.addr).unwrap();
        let mut half = TcpStream::connect(&server.addr).unwrap();
        half.write_all(b"WBDT").unwrap();
        let mut stall = TcpStream::connect(&server.addr).unwrap();
        let hello = format!(
            r#"{{"type":"hello","magic":"wirebench","protocol":{},"version":"x"}}"#,
            wirebench::control::protocol::PROTOCOL_VERSION
        );
        stall
            .write_all(&(hello.len() as u32).to_be_bytes())
            .unwrap();
        stall.write_all(hello.as_bytes()).unwrap();

        let v = run_json(&["pingpong", "--to", &server.addr, "-n", "200"]);
        assert_eq!(u(&v["points"][0]["latency"]["rtt"]["samples"]), 200);
        let v = run_json(&["pingpong", "--to", &server.addr, "-n", "200", "--one-port"]);
        assert_eq!(u(&v["points"][0]["latency"]["rtt"]["samples"]), 200);
        if [&mut silent, &mut half, &mut stall]
            .into_iter()
            .all(still_open)
        {
            break;
        }
        assert!(
            Instant::now() < until,
            "the runs were answered only once the silent clients had been closed"
        );
    }
}

#[test]
fn a_client_that_vanishes_mid_test_does_not_hurt_others() {
    let server = Server::start(&[]);
    let mut victim = common::bin()
        .args(["run", "stream", "--to", &server.addr, "-d", "30s"])
        .args(["-i", "100ms", "--json-stream", "--no-save"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Killed mid-test: once it has reported an interval (the server has taken its test and
    // data flows), not after a fixed sleep, which a loaded host could spend before the test
    // began.
    let mut lines = BufReader::new(victim.stdout.take().unwrap()).lines();
    let (tx, reports) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let first = lines
            .by_ref()
            .map_while(Result::ok)
            .find(|l| l.contains(r#""type":"interval""#));
        let _ = tx.send(first.is_some());
        // Drained to the end, so that the victim never blocks on a full pipe.
        lines.for_each(drop);
    });
    assert_eq!(
        reports.recv_timeout(common::FINISH),
        Ok(true),
        "the victim never reported an interval"
    );
    victim.kill().unwrap();
    victim.wait().unwrap();
    let v = run_json(&["stream", "--to", &server.addr, "-d", "300ms"]);
    let t = &v["points"][0]["stream"]["totals"][0];
    assert_eq!(t["bytes_sent"], t["bytes_received"]);
    // And once more, to see that the server did not leak into a broken state.
    run_json(&["pingpong", "--to", &server.addr, "-n", "50"]);
}

/// Client processes, killed on drop whatever happened.
struct Clients(Vec<std::process::Child>);

impl Drop for Clients {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn several_clients_are_served_at_once() {
    let server = Server::start(&[]);
    // Four clients in streams of ten minutes each, TCP and UDP. A client reports an interval
    // (--json-stream) only once the server has taken its test; once all four have, and none
    // has ended, the server is serving the four at once. One that served them one after
    // another would never get the second going: after a minute the test calls that a hang.
    let mut clients = Clients(
        (0..4)
            .map(|i| {
                let t = if i % 2 == 0 { "tcp" } else { "udp" };
                common::bin()
                    .args(["run", "stream", "--to", &server.addr, "-t", t])
                    .args(["--rate", "10M", "-d", "10m", "-i", "100ms"])
                    .args(["--json-stream", "--no-save"])
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect(),
    );
    let (tx, reports) = std::sync::mpsc::channel();
    for (i, c) in clients.0.iter_mut().enumerate() {
        let out = c.stdout.take().unwrap();
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
                if v["type"] == "interval" {
                    let _ = tx.send(i);
                }
            }
        });
    }
    let mut going = std::collections::BTreeSet::new();
    let until = Instant::now() + common::FINISH;
    while going.len() < 4 {
        let left = until.saturating_duration_since(Instant::now());
        match reports.recv_timeout(left) {
            Ok(i) => {
                going.insert(i);
            }
            Err(_) => panic!("only clients {going:?} of 4 were served within a minute"),
        }
    }
    // A fifth, short one is answered while the four go on.
    let out = common::run_bounded(&[
        "run",
        "pingpong",
        "--to",
        &server.addr,
        "-n",
        "200",
        "--json",
    ]);
    let v = common::json_document("a fifth client", &out);
    assert_eq!(u(&v["points"][0]["latency"]["rtt"]["samples"]), 200);
    for (i, c) in clients.0.iter_mut().enumerate() {
        assert!(c.try_wait().unwrap().is_none(), "client {i} ended");
    }
}

#[test]
fn version_and_help_work() {
    let out = run(&["--version"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains(env!("CARGO_PKG_VERSION")));
    for cmd in [&["run", "--help"][..], &["serve", "--help"][..]] {
        let out = run(cmd);
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("default"), "{cmd:?} help shows defaults");
    }
    let out = run(&["run", "--help"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("binary") && text.contains("DECIMAL"));
}

#[test]
fn fast_paths_that_cannot_apply_are_refused() {
    fails_with(
        &["run", "stream", "-t", "udp", "--zerocopy"],
        "byte streams",
    );
    fails_with(&["run", "stream", "--gso"], "kernel datagram sockets");
    fails_with(
        &["run", "stream", "-t", "raw", "--batch", "8"],
        "kernel datagram sockets",
    );
    fails_with(&["run", "pingpong", "--sendfile"], "stream pattern only");
    fails_with(&["run", "stream", "--zerocopy", "--sendfile"], "choose one");
}

#[test]
fn ctrl_c_keeps_the_points_already_measured() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let child = common::bin()
        .args([
            "run",
            "pingpong",
            "--size",
            "1..64K:*2",
            "-d",
            "300ms",
            "--json",
            "--db",
        ])
        .arg(&db)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Interrupted once a point is measured (saved in the results database as it finishes),
    // not after a fixed 1.2 s, in which a loaded host may not have finished the first of the
    // 17 points. The 16 left take 300 ms each: the interrupt comes long before the last.
    let saved = || {
        wirebench::store::db::Db::open_existing(&db)
            .ok()
            .and_then(|d| d.list(&wirebench::store::db::Filter::default()).ok())
            .and_then(|rows| rows.first().map(|r| r.points))
            .unwrap_or(0)
    };
    assert!(
        common::wait_until(common::FINISH, || saved() >= 1),
        "no point measured within {:?}",
        common::FINISH
    );
    let _ = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON after Ctrl-C");
    assert_eq!(v["complete"], false);
    let n = v["points"].as_array().unwrap().len();
    assert!((1..17).contains(&n), "{n} points kept");
    assert!(v["error"].as_str().unwrap().contains("interrupted"));
}

/// A usage error of clap's on one line with all it said, pointing at the subcommand's help,
/// and always exit 2.
fn usage_error(args: &[&str], needles: &[&str]) {
    let out = run(args);
    let line = common::refusal(&out, &format!("{args:?}"));
    assert_eq!(out.status.code(), Some(2), "{args:?}: {line}");
    for needle in needles {
        assert!(
            line.contains(needle),
            "{args:?}: error '{line}' should mention '{needle}'"
        );
    }
}

#[test]
fn missing_arguments_are_named() {
    usage_error(
        &["run"],
        &[
            "required arguments were not provided: <PATTERN>",
            "(see 'wirebench run --help')",
        ],
    );
    usage_error(
        &["lab", "exec"],
        &["<HOST>, <COMMAND>...", "(see 'wirebench lab exec --help')"],
    );
    usage_error(
        &["relay"],
        &[
            "--listen <LISTEN>, --forward <FORWARD>",
            "(see 'wirebench relay --help')",
        ],
    );
    usage_error(
        &["run", "pingpong", "--size"],
        &[
            "a value is required for '--size <SIZE>'",
            "(see 'wirebench run --help')",
        ],
    );
}

#[test]
fn invalid_values_list_what_is_allowed() {
    usage_error(
        &["run", "pingpong", "--transport", "carrier-pigeon"],
        &[
            "unknown transport 'carrier-pigeon' (available: tcp, udp, unix, mptcp, quic, raw, grpc)",
            "(see 'wirebench run --help')",
        ],
    );
    usage_error(
        &["run", "pingpng"],
        &[
            "possible values: pingpong, stream, rr, crr",
            "a similar value exists: 'pingpong'",
            "(see 'wirebench run --help')",
        ],
    );
    usage_error(
        &["serve", "--permit", "everything"],
        &[
            "possible values: spin, busy-poll, raw",
            "(see 'wirebench serve --help')",
        ],
    );
    // A malformed sweep is a usage error too, with the same exit code as the others.
    usage_error(
        &["run", "pingpong", "--size", "abc"],
        &["'--size <SIZE>'", "not a number"],
    );
    usage_error(
        &["compare-transports", "--size", "abc"],
        &[
            "'--size <SIZE>'",
            "(see 'wirebench compare-transports --help')",
        ],
    );
    // The test `lab run` takes after -- is parsed as `run` is, before any lab is made.
    usage_error(
        &["lab", "run", "--", "pingpng"],
        &[
            "the test after --: invalid value 'pingpng'",
            "possible values: pingpong, stream, rr, crr",
            "(see 'wirebench run --help')",
        ],
    );
}

#[test]
fn misspelt_flags_and_subcommands_get_a_suggestion() {
    usage_error(
        &["run", "pingpong", "--sizee", "4"],
        &[
            "unexpected argument '--sizee'",
            "a similar argument exists: '--size'",
            "(see 'wirebench run --help')",
        ],
    );
    usage_error(
        &["runn"],
        &[
            "unrecognized subcommand 'runn'",
            "a similar subcommand exists: 'run'",
            "(see 'wirebench --help')",
        ],
    );
    usage_error(
        &["lab", "upp"],
        &[
            "a similar subcommand exists: 'up'",
            "(see 'wirebench lab --help')",
        ],
    );
}

/// iperf3's `-t 5` (time) is wirebench's transport: the error says what was meant.
#[test]
fn an_iperf3_time_given_to_t_gets_a_hint() {
    usage_error(
        &["run", "stream", "-t", "5"],
        &["did you mean `-d 5s`? (iperf3's -t is time; wirebench's -t is the transport)"],
    );
    usage_error(&["run", "stream", "-t", "10s"], &["did you mean `-d 10s`?"]);
}
