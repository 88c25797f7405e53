//! The metric families of one scrape, built from the snapshot its source gives: a
//! prometheus-client `Collector` over plain values (const gauges and counters) registered in a
//! registry made for that scrape. The agent and the server own their counters; copying them
//! into the client crate's atomics would keep a second set of books, and a registry built per
//! scrape drops the series of a test the agent no longer runs.

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

use crate::model::agent::{ServerSnapshot, TestState};

/// A label set: (name, value) pairs, in the order they are written.
pub type Labels = Vec<(String, String)>;

/// How a family is typed, which decides the suffix its name carries (`_total`, `_info`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    /// A gauge-like value that carries a `quantile` label: the exposition conventions keep
    /// that label to summaries, which the client crate cannot write (a summary needs the
    /// `_sum` and `_count` of every observation; a run gives its quantiles), so the family
    /// is untyped (OpenMetrics `unknown`), as promtool's lint requires.
    Quantiles,
    Counter,
    Info,
}

/// One sample's value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    Gauge(f64),
    Counter(u64),
    /// A counter of seconds (CPU time).
    CounterSeconds(f64),
    /// An info metric: its value is 1, its content the labels.
    Info,
}

/// One metric family with its samples.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// The name as the Prometheus text format writes it (with `_total`, `_info`): one of
    /// [`super::METRIC_NAMES`].
    pub name: &'static str,
    pub help: &'static str,
    pub unit: Option<Unit>,
    pub kind: Kind,
    pub samples: Vec<(Labels, Value)>,
}

impl Family {
    fn new(name: &'static str, help: &'static str, unit: Option<Unit>, kind: Kind) -> Family {
        Family {
            name,
            help,
            unit,
            kind,
            samples: Vec::new(),
        }
    }

    /// The name the client crate is given: it appends the unit and the type's suffix itself.
    fn base_name(&self) -> &'static str {
        let mut base = self.name;
        let suffix = match self.kind {
            Kind::Counter => "_total",
            Kind::Info => "_info",
            Kind::Gauge | Kind::Quantiles => "",
        };
        base = base.strip_suffix(suffix).unwrap_or(base);
        if let Some(unit) = &self.unit {
            let unit = format!("_{}", unit.as_str());
            base = base.strip_suffix(unit.as_str()).unwrap_or(base);
        }
        base
    }

    fn metric_type(&self) -> MetricType {
        match self.kind {
            Kind::Gauge => MetricType::Gauge,
            Kind::Quantiles => MetricType::Unknown,
            Kind::Counter => MetricType::Counter,
            Kind::Info => MetricType::Info,
        }
    }
}

/// The outcome of one `/probe`: whether the run succeeded and how long it took, seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeOutcome {
    pub success: bool,
    pub duration_s: f64,
}

/// What one scrape exposes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Exposed {
    /// Each (target, test): its counters, its info and, once it has one, its last result.
    pub tests: Vec<TestState>,
    /// The agent itself: runs under way and its CPU seconds (absent: no agent).
    pub agent: Option<(u64, f64)>,
    pub server: Option<ServerSnapshot>,
    /// `wirebench_build_info` (on /metrics, not on /probe).
    pub build_info: bool,
    pub probe: Option<ProbeOutcome>,
}

/// The labels no target label may take: the exporter's own, and Prometheus's reserved ones
/// (`__` prefixed; `instance` and `job` are the scrape's).
const RESERVED: &[&str] = &[
    "target",
    "test",
    "transport",
    "pattern",
    "size",
    "quantile",
    "side",
    "kind",
    "version",
    "instance",
    "job",
];

