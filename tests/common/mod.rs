//! Helpers for the integration tests: run the real binary, parse its JSON, run servers.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub mod hostile;
pub mod lab;
pub mod need;
pub mod pki;
pub mod proc;
pub mod prometheus;

/// The binary, with its default results database in a per-process temporary directory:
/// `run` saves every run by default, and tests must never write to the real home.
pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_wirebench"));
    c.env(
        "XDG_DATA_HOME",
        std::env::temp_dir().join(format!("wirebench-tests-{}", std::process::id())),
    );
    c
}

pub fn run(args: &[&str]) -> Output {
    bin()
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("wirebench runs")
}

/// Runs `wirebench run ... --json`, asserts success and returns the parsed document.
/// The one JSON document a command printed, which must have succeeded: otherwise the test
/// fails with `what`, its stderr and its stdout.
pub fn json_document(what: &str, out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{what} failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout).expect("stdout is one JSON document")
}

pub fn run_json(args: &[&str]) -> Value {
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    all.push("--json");
    let out = run(&all);
    let v = json_document(&format!("wirebench {all:?}"), &out);
    assert_eq!(v["schema"], "wirebench.run");
    assert_eq!(v["schema_version"], 2);
    assert_eq!(v["complete"], true);
    v
}

/// A `wirebench serve` on loopback with an ephemeral port, killed on drop. It takes no key
/// from the test's environment (`WIREBENCH_PSK`); its log lines can be waited for.
pub struct Server {
    pub child: Child,
    pub addr: String,
    log: std::sync::mpsc::Receiver<String>,
}

impl Server {
    pub fn start(extra: &[&str]) -> Server {
        Server::start_on("127.0.0.1", extra)
    }

    /// A server listening on `listen` (`::` for a dual-stack socket).
    pub fn start_on(listen: &str, extra: &[&str]) -> Server {
        Server::start_with(bin(), listen, extra)
    }

    /// A server on loopback under prlimit's `limits` (such as `--as=1073741824`, at most 1
    /// GiB of address space, set before it runs): a memory attack that works ends it with an
    /// allocation failure instead of disturbing the machine.
    pub fn start_limited(limits: &[&str], extra: &[&str]) -> Server {
        let mut limited = Command::new("prlimit");
        limited
            .args(limits)
            .arg("--")
            .arg(env!("CARGO_BIN_EXE_wirebench"))
            .envs(bin().get_envs().filter_map(|(k, v)| Some((k, v?))));
        Server::start_with(limited, "127.0.0.1", extra)
    }

    fn start_with(mut command: Command, listen: &str, extra: &[&str]) -> Server {
        let mut child = command
            .args(["serve", "--listen", listen, "--port", "0"])
            .args(extra)
            .env_remove("WIREBENCH_PSK")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("server starts");
        let stderr = child.stderr.take().expect("stderr piped");
        let mut lines = BufReader::new(stderr).lines();
        let first = lines
            .next()
            .expect("server prints its address")
            .expect("utf-8");
        let addr = first
            .rsplit(' ')
            .next()
            .expect("address at the end of the line")
            .to_owned();
        // Keep draining stderr so the server never blocks on a full pipe.
        let (tx, log) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in lines.map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        Server { child, addr, log }
    }

