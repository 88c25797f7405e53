//! `wirebench agent`: a long-running process that measures a list of targets (wirebench
//! servers) with a list of tests, each on its own period with random slip, within a CPU and a
//! traffic budget; saves every run to the results database (source `agent`), finds
//! regressions against each test's baseline, and serves its state to the exporter.
//!
//! Files: [`config`] reads the TOML, [`schedule`] decides when runs start (pure, on virtual
//! time in its tests), [`run`] measures and saves one run, [`regress`] compares windows; this
//! file drives them with a thread per running run.

pub mod budget;
pub mod config;
pub mod regress;
pub mod run;
pub mod schedule;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::model::agent::{AgentSnapshot, TestState};
use crate::store::db::Db;
use config::AgentConfig;
use schedule::{Budgets, Job, Scheduler};

/// How often retention runs at most.
const RETENTION_EVERY: Duration = Duration::from_secs(60);

/// Longest the loop sleeps between looks at its stop flag and budgets.
const TICK: Duration = Duration::from_millis(200);

/// What the agent's threads and its exporter share.
pub struct Shared {
    pub config: AgentConfig,
    pub db_path: PathBuf,
    /// Index i: job i's state (test-major, config order).
    pub snapshot: Mutex<AgentSnapshot>,
    /// The results database, opened at the first save and kept open: a connection per run
    /// (opening, migrating, a synced commit) cost more than the 64-byte ping-pong it saved.
    db: Mutex<Option<Db>>,
    /// When retention last ran: at most once per [`RETENTION_EVERY`], because its count rule
    /// reads every agent run in the database.
    retained_at: Mutex<Option<Instant>>,
    /// Which jobs have a run going, scheduled or asked for by `/probe`: one pool, so that a
    /// probe counts against `max_concurrent` and a scheduled run and a probe of the same job,
    /// or two throughput runs to one target, never overlap.
    in_flight: Mutex<Vec<bool>>,
    /// The CPU and traffic budgets' meter, fed by every run, probes included.
    meter: Mutex<budget::Meter>,
    started: Instant,
}

impl Shared {
    pub fn new(config: AgentConfig, db_path: PathBuf) -> Shared {
        let jobs = jobs(&config);
        let tests = jobs
            .iter()
            .map(|j| initial_state(&config, j.target, j.test))
            .collect();
        let meter =
            budget::Meter::new(config.cpu_budget_percent, config.traffic_budget_bytes_per_s);
        Shared {
            in_flight: Mutex::new(vec![false; jobs.len()]),
            meter: Mutex::new(meter),
            config,
            db_path,
            snapshot: Mutex::new(AgentSnapshot {
                tests,
                running: 0,
                cpu_seconds: 0.0,
            }),
            db: Mutex::new(None),
            retained_at: Mutex::new(None),
            started: Instant::now(),
        }
    }

    /// `f` on the agent's connection, opened (and tuned for a steady stream of small
    /// commits) on first use. Runs that finish together save one after the other.
    fn with_db<T>(&self, f: impl FnOnce(&Db) -> Result<T>) -> Result<T> {
        let mut db = match self.db.lock() {
            Ok(d) => d,
            Err(p) => p.into_inner(),
        };
        if db.is_none() {
            let opened = Db::open_or_create(&self.db_path)?;
            opened.tune_for_steady_writes()?;
            *db = Some(opened);
        }
        match db.as_ref() {
            Some(d) => f(d),
            None => anyhow::bail!("the results database is not open"),
        }
    }

    /// Whether retention is due now (and, if so, it is counted as done).
    fn retention_due(&self) -> bool {
        let mut at = match self.retained_at.lock() {
            Ok(a) => a,
            Err(p) => p.into_inner(),
        };
        let due = at.is_none_or(|t| t.elapsed() >= RETENTION_EVERY);
        if due {
            *at = Some(Instant::now());
        }
        due
    }

    fn in_flight(&self) -> std::sync::MutexGuard<'_, Vec<bool>> {
        self.in_flight.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn meter(&self) -> std::sync::MutexGuard<'_, budget::Meter> {
        self.meter.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Job `j`'s run ended, having moved `bytes`.
    fn ended(&self, j: usize, bytes: u64) {
        if let Some(r) = self.in_flight().get_mut(j) {
            *r = false;
        }
        self.meter().moved(Instant::now(), bytes);
    }

