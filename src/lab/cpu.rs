//! A lab host's CPU budget (`lab up --host-cpu b=25%`): an end system slower than the
//! machine, through the kernel's CPU controller (CFS bandwidth control). Every process the
//! lab runs in that host's namespace joins a cgroup that may use `quota` of CPU time in every
//! `period`; cgroup v2's `cpu.max` where the host has the controller (its
//! `cgroup.controllers` lists `cpu`), cgroup v1's `cpu.cfs_quota_us` and `cpu.cfs_period_us`
//! otherwise.
//!
//! The period is the shortest the kernel allows for the share: both quota and period are at
//! least 1 ms, so period = max(1 ms, 1 ms / share) and quota = share x period (25%: 1 ms in
//! every 4 ms). A long period (the kernel's default is 100 ms) would let a host run at full
//! speed for 25 ms and then stall for 75: a receiver that stalls drops a burst where a slower
//! CPU would drop a steady share. A short one makes the budget act as a slower CPU.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

pub use crate::model::lab::HostCpu;

/// The kernel's least quota and period (CFS bandwidth control), microseconds.
pub const MIN_US: u64 = 1_000;

/// Where the cgroup file systems are.
const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// `b=25%,c=50%` as (host, share of one CPU) pairs; every share above 0 and below 100%.
pub fn parse(spec: &str) -> Result<Vec<(String, f64)>> {
    let mut out: Vec<(String, f64)> = Vec::new();
    for item in spec.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (host, share) = item
            .split_once('=')
            .with_context(|| format!("--host-cpu '{item}': give HOST=SHARE%, e.g. b=25%"))?;
        let host = host.trim();
        let share = crate::units::parse_percent(share.trim())
            .map_err(|e| anyhow::anyhow!("--host-cpu '{item}': {e}"))?;
        if out.iter().any(|(h, _)| h == host) {
            bail!("--host-cpu: host '{host}' is given twice");
        }
        out.push((host.to_owned(), share));
    }
    if out.is_empty() {
        bail!("--host-cpu: give HOST=SHARE%, e.g. b=25%");
    }
    Ok(out)
}

/// (quota, period) in microseconds for `share` of one CPU: the shortest period whose quota
/// is at least the kernel's 1 ms.
pub fn quota_period_us(share: f64) -> (u64, u64) {
    let period = ((MIN_US as f64 / share).ceil() as u64).max(MIN_US);
    let quota = ((share * period as f64).round() as u64).max(MIN_US);
    (quota, period)
}

/// The CPU controller this host offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Controller {
    /// A cgroup2 hierarchy at this directory whose `cgroup.controllers` lists `cpu`.
    V2(PathBuf),
    /// A cgroup v1 `cpu` hierarchy at this directory.
    V1(PathBuf),
}

impl Controller {
    /// What the host has, from the cgroup mounts under `root` (/sys/fs/cgroup).
    pub fn find_in(root: &Path) -> Option<Controller> {
        let lists_cpu = |dir: &Path| {
            std::fs::read_to_string(dir.join("cgroup.controllers"))
                .is_ok_and(|c| c.split_whitespace().any(|w| w == "cpu"))
        };
        for dir in [root.to_path_buf(), root.join("unified")] {
            if lists_cpu(&dir) {
                return Some(Controller::V2(dir));
            }
        }
        ["cpu", "cpu,cpuacct"]
            .iter()
            .map(|d| root.join(d))
            .find(|d| d.join("cpu.cfs_quota_us").exists())
            .map(Controller::V1)
    }

    pub fn find() -> Result<Controller> {
        Controller::find_in(Path::new(CGROUP_ROOT)).with_context(|| {
            format!("--host-cpu: this host has no CPU controller to use: no cgroup2 whose cgroup.controllers lists cpu and no cgroup v1 cpu.cfs_quota_us under {CGROUP_ROOT}")
        })
    }

    fn dir(&self) -> &Path {
        match self {
            Controller::V2(d) | Controller::V1(d) => d,
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Controller::V2(_) => "cgroup2 cpu.max",
            Controller::V1(_) => "cgroup1 cpu.cfs_quota_us",
        }
    }
}

/// The cgroup of host `host` of lab `lab` under `controller`.
pub fn cgroup_dir(controller: &Controller, lab: &str, host: &str) -> PathBuf {
    controller.dir().join(format!("wirebench-{lab}-{host}"))
}

fn write(path: &Path, value: &str) -> Result<()> {
    std::fs::write(path, value)
        .with_context(|| format!("--host-cpu: writing '{value}' to {}", path.display()))
}

/// Makes the cgroup of `host` with `share` of a CPU and gives what the lab records of it.
pub fn create(controller: &Controller, lab: &str, host: &str, share: f64) -> Result<HostCpu> {
    let (quota, period) = quota_period_us(share);
    let dir = cgroup_dir(controller, lab, host);
    if let Controller::V2(root) = controller {
        // The controller must be on for the root's children; already on is no error.
        let _ = std::fs::write(root.join("cgroup.subtree_control"), "+cpu");
    }
    std::fs::create_dir(&dir)
        .with_context(|| format!("--host-cpu: making the cgroup {}", dir.display()))?;
    match controller {
        Controller::V2(_) => write(&dir.join("cpu.max"), &format!("{quota} {period}"))?,
        Controller::V1(_) => {
            write(&dir.join("cpu.cfs_period_us"), &period.to_string())?;
            write(&dir.join("cpu.cfs_quota_us"), &quota.to_string())?;
        }
    }
    Ok(HostCpu {
        host: host.to_owned(),
        share: quota as f64 / period as f64,
        quota_us: quota,
        period_us: period,
        cgroup: dir.display().to_string(),
        controller: controller.name().to_owned(),
    })
}

