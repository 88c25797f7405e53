//! Admission and authentication of `wirebench serve`: what a connection may cost before it
//! has said who it is, deadlines instead of per-read timeouts, the access lists, the
//! per-client limits and the pre-shared key.
//!
//! Hostile clients come from other loopback addresses (127.0.0.2 and up: Linux routes all of
//! 127/8 to lo) so that the well-behaved client, on 127.0.0.1, is another host to the server.

// Helpers outside #[test] fns fail their test by panicking, as the tests do (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{bin, connect_from, refusal, u, Server};
use serde_json::Value;

const NEEDS_KEY: &str = "this server requires a pre-shared key (--psk-file or WIREBENCH_PSK)";

/// `wirebench ARGS` with no key in its environment unless `key` is given.
fn wb(args: &[&str], key: Option<&str>) -> Output {
    let mut c = bin();
    c.args(args)
        .stdin(Stdio::null())
        .env_remove("WIREBENCH_PSK");
    if let Some(k) = key {
        c.env("WIREBENCH_PSK", k);
    }
    c.output().expect("wirebench runs")
}

/// `wirebench run ARGS --json`, which must succeed.
fn run_ok(args: &[&str]) -> Value {
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    all.push("--json");
    let out = wb(&all, None);
    assert!(
        out.status.success(),
        "wirebench {all:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(v["complete"], true);
    v
}

/// `wirebench ARGS` fails with one line of error that contains `needle`.
fn refused(args: &[&str], key: Option<&str>, needle: &str) {
    let line = refusal(&wb(args, key), &format!("{args:?}"));
    assert!(
        line.contains(needle),
        "{args:?}: '{line}' should say '{needle}'"
    );
}

fn hello() -> Vec<u8> {
    let body = format!(
        r#"{{"type":"hello","magic":"wirebench","protocol":{},"version":"test"}}"#,
        wirebench::control::protocol::PROTOCOL_VERSION
    );
    let mut f = (body.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(body.as_bytes());
    f
}

/// Everything the server sends until it closes (or 60 s pass).
fn reply_of(s: &mut TcpStream) -> String {
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply);
    String::from_utf8_lossy(&reply).into_owned()
}

/// Says hello and opens a test, as a client does: the session then waits for its first point
/// (up to 60 s), holding its slot.
fn hold_session(from: &str, server: &str) -> TcpStream {
    use common::hostile::{read_frame, test_spec, write_frame};
    let mut s = connect_from(from, server);
    s.write_all(&hello()).unwrap();
    // A hang guard: the welcome and the opened come at once.
    s.set_read_timeout(Some(common::FINISH)).unwrap();
    let welcome = read_frame(&mut s).unwrap();
    assert_eq!(welcome["type"], "welcome", "{welcome}");
    let open = serde_json::json!({"type": "open", "spec": test_spec("pingpong", "tcp", "forward")});
    write_frame(&mut s, &open).unwrap();
    let opened = read_frame(&mut s).unwrap();
    assert_eq!(opened["type"], "opened", "{opened}");
    s
}

/// Reads one frame (its JSON text), failing the test after [`common::FINISH`] without one.
fn frame_of(s: &mut TcpStream) -> String {
    s.set_read_timeout(Some(common::FINISH)).unwrap();
    let mut len = [0u8; 4];
    s.read_exact(&mut len).expect("a frame");
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).expect("a whole frame");
    String::from_utf8(body).unwrap()
}

/// A field of the server process's /proc status, e.g. "Threads".
fn status(server: &Server, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{}/status", server.child.id())).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc status"))
}

fn descriptors(server: &Server) -> usize {
    std::fs::read_dir(format!("/proc/{}/fd", server.child.id()))
        .unwrap()
        .count()
}

/// Waits for `cond`; [`common::FINISH`] without it is a hang.
fn eventually(what: &str, cond: impl FnMut() -> bool) {
    assert!(common::wait_until(common::FINISH, cond), "never: {what}");
}

fn key_file(dir: &tempfile::TempDir, name: &str, key: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.path().join(name);
    std::fs::write(&p, format!("{key}\n")).unwrap();
    // Readable by its owner only, as a key should be (else both ends warn).
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p.to_str().unwrap().to_owned()
}

