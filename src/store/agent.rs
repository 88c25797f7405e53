//! What `wirebench agent` keeps in the results database beyond its runs: their retention (by
//! age or count, agent runs only), the headline figures its regression check reads, and the
//! regression marks `history` shows.

use std::time::{Duration, SystemTime};

use anyhow::Result;
use rusqlite::params;

use super::db::{Db, Source};

/// One saved agent run's headline figures, as `history` shows them.
#[derive(Debug, Clone, PartialEq)]
pub struct Figures {
    pub id: i64,
    /// Nanoseconds (one-way for ping-pong), None when the run has none.
    pub latency_ns: Option<f64>,
    pub throughput_bits_per_s: Option<f64>,
    /// The headline's note: set when its figures are not valid or left points out.
    pub note: Option<String>,
}

/// The newest runs of one label: read from the index `runs_agent_figures` alone (schema step
/// 8), without the documents.
const AGENT_FIGURES: &str = "SELECT id, latency_ns, throughput_bits_per_s, headline_note FROM runs
             WHERE source = ?1 AND label = ?2 AND complete = 1
             ORDER BY id DESC LIMIT ?3";

impl Db {
    /// Deletes agent runs that started before `now - max_age`, then all but the newest
    /// `max_runs` agent runs; runs of any other source are never touched. How many went.
    pub fn apply_agent_retention(
        &self,
        max_age: Option<Duration>,
        max_runs: Option<u64>,
        now: SystemTime,
    ) -> Result<u64> {
        let source = Source::Agent.as_str();
        let mut deleted = 0;
        if let Some(age) = max_age {
            if let Some(cutoff) = now.checked_sub(age) {
                // started_at is RFC 3339 UTC with milliseconds, as this cutoff: text order
                // is time order.
                let cutoff = humantime::format_rfc3339_millis(cutoff).to_string();
                deleted += self.conn().execute(
                    "DELETE FROM runs WHERE source = ?1 AND started_at < ?2",
                    params![source, cutoff],
                )?;
            }
        }
        if let Some(n) = max_runs {
            let keep = i64::try_from(n).unwrap_or(i64::MAX);
            deleted += self.conn().execute(
                "DELETE FROM runs WHERE source = ?1 AND id NOT IN
                     (SELECT id FROM runs WHERE source = ?1 ORDER BY id DESC LIMIT ?2)",
                params![source, keep],
            )?;
        }
        Ok(deleted as u64)
    }