    /// Takes job `j`'s place in the pool for a probe, or says which budget refuses it.
    fn admit_probe(&self, j: usize) -> std::result::Result<(), String> {
        let jobs = jobs(&self.config);
        let job = &jobs[j];
        let mut in_flight = self.in_flight();
        let mut meter = self.meter();
        meter.sample(Instant::now());
        if in_flight[j] {
            return Err("its scheduled run is in progress".into());
        }
        let busy = in_flight.iter().filter(|r| **r).count();
        if busy >= self.config.max_concurrent {
            return Err(format!(
                "all {} run places are taken (agent.max_concurrent)",
                self.config.max_concurrent
            ));
        }
        if meter.cpu_exceeded() {
            return Err("the agent is over its CPU budget".into());
        }
        if job.throughput {
            if meter.traffic_exceeded() {
                return Err("the agent is over its traffic budget".into());
            }
            let same_target = jobs
                .iter()
                .zip(in_flight.iter())
                .any(|(o, r)| *r && o.throughput && o.target == job.target);
            if same_target {
                return Err("a throughput test to this target is running".into());
            }
        }
        in_flight[j] = true;
        Ok(())
    }

    fn update(&self, f: impl FnOnce(&mut AgentSnapshot)) {
        // A thread that panicked while holding it left plain counters: still usable.
        let mut s = match self.snapshot.lock() {
            Ok(s) => s,
            Err(p) => p.into_inner(),
        };
        f(&mut s);
    }

    /// The snapshot now, with the CPU time read now.
    pub fn snapshot(&self) -> AgentSnapshot {
        let mut s = match self.snapshot.lock() {
            Ok(s) => s.clone(),
            Err(p) => p.into_inner().clone(),
        };
        s.cpu_seconds = budget::process_cpu_seconds();
        s
    }
}

/// Every (target, test) pair as a scheduler job, test by test in config order.
pub fn jobs(config: &AgentConfig) -> Vec<Job> {
    config
        .tests
        .iter()
        .enumerate()
        .flat_map(|(ti, t)| {
            t.targets.iter().map(move |&target| Job {
                target,
                test: ti,
                period: t.period,
                slip: t.slip,
                throughput: t.throughput,
            })
        })
        .collect()
}

fn initial_state(config: &AgentConfig, target: usize, test: usize) -> TestState {
    let (g, t) = (&config.targets[target], &config.tests[test]);
    TestState {
        target: g.name.clone(),
        test: t.name.clone(),
        labels: g.labels.clone(),
        transport: t.request.transport.name().to_string(),
        pattern: t.request.pattern.name().to_string(),
        size_bytes: t.size_bytes,
        throughput: t.throughput,
        ..TestState::default()
    }
}

/// How a run ended, sent to the loop.
struct Done {
    job: usize,
    bytes: u64,
}

/// Runs the agent until `stop` is set or `for_duration` has passed; every run in progress
/// then finishes (and is saved) before this returns. The seed the slips were drawn with.
pub fn run(
    shared: Arc<Shared>,
    seed: u64,
    for_duration: Option<Duration>,
    stop: &AtomicBool,
) -> Result<()> {
    // Read once here, before any run's thread is pinned: the host's facts a run records
    // (CPU count and model) are cached for the process's life.
    let _ = crate::env::Environment::capture();
    let config = &shared.config;
    let jobs = jobs(config);
    let mut sched = Scheduler::new(jobs.clone(), seed);
    let mut skipped_seen = vec![0u64; jobs.len()];
    let (tx, rx) = mpsc::channel::<Done>();
    let mut handles = Vec::new();
    let start = Instant::now();
    loop {
        let now = start.elapsed();
        if stop.load(Ordering::SeqCst) || for_duration.is_some_and(|d| now >= d) {
            break;
        }
        while let Ok(done) = rx.try_recv() {
            shared.ended(done.job, done.bytes);
        }
        // Decided and marked under the pool's lock: a probe admitted meanwhile is counted.
        let decision = {
            let mut running = shared.in_flight();
            let mut meter = shared.meter();
            meter.sample(Instant::now());
            let busy = running.iter().filter(|r| **r).count();
            let budgets = Budgets {
                cpu_exceeded: meter.cpu_exceeded(),
                traffic_exceeded: meter.traffic_exceeded(),
                free_slots: config.max_concurrent.saturating_sub(busy),
            };
            let decision = sched.decide(now, &running, budgets);
            for &j in &decision.start {
                running[j] = true;
            }
            decision
        };
        for j in decision.start {
            if sched.skipped(j) > skipped_seen[j] {
                let (g, t) = (&config.targets[jobs[j].target], &config.tests[jobs[j].test]);
                eprintln!(
                    "wirebench agent: {}: {} period(s) skipped (the run came late: budget, pool or a throughput test to the same target)",
                    run::label(g, t),
                    sched.skipped(j) - skipped_seen[j]
                );
                skipped_seen[j] = sched.skipped(j);
            }
            let shared = Arc::clone(&shared);
            let tx = tx.clone();
            shared.update(|s| s.running += 1);
            handles.push(std::thread::spawn(move || {
                let bytes = guarded(&shared, j, || one_run(&shared, j));
                shared.update(|s| s.running = s.running.saturating_sub(1));
                let _ = tx.send(Done { job: j, bytes });
            }));
        }
        handles.retain(|h| !h.is_finished());
        let wait = decision.next.saturating_sub(start.elapsed()).min(TICK);
        if let Ok(done) = rx.recv_timeout(wait) {
            shared.ended(done.job, done.bytes);
        }
    }
    let left = handles.len();
    if left > 0 {
        eprintln!("wirebench agent: stopping: {left} run(s) in progress finish first");
    }
    for h in handles {
        let _ = h.join();
    }
    Ok(())
}