/// Defect 4: a hello dribbled one byte every 500 ms would take 30 s and more; it is cut off at
/// its deadline (5 s from accept), never welcomed, and a client served meanwhile.
#[test]
fn a_dribbled_hello_is_cut_off_at_its_deadline() {
    let server = Server::start(&[]);
    let frame = hello();
    let mut conn = connect_from("127.0.0.2", &server.addr);
    let mut reader = conn.try_clone().unwrap();
    let closed = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicUsize::new(0));
    let writer = {
        let (closed, sent, frame) = (Arc::clone(&closed), Arc::clone(&sent), frame.clone());
        std::thread::spawn(move || {
            for b in &frame {
                if closed.load(Ordering::SeqCst) || conn.write_all(&[*b]).is_err() {
                    return;
                }
                sent.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(500));
            }
        })
    };
    // A well-behaved client meanwhile.
    let v = run_ok(&["pingpong", "--to", &server.addr, "-n", "200"]);
    assert_eq!(u(&v["points"][0]["latency"]["rtt"]["samples"]), 200);

    let reply = reply_of(&mut reader);
    closed.store(true, Ordering::SeqCst);
    let sent_when_closed = sent.load(Ordering::SeqCst);
    writer.join().unwrap();
    assert!(
        !reply.contains("welcome"),
        "the dribbler was welcomed: {reply}"
    );
    assert!(
        reply.contains("no complete hello within 5.000 s"),
        "reply: {reply}"
    );
    assert!(
        sent_when_closed < frame.len(),
        "closed only after the whole hello ({sent_when_closed} of {} bytes)",
        frame.len()
    );
}

/// Defect 4 again, after the hello: the test request dribbled byte by byte is cut off at the
/// handshake's deadline (15 s from accept) although every byte comes well inside any
/// per-read timeout.
#[test]
fn a_dribbled_request_after_the_hello_is_cut_off() {
    let server = Server::start(&[]);
    let mut conn = connect_from("127.0.0.3", &server.addr);
    conn.write_all(&hello()).unwrap();
    assert!(frame_of(&mut conn).contains("\"welcome\""));
    // A test request as a client sends it, some 400 bytes: 200 s at this pace.
    let open = br#"{"type":"open","spec":{"pattern":"pingpong","transport":"tcp","streams":1,"direction":"forward","spin":false,"server_cpus":[],"interval_ms":null,"burst":1,"fast":{}}}"#;
    let mut frame = (open.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(open);
    let mut reader = conn.try_clone().unwrap();
    let closed = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicUsize::new(0));
    let total = frame.len();
    let writer = {
        let (closed, sent) = (Arc::clone(&closed), Arc::clone(&sent));
        std::thread::spawn(move || {
            for b in &frame {
                if closed.load(Ordering::SeqCst) || conn.write_all(&[*b]).is_err() {
                    return;
                }
                sent.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(500));
            }
        })
    };
    let reply = reply_of(&mut reader);
    closed.store(true, Ordering::SeqCst);
    let sent_when_closed = sent.load(Ordering::SeqCst);
    writer.join().unwrap();
    assert!(reply.contains("timed out"), "reply: {reply}");
    assert!(
        sent_when_closed < total,
        "closed only after the whole request ({sent_when_closed} of {total} bytes)"
    );
}

