//! N-host labs (`lab up --hosts N`): a star with one slower, longer link, two switches
//! joined by a trunk, a chain routed through its middle host, and `lab down --all` scoped to
//! the caller's session. Needs root
//! (CI runs as root); every lab has a name of its own and is removed even when a test fails.
//! Checks only what is exact: namespaces, reachability, counts of frames and processes, and
//! round trips no shorter than the configured delays (never an upper bound or a rate).
//! Without root, iproute2 or nftables each test says `SKIPPED <test>: <reason>` on stderr and
//! returns (a failure with WIREBENCH_REQUIRE_ALL=1); WIREBENCH_SKIP_LAB=1 leaves them out as
//! root too.

// Helpers outside #[test] fns fail their test by panicking, as the tests do (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::lab::{lab_up, LabName, SERIAL};
use common::need::{require, Need};
use common::u;
use serde_json::Value;

const EXE: &str = env!("CARGO_BIN_EXE_wirebench");

fn status(name: &str) -> Value {
    let out = common::run(&["lab", "status", "--name", name, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("lab status --json");
    v[0].clone()
}

fn addresses(st: &Value) -> Vec<String> {
    st["lab"]["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["address"].as_str().unwrap().to_owned())
        .collect()
}

fn netns_exists(name: &str, suffix: &str) -> bool {
    Path::new(&format!("/run/netns/wb-{name}-{suffix}")).exists()
}

/// Servers on hosts of a lab, killed on drop (and ended by `lab down` before that).
struct Servers(Vec<Child>);

impl Drop for Servers {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A server on every host, each listening on its host's address; waits until every one is in
/// its namespace's process list.
fn serve_everywhere(name: &str, addrs: &[String]) -> Servers {
    let servers = Servers(
        addrs
            .iter()
            .enumerate()
            .map(|(i, a)| {
                Command::new(EXE)
                    .args(["lab", "exec", "--name", name, &format!("h{i}"), "--"])
                    .args([EXE, "serve", "--listen", a, "-q"])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect(),
    );
    // Entered the namespace is not yet listening: each server is waited for until it listens
    // (a minute without it is a server that never started, not a slow host).
    for i in 0..addrs.len() {
        common::lab::wait_listening(&format!("wb-{name}-h{i}"), common::lab::DEFAULT_PORT);
    }
    servers
}

/// `pingpong -n 5` from host `from` to address `to`: (round trips, shortest RTT in ns).
fn pingpong(name: &str, from: usize, to: &str) -> (u64, u64) {
    let out = common::run(&[
        "lab",
        "exec",
        "--name",
        name,
        &format!("h{from}"),
        "--",
        EXE,
        "run",
        "pingpong",
        "-n",
        "5",
        "--to",
        to,
        "--json",
    ]);
    assert!(
        out.status.success(),
        "h{from} -> {to}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let rtt = &v["points"][0]["latency"]["rtt"];
    (u(&rtt["samples"]), u(&rtt["min_ns"]))
}

/// `lab down --name`, asserted to succeed: what it said on stderr.
fn down(name: &str) -> String {
    let out = common::run(&["lab", "down", "--name", name]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_star_of_four_with_one_slow_long_link() {
    if !require(Need::LAB) {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (name, text) = lab_up(
        "s4",
        &[
            "--hosts",
            "4",
            "--delay",
            "1ms",
            "--host-link",
            "3=rate=10mbit,delay=5ms",
        ],
    );
    let name = &name.0;
    assert!(text.contains("host h3: 10.77.0.4 in netns wb-"), "{text}");
    for h in ["h0", "h1", "h2", "h3", "net"] {
        assert!(netns_exists(name, h), "no namespace {h}");
    }
    let st = status(name);
    let addrs = addresses(&st);
    assert_eq!(addrs, ["10.77.0.1", "10.77.0.2", "10.77.0.3", "10.77.0.4"]);
    let links = &st["lab"]["links"];
    assert_eq!(links.as_array().unwrap().len(), 4);
    assert_eq!(links[3]["name"], "h3");
    assert_eq!(links[3]["mechanism"], "delay-line");
    assert_eq!(links[3]["config"]["forward"]["rate_bits_per_s"], 10e6);
    assert_eq!(u(&links[3]["config"]["back"]["delay_ns"]), 5_000_000);
    assert_eq!(u(&links[0]["config"]["forward"]["delay_ns"]), 1_000_000);
    assert!(links[0]["config"]["forward"]["rate_bits_per_s"].is_null());
    assert_eq!(st["delay_line_running"], true);

    let servers = serve_everywhere(name, &addrs);
    let delay_ms = [1u64, 1, 1, 5];
    let mut round_trips_to_h3 = 0;
    let mut round_trips_from_h3 = 0;
    for i in 0..4 {
        for j in (0..4).filter(|&j| j != i) {
            let (n, min_rtt) = pingpong(name, i, &addrs[j]);
            assert_eq!(n, 5, "h{i} -> h{j}");
            // Out over h_i's link and h_j's, and back: the delay line never releases early.
            let floor = 2 * (delay_ms[i] + delay_ms[j]) * 1_000_000;
            assert!(min_rtt >= floor, "h{i} -> h{j}: RTT {min_rtt} ns < {floor}");
            if j == 3 {
                round_trips_to_h3 += n;
            }
            if i == 3 {
                round_trips_from_h3 += n;
            }
        }
    }
    // Every ping to h3 crossed its link switch -> h3 and its answer h3 -> switch; every
    // ping from h3 the other way round.
    let st = status(name);
    let h3 = &st["links"][3];
    let pings = round_trips_to_h3 + round_trips_from_h3;
    assert!(u(&h3["back"]["frames_out"]) >= pings, "{h3}");
    assert!(u(&h3["forward"]["frames_out"]) >= pings, "{h3}");
    assert_eq!(u(&h3["forward"]["dropped_queue_full"]), 0, "{h3}");

    // Down ends the four servers still running in the hosts, and says so.
    let said = down(name);
    assert!(said.contains("ended 4 processes"), "{said}");
    drop(servers);
    for h in ["h0", "h1", "h2", "h3", "net"] {
        assert!(!netns_exists(name, h), "namespace {h} left");
    }
}

/// `lab set --delay` on a running lab: the state file (`lab status`) holds the new delay at
/// once, and a ping-pong after it takes no less than the new delay, out and back; the other
/// links keep theirs. Bad input is one line and a failure.
#[test]
fn lab_set_lengthens_one_links_delay_while_the_lab_is_up() {
    if !require(Need::LAB) {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (name, _) = lab_up("ls3", &["--hosts", "3", "--delay", "1ms"]);
    let name = &name.0;
    let addrs = addresses(&status(name));
    let _servers = serve_everywhere(name, &addrs);
    let (n, before) = pingpong(name, 0, &addrs[2]);
    assert_eq!(n, 5);
    assert!(before >= 4_000_000, "RTT {before} ns before the change");

    let set = common::run(&[
        "lab", "set", "--name", name, "--link", "h2", "--delay", "30ms",
    ]);
    assert!(
        set.status.success(),
        "{}",
        String::from_utf8_lossy(&set.stderr)
    );
    let said = String::from_utf8_lossy(&set.stdout);
    assert!(said.contains("link h2 set"), "{said}");
    assert!(said.contains("one-way delay 30.0 ms"), "{said}");
    let st = status(name);
    let links = &st["lab"]["links"];
    for dir in ["forward", "back"] {
        assert_eq!(u(&links[2]["config"][dir]["delay_ns"]), 30_000_000);
        assert_eq!(u(&links[1]["config"][dir]["delay_ns"]), 1_000_000);
        assert_eq!(u(&links[0]["config"][dir]["delay_ns"]), 1_000_000);
    }
    // Out over h0's link (1 ms) and h2's (now 30 ms), and back: lower bounds only.
    let (n, after) = pingpong(name, 0, &addrs[2]);
    assert_eq!(n, 5);
    assert!(
        after >= 62_000_000,
        "RTT {after} ns after lab set --delay 30ms"
    );
    // h1's path kept its 1 ms links: it still meets its own lower bound (no upper bound).
    let (n, other) = pingpong(name, 0, &addrs[1]);
    assert_eq!(n, 5);
    assert!(other >= 4_000_000, "RTT {other} ns");

    for (args, want) in [
        (
            vec!["--link", "h7", "--delay", "5ms"],
            "has no link 'h7' (its links: h0, h1, h2)",
        ),
        (vec!["--delay", "5ms"], "name one with --link"),
        (vec!["--link", "h2"], "give what to change"),
        (vec!["--link", "h2", "--jitter", "40ms"], "is above --delay"),
    ] {
        let mut all = vec!["lab", "set", "--name", name.as_str()];
        all.extend(args);
        let out = common::run(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{all:?}");
        assert_eq!(err.trim().lines().count(), 1, "{all:?}: {err}");
        assert!(err.contains(want), "{all:?}: {err}");
    }
    let out = common::run(&["lab", "set", "--name", "nosuchlab9", "--delay", "5ms"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("no lab named 'nosuchlab9'"), "{err}");
}

/// `lab set` on three links of one lab at once, ten rounds: every change is kept (each
/// once lost another's: 18 of 30 rounds), none fails, and no side file is left behind.
#[test]
fn concurrent_lab_sets_keep_every_change() {
    if !require(Need::LAB) {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (name, _) = lab_up("lc3", &["--hosts", "3", "--delay", "1ms"]);
    let name = &name.0;
    for round in 0..10u64 {
        let delays: Vec<u64> = (0..3).map(|i| 2 + round * 3 + i).collect();
        let children: Vec<Child> = (0..3)
            .map(|i| {
                Command::new(EXE)
                    .args(["lab", "set", "--name", name, "--link"])
                    .arg(format!("h{i}"))
                    .arg("--delay")
                    .arg(format!("{}ms", delays[i]))
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for c in children {
            let out = c.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "round {round}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let st = status(name);
        let links = &st["lab"]["links"];
        for (i, d) in delays.iter().enumerate() {
            for dir in ["forward", "back"] {
                assert_eq!(
                    u(&links[i]["config"][dir]["delay_ns"]),
                    d * 1_000_000,
                    "round {round}, link h{i} {dir}"
                );
            }
        }
    }
    let left: Vec<String> = std::fs::read_dir("/run/wirebench/lab")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|f| f.ends_with(".new") && f.contains(name.as_str()))
        .collect();
    assert!(left.is_empty(), "side files left: {left:?}");
}

#[test]
fn a_chain_of_three_routes_through_the_middle_host() {
    if !require(Need::LAB) {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (name, _) = lab_up(
        "c3",
        &[
            "--hosts",
            "3",
            "--topology",
            "chain",
            "--delay",
            "2ms",
            "--host-link",
            "1=delay=3ms",
        ],
    );
    let name = &name.0;
    let st = status(name);
    let addrs = addresses(&st);
    assert_eq!(addrs, ["10.77.1.1", "10.77.1.2", "10.77.2.2"]);
    assert_eq!(st["lab"]["links"][1]["name"], "h1-h2");
    let servers = serve_everywhere(name, &addrs);
    // One-way delay between hosts: the links between them, summed.
    let one_way_ms = |i: usize, j: usize| -> u64 {
        let (lo, hi) = (i.min(j), i.max(j));
        [2u64, 3][lo..hi].iter().sum()
    };
    let mut h0_h2 = 0;
    for i in 0..3 {
        for j in (0..3).filter(|&j| j != i) {
            let (n, min_rtt) = pingpong(name, i, &addrs[j]);
            assert_eq!(n, 5, "h{i} -> h{j}");
            let floor = 2 * one_way_ms(i, j) * 1_000_000;
            assert!(min_rtt >= floor, "h{i} -> h{j}: RTT {min_rtt} ns < {floor}");
            if (i, j) == (0, 2) || (i, j) == (2, 0) {
                h0_h2 += n;
            }
        }
    }
    // h0 <-> h2 crossed both links, each ping and each answer.
    let st = status(name);
    for l in 0..2 {
        for dir in ["forward", "back"] {
            let c = &st["links"][l][dir];
            assert!(u(&c["frames_out"]) >= h0_h2, "link {l} {dir}: {c}");
        }
    }
    drop(servers);
}

#[test]
fn two_switches_joined_by_a_longer_trunk() {
    if !require(Need::LAB) {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (name, _) = lab_up(
        "w4",
        &[
            "--hosts",
            "4",
            "--topology",
            "two-switches",
            "--split",
            "2",
            "--trunk",
            "rate=20mbit,delay=4ms",
        ],
    );
    let name = &name.0;
    let st = status(name);
    let addrs = addresses(&st);
    assert_eq!(addrs, ["10.77.0.1", "10.77.0.2", "10.77.0.3", "10.77.0.4"]);
    let trunk = &st["lab"]["links"][4];
    assert_eq!(trunk["name"], "trunk");
    assert_eq!(trunk["mechanism"], "delay-line");
    // The hosts' own links emulate nothing: bridges.
    assert_eq!(st["lab"]["links"][0]["mechanism"], "bridge");
    let servers = serve_everywhere(name, &addrs);
    let mut across = 0;
    for i in 0..4 {
        for j in (0..4).filter(|&j| j != i) {
            let (n, min_rtt) = pingpong(name, i, &addrs[j]);
            assert_eq!(n, 5, "h{i} -> h{j}");
            if (i < 2) != (j < 2) {
                assert!(min_rtt >= 8_000_000, "h{i} -> h{j}: RTT {min_rtt} ns");
                across += n;
            }
        }
    }
    // Every ping between the switches crossed the trunk, and so did its answer.
    let st = status(name);
    for dir in ["forward", "back"] {
        let c = &st["links"][4][dir];
        assert!(u(&c["frames_out"]) >= across, "trunk {dir}: {c}");
    }
    drop(servers);
}

#[test]
fn down_all_removes_this_sessions_labs_and_leaves_anothers() {
    if !require(Need::LAB) {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (theirs, mine) = (LabName::new("ot"), LabName::new("mi"));
    // Another session's lab: made under setsid, as another terminal or CI job would.
    let other = Command::new("setsid")
        .args(["-w", EXE, "lab", "up", "--name", &theirs.0, "--hosts", "3"])
        .stdout(Stdio::null())
        .output()
        .unwrap();
    assert!(
        other.status.success(),
        "{}",
        String::from_utf8_lossy(&other.stderr)
    );
    // This session's: made and removed with --all in one new session, so that the test
    // touches no lab but its own whatever else runs on the machine. The shell waits up to a
    // minute for the process to be in its namespace (10 s was short for a loaded host to
    // start it; only one that never starts reaches the minute), and the process sleeps for
    // longer than that: `lab down --all` must be what ends it.
    let script = format!(
        "{EXE} lab up --name {} --hosts 3 >/dev/null && {EXE} lab exec --name {} h1 -- sleep 120 & \
         for i in $(seq 600); do ip netns pids wb-{}-h1 2>/dev/null | grep -q . && break; sleep 0.1; done; \
         {EXE} lab down --all",
        mine.0, mine.0, mine.0
    );
    let out = Command::new("setsid")
        .args(["-w", "sh", "-c", &script])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains(&format!("lab {} removed (ended 1 process", mine.0)),
        "{said}"
    );
    assert!(!netns_exists(&mine.0, "h1"));
    // The other session's lab is still there, and named with how to remove it.
    assert!(netns_exists(&theirs.0, "h1"));
    assert!(
        said.contains(&format!("wirebench lab down --name {}", theirs.0)),
        "{said}"
    );
    assert!(said.contains("--all --everyone"), "{said}");
    let st = status(&theirs.0);
    assert_eq!(st["lab"]["hosts"].as_array().unwrap().len(), 3);
    // Its maker as recorded: another session than this test's.
    let this_session = std::fs::read_to_string("/proc/self/stat").unwrap();
    let this_session: u64 = this_session
        .rsplit(')')
        .next()
        .and_then(|rest| rest.split_whitespace().nth(3))
        .and_then(|s| s.parse().ok())
        .unwrap();
    assert_ne!(u(&st["owner"]["sid"]), this_session, "{}", st["owner"]);
    down(&theirs.0);
    assert!(!netns_exists(&theirs.0, "h0"));
}

#[test]
fn n_host_lab_input_errors_are_one_clear_line() {
    if !require(Need::LAB) {
        return;
    }
    for (args, expect) in [
        (vec!["--hosts", "9"], "2 to 8 hosts"),
        (vec!["--hosts", "4", "--host-link", "4=delay=1ms"], "0 to 3"),
        (
            vec!["--hosts", "4", "--host-link", "1=colour=red"],
            "unknown field",
        ),
        (vec!["--hosts", "4", "--host-link", "1=rate=fast"], "--rate"),
        (
            vec!["--hosts", "4", "--topology", "two-switches", "--split", "2"],
            "--trunk",
        ),
        (vec!["--topology", "chain"], "--hosts N"),
    ] {
        let name = LabName::new("er");
        let mut all = vec!["lab", "up", "--name", &name.0];
        all.extend_from_slice(&args);
        let out = common::run(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(expect), "{args:?}: {err}");
        assert!(!netns_exists(&name.0, "h0"), "{args:?} left a namespace");
    }
}
