//! One run of one test against one target, in this process (a process per run would cost
//! more than a 64-byte ping-pong): measured with nothing printed, saved as an `agent` run
//! labelled `<target>/<test>`, its figures taken for the exporter, its retention applied and
//! its test's regression check made.

use std::time::SystemTime;

use anyhow::Result;

use crate::agent::config::{AgentConfig, Target, Test};
use crate::agent::regress::{self, Comparison};
use crate::model::agent::LastResult;
use crate::model::vocab::{PatternKind, TransportKind};
use crate::model::RunDocument;
use crate::store::db::{Db, Source};

/// The label of a (target, test)'s runs in the results database.
pub fn label(target: &Target, test: &Test) -> String {
    format!("{}/{}", target.name, test.name)
}

/// Measures `test` against `address` (a target's, or any HOST:PORT), labelled `label`. The
/// document of a run that failed is not returned: the error says why, in one line.
pub fn measure(test: &Test, address: &str, label: &str) -> Result<RunDocument> {
    let mut request = test.request.clone();
    request.server.to = Some(address.to_string());
    request.output.label = Some(label.to_string());
    // The agent's runs overlap on this host: a host-wide counter would hold the others'.
    request.host_counters = false;
    let (doc, result) = crate::glue::measure::measure_quietly(&request);
    result?;
    doc.ok_or_else(|| anyhow::anyhow!("the run made no result"))
}

/// A run's figures in base units, for the exporter.
pub fn last_result(doc: &RunDocument, run_id: Option<i64>) -> LastResult {
    let finished_unix_s = doc
        .finished_at
        .as_deref()
        .and_then(|t| humantime::parse_rfc3339_weak(t).ok())
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or(0.0, |d| d.as_secs_f64());
    let valid = doc.complete
        && !doc.points.is_empty()
        && doc
            .points
            .iter()
            .all(|p| p.headline.validity.valid != Some(false));
    let mut out = LastResult {
        run_id,
        finished_unix_s,
        valid,
        ..LastResult::default()
    };
    let Some(p) = doc.points.last() else {
        return out;
    };
    if let Some(l) = &p.latency {
        // One-way for ping-pong (half the round trip, as its headline); rr and crr report the
        // transaction's round trip.
        let scale = if doc.pattern == PatternKind::Pingpong {
            0.5e-9
        } else {
            1e-9
        };
        out.latency_quantiles = vec![
            (0.5, l.rtt.median_ns as f64 * scale),
            (0.9, l.rtt.p90_ns as f64 * scale),
            (0.99, l.rtt.p99_ns as f64 * scale),
        ];
        out.transactions_per_s = Some(l.transactions_per_s);
        // Only a transport that can lose a message counts losses: over TCP, QUIC or a Unix
        // socket `lost` is 0 by construction, and a 0 would claim a measurement never made.
        let can_lose = matches!(doc.transport, TransportKind::Udp | TransportKind::Raw);
        let tried = l.transactions + l.lost;
        if can_lose && tried > 0 {
            out.loss_ratio = Some(l.lost as f64 / tried as f64);
        }
    }
    if let Some(s) = &p.stream {
        if !s.totals.is_empty() {
            out.sender_bytes_per_s = Some(s.totals.iter().map(|t| t.sender_bits_per_s / 8.0).sum());
            out.receiver_bytes_per_s =
                Some(s.totals.iter().map(|t| t.receiver_bits_per_s / 8.0).sum());
            if let Some(share) = s.loss_share() {
                out.loss_ratio = Some(share);
            }
            let retrans: Vec<u64> = s.totals.iter().filter_map(|t| t.retransmits).collect();
            if !retrans.is_empty() {
                out.retransmits = Some(retrans.iter().sum());
            }
        }
    }
    if let Some(u) = &p.under_load {
        out.rpm = Some(u.loaded.rpm);
    }
    out
}

/// Payload bytes the run moved, both ways (for the traffic budget).
pub fn bytes_moved(doc: &RunDocument) -> u64 {
    doc.points
        .iter()
        .map(|p| {
            let latency = p.latency.as_ref().map_or(0, |l| {
                l.transactions
                    .saturating_mul(p.request_size.saturating_add(p.response_size))
            });
            let stream = p.stream.as_ref().map_or(0, |s| {
                s.totals
                    .iter()
                    .map(|t| t.bytes_sent.max(t.bytes_received))
                    .sum::<u64>()
            });
            latency.saturating_add(stream)
        })
        .sum()
}

/// What saving a run found.
pub struct Saved {
    pub id: i64,
    /// The comparison with the baseline, once both windows are full.
    pub comparison: Option<Comparison>,
    pub headline: &'static str,
}

/// Saves the run as an agent run, compares the test's recent runs with its baseline and
/// marks the run when they regressed. Retention is the caller's ([`retain`]), less often.
pub fn save(db: &Db, config: &AgentConfig, doc: &RunDocument, label: &str) -> Result<Saved> {
    let id = db.insert(doc, Source::Agent)?;
    let stream = doc.pattern == PatternKind::Stream;
    let want = config.regression.recent_runs + config.regression.baseline_runs;
    let figures = db.agent_figures(label, want)?;
    // The headline figure of each run: receiver throughput for streams (higher is better),
    // latency otherwise (lower is better); a run whose headline is not valid is left out
    // (its figure is not a measurement).
    let values: Vec<f64> = figures
        .iter()
        .filter(|f| !f.note.as_deref().is_some_and(|n| n.starts_with('!')))
        .filter_map(|f| {
            if stream {
                f.throughput_bits_per_s
            } else {
                f.latency_ns
            }
        })
        .collect();
    let comparison = regress::compare(&values, &config.regression, stream);
    let headline = if stream {
        "receiver throughput"
    } else if doc.pattern == PatternKind::Pingpong {
        "one-way latency"
    } else {
        "latency"
    };
    if let Some(c) = comparison.as_ref().filter(|c| c.regressed()) {
        db.mark_regression(id, &describe(headline, stream, c, config))?;
    }
    Ok(Saved {
        id,
        comparison,
        headline,
    })
}

