//! The environment a result was measured in, recorded with every result.

pub use crate::model::host::Environment;

pub fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "unknown".into())
}

fn kernel() -> String {
    match nix::sys::utsname::uname() {
        Ok(u) => format!(
            "{} {}",
            u.sysname().to_string_lossy(),
            u.release().to_string_lossy()
        ),
        Err(_) => "unknown".into(),
    }
}

/// Read once per process: the model does not change, and reading /proc/cpuinfo asks every
/// CPU for its frequency, which cost a long-running agent more than a small run's own work.
fn cpu_model() -> String {
    static MODEL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    MODEL.get_or_init(read_cpu_model).clone()
}

fn read_cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_owned())
}

impl Environment {
    pub fn capture() -> Environment {
        Environment {
            hostname: hostname(),
            kernel: kernel(),
            cpu_model: cpu_model(),
            cpus: crate::sys::cpu_count(),
            wirebench_version: env!("CARGO_PKG_VERSION").to_owned(),
            default_cc: std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
                .ok()
                .map(|s| s.trim().to_owned()),
        }
    }
}

/// The current wall-clock time as RFC 3339 (UTC), for "when was this measured".
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}
