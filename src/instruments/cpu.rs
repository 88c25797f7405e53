//! The host's CPU time from /proc/stat, and each kind's share of it over a point: how busy
//! the whole host was (softirq and system time apart), next to the service demand of the
//! data threads alone.

use crate::model::host::CpuShare;

/// Clock ticks of one CPU line of /proc/stat ("cpu" for all, "cpuN" for one), by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ticks {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

impl Ticks {
    /// Every kind (guest time is already inside user and nice, so it is not added again).
    pub fn total(&self) -> u64 {
        self.user
            + self.nice
            + self.system
            + self.idle
            + self.iowait
            + self.irq
            + self.softirq
            + self.steal
    }

    fn minus(&self, b: &Ticks) -> Ticks {
        Ticks {
            user: self.user.saturating_sub(b.user),
            nice: self.nice.saturating_sub(b.nice),
            system: self.system.saturating_sub(b.system),
            idle: self.idle.saturating_sub(b.idle),
            iowait: self.iowait.saturating_sub(b.iowait),
            irq: self.irq.saturating_sub(b.irq),
            softirq: self.softirq.saturating_sub(b.softirq),
            steal: self.steal.saturating_sub(b.steal),
        }
    }
}

/// The host's CPU time at one moment: the sum line and one line per CPU.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuSnapshot {
    pub total: Ticks,
    pub per_cpu: Vec<Ticks>,
}

fn ticks(fields: &[u64]) -> Ticks {
    let f = |i: usize| fields.get(i).copied().unwrap_or(0);
    Ticks {
        user: f(0),
        nice: f(1),
        system: f(2),
        idle: f(3),
        iowait: f(4),
        irq: f(5),
        softirq: f(6),
        steal: f(7),
    }
}

/// The "cpu" and "cpuN" lines of a /proc/stat text. None without a "cpu" line.
pub fn parse_stat(text: &str) -> Option<CpuSnapshot> {
    let mut total = None;
    let mut per_cpu = Vec::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let Some(name) = words.next() else {
            continue;
        };
        let Some(rest) = name.strip_prefix("cpu") else {
            continue;
        };
        let fields: Vec<u64> = words.map_while(|w| w.parse().ok()).collect();
        if fields.len() < 4 {
            continue;
        }
        if rest.is_empty() {
            total = Some(ticks(&fields));
        } else if rest.chars().all(|c| c.is_ascii_digit()) {
            per_cpu.push(ticks(&fields));
        }
    }
    Some(CpuSnapshot {
        total: total?,
        per_cpu,
    })
}

impl CpuSnapshot {
    pub fn read() -> Option<CpuSnapshot> {
        parse_stat(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// Shares over the time from `before` to `self`; None when no tick passed (a point
    /// shorter than a clock tick says nothing about the host).
    pub fn share_since(&self, before: &CpuSnapshot) -> Option<CpuShare> {
        let d = self.total.minus(&before.total);
        let all = d.total();
        if all == 0 {
            return None;
        }
        let of = |x: u64| x as f64 / all as f64;
        let busiest_cpu = self
            .per_cpu
            .iter()
            .zip(&before.per_cpu)
            .map(|(a, b)| {
                let d = a.minus(b);
                let t = d.total();
                if t == 0 {
                    0.0
                } else {
                    (t - d.idle - d.iowait) as f64 / t as f64
                }
            })
            .fold(0.0, f64::max);
        Some(CpuShare {
            cpus: self.per_cpu.len() as u32,
            user: of(d.user),
            nice: of(d.nice),
            system: of(d.system),
            irq: of(d.irq),
            softirq: of(d.softirq),
            iowait: of(d.iowait),
            steal: of(d.steal),
            idle: of(d.idle),
            busiest_cpu,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "\
cpu  2834203 21907 601546 2298986 16458 0 175065 1803 0 0
cpu0 1380059 10254 300493 1189166 4887 0 92872 861 0 0
cpu1 1454143 11652 301053 1109820 11571 0 82193 941 0 0
intr 152185936 0 0 0
ctxt 408875192
";

    #[test]
    fn proc_stat_is_read_per_kind_total_and_per_cpu() {
        let s = parse_stat(BEFORE).unwrap();
        assert_eq!(s.per_cpu.len(), 2);
        assert_eq!(s.total.user, 2_834_203);
        assert_eq!(s.total.softirq, 175_065);
        assert_eq!(s.total.steal, 1803);
        assert_eq!(s.per_cpu[1].idle, 1_109_820);
        assert_eq!(parse_stat("intr 1 2 3\n"), None);
    }

    #[test]
    fn shares_are_fractions_of_the_ticks_that_passed() {
        let before = parse_stat(BEFORE).unwrap();
        // 200 ticks over 2 CPUs: cpu0 busy (60 user, 30 system, 10 softirq), cpu1 idle.
        let after = parse_stat(
            "\
cpu  2834263 21907 601576 2299086 16458 0 175075 1803 0 0
cpu0 1380119 10254 300523 1189166 4887 0 92882 861 0 0
cpu1 1454143 11652 301053 1109920 11571 0 82193 941 0 0
",
        )
        .unwrap();
        let s = after.share_since(&before).unwrap();
        assert_eq!(s.cpus, 2);
        assert_eq!(s.user, 0.3);
        assert_eq!(s.system, 0.15);
        assert_eq!(s.softirq, 0.05);
        assert_eq!(s.idle, 0.5);
        assert_eq!(s.busiest_cpu, 1.0);
        assert_eq!(after.share_since(&after), None);
    }
}
