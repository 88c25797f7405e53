//! `serve --metrics`: the server's own counters as Prometheus scrapes them, after two runs
//! and one client refused for a wrong key, checked exactly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;

use common::{run, Server, FINISH};

fn key_file(dir: &tempfile::TempDir, name: &str, key: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.path().join(name);
    std::fs::write(&p, format!("{key}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p.to_str().unwrap().to_owned()
}

/// GET `path` from the exporter: (status line, body).
fn scrape(addr: &str, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(FINISH)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut all = String::new();
    s.read_to_string(&mut all).unwrap();
    let (head, body) = all.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

/// The value of the sample named exactly `series` (name and labels).
fn value(body: &str, series: &str) -> f64 {
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {series} in\n{body}"))
        .parse()
        .unwrap()
}

#[test]
fn loopback_serve_metrics_counts_sessions_refusals_and_bytes_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(&dir, "key", "0123456789abcdef-the-right-key");
    let wrong = key_file(&dir, "wrong", "0123456789abcdef-the-wrong-key");
    let server = Server::start(&["--psk-file", &key, "--metrics", "127.0.0.1:0"]);
    let line = server
        .wait_for("metrics on http://", FINISH)
        .expect("the server says where its metrics are");
    let metrics = line
        .rsplit("http://")
        .next()
        .unwrap()
        .trim_end_matches("/metrics")
        .to_string();
    let to = server.addr.as_str();

    // Before any client: every refusal kind at 0, no session.
    let (status, body) = scrape(&metrics, "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(value(&body, "wirebench_server_sessions_total"), 0.0);
    assert_eq!(
        value(
            &body,
            r#"wirebench_server_refusals_total{kind="not_authorised"}"#
        ),
        0.0
    );

    for _ in 0..2 {
        let out = run(&[
            "run",
            "pingpong",
            "--to",
            to,
            "-n",
            "100",
            "-s",
            "64",
            "--psk-file",
            &key,
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = run(&[
        "run",
        "pingpong",
        "--to",
        to,
        "-n",
        "100",
        "-s",
        "64",
        "--psk-file",
        &wrong,
    ]);
    assert!(!out.status.success());

    // A session ends on the server's thread a moment after its client has its answer.
    let mut body = String::new();
    let settled = common::wait_until(FINISH, || {
        body = scrape(&metrics, "/metrics").1;
        value(&body, "wirebench_server_active_sessions") == 0.0
    });
    assert!(settled, "sessions never ended:\n{body}");
    // The refused client was admitted as a session too: the key is checked inside it.
    assert_eq!(value(&body, "wirebench_server_sessions_total"), 3.0);
    assert_eq!(
        value(
            &body,
            r#"wirebench_server_refusals_total{kind="not_authorised"}"#
        ),
        1.0
    );
    for kind in ["busy", "policy", "invalid", "limit", "internal"] {
        let series = format!(r#"wirebench_server_refusals_total{{kind="{kind}"}}"#);
        assert_eq!(value(&body, &series), 0.0, "{kind}");
    }
    // Each run: 100 timed 64-byte requests answered by 64-byte responses, warm-up on top.
    let received = value(&body, "wirebench_server_received_bytes_total");
    let sent = value(&body, "wirebench_server_sent_bytes_total");
    assert!(received >= 2.0 * 100.0 * 64.0, "{received}");
    assert!(sent >= 2.0 * 100.0 * 64.0, "{sent}");
    assert!(body.contains("# TYPE wirebench_server_sessions_total counter\n"));

    // A server runs no probes: /probe is not there (and so writes nothing to its log).
    let (status, probe) = scrape(&metrics, "/probe?target=x&module=y");
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    assert!(!probe.contains("wirebench_probe_success"), "{probe}");
}

#[test]
fn loopback_metrics_address_in_use_is_one_line() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = common::run_bounded(&[
        "serve",
        "--port",
        "0",
        "--listen",
        "127.0.0.1",
        "--metrics",
        &addr,
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("--metrics {addr}: address in use")),
        "{stderr}"
    );
}

/// A connection from the loopback address `from` to `addr`, its reads and writes bounded by
/// [`FINISH`] (a hang guard).
fn connect_from(from: &str, addr: &str) -> TcpStream {
    let s = common::connect_from(from, addr);
    s.set_read_timeout(Some(FINISH)).unwrap();
    s.set_write_timeout(Some(FINISH)).unwrap();
    s
}

/// GET `path` from `from`: the status line.
fn scrape_from(from: &str, addr: &str, path: &str) -> String {
    let mut s = connect_from(from, addr);
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut all = String::new();
    s.read_to_string(&mut all).unwrap();
    all.lines().next().unwrap_or("").to_string()
}

/// The exporter under the issue's attacks, in a server that may map at most 1 GiB and open
/// 256 descriptors: an endless header line, hundreds of idle connections, slow-loris heads,
/// 4 000 pipelined requests never read and a /probe flood. The server lives, its memory and
/// its threads stay bounded, scrapes from another address and a measuring client are served
/// throughout, and it comes back to its baseline threads and descriptors.
#[test]
fn loopback_exporter_holds_under_attack_within_a_gib_and_256_descriptors() {
    let mut server = Server::start_limited(
        &["--as=1073741824", "--nofile=256"],
        &[
            "--metrics",
            "127.0.0.1:0",
            "--max-sessions-per-client",
            "64",
        ],
    );
    let line = server
        .wait_for("metrics on http://", FINISH)
        .expect("the server says where its metrics are");
    let metrics = line
        .rsplit(' ')
        .next()
        .unwrap()
        .trim_start_matches("http://")
        .trim_end_matches("/metrics")
        .to_string();
    let pid = server.child.id();
    let alive = |server: &mut Server| server.child.try_wait().unwrap().is_none();
    assert_eq!(
        scrape_from("127.0.0.2", &metrics, "/metrics"),
        "HTTP/1.1 200 OK"
    );
    let baseline = common::proc::held(pid);

    let (_, peak) = common::proc::peak_while(pid, || {
        // A header line without an end: refused after 8 KiB, whatever follows.
        let mut endless = connect_from("127.0.0.1", &metrics);
        endless.write_all(b"GET /metrics HTTP/1.1\r\nX: ").unwrap();
        let chunk = vec![b'a'; 64 * 1024];
        let mut sent = 0usize;
        while sent < 256 << 20 && endless.write_all(&chunk).is_ok() {
            sent += chunk.len();
        }
        assert!(sent < 256 << 20, "the server read an endless header line");
        // 200 idle connections from 127.0.0.1, 20 slow-loris heads from 127.0.0.3.
        let idle: Vec<TcpStream> = (0..200)
            .map(|_| connect_from("127.0.0.1", &metrics))
            .collect();
        let mut loris: Vec<TcpStream> = (0..20)
            .map(|_| connect_from("127.0.0.3", &metrics))
            .collect();
        for s in &mut loris {
            let _ = s.write_all(b"GET /metr");
        }
        // 4 000 pipelined requests on one connection, never read.
        let mut pipeliner = connect_from("127.0.0.4", &metrics);
        let many = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".repeat(4000);
        let _ = pipeliner.write_all(many.as_bytes());
        // A /probe flood: a server has no /probe, and logs nothing for it.
        for _ in 0..200 {
            assert_eq!(
                scrape_from("127.0.0.5", &metrics, "/probe?target=x&module=y"),
                "HTTP/1.1 404 Not Found"
            );
        }
        // Meanwhile: another scraper and a measuring client are served.
        assert_eq!(
            scrape_from("127.0.0.2", &metrics, "/metrics"),
            "HTTP/1.1 200 OK"
        );
        let out = run(&[
            "run",
            "pingpong",
            "-n",
            "100",
            "--to",
            &server.addr,
            "--json",
        ]);
        assert!(
            out.status.success(),
            "a measuring client failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Every slow-loris head is cut off by the server (the read ends; FINISH guards).
        for mut s in loris {
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest);
        }
        drop((idle, pipeliner, endless));
    });
    assert!(alive(&mut server), "the server died");
    // One runtime thread and a few workers: the connections hold no threads.
    assert!(
        peak.threads <= baseline.threads + 8,
        "threads {} -> {}",
        baseline.threads,
        peak.threads
    );
    assert!(
        peak.rss_kib < baseline.rss_kib + 100 * 1024,
        "resident memory {} KiB -> {} KiB",
        baseline.rss_kib,
        peak.rss_kib
    );
    let settled = common::proc::settle(pid, baseline, FINISH);
    assert!(
        settled.threads <= baseline.threads && settled.fds <= baseline.fds,
        "{baseline:?} -> {settled:?}"
    );
    assert_eq!(
        scrape_from("127.0.0.2", &metrics, "/metrics"),
        "HTTP/1.1 200 OK"
    );
}
