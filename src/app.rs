//! Runs a parsed command line and maps every failure to one line on stderr and an exit code.

use std::net::SocketAddr;

use anyhow::{Context, Result};

use crate::cli::{Cli, Command, Permit, RunArgs, ServeArgs};
use crate::control::limits::Limits;
use crate::control::server::{Server, ServerConfig};
use crate::plan::{self, runner};
use crate::report::json::{JsonSink, JsonStreamSink};
use crate::report::{csv::CsvSink, table::TableSink, Sink};

/// Exit code for a failed measurement or bad input (clap uses 2 for usage errors).
pub const EXIT_FAILURE: i32 = 1;

/// One line: the error and its causes, joined.
pub fn one_line(e: &anyhow::Error) -> String {
    // An error may quote a peer (a server's refusal) or a file: no escape sequence of theirs
    // reaches the terminal.
    crate::text::printable(&format!("{e:#}").replace('\n', " ")).into_owned()
}

pub fn main_with(cli: Cli) -> i32 {
    let result = match cli.command {
        Command::Serve(a) => serve(a).map(|()| 0),
        Command::Run(a) => return run_measurement(*a, None),
        Command::Lab(a) => crate::lab::cli::run(a),
        Command::Relay(a) => crate::relay::run(a).map(|()| 0),
        Command::CompareTransports(a) => crate::plan::compare::run(a),
        #[cfg(feature = "mpi")]
        Command::Mpi(a) => return crate::mpi_cmd::run(*a),
        #[cfg(not(feature = "mpi"))]
        Command::Mpi { .. } => Err(anyhow::anyhow!(crate::transport::NO_MPI)),
        Command::Calibrate { iterations, json } => calibrate(iterations, json),
        Command::Completions { shell } => {
            let mut script = Vec::new();
            crate::cli::completions(shell, &mut script);
            to_stdout(&script).map(|()| 0)
        }
        Command::Man { dir } => {
            let mut text = Vec::new();
            crate::cli::man(dir.as_deref(), &mut text).and_then(|()| to_stdout(&text).map(|()| 0))
        }
        Command::Results(c) => crate::results::cli::run(c),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("wirebench: error: {}", one_line(&e));
            EXIT_FAILURE
        }
    }
}

/// Writes generated text to stdout; a reader that stopped early (`| head`) is no error.
fn to_stdout(bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

fn serve(a: ServeArgs) -> Result<()> {
    let config = ServerConfig {
        limits: Limits {
            max_message: a.max_message,
            max_duration_ms: a.max_duration.as_millis().min(u64::MAX as u128) as u64,
            max_streams: a.max_streams,
            max_sessions: a.max_sessions,
            max_test_memory: a.budget.max_test_memory,
            max_memory: a.budget.max_memory,
            max_streams_total: a.budget.max_streams_total,
            max_rate_bps: a.budget.max_rate.unwrap_or(0),
            max_rate_per_client_bps: a.budget.max_rate_per_client.unwrap_or(0),
            max_rate_total_bps: a.budget.max_rate_total.unwrap_or(0),
            permit_spin: a.budget.permit.contains(&Permit::Spin),
            permit_busy_poll: a.budget.permit.contains(&Permit::BusyPoll),
            permit_raw: a.budget.permit.contains(&Permit::Raw),
            ..Limits::default()
        },
        io_timeout: a.io_timeout,
        log: !a.quiet,
        transport: a.transport.config(),
        access: a.access.config()?,
        ..ServerConfig::default()
    };
    let keyless = config.access.psk.is_none();
    let server = Server::bind(SocketAddr::new(a.listen, a.port), config)?;
    let addr = server.local_addr()?;
    eprintln!(
        "wirebench {} server listening on {addr}",
        env!("CARGO_PKG_VERSION")
    );
    if keyless && !a.listen.is_loopback() {
        eprintln!(
            "wirebench serve: warning: no pre-shared key: anyone who can reach {addr} can run tests from it (--psk-file or WIREBENCH_PSK; see SECURITY.md)"
        );
    }
    server.serve()
}

/// Runs a measurement and prints it; `lab` describes the emulated link it runs over, if any.
pub fn run_measurement(a: RunArgs, lab: Option<crate::lab::LabState>) -> i32 {
    let mut runner = runner::ControlRunner::new(&a);
    run_measurement_with(&a, lab, &mut runner)
}

/// Runs a measurement whose points `point_runner` measures, prints it and saves it: the one
/// path from a plan to the output, whatever carries the data.
pub fn run_measurement_with(
    a: &RunArgs,
    lab: Option<crate::lab::LabState>,
    point_runner: &mut dyn runner::PointRunner,
) -> i32 {
    let plan = match plan::build(a) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("wirebench: error: {}", one_line(&e));
            return EXIT_FAILURE;
        }
    };
    let sink: Box<dyn Sink> = if a.json_stream {
        Box::new(JsonStreamSink::default())
    } else if a.json {
        Box::new(JsonSink::default())
    } else if a.csv {
        Box::new(CsvSink::default())
    } else {
        Box::new(TableSink::new())
    };
    let (mut sink, saved) = match crate::results::save::attach(a, sink) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("wirebench: error: {}", one_line(&e));
            return EXIT_FAILURE;
        }
    };
    runner::stop_on_ctrl_c();
    let mut report = runner::new_report(&plan, a);
    report.lab = lab;
    let result = runner::run_with(&plan, &mut report, sink.as_mut(), point_runner);
    report.finished_at = Some(crate::env::now_rfc3339());
    report.complete = result.is_ok();
    report.error = result.as_ref().err().map(one_line);
    let shown = sink.finish(&report);
    if let Err(e) = &shown {
        // A write that failed during the run fails again here: said once.
        if result.as_ref().err().map(one_line) != Some(one_line(e)) {
            eprintln!("wirebench: error: {}", one_line(e));
        }
    }
    if let Err(e) = saved.outcome() {
        eprintln!("wirebench: error: {}", one_line(&e));
        if result.is_ok() {
            return EXIT_FAILURE;
        }
    }
    if let Some(path) = &a.output {
        let written = crate::report::json::to_string(&report)
            .context("encoding the result")
            .and_then(|s| {
                std::fs::write(path, s + "\n")
                    .with_context(|| format!("writing {}", path.display()))
            });
        if let Err(e) = written {
            eprintln!("wirebench: error: {}", one_line(&e));
            return EXIT_FAILURE;
        }
    }
    match result {
        Ok(()) if shown.is_ok() => 0,
        Ok(()) => EXIT_FAILURE,
        Err(e) => {
            eprintln!("wirebench: error: {}", one_line(&e));
            EXIT_FAILURE
        }
    }
}

fn calibrate(iterations: u64, json: bool) -> Result<i32> {
    let o = crate::stats::overhead::measure(iterations);
    if json {
        println!("{}", serde_json::to_string_pretty(&o)?);
    } else {
        println!(
            "clock read (Instant::now, CLOCK_MONOTONIC): {:.1} ns\nhistogram record (HDR + running moments): {:.1} ns\none timed sample (2 clock reads + 1 record): {:.1} ns\naveraged over {} iterations each",
            o.clock_read_ns, o.record_ns, o.sample_ns, o.iterations
        );
    }
    Ok(0)
}
