//! Studies in the results database, beside the runs they are made of: the file as it was run,
//! its seed and order, and a row per finished run. Written as the study goes, so that a crash
//! or a `kill -9` loses at most the run in progress and `--resume` finds where to go on.

use anyhow::{anyhow, bail, Result};
use rusqlite::{params, OptionalExtension};
use serde::Serialize;

use super::schedule::Slot;
use crate::store::db::Db;

/// What a row of `study_runs` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A repetition of the schedule.
    Measure,
    /// An extra run of a point flagged as an anomaly.
    Rerun,
    /// One rate tried by a search.
    Probe,
    /// A search's answer: the highest rate that met the target (its run is that probe's).
    Search,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Measure => "measure",
            Kind::Rerun => "rerun",
            Kind::Probe => "probe",
            Kind::Search => "search",
        }
    }
    fn parse(s: &str) -> Kind {
        match s {
            "rerun" => Kind::Rerun,
            "probe" => Kind::Probe,
            "search" => Kind::Search,
            _ => Kind::Measure,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Done,
    /// Failed (or timed out) on every attempt; the study went on.
    Failed,
}

/// One finished run (or search) of a study.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StudyRun {
    pub slot: usize,
    pub probe: u32,
    pub point: usize,
    pub repetition: u32,
    pub kind: Kind,
    pub status: Status,
    pub run_id: Option<i64>,
    pub attempts: u32,
    pub error: Option<String>,
    /// The rate of a probe, or the answer of a search.
    pub rate_bits_per_s: Option<f64>,
}

/// A study's row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StudyRow {
    pub id: i64,
    pub name: String,
    pub file_path: Option<String>,
    #[serde(skip)]
    pub file_text: String,
    pub seed: u64,
    pub started_at: String,
    pub finished_at: Option<String>,
    /// running, complete, incomplete (finished with runs that failed: `--resume` tries
    /// them again), interrupted or failed.
    pub status: String,
    #[serde(skip)]
    pub schedule: Vec<Slot>,
}

pub fn create(
    db: &Db,
    name: &str,
    file_path: Option<&str>,
    file_text: &str,
    seed: u64,
    schedule: &[Slot],
) -> Result<i64> {
    db.conn().execute(
        "INSERT INTO studies (name, file_path, file_text, seed, started_at, status, schedule_json)
         VALUES (?1, ?2, ?3, ?4, ?5, 'running', ?6)",
        params![
            name,
            file_path,
            file_text,
            seed as i64,
            crate::env::now_rfc3339(),
            serde_json::to_string(schedule)?
        ],
    )?;
    Ok(db.conn().last_insert_rowid())
}

const COLUMNS: &str =
    "id, name, file_path, file_text, seed, started_at, finished_at, status, schedule_json";

fn row(r: &rusqlite::Row) -> rusqlite::Result<(StudyRow, String)> {
    Ok((
        StudyRow {
            id: r.get(0)?,
            name: r.get(1)?,
            file_path: r.get(2)?,
            file_text: r.get(3)?,
            seed: r.get::<_, i64>(4)? as u64,
            started_at: r.get(5)?,
            finished_at: r.get(6)?,
            status: r.get(7)?,
            schedule: Vec::new(),
        },
        r.get(8)?,
    ))
}

fn with_schedule((mut s, json): (StudyRow, String)) -> Result<StudyRow> {
    s.schedule = serde_json::from_str(&json)
        .map_err(|e| anyhow!("study {}: its stored order does not read: {e}", s.id))?;
    Ok(s)
}

pub fn load(db: &Db, id: i64) -> Result<StudyRow> {
    let found = db
        .conn()
        .query_row(
            &format!("SELECT {COLUMNS} FROM studies WHERE id = ?1"),
            [id],
            row,
        )
        .optional()?;
    with_schedule(found.ok_or_else(|| anyhow!("no study {id} in {}", db.path().display()))?)
}

/// "12" or "last".
pub fn resolve(db: &Db, spec: &str) -> Result<i64> {
    if spec == "last" {
        return db
            .conn()
            .query_row("SELECT max(id) FROM studies", [], |r| {
                r.get::<_, Option<i64>>(0)
            })?
            .ok_or_else(|| anyhow!("no study in {} yet", db.path().display()));
    }
    spec.parse()
        .map_err(|_| anyhow!("study '{spec}': give its number (wirebench study list) or 'last'"))
}

/// The latest unfinished study of this name, to resume; an error when its file has changed
/// since (resuming would mix two experiments) or when every study of the name is complete.
pub fn resumable(db: &Db, name: &str, file_text: &str) -> Result<StudyRow> {
    let found = db
        .conn()
        .query_row(
            &format!(
                "SELECT {COLUMNS} FROM studies WHERE name = ?1 AND status != 'complete'
                 ORDER BY id DESC LIMIT 1"
            ),
            [name],
            row,
        )
        .optional()?;
    let Some(found) = found else {
        bail!(
            "no unfinished study named '{name}' in {} to resume (start it without --resume)",
            db.path().display()
        );
    };
    let study = with_schedule(found)?;
    if study.file_text != file_text {
        bail!(
            "the study file has changed since study {} started on {}; resuming would mix two experiments (start anew without --resume)",
            study.id,
            study.started_at
        );
    }
    Ok(study)
}

