//! Saving `wirebench run` into the results database while it measures: the run is written
//! when its session opens and again after every point, so an interrupted run (Ctrl-C, a crash,
//! a lost server) keeps every point it finished, marked incomplete.

use std::cell::RefCell;
use std::io::IsTerminal;
use std::rc::Rc;

use anyhow::{anyhow, Result};
use indicatif::ProgressBar;

use super::db::{self, Db, Source};
use crate::plan::RunPlan;
use crate::report::model::{PointResult, RunReport};
use crate::report::{IntervalPrinter, Sink};
use crate::request::Output;

/// What became of the saving, for the exit code: the outcome of the last write.
#[derive(Clone, Default)]
pub struct SaveStatus(Rc<RefCell<Option<String>>>);

impl SaveStatus {
    /// Err when the run's final state could not be written.
    pub fn outcome(&self) -> Result<()> {
        match self.0.borrow().as_ref() {
            None => Ok(()),
            Some(e) => Err(anyhow!("{e}")),
        }
    }
}

/// Wraps the run's output so that it also saves into the database, unless saving is off
/// (`--no-save`).
/// Opens (and creates or migrates) the database now, so that a bad `--db` fails before
/// anything is measured.
pub fn attach(output: &Output, inner: Box<dyn Sink>) -> Result<(Box<dyn Sink>, SaveStatus)> {
    let status = SaveStatus::default();
    if !output.save {
        return Ok((inner, status));
    }
    let path = db::resolve(output.db.as_deref())?;
    let db = Db::open_or_create(&path)?;
    let sink = SavingSink {
        inner,
        db,
        id: None,
        status: status.clone(),
    };
    Ok((Box::new(sink), status))
}

struct SavingSink {
    inner: Box<dyn Sink>,
    db: Db,
    /// Set once the run has a row.
    id: Option<i64>,
    status: SaveStatus,
}

impl SavingSink {
    fn store(&mut self, report: &RunReport) {
        let written = match self.id {
            Some(id) => self.db.update(id, report),
            None => self.db.insert(report, Source::Run).map(|id| {
                self.id = Some(id);
            }),
        };
        // A failed write is retried with the next point; only the last outcome matters.
        *self.status.0.borrow_mut() = written.err().map(|e| {
            format!(
                "saving the run in {}: {}",
                self.db.path().display(),
                crate::error::one_line(&e)
            )
        });
    }
}

/// The run is saved whether or not its output could be written: a failed write is returned
/// after the saving, so what was measured is kept.
impl Sink for SavingSink {
    fn begin(&mut self, report: &RunReport, plan: &RunPlan) -> Result<()> {
        // Saved first, so the output can name the run by its id.
        self.store(report);
        if let Some(id) = self.id {
            self.inner.saved_as(id);
        }
        self.inner.begin(report, plan)
    }

    fn point(&mut self, report: &RunReport, point: &PointResult) -> Result<()> {
        let shown = self.inner.point(report, point);
        // The runner adds the point to the report after showing it.
        let mut with_point = report.clone();
        with_point.points.push(point.clone());
        self.store(&with_point);
        shown
    }

    fn finish(&mut self, report: &RunReport) -> Result<()> {
        let shown = self.inner.finish(report);
        // A run whose session never opened measured nothing and is not kept.
        if self.id.is_none() {
            return shown;
        }
        self.store(report);
        if let (Some(id), Ok(())) = (self.id, self.status.outcome()) {
            if std::io::stderr().is_terminal() {
                eprintln!("# saved as run {id} in {}", self.db.path().display());
            }
        }
        shown
    }

    fn saved_as(&mut self, id: i64) {
        self.inner.saved_as(id);
    }

    fn wants_intervals(&self) -> bool {
        self.inner.wants_intervals()
    }

    fn interval_printer(&self) -> IntervalPrinter {
        self.inner.interval_printer()
    }

    fn progress(&self, points: u64) -> ProgressBar {
        self.inner.progress(points)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::output::Output;
    use crate::report::table::TableSink;

    /// A writer like a full disk.
    struct Full;

    impl std::io::Write for Full {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::from(std::io::ErrorKind::StorageFull))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_failed_write_is_returned_and_the_point_is_saved_all_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open_or_create(&dir.path().join("r.sqlite")).unwrap();
        let status = SaveStatus::default();
        let mut sink = SavingSink {
            inner: Box::new(TableSink::to(Output::to(Box::new(Full)))),
            db,
            id: None,
            status: status.clone(),
        };
        let full = crate::results::db::tests::report("pingpong", 2, 20_000.0);
        let plan = crate::results::history::plan_of(&full).unwrap();
        let mut r = full.clone();
        r.points.clear();
        assert!(sink.begin(&r, &plan).is_err());
        assert!(sink.point(&r, &full.points[0]).is_err());
        r.points.push(full.points[0].clone());
        assert!(sink.finish(&r).is_err());
        assert!(status.outcome().is_ok());
        let id = sink.id.expect("the run has a row");
        assert_eq!(sink.db.load(id).unwrap().points, r.points);
    }
}
