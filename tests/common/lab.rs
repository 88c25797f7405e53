//! Lab helpers shared by the tests that measure over emulated links (tests/lab.rs,
//! tests/truth.rs): unique lab names removed on drop, `lab up`/`lab run`, a server on host b,
//! and the lab's and the kernel's own counters. A lab test first asks for what a lab needs:
//! `if !common::need::require(Need::LAB) { return; }`.

use std::sync::Mutex;

use serde_json::Value;

use super::u;

/// Lab tests measure rates and delays: they run one at a time so that they do not compete
/// for the CPU with each other (within one test binary; cargo runs the binaries in turn).
pub static SERIAL: Mutex<()> = Mutex::new(());

/// A unique lab name per test, removed on drop whatever happened.
pub struct LabName(pub String);

impl LabName {
    pub fn new(tag: &str) -> LabName {
        LabName(format!("t{}{tag}", std::process::id() % 100_000))
    }
}

impl Drop for LabName {
    fn drop(&mut self) {
        let _ = super::run(&["lab", "down", "--name", &self.0]);
    }
}

/// `wirebench lab up --name N LINK...`, asserted to succeed; the lab goes down when the name
/// is dropped. Returns the name and what `lab up` printed.
pub fn lab_up(tag: &str, link: &[&str]) -> (LabName, String) {
    let name = LabName::new(tag);
    let mut args = vec!["lab", "up", "--name", &name.0];
    args.extend_from_slice(link);
    let up = super::run(&args);
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    let text = String::from_utf8_lossy(&up.stdout).into_owned();
    (name, text)
}

/// `wirebench lab run --name N LINK... -- TEST... --json`, parsed.
pub fn lab_run(tag: &str, link: &[&str], test: &[&str]) -> Value {
    let name = LabName::new(tag);
    let mut args = vec!["lab", "run", "--name", &name.0];
    args.extend_from_slice(link);
    args.push("--");
    args.extend_from_slice(test);
    args.push("--json");
    let out = super::run(&args);
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

pub fn total(v: &Value) -> &Value {
    &v["points"][0]["stream"]["totals"][0]
}

/// A test run by hand on a lab that is up: server on host b, client on host a, `--json`.
pub fn run_on_lab(name: &str, test: &[&str]) -> Value {
    run_on_lab_with(name, &[], test)
}

/// [`run_on_lab`] with more options for the server (`--permit raw`).
pub fn run_on_lab_with(name: &str, serve: &[&str], test: &[&str]) -> Value {
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
        .args(serve)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_listening(&format!("wb-{name}-b"), DEFAULT_PORT);
    let mut args = vec!["lab", "exec", "--name", name, "a", "--", exe, "run"];
    args.extend_from_slice(test);
    args.extend_from_slice(&["--to", "10.77.0.2", "--json"]);
    let out = super::run(&args);
    let _ = server.kill();
    let _ = server.wait();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

/// Waits until a TCP socket of network namespace `ns` listens on `port` (a server started
/// there by `lab exec` has bound its control port), failing the test after [`super::FINISH`]:
/// a process that has entered the namespace is not yet listening, and a client that came
/// after a fixed short sleep was refused when a loaded host had not run the server yet.
pub fn wait_listening(ns: &str, port: u16) {
    let listening = || {
        let out = std::process::Command::new("ip")
            .args([
                "netns",
                "exec",
                ns,
                "cat",
                "/proc/net/tcp",
                "/proc/net/tcp6",
            ])
            .output()
            .unwrap();
        // "sl local_address rem_address st ...": the local port in hex, state 0A is LISTEN.
        String::from_utf8_lossy(&out.stdout).lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3
                && f[3] == "0A"
                && f[1]
                    .rsplit(':')
                    .next()
                    .and_then(|p| u16::from_str_radix(p, 16).ok())
                    == Some(port)
        })
    };
    assert!(
        super::wait_until(super::FINISH, listening),
        "nothing listened on port {port} in {ns} within {:?}",
        super::FINISH
    );
}

/// The control port a `wirebench serve` without --port listens on.
pub const DEFAULT_PORT: u16 = wirebench::control::server::DEFAULT_PORT;

/// UDP datagrams the kernel of namespace `ns` dropped for a full receive buffer so far.
pub fn udp_receive_buffer_errors(ns: &str) -> u64 {
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", ns, "cat", "/proc/net/snmp"])
        .output()
        .unwrap();
    super::rcvbuf_errors_in(&String::from_utf8_lossy(&out.stdout))
}

/// The delay line's counters of lab `name`, direction a->b (`lab status --json`), from the
/// first report (it writes one every second) in which it has forwarded at least the
/// `delivered` bytes the receiver got: a report written after the traffic. A delay line that
/// has not reported them within [`super::FINISH`] fails the test (a loaded host may write its
/// report seconds late; only a lab that lost count never does).
pub fn delay_line_forward_counters(name: &str, delivered: u64) -> Value {
    let mut fwd = Value::Null;
    let reported = super::wait_until(super::FINISH, || {
        let out = super::run(&["lab", "status", "--name", name, "--json"]);
        let v: Value = serde_json::from_slice(&out.stdout).expect("lab status --json");
        fwd = v[0]["delay_line"]["forward"].clone();
        fwd["bytes_out"].as_u64().unwrap_or(0) >= delivered
    });
    assert!(
        reported,
        "the delay line reported {} bytes out, the receiver got {delivered}",
        fwd["bytes_out"]
    );
    fwd
}

/// (frames forwarded, frames dropped) of [`delay_line_forward_counters`].
pub fn delay_line_forward(name: &str, delivered: u64) -> (u64, u64) {
    let fwd = delay_line_forward_counters(name, delivered);
    (
        u(&fwd["frames_out"]),
        u(&fwd["dropped_queue_full"]) + u(&fwd["dropped_send"]),
    )
}

/// Frames the kernel dropped at the receive backlog of any CPU (the second column of
/// /proc/net/softnet_stat, which is the host's, not a namespace's): where a burst released by
/// a descheduled delay line overflows before any socket sees it.
pub fn backlog_drops() -> u64 {
    std::fs::read_to_string("/proc/net/softnet_stat")
        .expect("/proc/net/softnet_stat")
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter_map(|hex| u64::from_str_radix(hex, 16).ok())
        .sum()
}
