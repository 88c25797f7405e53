//! Shared by unit tests that need what a machine may lack, as tests/common/need.rs is for
//! the integration tests: without it a test prints `SKIPPED <test>: <reason>` on stderr and
//! returns; with WIREBENCH_REQUIRE_ALL=1 (CI, which runs as root) it fails instead, so that
//! nothing passes there by not running.

/// Whether the running test may use what only root may (packet sockets, namespaces).
/// WIREBENCH_SKIP_LAB set counts as not root, as it does for the integration tests.
pub fn require_root() -> bool {
    let why = if std::env::var_os("WIREBENCH_SKIP_LAB").is_some() {
        "WIREBENCH_SKIP_LAB is set (tests that need root are left out)"
    } else if !nix::unistd::geteuid().is_root() {
        "needs root"
    } else {
        return true;
    };
    skip(why)
}

/// The program at `path` when it is installed; otherwise the test is skipped (or fails
/// under WIREBENCH_REQUIRE_ALL=1) with `why`.
pub fn require_program(path: &str, why: &str) -> Option<std::path::PathBuf> {
    let p = std::path::PathBuf::from(path);
    if p.is_file() {
        return Some(p);
    }
    skip(why);
    None
}

/// Says the running test is skipped, and why; false (a test returns on it). Panics instead
/// under WIREBENCH_REQUIRE_ALL=1.
fn skip(why: &str) -> bool {
    // libtest runs each test on a thread named after it.
    let thread = std::thread::current();
    let name = thread.name().unwrap_or("this test");
    if std::env::var("WIREBENCH_REQUIRE_ALL").as_deref() == Ok("1") {
        panic!("{name}: {why}; WIREBENCH_REQUIRE_ALL=1 does not let it be skipped");
    }
    // To the process's stderr itself: the harness captures `eprintln!` and shows it only for
    // a failing test, and a skip must be seen.
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED {name}: {why}");
    false
}

/// Polls `cond` (every 10 ms) until it holds: true once it does, false when `within` has
/// passed without it. The unit tests' counterpart of `wait_until` in tests/common/mod.rs, for
/// what another thread does in its own time (a handshake thread counting a datagram): the test
/// waits for the condition, and `within` is a hang guard far beyond what a loaded host takes.
pub fn wait_until(within: std::time::Duration, mut cond: impl FnMut() -> bool) -> bool {
    let until = std::time::Instant::now() + within;
    loop {
        if cond() {
            return true;
        }
        if std::time::Instant::now() >= until {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// How long a unit test waits for what must happen (an accept, a read, a collective of a
/// group) before it calls the code hung: a minute, far beyond what a loaded host takes, so
/// that only a real hang reaches it.
pub const HUNG: std::time::Duration = std::time::Duration::from_secs(60);