/// A target's label name made a valid Prometheus label name that cannot shadow ours: other
/// characters become `_`, and a reserved or `__` name is prefixed with `label_`. (The config
/// is the operator's, so a name is mended rather than dropped unseen.)
pub fn label_name(name: &str) -> String {
    let mut out: String = name
        .chars()
        .enumerate()
        .map(|(i, c)| {
            if c.is_ascii_alphabetic() || c == '_' || (i > 0 && c.is_ascii_digit()) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() || out.starts_with("__") || RESERVED.contains(&out.as_str()) {
        out = format!("label_{out}");
    }
    out
}

fn pair(k: &str, v: impl Into<String>) -> (String, String) {
    (k.to_string(), v.into())
}

/// target, test: the counters' labels.
fn test_labels(t: &TestState) -> Labels {
    vec![
        pair("target", t.target.as_str()),
        pair("test", t.test.as_str()),
    ]
}

/// target, test, transport, pattern, size: the result gauges' labels.
fn result_labels(t: &TestState) -> Labels {
    let mut l = test_labels(t);
    l.push(pair("transport", t.transport.as_str()));
    l.push(pair("pattern", t.pattern.as_str()));
    l.push(pair("size", t.size_bytes.to_string()));
    l
}

fn with(mut labels: Labels, k: &str, v: impl Into<String>) -> Labels {
    labels.push(pair(k, v));
    labels
}

fn flag(b: bool) -> Value {
    Value::Gauge(if b { 1.0 } else { 0.0 })
}

impl Exposed {
    /// Every family with at least one sample, in a fixed order (that of METRIC_NAMES).
    pub fn families(&self) -> Vec<Family> {
        use Kind::{Counter, Gauge, Info, Quantiles};
        let mut latency = Family::new(
            "wirebench_latency_seconds",
            "One-way latency of the last run (RTT/2 for pingpong, RTT for rr and crr), by quantile",
            Some(Unit::Seconds),
            Quantiles,
        );
        let mut tps = Family::new(
            "wirebench_transactions_per_second",
            "Transactions per second of the last run",
            None,
            Gauge,
        );
        let mut throughput = Family::new(
            "wirebench_throughput_bytes_per_second",
            "Payload throughput of the last run, bytes per second, as each side measured it",
            None,
            Gauge,
        );
        let mut loss = Family::new(
            "wirebench_loss_ratio",
            "Lost over sent messages in the last run",
            None,
            Gauge,
        );
        let mut retransmits = Family::new(
            "wirebench_retransmitted_segments",
            "TCP segments retransmitted during the last run",
            None,
            Gauge,
        );
        let mut rpm = Family::new(
            "wirebench_responsiveness_rpm",
            "Round trips per minute under load in the last run",
            None,
            Gauge,
        );
        let mut valid = Family::new(
            "wirebench_result_valid",
            "1 when the last run's figures passed the physics guard, 0 when they were flagged",
            None,
            Gauge,
        );
        let mut finished = Family::new(
            "wirebench_last_run_timestamp_seconds",
            "When the last successful run finished, seconds since the Unix epoch",
            Some(Unit::Seconds),
            Gauge,
        );
        let mut regressed = Family::new(
            "wirebench_regressed",
            "1 while the latest comparison with the baseline window found a regression",
            None,
            Gauge,
        );
        let mut runs = Family::new(
            "wirebench_runs_total",
            "Runs of the test finished",
            None,
            Counter,
        );
        let mut failures = Family::new(
            "wirebench_run_failures_total",
            "Runs of the test that failed",
            None,
            Counter,
        );
        let mut regressions = Family::new(
            "wirebench_regressions_total",
            "Regressions found by comparing recent runs with the baseline window",
            None,
            Counter,
        );
        let mut info = Family::new(
            "wirebench_test_info",
            "A test against a target: its transport, pattern, size and the target's labels",
            None,
            Info,
        );
        for t in &self.tests {
            let base = test_labels(t);
            let full = result_labels(t);
            runs.samples
                .push((base.clone(), Value::Counter(t.runs_total)));
            failures
                .samples
                .push((base.clone(), Value::Counter(t.failures_total)));
            regressions
                .samples
                .push((base, Value::Counter(t.regressions_total)));
            let mut meta = full.clone();
            for (k, v) in &t.labels {
                // Two names mended alike ("rack-2", "rack_2") must not make one label twice.
                let mut name = label_name(k);
                while meta.iter().any(|(n, _)| *n == name) {
                    name.push('_');
                }
                meta.push((name, v.clone()));
            }
            info.samples.push((meta, Value::Info));
            // Before the first result there is nothing to say: no gauge stands for "unknown".
            let Some(last) = &t.last else { continue };
            for &(q, s) in &last.latency_quantiles {
                let labels = with(full.clone(), "quantile", q.to_string());
                latency.samples.push((labels, Value::Gauge(s)));
            }
            if let Some(v) = last.transactions_per_s {
                tps.samples.push((full.clone(), Value::Gauge(v)));
            }
            for (side, v) in [
                ("sender", last.sender_bytes_per_s),
                ("receiver", last.receiver_bytes_per_s),
            ] {
                if let Some(v) = v {
                    let labels = with(full.clone(), "side", side);
                    throughput.samples.push((labels, Value::Gauge(v)));
                }
            }
            if let Some(v) = last.loss_ratio {
                loss.samples.push((full.clone(), Value::Gauge(v)));
            }
            if let Some(v) = last.retransmits {
                retransmits
                    .samples
                    .push((full.clone(), Value::Gauge(v as f64)));
            }
            if let Some(v) = last.rpm {
                rpm.samples.push((full.clone(), Value::Gauge(v)));
            }
            valid.samples.push((full.clone(), flag(last.valid)));
            finished
                .samples
                .push((full.clone(), Value::Gauge(last.finished_unix_s)));
            regressed.samples.push((full, flag(t.regressed)));
        }

        let mut running = Family::new(
            "wirebench_agent_running_runs",
            "Runs the agent has started and not yet finished",
            None,
            Gauge,
        );
        let mut cpu = Family::new(
            "wirebench_agent_cpu_seconds_total",
            "CPU time the agent has used since it started",
            Some(Unit::Seconds),
            Counter,
        );
        if let Some((r, c)) = self.agent {
            running.samples.push((Vec::new(), Value::Gauge(r as f64)));
            cpu.samples.push((Vec::new(), Value::CounterSeconds(c)));
        }
        let mut build = Family::new(
            "wirebench_build_info",
            "The wirebench version serving these metrics",
            None,
            Info,
        );
        if self.build_info {
            let version = vec![pair("version", env!("CARGO_PKG_VERSION"))];
            build.samples.push((version, Value::Info));
        }
        let mut success = Family::new(
            "wirebench_probe_success",
            "1 when the probe's run succeeded, 0 when it failed",
            None,
            Gauge,
        );
        let mut duration = Family::new(
            "wirebench_probe_duration_seconds",
            "How long the probe took",
            Some(Unit::Seconds),
            Gauge,
        );
        if let Some(p) = self.probe {
            success.samples.push((Vec::new(), flag(p.success)));
            duration
                .samples
                .push((Vec::new(), Value::Gauge(p.duration_s)));
        }
        let mut sessions = Family::new(
            "wirebench_server_active_sessions",
            "Sessions the server is serving now",
            None,
            Gauge,
        );
        let mut sessions_total = Family::new(
            "wirebench_server_sessions_total",
            "Sessions the server has admitted since it started",
            None,
            Counter,
        );
        let mut refusals = Family::new(
            "wirebench_server_refusals_total",
            "Connections and sessions the server refused or ended with an error, by kind",
            None,
            Counter,
        );
        let mut received = Family::new(
            "wirebench_server_received_bytes_total",
            "Payload bytes the server's data connections received",
            Some(Unit::Bytes),
            Counter,
        );
        let mut sent = Family::new(
            "wirebench_server_sent_bytes_total",
            "Payload bytes the server's data connections sent",
            Some(Unit::Bytes),
            Counter,
        );
        if let Some(s) = &self.server {
            sessions
                .samples
                .push((Vec::new(), Value::Gauge(s.sessions_active as f64)));
            sessions_total
                .samples
                .push((Vec::new(), Value::Counter(s.sessions_total)));
            for (kind, n) in &s.refusals_total {
                let labels = vec![pair("kind", kind.as_str())];
                refusals.samples.push((labels, Value::Counter(*n)));
            }
            received
                .samples
                .push((Vec::new(), Value::Counter(s.bytes_received_total)));
            sent.samples
                .push((Vec::new(), Value::Counter(s.bytes_sent_total)));
        }
        [
            latency,
            tps,
            throughput,
            loss,
            retransmits,
            rpm,
            valid,
            finished,
            regressed,
            runs,
            failures,
            regressions,
            info,
            running,
            cpu,
            build,
            success,
            duration,
            sessions,
            sessions_total,
            refusals,
            received,
            sent,
        ]
        .into_iter()
        .filter(|f| !f.samples.is_empty())
        .collect()
    }

    /// A registry holding this scrape's families, ready to encode.
    pub fn registry(&self) -> Registry {
        registry(self.families())
    }
}

/// A registry holding these families, ready to encode.
pub fn registry(families: Vec<Family>) -> Registry {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Families(families)));
    registry
}

