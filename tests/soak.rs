//! A soak of the server: 200 well-behaved clients of every pattern at once, beside a set of
//! hostile ones (silent, slow, vanished, spoofing, garbage). Every well-behaved client must
//! succeed, no hostile one may get traffic aimed at a victim, and the server's threads and
//! descriptors must come back to their baseline afterwards. The figures (peak and settled
//! threads, descriptors and memory) are printed for the record.
//!
//! Bounded: each client measures for a fraction of a second or a fixed number of
//! iterations, and every wait has a limit; counts are asserted, never times.

// Helpers outside #[test] fns fail their test by panicking, as the tests do (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::{Child, Stdio};
use std::time::Duration;

use common::hostile::{silent, slow_hello, spoofed_udp_hello};
use common::proc::{held, peak_while, settle};
use common::{bin, run, Server};

const CLIENTS: usize = 200;

fn client_args(i: usize, addr: &str) -> Vec<String> {
    let args: &[&str] = match i % 8 {
        0 => &["pingpong", "-n", "100"],
        1 => &["pingpong", "-t", "udp", "-n", "100"],
        2 => &["stream", "-d", "300ms"],
        3 => &["stream", "-R", "-d", "300ms"],
        4 => &["rr", "-n", "100"],
        5 => &["crr", "-n", "20"],
        6 => &["pingpong", "--one-port", "-n", "100"],
        _ => &["stream", "-t", "udp", "--rate", "20M", "-d", "300ms"],
    };
    let mut v: Vec<String> = vec!["run".into()];
    v.extend(args.iter().map(|s| s.to_string()));
    v.extend([
        "--to".into(),
        addr.into(),
        "--json".into(),
        "--no-save".into(),
    ]);
    v
}

/// Starts a client that would hold a slot for months (a paced reverse sender writing 1 MiB
/// at 1 bit/s) or a long stream, to be killed with SIGKILL mid-test.
fn vanishing(i: usize, addr: &str) -> Child {
    let args: &[&str] = if i.is_multiple_of(2) {
        &[
            "run", "stream", "-R", "--bytes", "2M", "--size", "1M", "--rate", "1bit", "--warmup",
            "0",
        ]
    } else {
        &["run", "stream", "-d", "30s"]
    };
    bin()
        .args(args)
        .args(["--to", addr, "--no-save"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("client starts")
}

#[test]
fn two_hundred_clients_and_hostile_ones_at_once() {
    // Room for every well-behaved client at once, all from 127.0.0.1.
    let server = Server::start(&["--max-sessions", "400", "--max-sessions-per-client", "400"]);
    let pid = server.child.id();
    let addr = server.addr.clone();
    assert!(run(&client_args(0, &addr)
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>())
    .status
    .success());
    let baseline = held(pid);

    let (outcomes, peak) = peak_while(pid, || {
        std::thread::scope(|s| {
            // The hostile ones start first and keep going through the whole soak.
            let silent_conns: Vec<_> = (0..50).filter_map(|_| silent(&addr)).collect();
            let slow: Vec<_> = (0..10)
                .map(|_| {
                    let addr = addr.as_str();
                    s.spawn(move || {
                        slow_hello(addr, Duration::from_millis(300), Duration::from_secs(40))
                    })
                })
                .collect();
            let mut vanished: Vec<Child> = (0..10).map(|i| vanishing(i, &addr)).collect();
            let spoofers: Vec<_> = (0..3)
                .map(|_| {
                    let addr = addr.as_str();
                    s.spawn(move || spoofed_udp_hello(addr, "127.0.0.2", Duration::from_secs(3)))
                })
                .collect();
            std::thread::sleep(Duration::from_secs(1));
            for v in &mut vanished {
                let _ = v.kill();
                let _ = v.wait();
            }

            let clients: Vec<_> = (0..CLIENTS)
                .map(|i| {
                    let args = client_args(i, &addr);
                    s.spawn(move || {
                        let out = run(&args.iter().map(String::as_str).collect::<Vec<_>>());
                        (i, out)
                    })
                })
                .collect();
            let results: Vec<_> = clients.into_iter().map(|h| h.join().unwrap()).collect();
            let slow_bytes: Vec<usize> = slow.into_iter().map(|h| h.join().unwrap()).collect();
            let spoofed: Vec<usize> = spoofers.into_iter().map(|h| h.join().unwrap()).collect();
            drop(silent_conns);
            (results, slow_bytes, spoofed)
        })
    });
    let (results, slow_bytes, spoofed) = outcomes;

    let failed: Vec<String> = results
        .iter()
        .filter(|(_, out)| !out.status.success())
        .map(|(i, out)| {
            format!(
                "client {i} ({}): {}",
                client_args(*i, "").join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )
        })
        .collect();
    let settled = settle(pid, baseline, Duration::from_secs(60));
    eprintln!(
        "soak: {CLIENTS} clients, {} failed; 50 silent, 10 slow (bytes taken {slow_bytes:?}), 10 vanished, 3 spoofing (victim got {spoofed:?} bytes); threads {} -> peak {} -> {}, descriptors {} -> peak {} -> {}, RSS {} -> peak {} -> {} KiB",
        failed.len(),
        baseline.threads, peak.threads, settled.threads, baseline.fds, peak.fds, settled.fds,
        baseline.rss_kib, peak.rss_kib, settled.rss_kib
    );
    assert!(
        failed.is_empty(),
        "{} clients failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
    assert_eq!(
        spoofed,
        vec![0, 0, 0],
        "a spoofed data hello drew traffic to the victim"
    );
    let hello_len = 4 + serde_json::to_vec(&common::hostile::hello()).unwrap().len();
    assert!(
        slow_bytes.iter().all(|&b| b < hello_len),
        "a hello dribbled 1 byte per 300 ms was read to its end: {slow_bytes:?} of {hello_len}"
    );
    assert!(
        settled.threads <= baseline.threads,
        "threads {settled:?} vs {baseline:?}"
    );
    assert!(
        settled.fds <= baseline.fds,
        "descriptors {settled:?} vs {baseline:?}"
    );
}
