//! Ground truth: wirebench measured over emulated links whose rate, delay and loss are known.
//! Needs root (CI runs as root): every test builds its own lab in its own network namespaces,
//! sends traffic only between them, and removes them even when it fails.
//! Set WIREBENCH_SKIP_LAB=1 to skip these tests on a machine without root.

mod common;

use std::sync::Mutex;

use common::{f, u};
use serde_json::Value;

/// Lab tests measure rates and delays: they run one at a time so that they do not compete
/// for the CPU with each other.
static SERIAL: Mutex<()> = Mutex::new(());

fn skip() -> bool {
    std::env::var_os("WIREBENCH_SKIP_LAB").is_some()
}

/// A unique lab name per test, removed on drop whatever happened.
struct LabName(String);

impl LabName {
    fn new(tag: &str) -> LabName {
        LabName(format!("t{}{tag}", std::process::id() % 100_000))
    }
}

impl Drop for LabName {
    fn drop(&mut self) {
        let _ = common::run(&["lab", "down", "--name", &self.0]);
    }
}

/// `wirebench lab up --name N LINK...`, asserted to succeed; the lab goes down when the name
/// is dropped. Returns the name and what `lab up` printed.
fn lab_up(tag: &str, link: &[&str]) -> (LabName, String) {
    let name = LabName::new(tag);
    let mut args = vec!["lab", "up", "--name", &name.0];
    args.extend_from_slice(link);
    let up = common::run(&args);
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    let text = String::from_utf8_lossy(&up.stdout).into_owned();
    (name, text)
}

