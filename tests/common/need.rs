//! What a test needs from the machine beyond loopback sockets, checked in one place: root,
//! iproute2, nftables, Open MPI, Chromium, iperf3, Prometheus and a few tools. A test that finds something
//! missing says so on stderr, `SKIPPED <test>: <reason>`, and returns, so that a developer's
//! machine runs what it can and the output says what it did not run. With
//! `WIREBENCH_REQUIRE_ALL=1` (CI sets it: it installs everything and runs as root) a missing
//! need fails the test instead, with the same reason, so that nothing passes there by not
//! running.
//!
//! ```ignore
//! if !require(Need::LAB) {
//!     return;
//! }
//! ```

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Something a test needs that a machine may lack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Effective user root: network namespaces, packet sockets, captures, mounts. Also
    /// missing when WIREBENCH_SKIP_LAB is set (a root shell that wants these tests left out).
    Root,
    /// `ip` and `tc` (iproute2) on PATH: namespaces, links and queueing disciplines.
    Iproute2,
    /// `nft` (nftables) on PATH: the lab's loss and drop rules.
    Nftables,
    /// `mpirun` (Open MPI) on PATH.
    OpenMpi,
    /// A Chromium to open reports in (Debian's `chromium`), unless WIREBENCH_SKIP_BROWSER=1.
    Chromium,
    /// /usr/bin/setpriv (util-linux): one command as an ordinary user without capabilities.
    Setpriv,
    /// `unshare -m` with a tmpfs mounted inside: a small filesystem of the test's own.
    PrivateMount,
    /// `iperf3` on PATH: its own JSON, the ground truth of `export --format iperf3`.
    Iperf3,
    /// The `tcp:tcp_probe` tracepoint in a mounted tracefs, or tracefs's mount point (where
    /// wirebench, as root, mounts it).
    TcpProbe,
    /// Debian's Prometheus server and its promtool (`apt-get install prometheus`): the
    /// scraper that contrib/'s dashboard and config are written for.
    Prometheus,
    /// python3 with grpcio and grpcio-tools (pip install grpcio grpcio-tools): the gRPC
    /// interop tests' other implementation.
    PythonGrpc,
}

impl Need {
    /// A lab: namespaces and links (root, iproute2) with nftables' drop rules.
    pub const LAB: &'static [Need] = &[Need::Root, Need::Iproute2, Need::Nftables];

    /// Why this is missing here, or None when it is present.
    pub fn missing(self) -> Option<String> {
        match self {
            Need::Root => {
                if std::env::var_os("WIREBENCH_SKIP_LAB").is_some() {
                    Some("WIREBENCH_SKIP_LAB is set (tests that need root are left out)".into())
                } else if !nix::unistd::geteuid().is_root() {
                    Some("needs root".into())
                } else {
                    None
                }
            }
            Need::Iproute2 => ["ip", "tc"]
                .into_iter()
                .find(|p| on_path(p).is_none())
                .map(|p| format!("needs `{p}` (iproute2) on PATH")),
            Need::Nftables => on_path("nft")
                .is_none()
                .then(|| "needs `nft` (nftables) on PATH".into()),
            Need::OpenMpi => on_path("mpirun")
                .is_none()
                .then(|| "needs `mpirun` (Open MPI: openmpi-bin) on PATH".into()),
            Need::Chromium => {
                if std::env::var("WIREBENCH_SKIP_BROWSER").as_deref() == Ok("1") {
                    Some("WIREBENCH_SKIP_BROWSER=1 is set".into())
                } else if chromium().is_none() {
                    Some("needs `chromium` (apt-get install --no-install-recommends chromium) on PATH".into())
                } else {
                    None
                }
            }
            Need::TcpProbe => {
                let event = "events/tcp/tcp_probe/id";
                let mounted = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
                    .iter()
                    .find(|t| Path::new(t).join("events").is_dir());
                match mounted {
                    Some(t) if Path::new(t).join(event).is_file() => None,
                    Some(t) => Some(format!("needs the tcp:tcp_probe tracepoint ({t}/{event})")),
                    None if Path::new("/sys/kernel/tracing").is_dir() => None,
                    None => Some("needs tracefs (/sys/kernel/tracing)".into()),
                }
            }
            Need::Setpriv => {
                (!executable(Path::new(SETPRIV))).then(|| format!("needs {SETPRIV} (util-linux)"))
            }
            Need::PrivateMount => private_mount_fails(),
            Need::Iperf3 => on_path("iperf3")
                .is_none()
                .then(|| "needs `iperf3` (apt-get install iperf3) on PATH".into()),
            Need::Prometheus => [PROMETHEUS, PROMTOOL]
                .into_iter()
                .find(|p| !executable(Path::new(p)))
                .map(|p| format!("needs {p} (apt-get install prometheus)")),
            Need::PythonGrpc => {
                let ok = Command::new("python3")
                    .args(["-c", "import grpc, grpc_tools"])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success());
                (!ok).then(|| {
                    "needs python3 with grpcio and grpcio-tools (pip install grpcio grpcio-tools)"
                        .into()
                })
            }
        }
    }
}