/// Moves process `pid` (all its threads) into `budget`'s cgroup; its children follow it.
pub fn join(budget: &HostCpu, pid: u32) -> Result<()> {
    write(
        &Path::new(&budget.cgroup).join("cgroup.procs"),
        &pid.to_string(),
    )
}

/// Moves the calling thread alone into `budget`'s cgroup (the threads it starts follow it):
/// for a lab's own threads in a host (`lab run`'s server), which share a process with threads
/// in the other host. Only cgroup v1 places single threads of an ordinary process.
pub fn join_this_thread(budget: &HostCpu) -> Result<()> {
    if !budget.controller.starts_with("cgroup1") {
        bail!("--host-cpu with `lab run`: cgroup v2 places whole processes only, and lab run's client and server are one process; use lab up --host-cpu and run the server with lab exec");
    }
    write(
        &Path::new(&budget.cgroup).join("tasks"),
        &nix::unistd::gettid().to_string(),
    )
}

/// One line for people: "b: 25% of a CPU (1 ms every 4 ms, cgroup1 ...)".
pub fn describe(b: &HostCpu) -> String {
    format!(
        "host {}: CPU budget {:.0}% of one CPU ({} us every {} us, {} at {})",
        b.host,
        b.share * 100.0,
        b.quota_us,
        b.period_us,
        b.controller,
        b.cgroup
    )
}

/// Removes every cgroup of lab `lab` (of any host, under either controller): its processes
/// have ended; any left are moved to the parent first. Safe on a lab without any.
pub fn remove_all(lab: &str) -> Vec<String> {
    let root = Path::new(CGROUP_ROOT);
    let parents = [
        root.to_path_buf(),
        root.join("unified"),
        root.join("cpu"),
        root.join("cpu,cpuacct"),
    ];
    let prefix = format!("wirebench-{lab}-");
    let mut errors = Vec::new();
    for parent in parents {
        let Ok(entries) = std::fs::read_dir(&parent) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(host) = name.strip_prefix(&prefix) else {
                continue;
            };
            // Another lab's whose name extends this one's ("lab" and "lab-2") has a '-' in
            // what is left; host names have none.
            if host.contains('-') {
                continue;
            }
            if let Err(err) = remove(&e.path(), &parent) {
                errors.push(format!("removing {}: {err}", e.path().display()));
            }
        }
    }
    errors
}

fn remove(dir: &Path, parent: &Path) -> std::io::Result<()> {
    for _ in 0..50 {
        if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
            return Ok(());
        }
        // Processes still in it (one that is ending): to the parent, then again.
        if let Ok(pids) = std::fs::read_to_string(dir.join("cgroup.procs")) {
            for pid in pids.split_whitespace() {
                let _ = std::fs::write(parent.join("cgroup.procs"), pid);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::fs::remove_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_period_is_the_shortest_the_kernel_allows_for_the_share() {
        assert_eq!(quota_period_us(0.25), (1_000, 4_000));
        assert_eq!(quota_period_us(0.10), (1_000, 10_000));
        assert_eq!(quota_period_us(0.50), (1_000, 2_000));
        // 75%: 1.334 ms, of which 1.001 ms.
        assert_eq!(quota_period_us(0.75), (1_001, 1_334));
        assert_eq!(quota_period_us(0.01), (1_000, 100_000));
    }

    #[test]
    fn host_cpu_specs_parse_or_say_why_not() {
        let v = parse("b=25%, c=50%").unwrap();
        assert_eq!(v, [("b".to_owned(), 0.25), ("c".to_owned(), 0.5)]);
        for bad in ["b", "b=0%", "b=100%", "b=x", "b=25%,b=30%", ""] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_controller_is_found_where_the_host_has_it() {
        let root = std::env::temp_dir().join(format!("wb-cgroup-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        // This machine's kind: v1 cpu, and a cgroup2 mount without controllers.
        std::fs::create_dir_all(root.join("cpu")).unwrap();
        std::fs::write(root.join("cpu/cpu.cfs_quota_us"), "-1").unwrap();
        std::fs::create_dir_all(root.join("unified")).unwrap();
        std::fs::write(root.join("unified/cgroup.controllers"), "").unwrap();
        let c = Controller::find_in(&root).unwrap();
        assert_eq!(c, Controller::V1(root.join("cpu")));
        let b = create(&c, "x", "b", 0.25).unwrap();
        let dir = root.join("cpu/wirebench-x-b");
        assert_eq!(b.cgroup, dir.display().to_string());
        assert_eq!(
            std::fs::read_to_string(dir.join("cpu.cfs_quota_us")).unwrap(),
            "1000"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("cpu.cfs_period_us")).unwrap(),
            "4000"
        );
        // A unified hierarchy with the cpu controller wins.
        std::fs::write(root.join("cgroup.controllers"), "cpuset cpu io memory").unwrap();
        let c = Controller::find_in(&root).unwrap();
        assert_eq!(c, Controller::V2(root.clone()));
        create(&c, "x", "h1", 0.1).unwrap();
        assert_eq!(
            std::fs::read_to_string(root.join("wirebench-x-h1/cpu.max")).unwrap(),
            "1000 10000"
        );
        // Neither: none.
        let empty = root.join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        assert_eq!(Controller::find_in(&empty), None);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
