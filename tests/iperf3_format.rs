//! `export --format iperf3` against iperf3 itself: a real iperf3 client and server on loopback
//! give the ground truth of the fields a consumer of iperf3's JSON reads, and a wirebench
//! stream exported in that format must have every one of them, of the same JSON type, and read
//! through the same consumer code to wirebench's own receiver rate.

// Helpers outside #[test] fns fail their test by panicking, as the tests do (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use common::need::{require, Need};
use serde_json::Value;

/// The fields of a TCP `iperf3 -c ... -J` document that tools reading it (perfSONAR,
/// iperf3_exporter, dashboards) use, as paths with arrays collapsed to `[]`. Not here: the
/// local address and port and the data connections' remote port, which wirebench does not
/// record (the exporter leaves them out rather than make them up).
const CONSUMED: &[&str] = &[
    "start.connected[].remote_host",
    "start.version",
    "start.system_info",
    "start.timestamp.time",
    "start.timestamp.timesecs",
    "start.connecting_to.host",
    "start.connecting_to.port",
    "start.test_start.protocol",
    "start.test_start.num_streams",
    "start.test_start.blksize",
    "start.test_start.omit",
    "start.test_start.duration",
    "start.test_start.bytes",
    "start.test_start.blocks",
    "start.test_start.reverse",
    "intervals[].streams[].start",
    "intervals[].streams[].end",
    "intervals[].streams[].seconds",
    "intervals[].streams[].bytes",
    "intervals[].streams[].bits_per_second",
    "intervals[].streams[].retransmits",
    "intervals[].streams[].omitted",
    "intervals[].streams[].sender",
    "intervals[].sum.start",
    "intervals[].sum.end",
    "intervals[].sum.seconds",
    "intervals[].sum.bytes",
    "intervals[].sum.bits_per_second",
    "intervals[].sum.retransmits",
    "intervals[].sum.omitted",
    "intervals[].sum.sender",
    "end.streams[].sender.seconds",
    "end.streams[].sender.bytes",
    "end.streams[].sender.bits_per_second",
    "end.streams[].sender.retransmits",
    "end.streams[].receiver.seconds",
    "end.streams[].receiver.bytes",
    "end.streams[].receiver.bits_per_second",
    "end.sum_sent.start",
    "end.sum_sent.end",
    "end.sum_sent.seconds",
    "end.sum_sent.bytes",
    "end.sum_sent.bits_per_second",
    "end.sum_sent.retransmits",
    "end.sum_sent.sender",
    "end.sum_received.start",
    "end.sum_received.end",
    "end.sum_received.seconds",
    "end.sum_received.bytes",
    "end.sum_received.bits_per_second",
    "end.cpu_utilization_percent.host_total",
    "end.cpu_utilization_percent.host_user",
    "end.cpu_utilization_percent.host_system",
    "end.cpu_utilization_percent.remote_total",
    "end.cpu_utilization_percent.remote_user",
    "end.cpu_utilization_percent.remote_system",
];

/// Every leaf of `v` by path (arrays collapsed to `[]`), with its JSON kind: "string",
/// "bool", "integer" (a whole number, as iperf3 writes bytes and counts) or "number".
fn leaves(v: &Value, path: &str, out: &mut BTreeMap<String, &'static str>) {
    let kind = match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                leaves(x, &p, out);
            }
            return;
        }
        Value::Array(a) => {
            for x in a {
                leaves(x, &format!("{path}[]"), out);
            }
            return;
        }
        Value::String(_) => "string",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_u64() || n.is_i64() => "integer",
        Value::Number(_) => "number",
        Value::Null => "null",
    };
    // A float that happens to be whole reads back as a number either way: the weaker kind.
    let slot = out.entry(path.to_owned()).or_insert(kind);
    if *slot != kind && (*slot == "number" || kind == "number") {
        *slot = "number";
    }
}

