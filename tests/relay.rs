//! The relay and one-port mode: a test through `wirebench relay` goes through it (data too),
//! costs measurably more latency than the direct path, and loses no byte.

// Helpers outside #[test] fns fail their test by panicking, as the tests do (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Instant;

use common::{bin, f, run, run_json, u, Server, FINISH};
use serde_json::Value;

/// A `wirebench relay -v` on loopback; its per-connection lines arrive on `log`.
struct Relay {
    child: Child,
    addr: String,
    log: mpsc::Receiver<String>,
}

impl Relay {
    fn start(forward: &str) -> Relay {
        let mut child = bin()
            .args([
                "relay",
                "--listen",
                "127.0.0.1:0",
                "--forward",
                forward,
                "-v",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("relay starts");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let first = lines.next().expect("relay prints its address").unwrap();
        let addr = first
            .split_whitespace()
            .nth(3)
            .expect("'wirebench relay on ADDR ...'")
            .to_owned();
        let (tx, log) = mpsc::channel();
        std::thread::spawn(move || {
            for l in lines.map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        Relay { child, addr, log }
    }

    /// Bytes relayed (up, down) by the connections whose close the relay logged from now on,
    /// read until those logged so far satisfy `enough`, failing the test if they have not
    /// after [`FINISH`]. The relay logs a pair when it has closed both its sockets, which a
    /// loaded host may do seconds after the client has exited: the test waits for the lines
    /// it needs, not for a fixed silence.
    fn closed_until(&self, enough: impl Fn(&[(u64, u64)]) -> bool) -> Vec<(u64, u64)> {
        let until = Instant::now() + FINISH;
        let mut out = Vec::new();
        while !enough(&out) {
            let left = until.saturating_duration_since(Instant::now());
            let Ok(l) = self.log.recv_timeout(left) else {
                panic!("the relay logged only these closed connections: {out:?}");
            };
            let nums: Vec<u64> = l
                .split_whitespace()
                .filter_map(|w| w.parse().ok())
                .collect();
            if let [up, down] = nums[..] {
                out.push((up, down));
            }
        }
        out
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn min_one_way_us(v: &Value) -> f64 {
    f(&v["points"][0]["latency"]["rtt"]["min_ns"]) / 2e3
}

#[test]
fn a_relay_adds_latency_and_the_test_goes_through_it() {
    let server = Server::start(&[]);
    let relay = Relay::start(&server.addr);
    let args = |to: &str| -> Vec<String> {
        [
            "pingpong",
            "--to",
            to,
            "--size",
            "64",
            "-d",
            "400ms",
            "--no-save",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let (mut direct, mut relayed) = (Vec::new(), Vec::new());
    // Alternate, so that a slow moment of the host does not fall on one side only.
    for _ in 0..2 {
        let a = args(&server.addr);
        direct.push(run_json(&a.iter().map(String::as_str).collect::<Vec<_>>()));
        let a = args(&relay.addr);
        relayed.push(run_json(&a.iter().map(String::as_str).collect::<Vec<_>>()));
    }
    for v in &direct {
        assert_eq!(v["server"]["one_port"], false);
        assert!(v["server"].get("middlebox").is_none());
    }
    for v in &relayed {
        // The client saw the relay and sent its data connection through the control port.
        assert_eq!(v["server"]["one_port"], true, "{}", v["server"]);
        assert!(v["server"]["middlebox"].as_str().is_some());
    }
    let best_direct = direct.iter().map(min_one_way_us).fold(f64::MAX, f64::min);
    let worst_direct = direct.iter().map(min_one_way_us).fold(0.0, f64::max);
    let best_relayed = relayed.iter().map(min_one_way_us).fold(f64::MAX, f64::min);
    // Each message crosses two more sockets, two more system calls and a relay thread's
    // wake-up. The minimum is the figure the host's load disturbs least (medians of both
    // paths drown in scheduling delay when the other core is busy): the best relayed
    // round trip must be slower than the worst best direct one.
    eprintln!(
        "relayed min {best_relayed:.2} us, direct min {best_direct:.2}..{worst_direct:.2} us"
    );
    assert!(
        best_relayed > worst_direct + 1.0,
        "relayed min {best_relayed:.2} us, direct min {best_direct:.2}..{worst_direct:.2} us"
    );
    // The relay carried the data connection: control and data connections closed (each
    // relayed run's two; closed_until fails the test if fewer are ever logged).
    relay.closed_until(|c| c.len() >= 4);
}

#[test]
fn a_relay_loses_nothing_either_way() {
    let server = Server::start(&[]);
    let relay = Relay::start(&server.addr);
    let bytes: u64 = 32 << 20;
    for reverse in [false, true] {
        let b = bytes.to_string();
        let mut args = vec![
            "stream",
            "--to",
            &relay.addr,
            "--bytes",
            &b,
            "--warmup",
            "0",
            "--no-save",
        ];
        if reverse {
            args.push("--reverse");
        }
        let v = run_json(&args);
        let t = &v["points"][0]["stream"]["totals"][0];
        assert_eq!(u(&t["bytes_sent"]), bytes);
        assert_eq!(u(&t["bytes_received"]), bytes);
        // The relay's own count of the data connection: the 20-byte prefix and cookie go
        // up, then every byte of the stream, in the direction of the test. Waited for until
        // logged (closed_until fails the test, with what was logged, if it never is).
        let carried = |&(up, down): &(u64, u64)| {
            if reverse {
                down == bytes
            } else {
                up == bytes + 20
            }
        };
        relay.closed_until(|c| c.iter().any(carried));
    }
}

#[test]
fn one_port_carries_every_pattern() {
    for pattern in ["pingpong", "rr", "crr", "stream"] {
        let v = run_json(&[pattern, "--one-port", "-d", "200ms", "--no-save"]);
        assert_eq!(v["server"]["one_port"], true);
        let p = &v["points"][0];
        if pattern == "stream" {
            let t = &p["stream"]["totals"][0];
            assert_eq!(u(&t["bytes_sent"]), u(&t["bytes_received"]));
            assert!(u(&t["bytes_received"]) > 0);
        } else {
            // Any number: how many fit in 200 ms is a rate, which a loaded host moves.
            assert!(u(&p["latency"]["transactions"]) > 0, "{pattern}: {p}");
        }
    }
}

#[test]
fn one_port_is_tcp_only_and_says_so() {
    let out = run(&["run", "pingpong", "-t", "udp", "--one-port", "--no-save"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--one-port") && err.contains("tcp"), "{err}");
}

#[test]
fn relay_to_nowhere_fails_the_client_cleanly() {
    // A relay whose target does not exist: the client gets one line, not a hang.
    let relay = Relay::start("127.0.0.1:1");
    let out = run(&[
        "run",
        "pingpong",
        "--to",
        &relay.addr,
        "-d",
        "100ms",
        "--io-timeout",
        "2s",
        "--no-save",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
}
