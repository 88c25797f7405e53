//! `wirebench study show`: a stored study read back as its points' figures (mean and
//! interval over the runs, per axis value), its anomalies and searches, as a table or JSON.

use anyhow::{Context, Result};
use serde::Serialize;

use super::file::StudyFile;
use super::schedule;
use super::store::{self, Kind, StudyRow, StudyRun};
use super::summary::{self, format_value, PointSummary, StudyAnomaly};
use crate::store::db::Db;

pub const SCHEMA: &str = "wirebench.study";
pub const SCHEMA_VERSION: u32 = 1;

/// An anomaly as flagged on the study's own runs, and what its re-runs said.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShownAnomaly {
    #[serde(flatten)]
    pub anomaly: StudyAnomaly,
    pub description: String,
    /// Re-runs of the point: none, or how many.
    pub reruns: usize,
    /// With re-runs: whether the point still stands out with them counted.
    pub confirmed: Option<bool>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ShownAxis {
    pub name: String,
    /// Of `numbers`: "bytes", "bit/s", "ns" or "".
    pub unit: &'static str,
    pub values: Vec<String>,
    pub numbers: Vec<Option<f64>>,
}

/// Everything `study show` prints.
#[derive(Debug, Clone, Serialize)]
pub struct Shown {
    pub schema: &'static str,
    pub schema_version: u32,
    #[serde(flatten)]
    pub study: StudyRow,
    pub about: Option<String>,
    pub repetitions: u32,
    pub runs_planned: usize,
    pub runs_done: usize,
    pub runs_failed: usize,
    pub axes: Vec<ShownAxis>,
    pub points: Vec<PointSummary>,
    pub anomalies: Vec<ShownAnomaly>,
    #[serde(skip)]
    pub rows: Vec<StudyRun>,
    #[serde(skip)]
    pub file: StudyFile,
}

impl Shown {
    pub fn load(db: &Db, id: i64) -> Result<Shown> {
        let study = store::load(db, id)?;
        let file = StudyFile::parse(&study.file_text)
            .with_context(|| format!("study {id}: its stored file"))?;
        let coords = schedule::points(&file)?;
        let rows = store::runs(db, id)?;
        let confidence = f64::from(file.run.statistics.confidence) / 100.0;
        let mut cache = std::collections::HashMap::new();
        let mut load = |r: i64| cache.entry(r).or_insert_with(|| db.load(r).ok()).clone();
        let points = summary::points(&file, &coords, &rows, confidence, &mut load);
        let first_rows: Vec<StudyRun> = rows
            .iter()
            .filter(|r| r.kind != Kind::Rerun)
            .cloned()
            .collect();
        let first = summary::points(&file, &coords, &first_rows, confidence, &mut load);
        let initial = summary::anomalies(&file, &first, file.anomaly.threshold);
        let last = summary::anomalies(&file, &points, file.anomaly.threshold);
        let anomalies = initial
            .into_iter()
            .map(|a| {
                let reruns = points[a.point].rerun_ids.len();
                ShownAnomaly {
                    description: a.describe(),
                    confirmed: (reruns > 0)
                        .then(|| last.iter().any(|b| b.point == a.point && b.axis == a.axis)),
                    reruns,
                    anomaly: a,
                }
            })
            .collect();
        Ok(Shown {
            schema: SCHEMA,
            schema_version: SCHEMA_VERSION,
            about: file.about.clone(),
            repetitions: file.repetitions,
            runs_planned: study.schedule.len(),
            runs_done: rows
                .iter()
                .filter(|r| r.kind != Kind::Probe && r.status == store::Status::Done)
                .count(),
            runs_failed: rows
                .iter()
                .filter(|r| r.kind != Kind::Probe && r.status == store::Status::Failed)
                .count(),
            axes: file
                .axes
                .iter()
                .map(|a| ShownAxis {
                    name: a.name.clone(),
                    unit: super::apply::axis_unit(a),
                    values: (0..a.values.len())
                        .map(|k| super::apply::value_label(a, k))
                        .collect(),
                    numbers: (0..a.values.len())
                        .map(|k| super::apply::value_number(a, k))
                        .collect(),
                })
                .collect(),
            points,
            anomalies,
            rows,
            file,
            study,
        })
    }

