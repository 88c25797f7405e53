//! The command layer: what the user can type (clap's definitions, with units and defaults in
//! every help text) and the handler of each command. Everything below it takes typed values
//! (a [`crate::request::Request`], a server or lab configuration); no module below imports
//! this one.

pub mod agent;
pub mod app;
pub mod compare_transports;
mod habits;
pub mod lab;
#[cfg(feature = "mpi")]
pub mod mesh;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod relay;
pub mod results;
pub mod run;
pub mod serve;
pub mod study;
pub mod trace;

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};

use crate::error::{one_line, EXIT_FAILURE};
pub use run::RunArgs;
pub use serve::ServeArgs;

#[derive(Debug, Parser)]
#[command(
    name = "wirebench",
    version,
    about = "Protocol-independent network benchmark: latency, throughput and loss over TCP, UDP, Unix sockets, MPTCP, QUIC and raw Ethernet",
    long_about = "Protocol-independent network benchmark: latency, throughput and loss over TCP, UDP, Unix sockets, MPTCP, QUIC and raw Ethernet.\n\nSizes take BINARY suffixes (K = 1024 bytes, M = 1024^2, G = 1024^3). Rates take DECIMAL suffixes (k = 1000 bit/s, M = 10^6, G = 10^9) or 'pps'. Throughput is printed in Mbit/s = 10^6 bit/s.",
    after_help = "Examples:\n  wirebench run pingpong                      # self-hosted loopback server\n  wirebench serve                             # server on port 5320\n  wirebench run pingpong --to HOST --size 1..4M:*2\n  wirebench run stream --to HOST --parallel 4 --interval 1s\n  wirebench run stream --transport udp --rate 500M --size 1400"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a server that answers any number of clients at once.
    Serve(serve::ServeArgs),
    /// Run a test as client (with no --to, against a server started on loopback).
    Run(Box<run::RunArgs>),
    /// The same ping-pong size sweep over several transports: t0, r_max and n_1/2 of each,
    /// with confidence intervals, and the overhead against the lowest layer measured.
    CompareTransports(compare_transports::CompareArgs),
    /// A user-space TCP relay to put in the path: measures what an extra hop costs
    /// (clients point --to at it; they learn from the relay to put their data connections on
    /// its one port).
    Relay(relay::RelayArgs),
    /// Measure what timing costs here: a clock read and a histogram record.
    Calibrate {
        /// Iterations per figure.
        #[arg(long, default_value_t = 10_000_000)]
        iterations: u64,
        /// As JSON.
        #[arg(long)]
        json: bool,
    },
    /// Application kernels over P ranks (matrix multiply, Jacobi relaxation, chunk server):
    /// sequential baseline, parallel time, speedup, efficiency, share of time communicating.
    App(Box<app::AppArgs>),
    /// One rank of a local `app` job, started by rank 0.
    #[command(name = "__app-rank", hide = true)]
    AppRank(Box<app::RankArgs>),
    /// Emulated networks in namespaces: two hosts joined by a shaped link, or N hosts in a
    /// star, a chain or on two switches (needs root).
    Lab(lab::LabArgs),
    /// Ping-pong, rr or stream over MPI point-to-point calls between the two ranks of an MPI
    /// job: `mpirun -np 2 wirebench mpi PATTERN [options]`.
    #[cfg(feature = "mpi")]
    Mpi(Box<mpi::MpiArgs>),
    /// MPI point-to-point benchmarks (not in this build: it needs `--features mpi`, see README).
    #[cfg(not(feature = "mpi"))]
    #[command(disable_help_flag = true)]
    Mpi {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        args: Vec<String>,
    },
    /// Every ordered pair of the ranks of an MPI job, in rounds that share no rank: latency
    /// and bandwidth matrices, `mpirun -np N wirebench mesh PATTERN [run's options]`.
    #[cfg(feature = "mpi")]
    Mesh(Box<mesh::MeshArgs>),
    /// All-pairs mesh under mpirun (not in this build: it needs `--features mpi`, see README).
    #[cfg(not(feature = "mpi"))]
    #[command(disable_help_flag = true)]
    Mesh {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        args: Vec<String>,
    },
    /// Print a completion script for SHELL to stdout, e.g.
    /// `wirebench completions bash > /etc/bash_completion.d/wirebench`.
    Completions {
        /// The shell to complete in.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// The manual page: wirebench(1) on stdout, or with --dir a page per command
    /// (wirebench.1, wirebench-run.1, ...) written into DIR.
    Man {
        /// Directory to write the pages into, e.g. /usr/local/share/man/man1; the files
        /// written are listed on stdout. A page that exists there is refused before any is
        /// written, unless --force.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        #[command(flatten)]
        force: ForceArg,
    },
    /// Segment-flow traces written by `run --trace FILE.pcap`: `trace show FILE` (summary),
    /// `trace plot FILE` (segment size, bytes outstanding, advertised window).
    Trace(trace::TraceArgs),
    /// Whole experiments from one file: axes, repetitions, random order, resumable
    /// (`wirebench study FILE.toml`, `study show ID`).
    Study(study::StudyArgs),
    /// One run from a request on stdin, its result on stdout (how a study runs its points).
    #[command(name = "__measure", hide = true)]
    Measure(study::MeasureArgs),
    /// Measure a list of targets with a list of tests on a schedule, from a config file:
    /// runs saved with source "agent", regressions found against each test's baseline.
    Agent(agent::AgentArgs),
    /// Saved results: history, show, export, import, report, plot, compare.
    #[command(flatten)]
    Results(results::ResultsCommand),
}