    /// The first log line from now on containing `needle`, waiting up to `within`.
    pub fn wait_for(&self, needle: &str, within: Duration) -> Option<String> {
        let until = Instant::now() + within;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.log.recv_timeout(left) {
                Ok(l) if l.contains(needle) => return Some(l),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
    }
}

/// A client finishes (or fails) within this, however loaded the machine.
pub const FINISH: Duration = Duration::from_secs(60);

/// Polls `cond` (every 50 ms) until it holds: true once it does, false when `within` has
/// passed without it. For a wait on something that must happen: `within` is a hang guard
/// (mostly [`FINISH`]), far beyond what a loaded host takes, never a time the test measures.
///
/// ```ignore
/// assert!(wait_until(FINISH, || server_listens()), "the server never listened");
/// ```
pub fn wait_until(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + within;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs the binary, killing it and failing the test if it has not finished within
/// [`FINISH`]: a server that never ends a point must fail the test, not hang it.
pub fn run_bounded(args: &[&str]) -> Output {
    let mut child = bin()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("wirebench runs");
    // Drain both pipes while waiting, so a chatty child never blocks on them.
    let drain = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let until = Instant::now() + FINISH;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() >= until {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?} did not finish within {FINISH:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// The one line of error a failed run printed, after checking that it failed cleanly: exit
/// code 1 (or clap's 2 for a malformed command line), one line, no panic.
pub fn refusal(out: &Output, what: &str) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{what} should fail");
    assert!(
        matches!(out.status.code(), Some(1 | 2)),
        "{what}: exit {:?}: {err}",
        out.status.code()
    );
    assert!(!err.contains("panicked"), "{what}: {err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{what}: one line of error, got: {err}");
    lines[0].to_owned()
}

/// A TCP connection to `server` from the loopback address `from` (another client, as the
/// server's per-client limits see it).
pub fn connect_from(from: &str, server: &str) -> std::net::TcpStream {
    use socket2::{Domain, Socket, Type};
    let server: std::net::SocketAddr = server.parse().unwrap();
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    let local: std::net::SocketAddr = format!("{from}:0").parse().unwrap();
    s.bind(&local.into()).unwrap();
    s.connect(&server.into()).unwrap();
    s.into()
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn f(v: &Value) -> f64 {
    v.as_f64()
        .unwrap_or_else(|| panic!("expected a number, got {v}"))
}

pub fn u(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("expected an unsigned integer, got {v}"))
}

/// The kernel's count of UDP datagrams dropped for a full receive buffer (RcvbufErrors in
/// /proc/net/snmp) in this network namespace: on a loaded host a starved receiver loses
/// datagrams even on loopback, and every datagram a run reports lost must be one the kernel
/// counted here (other tests running at the same time can only add to it).
#[allow(dead_code)]
pub fn udp_rcvbuf_errors() -> u64 {
    rcvbuf_errors_in(&std::fs::read_to_string("/proc/net/snmp").expect("/proc/net/snmp"))
}

/// RcvbufErrors of the `Udp:` lines of a /proc/net/snmp text (this namespace's or another's).
#[allow(dead_code)]
pub fn rcvbuf_errors_in(snmp: &str) -> u64 {
    let mut udp = snmp.lines().filter(|l| l.starts_with("Udp:"));
    let (names, values) = (udp.next().unwrap_or(""), udp.next().unwrap_or(""));
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == "RcvbufErrors")
        .and_then(|(_, v)| v.parse().ok())
        .expect("RcvbufErrors in /proc/net/snmp")
}

/// Every datagram lost since `before` (a [`udp_rcvbuf_errors`] reading) was dropped by the
/// kernel for a full receive buffer: the loss is the host's, accounted for.
#[allow(dead_code)]
pub fn assert_udp_loss_explained(lost: u64, before: u64, what: &str) {
    let dropped = udp_rcvbuf_errors() - before;
    assert!(
        lost <= dropped,
        "{what}: {lost} datagrams lost, the kernel dropped {dropped} for full receive buffers"
    );
}

/// MPI's own messages over TCP on loopback (and "self" for a rank's messages to itself).
pub const MPI_TCP_ON_LOOPBACK: &[&str] = &["btl", "tcp,self", "btl_tcp_if_include", "lo"];

/// `mpirun -np NP` of this build's binary with `args`, `mca` as KEY, VALUE pairs. Open MPI
/// refuses root without the two ALLOW variables (harmless otherwise); `--oversubscribe` lets
/// a two-CPU runner start more ranks than CPUs. The results database goes where [`bin`]
/// puts it.
pub fn mpirun(np: usize, mca: &[&str], args: &[&str]) -> Output {
    let bin = bin();
    let mut c = Command::new("mpirun");
    c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .args(["-np", &np.to_string(), "--oversubscribe"]);
    for kv in mca.chunks(2) {
        c.arg("--mca").args(kv);
    }
    for (k, v) in bin.get_envs() {
        if let Some(v) = v {
            c.env(k, v);
        }
    }
    c.arg(bin.get_program())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("mpirun runs (install openmpi-bin)")
}