    /// The table for people.
    pub fn table(&self) -> String {
        let s = &self.study;
        let mut out = format!(
            "study {} #{}: {}, {} of {} runs done{}, seed {}, started {}{}\n",
            s.name,
            s.id,
            s.status,
            self.runs_done,
            self.runs_planned,
            if self.runs_failed > 0 {
                format!(" ({} failed)", self.runs_failed)
            } else {
                String::new()
            },
            s.seed,
            s.started_at,
            s.file_path
                .as_ref()
                .map(|p| format!(", file {p}"))
                .unwrap_or_default()
        );
        let names: Vec<String> = self
            .points
            .iter()
            .find_map(|p| (!p.figures.is_empty()).then(|| p.figures.clone()))
            .unwrap_or_default()
            .iter()
            .map(|f| match f.side {
                Some(side) => format!("{side} {}", f.name),
                None => f.name.to_string(),
            })
            .collect();
        let confidence = self.file.run.statistics.confidence;
        out.push_str(&format!(
            "# each figure: mean over the valid runs +- the {confidence}% interval's half-width (n = runs; none with one run)\n"
        ));
        let mut header: Vec<String> = self.axes.iter().map(|a| a.name.clone()).collect();
        let searching = self.points.iter().any(|p| p.search.is_some());
        if searching {
            header.push("highest rate meeting the target".into());
        }
        header.extend(names.iter().cloned());
        header.push("n".into());
        let mut rows: Vec<Vec<String>> = Vec::new();
        // Why a point's figures are not measurements: under the table, once per point.
        let mut not_valid: Vec<String> = Vec::new();
        for p in &self.points {
            let mut row: Vec<String> = p
                .coords
                .iter()
                .zip(&self.axes)
                .map(|(&k, a)| a.values[k].clone())
                .collect();
            if searching {
                row.push(match &p.search {
                    Some(sr) => match &sr.over_runs {
                        Some(m) => with_ci(m, "bit/s"),
                        None if sr.best_bits_per_s.is_empty() => "-".into(),
                        None => "none met it".into(),
                    },
                    None => "-".into(),
                });
            }
            let mut n = 0;
            for name in &names {
                let f = p.figures.iter().find(|f| {
                    &match f.side {
                        Some(side) => format!("{side} {}", f.name),
                        None => f.name.to_string(),
                    } == name
                });
                row.push(match f {
                    Some(f) => match &f.over_runs {
                        Some(m) => {
                            n = n.max(m.n);
                            let mut v = with_ci(m, f.unit);
                            if f.invalid_runs > 0 {
                                v.push_str(&format!(" ({} not valid)", f.invalid_runs));
                            }
                            v
                        }
                        None if f.invalid_runs > 0 => {
                            let why = f.invalid_reason.clone().unwrap_or_default();
                            let note = format!("{}: {why}", p.labels.join(", "));
                            if !not_valid.contains(&note) {
                                not_valid.push(note);
                            }
                            "not valid (below)".to_string()
                        }
                        None => "-".into(),
                    },
                    None => "-".into(),
                });
            }
            row.push(if p.failed > 0 {
                format!("{n} ({} failed)", p.failed)
            } else {
                n.to_string()
            });
            rows.push(row);
        }
        let widths: Vec<usize> = (0..header.len())
            .map(|c| {
                rows.iter()
                    .map(|r| r[c].chars().count())
                    .chain([header[c].chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |cells: &[String]| {
            let mut l = cells
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect::<Vec<_>>()
                .join("  ");
            l.truncate(l.trim_end().len());
            l + "\n"
        };
        out.push_str(&line(&header));
        for r in &rows {
            out.push_str(&line(r));
        }
        for p in &self.points {
            if let Some(l) = &p.loss {
                out.push_str(&format!(
                    "# loss at {}: {l} (summed over its runs)\n",
                    p.labels.join(", ")
                ));
            }
        }
        for n in &not_valid {
            out.push_str(&format!("# not valid at {n}\n"));
        }
        for a in &self.anomalies {
            out.push_str(&format!(
                "# anomaly: {}{}\n",
                a.description,
                match a.confirmed {
                    Some(true) => format!("; re-run {} more times: it still stands out", a.reruns),
                    Some(false) =>
                        format!("; re-run {} more times: it no longer stands out", a.reruns),
                    None => String::new(),
                }
            ));
        }
        out
    }
}

fn with_ci(m: &crate::stats::ci::MeanCi, unit: &str) -> String {
    match m.half_width {
        Some(h) => format!(
            "{} +- {}",
            format_value(m.mean, unit),
            format_value(h, unit)
        ),
        None => format_value(m.mean, unit),
    }
}

/// `wirebench study list`.
pub fn list_table(rows: &[StudyRow]) -> String {
    let mut out = String::from("id  name  status  runs planned  started  file\n");
    for r in rows {
        out.push_str(&format!(
            "{}  {}  {}  {}  {}  {}\n",
            r.id,
            r.name,
            r.status,
            r.schedule.len(),
            r.started_at,
            r.file_path.as_deref().unwrap_or("-")
        ));
    }
    out
}