/// Defect 4: 64 connections that send the first 4 bytes of a hello and stall once held every
/// test slot ("server busy" for everyone). Now they hold no slot. They come from 8 addresses,
/// and 100 more from the client's own.
#[test]
fn stalled_hellos_do_not_lock_out_a_client() {
    let server = Server::start(&[]);
    let prefix = &hello()[..4];
    let held: Vec<TcpStream> = (0..164)
        .map(|i| {
            let from = if i < 64 {
                format!("127.0.0.{}", 10 + i % 8)
            } else {
                "127.0.0.1".to_owned()
            };
            let mut s = connect_from(&from, &server.addr);
            s.write_all(prefix).unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let v = run_ok(&["pingpong", "--to", &server.addr, "-n", "200"]);
    assert_eq!(u(&v["points"][0]["latency"]["rtt"]["samples"]), 200);
    // And a one-port test, whose data connections go through the same door.
    let v = run_ok(&["pingpong", "--to", &server.addr, "-n", "200", "--one-port"]);
    assert_eq!(u(&v["points"][0]["latency"]["rtt"]["samples"]), 200);
    drop(held);
}

/// Defect 4: every accepted connection got a thread before any limit was checked (5 000
/// silent connections, 1 994 threads). Now 500 silent connections cost no thread, no more of
/// them are kept than the waiting limit (the oldest make room), a client is served meanwhile,
/// and threads and descriptors come back down.
#[test]
fn silent_connections_cost_no_thread_each() {
    let server = Server::start(&[]);
    eventually("the server is up", || status(&server, "Threads") >= 1);
    let fds_before = descriptors(&server);
    let held: Vec<TcpStream> = (0..500)
        .map(|i| connect_from(&format!("127.0.0.{}", 20 + i % 10), &server.addr))
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let threads = status(&server, "Threads");
    assert!(threads < 32, "{threads} threads for 500 silent connections");
    // The waiting set is bounded (256 by default): the server holds no more descriptors.
    let fds = descriptors(&server);
    assert!(
        fds < fds_before + 300,
        "{fds} descriptors (from {fds_before})"
    );
    // Served meanwhile.
    let v = run_ok(&["pingpong", "--to", &server.addr, "-n", "100"]);
    assert_eq!(u(&v["points"][0]["latency"]["rtt"]["samples"]), 100);
    assert!(status(&server, "Threads") < 32);
    drop(held);
    eventually("descriptors back to where they were", || {
        descriptors(&server) <= fds_before + 2
    });
}

/// The per-client limit: sessions one address holds at once; others are still served, and a
/// slot comes back when its session ends.
#[test]
fn one_client_holds_at_most_its_share() {
    let server = Server::start(&["--max-sessions-per-client", "2"]);
    let a = hold_session("127.0.0.40", &server.addr);
    let b = hold_session("127.0.0.40", &server.addr);
    let mut c = connect_from("127.0.0.40", &server.addr);
    c.write_all(&hello()).unwrap();
    let reply = reply_of(&mut c);
    assert!(
        reply.contains("too many tests from 127.0.0.40: the limit is 2")
            && reply.contains(r#""kind":"busy""#),
        "reply: {reply}"
    );
    // Another client is served.
    run_ok(&["pingpong", "--to", &server.addr, "-n", "50"]);
    // A session that ends gives its slot back.
    drop(a);
    eventually("the slot comes back", || {
        let mut d = connect_from("127.0.0.40", &server.addr);
        d.write_all(&hello()).unwrap();
        frame_of(&mut d).contains("\"welcome\"")
    });
    drop(b);
}

/// 64 sessions from 8 addresses (hello, open, then nothing) once filled
/// --max-sessions within the per-client share, and every other client was then "busy" for the
/// minute of the idle timeout. Now a full server gives the slot of the session that has waited
/// longest for its client (2 s or more) to the newcomer, and that session is told why.
#[test]
fn idle_sessions_yield_their_slots_to_a_waiting_client() {
    let server = Server::start(&[]);
    let held: Vec<TcpStream> = (0..64)
        .map(|i| hold_session(&format!("127.0.2.{}", 1 + i % 8), &server.addr))
        .collect();
    // Every held session has now waited YIELD_AFTER (2 s) at least for its first point.
    std::thread::sleep(Duration::from_millis(2500));
    run_ok(&["pingpong", "--to", &server.addr, "-n", "50"]);
    let mut yielded = 0;
    eventually("a held session is told it yielded", || {
        for s in &held {
            s.set_nonblocking(true).unwrap();
            let mut buf = [0u8; 512];
            if let Ok(n) = s.peek(&mut buf) {
                let text = String::from_utf8_lossy(&buf[..n]);
                if text.contains("went to another client") {
                    yielded += 1;
                }
            }
        }
        yielded > 0
    });
    assert!(yielded < 64, "every session lost its slot to one client");
}

/// A full server whose one session waits for its client, but not yet long enough to yield,
/// says when it will have; the client waits that long, once, and gets in.
#[test]
fn a_client_told_when_a_full_server_has_room_tries_once_more_and_gets_in() {
    let server = Server::start(&["--max-sessions", "1"]);
    for attempt in 1.. {
        // The held session waits for its first point from its answer on: the client below
        // comes well inside the 2 s after which a full server takes its slot at once.
        let held = hold_session("127.0.0.70", &server.addr);
        let out = wb(
            &[
                "run",
                "pingpong",
                "--to",
                &server.addr,
                "-n",
                "20",
                "--json",
            ],
            None,
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(u(&v["points"][0]["latency"]["rtt"]["samples"]), 20);
        if err.contains("server (busy, try again in ") && err.contains("; trying once more") {
            break;
        }
        // A host so loaded that the client came after those 2 s was let in at once: again,
        // with a fresh held session. Each attempt is a success either way; only a server
        // that never says when it has room fails all ten.
        assert!(attempt < 10, "never told when to try again: {err}");
        drop(held);
    }
}

#[test]
fn one_client_over_its_share_gets_a_readable_error() {
    let server = Server::start(&["--max-sessions-per-client", "1"]);
    let _held = hold_session("127.0.0.1", &server.addr);
    refused(
        &["run", "pingpong", "--to", &server.addr, "-n", "10"],
        None,
        "server (busy, try again later): too many tests from 127.0.0.1: the limit is 1",
    );
}

#[test]
fn denied_clients_are_refused_at_accept_with_the_reason() {
    let server = Server::start(&["--deny", "127.0.0.0/8"]);
    refused(
        &["run", "pingpong", "--to", &server.addr, "-n", "10"],
        None,
        "server (refused by policy): access denied: 127.0.0.1 may not use this server",
    );
    // Refused before anything is read: a silent connection hears it at once.
    let mut s = connect_from("127.0.0.50", &server.addr);
    let reply = reply_of(&mut s);
    assert!(
        reply.contains("access denied: 127.0.0.50") && reply.contains(r#""kind":"policy""#),
        "{reply}"
    );

    // Deny wins over allow.
    let server = Server::start(&["--allow", "127.0.0.0/8", "--deny", "127.0.0.1"]);
    refused(
        &["run", "pingpong", "--to", &server.addr, "-n", "10"],
        None,
        "access denied",
    );
}

/// On a dual-stack listener an IPv4 client arrives as ::ffff:a.b.c.d, and a
/// rule written that way once named it but never matched it.
#[test]
fn rules_written_as_mapped_ipv6_match_ipv4_clients_of_a_dual_stack_listener() {
    let server = Server::start_on("::", &["--deny", "::ffff:127.0.0.1"]);
    let port = server.addr.rsplit(':').next().unwrap().to_owned();
    refused(
        &[
            "run",
            "pingpong",
            "--to",
            &format!("127.0.0.1:{port}"),
            "-n",
            "10",
        ],
        None,
        "access denied: 127.0.0.1 may not use this server",
    );
    let server = Server::start_on("::", &["--allow", "::ffff:127.0.0.0/104"]);
    let port = server.addr.rsplit(':').next().unwrap().to_owned();
    let v = run_ok(&["pingpong", "--to", &format!("127.0.0.1:{port}"), "-n", "20"]);
    assert_eq!(u(&v["points"][0]["latency"]["rtt"]["samples"]), 20);
}

#[test]
fn only_allowed_clients_are_served() {
    let server = Server::start(&["--allow", "10.0.0.0/8,127.0.0.1/32"]);
    let v = run_ok(&["pingpong", "--to", &server.addr, "-n", "50"]);
    assert_eq!(u(&v["points"][0]["latency"]["rtt"]["samples"]), 50);
    let mut other = connect_from("127.0.0.2", &server.addr);
    other.write_all(&hello()).unwrap();
    assert!(reply_of(&mut other).contains("access denied: 127.0.0.2"));

    let server = Server::start(&["--allow", "10.0.0.0/8"]);
    refused(
        &["run", "pingpong", "--to", &server.addr, "-n", "10"],
        None,
        "access denied",
    );
    refused(&["serve", "--allow", "10.0.0.0/33"], None, "0 to 32");
}

#[test]
fn the_right_key_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(&dir, "key", "0123456789abcdef-the-right-key");
    let server = Server::start(&["--psk-file", &key]);
    for extra in [
        &["pingpong", "-d", "200ms"][..],
        &["pingpong", "-t", "udp", "-n", "100"],
        &["stream", "-d", "200ms", "--one-port"],
        &["crr", "-n", "50", "--one-port"],
    ] {
        let mut args = extra.to_vec();
        args.extend(["--to", server.addr.as_str(), "--psk-file", key.as_str()]);
        run_ok(&args);
    }
    // From the environment as well.
    let out = wb(
        &["run", "pingpong", "--to", &server.addr, "-n", "50"],
        Some("0123456789abcdef-the-right-key"),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The server started by `run` itself takes the client's key.
    run_ok(&["pingpong", "-n", "50", "--psk-file", &key]);
}

#[test]
fn a_missing_or_wrong_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(&dir, "key", "0123456789abcdef-the-right-key");
    let wrong = key_file(&dir, "wrong", "0123456789abcdef-the-wrong-key");
    let server = Server::start(&["--psk-file", &key]);
    let to = server.addr.as_str();
    refused(
        &["run", "pingpong", "--to", to, "-n", "10"],
        None,
        &format!("server (not authorised): {NEEDS_KEY}"),
    );
    refused(
        &[
            "run",
            "pingpong",
            "--to",
            to,
            "-n",
            "10",
            "--psk-file",
            &wrong,
        ],
        None,
        "server (not authorised): authentication failed",
    );
    refused(
        &["run", "pingpong", "--to", to, "-n", "10"],
        Some("0123456789abcdef-the-wrong-key"),
        "server (not authorised): authentication failed",
    );
    // A raw keyless hello hears why, and nothing else.
    let mut s = connect_from("127.0.0.60", to);
    s.write_all(&hello()).unwrap();
    let reply = reply_of(&mut s);
    assert!(
        reply.contains(NEEDS_KEY)
            && reply.contains(r#""kind":"not_authorised""#)
            && !reply.contains("welcome"),
        "{reply}"
    );
    // The server is unharmed.
    run_ok(&["pingpong", "--to", to, "-n", "50", "--psk-file", &key]);
}

/// Mutual: a client with a key does not talk to a server that cannot prove it holds it.
#[test]
fn a_client_with_a_key_refuses_a_server_without_one() {
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(&dir, "key", "0123456789abcdef-the-right-key");
    let server = Server::start(&[]);
    refused(
        &[
            "run",
            "pingpong",
            "--to",
            &server.addr,
            "-n",
            "10",
            "--psk-file",
            &key,
        ],
        None,
        "runs without a pre-shared key",
    );
    let short = key_file(&dir, "short", "tiny");
    refused(
        &[
            "run",
            "pingpong",
            "--to",
            &server.addr,
            "--psk-file",
            &short,
        ],
        None,
        "at least 16",
    );
}

/// A server open to the network without a key says so when it starts (after its address, which
/// is the first line); on loopback it does not.
#[test]
fn an_open_server_without_a_key_warns() {
    use std::io::{BufRead, BufReader};
    // The lines the server prints at start: at least `want` of them (waiting up to 30 s for
    // each), then whatever else it printed before it was stopped.
    let lines_of = |listen: &str, extra: &[&str], want: usize| {
        let mut child = bin()
            .args(["serve", "--listen", listen, "--port", "0"])
            .args(extra)
            .env_remove("WIREBENCH_PSK")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        let mut lines: Vec<String> = (0..want)
            .map_while(|_| rx.recv_timeout(common::FINISH).ok())
            .collect();
        let _ = child.kill();
        let _ = child.wait();
        lines.extend(rx.iter());
        lines
    };
    let open = lines_of("0.0.0.0", &[], 2);
    assert!(open[0].contains("listening on"), "{open:?}");
    assert!(
        open.get(1)
            .is_some_and(|l| l.contains("warning: no pre-shared key")),
        "{open:?}"
    );
    let lo = lines_of("127.0.0.1", &[], 1);
    assert!(!lo.iter().any(|l| l.contains("warning")), "{lo:?}");
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(&dir, "key", "0123456789abcdef-the-right-key");
    let keyed = lines_of("0.0.0.0", &["--psk-file", &key], 1);
    assert!(keyed[0].contains("listening on"), "{keyed:?}");
    assert!(!keyed.iter().any(|l| l.contains("warning")), "{keyed:?}");
}
