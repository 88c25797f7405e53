//! A study file: the fixed settings of a run, the axes swept over them, how the axes combine,
//! and the policies (repetitions, order, warm-up, timeouts, anomalies, a rate search). TOML,
//! read once and checked whole before anything is measured: every point's request is built
//! and validated up front, so a typo in the last axis value fails at once, not an hour in.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::lab::config::LinkSpec;
use crate::request::Request;

/// The whole file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StudyFile {
    /// What the study is called (its figures and saved runs are labelled with it).
    pub name: String,
    /// What it measures, for people.
    #[serde(default)]
    pub about: Option<String>,
    /// The fixed settings of every point, as `wirebench run` takes them (the tree of
    /// [`Request`]: `pattern`, `transport`, `[run.stop] duration = "2s"`, `[run.socket]
    /// nodelay = true` ...).
    #[serde(default)]
    pub run: Request,
    /// Run every point in the lab over this link (host a is the client, host b the
    /// server); link axes (`link.rate`, `link.delay` ...) change it per point.
    #[serde(default)]
    pub link: Option<LinkSpec>,
    /// The axes, in the order of the figures (the first is the x axis of curves).
    #[serde(default, rename = "axis")]
    pub axes: Vec<AxisSpec>,
    /// How the axes combine into points.
    #[serde(default)]
    pub combine: Combine,
    /// With `combine = "product"`: groups of axes that move together (each a list of axis
    /// names of equal length), e.g. `zip = [["sndbuf", "rcvbuf"]]`.
    #[serde(default)]
    pub zip: Vec<Vec<String>>,
    /// With `combine = "list"`: the points, each naming one value of every axis.
    #[serde(default)]
    pub points: Vec<BTreeMap<String, toml::Value>>,
    /// Runs per point.
    #[serde(default = "one")]
    pub repetitions: u32,
    #[serde(default)]
    pub order: Order,
    /// The seed of a random order; chosen and recorded when not given.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Unrecorded runs of the first point before the study starts (warms caches, ARP, the
    /// lab's queues); each point also has the run's own warm-up iterations.
    #[serde(default)]
    pub warmup_runs: u32,
    /// Longest a single run may take before it is ended (default: 3 x its duration + 30 s).
    #[serde(default, with = "crate::units::opt_duration_text")]
    pub timeout: Option<Duration>,
    #[serde(default)]
    pub on_timeout: OnFailure,
    /// Attempts after the first for a run that failed or timed out, with `on_timeout =
    /// "retry"`.
    #[serde(default = "one")]
    pub retries: u32,
    #[serde(default)]
    pub anomaly: AnomalyPolicy,
    /// Record a segment trace of every run (TCP; needs root): a pcap per run beside the
    /// results database, its summary in the run's document.
    #[serde(default)]
    pub trace: bool,
    /// Instead of one run per repetition, find the highest rate that meets a delivery target.
    #[serde(default)]
    pub search: Option<SearchSpec>,
}

fn one() -> u32 {
    1
}

/// One axis: a setting and the values it takes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AxisSpec {
    /// A short name (`window`, `write_size`, `cc`, `link.delay`) or a dotted path into the run
    /// settings (`buffers.server_rcvbuf`).
    pub name: String,
    /// The settings this axis sets, when not the one its name says: `set = ["buffers.sndbuf",
    /// "buffers.rcvbuf"]` moves both buffers together.
    #[serde(default)]
    pub set: Vec<String>,
    pub values: Vec<toml::Value>,
    /// Names of the values in legends and tables ("campus", "wan"), one per value.
    #[serde(default)]
    pub labels: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Combine {
    /// Every combination of the axes' values (groups named in `zip` move together).
    #[default]
    Product,
    /// All axes move together: point k takes value k of every axis.
    Zip,
    /// The points listed in `[[points]]`.
    List,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// Every repetition of every point in a random order from the recorded seed, so that a
    /// periodic disturbance ([HARP thesis n.d.]'s `xearth` redraw, see REFERENCES.md) spreads
    /// over the points instead of hitting one.
    #[default]
    Random,
    /// Point by point in file order, repetitions together.
    Sequential,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnFailure {
    /// Try again (up to `retries` more times), then skip the run and go on.
    #[default]
    Retry,
    /// Record the failure and go on at once.
    Skip,
}

/// Points that stand out from both neighbours along an axis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AnomalyPolicy {
    /// Relative difference from both neighbours that flags a point (0.5 = 50%).
    pub threshold: f64,
    /// Extra runs of each flagged point once the study is done (0: flag only).
    pub rerun: u32,
    /// Record a segment trace of the re-runs (TCP; needs root).
    pub trace: bool,
}

impl Default for AnomalyPolicy {
    fn default() -> AnomalyPolicy {
        AnomalyPolicy {
            threshold: crate::model::ANOMALY_THRESHOLD,
            rerun: 0,
            trace: false,
        }
    }
}

