//! `wirebench study show`: a stored study read back as its points' figures (mean and
//! interval over the runs, per axis value), its anomalies and searches, as a table or JSON.

use anyhow::{Context, Result};
use serde::Serialize;

use super::file::StudyFile;
use super::schedule;
use super::store::{self, Kind, StudyRow, StudyRun};
use super::summary::{self, PointFigure, PointSummary, StudyAnomaly};
use crate::store::db::Db;
use crate::text::table::{comment, units_line, Column, Style, Table};
use crate::units::RateUnit;

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
        self.render(Style::Plain)
    }

    /// The table for people, plain or as Markdown: a heading line, the units, the table with
    /// each figure's unit in its header, then the notes.
    pub fn render(&self, style: Style) -> String {
        let s = &self.study;
        let mut out = match style {
            Style::Plain => String::new(),
            Style::Markdown => String::from("## "),
        };
        out.push_str(&format!(
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
        ));
        if style == Style::Markdown {
            out.push('\n');
        }
        let figures: Vec<&PointFigure> = self
            .points
            .iter()
            .find(|p| !p.figures.is_empty())
            .map(|p| p.figures.iter().collect())
            .unwrap_or_default();
        let names: Vec<String> = figures.iter().map(|f| figure_name(f)).collect();
        let searching = self.points.iter().any(|p| p.search.is_some());
        // One rate unit for the whole table: the searched rates and every rate figure.
        let rates = RateUnit::for_rates(self.points.iter().flat_map(|p| {
            let search = p
                .search
                .as_ref()
                .and_then(|sr| sr.over_runs.as_ref())
                .map(|m| m.mean);
            let figures = p
                .figures
                .iter()
                .filter(|f| f.unit == "bit/s")
                .filter_map(|f| f.over_runs.as_ref().map(|m| m.mean));
            search.into_iter().chain(figures)
        }));
        let unit = TableUnits { rates };
        out.push_str(&units_line(
            style,
            &format!(
                "times in us, rates in {}, shares in %; each figure's unit is in its header",
                rates.name()
            ),
        ));
        let confidence = self.file.run.statistics.confidence;
        out.push_str(&comment(
            style,
            &format!(
                "each figure: mean over the valid runs +- the {confidence}% interval's half-width (n = runs; none with one run)"
            ),
        ));
        let mut columns: Vec<Column> = self
            .axes
            .iter()
            .map(|a| Column::left(a.name.clone()))
            .collect();
        if searching {
            columns.push(Column::right(format!(
                "highest rate meeting the target({})",
                rates.name()
            )));
        }
        for (f, name) in figures.iter().zip(&names) {
            columns.push(Column::right(match unit.header(f.unit) {
                Some(u) => format!("{name}({u})"),
                None => name.clone(),
            }));
        }
        columns.push(Column::right("n"));
        let mut t = Table::new(columns);
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
                        Some(m) => unit.with_ci(m, "bit/s"),
                        None if sr.best_bits_per_s.is_empty() => "-".into(),
                        None => "none met it".into(),
                    },
                    None => "-".into(),
                });
            }
            let mut n = 0;
            for name in &names {
                let f = p.figures.iter().find(|f| &figure_name(f) == name);
                row.push(match f {
                    Some(f) => match &f.over_runs {
                        Some(m) => {
                            n = n.max(m.n);
                            let mut v = unit.with_ci(m, f.unit);
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
            t.row(row);
        }
        out.push_str(&t.render(style));
        if style == Style::Markdown {
            out.push('\n');
        }
        for p in &self.points {
            if let Some(l) = &p.loss {
                out.push_str(&comment(
                    style,
                    &format!(
                        "loss at {}: {l} (summed over its runs)",
                        p.labels.join(", ")
                    ),
                ));
            }
        }
        for n in &not_valid {
            out.push_str(&comment(style, &format!("not valid at {n}")));
        }
        for a in &self.anomalies {
            let reruns = match a.confirmed {
                Some(true) => format!("; re-run {} more times: it still stands out", a.reruns),
                Some(false) => format!("; re-run {} more times: it no longer stands out", a.reruns),
                None => String::new(),
            };
            out.push_str(&comment(
                style,
                &format!("anomaly: {}{reruns}", a.description),
            ));
        }
        out
    }
}

/// A figure's column name: "receiver throughput", "rtt".
fn figure_name(f: &PointFigure) -> String {
    match f.side {
        Some(side) => format!("{side} {}", f.name),
        None => f.name.to_string(),
    }
}

/// The units of one `study show` table: figures as numbers, their unit in the header, so
/// that a column reads at a glance and one rate unit holds for the whole table.
struct TableUnits {
    rates: RateUnit,
}

impl TableUnits {
    /// The unit a column of figures of `unit` is headed with; None for counts.
    fn header(&self, unit: &str) -> Option<String> {
        match unit {
            "bit/s" => Some(self.rates.name().to_owned()),
            "ns" => Some("us".into()),
            "share" => Some("%".into()),
            "" => None,
            u => Some(u.to_owned()),
        }
    }

    /// A figure's number in its column's unit.
    fn number(&self, v: f64, unit: &str) -> String {
        match unit {
            "bit/s" => self.rates.format(v),
            "ns" => crate::units::us(v),
            "1/s" if v.abs() < 100.0 => format!("{v:.3}"),
            "1/s" => format!("{v:.0}"),
            "share" => format!("{:.3}", v * 100.0),
            _ => format!("{v}"),
        }
    }

    fn with_ci(&self, m: &crate::stats::ci::MeanCi, unit: &str) -> String {
        match m.half_width {
            Some(h) => format!("{} +- {}", self.number(m.mean, unit), self.number(h, unit)),
            None => self.number(m.mean, unit),
        }
    }
}

/// `wirebench study list`: one row per study.
pub fn list_table(rows: &[StudyRow], style: Style) -> String {
    let mut t = Table::new(vec![
        Column::right("id"),
        Column::left("name"),
        Column::left("status"),
        Column::right("runs planned"),
        Column::left("started (UTC)"),
        Column::left("file"),
    ]);
    for r in rows {
        t.row([
            r.id.to_string(),
            r.name.clone(),
            r.status.clone(),
            r.schedule.len().to_string(),
            r.started_at.clone(),
            r.file_path.clone().unwrap_or_else(|| "-".into()),
        ]);
    }
    t.render(style)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::table::{check_aligned, Align};

    fn study(id: i64, name: &str, file: Option<&str>) -> StudyRow {
        StudyRow {
            id,
            name: name.into(),
            file_path: file.map(Into::into),
            file_text: String::new(),
            seed: 7,
            started_at: "2026-01-01T10:00:00.000Z".into(),
            finished_at: None,
            status: "complete".into(),
            schedule: Vec::new(),
        }
    }

    fn awkward() -> Vec<StudyRow> {
        vec![
            study(1, "a", None),
            study(
                123456,
                "tcp window by write size, naïve café run",
                Some("studies/tcp-window-by-write-size.toml"),
            ),
            study(7, "mptcp", Some("-")),
        ]
    }

    #[test]
    fn the_study_list_aligns_whatever_the_names() {
        let text = list_table(&awkward(), Style::Plain);
        let aligns = [
            Align::Right,
            Align::Left,
            Align::Left,
            Align::Right,
            Align::Left,
            Align::Left,
        ];
        assert_eq!(check_aligned(&text, &aligns, ""), Ok(()), "{text}");
        assert_eq!(text.lines().count(), 4, "{text}");
    }

    #[test]
    fn the_study_list_as_markdown_has_every_cell() {
        let text = list_table(&awkward(), Style::Markdown);
        let cells: Vec<usize> = text.lines().map(|l| l.matches('|').count()).collect();
        assert_eq!(cells, vec![7; 5], "{text}");
    }

    /// A shown study of two axes ("transport", a long "message size" label) whose points
    /// have a latency and a rate figure, huge and tiny, one missing ("-").
    fn shown() -> Shown {
        let file = StudyFile::parse(
            "name = \"t\"\n[run]\npattern = \"stream\"\n[[axis]]\nname = \"transport\"\nvalues = [\"tcp\", \"mptcp\"]\n[[axis]]\nname = \"message size, a long axis name\"\nvalues = [1, 1048576]\n",
        )
        .unwrap();
        let figure = |name, unit, v: Option<f64>| PointFigure {
            name,
            side: Some("receiver"),
            unit,
            over_runs: v.and_then(|v| crate::stats::ci::MeanCi::from_samples(&[v, v * 1.01], 0.95)),
            invalid_runs: 0,
            invalid_reason: None,
        };
        let point = |i: usize, coords: Vec<usize>, rate: Option<f64>, ns: f64| PointSummary {
            index: i,
            labels: vec![format!("point {i}")],
            coords,
            run_ids: vec![1, 2],
            rerun_ids: Vec::new(),
            failed: 0,
            figures: vec![
                figure("throughput", "bit/s", rate),
                figure("latency", "ns", Some(ns)),
            ],
            search: None,
            counters: Vec::new(),
            loss: None,
        };
        Shown {
            schema: SCHEMA,
            schema_version: SCHEMA_VERSION,
            study: study(3, "naïve study", None),
            about: None,
            repetitions: 2,
            runs_planned: 8,
            runs_done: 8,
            runs_failed: 0,
            axes: vec![
                ShownAxis {
                    name: "transport".into(),
                    unit: "",
                    values: vec!["tcp".into(), "mptcp".into()],
                    numbers: vec![None, None],
                },
                ShownAxis {
                    name: "message size, a long axis name".into(),
                    unit: "bytes",
                    values: vec!["1".into(), "1M".into()],
                    numbers: vec![Some(1.0), Some(1048576.0)],
                },
            ],
            points: vec![
                point(0, vec![0, 0], Some(1e3), 1.5),
                point(1, vec![0, 1], Some(40e9), 123_456_789.0),
                point(2, vec![1, 0], None, 20_000.0),
                point(3, vec![1, 1], Some(9.4e9), 7.0),
            ],
            anomalies: Vec::new(),
            rows: Vec::new(),
            file,
        }
    }

    #[test]
    fn study_show_aligns_with_one_rate_unit_and_units_in_the_headers() {
        let text = shown().render(Style::Plain);
        let table: String = text
            .lines()
            .skip(1)
            .filter(|l| !l.starts_with('#'))
            .map(|l| format!("{l}\n"))
            .collect();
        let aligns = [
            Align::Left,
            Align::Left,
            Align::Right,
            Align::Right,
            Align::Right,
        ];
        assert_eq!(check_aligned(&table, &aligns, ""), Ok(()), "{text}");
        assert!(
            text.contains("# units: times in us, rates in Gbit/s"),
            "{text}"
        );
        assert!(
            table.starts_with(
                "transport  message size, a long axis name  receiver throughput(Gbit/s)"
            ),
            "{text}"
        );
        assert!(table.contains("receiver latency(us)"), "{text}");
        // A rate of 1 kbit/s in a Gbit/s table is still in Gbit/s.
        assert!(table.contains("0.000 +- 0.000"), "{text}");
        let md = shown().render(Style::Markdown);
        let rows: Vec<&str> = md.lines().filter(|l| l.starts_with('|')).collect();
        assert_eq!(rows.len(), 6, "{md}");
        assert!(rows.iter().all(|l| l.matches('|').count() == 6), "{md}");
    }
}
