//! The results database: one SQLite file, a `runs` table holding each run's whole result
//! document next to the columns `history` filters on, and a `schema_version` table that
//! [`super::migrations`] brings up to date when the file is opened.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::migrations::{HEADLINE_NOTE, LATEST, MIGRATIONS};
use crate::model::headline;
use crate::model::{RunDocument, SCHEMA, SCHEMA_VERSION};

/// How long a writer waits for another wirebench process holding the database.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The per-user default: $XDG_DATA_HOME/wirebench/results.sqlite, else
/// ~/.local/share/wirebench/results.sqlite (the XDG base directory default).
pub fn default_path() -> Result<PathBuf> {
    let non_empty = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let data = match non_empty("XDG_DATA_HOME") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(non_empty("HOME").ok_or_else(|| {
            anyhow!("neither XDG_DATA_HOME nor HOME is set: choose a database with --db PATH")
        })?)
        .join(".local/share"),
    };
    Ok(data.join("wirebench").join("results.sqlite"))
}

/// `--db PATH` if given, else the default.
pub fn resolve(path: Option<&Path>) -> Result<PathBuf> {
    match path {
        Some(p) => Ok(p.to_owned()),
        None => default_path(),
    }
}

/// Where a run came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Measured by `wirebench run` on this machine.
    Run,
    /// Taken in by `wirebench import`.
    Import,
    /// Measured as part of a study (`wirebench study`).
    Study,
    /// Every pair of ranks of `wirebench mesh`, as one document.
    Mesh,
    /// One sweep of `wirebench compare-transports`.
    CompareTransports,
    /// Measured by `wirebench agent` on its schedule.
    Agent,
}

impl Source {
    /// The name in the `source` column, in `history` and for `history --source`.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Run => "run",
            Source::Import => "import",
            Source::Study => "study",
            Source::Mesh => "mesh",
            Source::CompareTransports => "compare-transports",
            Source::Agent => "agent",
        }
    }
}

/// One line of `history` (and one element of `history --json`'s `runs`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RunRow {
    pub id: i64,
    pub started_at: String,
    pub pattern: String,
    pub transport: String,
    pub server_address: Option<String>,
    pub client_host: Option<String>,
    pub points: i64,
    /// The points an incomplete run set out to measure, when its document says (see
    /// [`RunDocument::planned_points`]); None for complete runs.
    pub planned_points: Option<i64>,
    pub complete: bool,
    /// What saved it: run, import, study, mesh, compare-transports or agent.
    pub source: String,
    /// The run's label (`run --label`, `wirebench label`, or the study or comparison it was
    /// part of).
    pub label: Option<String>,
    /// The study the run was measured for, when it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub study_id: Option<i64>,
    pub latency_ns: Option<f64>,
    pub throughput_bits_per_s: Option<f64>,
    pub transactions_per_s: Option<f64>,
    /// What the headline figures left out, or that they are not valid (see
    /// [`headline::RunHeadline::note`]).
    pub headline_note: Option<String>,
    /// `wirebench agent` found a regression at this run: what it found (the figure, its
    /// change and interval against the baseline window).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regression: Option<String>,
}

/// What `history` lists; `None` fields do not filter.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub pattern: Option<String>,
    pub transport: Option<String>,
    /// Substring of the server address.
    pub peer: Option<String>,
    /// Client host name, exactly.
    pub host: Option<String>,
    /// Started at or after this RFC 3339 time or date prefix (e.g. 2025-01-31).
    pub since: Option<String>,
    /// Started before this RFC 3339 time or date prefix.
    pub until: Option<String>,
    /// The `source` column, exactly (see [`Source::as_str`]).
    pub source: Option<String>,
    /// Substring of the label, in any case.
    pub label: Option<String>,
    pub incomplete_only: bool,
    pub limit: Option<u32>,
}

impl Filter {
    /// The SQL conditions on `runs` (joined in other queries, so every column is qualified)
    /// and their arguments in order.
    fn conditions(&self) -> (String, Vec<String>) {
        let mut sql = String::from("1 = 1");
        let mut args = Vec::new();
        for (clause, value) in [
            ("runs.pattern = ?", &self.pattern),
            ("runs.transport = ?", &self.transport),
            (
                "instr(coalesce(runs.server_address, ''), ?) > 0",
                &self.peer,
            ),
            ("runs.client_host = ?", &self.host),
            ("runs.started_at >= ?", &self.since),
            ("runs.started_at < ?", &self.until),
            ("runs.source = ?", &self.source),
            (
                "instr(lower(coalesce(runs.label, '')), lower(?)) > 0",
                &self.label,
            ),
        ] {
            if let Some(v) = value {
                sql.push_str(" AND ");
                sql.push_str(clause);
                args.push(v.clone());
            }
        }
        if self.incomplete_only {
            sql.push_str(" AND runs.complete = 0");
        }
        (sql, args)
    }
}

/// The runs of one study that a filter matched, as `history` folds them into one line.
#[derive(Debug, Clone, PartialEq)]
pub struct StudyGroup {
    pub study_id: i64,
    pub name: String,
    /// Matching runs of the study.
    pub runs: i64,
    /// Its newest matching run: where the line goes in a newest-first listing.
    pub newest_run: i64,
    /// When its first matching run started.
    pub started_at: String,
    /// The pattern or transport all its runs share, else None.
    pub pattern: Option<String>,
    pub transport: Option<String>,
    pub points: i64,
    /// How many of its runs did not complete.
    pub incomplete: i64,
}

pub struct Db {
    conn: Connection,
    path: PathBuf,
}

/// One row of `app_runs` as `history` lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct AppRunRow {
    pub id: i64,
    pub started_at: String,
    pub kernel: String,
    pub transport: String,
    pub ranks: i64,
}

