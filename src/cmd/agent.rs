//! `wirebench agent`: measure a list of targets on a schedule, from a config file.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::Result;
use clap::Args;

use crate::agent::{self, config::AgentConfig};
use crate::units::{format_duration, parse_duration};

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  wirebench agent --config contrib/agent/mesh.toml --check\n  wirebench agent --config agent.toml --metrics 127.0.0.1:9465\n  wirebench agent --config agent.toml --for 10m\n\nRuns are saved with source \"agent\" and label TARGET/TEST: `wirebench history --source agent`."
)]
pub struct AgentArgs {
    /// The agent's config (TOML): [agent], [retention], [regression], [[target]], [[test]].
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// Check the config, print each test's targets, period and slip, and exit.
    #[arg(long)]
    pub check: bool,
    /// Run for this long, then exit 0 once the runs in progress end (default: until
    /// SIGINT, SIGTERM or SIGHUP; SIGUSR1 prints the counts so far).
    #[arg(long = "for", value_name = "DURATION", value_parser = parse_duration)]
    pub for_duration: Option<Duration>,
    /// Serve /metrics and /probe (Prometheus) on this address (overrides [agent] metrics); a
    /// bare PORT binds 127.0.0.1. /probe runs only the config's tests against its targets.
    #[arg(long, value_name = "[IP:]PORT", value_parser = crate::metrics::parse_address)]
    pub metrics: Option<SocketAddr>,
    /// The results database (default: as for `run`).
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
}

pub fn run(a: AgentArgs) -> Result<i32> {
    let config = AgentConfig::read(&a.config)?;
    if a.check {
        print!("{}", describe(&config));
        return Ok(0);
    }
    let db_path = crate::store::db::resolve(a.db.as_deref())?;
    // Opened (and migrated) once before the first run: a database that cannot be used fails
    // now, not as every run's failure.
    crate::store::db::Db::open_or_create(&db_path)?;
    // SIGINT, SIGTERM and SIGHUP are taken by a thread of their own (blocked here, before
    // any other thread starts, so that every thread inherits the mask): the first stops the
    // agent after the runs in progress, the second ends it at once. SIGUSR1 and SIGUSR2 print
    // the counts so far (their default action would end the agent and lose its runs).
    let stop = Arc::new(AtomicBool::new(false));
    let watched = Arc::new(OnceLock::new());
    watch_signals(Arc::clone(&stop), Arc::clone(&watched))?;
    let seed = config.seed.unwrap_or_else(|| fastrand::u64(..));
    let metrics_addr = a.metrics.or(config.metrics);
    let shared = Arc::new(agent::Shared::new(config, db_path.clone()));
    let _ = watched.set(Arc::clone(&shared));
    let _exporter = match metrics_addr {
        Some(addr) => Some(crate::metrics::serve(
            addr,
            Arc::new(agent::Source(Arc::clone(&shared))),
        )?),
        None => None,
    };
    let c = &shared.config;
    eprintln!(
        "wirebench agent{}: {} test(s) on {} target(s), {} pair(s), seed {seed}, results in {}{}",
        c.name
            .as_deref()
            .map(|n| format!(" {n}"))
            .unwrap_or_default(),
        c.tests.len(),
        c.targets.len(),
        agent::jobs(c).len(),
        db_path.display(),
        // The bound address: `--metrics 127.0.0.1:0` has its port chosen by the system.
        _exporter
            .as_ref()
            .map(|m| format!(", metrics on http://{}/metrics", m.addr))
            .unwrap_or_default(),
    );
    agent::run(Arc::clone(&shared), seed, a.for_duration, &stop)?;
    let s = shared.snapshot();
    let runs: u64 = s.tests.iter().map(|t| t.runs_total).sum();
    let failures: u64 = s.tests.iter().map(|t| t.failures_total).sum();
    let regressions: u64 = s.tests.iter().map(|t| t.regressions_total).sum();
    eprintln!(
        "wirebench agent: stopped after {}: {runs} run(s), {failures} failed, {regressions} regression(s), {:.2} s of CPU",
        format_duration(Duration::from_millis(agent::uptime(&shared).as_millis() as u64)),
        s.cpu_seconds
    );
    Ok(if stop.load(Ordering::SeqCst) { 130 } else { 0 })
}

/// What `--check` prints: one line per test.
fn describe(c: &AgentConfig) -> String {
    let mut out = String::new();
    for t in &c.tests {
        let targets: Vec<&str> = t
            .targets
            .iter()
            .map(|&i| c.targets[i].name.as_str())
            .collect();
        out.push_str(&format!(
            "{}: {} over {}, {} bytes{}: every {} with slip up to {}, to {}\n",
            t.name,
            t.request.pattern.name(),
            t.request.transport.name(),
            t.size_bytes,
            if t.throughput { " (throughput)" } else { "" },
            format_duration(t.period),
            format_duration(t.slip),
            targets.join(", ")
        ));
    }
    out
}

fn watch_signals(stop: Arc<AtomicBool>, shared: Arc<OnceLock<Arc<agent::Shared>>>) -> Result<()> {
    use nix::sys::signal::{SigSet, Signal};
    let mut set = SigSet::empty();
    for sig in [
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGUSR1,
        Signal::SIGUSR2,
    ] {
        set.add(sig);
    }
    set.thread_block()?;
    std::thread::spawn(move || loop {
        let Ok(sig) = set.wait() else { return };
        if matches!(sig, Signal::SIGUSR1 | Signal::SIGUSR2) {
            if let Some(s) = shared.get() {
                eprintln!("wirebench agent: {sig}: {}", counts(s));
            }
            continue;
        }
        if stop.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
        eprintln!(
            "wirebench agent: {sig}: stopping after the runs in progress ({sig} again to quit now)"
        );
    });
    Ok(())
}

/// "12 run(s), 1 failed, 0 regression(s), 2 running".
fn counts(shared: &agent::Shared) -> String {
    let s = shared.snapshot();
    let runs: u64 = s.tests.iter().map(|t| t.runs_total).sum();
    let failures: u64 = s.tests.iter().map(|t| t.failures_total).sum();
    let regressions: u64 = s.tests.iter().map(|t| t.regressions_total).sum();
    format!(
        "{runs} run(s), {failures} failed, {regressions} regression(s), {} running",
        s.running
    )
}
