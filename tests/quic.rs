//! QUIC beyond the shared pattern tests: certificates given on the command line, a server
//! the client must not trust, and the handshake reported apart from the data path.

// Helpers outside #[test] fns fail their test by panicking, as the tests do (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::pki::make_pki;
use common::{f, run, run_json, u, Server};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn a_server_signed_by_another_ca_is_refused_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let server_pki = make_pki(dir.path(), "server");
    let other = make_pki(dir.path(), "other");
    let server = Server::start(&[
        "--tls-cert",
        s(&server_pki.cert),
        "--tls-key",
        s(&server_pki.key),
    ]);
    // An hour's I/O timeout: a refusal that waited for a timeout would not come within the
    // minute run_bounded allows, so one that comes is the certificate's.
    let out = common::run_bounded(&[
        "run",
        "pingpong",
        "-t",
        "quic",
        "--to",
        &server.addr,
        "-n",
        "10",
        "--io-timeout",
        "1h",
        "--tls-ca",
        s(&other.ca),
    ]);
    assert!(!out.status.success(), "a wrong CA must fail the run");
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "one line of error, got: {err}");
    assert!(lines[0].contains("QUIC handshake with 127.0.0.1:"), "{err}");
    assert!(lines[0].contains("certificate"), "{err}");
    assert!(lines[0].contains(s(&other.ca)), "names the CA file: {err}");
    assert!(!err.contains("panicked"), "{err}");

    // The server keeps serving: the right CA works against the same server.
    let v = run_json(&[
        "pingpong",
        "-t",
        "quic",
        "--to",
        &server.addr,
        "-n",
        "200",
        "--tls-ca",
        s(&server_pki.ca),
    ]);
    assert_eq!(u(&v["points"][0]["latency"]["rtt"]["samples"]), 200);
}

#[test]
fn given_certificates_work_self_hosted_and_stream_every_byte() {
    let dir = tempfile::tempdir().unwrap();
    let pki = make_pki(dir.path(), "local");
    // Self-hosted: the in-process server takes --tls-cert/--tls-key, the client --tls-ca.
    let v = run_json(&[
        "stream",
        "-t",
        "quic",
        "-d",
        "300ms",
        "--tls-cert",
        s(&pki.cert),
        "--tls-key",
        s(&pki.key),
        "--tls-ca",
        s(&pki.ca),
    ]);
    let t = &v["points"][0]["stream"]["totals"][0];
    assert!(u(&t["bytes_sent"]) > 0);
    assert_eq!(t["bytes_sent"], t["bytes_received"]);
}

#[test]
fn unreadable_certificate_files_are_one_clear_line() {
    let out = run(&[
        "run",
        "pingpong",
        "-t",
        "quic",
        "-n",
        "10",
        "--tls-ca",
        "/nonexistent/ca.pem",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("/nonexistent/ca.pem"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "not a certificate\n").unwrap();
    let out = run(&[
        "run",
        "pingpong",
        "-t",
        "quic",
        "-n",
        "10",
        "--tls-cert",
        s(&garbage),
        "--tls-key",
        s(&garbage),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("garbage.pem"), "{err}");
}

#[test]
fn handshake_time_is_reported_apart_from_the_round_trips() {
    let v = run_json(&["pingpong", "-t", "quic", "-n", "300", "--warmup", "1"]);
    let p = &v["points"][0];
    let setup = u(&p["socket"]["client"][0]["setup_ns"]);
    assert!(setup > 0, "setup_ns {setup}");
    let rtt = &p["latency"]["rtt"];
    // Exactly the transactions asked for: the handshake is no extra sample...
    assert_eq!(u(&rtt["samples"]), 300);
    // ...and far from the typical round trip (a handshake costs at least one round trip
    // and the TLS signatures; a loopback ping-pong costs tens of microseconds).
    let median = f(&rtt["median_ns"]);
    assert!(
        median * 5.0 < setup as f64,
        "median round trip {median} ns vs handshake {setup} ns"
    );
    // The server side has no setup time of its own to report.
    assert!(p["socket"]["server"][0].get("setup_ns").is_none());
}