/// Calibrated pacing: the highest rate at which a point meets its delivery target, found by
/// bisection between `low` and `high` ([Müller et al. 1997]: "at least 95% delivered").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchSpec {
    /// The lowest rate tried; it must meet the target.
    pub low: String,
    /// The highest rate tried.
    pub high: String,
    /// Bisection steps after checking both ends (the answer is within (high-low)/2^steps).
    #[serde(default = "search_steps")]
    pub steps: u32,
    /// Share of the messages sent that must arrive (0.95).
    #[serde(default)]
    pub min_delivered: Option<f64>,
    /// Largest share lost on the way or in the receiver (0.05).
    #[serde(default)]
    pub max_receiver_loss: Option<f64>,
    /// Largest share of the asked rate the sender may fall short of (0: "no sender loss").
    #[serde(default)]
    pub max_sender_loss: Option<f64>,
}

fn search_steps() -> u32 {
    6
}

impl StudyFile {
    pub fn parse(text: &str) -> Result<StudyFile> {
        let file: StudyFile = toml::from_str(text).map_err(|e| {
            // toml's own text spans lines (the source with a caret under it): one line here.
            let line = e
                .span()
                .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
            let message = e.message().trim().replace('\n', " ");
            match line {
                Some(l) => anyhow::anyhow!("line {l}: {message}"),
                None => anyhow::anyhow!("{message}"),
            }
        })?;
        file.check()?;
        Ok(file)
    }

    pub fn read(path: &std::path::Path) -> Result<(StudyFile, String)> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the study file {}", path.display()))?;
        let file = StudyFile::parse(&text).with_context(|| format!("{}", path.display()))?;
        Ok((file, text))
    }

    fn check(&self) -> Result<()> {
        if self.name.trim().is_empty() {
            bail!("the study needs a name");
        }
        if self.repetitions == 0 {
            bail!("repetitions = 0: a study point needs at least one run");
        }
        let mut seen = std::collections::BTreeSet::new();
        for a in &self.axes {
            if !seen.insert(a.name.as_str()) {
                bail!("axis '{}' is given twice", a.name);
            }
            if a.values.is_empty() {
                bail!("axis '{}' has no values", a.name);
            }
            if !a.labels.is_empty() && a.labels.len() != a.values.len() {
                bail!(
                    "axis '{}': {} labels for {} values",
                    a.name,
                    a.labels.len(),
                    a.values.len()
                );
            }
        }
        if (self.trace || self.anomaly.trace)
            && !matches!(self.run.transport, crate::transport::TransportKind::Tcp)
            && !self.axes.iter().any(|a| a.name == "transport")
        {
            bail!(
                "{}: a segment trace is of TCP segments; this study runs {}",
                if self.trace { "trace" } else { "anomaly.trace" },
                self.run.transport.name()
            );
        }
        if !(self.anomaly.threshold > 0.0 && self.anomaly.threshold.is_finite()) {
            bail!("anomaly.threshold must be above 0 (0.5 = 50%)");
        }
        if let Some(s) = &self.search {
            for (name, v) in [
                ("min_delivered", s.min_delivered),
                ("max_receiver_loss", s.max_receiver_loss),
                ("max_sender_loss", s.max_sender_loss),
            ] {
                if v.is_some_and(|x| !(0.0..=1.0).contains(&x)) {
                    bail!("search.{name} is a share from 0 to 1 (0.95 = 95%)");
                }
            }
            if s.min_delivered.is_none()
                && s.max_receiver_loss.is_none()
                && s.max_sender_loss.is_none()
            {
                bail!("search needs a target: min_delivered, max_receiver_loss or max_sender_loss");
            }
            if s.steps > 30 {
                bail!("search.steps {}: at most 30", s.steps);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minimal_file_reads_with_the_defaults() {
        let f = StudyFile::parse(
            "name = \"t\"\n[run]\npattern = \"stream\"\n[[axis]]\nname = \"window\"\nvalues = [\"4K\", 8192]\n",
        )
        .unwrap();
        assert_eq!(f.repetitions, 1);
        assert_eq!(f.order, Order::Random);
        assert_eq!(f.combine, Combine::Product);
        assert_eq!(f.run.pattern, crate::pattern::PatternKind::Stream);
        assert_eq!(f.axes[0].values.len(), 2);
    }

    #[test]
    fn mistakes_are_one_line_errors() {
        for (text, want) in [
            ("name = \"t\"\nrepetitons = 3\n", "unknown field `repetitons`"),
            ("name = \"t\"\nrepetitions = 0\n", "at least one run"),
            ("name = \"t\"\n[run]\npatern = \"x\"\n", "unknown field `patern`"),
            (
                "name = \"t\"\n[[axis]]\nname = \"a\"\nvalues = [1]\n[[axis]]\nname = \"a\"\nvalues = [2]\n",
                "given twice",
            ),
            (
                "name = \"t\"\n[search]\nlow = \"1M\"\nhigh = \"2M\"\n",
                "needs a target",
            ),
        ] {
            let e = StudyFile::parse(text).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }
}
