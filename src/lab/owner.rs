//! Who made a lab, so that `lab down --all` removes the caller's labs only: several people
//! (or several test runs) share one machine's labs, and each session's are its own.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// Recorded beside a lab's state when it is made (`NAME.owner`, JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    pub uid: u32,
    /// The session (`getsid`) of the process that made the lab: a terminal, a CI job, a test
    /// run under `setsid`.
    pub sid: u32,
    pub pid: u32,
    pub created_at: String,
}

impl Owner {
    /// The calling process.
    pub fn me() -> Owner {
        Owner {
            uid: nix::unistd::getuid().as_raw(),
            sid: nix::unistd::getsid(None).map_or(0, |s| s.as_raw() as u32),
            pid: std::process::id(),
            created_at: crate::env::now_rfc3339(),
        }
    }

    /// Whether `self` made the lab in the caller's session (same user, same session).
    pub fn is_callers(&self) -> bool {
        let me = Owner::me();
        self.uid == me.uid && self.sid == me.sid
    }

    pub fn describe(&self) -> String {
        format!(
            "made by uid {} in session {} (pid {}) at {}",
            self.uid, self.sid, self.pid, self.created_at
        )
    }
}

/// Not `.json`: a wirebench that predates owners lists every `NAME.json` as a lab.
fn path(name: &str) -> std::path::PathBuf {
    super::state_dir().join(format!("{name}.owner"))
}

pub fn record(name: &str) -> Result<()> {
    let json = serde_json::to_string_pretty(&Owner::me())?;
    std::fs::write(path(name), json).context("writing the lab's owner")
}

/// None for a lab made by a wirebench that did not record owners.
pub fn of(name: &str) -> Option<Owner> {
    serde_json::from_str(&std::fs::read_to_string(path(name)).ok()?).ok()
}

pub fn forget(name: &str) {
    let _ = std::fs::remove_file(path(name));
}

/// Ends every process whose network namespace is one of `namespaces` (as `ip netns pids`
/// finds them), except this one: SIGTERM, then SIGKILL after 2 s. Returns how many it ended.
pub fn end_processes(namespaces: &[String]) -> usize {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let me = std::process::id();
    let mut pids: Vec<u32> = namespaces
        .iter()
        .filter(|n| super::host::netns_path(n).exists())
        .filter_map(|n| super::host::output("ip", &["netns", "pids", n]).ok())
        .flat_map(|text| {
            text.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .filter(|&p| p != me)
        .collect();
    pids.sort_unstable();
    pids.dedup();
    let pids: Vec<Pid> = pids
        .into_iter()
        .map(|p| Pid::from_raw(p as i32))
        .filter(|&p| kill(p, Signal::SIGTERM).is_ok())
        .collect();
    // Gone, or a zombie whose parent has yet to reap it: either way out of the namespace.
    let inside = |p: Pid| std::fs::read_link(format!("/proc/{p}/ns/net")).is_ok();
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline && pids.iter().any(|&p| inside(p)) {
        for &p in &pids {
            // Reap our own children; others are reaped by their parents.
            let _ = nix::sys::wait::waitpid(p, Some(nix::sys::wait::WaitPidFlag::WNOHANG));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for &p in pids.iter().filter(|&&p| inside(p)) {
        let _ = kill(p, Signal::SIGKILL);
    }
    pids.len()
}