/// What a consumer of iperf3's JSON takes from a result, read as iperf3_exporter and
/// perfSONAR's pscheduler read it: a missing field or one of another type is an error.
#[derive(Debug)]
struct Consumed {
    received_bits_per_s: f64,
    sent_bits_per_s: f64,
    interval_bits_per_s: Vec<f64>,
    streams: u64,
    host_cpu_percent: f64,
}

fn consume(doc: &Value) -> Result<Consumed, String> {
    let num = |v: &Value, what: &str| v.as_f64().ok_or_else(|| format!("{what}: not a number"));
    let end = &doc["end"];
    let intervals = doc["intervals"]
        .as_array()
        .ok_or("intervals: not an array")?;
    Ok(Consumed {
        received_bits_per_s: num(
            &end["sum_received"]["bits_per_second"],
            "end.sum_received.bits_per_second",
        )?,
        sent_bits_per_s: num(
            &end["sum_sent"]["bits_per_second"],
            "end.sum_sent.bits_per_second",
        )?,
        interval_bits_per_s: intervals
            .iter()
            .map(|i| {
                num(
                    &i["sum"]["bits_per_second"],
                    "intervals[].sum.bits_per_second",
                )
            })
            .collect::<Result<_, _>>()?,
        streams: doc["start"]["test_start"]["num_streams"]
            .as_u64()
            .ok_or("start.test_start.num_streams: not an integer")?,
        host_cpu_percent: num(
            &end["cpu_utilization_percent"]["host_total"],
            "end.cpu_utilization_percent.host_total",
        )?,
    })
}

/// A child process killed and reaped on drop.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A port nobody listens on at the moment of asking.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// One second of `iperf3 -J` (with `extra` arguments) over loopback against a one-off
/// `iperf3 -s -1`. The tests that call it take turns (one iperf3 pair at a time, so that two
/// one-off servers never race for a port), and a document that says it failed (an `error`,
/// no connection) is measured again with a new server, up to three times.
fn iperf3_document(extra: &[&str]) -> Value {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut failures = Vec::new();
    for _ in 0..3 {
        match iperf3_once(extra) {
            Ok(doc) => return doc,
            Err(e) => failures.push(e),
        }
    }
    panic!("iperf3 -c failed three times:\n{}", failures.join("\n"));
}

