//! grpc over TLS (`run -t grpc --tls`): the whole run through the binary, self-hosted with the
//! self-signed certificate pinned, against a separate server with given certificates and
//! `--tls-ca`, and `--tls` refused in one line where it does not apply. Counts only: nothing
//! here depends on load.

// Helpers outside #[test] fns fail their test by panicking, as the tests do (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::pki::make_pki;
use common::{refusal, run, run_json, u, Server};

#[test]
fn a_self_hosted_tls_run_completes_every_transaction_and_says_tls() {
    let v = run_json(&["pingpong", "-t", "grpc", "--tls", "-n", "200"]);
    assert_eq!(v["transport"], "grpc");
    assert_eq!(v["settings"]["tls"], true);
    assert_eq!(u(&v["points"][0]["latency"]["transactions"]), 200);
    assert_eq!(u(&v["points"][0]["latency"]["rtt"]["samples"]), 200);

    // Without --tls a grpc run says so too; the table header names TLS only with it.
    let plain = run_json(&["pingpong", "-t", "grpc", "-n", "20"]);
    assert_eq!(plain["settings"]["tls"], false);
    let out = run(&["run", "pingpong", "-t", "grpc", "--tls", "-n", "20"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let first = text.lines().next().unwrap_or_default();
    assert!(
        first.contains("pingpong over grpc (TLS 1.3), server"),
        "{text}"
    );
}

#[test]
fn given_certificates_verify_against_the_ca_and_a_wrong_ca_is_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let pki = make_pki(dir.path(), "grpc");
    let other = make_pki(dir.path(), "other");
    let server = Server::start(&[
        "--tls-cert",
        pki.cert.to_str().unwrap(),
        "--tls-key",
        pki.key.to_str().unwrap(),
    ]);
    let v = run_json(&[
        "rr",
        "-t",
        "grpc",
        "--tls",
        "--to",
        &server.addr,
        "-n",
        "100",
        "--tls-ca",
        pki.ca.to_str().unwrap(),
    ]);
    assert_eq!(v["settings"]["tls"], true);
    assert_eq!(u(&v["points"][0]["latency"]["transactions"]), 100);

    // An hour's I/O timeout: a refusal that waited for one would not come within the minute
    // run_bounded allows, so one that comes is the certificate's.
    let out = common::run_bounded(&[
        "run",
        "pingpong",
        "-t",
        "grpc",
        "--tls",
        "--to",
        &server.addr,
        "-n",
        "10",
        "--io-timeout",
        "1h",
        "--tls-ca",
        other.ca.to_str().unwrap(),
    ]);
    let line = refusal(&out, "a server the CA did not sign");
    assert!(line.contains("gRPC TLS connection to 127.0.0.1:"), "{line}");
    assert!(
        line.contains(other.ca.to_str().unwrap()),
        "names the CA: {line}"
    );
}

#[test]
fn tls_on_another_transport_is_refused_in_one_line() {
    let out = run(&["run", "pingpong", "-t", "tcp", "--tls", "-n", "10"]);
    let line = refusal(&out, "--tls -t tcp");
    assert!(line.contains("--tls applies to -t grpc alone"), "{line}");
    let out = run(&["run", "pingpong", "-t", "quic", "--tls", "-n", "10"]);
    let line = refusal(&out, "--tls -t quic");
    assert!(line.contains("quic always encrypts"), "{line}");
}
