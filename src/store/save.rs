//! Saving `wirebench run` into the results database while it measures: the run is written
//! when its session opens and again after every point, so an interrupted run (Ctrl-C, a crash,
//! a lost server) keeps every point it finished, marked incomplete. When the database cannot
//! take the run (a full disk, a read-only file, an I/O error), the run's whole document is
//! kept from then on and written to a [`super::recovery`] file as the run ends, so that
//! nothing measured exists only on a terminal.

use std::cell::RefCell;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::{Arc, Mutex, Weak};

use anyhow::{anyhow, Result};
use indicatif::ProgressBar;

use super::db::{self, Db, Source};
use super::recovery;
use crate::model::{PointResult, RunDocument};
use crate::plan::sink::{IntervalPrinter, Sink};
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

/// A run the database does not hold as it stands: its latest document, and why.
struct Unsaved {
    report: RunDocument,
    db: PathBuf,
    /// The last write's error, one line.
    reason: String,
    /// The run's row and the points it holds, when the run has one.
    row: Option<(i64, usize)>,
}

/// Where an unsaved run waits for its recovery file. Shared with the second Ctrl-C, which ends
/// the process at once from another thread: whoever takes the run out writes it, holding the
/// lock until the file is whole, so it is written once and never cut off half-way.
type Slot = Arc<Mutex<Option<Unsaved>>>;

/// The slots of the saving sinks alive in this process (one, for a run), for
/// [`recover_before_exit`].
static LIVE: Mutex<Vec<Weak<Mutex<Option<Unsaved>>>>> = Mutex::new(Vec::new());

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic elsewhere while holding it leaves the data as good as it was.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Writes the recovery file of every run whose document the database does not hold, for an
/// exit that skips the run's end (the second Ctrl-C).
pub fn recover_before_exit() {
    let slots: Vec<Slot> = lock(&LIVE).iter().filter_map(Weak::upgrade).collect();
    for slot in slots {
        let mut held = lock(&slot);
        if let Some(mut u) = held.take() {
            u.report.finished_at = Some(crate::env::now_rfc3339());
            u.report.complete = false;
            u.report.error = Some(format!(
                "interrupted (Ctrl-C twice) after {}",
                u.report.points_of_planned()
            ));
            let (line, _) = recover(&u);
            eprintln!("wirebench: {}", crate::text::printable(&line));
        }
    }
}

/// Wraps the run's output so that it also saves into the database, unless saving is off
/// (`--no-save`).
/// Opens (and creates or migrates) the database now, so that a bad `--db` fails before
/// anything is measured.
pub fn attach(output: &Output, inner: Box<dyn Sink>) -> Result<(Box<dyn Sink>, SaveStatus)> {
    attach_as(output, inner, Source::Run)
}

/// [`attach`] for a run saved as part of something else (a compare-transports sweep), with
/// that as its source.
pub fn attach_as(
    output: &Output,
    inner: Box<dyn Sink>,
    source: Source,
) -> Result<(Box<dyn Sink>, SaveStatus)> {
    let status = SaveStatus::default();
    if !output.save {
        return Ok((inner, status));
    }
    let path = db::resolve(output.db.as_deref())?;
    let db = Db::open_or_create(&path)?;
    let sink = SavingSink::new(inner, db, status.clone(), source);
    let mut live = lock(&LIVE);
    live.retain(|w| w.strong_count() > 0);
    live.push(Arc::downgrade(&sink.unsaved));
    Ok((Box::new(sink), status))
}

struct SavingSink {
    inner: Box<dyn Sink>,
    db: Db,
    /// Set once the run has a row.
    id: Option<i64>,
    /// The points the row holds.
    saved_points: usize,
    /// Set once the session opened: from then on the run has something to keep.
    began: bool,
    status: SaveStatus,
    unsaved: Slot,
    /// What the row says saved it.
    source: Source,
}

impl SavingSink {
    fn new(inner: Box<dyn Sink>, db: Db, status: SaveStatus, source: Source) -> SavingSink {
        SavingSink {
            inner,
            db,
            source,
            id: None,
            saved_points: 0,
            began: false,
            status,
            unsaved: Slot::default(),
        }
    }

