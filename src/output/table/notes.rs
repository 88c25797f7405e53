//! The lines under any point's rows: trace, path timing, load, fairness, runs, loss and host
//! CPU.

use super::{marked, TableSink};
use crate::model::PointResult;

impl TableSink {
    /// The lines under a point's rows, whatever its pattern.
    pub(super) fn point_notes(&self, p: &PointResult) -> anyhow::Result<()> {
        if let Some(t) = &p.trace {
            self.under(&t.line())?;
        }
        self.path_notes(p)?;
        if let Some(l) = &p.load {
            self.under(&l.line())?;
        }
        if let Some(f) = &p.fairness {
            for line in f.lines() {
                self.under(&line)?;
            }
        }
        if let Some(u) = &p.under_load {
            for line in u.lines() {
                self.under(&line)?;
            }
        }
        if p.runs > 1 {
            if let Some(m) = &p.headline.over_runs {
                // In the units of the table above it: a latency in us, a rate in Mbit/s.
                let (num, unit): (fn(f64) -> String, &str) = match p.headline.unit.as_str() {
                    "ns" => (crate::units::us, "us"),
                    "bit/s" => (crate::units::mbit, "Mbit/s"),
                    unit => (|v| format!("{v:.2}"), unit),
                };
                self.under(&format!(
                    "over {} runs: {} mean {} {} ±{} ({}){}",
                    m.n,
                    p.headline.name,
                    marked(num(m.mean), &p.headline.validity),
                    unit,
                    m.half_width.map(num).unwrap_or_else(|| "-".into()),
                    m.relative_half_width()
                        .map(|w| format!("{:.2}% of mean", w * 100.0))
                        .unwrap_or_default(),
                    match p.headline.target_met {
                        Some(false) => ", target NOT met",
                        Some(true) => ", target met",
                        None => "",
                    }
                ))?;
                self.footnote("over runs", &p.headline.validity)?;
            }
        }
        for a in p.loss_attribution.iter().filter(|a| a.is_notable()) {
            let size = p.key.size;
            let said = crate::model::host::describe(a, size, &|n| n.to_string());
            self.said_under(&format!("# {said}"), &said)?;
        }
        if self.host_cpu {
            if let Some(h) = &p.host_cpu {
                let line = host_cpu_line(p.key.size, h);
                self.said_under(&line, line.trim_start_matches("# "))?;
            }
        }
        Ok(())
    }
}

/// "# host cpu at 1400 B: client user 12.0% system 30.5% softirq 8.1% (2 CPUs, busiest 97%),
/// server ..." (on one host: "client and server (one host) ...").
fn host_cpu_line(size: u64, h: &crate::model::HostCpu) -> String {
    let one = |c: &crate::model::host::CpuShare| {
        format!(
            "user {:.1}% system {:.1}% softirq {:.1}% ({} CPUs, busiest {:.0}%)",
            c.user * 100.0,
            c.system * 100.0,
            c.softirq * 100.0,
            c.cpus,
            c.busiest_cpu * 100.0
        )
    };
    let show = |c: Option<&crate::model::host::CpuShare>| c.map_or("not read".to_owned(), one);
    if h.same_host {
        format!(
            "# host cpu at {size} B: client and server (one host) {}",
            show(h.client.as_ref())
        )
    } else {
        format!(
            "# host cpu at {size} B: client {}; server {}",
            show(h.client.as_ref()),
            show(h.server.as_ref())
        )
    }
}
