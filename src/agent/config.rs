//! The agent's config file: who to measure (targets), what with (tests, each a `run` request
//! as a study file's `[run]` table), how often, within which budgets. TOML, read once and
//! checked whole before anything is measured: every test's request is built and validated up
//! front, so a typo fails at start, not at the first run of that test hours later.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use serde::Deserialize;

use crate::model::vocab::PatternKind;
use crate::request::Request;

/// Default most runs at once: enough for latency tests to several targets side by side on
/// a small host, few enough that they do not disturb one another's timing.
pub const DEFAULT_MAX_CONCURRENT: usize = 4;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileText {
    #[serde(default)]
    agent: AgentText,
    #[serde(default)]
    retention: RetentionText,
    #[serde(default)]
    regression: Regression,
    #[serde(default, rename = "target")]
    targets: Vec<TargetText>,
    #[serde(default, rename = "test")]
    tests: Vec<TestText>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentText {
    name: Option<String>,
    metrics: Option<String>,
    seed: Option<u64>,
    cpu_budget_percent: Option<f64>,
    traffic_budget_bytes_per_s: Option<f64>,
    max_concurrent: Option<usize>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RetentionText {
    max_age: Option<String>,
    max_runs: Option<u64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct TargetText {
    name: String,
    address: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct TestText {
    name: String,
    period: String,
    slip: Option<String>,
    targets: Option<Vec<String>>,
    run: Request,
}

/// How a test's recent runs are compared with its baseline (as `compare` compares runs).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Regression {
    /// Runs before the recent window that it is compared with.
    pub baseline_runs: usize,
    /// The latest runs.
    pub recent_runs: usize,
    /// The equivalence margin: a change smaller than this is never a regression.
    pub threshold_percent: f64,
    /// Confidence level of the interval of the change.
    pub confidence: f64,
}

impl Default for Regression {
    fn default() -> Regression {
        Regression {
            baseline_runs: 10,
            recent_runs: 5,
            threshold_percent: 10.0,
            confidence: 0.95,
        }
    }
}

/// The whole config, checked.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub name: Option<String>,
    pub metrics: Option<SocketAddr>,
    pub seed: Option<u64>,
    /// Percent of one CPU (the agent's own time over the last minute).
    pub cpu_budget_percent: Option<f64>,
    /// Bytes per second its runs moved, averaged over the last minute.
    pub traffic_budget_bytes_per_s: Option<f64>,
    pub max_concurrent: usize,
    pub retention: Retention,
    pub regression: Regression,
    pub targets: Vec<Target>,
    pub tests: Vec<Test>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Retention {
    pub max_age: Option<Duration>,
    pub max_runs: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub name: String,
    /// A wirebench server's control address, HOST:PORT.
    pub address: String,
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Test {
    pub name: String,
    pub period: Duration,
    pub slip: Duration,
    /// Indexes into [`AgentConfig::targets`].
    pub targets: Vec<usize>,
    /// The run, without its server (set per target) and printing nothing.
    pub request: Request,
    /// The message (or write) size of its one point, bytes.
    pub size_bytes: u64,
    /// Moves bulk data (stream, or with load or competing flows): two such runs to one
    /// target never overlap.
    pub throughput: bool,
}

/// Reads a duration as text: `parse_duration`'s units, and `d` (days) for retention.
pub fn duration(text: &str) -> std::result::Result<Duration, String> {
    let t = text.trim();
    if let Some(days) = t.strip_suffix('d') {
        let n: f64 = days
            .trim()
            .parse()
            .map_err(|_| format!("invalid duration {text:?}: not a number of days"))?;
        if !(n >= 0.0 && n.is_finite() && n < 1e6) {
            return Err(format!("invalid duration {text:?}: days from 0 to 1e6"));
        }
        return Ok(Duration::from_secs_f64(n * 86_400.0));
    }
    crate::units::parse_duration(t)
}

impl AgentConfig {
    /// Reads and checks the file; every error one line naming the file.
    pub fn read(path: &Path) -> Result<AgentConfig> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the agent config {}", path.display()))?;
        AgentConfig::parse(&text).with_context(|| format!("{}", path.display()))
    }

    pub fn parse(text: &str) -> Result<AgentConfig> {
        let file: FileText = toml::from_str(text).map_err(|e| {
            // toml's own text spans lines (the source with a caret under it): one line here.
            let line = e
                .span()
                .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
            let message = e.message().trim().replace('\n', " ");
            match line {
                Some(l) => anyhow!("line {l}: {message}"),
                None => anyhow!("{message}"),
            }
        })?;
        check(file)
    }
}

fn check(file: FileText) -> Result<AgentConfig> {
    let a = &file.agent;
    let metrics = match &a.metrics {
        Some(m) => {
            Some(crate::metrics::parse_address(m).map_err(|why| anyhow!("agent.metrics {why}"))?)
        }
        None => None,
    };
    if let Some(p) = a.cpu_budget_percent {
        if !(p > 0.0 && p.is_finite()) {
            bail!("agent.cpu_budget_percent = {p}: must be above 0 (5.0 = 5% of one CPU)");
        }
    }
    if let Some(b) = a.traffic_budget_bytes_per_s {
        if !(b > 0.0 && b.is_finite()) {
            bail!("agent.traffic_budget_bytes_per_s = {b}: must be above 0");
        }
    }
    let max_concurrent = a.max_concurrent.unwrap_or(DEFAULT_MAX_CONCURRENT);
    if max_concurrent == 0 {
        bail!("agent.max_concurrent = 0: at least one run must be able to start");
    }
    let max_age = match &file.retention.max_age {
        Some(t) => {
            let d = duration(t).map_err(|e| anyhow!("retention.max_age: {e}"))?;
            if d.is_zero() {
                bail!("retention.max_age = {t:?}: must be above 0");
            }
            Some(d)
        }
        None => None,
    };
    if file.retention.max_runs == Some(0) {
        bail!("retention.max_runs = 0: would delete every run as it is saved");
    }
    let r = &file.regression;
    if r.baseline_runs < crate::stats::between_runs::MIN_RUNS
        || r.recent_runs < crate::stats::between_runs::MIN_RUNS
    {
        bail!(
            "regression.baseline_runs and regression.recent_runs: at least {} each (a spread needs two runs)",
            crate::stats::between_runs::MIN_RUNS
        );
    }
    if !(r.threshold_percent >= 0.0 && r.threshold_percent.is_finite()) {
        bail!(
            "regression.threshold_percent = {}: must be 0 or above",
            r.threshold_percent
        );
    }
    if !(r.confidence > 0.0 && r.confidence < 1.0) {
        bail!(
            "regression.confidence = {}: a level strictly between 0 and 1 (0.95)",
            r.confidence
        );
    }
    if file.targets.is_empty() {
        bail!("no [[target]]: the agent needs at least one server to measure");
    }
    if file.tests.is_empty() {
        bail!("no [[test]]: the agent needs at least one test to run");
    }
    let mut names = BTreeSet::new();
    let mut targets = Vec::new();
    for t in &file.targets {
        plain_text(&format!("target {:?}", t.name), &t.name)?;
        plain_text(&format!("target {:?}: address", t.name), &t.address)?;
        for (k, v) in &t.labels {
            plain_text(&format!("target {:?}: label {k:?}", t.name), k)?;
            plain_text(&format!("target {:?}: label {k:?}", t.name), v)?;
        }
        if t.name.trim().is_empty() || t.name.contains('/') {
            bail!(
                "target {:?}: a name must be non-empty and without '/'",
                t.name
            );
        }
        if !names.insert(t.name.clone()) {
            bail!("target {:?} is given twice", t.name);
        }
        if t.address.trim().is_empty() {
            bail!("target {:?}: address is empty", t.name);
        }
        targets.push(Target {
            name: t.name.clone(),
            address: t.address.clone(),
            labels: t.labels.clone(),
        });
    }
    let mut test_names = BTreeSet::new();
    let mut tests = Vec::new();
    for t in &file.tests {
        let at = |key: &str| format!("test {:?}: {key}", t.name);
        plain_text(&format!("test {:?}", t.name), &t.name)?;
        if t.name.trim().is_empty() || t.name.contains('/') {
            bail!(
                "test {:?}: a name must be non-empty and without '/'",
                t.name
            );
        }
        if !test_names.insert(t.name.clone()) {
            bail!("test {:?} is given twice", t.name);
        }
        let period = duration(&t.period).map_err(|e| anyhow!("{}: {e}", at("period")))?;
        if period.is_zero() {
            bail!("{} = {:?}: must be above 0", at("period"), t.period);
        }
        let slip = match &t.slip {
            Some(s) => duration(s).map_err(|e| anyhow!("{}: {e}", at("slip")))?,
            None => period / 10,
        };
        if slip > period {
            bail!(
                "{} {:?} is longer than its period {:?}",
                at("slip"),
                t.slip.as_deref().unwrap_or(""),
                t.period
            );
        }
        let indexes = match &t.targets {
            None => (0..targets.len()).collect(),
            Some(list) => {
                if list.is_empty() {
                    bail!(
                        "{} is empty: name a target, or leave it out for every target",
                        at("targets")
                    );
                }
                let mut out = Vec::new();
                for n in list {
                    let i = targets
                        .iter()
                        .position(|x| &x.name == n)
                        .ok_or_else(|| anyhow!("{}: no [[target]] named {n:?}", at("targets")))?;
                    if out.contains(&i) {
                        bail!("{}: {n:?} is named twice", at("targets"));
                    }
                    out.push(i);
                }
                out
            }
        };
        let (request, size_bytes) = checked_request(&t.run, &targets[indexes[0]].address)
            .map_err(|e| anyhow!("{}: {}", at("run"), crate::error::one_line(&e)))?;
        let throughput = request.pattern == PatternKind::Stream
            || request.load.is_some()
            || !request.compete.is_empty();
        tests.push(Test {
            name: t.name.clone(),
            period,
            slip,
            targets: indexes,
            request,
            size_bytes,
            throughput,
        });
    }
    Ok(AgentConfig {
        name: a.name.clone(),
        metrics,
        seed: a.seed,
        cpu_budget_percent: a.cpu_budget_percent,
        traffic_budget_bytes_per_s: a.traffic_budget_bytes_per_s,
        max_concurrent,
        retention: Retention {
            max_age,
            max_runs: file.retention.max_runs,
        },
        regression: file.regression.clone(),
        targets,
        tests,
    })
}

/// The test's request as the agent runs it: one point, printing nothing, saved by the agent
/// (not by the run's own output), checked by building its plan.
fn checked_request(run: &Request, address: &str) -> Result<(Request, u64)> {
    if run.server.to.is_some() {
        bail!("server.to is set per target: drop it from the test");
    }
    if run.plot.is_some() || run.output.file.is_some() || run.trace.is_some() {
        bail!("an agent's test writes no files of its own (plot, output.file, trace)");
    }
    let mut request = run.clone();
    request.server.to = Some(address.to_string());
    request.output.format = crate::request::Format::Json;
    request.output.save = false;
    request.output.file = None;
    let plan = crate::plan::build(&request)?;
    if plan.points.len() != 1 {
        bail!(
            "its settings make {} points (a list of sizes or buffers): an agent's test is one point",
            plan.points.len()
        );
    }
    request.server.to = None;
    Ok((request, plan.points[0].key.size))
}

/// Refuses a name or value with a control character or another character a terminal would
/// act on: names are printed (`--check`, the log), stored as labels and exported as
/// Prometheus labels, and an escape sequence in them would reach the operator's terminal.
fn plain_text(what: &str, s: &str) -> Result<()> {
    if crate::text::printable(s) != s {
        bail!("{what}: contains a control character; names and addresses are plain text");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[agent]
name = "site-a"
seed = 42
cpu_budget_percent = 5.0
traffic_budget_bytes_per_s = 12500000

[retention]
max_age = "30d"
max_runs = 100000

[[target]]
name = "site-b"
address = "10.0.0.2:5320"
labels = { site = "b", region = "eu" }

[[target]]
name = "site-c"
address = "10.0.0.3:5320"

[[test]]
name = "ping64"
period = "10s"
slip = "2s"
targets = ["site-b"]
[test.run]
pattern = "pingpong"
transport = "tcp"

[[test]]
name = "bulk"
period = "1m"
[test.run]
pattern = "stream"
[test.run.stop]
duration = "1s"
"#;

    #[test]
    fn a_full_file_reads_with_its_defaults() {
        let c = AgentConfig::parse(GOOD).unwrap();
        assert_eq!(c.name.as_deref(), Some("site-a"));
        assert_eq!(c.seed, Some(42));
        assert_eq!(c.max_concurrent, DEFAULT_MAX_CONCURRENT);
        assert_eq!(c.retention.max_age, Some(Duration::from_secs(30 * 86_400)));
        assert_eq!(c.retention.max_runs, Some(100_000));
        assert_eq!(c.regression, Regression::default());
        assert_eq!(c.targets.len(), 2);
        assert_eq!(c.targets[0].labels["region"], "eu");
        assert_eq!(c.tests[0].targets, vec![0]);
        assert_eq!(c.tests[0].slip, Duration::from_secs(2));
        assert!(!c.tests[0].throughput);
        assert_eq!(c.tests[1].targets, vec![0, 1], "default: every target");
        assert_eq!(
            c.tests[1].slip,
            Duration::from_secs(6),
            "default: period / 10"
        );
        assert!(c.tests[1].throughput);
        assert!(c.tests[1].request.server.to.is_none());
        assert!(!c.tests[1].request.output.save);
    }

    #[test]
    fn load_makes_a_throughput_test() {
        let text = GOOD.replace(
            "pattern = \"pingpong\"\ntransport = \"tcp\"",
            "pattern = \"pingpong\"\ntransport = \"tcp\"\nload = { spec = \"tcp:1\" }",
        );
        let c = AgentConfig::parse(&text).unwrap();
        assert!(c.tests[0].throughput);
    }

    #[test]
    fn mistakes_are_one_line_errors_naming_the_key() {
        let target = "[[target]]\nname = \"a\"\naddress = \"127.0.0.1:1\"\n";
        let test = "[[test]]\nname = \"p\"\nperiod = \"1s\"\n[test.run]\npattern = \"pingpong\"\n";
        for (text, want) in [
            (format!("[agent]\nnmae = 1\n{target}{test}"), "unknown field `nmae`".to_string()),
            (format!("{target}{target}{test}"), "target \"a\" is given twice".into()),
            (
                format!("{target}[[test]]\nname = \"p\"\nperiod = \"1s\"\ntargets = [\"z\"]\n[test.run]\npattern = \"rr\"\n"),
                "test \"p\": targets: no [[target]] named \"z\"".into(),
            ),
            (
                format!("{target}[[test]]\nname = \"p\"\nperiod = \"0s\"\n[test.run]\npattern = \"rr\"\n"),
                "test \"p\": period = \"0s\": must be above 0".into(),
            ),
            (
                format!("{target}[[test]]\nname = \"p\"\nperiod = \"ten\"\n[test.run]\npattern = \"rr\"\n"),
                "test \"p\": period: invalid duration".into(),
            ),
            (
                format!("{target}[[test]]\nname = \"p\"\nperiod = \"1s\"\n[test.run]\npatern = \"rr\"\n"),
                "unknown field `patern`".into(),
            ),
            (
                format!("{target}[[test]]\nname = \"p\"\nperiod = \"1s\"\n[test.run]\npattern = \"pingpong\"\n[test.run.sizes]\nsize = [64, 128]\n"),
                "test \"p\": run: its settings make 2 points".into(),
            ),
            (format!("{target}{test}[retention]\nmax_age = \"x\"\n"), "retention.max_age".into()),
            (
                format!("[[target]]\nname = \"a\\u001b[31m\"\naddress = \"127.0.0.1:1\"\n{test}"),
                "target \"a\\u{1b}[31m\": contains a control character".into(),
            ),
            (
                format!("{target}[[test]]\nname = \"p\\r\"\nperiod = \"1s\"\n[test.run]\npattern = \"rr\"\n"),
                "test \"p\\r\": contains a control character".into(),
            ),
            (
                format!("[[target]]\nname = \"a\"\naddress = \"127.0.0.1:1\"\nlabels = {{ site = \"x\\u0007\" }}\n{test}"),
                "target \"a\": label \"site\": contains a control character".into(),
            ),
            (format!("{target}{test}[agent]\nmax_concurrent = 0\n"), "agent.max_concurrent".into()),
            (format!("{target}{test}[agent]\nmetrics = \"nope\"\n"), "agent.metrics".into()),
            (format!("{target}{test}[regression]\nrecent_runs = 1\n"), "regression.".into()),
            (test.to_string(), "no [[target]]".into()),
            (target.to_string(), "no [[test]]".into()),
        ] {
            let e = AgentConfig::parse(&text).unwrap_err();
            let e = crate::error::one_line(&e);
            assert!(e.contains(&want), "{e} (wanted {want})");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn days_read_as_durations() {
        assert_eq!(duration("2d"), Ok(Duration::from_secs(172_800)));
        assert_eq!(duration("10s"), Ok(Duration::from_secs(10)));
        assert!(duration("xd").is_err());
    }
}
