//! What a process holds, read from /proc: threads, descriptors and resident memory. The soak
//! and fuzz tests compare a server's figures before, during and after an attack.

use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    pub threads: u64,
    pub fds: u64,
    pub rss_kib: u64,
}

pub fn held(pid: u32) -> Held {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("process alive");
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} in /proc/{pid}/status"))
    };
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("descriptors readable")
        .count() as u64;
    Held {
        threads: field("Threads:"),
        fds,
        rss_kib: field("VmRSS:"),
    }
}

/// Waits (up to `limit`) until the process holds no more threads and descriptors than
/// `baseline`, and returns what it holds then. A server ends a session's threads a little
/// after its clients have gone, so the settled figures are read, not the first ones.
pub fn settle(pid: u32, baseline: Held, limit: Duration) -> Held {
    let until = Instant::now() + limit;
    loop {
        let now = held(pid);
        if (now.threads <= baseline.threads && now.fds <= baseline.fds) || Instant::now() > until {
            return now;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Samples `pid` every 50 ms while `busy` runs and returns the peak of each figure.
pub fn peak_while<T>(pid: u32, busy: impl FnOnce() -> T) -> (T, Held) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            let mut peak = held(pid);
            while !done.load(Ordering::Relaxed) {
                let h = held(pid);
                peak.threads = peak.threads.max(h.threads);
                peak.fds = peak.fds.max(h.fds);
                peak.rss_kib = peak.rss_kib.max(h.rss_kib);
                std::thread::sleep(Duration::from_millis(50));
            }
            peak
        });
        let out = busy();
        done.store(true, Ordering::Relaxed);
        (out, sampler.join().expect("sampler"))
    })
}