    /// Writes the run as it stands. Each write holds the whole document, so one that succeeds
    /// makes up for any that failed before it; one that fails keeps the document for the
    /// recovery file.
    fn store(&mut self, report: RunDocument) {
        let written = match self.id {
            Some(id) => self.db.update(id, &report),
            None => self.db.insert(&report, self.source).map(|id| {
                self.id = Some(id);
            }),
        };
        let mut unsaved = lock(&self.unsaved);
        match written {
            Ok(()) => {
                self.saved_points = report.points.len();
                *unsaved = None;
                *self.status.0.borrow_mut() = None;
            }
            // Retried with the next point; only the last outcome matters.
            Err(e) => {
                let reason = crate::error::one_line(&e);
                *self.status.0.borrow_mut() = Some(format!(
                    "saving the run in {}: {reason}",
                    self.db.path().display()
                ));
                *unsaved = Some(Unsaved {
                    report,
                    db: self.db.path().to_owned(),
                    reason,
                    row: self.id.map(|id| (id, self.saved_points)),
                });
            }
        }
    }

    /// Writes the recovery file of a run the database does not hold, if any, and says where:
    /// at once, on its own line, so that no later failure can keep the name from the user.
    fn recover_unsaved(&self) {
        let mut held = lock(&self.unsaved);
        if let Some(u) = held.take() {
            let (line, error) = recover(&u);
            // Paths and the database's error are the user's and SQLite's text: no escape
            // sequence of theirs reaches the terminal.
            eprintln!("wirebench: {}", crate::text::printable(&line));
            *self.status.0.borrow_mut() = Some(error);
        }
    }
}

/// Writes `u`'s document to a recovery file and returns the line that says where, and the
/// shorter error the run ends with (its exit code says the saving failed). When no place
/// takes the file, the document goes to stderr, the last place left.
fn recover(u: &Unsaved) -> (String, String) {
    let db = u.db.display();
    let reason = &u.reason;
    // A mesh keeps its measurements in its pairs, a run in its points.
    let (n, noun) = match &u.report.mesh {
        Some(m) => (m.pairs.len(), "pair"),
        None => (u.report.points.len(), "point"),
    };
    let points = match n {
        1 => format!("1 {noun}"),
        n => format!("{n} {noun}s"),
    };
    let not_saved = format!("the run was not saved in {db} ({reason})");
    if n == 0 {
        let line = format!(
            "the results database {db} could not be written ({reason}); the run measured no {noun}, so nothing is lost"
        );
        return (line, not_saved);
    }
    let held = match u.row {
        Some((id, k)) if k < n => format!("; run {id} there holds {k} of them"),
        Some(_) => String::new(),
        None => "; the database holds none of them".to_owned(),
    };
    let doc = match crate::model::to_json(&u.report) {
        Ok(d) => d + "\n",
        Err(e) => {
            let line = format!(
                "the results database {db} could not be written ({reason}), nor the run encoded for a recovery file ({e}): its {points} are only in the output above"
            );
            return (line, not_saved);
        }
    };
    let places = recovery::places_here(&u.db);
    match recovery::write_first(&places, &recovery::stem(), doc.as_bytes()) {
        Ok(path) => {
            let path = path.display();
            let line = format!(
                "the results database {db} could not be written ({reason}); the run's {points} are in {path} (wirebench import {path} adds them to a database{held})"
            );
            (line, format!("{not_saved}: its {points} are in {path}"))
        }
        Err(nowhere) => {
            eprintln!(
                "wirebench: no recovery file could be written ({nowhere}): the run's document follows"
            );
            eprint!("{doc}");
            let line = format!(
                "the results database {db} could not be written ({reason}), nor a recovery file: the run's {points} are in the document above (save it as a file for wirebench import{held})"
            );
            (line, format!("{not_saved}, nor in a recovery file: its {points} are in the document printed above"))
        }
    }
}

