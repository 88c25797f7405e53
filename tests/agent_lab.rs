//! `wirebench agent` on a lab of four hosts, watched by a real Prometheus (Debian's package):
//! the agent on h0 measures servers on h1, h2 and h3; h3's link is slow, long and lossy.
//! Prometheus runs in h0's namespace too and scrapes the agent on h0's loopback every second.
//!
//! Checked: for every target and test, what Prometheus holds for the last run equals the
//! figures of that run as the agent saved it; the slow target's ping-pong latency is above
//! the others'; no two stream runs to one target overlap; and once the regression windows are
//! full, lengthening the slow link's delay (`lab set`) makes the agent report a regression
//! for that target and for no other.
//!
//! Only exact values and lower bounds: no wall-clock time or rate is asserted (the waits are
//! hang guards). Without root, iproute2, nftables or Prometheus the test says `SKIPPED
//! <test>: <reason>` on stderr and returns (a failure with WIREBENCH_REQUIRE_ALL=1).

// Helpers outside #[test] fns fail their test by panicking, as the tests do (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use common::lab::{lab_up, wait_listening, DEFAULT_PORT, SERIAL};
use common::need::{require, Need};
use common::prometheus::{Prometheus, Sample, Scrape};
use serde_json::Value;
use wirebench::model::RunDocument;

const EXE: &str = env!("CARGO_BIN_EXE_wirebench");
/// Ports on h0's loopback: the namespace is the test's own, so every port is free.
const AGENT_METRICS: &str = "127.0.0.1:9465";
const PROMETHEUS_PORT: u16 = 19090;
const TARGETS: [&str; 3] = ["fast1", "fast2", "slow"];
const TESTS: [&str; 2] = ["ping64", "bulk"];
/// The regression windows (config below): a comparison needs this many ping-pong runs.
const BASELINE_RUNS: u32 = 8;
const RECENT_RUNS: u32 = 4;

/// Processes the test started, ended on drop (before the lab goes down, which would end them
/// too).
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The agent's configuration: three targets, a 64-byte TCP ping-pong every second and a
/// 300 ms TCP stream every 3 s to each. The regression threshold is far above what a loaded
/// host does to the fast paths' figures (their windows are measured under the same load) and
/// far below what 40 ms more each way does to the slow path's 11 ms.
///
/// The agent judges a ping-pong by its mean, and on the lossy path each lost segment costs a
/// retransmission timeout (at least 200 ms): with 10 round trips a run's mean one-way time
/// ranged from 11 to 31 ms before the change; with 30 round trips still from 11 to 22 ms,
/// and with windows of 5 and 3 runs the interval of a +127% change reached down to +38%.
/// Windows of 8 and 4 runs and 40 ms more each way (10 -> 50 ms) put the interval's low end
/// well above the threshold.
fn config(addresses: &[String]) -> String {
    let mut s = format!(
        r#"
[agent]
name = "lab-h0"
seed = 31

[regression]
baseline_runs = {BASELINE_RUNS}
recent_runs = {RECENT_RUNS}
threshold_percent = 50.0
confidence = 0.95

[[test]]
name = "ping64"
period = "1s"
[test.run]
pattern = "pingpong"
transport = "tcp"
[test.run.sizes]
size = [64]
[test.run.stop]
iterations = 30

[[test]]
name = "bulk"
period = "3s"
[test.run]
pattern = "stream"
transport = "tcp"
[test.run.stop]
duration = "300ms"
"#
    );
    for (t, a) in TARGETS.iter().zip(addresses) {
        s += &format!(
            "\n[[target]]\nname = \"{t}\"\naddress = \"{a}:{DEFAULT_PORT}\"\nlabels = {{ path = \"{t}\" }}\n"
        );
    }
    s
}

/// Seconds since the epoch of an RFC 3339 time, as the agent computes a run's
/// `wirebench_last_run_timestamp_seconds`.
fn unix_s(t: &str) -> f64 {
    humantime::parse_rfc3339_weak(t)
        .expect("an RFC 3339 time")
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64()
}