impl Db {
    /// Opens the database, creating the file and its directory when missing, and migrates it.
    pub fn open_or_create(path: &Path) -> Result<Db> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("creating the directory {}", dir.display()))?;
        }
        Db::open_with(path, true)
    }

    /// Opens an existing database (for commands that only read or add to a history), and
    /// migrates it.
    pub fn open_existing(path: &Path) -> Result<Db> {
        if !path.exists() {
            bail!(
                "no results database at {} (wirebench run saves there; choose another with --db PATH)",
                path.display()
            );
        }
        Db::open_with(path, false)
    }

    fn open_with(path: &Path, create: bool) -> Result<Db> {
        use rusqlite::OpenFlags;
        let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        if create {
            flags |= OpenFlags::SQLITE_OPEN_CREATE;
        }
        let conn = Connection::open_with_flags(path, flags)
            .with_context(|| format!("opening the results database {}", path.display()))?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        let mut db = Db {
            conn,
            path: path.to_owned(),
        };
        db.migrate()
            .with_context(|| format!("results database {}", path.display()))?;
        Ok(db)
    }

    /// Tunes this connection for a process that saves small runs all day (the agent): with
    /// the write-ahead log and `synchronous = NORMAL` a commit is an append, synced at the
    /// log's checkpoints instead of at every commit. A crash of the process loses no committed
    /// run; a power failure may lose the last ones. The write-ahead log stays the file's mode
    /// (readers such as `history` then read beside the writer instead of waiting for it).
    pub fn tune_for_steady_writes(&self) -> Result<()> {
        let mode: String = self
            .conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            bail!("the results database cannot use a write-ahead log (journal mode {mode})");
        }
        self.conn.pragma_update(None, "synchronous", "NORMAL")?;
        Ok(())
    }

    /// The connection, for the tables kept beside the runs (studies).
    pub(crate) fn conn(&self) -> &Connection {
        &self.conn
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schema version stored in the file: 0 for an empty file.
    pub fn version(&self) -> Result<u32> {
        version_of(&self.conn)
    }

    /// Applies the missing migration steps in one transaction, so that a failure leaves the
    /// file as it was and two processes never migrate at once.
    fn migrate(&mut self) -> Result<()> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let found = version_of(&tx)?;
        if found > LATEST {
            bail!(
                "its schema version {found} is newer than this wirebench understands ({LATEST}); use a newer wirebench"
            );
        }
        if found == LATEST {
            return Ok(());
        }
        if found == 0 {
            tx.execute_batch("CREATE TABLE schema_version (version INTEGER NOT NULL);")?;
            tx.execute("INSERT INTO schema_version (version) VALUES (0)", [])?;
        }
        for (step, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
            tx.execute_batch(sql)
                .with_context(|| format!("migrating to schema version {}", step + 1))?;
        }
        if found < HEADLINE_NOTE {
            rejudge_headlines(&tx)
                .with_context(|| format!("migrating to schema version {HEADLINE_NOTE}"))?;
        }
        tx.execute("UPDATE schema_version SET version = ?1", [LATEST])?;
        tx.commit()?;
        Ok(())
    }

    /// Saves a new run and returns its id.
    pub fn insert(&self, report: &RunDocument, source: Source) -> Result<i64> {
        let json = serde_json::to_string(report).context("encoding the result")?;
        self.insert_row(RunColumns::of(report), &json, source)
    }

    /// [`Db::insert`] of a report no longer needed: it is freed once its columns and its JSON
    /// are taken, before SQLite copies the JSON, so that an import of a large document holds
    /// two of the three (report, JSON, SQLite's copy) at a time, never all three.
    pub fn insert_owned(&self, report: RunDocument, source: Source) -> Result<i64> {
        let json = serde_json::to_string(&report).context("encoding the result")?;
        let columns = RunColumns::of(&report);
        drop(report);
        self.insert_row(columns, &json, source)
    }

    fn insert_row(&self, c: RunColumns, json: &str, source: Source) -> Result<i64> {
        // Cached: a long-running writer (the agent) inserts with one prepared statement.
        self.conn
            .prepare_cached(
                "INSERT INTO runs (started_at, finished_at, pattern, transport, server_address,
                 latency_ns, throughput_bits_per_s, transactions_per_s, report_json,
                 complete, points, client_host, source, headline_note, label)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
            )?
            .execute(params![
                c.started_at,
                c.finished_at,
                c.pattern,
                c.transport,
                c.server_address,
                c.headline.latency_ns,
                c.headline.throughput_bits_per_s,
                c.headline.transactions_per_s,
                json,
                c.complete,
                c.points,
                c.client_host,
                source.as_str(),
                c.headline.note,
                c.label,
            ])?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Saves an application-kernel run (`wirebench app`): its list columns and its JSON
    /// document, which this layer keeps without reading. Returns its id.
    pub fn insert_app(
        &self,
        started_at: &str,
        kernel: &str,
        transport: &str,
        ranks: usize,
        json: &str,
    ) -> Result<i64> {
        self.conn.execute(
            "INSERT INTO app_runs (started_at, kernel, transport, ranks, report_json)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![started_at, kernel, transport, ranks as i64, json],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    /// The application-kernel runs, newest first.
    pub fn list_apps(&self, limit: usize) -> Result<Vec<AppRunRow>> {
        let mut stmt = self.conn.prepare(
            "SELECT id, started_at, kernel, transport, ranks FROM app_runs
             ORDER BY started_at DESC, id DESC LIMIT ?1",
        )?;
        let rows = stmt
            .query_map([limit as i64], |r| {
                Ok(AppRunRow {
                    id: r.get(0)?,
                    started_at: r.get(1)?,
                    kernel: r.get(2)?,
                    transport: r.get(3)?,
                    ranks: r.get(4)?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// The application-kernel runs started within `filter`'s times and over its transport,
    /// newest first (its other fields say nothing of them).
    pub fn list_app_runs(&self, filter: &Filter) -> Result<Vec<AppRunRow>> {
        let mut sql = String::from(
            "SELECT id, started_at, kernel, transport, ranks FROM app_runs WHERE 1 = 1",
        );
        let mut args = Vec::new();
        for (clause, value) in [
            ("transport = ?", &filter.transport),
            ("started_at >= ?", &filter.since),
            ("started_at < ?", &filter.until),
        ] {
            if let Some(v) = value {
                sql.push_str(" AND ");
                sql.push_str(clause);
                args.push(v.clone());
            }
        }
        sql.push_str(" ORDER BY started_at DESC, id DESC");
        if let Some(n) = filter.limit {
            sql.push_str(&format!(" LIMIT {n}"));
        }
        let mut stmt = self.conn.prepare(&sql)?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(args), |r| {
                Ok(AppRunRow {
                    id: r.get(0)?,
                    started_at: r.get(1)?,
                    kernel: r.get(2)?,
                    transport: r.get(3)?,
                    ranks: r.get(4)?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// The document of application-kernel run `id`.
    pub fn load_app(&self, id: i64) -> Result<String> {
        self.conn
            .query_row(
                "SELECT report_json FROM app_runs WHERE id = ?1",
                [id],
                |r| r.get(0),
            )
            .with_context(|| format!("no application run {id} in {}", self.path.display()))
    }

    /// Replaces a run's document (a run in progress, after each point and at the end).
    pub fn update(&self, id: i64, report: &RunDocument) -> Result<()> {
        let json = serde_json::to_string(report).context("encoding the result")?;
        let h = headline::headline(report);
        let n = self.conn.execute(
            "UPDATE runs SET finished_at = ?2, server_address = ?3, latency_ns = ?4,
                 throughput_bits_per_s = ?5, transactions_per_s = ?6, report_json = ?7,
                 complete = ?8, points = ?9, headline_note = ?10, label = ?11
             WHERE id = ?1",
            params![
                id,
                report.finished_at,
                report.server.address,
                h.latency_ns,
                h.throughput_bits_per_s,
                h.transactions_per_s,
                json,
                report.complete,
                report.points.len() as i64,
                h.note,
                report.label,
            ],
        )?;
        if n != 1 {
            bail!("run {id} is no longer in the database");
        }
        Ok(())
    }

    /// Removes a run for good.
    pub fn delete(&self, id: i64) -> Result<()> {
        let n = self.conn.execute("DELETE FROM runs WHERE id = ?1", [id])?;
        if n != 1 {
            bail!("no run {id} in {}", self.path.display());
        }
        Ok(())
    }

    /// The stored result document of a run.
    pub fn load(&self, id: i64) -> Result<RunDocument> {
        let json: Option<String> = self
            .conn
            .query_row("SELECT report_json FROM runs WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .optional()?;
        let json = json.ok_or_else(|| anyhow!("no run {id} in {}", self.path.display()))?;
        parse_report(&json).with_context(|| format!("run {id}"))
    }

    /// Turns "12", "last" or "last-2" (the run two before the last) into an id.
    pub fn resolve_id(&self, spec: &str) -> Result<i64> {
        let spec = spec.trim();
        if let Ok(id) = spec.parse::<i64>() {
            if id < 1 {
                bail!("invalid run id '{spec}': ids start at 1");
            }
            return Ok(id);
        }
        let back = match spec.strip_prefix("last") {
            Some("") => 0,
            Some(rest) => rest
                .strip_prefix('-')
                .and_then(|n| n.parse::<u32>().ok())
                .ok_or_else(|| {
                    anyhow!("invalid run id '{spec}': expected a number, 'last' or 'last-N'")
                })?,
            None => bail!("invalid run id '{spec}': expected a number, 'last' or 'last-N'"),
        };
        self.conn
            .query_row(
                "SELECT id FROM runs ORDER BY id DESC LIMIT 1 OFFSET ?1",
                [back],
                |r| r.get(0),
            )
            .optional()?
            .ok_or_else(|| {
                anyhow!(
                    "'{spec}': the database {} holds fewer runs",
                    self.path.display()
                )
            })
    }

    /// Runs matching `filter`, newest first.
    pub fn list(&self, filter: &Filter) -> Result<Vec<RunRow>> {
        self.list_rows(filter, false)
    }

    /// Runs matching `filter`, newest first, leaving out the runs of studies (listed by
    /// [`Db::study_groups`] instead) when `without_study_runs`.
    pub fn list_rows(&self, filter: &Filter, without_study_runs: bool) -> Result<Vec<RunRow>> {
        let (conditions, args) = filter.conditions();
        let mut sql = format!(
            // The planned total is read from the documents of incomplete runs only (few,
            // and the only ones that show it) rather than kept in a column of its own: no
            // schema step for a figure no filter needs. A document that is not JSON, or whose
            // total is not a whole number, shows none rather than failing the listing.
            "SELECT id, started_at, pattern, transport, server_address, client_host, points,
                 complete, source, latency_ns, throughput_bits_per_s, transactions_per_s,
                 headline_note,
                 CASE WHEN complete = 0 AND json_valid(report_json)
                           AND json_type(report_json, '$.planned_points') = 'integer'
                      THEN json_extract(report_json, '$.planned_points') END,
                 label,
                 (SELECT study_id FROM study_runs WHERE run_id = runs.id LIMIT 1),
                 regression
             FROM runs WHERE {conditions}"
        );
        if without_study_runs {
            sql.push_str(
                " AND NOT EXISTS (SELECT 1 FROM study_runs WHERE study_runs.run_id = runs.id)",
            );
        }
        sql.push_str(" ORDER BY id DESC");
        if let Some(n) = filter.limit {
            sql.push_str(&format!(" LIMIT {n}"));
        }
        let mut stmt = self.conn.prepare(&sql)?;
        let rows = stmt.query_map(rusqlite::params_from_iter(args), |r| {
            Ok(RunRow {
                id: r.get(0)?,
                started_at: r.get(1)?,
                pattern: r.get(2)?,
                transport: r.get(3)?,
                server_address: r.get(4)?,
                client_host: r.get(5)?,
                points: r.get(6)?,
                complete: r.get(7)?,
                source: r.get(8)?,
                latency_ns: r.get(9)?,
                throughput_bits_per_s: r.get(10)?,
                transactions_per_s: r.get(11)?,
                headline_note: r.get(12)?,
                planned_points: r.get(13)?,
                label: r.get(14)?,
                study_id: r.get(15)?,
                regression: r.get(16)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// The studies whose runs match `filter`, each with how many do, newest run first: what
    /// `history` shows in place of those runs.
    pub fn study_groups(&self, filter: &Filter) -> Result<Vec<StudyGroup>> {
        let (conditions, args) = filter.conditions();
        let mut sql = format!(
            "SELECT sr.study_id, coalesce(s.name, '?'), count(*), max(runs.id),
                 min(runs.started_at),
                 CASE WHEN count(DISTINCT runs.pattern) = 1 THEN min(runs.pattern) END,
                 CASE WHEN count(DISTINCT runs.transport) = 1 THEN min(runs.transport) END,
                 sum(runs.points), sum(runs.complete = 0)
             FROM runs
             JOIN study_runs sr ON sr.run_id = runs.id
             LEFT JOIN studies s ON s.id = sr.study_id
             WHERE {conditions}
             GROUP BY sr.study_id
             ORDER BY max(runs.id) DESC"
        );
        if let Some(n) = filter.limit {
            sql.push_str(&format!(" LIMIT {n}"));
        }
        let mut stmt = self.conn.prepare(&sql)?;
        let rows = stmt.query_map(rusqlite::params_from_iter(args), |r| {
            Ok(StudyGroup {
                study_id: r.get(0)?,
                name: r.get(1)?,
                runs: r.get(2)?,
                newest_run: r.get(3)?,
                started_at: r.get(4)?,
                pattern: r.get(5)?,
                transport: r.get(6)?,
                points: r.get(7)?,
                incomplete: r.get(8)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }
}

/// Recomputes every run's headline columns from its document with the judgements on its
/// figures (run once, by the migration that added `headline_note`): rows written before
/// wirebench judged figures may hold headlines from figures that are not measurements. A
/// document that does not parse keeps its columns.
fn rejudge_headlines(conn: &Connection) -> Result<()> {
    let rows: Vec<(i64, String)> = {
        let mut stmt = conn.prepare("SELECT id, report_json FROM runs")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    for (id, json) in rows {
        let Ok(report) = parse_report(&json) else {
            continue;
        };
        let h = headline::headline(&report);
        conn.execute(
            "UPDATE runs SET latency_ns = ?2, throughput_bits_per_s = ?3,
                 transactions_per_s = ?4, headline_note = ?5
             WHERE id = ?1",
            params![
                id,
                h.latency_ns,
                h.throughput_bits_per_s,
                h.transactions_per_s,
                h.note
            ],
        )?;
    }
    Ok(())
}

fn version_of(conn: &Connection) -> Result<u32> {
    let has_table = |name: &str| -> Result<bool> {
        Ok(conn
            .query_row(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
                [name],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    };
    if !has_table("schema_version")? {
        if has_table("runs")? {
            bail!("it has a runs table but no schema_version: not a wirebench results database");
        }
        let tables: i64 = conn.query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
            [],
            |r| r.get(0),
        )?;
        if tables > 0 {
            bail!("it holds other tables: not a wirebench results database");
        }
        return Ok(0);
    }
    let v: i64 = conn
        .query_row("SELECT version FROM schema_version", [], |r| r.get(0))
        .context("reading schema_version")?;
    u32::try_from(v).map_err(|_| anyhow!("invalid schema version {v}"))
}

/// Parses a result document, refusing other schemas and newer versions of this one.
/// The columns of a run's row besides its JSON: what listings read without the document.
struct RunColumns {
    started_at: String,
    finished_at: Option<String>,
    pattern: &'static str,
    transport: &'static str,
    server_address: Option<String>,
    headline: headline::RunHeadline,
    complete: bool,
    points: i64,
    client_host: String,
    label: Option<String>,
}

impl RunColumns {
    fn of(r: &RunDocument) -> RunColumns {
        RunColumns {
            started_at: r.started_at.clone(),
            finished_at: r.finished_at.clone(),
            pattern: r.pattern.name(),
            transport: r.transport.name(),
            server_address: r.server.address.clone(),
            headline: headline::headline(r),
            complete: r.complete,
            points: r.points.len() as i64,
            client_host: r.client_environment.hostname.clone(),
            label: r.label.clone(),
        }
    }
}

pub fn parse_report(json: &str) -> Result<RunDocument> {
    // A document that names a field twice is refused: a reader takes one of the two, and
    // which one differs between tools (serde's maps kept the last silently).
    no_duplicate_keys(json)?;
    // A result may come from anywhere (an imported file, a run against a hostile server): no
    // control character of its text reaches a terminal or the database's columns. Escaped
    // on the text, so that a current document is read straight into its types: a `Value` of
    // a 200 MB document took 2.5 GB.
    let json = crate::text::escape_json_text(json);
    #[derive(serde::Deserialize)]
    struct Head {
        schema: Option<serde_json::Value>,
        schema_version: Option<serde_json::Value>,
    }
    let head: Head = serde_json::from_str(&json).context("not a JSON document")?;
    let schema = head.schema.as_ref().and_then(|s| s.as_str());
    if schema != Some(SCHEMA) {
        bail!(
            "not a wirebench result: its \"schema\" is {} instead of \"{SCHEMA}\"",
            schema.map_or("missing".to_owned(), |s| format!("\"{s}\""))
        );
    }
    let version = head.schema_version.as_ref().and_then(|v| v.as_u64());
    let mut report: RunDocument = match version {
        // Version 1 documents are upgraded as a tree; they come from the first releases.
        Some(1) => {
            let value: serde_json::Value =
                serde_json::from_str(&json).context("not a JSON document")?;
            serde_json::from_value(crate::model::upgrade::v1_to_v2(value))
                .context("the result document does not match its schema")?
        }
        Some(v) if v >= 1 && v <= u64::from(SCHEMA_VERSION) => {
            serde_json::from_str(&json).context("the result document does not match its schema")?
        }
        Some(v) => bail!(
            "result schema version {v} is not one this wirebench reads (1 to {SCHEMA_VERSION})"
        ),
        None => bail!("the result has no \"schema_version\""),
    };
    // Documents from before wirebench judged its figures get their verdicts now, from the
    // counts they stored.
    report.fill_validity();
    Ok(report)
}

/// Refuses JSON text in which an object names a key twice, with the key and where. Walks the
/// text with serde, keeping only the keys of the objects open at a time.
fn no_duplicate_keys(json: &str) -> Result<()> {
    use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
    use std::fmt;

    struct Checked;

    impl<'de> DeserializeSeed<'de> for Checked {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(Checked)
        }
    }

    impl<'de> Visitor<'de> for Checked {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while seq.next_element_seed(Checked)?.is_some() {}
            Ok(())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let mut seen = std::collections::HashSet::new();
            while let Some(key) = map.next_key::<String>()? {
                if !seen.insert(key.clone()) {
                    return Err(serde::de::Error::custom(format!(
                        "the key \"{}\" appears twice in one object",
                        crate::text::printable(&key)
                    )));
                }
                map.next_value_seed(Checked)?;
            }
            Ok(())
        }
    }

    let mut de = serde_json::Deserializer::from_str(json);
    match Checked.deserialize(&mut de).and_then(|()| de.end()) {
        Ok(()) => Ok(()),
        // Syntax errors are the parser's to report, with its own words.
        Err(e) if e.is_data() => Err(anyhow::anyhow!("{e}")),
        Err(_) => Ok(()),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::stats::Validity;

    /// A small, valid result document with `points` one-byte-apart ping-pong points, its
    /// figures judged as reading it does.
    pub(crate) fn report(pattern: &str, points: usize, mean_ns: f64) -> RunDocument {
        let v1 = report_json(pattern, points, mean_ns);
        let mut r: RunDocument = serde_json::from_value(crate::model::upgrade::v1_to_v2(v1))
            .expect("the test document matches the model");
        r.fill_validity();
        r
    }

    /// The same as a document written before wirebench judged its figures.
    pub(crate) fn report_json(pattern: &str, points: usize, mean_ns: f64) -> serde_json::Value {
        let pts: Vec<serde_json::Value> = (0..points)
            .map(|i| {
                serde_json::json!({
                    "index": i,
                    "key": {"size": 1 + i as u64, "sndbuf": 0, "rcvbuf": 0, "server_sndbuf": 0, "server_rcvbuf": 0},
                    "request_size": 1 + i as u64, "response_size": 1 + i as u64, "read_size": 0, "runs": 1,
                    "headline": {"name": "one-way latency (RTT/2), mean", "unit": "ns", "values": [mean_ns / 2.0],
                                 "over_runs": {"n": 1, "mean": mean_ns / 2.0, "stddev": 0.0, "confidence": 0.95, "half_width": null},
                                 "target_met": null},
                    "latency": {
                        "rtt": {"samples": 1000, "min_ns": 1000, "mean_ns": mean_ns, "median_ns": mean_ns as u64,
                                "max_ns": 90000, "stddev_ns": mean_ns / 10.0, "p90_ns": mean_ns as u64, "p99_ns": 2 * mean_ns as u64,
                                "p999_ns": 80000, "p9999_ns": 90000, "confidence": 0.95, "ci_half_width_ns": 100.0},
                        "one_way_mean_ns": mean_ns / 2.0, "one_way_ci_ns": 50.0,
                        "throughput_bits_per_s": 2.0 * (1 + i) as f64 * 8.0 / (mean_ns / 1e9),
                        "transactions": 1000, "transactions_per_s": 1e9 / mean_ns, "lost": 0, "stale": 0,
                        "first_ns": 5000, "setup": null
                    },
                    "stream": null,
                    "cpu": {"client": {"user_s": 0.0, "system_s": 0.0}, "server": {"user_s": 0.0, "system_s": 0.0},
                            "client_us_per_kib": null, "server_us_per_kib": null,
                            "client_us_per_transaction": null, "server_us_per_transaction": null},
                    "socket": {"client": [], "server": []}
                })
            })
            .collect();
        let v = serde_json::json!({
            "schema": "wirebench.run", "schema_version": 1, "wirebench_version": "0.1.0",
            "started_at": "2025-03-01T10:00:00.000Z", "finished_at": "2025-03-01T10:00:05.000Z",
            "command": ["wirebench", "run", pattern], "pattern": pattern, "transport": "tcp",
            "server": {"address": "192.0.2.7:5320", "self_hosted": false},
            "client_environment": {"hostname": "alpha", "kernel": "Linux 6.1", "cpu_model": "cpu", "cpus": 2,
                                   "wirebench_version": "0.1.0", "default_cc": "cubic"},
            "server_environment": null,
            "settings": {"streams": 1, "direction": "forward", "burst": 1, "warmup": 10, "duration_s": 1.0,
                         "bytes": null, "iterations": null, "rate": null, "interval_s": null, "nodelay": false,
                         "cc": null, "mss": null, "spin": false, "client_cpus": [], "server_cpus": [],
                         "confidence": 0.95, "repeat": 1, "until_ci": null, "max_repeat": 10,
                         "io_timeout_s": 10.0, "loss_timeout_s": 1.0},
            "swept": {"size": points > 1, "sndbuf": false, "rcvbuf": false, "server_sndbuf": false, "server_rcvbuf": false},
            "points": pts, "sweep_metrics": [], "complete": true, "error": null
        });
        v
    }

    fn temp_db() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/dir/results.sqlite");
        (dir, path)
    }

    #[test]
    fn application_runs_are_kept_beside_the_runs() {
        let (_dir, path) = temp_db();
        let db = Db::open_or_create(&path).unwrap();
        let id = db
            .insert_app(
                "2026-01-01T00:00:00Z",
                "matmul",
                "tcp",
                4,
                r#"{"schema":"wirebench.app"}"#,
            )
            .unwrap();
        assert_eq!(db.load_app(id).unwrap(), r#"{"schema":"wirebench.app"}"#);
        assert!(db.load_app(id + 1).is_err());
        assert!(db.list(&Filter::default()).unwrap().is_empty());
        let listed = db.list_apps(10).unwrap();
        assert_eq!(
            listed,
            vec![AppRunRow {
                id,
                started_at: "2026-01-01T00:00:00Z".into(),
                kernel: "matmul".into(),
                transport: "tcp".into(),
                ranks: 4,
            }]
        );
    }

    /// The planned total of an incomplete run comes from its document; a complete run's is
    /// not read, and one that is not a whole number (a document edited in the file) is none,
    /// without failing the listing.
    #[test]
    fn the_listing_reads_the_planned_total_of_incomplete_runs() {
        let (_dir, path) = temp_db();
        let db = Db::open_or_create(&path).unwrap();
        let mut r = report("pingpong", 3, 20_000.0);
        r.planned_points = Some(7);
        let complete = db.insert(&r, Source::Run).unwrap();
        r.complete = false;
        let incomplete = db.insert(&r, Source::Run).unwrap();
        let edited = db.insert(&r, Source::Run).unwrap();
        db.conn
            .execute(
                "UPDATE runs SET report_json = json_set(report_json, '$.planned_points', 'seven')
                 WHERE id = ?1",
                [edited],
            )
            .unwrap();
        r.planned_points = None;
        let older = db.insert(&r, Source::Run).unwrap();
        let planned = |id: i64| {
            db.list(&Filter::default())
                .unwrap()
                .into_iter()
                .find(|row| row.id == id)
                .unwrap()
                .planned_points
        };
        assert_eq!(planned(complete), None);
        assert_eq!(planned(incomplete), Some(7));
        assert_eq!(planned(edited), None);
        assert_eq!(planned(older), None);
        // The documents themselves: an older one reads without the field, and writes none.
        let back = db.load(older).unwrap();
        assert_eq!(back.planned_points, None);
        assert!(!serde_json::to_string(&back)
            .unwrap()
            .contains("planned_points"));
        assert_eq!(db.load(incomplete).unwrap().planned_points, Some(7));
    }

    #[test]
    fn round_trip_keeps_the_whole_document() {
        let (_dir, path) = temp_db();
        let db = Db::open_or_create(&path).unwrap();
        assert_eq!(db.version().unwrap(), LATEST);
        let mut r = report("pingpong", 3, 20_000.0);
        r.points[1].latency.as_mut().unwrap().distribution = vec![crate::model::LatencyBin {
            low_ns: 1000.0,
            high_ns: 1122.0,
            count: 7,
        }];
        let id = db.insert(&r, Source::Run).unwrap();
        assert_eq!(db.load(id).unwrap(), r);

        // A run in progress is updated in place.
        let mut more = r.clone();
        more.complete = false;
        more.error = Some("lost the server".into());
        more.points.truncate(2);
        db.update(id, &more).unwrap();
        assert_eq!(db.load(id).unwrap(), more);
        let rows = db.list(&Filter::default()).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].points, rows[0].complete), (2, false));
        assert_eq!(rows[0].latency_ns, Some(10_000.0));
        assert_eq!(rows[0].client_host.as_deref(), Some("alpha"));

        // Reopening migrates nothing and keeps the run.
        drop(db);
        let db = Db::open_existing(&path).unwrap();
        assert_eq!(db.load(id).unwrap(), more);
        assert!(db.load(id + 1).unwrap_err().to_string().contains("no run"));
    }

    #[test]
    fn filters_ids_and_limits() {
        let (_dir, path) = temp_db();
        let db = Db::open_or_create(&path).unwrap();
        let mut ids = Vec::new();
        for (i, pattern) in ["pingpong", "rr", "pingpong"].iter().enumerate() {
            let mut r = report(pattern, 1, 10_000.0);
            r.started_at = format!("2025-03-0{}T10:00:00.000Z", i + 1);
            if i == 2 {
                r.transport = crate::model::vocab::TransportKind::Udp;
                r.client_environment.hostname = "beta".into();
                r.server.address = Some("10.9.8.7:5320".into());
            }
            ids.push(db.insert(&r, Source::Import).unwrap());
        }
        let list = |f: Filter| -> Vec<i64> { db.list(&f).unwrap().iter().map(|r| r.id).collect() };
        assert_eq!(list(Filter::default()), vec![ids[2], ids[1], ids[0]]);
        let pattern = |p: &str| Filter {
            pattern: Some(p.into()),
            ..Filter::default()
        };
        assert_eq!(list(pattern("pingpong")), vec![ids[2], ids[0]]);
        assert_eq!(
            list(Filter {
                transport: Some("udp".into()),
                ..Filter::default()
            }),
            vec![ids[2]]
        );
        assert_eq!(
            list(Filter {
                peer: Some("192.0.2".into()),
                ..Filter::default()
            }),
            vec![ids[1], ids[0]]
        );
        assert_eq!(
            list(Filter {
                host: Some("beta".into()),
                ..Filter::default()
            }),
            vec![ids[2]]
        );
        assert_eq!(
            list(Filter {
                since: Some("2025-03-02T00:00:00.000Z".into()),
                until: Some("2025-03-03T00:00:00.000Z".into()),
                ..Filter::default()
            }),
            vec![ids[1]]
        );
        assert_eq!(
            list(Filter {
                limit: Some(1),
                ..Filter::default()
            }),
            vec![ids[2]]
        );
        assert_eq!(db.resolve_id("last").unwrap(), ids[2]);
        assert_eq!(db.resolve_id("last-2").unwrap(), ids[0]);
        assert_eq!(db.resolve_id("7").unwrap(), 7);
        for bad in ["last-3", "0", "-1", "first", "last-x", ""] {
            let e = db.resolve_id(bad).unwrap_err().to_string();
            assert!(e.contains(bad) && !e.contains('\n'), "{bad}: {e}");
        }
    }

    /// The schema of version 1 exactly as that version created it, written by hand here so that
    /// a later edit of the migration list cannot change what "an older database" is.
    const V1_SCHEMA: &str = "
        CREATE TABLE schema_version (version INTEGER NOT NULL);
        INSERT INTO schema_version (version) VALUES (1);
        CREATE TABLE runs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            started_at TEXT NOT NULL,
            finished_at TEXT,
            pattern TEXT NOT NULL,
            transport TEXT NOT NULL,
            server_address TEXT,
            latency_ns REAL,
            throughput_bits_per_s REAL,
            transactions_per_s REAL,
            report_json TEXT NOT NULL
        );
        CREATE INDEX runs_started_at ON runs (started_at);
        CREATE INDEX runs_pattern_transport ON runs (pattern, transport);";

    #[test]
    fn a_version_1_database_opens_and_migrates() {
        let (_dir, path) = temp_db();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let mut old = report("pingpong", 2, 30_000.0);
        old.complete = false;
        old.error = Some("interrupted".into());
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(V1_SCHEMA).unwrap();
            conn.execute(
                "INSERT INTO runs (started_at, pattern, transport, report_json) VALUES (?1, ?2, ?3, ?4)",
                params![old.started_at, old.pattern.name(), old.transport.name(), serde_json::to_string(&old).unwrap()],
            )
            .unwrap();
        }
        let db = Db::open_existing(&path).unwrap();
        assert_eq!(db.version().unwrap(), LATEST);
        // The new columns were filled in from the stored document.
        let rows = db.list(&Filter::default()).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].points, 2);
        assert!(!rows[0].complete);
        assert_eq!(rows[0].client_host.as_deref(), Some("alpha"));
        assert_eq!(rows[0].source, "run");
        assert_eq!(db.load(rows[0].id).unwrap(), old);
        // And it takes new runs.
        let id = db.insert(&report("rr", 1, 1000.0), Source::Run).unwrap();
        assert_eq!(db.list(&Filter::default()).unwrap()[0].id, id);
        assert!(db
            .list(&Filter {
                incomplete_only: true,
                ..Filter::default()
            })
            .unwrap()
            .iter()
            .all(|r| !r.complete));
    }

    #[test]
    fn foreign_and_newer_databases_are_refused() {
        let (_dir, path) = temp_db();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        Connection::open(&path)
            .unwrap()
            .execute_batch("CREATE TABLE schema_version (version INTEGER NOT NULL); INSERT INTO schema_version VALUES (99);")
            .unwrap();
        let e = format!("{:#}", Db::open_existing(&path).err().unwrap());
        assert!(e.contains("newer"), "{e}");

        let other = path.with_file_name("other.sqlite");
        Connection::open(&other)
            .unwrap()
            .execute_batch("CREATE TABLE customers (name TEXT);")
            .unwrap();
        let e = format!("{:#}", Db::open_existing(&other).err().unwrap());
        assert!(e.contains("not a wirebench results database"), "{e}");

        let missing = path.with_file_name("missing.sqlite");
        let e = format!("{:#}", Db::open_existing(&missing).err().unwrap());
        assert!(e.contains("no results database"), "{e}");
        assert!(!missing.exists());
    }

    #[test]
    fn documents_of_other_schemas_are_refused() {
        assert!(parse_report("not json").is_err());
        // A key named twice, at the top or deeper, is refused with the key and where.
        let e = parse_report(r#"{"schema": "wirebench.run", "schema": "x"}"#).unwrap_err();
        assert!(
            format!("{e:#}").contains("the key \"schema\" appears twice"),
            "{e:#}"
        );
        let e = parse_report(r#"{"a": [{"b": 1, "c": {"d": 1, "d": 2}}]}"#).unwrap_err();
        assert!(format!("{e:#}").contains("\"d\" appears twice"), "{e:#}");
        let e = parse_report("{\"schema\": \"other\"}")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a wirebench result"), "{e}");
        let mut v = serde_json::to_value(report("pingpong", 1, 1.0)).unwrap();
        v["schema_version"] = 3.into();
        let e = parse_report(&v.to_string()).unwrap_err().to_string();
        assert!(e.contains("schema version 3"), "{e}");
        // Results written before `distribution` existed still read.
        let mut v = serde_json::to_value(report("pingpong", 1, 1.0)).unwrap();
        v["points"][0]["latency"]
            .as_object_mut()
            .unwrap()
            .remove("distribution");
        assert!(parse_report(&v.to_string()).is_ok());
    }

    #[test]
    fn stream_results_keep_link_frames_and_acked_rates_and_older_ones_still_read() {
        use crate::model::stream::LinkCounters;
        use crate::model::stream::StreamStats;
        use crate::model::{DirectionTotal, StreamPair, StreamResult};
        let frames = LinkCounters {
            received: 950,
            lost: 50,
            reordered: 3,
            messages_incomplete: 40,
            ..LinkCounters::default()
        }
        .with_loss_ratio();
        let mut r = report("stream", 1, 1.0);
        r.points[0].latency = None;
        let pair = StreamPair::judged(
            0,
            "client_to_server".into(),
            StreamStats {
                bytes_acked_timed: Some(900),
                acked_bits_per_s: Some(0.9e6),
                ..StreamStats::default()
            },
            StreamStats {
                frames: Some(frames),
                ..StreamStats::default()
            },
            crate::model::vocab::TransportKind::Raw,
        );
        let mut total = DirectionTotal {
            direction: "client_to_server".into(),
            streams: 1,
            sender_bits_per_s: 1e6,
            acked_bits_per_s: Some(0.9e6),
            receiver_bits_per_s: 1e6,
            bytes_sent: 1000,
            bytes_received: 1000,
            send_failures: 0,
            loss: None,
            frames: Some(frames),
            retransmits: None,
            ..DirectionTotal::default()
        };
        total.judge_from(&[&pair]);
        r.points[0].stream = Some(StreamResult {
            streams: vec![pair],
            totals: vec![total],
        });
        r.points[0].headline.validity = Default::default();
        r.fill_validity();
        let json = serde_json::to_string(&r).unwrap();
        let back = parse_report(&json).unwrap();
        assert_eq!(back, r);
        assert_eq!(
            back.points[0].stream.as_ref().unwrap().totals[0].frames,
            Some(frames)
        );
        // Results written before `frames` existed have none, and still read.
        let mut v = serde_json::to_value(&r).unwrap();
        for at in [
            "/points/0/stream/totals/0",
            "/points/0/stream/streams/0/receiver",
        ] {
            let obj = v.pointer_mut(at).unwrap().as_object_mut().unwrap();
            assert!(obj.remove("frames").is_some(), "{at}");
        }
        // Nor had they the sender's acknowledged bytes.
        for (at, key) in [
            ("/points/0/stream/totals/0", "acked_bits_per_s"),
            ("/points/0/stream/streams/0/sender", "acked_bits_per_s"),
            ("/points/0/stream/streams/0/sender", "bytes_acked_timed"),
        ] {
            let obj = v.pointer_mut(at).unwrap().as_object_mut().unwrap();
            assert!(obj.remove(key).is_some(), "{at} {key}");
        }
        let old = parse_report(&v.to_string()).unwrap();
        let s = old.points[0].stream.as_ref().unwrap();
        assert_eq!(
            (s.totals[0].frames, s.streams[0].receiver.frames),
            (None, None)
        );
        assert_eq!(s.totals[0].acked_bits_per_s, None);
        assert_eq!(
            (
                s.streams[0].sender.bytes_acked_timed,
                s.streams[0].sender.acked_bits_per_s
            ),
            (None, None)
        );
    }

    /// The lab stream of the truth issue as a document from before figures were judged: the
    /// receiver timed 160 B in one read over 0.3 ms, its sender 300 ms.
    fn old_tiny_stream() -> serde_json::Value {
        let mut v = report_json("stream", 1, 1.0);
        let side = |bytes: u64, messages: u64, secs: f64, role: &str| {
            serde_json::json!({"role": role, "bytes_total": bytes + 1000, "bytes_timed": bytes,
                "messages_timed": messages, "elapsed_s": secs,
                "bits_per_s": bytes as f64 * 8.0 / secs, "io_path": "read"})
        };
        let p = &mut v["points"][0];
        p["latency"] = serde_json::Value::Null;
        p["headline"]["name"] = "receiver throughput, all streams".into();
        p["stream"] = serde_json::json!({
            "streams": [{"index": 0, "direction": "client_to_server",
                         "sender": side(3000, 30, 0.3, "sender"),
                         "receiver": side(160, 1, 0.0003, "receiver")}],
            "totals": [{"direction": "client_to_server", "streams": 1,
                        "sender_bits_per_s": 80_000.0, "receiver_bits_per_s": 4_266_666.7,
                        "bytes_sent": 4000, "bytes_received": 1160, "send_failures": 0,
                        "loss": null, "retransmits": 0, "theoretical_goodput_bits_per_s": null}]
        });
        v
    }

    #[test]
    fn a_version_1_document_reads_with_the_same_figures() {
        // Version 1 as it was written: seconds and bytes per second, a sweep, CPU times and
        // interval reports.
        let mut v = report_json("pingpong", 2, 30_000.0);
        v["points"][0]["latency"]["elapsed_s"] = 0.25.into();
        v["points"][0]["cpu"]["client"] = serde_json::json!({"user_s": 0.125, "system_s": 2e-9});
        v["sweep_metrics"] = serde_json::json!([{"sndbuf": 0, "rcvbuf": 0, "server_sndbuf": 0,
            "server_rcvbuf": 0, "metrics": {"points": 2, "t0_s": 1.5e-5, "t0_ci_s": 2.5e-8,
            "t0_size": 1, "r_max_bytes_per_s": 133_333.25, "r_max_ci_bytes_per_s": [1.25e5, 1.5e5],
            "r_max_size": 2, "n_half_bytes": 1.0, "n_half_at_smallest": true,
            "fit": {"t0_s": 1.4e-5, "r_inf_bytes_per_s": 1e6, "n_half_bytes": 14.0,
                    "r_squared": 1.0, "points": 2}}}]);
        let r = parse_report(&v.to_string()).unwrap();
        assert_eq!(r.schema_version, SCHEMA_VERSION);
        let s = &r.settings;
        assert_eq!(
            (
                s.duration_ns,
                s.interval_ns,
                s.io_timeout_ns,
                s.loss_timeout_ns
            ),
            (Some(1_000_000_000), None, 10_000_000_000, 1_000_000_000)
        );
        let p = &r.points[0];
        let l = p.latency.as_ref().unwrap();
        assert_eq!(l.elapsed_ns, Some(250_000_000));
        // Figures already in nanoseconds and bits per second are as they were.
        assert_eq!(l.one_way_mean_ns, Some(15_000.0));
        assert_eq!(l.throughput_bits_per_s, 2.0 * 8.0 / 30e-6);
        assert_eq!(
            (p.cpu.client.user_ns, p.cpu.client.system_ns),
            (125_000_000, 2)
        );
        assert_eq!(p.headline.values, [15_000.0]);
        let m = &r.sweep_metrics[0].metrics;
        assert_eq!(m.t0_ns, 1.5e-5 * 1e9);
        assert_eq!(m.t0_ci_ns, Some(2.5e-8 * 1e9));
        assert_eq!(m.r_max_bits_per_s, 133_333.25 * 8.0);
        assert_eq!(m.r_max_ci_bits_per_s, Some((1e6, 1.2e6)));
        let fit = m.fit.unwrap();
        assert_eq!((fit.t0_ns, fit.r_inf_bits_per_s), (1.4e-5 * 1e9, 8e6));
        assert_eq!((fit.n_half_bytes, fit.points), (14.0, 2));
        // The stream of a version 1 document: each side's phase and the totals' basis.
        let r = parse_report(&old_tiny_stream().to_string()).unwrap();
        let st = r.points[0].stream.as_ref().unwrap();
        assert_eq!(
            (
                st.streams[0].sender.elapsed_ns,
                st.streams[0].receiver.elapsed_ns
            ),
            (300_000_000, 300_000)
        );
        assert_eq!(st.streams[0].receiver.bits_per_s, 160.0 * 8.0 / 0.0003);
        assert_eq!(
            (
                st.totals[0].sender_elapsed_ns,
                st.totals[0].receiver_elapsed_ns
            ),
            (300_000_000, 300_000)
        );
        // A version 2 document reads back exactly as written, floats included.
        let json = serde_json::to_string(&r).unwrap();
        assert!(json.contains("\"schema_version\":2"), "{json}");
        assert_eq!(parse_report(&json).unwrap(), r);
    }

    #[test]
    fn an_old_stream_document_is_judged_when_read() {
        let r = parse_report(&old_tiny_stream().to_string()).unwrap();
        let p = &r.points[0];
        let s = p.stream.as_ref().unwrap();
        let why = "timed phase 0.30 ms, 160 B in 1 read: below the floor of 10.0 ms and 10 reads; \
                   timed phase 0.30 ms is 0.1% of the sender's 300.0 ms: under the floor of 10%, \
                   it timed a burst, not the transfer";
        assert_eq!(s.streams[0].receiver.validity.reason(), why);
        assert!(!s.streams[0].sender.validity.is_invalid());
        let t = &s.totals[0];
        assert_eq!(
            (t.receiver_valid, t.receiver_invalid_reason.as_deref()),
            (Some(false), Some(why))
        );
        assert_eq!(t.sender_valid, Some(true));
        assert_eq!(
            (t.receiver_bytes_timed, t.receiver_messages_timed),
            (160, 1)
        );
        assert_eq!(t.sender_elapsed_ns, 300_000_000);
        // One run: the headline is the receiver's figure, and as invalid.
        assert_eq!(p.headline.validity.reason(), format!("receiver: {why}"));
        // The JSON says it next to each figure.
        let v = serde_json::to_value(&r).unwrap();
        let st = &v["points"][0]["stream"];
        assert_eq!(st["streams"][0]["receiver"]["valid"], false);
        assert_eq!(st["streams"][0]["receiver"]["invalid_reason"], why);
        assert_eq!(st["streams"][0]["sender"]["valid"], true);
        assert_eq!(st["streams"][0]["receiver"]["bytes_timed"], 160);
        assert_eq!(st["totals"][0]["receiver_valid"], false);
        assert_eq!(v["points"][0]["headline"]["valid"], false);
        // And it reads back as it was written.
        assert_eq!(parse_report(&v.to_string()).unwrap(), r);
    }

    #[test]
    fn a_repeated_point_of_an_old_document_is_judged_only_as_far_as_it_can_be() {
        let mut v = old_tiny_stream();
        v["points"][0]["runs"] = 3.into();
        let r = parse_report(&v.to_string()).unwrap();
        // The last run's receiver is invalid, so the headline over runs is.
        assert!(r.points[0]
            .headline
            .validity
            .reason()
            .starts_with("run 3 of 3: receiver: timed phase 0.30 ms"));
        // A valid last run says nothing of the two runs before it: unjudged.
        let mut v = report_json("pingpong", 1, 20_000.0);
        v["points"][0]["runs"] = 3.into();
        let r = parse_report(&v.to_string()).unwrap();
        assert_eq!(r.points[0].headline.validity, Validity::default());
        assert_eq!(
            r.points[0].latency.as_ref().unwrap().validity,
            Validity::valid()
        );
    }

    #[test]
    fn migrating_rejudges_the_headlines_of_older_runs() {
        let (_dir, path) = temp_db();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        // A ping-pong of two sizes whose smallest has 12 samples, and the tiny stream.
        let mut ping = report_json("pingpong", 2, 30_000.0);
        ping["points"][0]["latency"]["rtt"]["samples"] = 12.into();
        ping["points"][1]["latency"]["one_way_mean_ns"] = 16_000.0.into();
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(V1_SCHEMA).unwrap();
            for doc in [&ping, &old_tiny_stream()] {
                conn.execute(
                    "INSERT INTO runs (started_at, pattern, transport, latency_ns, report_json)
                     VALUES (?1, ?2, ?3, 15000.0, ?4)",
                    params![
                        "2025-03-01T10:00:00.000Z",
                        doc["pattern"].as_str().unwrap(),
                        "tcp",
                        doc.to_string()
                    ],
                )
                .unwrap();
            }
        }
        let db = Db::open_existing(&path).unwrap();
        let rows = db.list(&Filter::default()).unwrap();
        let (stream, ping) = (&rows[0], &rows[1]);
        // t0 now comes from the valid point, and the row says what was left out.
        assert_eq!(ping.latency_ns, Some(16_000.0));
        assert_eq!(
            ping.headline_note.as_deref(),
            Some("1 of 2 points not valid, left out")
        );
        // The stream's only figure is not valid: kept, marked, with the reason.
        assert_eq!(stream.throughput_bits_per_s, Some(4_266_666.7));
        let note = stream.headline_note.as_deref().unwrap();
        assert!(
            note.starts_with("! not valid: receiver: timed phase 0.30 ms, 160 B in 1 read"),
            "{note}"
        );
        let listing = super::super::history::format_history(&rows);
        assert!(
            listing.contains("peak receiver 4.27! Mbit/s (! not valid: receiver: timed phase"),
            "{listing}"
        );
    }

    #[test]
    fn default_path_follows_xdg() {
        // Only reads the environment; nothing is created.
        let p = default_path();
        if let Ok(p) = p {
            assert!(p.ends_with("wirebench/results.sqlite"), "{}", p.display());
        }
    }
}