/// Applies the config's retention to the agent's runs; how many it deleted.
pub fn retain(db: &Db, config: &AgentConfig) -> Result<u64> {
    let r = &config.retention;
    if r.max_age.is_none() && r.max_runs.is_none() {
        return Ok(0);
    }
    // This agent's own labels: another agent's runs in a shared database are its own.
    let labels: Vec<String> = crate::agent::jobs(config)
        .iter()
        .map(|j| label(&config.targets[j.target], &config.tests[j.test]))
        .collect();
    db.apply_agent_retention(&labels, r.max_age, r.max_runs, SystemTime::now())
}

/// One line: the figure, both windows' means, the change and its interval.
pub fn describe(headline: &str, stream: bool, c: &Comparison, config: &AgentConfig) -> String {
    let show = |v: f64| {
        if stream {
            format!("{:.2} Mbit/s", v / 1e6)
        } else {
            format!("{:.1} us", v / 1e3)
        }
    };
    format!(
        "{headline} baseline {} ({} runs) recent {} ({} runs) change {:+.1}% [{:+.1}%, {:+.1}%] beyond {}%",
        show(c.baseline),
        config.regression.baseline_runs,
        show(c.recent),
        config.regression.recent_runs,
        c.change_percent(),
        c.ci_low_percent,
        c.ci_high_percent,
        config.regression.threshold_percent,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ping_pong_document_gives_one_way_quantiles_in_seconds() {
        let doc = crate::store::db::tests::report("pingpong", 1, 1000.0);
        let last = last_result(&doc, Some(3));
        assert_eq!(last.run_id, Some(3));
        assert!(last.valid);
        assert_eq!(last.latency_quantiles.len(), 3);
        let p = &doc.points[0];
        let rtt = p.latency.as_ref().unwrap().rtt.median_ns as f64;
        assert_eq!(last.latency_quantiles[0], (0.5, rtt / 2.0 * 1e-9));
        assert!(last.sender_bytes_per_s.is_none());
        assert!(last.rpm.is_none());
        // A reliable transport measured no loss: none is exported, not a 0.
        assert_eq!(doc.transport, TransportKind::Tcp);
        assert!(last.loss_ratio.is_none());
        let mut udp = doc.clone();
        udp.transport = TransportKind::Udp;
        assert_eq!(last_result(&udp, None).loss_ratio, Some(0.0));
    }

    /// A ping-pong whose round trips were faster than the lab link's delay allows: the
    /// physics guard flags the headline, and the exporter then serves
    /// `wirebench_result_valid 0` for it, its figures still exported beside the 0.
    #[test]
    fn a_run_the_physics_guard_flagged_is_exported_with_result_valid_0() {
        use crate::lab::config::{DirectionConfig, Framing, LinkConfig, Mechanism};
        use crate::metrics::MetricsSource;
        use crate::model::agent::{AgentSnapshot, ServerSnapshot, TestState};
        use crate::plan::guard::{self, Facts};

        // The document's round trips: 1 us minimum; the link's: 1 ms each way.
        let mut doc = crate::store::db::tests::report("pingpong", 1, 1000.0);
        let d = DirectionConfig {
            rate_bits_per_s: Some(1e9),
            delay: std::time::Duration::from_millis(1),
            ..DirectionConfig::default()
        };
        let link = LinkConfig {
            forward: d,
            back: d,
            mtu: 1500,
            mechanism: Mechanism::Auto,
            framing: Framing::Frame,
        };
        let facts = Facts {
            transport: TransportKind::Tcp,
            lab: Some(&link),
            same_host: false,
            pingpong: true,
        };
        let before = last_result(&doc, Some(1));
        assert!(before.valid, "the document alone is valid");
        guard::point(&mut doc.points[0], facts);
        assert_eq!(doc.points[0].headline.validity.valid, Some(false));
        let last = last_result(&doc, Some(1));
        assert!(!last.valid);
        assert_eq!(last.latency_quantiles, before.latency_quantiles);

        struct One(TestState);
        impl MetricsSource for One {
            fn agent(&self) -> Option<AgentSnapshot> {
                Some(AgentSnapshot {
                    tests: vec![self.0.clone()],
                    running: 0,
                    cpu_seconds: 0.0,
                })
            }
            fn server(&self) -> Option<ServerSnapshot> {
                None
            }
            fn probe(&self, _: &str, _: &str) -> std::result::Result<TestState, String> {
                Err("no probe here".into())
            }
        }
        let source = One(TestState {
            target: "far".into(),
            test: "ping64".into(),
            transport: "tcp".into(),
            pattern: "pingpong".into(),
            size_bytes: 64,
            runs_total: 1,
            last: Some(last),
            ..TestState::default()
        });
        let probes = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let reply = crate::metrics::http::route(&source, "GET", "/metrics", None, &probes);
        let body = reply.body;
        let valid: Vec<&str> = body
            .lines()
            .filter(|l| l.starts_with("wirebench_result_valid{"))
            .collect();
        assert_eq!(valid.len(), 1, "{body}");
        assert!(valid[0].ends_with(" 0.0"), "{}", valid[0]);
        assert!(valid[0].contains("target=\"far\""), "{}", valid[0]);
        assert!(
            body.lines()
                .any(|l| l.starts_with("wirebench_latency_seconds{")
                    && l.contains("quantile=\"0.5\"")),
            "{body}"
        );
    }
}