/// `run` (job `j`'s [`one_run`]), with a panic in it ended as a counted failure of its test:
/// the thread then still reports that the job is done, so that the test runs again at its
/// next period (a thread that died silently left its job marked running for ever, and nothing
/// counted the failure).
fn guarded(shared: &Shared, j: usize, run: impl FnOnce() -> u64) -> u64 {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) {
        Ok(bytes) => bytes,
        Err(panic) => {
            let why = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".to_string());
            let label = job_label(&shared.config, j);
            eprintln!(
                "wirebench agent: {}: run failed: an internal error ({}); counted as a failure",
                crate::text::printable(&label),
                crate::text::printable(&why)
            );
            shared.update(|s| {
                if let Some(t) = s.tests.get_mut(j) {
                    t.runs_total += 1;
                    t.failures_total += 1;
                }
            });
            0
        }
    }
}

/// The label of job `j`'s runs.
fn job_label(config: &AgentConfig, j: usize) -> String {
    match jobs(config).get(j) {
        Some(job) => run::label(&config.targets[job.target], &config.tests[job.test]),
        None => format!("job {j}"),
    }
}

/// Measures job `j` once, saves it and updates its state; the bytes it moved. A run that was
/// measured but could not be saved is not lost: its document goes to a recovery file (as
/// `run` writes one), its figures are exported, and it is not counted as a failed run.
fn one_run(shared: &Shared, j: usize) -> u64 {
    let config = &shared.config;
    let job = &jobs(config)[j];
    let (target, test) = (&config.targets[job.target], &config.tests[job.test]);
    let label = run::label(target, test);
    let outcome = run::measure(test, &target.address, &label).map(|doc| {
        match shared.with_db(|db| run::save(db, config, &doc, &label)) {
            Ok(saved) => (doc, Some(saved)),
            Err(e) => {
                eprintln!(
                    "wirebench agent: {}: measured but not saved",
                    crate::text::printable(&label)
                );
                let reason = crate::error::one_line(&e);
                crate::store::save::recover_document(&doc, &shared.db_path, &reason);
                (doc, None)
            }
        }
    });
    if shared.retention_due() {
        if let Err(e) = shared.with_db(|db| run::retain(db, config)) {
            eprintln!(
                "wirebench agent: retention failed: {}",
                crate::error::one_line(&e)
            );
        }
    }
    match outcome {
        Ok((doc, None)) => {
            let last = run::last_result(&doc, None);
            shared.update(|s| {
                if let Some(t) = s.tests.get_mut(j) {
                    t.runs_total += 1;
                    t.last = Some(last);
                }
            });
            run::bytes_moved(&doc)
        }
        Ok((doc, Some(saved))) => {
            let last = run::last_result(&doc, Some(saved.id));
            let regressed = saved.comparison.as_ref().is_some_and(|c| c.regressed());
            if let Some(c) = saved.comparison.as_ref().filter(|c| c.regressed()) {
                eprintln!(
                    "wirebench agent: regression: {label}: {} (run {})",
                    run::describe(
                        saved.headline,
                        doc.pattern == crate::model::vocab::PatternKind::Stream,
                        c,
                        config
                    ),
                    saved.id
                );
            }
            shared.update(|s| {
                if let Some(t) = s.tests.get_mut(j) {
                    t.runs_total += 1;
                    if regressed {
                        t.regressions_total += 1;
                    }
                    // Cleared by a later comparison that does not find one.
                    if saved.comparison.is_some() {
                        t.regressed = regressed;
                    }
                    t.last = Some(last);
                }
            });
            run::bytes_moved(&doc)
        }
        Err(e) => {
            eprintln!(
                "wirebench agent: {label}: run failed: {}",
                crate::error::one_line(&e)
            );
            shared.update(|s| {
                if let Some(t) = s.tests.get_mut(j) {
                    t.runs_total += 1;
                    t.failures_total += 1;
                }
            });
            0
        }
    }
}

