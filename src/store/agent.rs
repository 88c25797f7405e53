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
    /// Deletes this agent's runs (source `agent`, labelled one of `labels`: its own
    /// TARGET/TEST pairs) that started before `now - max_age`, then all but the newest
    /// `max_runs` of them; runs of any other source, and another agent's runs in a shared
    /// database, are never touched. How many went. A `max_age` reaching back before 1970
    /// deletes nothing by age (no run started then).
    pub fn apply_agent_retention(
        &self,
        labels: &[String],
        max_age: Option<Duration>,
        max_runs: Option<u64>,
        now: SystemTime,
    ) -> Result<u64> {
        if labels.is_empty() {
            return Ok(0);
        }
        let source = Source::Agent.as_str();
        // ?1 the source, ?2 the age cutoff or the count, ?3.. the labels.
        let among: Vec<String> = (0..labels.len()).map(|i| format!("?{}", i + 3)).collect();
        let among = among.join(", ");
        let args = |second: rusqlite::types::Value| {
            let mut v = vec![rusqlite::types::Value::Text(source.to_owned()), second];
            v.extend(labels.iter().cloned().map(rusqlite::types::Value::Text));
            v
        };
        let mut deleted = 0;
        if let Some(cutoff) = max_age
            .and_then(|age| now.checked_sub(age))
            .filter(|c| *c >= SystemTime::UNIX_EPOCH)
        {
            // started_at is RFC 3339 UTC with milliseconds, as this cutoff: text order is
            // time order.
            let cutoff = humantime::format_rfc3339_millis(cutoff).to_string();
            deleted += self.conn().execute(
                &format!(
                    "DELETE FROM runs WHERE source = ?1 AND started_at < ?2 AND label IN ({among})"
                ),
                rusqlite::params_from_iter(args(rusqlite::types::Value::Text(cutoff))),
            )?;
        }
        if let Some(n) = max_runs {
            let keep = i64::try_from(n).unwrap_or(i64::MAX);
            deleted += self.conn().execute(
                &format!(
                    "DELETE FROM runs WHERE source = ?1 AND label IN ({among}) AND id NOT IN
                     (SELECT id FROM runs WHERE source = ?1 AND label IN ({among})
                      ORDER BY id DESC LIMIT ?2)"
                ),
                rusqlite::params_from_iter(args(rusqlite::types::Value::Integer(keep))),
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
        let ours = labels(&["a/p", "b/p"]);
        let n = db
            .apply_agent_retention(&ours, Some(Duration::from_secs(30 * 86_400)), None, now)
            .unwrap();
        assert_eq!(n, 1);
        assert_eq!(ids(&db), vec![old_run, a1, a2, a3]);
        let n = db.apply_agent_retention(&ours, None, Some(2), now).unwrap();
        assert_eq!(n, 1, "the oldest agent run goes");
        assert_eq!(ids(&db), vec![old_run, a2, a3]);
        let _ = old_agent;
        assert_eq!(
            db.apply_agent_retention(&ours, None, Some(2), now).unwrap(),
            0
        );
    }

    fn labels(l: &[&str]) -> Vec<String> {
        l.iter().map(|s| s.to_string()).collect()
    }

    /// Two agents share one database: each one's retention deletes its own runs alone,
    /// by age and by count.
    #[test]
    fn retention_leaves_another_agents_runs_alone() {
        let (_d, db) = temp_db();
        let now = humantime::parse_rfc3339("2026-03-31T00:00:00Z").unwrap();
        let theirs_old = save(&db, "2025-01-01T00:00:00.000Z", "far/ping", Source::Agent);
        let theirs: Vec<i64> = (0..5)
            .map(|i| {
                save(
                    &db,
                    &format!("2026-03-30T00:0{i}:00.000Z"),
                    "far/ping",
                    Source::Agent,
                )
            })
            .collect();
        let _mine_old = save(&db, "2025-01-01T00:00:00.000Z", "near/ping", Source::Agent);
        let mine: Vec<i64> = (0..3)
            .map(|i| {
                save(
                    &db,
                    &format!("2026-03-30T00:1{i}:00.000Z"),
                    "near/ping",
                    Source::Agent,
                )
            })
            .collect();
        let ours = labels(&["near/ping"]);
        let n = db
            .apply_agent_retention(&ours, Some(Duration::from_secs(86_400)), Some(1), now)
            .unwrap();
        assert_eq!(n, 3, "my old run by age, then two of my three by count");
        let mut want = vec![theirs_old];
        want.extend(&theirs);
        want.push(mine[2]);
        assert_eq!(ids(&db), want);
        // No labels: nothing is this agent's.
        assert_eq!(
            db.apply_agent_retention(&[], None, Some(1), now).unwrap(),
            0
        );
    }

    /// `max_age = "36500d"` reaches back before 1970: no run is that old, none is deleted,
    /// and nothing panics (formatting a time before the epoch did).
    #[test]
    fn an_age_before_1970_deletes_nothing() {
        let (_d, db) = temp_db();
        let now = humantime::parse_rfc3339("2026-03-31T00:00:00Z").unwrap();
        let a = save(&db, "2026-03-30T00:00:00.000Z", "a/p", Source::Agent);
        let century = Duration::from_secs(36_500 * 86_400);
        let n = db
            .apply_agent_retention(&labels(&["a/p"]), Some(century), None, now)
            .unwrap();
        assert_eq!(n, 0);
        assert_eq!(ids(&db), vec![a]);
        let n = db
            .apply_agent_retention(&labels(&["a/p"]), Some(Duration::MAX), None, now)
            .unwrap();
        assert_eq!(n, 0);
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