fn history(db: &Path) -> Vec<Value> {
    let out = common::run(&[
        "history",
        "--json",
        "--source",
        "agent",
        "-n",
        "100000",
        "--db",
        db.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    let h: Value = serde_json::from_slice(&out.stdout).expect("history --json");
    h["runs"].as_array().expect("runs").clone()
}

/// Samples by (target, the value of label `key`, or "" without one).
fn by_target(samples: &[Sample], key: &str) -> BTreeMap<(String, String), f64> {
    samples
        .iter()
        .map(|(l, v)| {
            (
                (l["target"].clone(), l.get(key).cloned().unwrap_or_default()),
                *v,
            )
        })
        .collect()
}

#[test]
fn agent_on_a_lab_is_what_prometheus_holds_and_a_slowed_link_alone_regresses() {
    if !require(Need::LAB) || !require(&[Need::Prometheus]) {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (lab, _) = lab_up(
        "agl",
        &[
            "--hosts",
            "4",
            "--rate",
            "100mbit",
            "--delay",
            "1ms",
            "--host-link",
            "3=rate=20mbit,delay=10ms,loss=1%",
        ],
    );
    let name = lab.0.clone();
    let st: Value =
        serde_json::from_slice(&common::run(&["lab", "status", "--name", &name, "--json"]).stdout)
            .expect("lab status --json");
    let addresses: Vec<String> = st[0]["lab"]["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["address"].as_str().unwrap().to_owned())
        .collect();
    let h0 = format!("wb-{name}-h0");

    let mut children = Children(Vec::new());
    for (i, a) in addresses.iter().enumerate().skip(1) {
        children.0.push(
            Command::new(EXE)
                .args(["lab", "exec", "--name", &name, &format!("h{i}"), "--"])
                .args([EXE, "serve", "--listen", a, "-q"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        wait_listening(&format!("wb-{name}-h{i}"), DEFAULT_PORT);
    }

    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("agent.toml");
    std::fs::write(&file, config(&addresses[1..])).unwrap();
    let db = dir.path().join("agent.sqlite");
    let log = std::fs::File::create(dir.path().join("agent.log")).unwrap();
    children.0.push(
        Command::new(EXE)
            .args(["lab", "exec", "--name", &name, "h0", "--", EXE, "agent"])
            .args(["--config", file.to_str().unwrap()])
            .args(["--metrics", AGENT_METRICS, "--db", db.to_str().unwrap()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let agent_log = || std::fs::read_to_string(dir.path().join("agent.log")).unwrap_or_default();
    let prom = Prometheus::start_in(
        &h0,
        PROMETHEUS_PORT,
        &[Scrape::new("agent", &[AGENT_METRICS])],
    );

    // Both regression windows of every ping-pong full, and a few streams to every target.
    let enough = |expr: &str, n: u32| {
        prom.wait_for(expr, |r| {
            r.len() == TARGETS.len() && r.iter().all(|(_, v)| *v >= f64::from(n))
        });
    };
    enough(
        "wirebench_runs_total{test=\"ping64\"}",
        BASELINE_RUNS + RECENT_RUNS + 1,
    );
    enough("wirebench_runs_total{test=\"bulk\"}", 3);
    let failures = prom.query("sum(wirebench_run_failures_total)").unwrap();
    assert_eq!(failures[0].1, 0.0, "runs failed:\n{}", agent_log());
    let regressions = prom.query("wirebench_regressions_total").unwrap();
    assert!(
        regressions.iter().all(|(_, v)| *v == 0.0),
        "a regression before any change: {regressions:?}\n{}",
        agent_log()
    );

    // (a) What Prometheus holds at one evaluation time, against the runs as saved.
    let at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        - 1.0;
    let q = |expr: &str, key: &str| by_target(&prom.query_at(expr, at).unwrap(), key);
    let finished: BTreeMap<(String, String), f64> =
        q("wirebench_last_run_timestamp_seconds", "test");
    let latency = q("wirebench_latency_seconds{test=\"ping64\"}", "quantile");
    let throughput = q(
        "wirebench_throughput_bytes_per_second{test=\"bulk\"}",
        "side",
    );
    assert_eq!(finished.len(), TARGETS.len() * TESTS.len(), "{finished:?}");

    let store = wirebench::store::db::Db::open_existing(&db).expect("the agent's database");
    let runs = history(&db);
    let docs: Vec<(Value, RunDocument)> = runs
        .iter()
        .map(|r| {
            let doc = store.load(r["id"].as_i64().unwrap()).expect("its document");
            (r.clone(), doc)
        })
        .collect();
    let mut slow_median = BTreeMap::new();
    for target in TARGETS {
        for test in TESTS {
            let label = format!("{target}/{test}");
            let when = finished[&(target.to_owned(), test.to_owned())];
            let matching: Vec<&RunDocument> = docs
                .iter()
                .filter(|(r, d)| {
                    r["label"] == label.as_str()
                        && d.finished_at.as_deref().map(unix_s) == Some(when)
                })
                .map(|(_, d)| d)
                .collect();
            assert_eq!(matching.len(), 1, "{label}: runs finished at {when}");
            let point = matching[0].points.last().expect("a point");
            if test == "ping64" {
                let rtt = &point.latency.as_ref().expect("latency").rtt;
                // One-way: half the round trip, in seconds, as the exporter says.
                for (quantile, ns) in [
                    ("0.5", rtt.median_ns),
                    ("0.9", rtt.p90_ns),
                    ("0.99", rtt.p99_ns),
                ] {
                    let held = latency[&(target.to_owned(), quantile.to_owned())];
                    assert_eq!(held, ns as f64 * 0.5e-9, "{label} quantile {quantile}");
                }
                slow_median.insert(target, rtt.median_ns);
            } else {
                let totals = &point.stream.as_ref().expect("a stream").totals;
                let sender: f64 = totals.iter().map(|t| t.sender_bits_per_s / 8.0).sum();
                let receiver: f64 = totals.iter().map(|t| t.receiver_bits_per_s / 8.0).sum();
                assert_eq!(
                    throughput[&(target.to_owned(), "sender".to_owned())],
                    sender,
                    "{label}"
                );
                assert_eq!(
                    throughput[&(target.to_owned(), "receiver".to_owned())],
                    receiver,
                    "{label}"
                );
            }
        }
    }
    // (b) 11 ms each way to the slow host, 2 ms to the others: a lower bound keeps it above.
    for fast in ["fast1", "fast2"] {
        assert!(
            slow_median["slow"] > slow_median[fast],
            "median RTTs {slow_median:?}"
        );
    }
    assert!(slow_median["slow"] >= 22_000_000, "{slow_median:?}");

    // (d) The slow link 40 ms longer each way: the agent finds the slow target's ping-pong
    // worse than its baseline, and nothing else.
    let set = common::run(&[
        "lab", "set", "--name", &name, "--link", "h3", "--delay", "50ms",
    ]);
    assert!(
        set.status.success(),
        "{}",
        String::from_utf8_lossy(&set.stderr)
    );
    let found = common::wait_until(common::prometheus::PATIENCE, || {
        prom.query("wirebench_regressions_total{target=\"slow\"} > 0")
            .is_ok_and(|r| !r.is_empty())
    });
    if !found {
        let figures: Vec<String> = history(&db)
            .iter()
            .map(|r| {
                format!(
                    "{} {} latency_ns {} throughput {} regression {}",
                    r["id"],
                    r["label"],
                    r["latency_ns"],
                    r["throughput_bits_per_s"],
                    r["regression"]
                )
            })
            .collect();
        panic!(
            "no regression of the slow target within {:?}; runs, newest first:\n{}\nagent:\n{}",
            common::prometheus::PATIENCE,
            figures.join("\n"),
            agent_log()
        );
    }
    let regressions = by_target(&prom.query("wirebench_regressions_total").unwrap(), "test");
    for ((target, test), n) in &regressions {
        if target != "slow" {
            assert_eq!(*n, 0.0, "{target}/{test} regressed:\n{}", agent_log());
        }
    }

    // Stop the agent before reading what it saved last (the servers with it).
    drop(children);
    drop(prom);
    let runs = history(&db);
    let flagged: Vec<&str> = runs
        .iter()
        .filter(|r| r.get("regression").is_some_and(|g| !g.is_null()))
        .map(|r| r["label"].as_str().unwrap())
        .collect();
    // What the agent found, for a reader of the test's output (--nocapture).
    for r in runs
        .iter()
        .filter(|r| r.get("regression").is_some_and(|g| !g.is_null()))
    {
        eprintln!("run {} {}: {}", r["id"], r["label"], r["regression"]);
    }
    assert!(flagged.contains(&"slow/ping64"), "{flagged:?}");
    assert!(
        flagged.iter().all(|l| l.starts_with("slow/")),
        "{flagged:?}"
    );
    let text = common::run(&[
        "history",
        "--source",
        "agent",
        "-n",
        "100000",
        "--db",
        db.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&text.stdout);
    let marked: Vec<&str> = text.lines().filter(|l| l.contains("REGRESSION")).collect();
    assert!(!marked.is_empty(), "{text}");
    assert!(marked.iter().all(|l| l.contains("slow/")), "{text}");

    // (c) Stream runs to one target never overlap: each starts after the one before it
    // finished (the scheduler's rule is per target).
    for target in TARGETS {
        let mut spans: Vec<(f64, f64)> = runs
            .iter()
            .filter(|r| r["label"] == format!("{target}/bulk"))
            .map(|r| {
                let doc = store.load(r["id"].as_i64().unwrap()).expect("its document");
                let end = doc.finished_at.as_deref().expect("a finished run");
                (unix_s(&doc.started_at), unix_s(end))
            })
            .collect();
        assert!(spans.len() >= 3, "{target}: {spans:?}");
        spans.sort_by(|a, b| a.partial_cmp(b).unwrap());
        for w in spans.windows(2) {
            assert!(w[0].1 <= w[1].0, "{target}: stream runs overlap: {spans:?}");
        }
    }
    drop(lab);
}