fn iperf3_once(extra: &[&str]) -> Result<Value, String> {
    let port = free_port().to_string();
    let _server = Reaped(
        Command::new("iperf3")
            .args(["-s", "-1", "-p", &port])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("iperf3 -s starts"),
    );
    // The server listens once it has started: the client is tried until it gets through (a
    // refused connection never reaches the one-off server).
    for _ in 0..100 {
        let out = Command::new("iperf3")
            .args(["-c", "127.0.0.1", "-p", &port, "-t", "1", "-J"])
            .args(extra)
            .stdin(Stdio::null())
            .output()
            .expect("iperf3 -c runs");
        let text = String::from_utf8_lossy(&out.stdout);
        // iperf3 3.12 with -J may exit 0 on a refused connection, its error in the document:
        // the server is not listening yet, so the client tries again.
        if text.contains("unable to connect") {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        if out.status.success() {
            let doc: Value = serde_json::from_slice(&out.stdout).expect("iperf3 -J is JSON");
            let connected = doc["start"]["connected"]
                .as_array()
                .is_some_and(|c| !c.is_empty());
            if connected && doc.get("error").is_none() {
                return Ok(doc);
            }
            return Err(format!("iperf3 -c said it succeeded but: {text}"));
        }
        return Err(format!("{}\n{text}", String::from_utf8_lossy(&out.stderr)));
    }
    Err("iperf3 -s never accepted a connection".into())
}

fn wb(args: &[&str]) -> Output {
    common::bin()
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("wirebench runs")
}

fn ok(args: &[&str]) -> String {
    let out = wb(args);
    assert!(
        out.status.success(),
        "wirebench {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn a_wirebench_stream_exports_what_iperf3_consumers_read() {
    if !require(&[Need::Iperf3]) {
        return;
    }
    let truth = iperf3_document(&[]);
    let mut theirs = BTreeMap::new();
    leaves(&truth, "", &mut theirs);
    // The list is iperf3's own: a field it does not write has no place in it.
    for path in CONSUMED {
        assert!(
            theirs.contains_key(*path),
            "iperf3 {} does not write {path}",
            truth["start"]["version"]
        );
    }
    let read = consume(&truth).unwrap();
    assert_eq!(read.streams, 1);
    assert!(read.received_bits_per_s > 0.0 && read.sent_bits_per_s > 0.0);

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.sqlite");
    let db = db.to_str().unwrap();
    let own: Value = serde_json::from_str(&ok(&[
        "run", "stream", "-d", "1s", "-i", "0.25s", "--db", db, "--json",
    ]))
    .unwrap();
    let exported = ok(&["export", "last", "--format", "iperf3", "--db", db]);
    let ours: Value = serde_json::from_str(&exported).unwrap();
    let mut mine = BTreeMap::new();
    leaves(&ours, "", &mut mine);
    for path in CONSUMED {
        let (want, got) = (theirs[*path], mine.get(*path).copied());
        // A float field (seconds, rates) may come out whole on either side.
        let numeric = |k: &str| k == "integer" || k == "number";
        let same = got == Some(want) || (numeric(want) && got.is_some_and(numeric));
        assert!(
            same,
            "{path}: iperf3 writes {want}, the export {got:?}\n{exported}"
        );
    }
    // Bytes and counts are integers, as iperf3's.
    for path in [
        "end.sum_received.bytes",
        "end.sum_sent.bytes",
        "intervals[].sum.bytes",
        "start.test_start.num_streams",
    ] {
        assert_eq!(mine[path], "integer", "{path}");
    }

    let read = consume(&ours).unwrap();
    let total = &own["points"][0]["stream"]["totals"][0];
    assert_eq!(
        read.received_bits_per_s,
        total["receiver_bits_per_s"].as_f64().unwrap()
    );
    assert_eq!(
        read.sent_bits_per_s,
        total["sender_bits_per_s"].as_f64().unwrap()
    );
    assert_eq!(read.streams, 1);
    assert!(!read.interval_bits_per_s.is_empty());
    assert!(read.host_cpu_percent > 0.0);
    assert_eq!(ours["start"]["test_start"]["protocol"], "TCP");

    // A run of another pattern is refused in one line that names the way out.
    ok(&["run", "pingpong", "-n", "200", "--db", db]);
    let out = wb(&["export", "last", "--format", "iperf3", "--db", db]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("use --format json"), "{err}");
}

/// What a bidirectional run adds to the fields a consumer reads: the server's direction summed
/// apart, in the intervals and at the end (iperf3 3.12 writes no `test_start.bidir`; later
/// versions do, and the export writes it).
const CONSUMED_BIDIR: &[&str] = &[
    "intervals[].sum_bidir_reverse.bits_per_second",
    "intervals[].sum_bidir_reverse.bytes",
    "intervals[].sum_bidir_reverse.sender",
    "end.sum_sent_bidir_reverse.bits_per_second",
    "end.sum_sent_bidir_reverse.bytes",
    "end.sum_sent_bidir_reverse.retransmits",
    "end.sum_sent_bidir_reverse.sender",
    "end.sum_received_bidir_reverse.bits_per_second",
    "end.sum_received_bidir_reverse.bytes",
    "end.sum_received_bidir_reverse.sender",
    "end.streams[].sender.sender",
    "end.streams[].receiver.sender",
];

/// A bidirectional run read as a consumer of iperf3's JSON reads one: each direction's
/// receiver rate, the streams per direction, and which streams the client sent.
#[derive(Debug, PartialEq)]
struct Bidir {
    received: f64,
    received_reverse: f64,
    num_streams: u64,
    /// `end.streams[]` the client sent, and those it received.
    client_sent: usize,
    client_received: usize,
    /// Streams in each interval, every interval.
    interval_streams: Vec<usize>,
}

fn consume_bidir(doc: &Value) -> Bidir {
    let end = &doc["end"];
    let streams = end["streams"].as_array().expect("end.streams");
    let sent = streams
        .iter()
        .filter(|s| s["sender"]["sender"].as_bool().expect("sender.sender"))
        .count();
    Bidir {
        received: end["sum_received"]["bits_per_second"].as_f64().unwrap(),
        received_reverse: end["sum_received_bidir_reverse"]["bits_per_second"]
            .as_f64()
            .unwrap(),
        num_streams: doc["start"]["test_start"]["num_streams"].as_u64().unwrap(),
        client_sent: sent,
        client_received: streams.len() - sent,
        interval_streams: doc["intervals"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["streams"].as_array().map_or(0, Vec::len))
            .collect(),
    }
}

#[test]
fn a_parallel_bidirectional_stream_exports_as_iperf3_writes_one() {
    if !require(&[Need::Iperf3]) {
        return;
    }
    let truth = iperf3_document(&["-P", "2", "--bidir"]);
    let mut theirs = BTreeMap::new();
    leaves(&truth, "", &mut theirs);
    for path in CONSUMED.iter().chain(CONSUMED_BIDIR) {
        assert!(theirs.contains_key(*path), "iperf3 does not write {path}");
    }
    let read = consume_bidir(&truth);
    assert_eq!(
        (read.num_streams, read.client_sent, read.client_received),
        (2, 2, 2)
    );
    assert!(read.interval_streams.iter().all(|n| *n == 4), "{read:?}");

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.sqlite");
    let db = db.to_str().unwrap();
    let own: Value = serde_json::from_str(&ok(&[
        "run", "stream", "-P", "2", "--bidir", "-d", "1s", "-i", "0.25s", "--db", db, "--json",
    ]))
    .unwrap();
    let exported = ok(&["export", "last", "--format", "iperf3", "--db", db]);
    let ours: Value = serde_json::from_str(&exported).unwrap();
    let mut mine = BTreeMap::new();
    leaves(&ours, "", &mut mine);
    for path in CONSUMED.iter().chain(CONSUMED_BIDIR) {
        let (want, got) = (theirs[*path], mine.get(*path).copied());
        let numeric = |k: &str| k == "integer" || k == "number";
        let same = got == Some(want) || (numeric(want) && got.is_some_and(numeric));
        assert!(
            same,
            "{path}: iperf3 writes {want}, the export {got:?}\n{exported}"
        );
    }
    let got = consume_bidir(&ours);
    assert_eq!(
        (got.num_streams, got.client_sent, got.client_received),
        (2, 2, 2),
        "{exported}"
    );
    // Every interval but the last holds all four streams; wirebench cuts each stream's last
    // interval where that stream's phase ended and makes up no figure for a stream that had
    // already stopped, so the last may hold only one direction's.
    let n = got.interval_streams.len();
    assert!(n >= 2, "{got:?}");
    assert!(
        got.interval_streams[..n - 1].iter().all(|k| *k == 4),
        "{got:?}"
    );
    assert!(matches!(got.interval_streams[n - 1], 2 | 4), "{got:?}");
    // Each direction's receiver rate is wirebench's own for that direction.
    let totals = own["points"][0]["stream"]["totals"].as_array().unwrap();
    let rate = |dir: &str| {
        totals
            .iter()
            .find(|t| t["direction"] == dir)
            .and_then(|t| t["receiver_bits_per_s"].as_f64())
            .unwrap()
    };
    assert_eq!(got.received, rate("client_to_server"));
    assert_eq!(got.received_reverse, rate("server_to_client"));
}