/// `wirebench lab run --name N LINK... -- TEST... --json`, parsed.
fn lab_run(tag: &str, link: &[&str], test: &[&str]) -> Value {
    let name = LabName::new(tag);
    let mut args = vec!["lab", "run", "--name", &name.0];
    args.extend_from_slice(link);
    args.push("--");
    args.extend_from_slice(test);
    args.push("--json");
    let out = common::run(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{args:?} failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The lab removed itself.
    assert!(!std::path::Path::new(&format!("/run/netns/wb-{}-a", name.0)).exists());
    serde_json::from_str(&stdout).expect("one JSON document")
}

fn total(v: &Value) -> &Value {
    &v["points"][0]["stream"]["totals"][0]
}

/// A test run by hand on a lab that is up: server on host b, client on host a, `--json`.
fn run_on_lab(name: &str, test: &[&str]) -> Value {
    let exe = env!("CARGO_BIN_EXE_wirebench");
    let mut server = std::process::Command::new(exe)
        .args([
            "lab",
            "exec",
            "--name",
            name,
            "b",
            "--",
            exe,
            "serve",
            "--listen",
            "10.77.0.2",
            "-q",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut args = vec!["lab", "exec", "--name", name, "a", "--", exe, "run"];
    args.extend_from_slice(test);
    args.extend_from_slice(&["--to", "10.77.0.2", "--json"]);
    let out = common::run(&args);
    let _ = server.kill();
    let _ = server.wait();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

/// UDP datagrams the kernel of namespace `ns` dropped for a full receive buffer so far.
fn udp_receive_buffer_errors(ns: &str) -> u64 {
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", ns, "cat", "/proc/net/snmp"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut udp = text.lines().filter(|l| l.starts_with("Udp:"));
    let (names, values) = (udp.next().unwrap_or(""), udp.next().unwrap_or(""));
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == "RcvbufErrors")
        .and_then(|(_, v)| v.parse().ok())
        .expect("RcvbufErrors in /proc/net/snmp")
}

#[test]
fn tcp_goodput_over_a_shaped_link_matches_the_theory() {
    if skip() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let v = lab_run(
        "tg",
        &["--rate", "100mbit"],
        &["stream", "-d", "3s", "--cc", "cubic", "--rcvbuf", "256K"],
    );
    let t = total(&v);
    let theory = f(&t["theoretical_goodput_bits_per_s"]);
    // 100 Mbit/s x 1448 payload bytes / 1514 frame bytes.
    assert!((theory - 95.6407e6).abs() < 1e3, "theory {theory}");
    let got = f(&t["receiver_bits_per_s"]);
    // High side: tbf meters exactly; its 12.5 kB bucket adds 0.03% over 3 s: 1%. Low side:
    // tbf releases frames from a kernel timer, which on a virtualised host with descheduled
    // CPUs fires late, so the link itself carries less than its rate (seen down to 86% under
    // host load, 99.9% on a quiet host); the exactness of wirebench's own counting is checked
    // against the shaper's counters in the UDP test. The fixed 256 KiB receive buffer keeps
    // the window above the path's tiny BDP and below the shaper's 625 kB queue, so the link
    // never idles for want of data and never drops: 85%.
    assert!(
        got > 0.85 * theory && got < 1.01 * theory,
        "receiver {got} vs {theory}"
    );
    assert_eq!(v["lab"]["mechanism"], "bridge");
}

#[test]
fn udp_above_the_link_rate_is_cut_to_its_goodput_and_the_rest_is_lost() {
    if skip() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // By hand, so that the shaper's own counters can be read before the lab goes down.
    let (name, _) = lab_up("uo", &["--rate", "50mbit"]);
    let overflows_before = udp_receive_buffer_errors(&format!("wb-{}-b", name.0));
    let v = run_on_lab(
        &name.0,
        &[
            "stream", "-t", "udp", "--size", "1400", "--rate", "80M", "-d", "3s", "--rcvbuf", "4M",
        ],
    );
    let overflows = udp_receive_buffer_errors(&format!("wb-{}-b", name.0)) - overflows_before;
    let qdisc = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            &format!("wb-{}-m", name.0),
            "tc",
            "-s",
            "-j",
            "qdisc",
            "show",
            "dev",
            "wbb",
        ])
        .output()
        .unwrap();
    let q: Value = serde_json::from_slice(&qdisc.stdout).expect("tc -j output");
    let shaper_drops = u(&q[0]["drops"]);

    let t = total(&v);
    // Exact ground truth: every datagram wirebench counts as lost was dropped either by the
    // shaper's full queue or by the receiving host's kernel for want of socket buffer (a
    // receiver the host deschedules for long enough), and every such drop is counted. The
    // link loses nothing else, and the warm-up datagrams pass an empty queue.
    assert_eq!(
        u(&t["loss"]["lost"]),
        shaper_drops + overflows,
        "wirebench loss vs tbf drops"
    );
    assert_eq!(
        u(&t["send_failures"]),
        0,
        "the sender's kernel refused nothing"
    );
    // Rate: 50 Mbit/s x 1400 / (1400 + 8 + 20 + 14) bytes per datagram at most. tbf releases
    // frames from a kernel timer; on a virtualised host whose CPUs are descheduled the timer
    // fires late and the link carries less than its rate (seen down to 84% under host load,
    // with tc's own byte counter agreeing with wirebench). So: at most 1% above the theory,
    // at least 80% of it.
    let theory = 50e6 * 1400.0 / 1442.0;
    let got = f(&t["receiver_bits_per_s"]);
    assert!(
        got > 0.80 * theory && got < 1.01 * theory,
        "receiver {got} vs {theory}"
    );
}

#[test]
fn random_loss_agrees_with_the_configured_probability() {
    if skip() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let p = 0.02;
    let v = lab_run(
        "rl",
        &["--loss", "2%"],
        &[
            "stream", "-t", "udp", "--size", "1000", "--rate", "20M", "-d", "3s", "--rcvbuf", "4M",
        ],
    );
    let loss = &total(&v)["loss"];
    let n = u(&loss["sent"]) as f64;
    assert!(n > 7000.0, "sent {n}");
    let observed = u(&loss["lost"]) as f64 / n;
    // Each datagram is dropped independently with probability p: the count is binomial. (The
    // 4 MiB receive buffer keeps a receiver the host deschedules from adding losses of its own.)
    // Four standard errors leave a false alarm once in 16 000 runs.
    let sigma = (p * (1.0 - p) / n).sqrt();
    assert!(
        (observed - p).abs() < 4.0 * sigma,
        "observed {observed}, p {p}, sigma {sigma}"
    );
}

#[test]
fn pingpong_over_a_delayed_link_reports_the_delay() {
    if skip() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Baseline: the same delay line with (almost) no delay, to measure what it and the hosts
    // add by themselves.
    let base = lab_run(
        "pb",
        &["--delay", "1us", "--mechanism", "delay-line"],
        &["pingpong", "-d", "1s"],
    );
    let base_one_way = u(&base["points"][0]["latency"]["rtt"]["median_ns"]) as f64 / 2.0;
    let d = 10e6; // 10 ms in ns
    let v = lab_run("pd", &["--delay", "10ms"], &["pingpong", "-d", "2s"]);
    let one_way = u(&v["points"][0]["latency"]["rtt"]["median_ns"]) as f64 / 2.0;
    // The delay line never releases a frame early, so one-way >= d. Above d + baseline, the
    // only addition is how late the delay line's timer wakes after a 10 ms sleep: under
    // 0.3 ms even on a busy 2-CPU VM; 1 ms of margin.
    assert!(one_way >= d, "one-way {one_way} ns below the delay");
    assert!(
        one_way <= d + base_one_way + 1e6,
        "one-way {one_way} ns vs delay {d} + baseline {base_one_way}"
    );
    assert_eq!(v["lab"]["mechanism"], "delay-line");
}

#[test]
fn small_windows_limit_tcp_to_window_over_rtt_and_autotuning_fills_the_link() {
    if skip() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Fixed 64 KiB receive buffers on a 20 ms RTT path: far below the delay line's bandwidth.
    let v = lab_run(
        "ws",
        &["--delay", "10ms"],
        &["stream", "-d", "3s", "--cc", "cubic", "--rcvbuf", "64K"],
    );
    let s = &v["points"][0]["stream"]["streams"][0];
    let info = &s["sender"]["tcp_info"];
    let window = u(&info["snd_wnd"]) as f64;
    let rtt = u(&info["min_rtt_us"]) as f64 / 1e6;
    assert!(
        window > 0.0 && (0.0195..0.025).contains(&rtt),
        "window {window}, rtt {rtt}"
    );
    let limit = window * 8.0 / rtt;
    let got = f(&s["receiver"]["bits_per_s"]);
    // At most one window per round trip can be in flight, so got <= limit (1% for timing);
    // ACK clocking and delayed ACKs leave a few percent of the window idle: 15% margin.
    assert!(
        got > 0.85 * limit && got < 1.01 * limit,
        "got {got} vs window/RTT {limit}"
    );
    // No automatic wake-up threshold where a socket buffer is fixed: the bytes it holds back
    // would be taken from the window under test.
    assert!(
        s["receiver"]["rcvlowat_bytes"].is_null(),
        "{}",
        s["receiver"]
    );

    // With autotuning (no fixed buffers) on a 100 Mbit/s, 20 ms RTT path, TCP approaches the
    // link's goodput: slow start needs about 10 RTTs (0.2 s, 5%) of a 4 s run, and the
    // shaper's timer may cost up to 10% on a loaded virtual host (see above): >= 80%.
    let v = lab_run(
        "wa",
        &["--rate", "100mbit", "--delay", "10ms"],
        &["stream", "-d", "4s", "--cc", "cubic"],
    );
    let t = total(&v);
    let theory = f(&t["theoretical_goodput_bits_per_s"]);
    let got = f(&t["receiver_bits_per_s"]);
    assert!(
        got > 0.80 * theory && got < 1.01 * theory,
        "got {got} vs {theory}"
    );
    // With autotuning the receiver's automatic wake-up threshold is at most what the link
    // carries in a millisecond (12 500 bytes at 100 Mbit/s; 2x for a burst from tbf's bucket).
    let r = &v["points"][0]["stream"]["streams"][0]["receiver"];
    if let Some(lowat) = r["rcvlowat_bytes"].as_u64() {
        assert!(lowat <= 25_000, "threshold {lowat} B at 100 Mbit/s");
    }
}

#[test]
fn the_automatic_wake_up_threshold_leaves_a_fast_link_s_goodput_alone() {
    if skip() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // 1 Gbit/s with a 2 ms round trip: the threshold holds up to a millisecond of data, half
    // the round trip, in the receive queue; autotuning must grow the window around it.
    let link = ["--rate", "1gbit", "--delay", "1ms"];
    let auto = lab_run("lw", &link, &["stream", "-d", "3s"]);
    let off = lab_run("lo", &link, &["stream", "-d", "3s", "--rcvlowat", "off"]);
    let theory = f(&total(&auto)["theoretical_goodput_bits_per_s"]);
    let lowat =
        |v: &Value| v["points"][0]["stream"]["streams"][0]["receiver"]["rcvlowat_bytes"].clone();
    let set = lowat(&auto)
        .as_u64()
        .expect("a threshold with autotuning and warm-up");
    // A millisecond at 1 Gbit/s is 125 000 bytes; the warm-up's rate is at most the link's.
    assert!((2..=137_500).contains(&set), "threshold {set} B");
    assert!(lowat(&off).is_null());
    for (name, v) in [("auto", &auto), ("off", &off)] {
        let t = total(v);
        let got = f(&t["receiver_bits_per_s"]);
        println!("rcvlowat {name}: {got} bit/s of {theory}");
        assert_eq!(u(&t["bytes_sent"]), u(&t["bytes_received"]), "{name}");
        // The shaper's timer may cost up to 15% on a loaded virtual host (see above).
        assert!(
            got > 0.85 * theory && got < 1.01 * theory,
            "{name}: got {got} vs {theory}"
        );
    }
}

/// The delay line's counters of lab `name`, direction a->b: (frames forwarded, frames dropped),
/// from the first report (it writes one every second) in which it has forwarded at least the
/// `delivered` bytes the receiver got: a report written after the traffic.
fn delay_line_forward(name: &str, delivered: u64) -> (u64, u64) {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let out = common::run(&["lab", "status", "--name", name, "--json"]);
        let v: Value = serde_json::from_slice(&out.stdout).expect("lab status --json");
        let fwd = &v[0]["delay_line"]["forward"];
        let forwarded = fwd["bytes_out"].as_u64().unwrap_or(0);
        if forwarded >= delivered || std::time::Instant::now() > until {
            assert!(
                forwarded >= delivered,
                "the delay line reported {forwarded} bytes out, the receiver got {delivered}"
            );
            return (
                u(&fwd["frames_out"]),
                u(&fwd["dropped_queue_full"]) + u(&fwd["dropped_send"]),
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
}

#[test]
fn the_delay_line_carries_a_gigabit_with_100_ms_delay_in_order() {
    if skip() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // 1 Gbit/s of 1400-byte datagrams, 100 ms of which (12.5 MB) sit in the delay line at any
    // moment. The sender lets 46 datagrams out every 515 us (--pace-burst 46) as one UDP GSO
    // frame, as TCP sends its segments; the delay line carries the frames whole. Paced one
    // datagram at a time, the sender spins between its 11 us slots, most frames hold one
    // datagram (137 530 frames for 178 572 datagrams, measured), and the sender, the delay
    // line and the receiver then share two CPUs so tightly that a hiccup of the CI host lost
    // 7.5% at the receiver. By hand, so that the delay line's and the receiving kernel's
    // counters can say where any loss happened.
    let (name, _) = lab_up("gb", &["--delay", "100ms"]);
    let ns_b = format!("wb-{}-b", name.0);
    let overflows_before = udp_receive_buffer_errors(&ns_b);
    let v = run_on_lab(
        &name.0,
        &[
            "stream",
            "-t",
            "udp",
            "--size",
            "1400",
            "--rate",
            "1G",
            "-d",
            "2s",
            "--rcvbuf",
            "16M",
            "--gso",
            "--pace-burst",
            "46",
        ],
    );
    let overflows = udp_receive_buffer_errors(&ns_b) - overflows_before;
    let t = total(&v);
    let (frames, line_drops) = delay_line_forward(&name.0, u(&t["bytes_received"]));
    let (sent, got) = (f(&t["sender_bits_per_s"]), f(&t["receiver_bits_per_s"]));
    let datagrams = u(&t["loss"]["sent"]);
    println!(
        "sender {sent} bit/s, receiver {got} bit/s, loss {}; delay line: {frames} frames \
         forwarded a->b, {line_drops} dropped; receiving kernel: {overflows} datagrams dropped \
         for a full buffer",
        t["loss"]
    );
    // The paced sender offers the gigabit, in whole bursts. Its interval ends when its last
    // call returns, which a busy two-CPU host can delay: CI once got it back 2.8 ms late
    // (998.6 Mbit/s, every burst sent on time). 1% still tells pacing from an unpaced sender.
    assert!((sent / 1e9 - 1.0).abs() < 1e-2, "sender {sent}");
    assert_eq!(datagrams % 46, 0, "whole bursts: {datagrams} datagrams");
    // One frame per burst (plus the control connection's few): the frames crossed whole.
    assert!(
        frames < datagrams / 46 + 200,
        "{frames} frames for {datagrams} datagrams"
    );
    assert_eq!(line_drops, 0, "the delay line dropped frames");
    // Nearly every datagram arrives; what did not is accounted for.
    assert!(
        f(&t["loss"]["loss_ratio"]) < 0.01,
        "{}; {overflows} dropped by the receiving kernel",
        t["loss"]
    );
    assert!(
        u(&t["loss"]["lost"]) <= overflows,
        "loss not explained by the receiver"
    );
    // The receiver's rate runs from its first to its last read, which on a two-CPU host can
    // trail the last arrival; with nothing lost it read 0.96-1.00 of the offer (CI once
    // 962 Mbit/s). The loss bound above is the tight one.
    assert!(got > 0.92 * sent, "sender {sent}, receiver {got}");
    assert_eq!(
        u(&t["loss"]["reordered"]),
        0,
        "order is kept without jitter"
    );
}

#[test]
fn a_paced_sender_s_warm_up_leaves_no_queue_for_the_timed_phase() {
    if skip() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // 140 Mbit/s of 64000-byte datagrams over a 150 Mbit/s link. A warm-up let out back to
    // back queued at the shaper, and the first timed datagram arrived behind that queue and
    // the next ones at the link's rate while it drained: the receiver's span was short by the
    // queue's time (144.8 Mbit/s received of 140.0 sent in 2 s in the lab where it was found,
    // 139.99 without warm-up). Here 14 warm-up datagrams (896 kB, 48 ms at the link's rate,
    // within the shaper's 50 ms queue) would read about 2% high that way. Paced on the timed
    // phase's schedule, the warm-up leaves no queue, and the receiver cannot read more than
    // the sender sent but for the timing of its first and last arrivals: a receiver held off
    // its CPU for 20 ms as the timed phase began would read 1% high over 2 s, hence 1%.
    let v = lab_run(
        "pw",
        &["--rate", "150mbit"],
        &[
            "stream", "-t", "udp", "--size", "64000", "--rate", "140M", "-d", "2s", "--warmup",
            "14", "--rcvbuf", "4M",
        ],
    );
    let t = total(&v);
    let (sent, got) = (f(&t["sender_bits_per_s"]), f(&t["receiver_bits_per_s"]));
    println!(
        "sender {sent} bit/s, receiver {got} bit/s, loss {}",
        t["loss"]
    );
    assert!(got < 1.01 * sent, "receiver {got} vs sender {sent}");
}

#[test]
fn jitter_reorders_datagrams() {
    if skip() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // 10 000 datagrams/s are 0.1 ms apart; +/- 2 ms of jitter must reorder many of them.
    let v = lab_run(
        "jr",
        &["--delay", "5ms", "--jitter", "2ms"],
        &[
            "stream", "-t", "udp", "--size", "500", "--rate", "10kpps", "-d", "1s",
        ],
    );
    let loss = &total(&v)["loss"];
    assert!(u(&loss["reordered"]) > 100, "{loss}");
    // Nothing is dropped on purpose. But a delay-line thread that the host deschedules for
    // tens of milliseconds then releases everything that fell due at once, and a burst of
    // several hundred frames can overflow the receiving host's backlog (1000 frames) or socket
    // buffer: at most 1% of the 10 000 datagrams.
    assert!(u(&loss["lost"]) <= 100, "{loss}");
    // RFC 3550 jitter of a uniform +/-2 ms delay is of the order of a millisecond.
    let j = f(&loss["jitter_s"]);
    assert!((0.0003..0.004).contains(&j), "jitter {j}");
}

#[test]
fn lab_up_status_exec_down() {
    if skip() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (name, text) = lab_up("lc", &["--profile", "wan"]);
    assert!(
        text.contains("10.77.0.1") && text.contains("10.77.0.2"),
        "{text}"
    );
    assert!(
        text.contains("theoretical TCP goodput a -> b: 95.641 Mbit/s"),
        "{text}"
    );

    // The name is taken now.
    let again = common::run(&["lab", "up", "--name", &name.0]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));

    let st = common::run(&["lab", "status", "--name", &name.0, "--json"]);
    let v: Value = serde_json::from_slice(&st.stdout).unwrap();
    assert_eq!(v[0]["lab"]["mechanism"], "delay-line");
    assert_eq!(v[0]["delay_line_running"], true);
    assert_eq!(
        u(&v[0]["lab"]["config"]["forward"]["delay"]["nanos"])
            + 1_000_000_000 * u(&v[0]["lab"]["config"]["forward"]["delay"]["secs"]),
        20_000_000
    );

    // A measurement between the two hosts by hand: server on b, client on a.
    let v = run_on_lab(&name.0, &["pingpong", "-n", "20"]);
    let rtt = f(&v["points"][0]["latency"]["rtt"]["mean_ns"]);
    assert!(rtt > 40e6, "wan profile: 20 ms each way, got RTT {rtt} ns");

    let bad = common::run(&["lab", "exec", "--name", &name.0, "c", "--", "true"]);
    assert!(!bad.status.success());

    let down = common::run(&["lab", "down", "--name", &name.0]);
    assert!(down.status.success());
    assert!(!std::path::Path::new(&format!("/run/netns/wb-{}-a", name.0)).exists());
    assert!(!std::path::Path::new(&format!("/run/netns/wb-{}-m", name.0)).exists());
}

#[test]
fn lab_input_errors_are_one_clear_line() {
    if skip() {
        return;
    }
    for (args, needle) in [
        (&["lab", "up", "--name", "Bad_Name"][..], "lab name"),
        (
            &["lab", "up", "--name", "x", "--rate", "10pps"][..],
            "bits per second",
        ),
        (&["lab", "up", "--name", "x", "--mtu", "20"][..], "MTU"),
        (
            &["lab", "run", "--", "pingpong", "--to", "1.2.3.4"][..],
            "drop --to",
        ),
        (
            &["lab", "status", "--name", "nosuchlab"][..],
            "no lab named",
        ),
    ] {
        let out = common::run(args);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn lab_as_an_ordinary_user_says_it_needs_root() {
    if skip() || !std::path::Path::new("/usr/bin/setpriv").exists() {
        return;
    }
    // Drop to uid/gid 65534 (nobody) with no capabilities for this one command.
    let out = std::process::Command::new("/usr/bin/setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(env!("CARGO_BIN_EXE_wirebench"))
        .args(["lab", "up", "--name", "nobody"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("needs root"), "{err}");
}

#[test]
fn mptcp_where_the_kernel_refuses_it_is_one_clear_line() {
    if skip() {
        return;
    }
    // A namespace of our own where MPTCP is switched off (the sysctl is per namespace).
    let ns = format!("wb-t{}-nomptcp", std::process::id() % 100_000);
    struct Ns(String);
    impl Drop for Ns {
        fn drop(&mut self) {
            let _ = std::process::Command::new("ip")
                .args(["netns", "del", &self.0])
                .status();
        }
    }
    assert!(std::process::Command::new("ip")
        .args(["netns", "add", &ns])
        .status()
        .unwrap()
        .success());
    let _guard = Ns(ns.clone());
    let sh = |args: &[&str]| {
        std::process::Command::new("ip")
            .args(["netns", "exec", &ns])
            .args(args)
            .output()
            .unwrap()
    };
    sh(&["ip", "link", "set", "lo", "up"]);
    assert!(sh(&["sysctl", "-w", "net.mptcp.enabled=0"])
        .status
        .success());
    let out = sh(&[
        env!("CARGO_BIN_EXE_wirebench"),
        "run",
        "pingpong",
        "-t",
        "mptcp",
        "-n",
        "10",
        "--no-save",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("does not offer MPTCP"), "{err}");
}

#[test]
fn raw_ethernet_reports_the_links_loss_per_frame_and_per_message() {
    if skip() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let p: f64 = 0.05;
    // Without warm-up every message is one the pattern counts, so that its figures and the
    // frames' (which count every frame of the connection) can be held against each other.
    let v = lab_run(
        "rw",
        &["--loss", "5%"],
        &[
            "stream",
            "-t",
            "raw",
            "--size",
            "1400,4000",
            "--rate",
            "40M",
            "-d",
            "3s",
            "--rcvbuf",
            "4M",
            "--server-rcvbuf",
            "4M",
            "--warmup",
            "0",
        ],
    );
    // 1400 bytes fit one 1500-byte frame; 4000 bytes take three (1476 message bytes per frame),
    // and a message missing any frame is dropped whole: 1 - 0.95^3 = 14.3% of them.
    for (i, frames) in [(0, 1u64), (1, 3)] {
        let t = &v["points"][i]["stream"]["totals"][0];
        let loss = &t["loss"];
        let n = u(&loss["sent"]) as f64;
        assert!(n > 3000.0, "sent {n}");
        let expect = 1.0 - (1.0 - p).powi(frames as i32);
        let observed = u(&loss["lost"]) as f64 / n;
        let sigma = (expect * (1.0 - expect) / n).sqrt();
        assert!(
            (observed - expect).abs() < 4.0 * sigma,
            "{frames} frame(s) per message: observed {observed}, expected {expect}, sigma {sigma}"
        );

        // The frames: each is lost with p, whatever the message it belongs to.
        let fr = &t["frames"];
        eprintln!("{frames} frame(s) per message: messages {loss}, frames {fr}");
        let (received, lost) = (u(&fr["received"]), u(&fr["lost"]));
        let all = (received + lost) as f64;
        let observed = lost as f64 / all;
        let sigma = (p * (1.0 - p) / all).sqrt();
        assert!(
            (observed - p).abs() < 4.0 * sigma,
            "{frames} frame(s) per message: frame loss {observed}, expected {p}, sigma {sigma}: {fr}"
        );
        assert!((f(&fr["loss_ratio"]) - observed).abs() < 1e-12, "{fr}");
        // Random loss neither reorders nor duplicates.
        for k in ["reordered", "duplicated", "late"] {
            assert_eq!(u(&fr[k]), 0, "{k}: {fr}");
        }
        // Every frame sent was received, or lost in a gap, or lost after the last frame that
        // arrived (a tail, which leaves no gap: k frames with probability 0.05^k). Nothing was
        // refused by the sender's kernel, so the frames sent are the messages' frames.
        assert_eq!(u(&t["send_failures"]), 0);
        let sent_frames = frames * u(&loss["sent"]);
        assert!(received + lost <= sent_frames, "{fr} of {sent_frames}");
        let tail = sent_frames - received - lost;
        assert!(tail < 6, "{tail} frames lost at the end: {fr}");
        let (messages_lost, incomplete) = (u(&loss["lost"]), u(&fr["messages_incomplete"]));
        if frames == 1 {
            // One frame per message: the frames that arrived are the messages that did, and
            // the frames lost are the messages lost but for the tail.
            assert_eq!(received, u(&loss["received"]), "{fr} vs {loss}");
            assert_eq!(lost + tail, messages_lost, "{fr} vs {loss}");
            assert_eq!(incomplete, 0);
        } else {
            // A message lost is incomplete (some of its frames came) or lost whole, which
            // 0.05^3 of them are: 0.5 expected in the ~3700 messages, 6 or more with
            // probability < 1e-5.
            assert!(incomplete <= messages_lost, "{fr} vs {loss}");
            assert!(messages_lost - incomplete < 6, "{fr} vs {loss}");
        }
    }
}

#[test]
fn raw_ethernet_counts_the_frames_that_jitter_reorders_and_none_without() {
    if skip() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // 10 000 one-frame messages a second are 0.1 ms apart; +/- 2 ms of jitter must reorder
    // many of them. No loss is configured.
    let stream = [
        "stream", "-t", "raw", "--size", "500", "--rate", "10kpps", "-d", "1s", "--warmup", "0",
    ];
    // The totals' frames and messages, printed for the record.
    let counts = |v: &Value, what: &str| {
        let t = total(v);
        let (fr, loss) = (t["frames"].clone(), t["loss"].clone());
        eprintln!(
            "{what} ({}): messages {loss}, frames {fr}",
            v["lab"]["mechanism"]
        );
        (fr, loss)
    };
    let v = lab_run("rj", &["--delay", "5ms", "--jitter", "2ms"], &stream);
    let (fr, loss) = counts(&v, "with jitter");
    assert!(u(&fr["reordered"]) > 100, "{fr}");
    assert_eq!(u(&fr["duplicated"]), 0, "{fr}");
    // Nothing is dropped on purpose; but as in the UDP jitter test, a delay line that the
    // host deschedules can release a burst that overflows the receiving host: at most 1%.
    assert!(u(&fr["lost"]) <= 100, "{fr}");
    // A one-frame message that comes after a later one is whole: it is delivered, as a late
    // UDP datagram is, and the pattern counts it reordered, not lost. So the link's frames
    // and the pattern's messages tell the same story.
    assert_eq!(u(&fr["late"]), 0, "{fr}");
    assert_eq!(u(&loss["received"]), u(&fr["received"]), "{fr} vs {loss}");
    assert_eq!(u(&loss["reordered"]), u(&fr["reordered"]), "{fr} vs {loss}");
    assert_eq!(u(&loss["lost"]), u(&fr["lost"]), "{fr} vs {loss}");
    assert_eq!(u(&fr["messages_incomplete"]), 0, "{fr}");

    // The same delay without jitter keeps the frames in order.
    let v = lab_run("rd", &["--delay", "5ms"], &stream);
    let (fr, loss) = counts(&v, "without jitter");
    assert!(u(&fr["received"]) > 9000, "{fr}");
    for k in ["reordered", "duplicated", "late", "messages_incomplete"] {
        assert_eq!(u(&fr[k]), 0, "{k}: {fr}");
    }
    assert!(u(&fr["lost"]) <= 100, "{fr}");
    assert_eq!(u(&loss["received"]), u(&fr["received"]), "{fr} vs {loss}");
}

#[test]
fn raw_ethernet_fills_a_shaped_link_to_its_goodput() {
    if skip() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let v = lab_run(
        "rg",
        &["--rate", "100M"],
        &[
            "stream",
            "-t",
            "raw",
            "--size",
            "4000",
            "--rate",
            "120M",
            "-d",
            "2s",
            "--rcvbuf",
            "4M",
            "--server-rcvbuf",
            "4M",
        ],
    );
    let t = total(&v);
    let theory = f(&t["theoretical_goodput_bits_per_s"]);
    // 3 frames of 38 header bytes per 4000-byte message: 97.23 Mbit/s of payload.
    assert!((theory - 100e6 * 4000.0 / 4114.0).abs() < 1e3, "{theory}");
    let got = f(&t["receiver_bits_per_s"]);
    // The shaper's own delivery varies under host load (see the TCP rate test).
    assert!(
        got > 0.85 * theory && got < 1.01 * theory,
        "receiver {got} vs {theory}"
    );
}
