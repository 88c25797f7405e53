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