/// Whether two of these families would share one name in OpenMetrics, which names a
/// counter's family without its `_total` and an info's without its `_info` (a gauge
/// `x_sessions` beside a counter `x_sessions_total` would: hence the server's gauge is
/// `wirebench_server_active_sessions`). Such a body would be invalid OpenMetrics (a scraper
/// rejects the second `# TYPE`); the exporter then answers in the text format 0.0.4, which
/// keeps the suffixes.
pub fn clash_in_openmetrics(families: &[Family]) -> bool {
    let mut names: Vec<&str> = families.iter().map(Family::base_name).collect();
    names.sort_unstable();
    names.windows(2).any(|w| w[0] == w[1])
}

/// The families of one scrape as the client crate's collector.
#[derive(Debug)]
struct Families(Vec<Family>);

impl Collector for Families {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        for f in &self.0 {
            let mut metric = encoder.encode_descriptor(
                f.base_name(),
                f.help,
                f.unit.as_ref(),
                f.metric_type(),
            )?;
            for (labels, value) in &f.samples {
                let mut sample = metric.encode_family(labels)?;
                match *value {
                    Value::Gauge(v) => ConstGauge::new(v).encode(sample)?,
                    Value::Counter(v) => ConstCounter::new(v).encode(sample)?,
                    Value::CounterSeconds(v) => ConstCounter::new(v).encode(sample)?,
                    Value::Info => sample.encode_info(&Labels::new())?,
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::metrics::exposition::{encode, Format};
    use crate::metrics::METRIC_NAMES;
    use crate::model::agent::LastResult;

    /// Two tests, the second without a result yet; an agent; a server; a probe.
    pub(crate) fn sample() -> Exposed {
        let ping = TestState {
            target: "site-b".into(),
            test: "ping64".into(),
            labels: BTreeMap::from([
                ("region".to_string(), "eu".to_string()),
                ("target".to_string(), "shadow".to_string()),
                ("rack-2".to_string(), "r2".to_string()),
                ("rack_2".to_string(), "r3".to_string()),
            ]),
            transport: "tcp".into(),
            pattern: "pingpong".into(),
            size_bytes: 64,
            throughput: false,
            runs_total: 12,
            failures_total: 1,
            regressions_total: 2,
            last: Some(LastResult {
                run_id: Some(7),
                finished_unix_s: 1_800_000_000.5,
                valid: true,
                latency_quantiles: vec![(0.5, 3.1e-5), (0.9, 4e-5), (0.99, 0.000125)],
                transactions_per_s: Some(16000.0),
                sender_bytes_per_s: Some(1.25e9),
                receiver_bytes_per_s: Some(1.2e9),
                loss_ratio: Some(0.001),
                retransmits: Some(3),
                rpm: Some(2400.0),
            }),
            regressed: true,
        };
        let bulk = TestState {
            target: "site-c".into(),
            test: "bulk".into(),
            transport: "udp".into(),
            pattern: "stream".into(),
            size_bytes: 1400,
            throughput: true,
            ..TestState::default()
        };
        Exposed {
            tests: vec![ping, bulk],
            agent: Some((1, 2.5)),
            server: Some(ServerSnapshot {
                sessions_active: 1,
                sessions_total: 5,
                refusals_total: BTreeMap::from([("busy".to_string(), 2)]),
                bytes_received_total: 1000,
                bytes_sent_total: 2000,
            }),
            build_info: true,
            probe: Some(ProbeOutcome {
                success: true,
                duration_s: 0.25,
            }),
        }
    }

    fn text(e: &Exposed) -> String {
        encode(&e.registry(), Format::Text).unwrap()
    }

    /// The family names a text-format body declares in its `# TYPE` lines.
    fn declared(body: &str) -> Vec<String> {
        body.lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .map(|l| l.split(' ').next().unwrap().to_string())
            .collect()
    }

    #[test]
    fn every_family_of_the_contract_is_served_when_its_data_is() {
        let body = text(&sample());
        assert_eq!(declared(&body), METRIC_NAMES);
    }

    #[test]
    fn exact_lines_of_results_counters_and_info() {
        let body = text(&sample());
        let lines: Vec<&str> = body.lines().collect();
        let base = r#"target="site-b",test="ping64",transport="tcp",pattern="pingpong",size="64""#;
        for want in [
            format!(r#"wirebench_latency_seconds{{{base},quantile="0.5"}} 0.000031"#),
            format!(r#"wirebench_latency_seconds{{{base},quantile="0.99"}} 0.000125"#),
            format!(r#"wirebench_throughput_bytes_per_second{{{base},side="receiver"}} 1200000000.0"#),
            format!(r#"wirebench_retransmitted_segments{{{base}}} 3.0"#),
            format!(r#"wirebench_regressed{{{base}}} 1.0"#),
            r#"wirebench_runs_total{target="site-b",test="ping64"} 12"#.to_string(),
            r#"wirebench_runs_total{target="site-c",test="bulk"} 0"#.to_string(),
            format!(r#"wirebench_test_info{{{base},rack_2="r2",rack_2_="r3",region="eu",label_target="shadow"}} 1"#),
            r#"wirebench_test_info{target="site-c",test="bulk",transport="udp",pattern="stream",size="1400"} 1"#.to_string(),
            "wirebench_agent_cpu_seconds_total 2.5".to_string(),
            r#"wirebench_build_info{version=""#.to_string() + env!("CARGO_PKG_VERSION") + r#""} 1"#,
            r#"wirebench_server_refusals_total{kind="busy"} 2"#.to_string(),
            "wirebench_server_sent_bytes_total 2000".to_string(),
            "# TYPE wirebench_test_info gauge".to_string(),
            "# TYPE wirebench_runs_total counter".to_string(),
        ] {
            assert!(lines.contains(&want.as_str()), "missing {want}\n{body}");
        }
        // The test without a result has no result gauge: only its counters and its info.
        let bulk: Vec<&str> = lines
            .iter()
            .filter(|l| l.contains(r#"target="site-c""#))
            .map(|l| l.split('{').next().unwrap())
            .collect();
        assert_eq!(
            bulk,
            [
                "wirebench_runs_total",
                "wirebench_run_failures_total",
                "wirebench_regressions_total",
                "wirebench_test_info"
            ]
        );
    }

    #[test]
    fn counters_end_in_total_and_absent_figures_are_not_zeros() {
        for f in sample().families() {
            assert_eq!(
                f.kind == Kind::Counter,
                f.name.ends_with("_total"),
                "{}",
                f.name
            );
            assert_eq!(
                f.kind == Kind::Info,
                f.name.ends_with("_info"),
                "{}",
                f.name
            );
        }
        let mut e = sample();
        let last = e.tests[0].last.as_mut().unwrap();
        last.loss_ratio = None;
        last.rpm = None;
        last.sender_bytes_per_s = None;
        let body = text(&e);
        assert!(!body.contains("wirebench_loss_ratio"));
        assert!(!body.contains("wirebench_responsiveness_rpm"));
        assert!(!body.contains(r#"side="sender""#));
        assert!(body.contains(r#"side="receiver""#));
    }

    #[test]
    fn no_two_families_share_a_name_in_openmetrics() {
        let server = Exposed {
            server: sample().server,
            ..Exposed::default()
        };
        assert!(!clash_in_openmetrics(&server.families()));
        let mut clashing = server.families();
        clashing.push(Family::new(
            "wirebench_server_sessions",
            "a gauge named as the counter's OpenMetrics family",
            None,
            Kind::Gauge,
        ));
        assert!(clash_in_openmetrics(&clashing));
        let agent = Exposed {
            server: None,
            ..sample()
        };
        assert!(!clash_in_openmetrics(&agent.families()));
    }

    #[test]
    fn target_label_names_are_mended_not_dropped() {
        assert_eq!(label_name("region"), "region");
        assert_eq!(label_name("rack-2"), "rack_2");
        assert_eq!(label_name("2nd"), "_nd");
        assert_eq!(label_name("test"), "label_test");
        assert_eq!(label_name("__name__"), "label___name__");
        assert_eq!(label_name(""), "label_");
    }
}