/// For a run saved whole once it is over (a mesh): when the database at `db` could not take
/// `report` (`reason`), writes its recovery file and says where on stderr.
pub fn recover_document(report: &RunDocument, db: &std::path::Path, reason: &str) {
    let u = Unsaved {
        report: report.clone(),
        db: db.to_owned(),
        reason: reason.to_owned(),
        row: None,
    };
    let (line, _) = recover(&u);
    eprintln!("wirebench: {}", crate::text::printable(&line));
}

/// A run whose end never came (a panic unwinding through it) is recovered all the same.
impl Drop for SavingSink {
    fn drop(&mut self) {
        self.recover_unsaved();
    }
}

/// The run is saved whether or not its output could be written: a failed write is returned
/// after the saving, so what was measured is kept.
impl Sink for SavingSink {
    fn begin(&mut self, report: &RunDocument) -> Result<()> {
        self.began = true;
        // Saved first, so the output can name the run by its id.
        self.store(report.clone());
        if let Some(id) = self.id {
            self.inner.saved_as(id);
        }
        self.inner.begin(report)
    }

    fn point(&mut self, report: &RunDocument, point: &PointResult) -> Result<()> {
        // The runner adds the point to the report after showing it. Kept before it is shown:
        // a second Ctrl-C right after the point appears (while a failing database write was
        // still under way) once wrote a recovery file without it.
        let mut with_point = report.clone();
        with_point.points.push(point.clone());
        self.store(with_point);
        self.inner.point(report, point)
    }

    fn finish(&mut self, report: &RunDocument) -> Result<()> {
        let shown = self.inner.finish(report);
        // A run whose session never opened measured nothing and is not kept.
        if !self.began {
            return shown;
        }
        self.store(report.clone());
        // The database does not hold the run as it ended: the recovery file does, and the
        // line naming it is printed now, before anything else can end the process.
        self.recover_unsaved();
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

    fn progress(&self, points: u64, seconds: Option<f64>) -> ProgressBar {
        self.inner.progress(points, seconds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::handle::Output;
    use crate::output::table::TableSink;

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
        let mut sink = SavingSink::new(
            Box::new(TableSink::to(Output::to(Box::new(Full)))),
            db,
            status.clone(),
            Source::Run,
        );
        let full = crate::store::db::tests::report("pingpong", 2, 20_000.0);
        let mut r = full.clone();
        r.points.clear();
        assert!(sink.begin(&r).is_err());
        assert!(sink.point(&r, &full.points[0]).is_err());
        r.points.push(full.points[0].clone());
        assert!(sink.finish(&r).is_err());
        assert!(status.outcome().is_ok());
        let id = sink.id.expect("the run has a row");
        assert_eq!(sink.db.load(id).unwrap().points, r.points);
    }

    /// A sink saving into `dir/r.sqlite`, printing nowhere.
    fn quiet_sink(dir: &std::path::Path) -> (SavingSink, SaveStatus) {
        let db = Db::open_or_create(&dir.join("r.sqlite")).unwrap();
        let status = SaveStatus::default();
        let sink = SavingSink::new(
            Box::new(TableSink::to(Output::to(Box::new(std::io::sink())))),
            db,
            status.clone(),
            Source::Run,
        );
        (sink, status)
    }

    /// Writes to the database fail from now on (as on a full disk: SQLite refuses the
    /// statement and keeps the file as it was), or succeed again.
    fn refuse_writes(sink: &SavingSink, refuse: bool) {
        let on = if refuse { "ON" } else { "OFF" };
        sink.db
            .conn()
            .execute_batch(&format!("PRAGMA query_only = {on}"))
            .unwrap();
    }

    /// The recovery files in `dir`, parsed as `wirebench import` reads them.
    fn recovered(dir: &std::path::Path) -> Vec<RunDocument> {
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("wirebench-recovery-")
            })
            .collect();
        files.sort();
        files
            .iter()
            .map(|f| db::parse_report(&std::fs::read_to_string(f).unwrap()).unwrap())
            .collect()
    }

