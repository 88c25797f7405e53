//! `wirebench agent` end to end on loopback: two targets (one server under two names), a
//! ping-pong test and a stream test, a few seconds of schedule; then the saved runs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::process::Stdio;

use common::{bin, Server};
use serde_json::Value;

fn config(addr: &str) -> String {
    format!(
        r#"
[agent]
name = "loopback-test"
seed = 7

[[target]]
name = "a"
address = "{addr}"
labels = {{ site = "a" }}

[[target]]
name = "b"
address = "{addr}"

[[test]]
name = "ping64"
period = "1s"
[test.run]
pattern = "pingpong"
[test.run.sizes]
size = [64]
[test.run.stop]
iterations = 200

[[test]]
name = "bulk"
period = "2s"
[test.run]
pattern = "stream"
[test.run.stop]
duration = "300ms"
"#
    )
}

fn unix_ms(t: &str) -> u128 {
    humantime::parse_rfc3339_weak(t)
        .expect("an RFC 3339 time")
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis()
}

#[test]
fn agent_loopback_saves_every_pair_and_never_overlaps_streams_to_one_target() {
    let server = Server::start(&[]);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("agent.toml");
    std::fs::write(&file, config(&server.addr)).expect("config written");
    let file = file.to_str().expect("utf-8 path");
    let data = dir.path().join("data");

    let check = bin()
        .args(["agent", "--config", file, "--check"])
        .env("XDG_DATA_HOME", &data)
        .output()
        .expect("agent --check runs");
    assert!(check.status.success(), "{check:?}");
    let listed = String::from_utf8_lossy(&check.stdout);
    assert!(
        listed.contains("ping64: pingpong over tcp, 64 bytes: every 1s"),
        "{listed}"
    );
    assert!(
        listed.contains("bulk: stream over tcp") && listed.contains("(throughput)"),
        "{listed}"
    );

    let out = bin()
        .args(["agent", "--config", file, "--for", "5s"])
        .env("XDG_DATA_HOME", &data)
        .stdin(Stdio::null())
        .output()
        .expect("agent runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("run failed"), "{stderr}");
    assert!(stderr.contains("seed 7"), "{stderr}");

    let history = bin()
        .args(["history", "--json", "--source", "agent"])
        .env("XDG_DATA_HOME", &data)
        .output()
        .expect("history runs");
    assert!(history.status.success(), "{history:?}");
    let h: Value = serde_json::from_slice(&history.stdout).expect("history --json");
    let runs = h["runs"].as_array().expect("runs");
    let mut per_label: BTreeMap<String, u32> = BTreeMap::new();
    for r in runs {
        assert_eq!(r["source"], "agent");
        assert_eq!(r["complete"], true, "{r}");
        *per_label
            .entry(r["label"].as_str().expect("a label").to_owned())
            .or_default() += 1;
    }
    for label in ["a/ping64", "b/ping64", "a/bulk", "b/bulk"] {
        assert!(
            per_label.get(label).is_some_and(|n| *n >= 1),
            "{label}: {per_label:?}"
        );
    }
    assert_eq!(per_label.len(), 4, "{per_label:?}");

    // Stream runs to one target, from their saved documents: each starts after the one
    // before it finished.
    let db = wirebench::store::db::Db::open_existing(std::path::Path::new(
        h["database"].as_str().expect("the database path"),
    ))
    .expect("the results database opens");
    for target in ["a", "b"] {
        let mut spans: Vec<(u128, u128)> = runs
            .iter()
            .filter(|r| r["label"] == format!("{target}/bulk"))
            .map(|r| {
                let doc = db
                    .load(r["id"].as_i64().expect("an id"))
                    .expect("its document");
                assert_eq!(doc.pattern.name(), "stream");
                // The agent's runs overlap on this host: none read its host-wide counters.
                assert!(
                    doc.points
                        .iter()
                        .all(|p| p.host_cpu.is_none() && p.counters.is_none()),
                    "an agent run read the host's counters"
                );
                let end = doc.finished_at.as_deref().expect("a finished run");
                (unix_ms(&doc.started_at), unix_ms(end))
            })
            .collect();
        spans.sort();
        for w in spans.windows(2) {
            assert!(w[0].1 <= w[1].0, "{target}: stream runs overlap: {spans:?}");
        }
    }
}

#[test]
fn a_bad_agent_config_is_one_line_and_a_failure() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("agent.toml");
    std::fs::write(
        &file,
        "[[target]]\nname = \"a\"\naddress = \"127.0.0.1:1\"\n[[test]]\nname = \"p\"\nperiod = \"1s\"\ntargets = [\"nope\"]\n[test.run]\npattern = \"pingpong\"\n",
    )
    .expect("config written");
    let out = bin()
        .args([
            "agent",
            "--config",
            file.to_str().expect("utf-8"),
            "--check",
        ])
        .output()
        .expect("agent runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("agent.toml") && stderr.contains("no [[target]] named \"nope\""),
        "{stderr}"
    );
}