/// `--force`: one flag, one meaning, on every command that writes files (see
/// [`crate::outfile`]).
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct ForceArg {
    /// Replace output files that already exist (a symbolic or hard link there is refused
    /// even so).
    #[arg(long)]
    pub force: bool,
}

/// How a command that prints a table prints it (`--format`): the one choice every table
/// command offers, so that any of them can be pasted into an issue as Markdown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum TableFormat {
    /// Columns aligned with spaces, for a terminal.
    #[default]
    Table,
    /// A GitHub-flavoured Markdown table.
    Markdown,
}

impl TableFormat {
    pub fn style(self) -> crate::text::table::Style {
        match self {
            TableFormat::Table => crate::text::table::Style::Plain,
            TableFormat::Markdown => crate::text::table::Style::Markdown,
        }
    }
}

/// Runs a parsed command line: the process's exit code, every failure one line on stderr.
pub fn main_with(cli: Cli) -> i32 {
    let result = match cli.command {
        Command::Serve(a) => serve::run(a).map(|()| 0),
        Command::Run(a) => run::run(&a),
        Command::Lab(a) => lab::run(a),
        Command::App(a) => app::run(*a),
        Command::AppRank(a) => app::run_rank(*a),
        Command::Study(a) => study::run(a),
        Command::Agent(a) => agent::run(a),
        Command::Measure(a) => study::measure(a),
        Command::Relay(a) => relay::run(a).map(|()| 0),
        Command::CompareTransports(a) => compare_transports::run(a),
        #[cfg(feature = "mpi")]
        Command::Mpi(a) => return mpi::run(*a),
        #[cfg(feature = "mpi")]
        Command::Mesh(a) => return mesh::run(&a),
        #[cfg(not(feature = "mpi"))]
        Command::Mesh { .. } => Err(anyhow::anyhow!(crate::transport::NO_MPI)),
        #[cfg(not(feature = "mpi"))]
        Command::Mpi { .. } => Err(anyhow::anyhow!(crate::transport::NO_MPI)),
        Command::Calibrate { iterations, json } => calibrate(iterations, json),
        Command::Completions { shell } => {
            let mut script = Vec::new();
            completions(shell, &mut script);
            to_stdout(&script).map(|()| 0)
        }
        Command::Man { dir, force } => {
            let mut text = Vec::new();
            man(dir.as_deref(), force.force, &mut text).and_then(|()| to_stdout(&text).map(|()| 0))
        }
        Command::Results(c) => results::run(c),
        Command::Trace(a) => trace::run(a),
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

/// A usage error of clap's on one line, with everything clap said but its usage block: what
/// is missing, the values allowed, its "tip: a similar ... exists", and a pointer to the help
/// of the subcommand `args` (the command line after the program's name) name, e.g.
/// "the following required arguments were not provided: <PATTERN> (see 'wirebench run --help')".
pub fn usage_error_line(e: &clap::Error, args: &[String]) -> String {
    let text = e.render().to_string();
    let mut parts: Vec<String> = Vec::new();
    let mut in_usage = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with("Usage:") {
            in_usage = true;
            continue;
        }
        if line.is_empty() {
            in_usage = false;
            continue;
        }
        if in_usage || line.starts_with("For more information, try") {
            continue;
        }
        let line = line.strip_prefix("error: ").unwrap_or(line);
        let line = match line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            Some(inner) => inner, // "[possible values: ...]"
            None => line,
        };
        // "...not provided:" and the arguments it lists on the following lines: one piece.
        match parts.last_mut() {
            Some(last) if last.ends_with(':') => {
                last.push(' ');
                last.push_str(line);
            }
            Some(last)
                if last.contains("not provided: ")
                    && (line.starts_with('<') || line.starts_with('-')) =>
            {
                last.push_str(", ");
                last.push_str(line);
            }
            _ => parts.push(line.to_owned()),
        }
    }
    if parts.is_empty() {
        parts.push("invalid arguments".to_owned());
    }
    if let Some(h) = habit_hint(e, args) {
        // clap's tips ("to pass '-u' as a value, use '-- -u'", "a similar argument exists:
        // '--compete'" for --omit) are beside the point then.
        parts.retain(|p| !p.starts_with("tip:"));
        parts.push(h);
    }
    let line = parts.join("; ");
    let line = crate::text::printable(&line).into_owned();
    format!("{line} (see '{} --help')", command_path(args))
}