/// Debian's Prometheus server and its configuration checker (package `prometheus`).
pub const PROMETHEUS: &str = "/usr/bin/prometheus";
pub const PROMTOOL: &str = "/usr/bin/promtool";

/// Where the tests that drop privileges find setpriv.
pub const SETPRIV: &str = "/usr/bin/setpriv";

/// Whether the running test has everything in `needs`. When it does not: with
/// WIREBENCH_REQUIRE_ALL=1 the test fails, saying what is missing; otherwise it prints
/// `SKIPPED <test>: <reason>` on stderr and the test returns.
pub fn require(needs: &[Need]) -> bool {
    check(None, needs)
}

/// [`require`] for one part of a test (`what`), the rest of which runs anyway: the message
/// reads `SKIPPED <test> (<what>): <reason>`.
pub fn require_for(what: &str, needs: &[Need]) -> bool {
    check(Some(what), needs)
}

/// Whether WIREBENCH_REQUIRE_ALL=1 asks that no test be skipped.
pub fn require_all() -> bool {
    std::env::var("WIREBENCH_REQUIRE_ALL").as_deref() == Ok("1")
}

/// For a need that is not the machine's but the build's (a subcommand or flag another branch
/// brings): reports `SKIPPED <test> (<what>): <reason>` as [`require_for`] does (failing
/// under WIREBENCH_REQUIRE_ALL=1 likewise) and returns false, so the caller returns.
pub fn unavailable(what: &str, reason: &str) -> bool {
    skip(Some(what), vec![reason.to_owned()])
}

fn check(part: Option<&str>, needs: &[Need]) -> bool {
    let mut reasons: Vec<String> = Vec::new();
    for reason in needs.iter().filter_map(|n| n.missing()) {
        if !reasons.contains(&reason) {
            reasons.push(reason);
        }
    }
    if reasons.is_empty() {
        return true;
    }
    skip(part, reasons)
}

fn skip(part: Option<&str>, reasons: Vec<String>) -> bool {
    // libtest runs each test on a thread named after it.
    let thread = std::thread::current();
    let mut name = thread.name().unwrap_or("this test").to_owned();
    if let Some(part) = part {
        name = format!("{name} ({part})");
    }
    let reason = reasons.join("; ");
    if require_all() {
        panic!("{name}: {reason}; WIREBENCH_REQUIRE_ALL=1 does not let it be skipped");
    }
    say_skipped(&name, &reason);
    false
}

/// Writes the skip to the process's stderr itself, not through `eprintln!`, which the test
/// harness captures and shows only for a failing test: a skip must be seen.
fn say_skipped(name: &str, reason: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED {name}: {reason}");
}

/// Debian's Chromium (or Ubuntu's name for it) on PATH.
pub fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser"]
        .into_iter()
        .find_map(on_path)
}

/// `program` as the shell's `command -v` would find it.
pub fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| executable(p))
}

fn executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Why a small filesystem of the test's own cannot be made here: `unshare -m` and a tmpfs
/// mount, tried on a scratch directory (root alone is not enough in a container without
/// CAP_SYS_ADMIN).
fn private_mount_fails() -> Option<String> {
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => return Some(format!("no scratch directory: {e}")),
    };
    let out = Command::new("unshare")
        .args([
            "-m",
            "sh",
            "-c",
            "mount -t tmpfs -o size=64k tmpfs \"$1\"",
            "sh",
        ])
        .arg(dir.path())
        .stdin(Stdio::null())
        .output();
    match out {
        Err(e) => Some(format!("cannot run unshare: {e}")),
        Ok(o) if !o.status.success() => Some(format!(
            "unshare -m with a tmpfs mount failed ({}): {}",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Ok(_) => None,
    }
}