    /// The newest `limit` complete agent runs labelled exactly `label`, newest first.
    pub fn agent_figures(&self, label: &str, limit: usize) -> Result<Vec<Figures>> {
        let mut stmt = self.conn().prepare_cached(AGENT_FIGURES)?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = stmt.query_map(params![Source::Agent.as_str(), label, limit], |r| {
            Ok(Figures {
                id: r.get(0)?,
                latency_ns: r.get(1)?,
                throughput_bits_per_s: r.get(2)?,
                note: r.get(3)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Marks run `id` as the one at which a regression was found, with what was found.
    pub fn mark_regression(&self, id: i64, text: &str) -> Result<()> {
        self.conn()
            .prepare_cached("UPDATE runs SET regression = ?2 WHERE id = ?1")?
            .execute(params![id, text])?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::db::{tests::report, Filter};

    fn temp_db() -> (tempfile::TempDir, Db) {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open_or_create(&dir.path().join("r.db")).unwrap();
        (dir, db)
    }

    fn save(db: &Db, started_at: &str, label: &str, source: Source) -> i64 {
        let mut r = report("pingpong", 1, 1000.0);
        r.started_at = started_at.into();
        r.label = Some(label.into());
        db.insert(&r, source).unwrap()
    }

    fn ids(db: &Db) -> Vec<i64> {
        let mut ids: Vec<i64> = db
            .list(&Filter::default())
            .unwrap()
            .iter()
            .map(|r| r.id)
            .collect();
        ids.sort();
        ids
    }

    #[test]
    fn retention_deletes_old_and_surplus_agent_runs_only() {
        let (_d, db) = temp_db();
        let now = humantime::parse_rfc3339("2026-03-31T00:00:00Z").unwrap();
        let old_run = save(&db, "2026-01-01T00:00:00.000Z", "x", Source::Run);
        let old_agent = save(&db, "2026-01-01T00:00:00.000Z", "a/p", Source::Agent);
        let a1 = save(&db, "2026-03-30T00:00:00.000Z", "a/p", Source::Agent);
        let a2 = save(&db, "2026-03-30T00:01:00.000Z", "a/p", Source::Agent);
        let a3 = save(&db, "2026-03-30T00:02:00.000Z", "b/p", Source::Agent);
        let n = db
            .apply_agent_retention(Some(Duration::from_secs(30 * 86_400)), None, now)
            .unwrap();
        assert_eq!(n, 1);
        assert_eq!(ids(&db), vec![old_run, a1, a2, a3]);
        let n = db.apply_agent_retention(None, Some(2), now).unwrap();
        assert_eq!(n, 1, "the oldest agent run goes");
        assert_eq!(ids(&db), vec![old_run, a2, a3]);
        let _ = old_agent;
        assert_eq!(db.apply_agent_retention(None, Some(2), now).unwrap(), 0);
    }

    #[test]
    fn figures_and_regression_marks_reach_history() {
        let (_d, db) = temp_db();
        let a = save(&db, "2026-03-30T00:00:00.000Z", "a/p", Source::Agent);
        save(&db, "2026-03-30T00:00:01.000Z", "b/p", Source::Agent);
        let c = save(&db, "2026-03-30T00:00:02.000Z", "a/p", Source::Agent);
        save(&db, "2026-03-30T00:00:03.000Z", "a/p", Source::Run);
        let f = db.agent_figures("a/p", 10).unwrap();
        assert_eq!(f.iter().map(|x| x.id).collect::<Vec<_>>(), vec![c, a]);
        assert!(f[0].latency_ns.is_some());
        assert_eq!(db.agent_figures("a/p", 1).unwrap().len(), 1);
        db.mark_regression(c, "latency +20%").unwrap();
        let rows = db.list(&Filter::default()).unwrap();
        let row = rows.iter().find(|r| r.id == c).unwrap();
        assert_eq!(row.regression.as_deref(), Some("latency +20%"));
        assert_eq!(row.source, "agent");
        assert!(rows
            .iter()
            .filter(|r| r.id != c)
            .all(|r| r.regression.is_none()));
        let json = serde_json::to_string(row).unwrap();
        assert!(json.contains("\"regression\":\"latency +20%\""), "{json}");
    }

    /// The agent reads this after every run: from its index alone, in the index's order,
    /// never walking the documents' pages nor sorting.
    #[test]
    fn a_tests_last_figures_are_read_from_an_index_alone() {
        let (_d, db) = temp_db();
        save(&db, "2026-03-30T00:00:00.000Z", "a/p", Source::Agent);
        let plan: Vec<String> = db
            .conn()
            .prepare(&format!("EXPLAIN QUERY PLAN {AGENT_FIGURES}"))
            .unwrap()
            .query_map(params!["agent", "a/p", 10], |r| r.get::<_, String>(3))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(plan.len(), 1, "{plan:?}");
        assert!(
            plan[0].contains("USING COVERING INDEX runs_agent_figures"),
            "{plan:?}"
        );
    }

    /// The agent's connection writes ahead; another connection (`history` while the agent
    /// runs) reads what it committed.
    #[test]
    fn a_tuned_connection_writes_ahead_and_another_reads_its_runs() {
        let (d, db) = temp_db();
        db.tune_for_steady_writes().unwrap();
        let mode: String = db
            .conn()
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        let id = save(&db, "2026-03-30T00:00:00.000Z", "a/p", Source::Agent);
        let other = Db::open_existing(&d.path().join("r.db")).unwrap();
        assert_eq!(ids(&other), vec![id]);
    }
}
