//! The database schema as an ordered list of steps: step k (counting from 1) takes a database
//! at version k-1 to version k. A released step never changes; a new schema is a new step, so
//! a database written by any older version opens and is brought up to date.

/// The schema version this build writes.
pub const LATEST: u32 = MIGRATIONS.len() as u32;

pub const MIGRATIONS: &[&str] = &[
    // 1: every run as its whole result document, plus the columns `history` shows and filters
    // on without parsing documents.
    "CREATE TABLE runs (
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
     CREATE INDEX runs_pattern_transport ON runs (pattern, transport);",
    // 2: completeness, point count, client host and origin (measured here or imported), filled
    // in for older rows from their documents.
    "ALTER TABLE runs ADD COLUMN complete INTEGER NOT NULL DEFAULT 1;
     ALTER TABLE runs ADD COLUMN points INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE runs ADD COLUMN client_host TEXT;
     ALTER TABLE runs ADD COLUMN source TEXT NOT NULL DEFAULT 'run';
     UPDATE runs SET
         complete = coalesce(json_extract(report_json, '$.complete'), 1),
         points = coalesce(json_array_length(report_json, '$.points'), 0),
         client_host = json_extract(report_json, '$.client_environment.hostname');
     CREATE INDEX runs_client_host ON runs (client_host);",
    // 3: what a run's headline left out for not being valid, or that its figures are not
    // valid measurements (see stats::validity). Filled in for older rows, with their headline
    // figures recomputed, by `db::rejudge_headlines` after this step.
    "ALTER TABLE runs ADD COLUMN headline_note TEXT;",
    // 4: studies (`wirebench study`): the file as it was run, the order of its runs, and one
    // row per finished run (or search, or failure), so that a study resumes where it stopped.
    "CREATE TABLE studies (
         id INTEGER PRIMARY KEY AUTOINCREMENT,
         name TEXT NOT NULL,
         file_path TEXT,
         file_text TEXT NOT NULL,
         seed INTEGER NOT NULL,
         started_at TEXT NOT NULL,
         finished_at TEXT,
         status TEXT NOT NULL,
         schedule_json TEXT NOT NULL,
         anomalies_json TEXT
     );
     CREATE TABLE study_runs (
         study_id INTEGER NOT NULL REFERENCES studies (id),
         slot INTEGER NOT NULL,
         probe INTEGER NOT NULL,
         point INTEGER NOT NULL,
         repetition INTEGER NOT NULL,
         kind TEXT NOT NULL,
         status TEXT NOT NULL,
         run_id INTEGER,
         attempts INTEGER NOT NULL,
         error TEXT,
         rate_bits_per_s REAL,
         finished_at TEXT NOT NULL,
         PRIMARY KEY (study_id, slot, probe)
     );",
    // 5: `wirebench app` runs (application kernels over P ranks), whose documents are not run
    // documents: the kernel, transport and rank count to list them by, and the whole document.
    // (The plan of the cluster-scale work that brought `wirebench app` reserved number 6 for
    // it: should another step 5 land first, this one follows it unchanged.)
    "CREATE TABLE app_runs (
         id INTEGER PRIMARY KEY AUTOINCREMENT,
         started_at TEXT NOT NULL,
         kernel TEXT NOT NULL,
         transport TEXT NOT NULL,
         ranks INTEGER NOT NULL,
         report_json TEXT NOT NULL
     );
     CREATE INDEX app_runs_started_at ON app_runs (started_at);",
    // 6: `history` for a growing database: the label as a column (filtered without parsing
    // documents), the source of mesh runs and compare-transports sweeps (saved as 'run'
    // before), and the study a run belongs to found by index.
    "ALTER TABLE runs ADD COLUMN label TEXT;
     UPDATE runs SET label = json_extract(report_json, '$.label')
         WHERE json_valid(report_json) AND json_type(report_json, '$.label') = 'text';
     UPDATE runs SET source = 'mesh'
         WHERE source = 'run' AND json_valid(report_json)
             AND json_type(report_json, '$.mesh') = 'object';
     UPDATE runs SET source = 'compare-transports'
         WHERE source = 'run' AND label LIKE 'compare-transports %';
     CREATE INDEX runs_source ON runs (source);
     CREATE INDEX study_runs_run_id ON study_runs (run_id);",
    // 7: `wirebench agent`: the regression found at a run (what changed, by how much, against
    // which baseline), for `history` to mark it; agent runs listed by label.
    "ALTER TABLE runs ADD COLUMN regression TEXT;
     CREATE INDEX runs_source_label ON runs (source, label);",
    // 8: the agent reads each test's last runs' headline figures after every run it saves.
    // A row keeps its later columns behind the document (several KiB, in overflow pages), so
    // reading `complete` and `headline_note` from the table walked every document's pages;
    // this index holds what that query reads, in its order (newest id first).
    "DROP INDEX runs_source_label;
     CREATE INDEX runs_agent_figures ON runs
         (source, label, id, complete, latency_ns, throughput_bits_per_s, headline_note);",
];

/// The step after which the headline columns of older rows are recomputed from their
/// documents (in Rust: SQL cannot judge a document's figures).
pub const HEADLINE_NOTE: u32 = 3;