pub fn list(db: &Db) -> Result<Vec<StudyRow>> {
    let mut stmt = db
        .conn()
        .prepare(&format!("SELECT {COLUMNS} FROM studies ORDER BY id"))?;
    let rows = stmt.query_map([], row)?;
    rows.map(|r| with_schedule(r?)).collect()
}

pub fn record(db: &Db, study: i64, r: &StudyRun) -> Result<()> {
    db.conn().execute(
        "INSERT OR REPLACE INTO study_runs (study_id, slot, probe, point, repetition, kind,
             status, run_id, attempts, error, rate_bits_per_s, finished_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        params![
            study,
            r.slot as i64,
            r.probe,
            r.point as i64,
            r.repetition,
            r.kind.as_str(),
            match r.status {
                Status::Done => "done",
                Status::Failed => "failed",
            },
            r.run_id,
            r.attempts,
            r.error,
            r.rate_bits_per_s,
            crate::env::now_rfc3339(),
        ],
    )?;
    Ok(())
}

pub fn runs(db: &Db, study: i64) -> Result<Vec<StudyRun>> {
    let mut stmt = db.conn().prepare(
        "SELECT slot, probe, point, repetition, kind, status, run_id, attempts, error,
             rate_bits_per_s
         FROM study_runs WHERE study_id = ?1 ORDER BY slot, probe",
    )?;
    let rows = stmt.query_map([study], |r| {
        Ok(StudyRun {
            slot: r.get::<_, i64>(0)? as usize,
            probe: r.get(1)?,
            point: r.get::<_, i64>(2)? as usize,
            repetition: r.get(3)?,
            kind: Kind::parse(&r.get::<_, String>(4)?),
            status: if r.get::<_, String>(5)? == "done" {
                Status::Done
            } else {
                Status::Failed
            },
            run_id: r.get(6)?,
            attempts: r.get(7)?,
            error: r.get(8)?,
            rate_bits_per_s: r.get(9)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Slots already done: a resumed study skips them. A slot that failed is tried again (what
/// failed it may have passed: a lost server, a full disk), and probes do not count: a search
/// that was cut short starts again.
pub fn finished_slots(runs: &[StudyRun]) -> std::collections::HashSet<usize> {
    runs.iter()
        .filter(|r| r.kind != Kind::Probe && r.status == Status::Done)
        .map(|r| r.slot)
        .collect()
}

pub fn set_status(db: &Db, study: i64, status: &str) -> Result<()> {
    let finished = (status != "running").then(crate::env::now_rfc3339);
    db.conn().execute(
        "UPDATE studies SET status = ?2, finished_at = ?3 WHERE id = ?1",
        params![study, status, finished],
    )?;
    Ok(())
}

/// Adds slots (re-runs of anomalies) to the end of a study's order.
pub fn extend_schedule(db: &Db, study: i64, schedule: &[Slot]) -> Result<()> {
    db.conn().execute(
        "UPDATE studies SET schedule_json = ?2 WHERE id = ?1",
        params![study, serde_json::to_string(schedule)?],
    )?;
    Ok(())
}

pub fn set_anomalies(db: &Db, study: i64, json: &str) -> Result<()> {
    db.conn().execute(
        "UPDATE studies SET anomalies_json = ?2 WHERE id = ?1",
        params![study, json],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> (tempfile::TempDir, Db) {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open_or_create(&dir.path().join("r.db")).unwrap();
        (dir, db)
    }

    fn done(slot: usize, kind: Kind) -> StudyRun {
        StudyRun {
            slot,
            probe: 0,
            point: slot,
            repetition: 1,
            kind,
            status: Status::Done,
            run_id: Some(slot as i64),
            attempts: 1,
            error: None,
            rate_bits_per_s: None,
        }
    }

    #[test]
    fn a_study_resumes_from_its_finished_slots_and_only_with_the_same_file() {
        let (_dir, db) = db();
        let order = vec![
            Slot {
                point: 1,
                repetition: 1,
            },
            Slot {
                point: 0,
                repetition: 1,
            },
        ];
        let id = create(&db, "w", Some("w.toml"), "text", 7, &order).unwrap();
        record(&db, id, &done(0, Kind::Measure)).unwrap();
        record(
            &db,
            id,
            &StudyRun {
                probe: 1,
                ..done(1, Kind::Probe)
            },
        )
        .unwrap();
        let s = resumable(&db, "w", "text").unwrap();
        assert_eq!((s.id, s.seed, s.schedule.clone()), (id, 7, order));
        let failed = StudyRun {
            status: Status::Failed,
            run_id: None,
            ..done(1, Kind::Measure)
        };
        record(&db, id, &failed).unwrap();
        let finished = finished_slots(&runs(&db, id).unwrap());
        assert_eq!(finished.into_iter().collect::<Vec<_>>(), vec![0]);
        let e = resumable(&db, "w", "changed").unwrap_err().to_string();
        assert!(e.contains("has changed"), "{e}");
        set_status(&db, id, "complete").unwrap();
        let e = resumable(&db, "w", "text").unwrap_err().to_string();
        assert!(e.contains("no unfinished study"), "{e}");
        assert_eq!(resolve(&db, "last").unwrap(), id);
        assert_eq!(list(&db).unwrap()[0].status, "complete");
    }
}
