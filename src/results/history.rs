//! The history of saved runs: listing them, printing one as `run` did, exporting one as JSON
//! or CSV, and importing a result document measured elsewhere.

use std::time::Duration;

use anyhow::{Context, Result};

use super::db::{self, Db, Filter, RunRow, Source};
use super::summary::{describe, RunHeadline};
use crate::control::client::ClientSide;
use crate::control::protocol::TestSpec;
use crate::pattern::{Direction, PatternKind};
use crate::plan::RunPlan;
use crate::report::model::RunReport;
use crate::report::table::TableSink;
use crate::report::Sink;

/// The `history` listing: one line per run, newest first.
pub fn format_history(rows: &[RunRow]) -> String {
    let mut out = format!(
        "{:>5}  {:<24} {:<8} {:<4} {:<22} {:<16} {:>6}  {}\n",
        "id", "started (UTC)", "pattern", "via", "server", "client host", "points", "headline"
    );
    for r in rows {
        let h = RunHeadline {
            latency_ns: r.latency_ns,
            throughput_bits_per_s: r.throughput_bits_per_s,
            transactions_per_s: r.transactions_per_s,
            note: r.headline_note.clone(),
        };
        let mut notes = Vec::new();
        if !r.complete {
            notes.push("incomplete");
        }
        if r.source == "import" {
            notes.push("imported");
        }
        out.push_str(&format!(
            "{:>5}  {:<24} {:<8} {:<4} {:<22} {:<16} {:>6}  {}{}\n",
            r.id,
            r.started_at,
            r.pattern,
            r.transport,
            r.server_address.as_deref().unwrap_or("-"),
            r.client_host.as_deref().unwrap_or("-"),
            r.points,
            describe(&r.pattern, &h),
            if notes.is_empty() {
                String::new()
            } else {
                format!(" [{}]", notes.join(", "))
            }
        ));
    }
    out
}

pub fn history(db: &Db, filter: &Filter) -> Result<String> {
    let rows = db.list(filter)?;
    if rows.is_empty() {
        return Ok(format!(
            "# no saved runs match in {}\n",
            db.path().display()
        ));
    }
    Ok(format_history(&rows))
}

/// The plan a table needs to lay out its columns, rebuilt from what the result recorded.
fn plan_of(r: &RunReport) -> Result<RunPlan> {
    let pattern = match r.pattern.as_str() {
        "pingpong" => PatternKind::Pingpong,
        "stream" => PatternKind::Stream,
        "rr" => PatternKind::Rr,
        "crr" => PatternKind::Crr,
        other => anyhow::bail!("unknown pattern '{other}' in the stored result"),
    };
    let s = &r.settings;
    Ok(RunPlan {
        test: TestSpec {
            one_port: false,
            pattern,
            transport: r.transport.clone(),
            streams: s.streams,
            direction: match s.direction.as_str() {
                "reverse" => Direction::Reverse,
                "bidir" => Direction::Bidir,
                _ => Direction::Forward,
            },
            spin: s.spin,
            server_cpus: s.server_cpus.clone(),
            interval_ms: s.interval_s.map(|x| (x * 1000.0).round() as u64),
            burst: s.burst,
            fast: s.fast.clone(),
        },
        points: Vec::new(),
        swept: r.swept,
        client: ClientSide {
            socket: Default::default(),
            cpus: s.client_cpus.clone(),
            io_timeout: Duration::from_secs_f64(s.io_timeout_s.max(0.0)),
            loss_timeout: Duration::from_secs_f64(s.loss_timeout_s.max(0.0)),
        },
        confidence: s.confidence,
        repeat: s.repeat,
        until_ci: s.until_ci,
        max_repeat: s.max_repeat,
        rate: None,
    })
}

/// Prints a run to stdout as `run` printed it (the client's live interval lines excepted:
/// they were never part of the result).
pub fn show(r: &RunReport) -> Result<()> {
    let plan = plan_of(r)?;
    let mut sink = TableSink::new();
    let mut so_far = r.clone();
    so_far.points.clear();
    sink.begin(&so_far, &plan);
    for p in &r.points {
        sink.point(&so_far, p);
        so_far.points.push(p.clone());
    }
    sink.finish(r);
    if let Some(e) = &r.error {
        println!("# error: {e}");
    }
    Ok(())
}

pub fn export_json(r: &RunReport) -> Result<String> {
    Ok(crate::report::json::to_string(r).context("encoding the result")? + "\n")
}

pub fn export_csv(r: &RunReport) -> String {
    let mut out = crate::report::csv::COLUMNS.join(",") + "\n";
    for p in &r.points {
        out.push_str(&crate::report::csv::row(r, p).join(","));
        out.push('\n');
    }
    out
}

/// Reads a result document (`-` for stdin) and saves it as a new, imported run.
pub fn import(db: &Db, file: &std::path::Path) -> Result<i64> {
    let text = if file.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin()).context("reading stdin")?
    } else {
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?
    };
    let report = db::parse_report(&text).with_context(|| format!("{}", file.display()))?;
    db.insert(&report, Source::Import)
}