#[test]
fn probe_loopback_runs_one_test_at_once_and_saves_nothing() {
    use wirebench::metrics::MetricsSource;
    let server = Server::start(&[]);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = wirebench::agent::config::AgentConfig::parse(&config(&server.addr))
        .expect("the config reads");
    let db = dir.path().join("r.db");
    let shared = std::sync::Arc::new(wirebench::agent::Shared::new(config, db.clone()));
    let source = wirebench::agent::Source(std::sync::Arc::clone(&shared));
    let state = source.probe("a", "ping64").expect("the probe runs");
    assert_eq!(
        (state.target.as_str(), state.test.as_str()),
        ("a", "ping64")
    );
    assert_eq!(state.labels.get("site").map(String::as_str), Some("a"));
    assert_eq!(state.size_bytes, 64);
    let last = state.last.expect("its figures");
    assert_eq!(last.run_id, None, "a probe is not saved");
    assert_eq!(last.latency_quantiles.len(), 3);
    assert!(last.latency_quantiles.iter().all(|(_, s)| *s > 0.0));
    // By the target's configured address too (the first target with it); unknown names are
    // one-line errors.
    let by_addr = source
        .probe(&server.addr, "ping64")
        .expect("the probe runs");
    assert_eq!(by_addr.target, "a");
    assert!(source
        .probe("a", "nope")
        .unwrap_err()
        .contains("no [[test]]"));
    assert!(source
        .probe("zz", "ping64")
        .unwrap_err()
        .contains("not a [[target]] of this agent"));
    // Any other address is refused before anything is dialled: a listener of the test's own
    // at another port is never connected to.
    let stranger = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    stranger.set_nonblocking(true).unwrap();
    let elsewhere = stranger.local_addr().unwrap().to_string();
    for module in ["ping64", "bulk"] {
        let why = source.probe(&elsewhere, module).unwrap_err();
        assert!(why.contains("only against its configured targets"), "{why}");
    }
    assert!(
        matches!(stranger.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the agent connected to an address outside its config"
    );
    assert!(!db.exists(), "nothing saved");
    // The snapshot lists every pair, nothing run yet.
    let snap = source.agent().expect("an agent snapshot");
    assert_eq!(snap.tests.len(), 4);
    assert!(snap.tests.iter().all(|t| t.runs_total == 0));
    assert!(source.server().is_none());
}

/// A probe is held to the agent's budgets: over the traffic budget a throughput test is not
/// run (a latency test still is), and a probe takes its pair's place in the pool.
#[test]
fn probes_count_in_the_agents_traffic_budget() {
    use wirebench::metrics::MetricsSource;
    let server = Server::start(&[]);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let text = config(&server.addr).replace(
        "seed = 7\n",
        "seed = 7\ntraffic_budget_bytes_per_s = 1000\n",
    );
    let config = wirebench::agent::config::AgentConfig::parse(&text).expect("the config reads");
    let shared = std::sync::Arc::new(wirebench::agent::Shared::new(
        config,
        dir.path().join("r.db"),
    ));
    let source = wirebench::agent::Source(std::sync::Arc::clone(&shared));
    // 300 ms of stream moves far more than a minute's budget of 60 000 bytes.
    source.probe("a", "bulk").expect("the first stream runs");
    for target in ["a", "b"] {
        let why = source.probe(target, "bulk").unwrap_err();
        assert!(why.contains("over its traffic budget"), "{why}");
    }
    source
        .probe("a", "ping64")
        .expect("a latency probe runs over the traffic budget");
}

/// SIGUSR1 prints the counts and the agent goes on; SIGHUP stops it as SIGTERM does: the
/// runs in progress finish and are saved (both signals once ended it at once, losing them).
/// Every run the closing line counts is in the database.
#[test]
fn sigusr1_prints_counts_and_sighup_stops_after_saving_the_runs_in_progress() {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    use std::io::{BufRead, BufReader};

    let server = Server::start(&[]);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("agent.toml");
    // One stream test of 1 s every 1 s: a run is in progress most of the time.
    std::fs::write(
        &file,
        format!(
            "[agent]\nseed = 5\n[[target]]\nname = \"lo\"\naddress = \"{}\"\n[[test]]\nname = \"bulk\"\nperiod = \"1s\"\n[test.run]\npattern = \"stream\"\n[test.run.stop]\nduration = \"1s\"\n",
            server.addr
        ),
    )
    .expect("config written");
    let db = dir.path().join("agent.db");
    let mut child = bin()
        .args(["agent", "--config", file.to_str().expect("utf-8")])
        .arg("--db")
        .arg(&db)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("agent starts");
    let pid = Pid::from_raw(child.id() as i32);
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().expect("stderr piped");
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let wait_for = |what: &str, lines: &mut Vec<String>| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while std::time::Instant::now() < deadline {
            if let Ok(l) = rx.recv_timeout(std::time::Duration::from_millis(200)) {
                let hit = l.contains(what);
                lines.push(l);
                if hit {
                    return;
                }
            }
        }
        panic!("no line with {what:?} in:\n{}", lines.join("\n"));
    };
    let mut lines = Vec::new();
    wait_for("wirebench agent:", &mut lines);
    // The first run: saved once the database holds a row.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        let n = wirebench::store::db::Db::open_existing(&db)
            .ok()
            .and_then(|d| d.list(&wirebench::store::db::Filter::default()).ok())
            .map_or(0, |r| r.len());
        if n >= 1 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    kill(pid, Signal::SIGUSR1).expect("SIGUSR1 sent");
    wait_for("SIGUSR1: ", &mut lines);
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "SIGUSR1 ended the agent:\n{}",
        lines.join("\n")
    );
    kill(pid, Signal::SIGHUP).expect("SIGHUP sent");
    let status = child.wait().expect("the agent ends");
    // What is left of stderr.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while let Ok(l) = rx.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
    {
        lines.push(l);
    }
    let all = lines.join("\n");
    assert_eq!(status.code(), Some(130), "{all}");
    assert!(
        all.contains("SIGHUP: stopping after the runs in progress"),
        "{all}"
    );
    let closing = lines
        .iter()
        .find(|l| l.starts_with("wirebench agent: stopped after "))
        .unwrap_or_else(|| panic!("no closing line:\n{all}"));
    let counted: usize = closing
        .split(": ")
        .nth(2)
        .and_then(|c| c.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{closing}"));
    assert!(closing.contains(" 0 failed"), "{all}");
    let saved = wirebench::store::db::Db::open_existing(&db)
        .expect("the database")
        .list(&wirebench::store::db::Filter::default())
        .expect("its runs");
    assert_eq!(saved.len(), counted, "{all}");
    assert!(saved.iter().all(|r| r.complete), "{all}");
}
