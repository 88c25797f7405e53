//! `--trace`: the pcap a real run writes holds every byte of the data connection exactly
//! once, and wirebench reads its own file back. Needs root (CAP_NET_RAW; the lab test also
//! network namespaces, iproute2 and nftables): without it each test says
//! `SKIPPED <test>: <reason>` on stderr and returns (see common::need).

// Helpers outside #[test] fns fail their test by panicking, as the tests do (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::lab::{lab_run, SERIAL};
use common::need::{require, Need};
use common::{run_json, u};
use serde_json::Value;

/// Bytes the client writes on a data connection before the stream: the test's cookie.
const COOKIE: u64 = 16;

/// The point's trace summary, checked against the file read back with wirebench's own
/// reader; returns the file's single flow.
fn check_file(point: &Value, file: &std::path::Path) -> wirebench::trace::FlowSummary {
    let t = &point["trace"];
    assert_eq!(t["file"], file.display().to_string());
    assert_eq!(u(&t["dropped"]), 0, "the kernel dropped packets: {t}");
    let (packets, segments) = wirebench::trace::read_file(file).unwrap();
    assert_eq!(packets, u(&t["packets"]));
    let flows = wirebench::trace::analyse(&segments);
    assert_eq!(
        flows.len(),
        1,
        "one data connection, the control connection left out"
    );
    let f = flows[0].summary.clone();
    let in_json: wirebench::trace::FlowSummary =
        serde_json::from_value(t["flows"][0].clone()).unwrap();
    assert_eq!(in_json, f, "the JSON summarises the file");
    assert!(f.window_shift.is_some(), "the handshake was captured");
    f
}

#[test]
fn a_loopback_stream_trace_holds_every_byte_once() {
    if !require(&[Need::Root]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("flow.pcap");
    let v = run_json(&[
        "stream",
        "--bytes",
        "8M",
        "-d",
        "10s",
        "--trace",
        file.to_str().unwrap(),
        "--no-save",
    ]);
    let point = &v["points"][0];
    let f = check_file(point, &file);
    let received = u(&point["stream"]["totals"][0]["bytes_received"]);
    // Captured once each (loopback's second copy dropped), retransmissions taken out: the
    // stream the receiver read, plus the cookie.
    assert_eq!(f.unique_data_bytes, received + COOKIE);
    assert_eq!(f.data_bytes - f.repeated_bytes, f.unique_data_bytes);
    assert_eq!(point["trace"]["side"], "client");
}

/// The completeness check of a point: the summary's sender count is the sum of the JSON's
/// senders' own counts (TCP_INFO, read once all was acknowledged), and the file holds every
/// one of those segments, exactly.
fn check_complete(point: &Value) -> u64 {
    let t = &point["trace"];
    let senders: u64 = point["stream"]["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let c = &s["sender"]["sent_segments"];
            assert_eq!(c["settled"], true, "{c}");
            u(&c["data_segs_out"])
        })
        .sum();
    assert!(senders > 0, "{t}");
    assert_eq!(u(&t["sender_data_segments"]), senders, "{t}");
    assert_eq!(u(&t["captured_data_segments"]), senders, "{t}");
    assert_eq!(t["missing_data_segments"], 0, "{t}");
    assert!(t["completeness_note"].is_null(), "{t}");
    senders
}