/// The name here of another tool's option that `e` refused (see [`habits`]).
fn habit_hint(e: &clap::Error, args: &[String]) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let context = |kind| match e.get(kind) {
        Some(ContextValue::String(s)) => Some(s.as_str()),
        _ => None,
    };
    let path = command_path(args);
    let subcommand = path.strip_prefix("wirebench").unwrap_or("").trim();
    match e.kind() {
        ErrorKind::UnknownArgument => {
            habits::hint(subcommand, context(ContextKind::InvalidArg)?).map(str::to_owned)
        }
        ErrorKind::InvalidValue | ErrorKind::ValueValidation
            if context(ContextKind::InvalidArg)?.starts_with("--iterations") =>
        {
            habits::iterations_hint(context(ContextKind::InvalidValue)?)
        }
        _ => None,
    }
}

/// "wirebench" and the subcommands that lead `args`, e.g. "wirebench lab up": whose help to
/// point a usage error at.
pub fn command_path(args: &[String]) -> String {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let mut path = String::from("wirebench");
    for a in args {
        let Some(sub) = cmd.find_subcommand(a).cloned() else {
            break;
        };
        path.push(' ');
        path.push_str(sub.get_name());
        cmd = sub;
    }
    path
}

/// `wirebench completions SHELL`: the script, from the clap definitions, to `out`.
pub fn completions(shell: clap_complete::Shell, out: &mut dyn std::io::Write) {
    use clap::CommandFactory;
    clap_complete::generate(shell, &mut Cli::command(), "wirebench", out);
}

/// `wirebench man`: wirebench(1) to `out`, or with `dir` a page per command (hidden ones
/// left out) into it by the rules of [`crate::outfile`] (all checked before the first is
/// written; `force`: replace regular files), each path written to `out`.
pub fn man(
    dir: Option<&std::path::Path>,
    force: bool,
    out: &mut dyn std::io::Write,
) -> anyhow::Result<()> {
    use clap::CommandFactory;
    let cmd = Cli::command();
    let Some(dir) = dir else {
        clap_mangen::Man::new(cmd).render(out)?;
        return Ok(());
    };
    // As clap_mangen::generate_to (which creates each file as it goes, through any link),
    // but into memory first.
    fn pages(cmd: clap::Command, into: &mut Vec<(String, Vec<u8>)>) -> anyhow::Result<()> {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned() {
            pages(sub, into)?;
        }
        let man = clap_mangen::Man::new(cmd);
        let mut page = Vec::new();
        man.render(&mut page)?;
        into.push((man.get_filename(), page));
        Ok(())
    }
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let mut files = Vec::new();
    pages(cmd, &mut files)?;
    for path in crate::outfile::OutDir::open(dir, force)?.write_files(&files)? {
        writeln!(out, "{}", path.display())?;
    }
    Ok(())
}

#[cfg(test)]
mod help_tests {
    use clap::CommandFactory;

    /// Every argument of every subcommand says what it is: `--help` lists no bare flag.
    #[test]
    fn every_argument_has_help() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if matches!(id, "help" | "version") || arg.is_hide_set() {
                    continue;
                }
                let has = arg
                    .get_help()
                    .is_some_and(|h| !h.to_string().trim().is_empty())
                    || arg
                        .get_long_help()
                        .is_some_and(|h| !h.to_string().trim().is_empty());
                if !has {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in cmd.get_subcommands() {
                if sub.get_about().is_none() && sub.get_long_about().is_none() {
                    missing.push(format!("{path} {} (the subcommand)", sub.get_name()));
                }
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&super::Cli::command(), "wirebench", &mut missing);
        assert!(missing.is_empty(), "arguments without help: {missing:#?}");
    }
}