/// The exporter's view of a running agent.
pub struct Source(pub Arc<Shared>);

impl crate::metrics::MetricsSource for Source {
    fn agent(&self) -> Option<AgentSnapshot> {
        Some(self.0.snapshot())
    }

    fn server(&self) -> Option<crate::model::agent::ServerSnapshot> {
        None
    }

    /// A probe runs one of the config's own (target, test) pairs, and only those: the target by
    /// its name or its configured address, never any other address (a scrape must not make the
    /// agent connect elsewhere, nor present its key to a stranger), in the same pool and
    /// within the same budgets as the scheduled runs. Its run is not saved.
    fn probe(&self, target: &str, module: &str) -> std::result::Result<TestState, String> {
        let shared = &self.0;
        let config = &shared.config;
        let ti = config
            .tests
            .iter()
            .position(|t| t.name == module)
            .ok_or_else(|| format!("module {module:?}: no [[test]] of that name"))?;
        let gi = config
            .targets
            .iter()
            .position(|g| g.name == target)
            .or_else(|| config.targets.iter().position(|g| g.address == target))
            .ok_or_else(|| {
                format!("target {target:?}: not a [[target]] of this agent (a probe runs only against its configured targets)")
            })?;
        let j = jobs(config)
            .iter()
            .position(|job| job.target == gi && job.test == ti)
            .ok_or_else(|| {
                format!(
                    "test {module:?} does not run against target {:?} in this agent's config",
                    config.targets[gi].name
                )
            })?;
        shared
            .admit_probe(j)
            .map_err(|why| format!("not run now: {why}"))?;
        let test = &config.tests[ti];
        let mut state = initial_state(config, gi, ti);
        let label = run::label(&config.targets[gi], test);
        let measured = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run::measure(test, &config.targets[gi].address, &label)
        }));
        let bytes = match &measured {
            Ok(Ok(doc)) => run::bytes_moved(doc),
            _ => 0,
        };
        shared.ended(j, bytes);
        let doc = match measured {
            Ok(Ok(doc)) => doc,
            Ok(Err(e)) => return Err(format!("the run failed: {}", crate::error::one_line(&e))),
            Err(_) => return Err("the run failed: an internal error".into()),
        };
        state.runs_total = 1;
        state.last = Some(run::last_result(&doc, None));
        Ok(state)
    }
}

/// How long the agent has been running.
pub fn uptime(shared: &Shared) -> Duration {
    shared.started.elapsed()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> AgentConfig {
        AgentConfig::parse(
            "[[target]]\nname = \"a\"\naddress = \"127.0.0.1:1\"\n[[test]]\nname = \"p\"\nperiod = \"1s\"\n[test.run]\npattern = \"pingpong\"\n",
        )
        .unwrap()
    }

    /// A run whose thread panics is a counted failure of its test, and the thread still ends
    /// normally (so its job is reported done and runs again).
    #[test]
    fn a_panicking_run_is_a_counted_failure() {
        let shared = Shared::new(config(), PathBuf::from("/nonexistent/agent.db"));
        let bytes = guarded(&shared, 0, || panic!("all times should be after the epoch"));
        assert_eq!(bytes, 0);
        let s = shared.snapshot();
        assert_eq!((s.tests[0].runs_total, s.tests[0].failures_total), (1, 1));
        // A run that returns is not touched by the guard.
        assert_eq!(guarded(&shared, 0, || 42), 42);
        assert_eq!(shared.snapshot().tests[0].failures_total, 1);
        assert_eq!(job_label(&shared.config, 0), "a/p");
    }
}