/// Every time stamp in the file lies between the run's start and end on the wall clock:
/// the ring's stamps are the kernel's real-time nanoseconds.
fn check_stamps(file: &std::path::Path, from_ns: u64, to_ns: u64) {
    let bytes = std::fs::read(file).unwrap();
    let packets = wirebench::trace::pcap::read(&bytes).unwrap();
    assert!(!packets.is_empty());
    for p in &packets {
        assert!(
            (from_ns..=to_ns).contains(&p.t_ns),
            "stamp {} outside [{from_ns}, {to_ns}]",
            p.t_ns
        );
        // Headers only: each record ends where its TCP header does (IPv4 here).
        let ip = usize::from(p.data[0] & 0x0f) * 4;
        let tcp = usize::from(p.data[ip + 12] >> 4) * 4;
        assert_eq!(p.data.len(), ip + tcp, "a record keeps payload");
    }
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// On loopback both ends' frames leave through lo: two parallel client streams, then a
/// reverse stream (the server sends), each with no data segment missing from the file, and
/// the file standard enough for tcpdump where it is installed.
#[test]
fn a_loopback_trace_misses_no_data_segment_the_senders_counted() {
    if !require(&[Need::Root]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (name, extra) in [
        ("two.pcap", &["-P", "2"][..]),
        ("rev.pcap", &["--reverse"][..]),
    ] {
        let file = dir.path().join(name);
        let mut args = vec!["stream", "--bytes", "8M", "-d", "10s"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--trace", file.to_str().unwrap(), "--no-save"]);
        let from = now_ns();
        let v = run_json(&args);
        let to = now_ns();
        let point = &v["points"][0];
        assert_eq!(u(&point["trace"]["dropped"]), 0);
        check_complete(point);
        check_stamps(&file, from, to);
        if let Ok(out) = std::process::Command::new("tcpdump")
            .args(["-nn", "-r", file.to_str().unwrap()])
            .output()
        {
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let lines = String::from_utf8_lossy(&out.stdout).lines().count() as u64;
            assert_eq!(lines, u(&point["trace"]["packets"]));
        }
    }
}

/// Over a 1 Gbit/s lab link, captured on the client (the sender, host a): every data frame
/// the client's TCP counted leaving is in the file.
#[test]
fn a_lab_trace_on_the_senders_side_misses_no_data_segment() {
    if !require(Need::LAB) {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lab1g.pcap");
    let v = lab_run(
        "trg",
        &["--rate", "1G"],
        &[
            "stream",
            "--bytes",
            "16M",
            "-d",
            "20s",
            "--trace",
            file.to_str().unwrap(),
            "--trace-side",
            "client",
            "--no-save",
        ],
    );
    let point = &v["points"][0];
    assert_eq!(point["trace"]["side"], "client");
    let f = check_file(point, &file);
    assert!(f.mss <= 1460, "mss {}", f.mss);
    check_complete(point);
}

/// `--trace` reads the kernel's TCP state per received segment (tcp:tcp_probe) beside the
/// capture, on by default: samples of the data connection's two sockets only (the control
/// connection left out; any other socket on the port is noted), in a sidecar that reads back to the count the JSON gives, joined
/// with the captured connection; `trace show` prints it and `trace plot` draws it. No
/// figure is checked against a time or a rate: only counts, ports and that the kernel's
/// state was there (a congestion window, an RTT).
#[test]
fn a_loopback_trace_reads_tcp_probe_into_a_sidecar() {
    if !require(&[Need::Root, Need::TcpProbe]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.pcap");
    let v = run_json(&[
        "stream",
        "-d",
        "1s",
        "--trace",
        file.to_str().unwrap(),
        "--trace-probe",
        "--no-save",
    ]);
    let point = &v["points"][0];
    let p = &point["trace"]["tcp_probe"];
    assert!(p["unavailable"].is_null(), "tcp_probe unavailable: {p}");
    let n = u(&p["samples"]);
    assert!(n > 0, "no tcp_probe samples: {p}");
    let side = dir.path().join("t.tcp_probe.csv");
    assert_eq!(p["file"], side.display().to_string());
    let samples =
        wirebench::trace::probe::parse_csv(&std::fs::read_to_string(&side).unwrap()).unwrap();
    assert_eq!(samples.len() as u64, n);
    // Every sample is one of the data connection's two sockets.
    let (_, segments) = wirebench::trace::read_file(&file).unwrap();
    let flows = wirebench::trace::analyse(&segments);
    assert_eq!(flows.len(), 1);
    let port = |a: &str| a.parse::<std::net::SocketAddr>().unwrap().port();
    let (s, r) = (
        port(&flows[0].summary.sender),
        port(&flows[0].summary.receiver),
    );
    // Tracepoints are kernel-wide: a socket of another test or namespace that happens to
    // have the port at one end passes the kernel's filter, and the summary must say so.
    let stray = samples
        .iter()
        .filter(|x| (x.sport, x.dport) != (s, r) && (x.sport, x.dport) != (r, s))
        .count();
    if stray > 0 {
        assert!(
            p["notes"]
                .to_string()
                .contains("not among the captured connections"),
            "{stray} samples of another socket, not noted: {p}"
        );
    }
    let sender: Vec<_> = samples.iter().filter(|x| x.sport == s).collect();
    assert!(!sender.is_empty(), "no sample of the sender's socket");
    assert!(sender.iter().all(|x| x.snd_cwnd > 0));
    assert!(sender.iter().any(|x| x.srtt_us > 0));
    let sockets = p["sockets"].as_array().unwrap();
    let k = sockets
        .iter()
        .find(|k| k["role"] == "sender")
        .unwrap_or_else(|| panic!("no sender socket: {p}"));
    assert_eq!(u(&k["local_port"]), u64::from(s));
    assert_eq!(u(&k["samples"]), sender.len() as u64);
    assert!(u(&k["cwnd_min"]) > 0);
    assert!(u(&k["srtt_max_us"]) > 0);
    assert!(u(&k["bytes_acked"]) > 0);
    // Lost samples (a full ring on a loaded machine) are counted, not asserted away.
    let _lost = u(&p["lost"]);

    let show = common::run(&["trace", "show", file.to_str().unwrap()]);
    assert!(show.status.success());
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(
        text.contains(&format!("tcp_probe: {n} samples in ")),
        "{text}"
    );
    let out = dir.path().join("plots");
    let plot = common::run(&[
        "trace",
        "plot",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        plot.status.success(),
        "{}",
        String::from_utf8_lossy(&plot.stderr)
    );
    let listed = String::from_utf8_lossy(&plot.stdout);
    for name in ["cwnd", "srtt", "probe-windows", "snd-una", "outstanding"] {
        let f = out.join(format!("t-{name}.svg"));
        assert!(
            listed.contains(f.to_str().unwrap()),
            "{name} not written: {listed}"
        );
        assert!(std::fs::metadata(&f).unwrap().len() > 0);
    }
    let outstanding = std::fs::read_to_string(out.join("t-outstanding.svg")).unwrap();
    assert!(outstanding.contains("snd_cwnd x MSS"));

    // Without --trace-probe (the default), and with --no-trace-probe: no sidecar, no summary.
    for (name, extra) in [
        ("default.pcap", None),
        ("off.pcap", Some("--no-trace-probe")),
    ] {
        let off = dir.path().join(name);
        let mut args = vec!["stream", "-d", "1s", "--trace", off.to_str().unwrap()];
        args.extend(extra);
        args.push("--no-save");
        let v = run_json(&args);
        assert!(v["points"][0]["trace"]["tcp_probe"].is_null(), "{name}");
        assert!(!off.with_extension("tcp_probe.csv").exists(), "{name}");
    }
}

/// Over a 10 Mbit/s lab link, captured on the server (host b): every byte the receiver read
/// arrived, each counted once, with the MSS of a 1500-byte MTU.
#[test]
fn a_lab_trace_on_the_server_side_holds_every_byte_once() {
    if !require(Need::LAB) {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lab.pcap");
    let probe = common::need::require_for("tcp_probe", &[Need::TcpProbe]);
    let mut args = vec![
        "stream",
        "--bytes",
        "1M",
        "-d",
        "20s",
        "--trace",
        file.to_str().unwrap(),
        "--trace-side",
        "server",
        "--no-save",
    ];
    if probe {
        args.push("--trace-probe");
    }
    let v = lab_run("tr", &["--rate", "10mbit"], &args);
    let point = &v["points"][0];
    assert_eq!(point["trace"]["side"], "server");
    let f = check_file(point, &file);
    let received = u(&point["stream"]["totals"][0]["bytes_received"]);
    assert_eq!(f.unique_data_bytes, received + COOKIE);
    assert!(f.mss_from_syn);
    assert!(f.mss <= 1460, "mss {}", f.mss);
    // The receiver's host sees what arrived: the check is the sender's side's.
    assert!(point["trace"]["missing_data_segments"].is_null());
    let note = point["trace"]["completeness_note"].as_str().unwrap();
    assert!(note.contains("no data sender"), "{note}");
    // tcp_probe is kernel-wide: the lab's two hosts share this kernel, so the sending socket
    // is there though the capture is on the receiver's host, and the summary says why.
    if probe {
        let p = &point["trace"]["tcp_probe"];
        assert!(p["unavailable"].is_null(), "{p}");
        assert!(u(&p["samples"]) > 0, "{p}");
        let roles: Vec<&Value> = p["sockets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| &k["role"])
            .collect();
        assert!(roles.contains(&&Value::from("sender")), "{p}");
        assert!(
            p["notes"].to_string().contains("not per network namespace"),
            "{p}"
        );
    }
}

#[test]
fn a_trace_of_udp_is_refused_in_one_line() {
    let out = common::run(&[
        "run",
        "stream",
        "-t",
        "udp",
        "--trace",
        "/tmp/never.pcap",
        "-d",
        "1s",
        "--no-save",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--transport tcp"), "{err}");
}

/// Without CAP_NET_RAW (root with the capability taken away) the run stops before its first
/// point with one line that says what is missing.
#[test]
fn a_trace_without_cap_net_raw_says_so_in_one_line() {
    if !require(&[Need::Root, Need::Setpriv]) {
        return;
    }
    let out = std::process::Command::new(common::need::SETPRIV)
        .args(["--bounding-set=-net_raw", "--inh-caps=-net_raw"])
        .arg(env!("CARGO_BIN_EXE_wirebench"))
        .args([
            "run",
            "stream",
            "-d",
            "1s",
            "--trace",
            "/tmp/never.pcap",
            "--no-save",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("needs CAP_NET_RAW"), "{err}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["points"].as_array().map(Vec::len), Some(0));
}