    /// Runs `full`'s points through `sink`, calling `between(k)` before point k, and ends the
    /// run as complete.
    fn measure(
        sink: &mut SavingSink,
        full: &RunDocument,
        mut between: impl FnMut(&SavingSink, usize),
    ) -> RunDocument {
        let mut r = full.clone();
        r.points.clear();
        r.complete = false;
        between(sink, 0);
        sink.begin(&r).unwrap();
        for (k, p) in full.points.iter().enumerate() {
            between(sink, k + 1);
            sink.point(&r, p).unwrap();
            r.points.push(p.clone());
        }
        r.complete = true;
        sink.finish(&r).unwrap();
        r
    }

    #[test]
    fn a_database_that_stops_taking_the_run_leaves_every_point_in_a_recovery_file() {
        let dir = tempfile::tempdir().unwrap();
        let (mut sink, status) = quiet_sink(dir.path());
        let full = crate::store::db::tests::report("pingpong", 3, 20_000.0);
        let ended = measure(&mut sink, &full, |s, k| {
            if k == 2 {
                refuse_writes(s, true);
            }
        });
        let e = status.outcome().unwrap_err().to_string();
        assert!(
            e.contains("its 3 points are in") && e.contains(&dir.path().display().to_string()),
            "{e}"
        );
        let files = recovered(dir.path());
        assert_eq!(files.len(), 1);
        assert_eq!(
            files[0], ended,
            "the recovery file is the whole run as it ended"
        );
        // The database keeps what it took before the failure, marked incomplete.
        let id = sink.id.unwrap();
        let kept = sink.db.load(id).unwrap();
        assert_eq!(kept.points.len(), 1);
        assert!(!kept.complete);
        assert_eq!(kept.planned_points, ended.planned_points);
    }

    #[test]
    fn a_database_refusing_the_run_from_its_start_leaves_it_all_in_a_recovery_file() {
        let dir = tempfile::tempdir().unwrap();
        let (mut sink, status) = quiet_sink(dir.path());
        let full = crate::store::db::tests::report("pingpong", 2, 20_000.0);
        let ended = measure(&mut sink, &full, |s, k| {
            if k == 0 {
                refuse_writes(s, true);
            }
        });
        assert!(sink.id.is_none());
        let e = status.outcome().unwrap_err().to_string();
        assert!(e.contains("its 2 points are in"), "{e}");
        assert_eq!(recovered(dir.path()), vec![ended]);
    }

    #[test]
    fn a_database_that_takes_the_run_again_needs_no_recovery_file() {
        let dir = tempfile::tempdir().unwrap();
        let (mut sink, status) = quiet_sink(dir.path());
        let full = crate::store::db::tests::report("pingpong", 3, 20_000.0);
        let ended = measure(&mut sink, &full, |s, k| match k {
            0 => refuse_writes(s, true),
            2 => refuse_writes(s, false),
            _ => {}
        });
        assert!(status.outcome().is_ok());
        assert!(recovered(dir.path()).is_empty());
        assert_eq!(sink.db.load(sink.id.unwrap()).unwrap(), ended);
    }

    #[test]
    fn a_run_whose_session_never_opened_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (mut sink, status) = quiet_sink(dir.path());
        refuse_writes(&sink, true);
        let mut r = crate::store::db::tests::report("pingpong", 2, 20_000.0);
        r.points.clear();
        r.complete = false;
        sink.finish(&r).unwrap();
        assert!(status.outcome().is_ok());
        drop(sink);
        assert!(recovered(dir.path()).is_empty());
    }

    #[test]
    fn a_run_that_never_ends_is_recovered_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let (mut sink, _status) = quiet_sink(dir.path());
        refuse_writes(&sink, true);
        let full = crate::store::db::tests::report("pingpong", 2, 20_000.0);
        let mut r = full.clone();
        r.points.clear();
        sink.begin(&r).unwrap();
        sink.point(&r, &full.points[0]).unwrap();
        drop(sink);
        let files = recovered(dir.path());
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].points, full.points[..1]);
    }
}
