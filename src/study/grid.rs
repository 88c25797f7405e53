//! A study's results as the neutral grid its figures are drawn from
//! ([`crate::figures::study_figures`]).

use super::show::Shown;
use crate::figures::grid::{AxisValue, CellFigure, GridAxis, GridCell, StudyGrid};

pub fn grid(shown: &Shown) -> StudyGrid {
    let axes = shown
        .axes
        .iter()
        .map(|a| GridAxis {
            name: a.name.clone(),
            unit: a.unit.to_string(),
            values: a
                .values
                .iter()
                .zip(&a.numbers)
                .map(|(label, number)| AxisValue {
                    label: label.clone(),
                    number: *number,
                })
                .collect(),
        })
        .collect();
    let cells = shown
        .points
        .iter()
        .map(|p| {
            let mut figures: Vec<CellFigure> = Vec::new();
            if let Some(s) = &p.search {
                if let Some(m) = &s.over_runs {
                    figures.push(CellFigure {
                        name: "highest rate meeting the target".into(),
                        side: None,
                        unit: "bit/s".into(),
                        mean: m.mean,
                        ci: m.half_width.map(|h| (m.mean - h, m.mean + h)),
                        samples: m.n as u32,
                        valid: true,
                    });
                }
            }
            for f in &p.figures {
                let (mean, ci, samples, valid) = match &f.over_runs {
                    Some(m) => (
                        m.mean,
                        m.half_width.map(|h| (m.mean - h, m.mean + h)),
                        m.n as u32,
                        true,
                    ),
                    None => (f64::NAN, None, 0, false),
                };
                figures.push(CellFigure {
                    name: f.name.to_string(),
                    side: f.side.map(str::to_string),
                    unit: f.unit.to_string(),
                    mean,
                    ci,
                    samples,
                    valid,
                });
            }
            GridCell {
                coords: p.coords.clone(),
                figures,
                counters: p.counters.clone(),
                anomaly: shown
                    .anomalies
                    .iter()
                    .find(|a| a.anomaly.point == p.index)
                    .map(|a| a.description.clone()),
            }
        })
        .collect();
    StudyGrid {
        title: format!("study {} #{}", shown.study.name, shown.study.id),
        axes,
        cells,
    }
}

/// Writes the study's page (`index.html`) and every figure as SVG and PNG into `dir`
/// (created if missing), by the rules of [`crate::outfile`]: every file is checked before
/// the first is written, so a refused report leaves `dir` as it was (`force`: replace
/// regular files). The files written, the page first.
pub fn write_report(
    shown: &Shown,
    dir: &std::path::Path,
    force: bool,
) -> anyhow::Result<Vec<std::path::PathBuf>> {
    let g = grid(shown);
    let figures = crate::figures::study_page::figure_files(&g)?;
    let intro = format!(
        "Study file {}; {} of {} runs done, {}, seed {}, started {}.{}",
        shown.study.file_path.as_deref().unwrap_or("-"),
        shown.runs_done,
        shown.runs_planned,
        shown.study.status,
        shown.study.seed,
        shown.study.started_at,
        shown
            .about
            .as_ref()
            .map(|a| format!(" {a}"))
            .unwrap_or_default()
    );
    let html = crate::figures::study_page::study_html(
        &g,
        &crate::figures::study_page::PageOptions {
            automatic: true,
            extra: Vec::new(),
            intro: Some(intro),
        },
    );
    let mut files = vec![("index.html".to_owned(), html.into_bytes())];
    files.extend(figures);
    crate::outfile::OutDir::open(dir, force)?.write_files(&files)
}
