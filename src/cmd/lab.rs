//! `wirebench lab ...`: bring emulated links up and down, run commands on their hosts, and
//! run a whole test across one.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};

use crate::lab::config::{LinkConfig, LinkSpec, Mechanism, Profile};
use crate::lab::link::QueueLimit;
use crate::lab::{ns, Lab, LabState};
use crate::request::Request;
use crate::units;

#[derive(Debug, Args)]
pub struct LabArgs {
    #[command(subcommand)]
    pub command: LabCommand,
}

#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// Create two hosts (network namespaces a and b) joined by an emulated link.
    Up {
        /// Lab name (a-z, 0-9, '-'; at most 16).
        #[arg(long, default_value = "lab")]
        name: String,
        #[command(flatten)]
        link: LinkArgs,
    },
    /// Run a command on host a or b of a lab.
    Exec {
        /// Lab name, as given to `lab up`.
        #[arg(long, default_value = "lab")]
        name: String,
        /// The host to run on: a or b (`lab run` runs the client on a and the server on b).
        host: String,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Show running labs: link settings, mechanism, delay-line counters.
    Status {
        /// Only this lab.
        #[arg(long)]
        name: Option<String>,
        /// As JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove a lab (or all of them).
    Down {
        /// Lab name, as given to `lab up`.
        #[arg(long, default_value = "lab", conflicts_with = "all")]
        name: String,
        /// Remove every lab that is running.
        #[arg(long)]
        all: bool,
    },
    /// Set up a link, run the server on host b and the client on host a, print the result,
    /// and remove everything: `wirebench lab run --rate 100mbit -- stream -d 5s`.
    Run {
        /// Lab name (default: one made from the process id).
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        link: LinkArgs,
        /// The test, as for `wirebench run`, after `--` (without --to).
        #[arg(last = true, required = true)]
        test: Vec<String>,
    },
    /// Internal: the delay line process of a lab.
    #[command(hide = true)]
    DelayLine {
        /// The lab whose link this process carries.
        #[arg(long)]
        name: String,
    },
}

pub fn run(args: LabArgs) -> Result<i32> {
    match args.command {
        LabCommand::Up { name, link } => {
            let state = Lab::up(&name, link.to_config()?)?.keep();
            print_state(&state);
            println!(
                "reach the hosts with: wirebench lab exec --name {name} a -- COMMAND (or b); remove with: wirebench lab down --name {name}"
            );
            Ok(0)
        }
        LabCommand::Exec {
            name,
            host,
            command,
        } => exec(&name, &host, &command),
        LabCommand::Status { name, json } => status(name, json),
        LabCommand::Down { name, all } => {
            let names = if all { crate::lab::list() } else { vec![name] };
            for n in names {
                crate::lab::down(&n)?;
                eprintln!("lab {n} removed");
            }
            Ok(0)
        }
        LabCommand::Run { name, link, test } => run_test(name, link, test),
        LabCommand::DelayLine { name } => crate::lab::run_delay_line(&name).map(|_| 0),
    }
}

pub fn print_state(s: &LabState) {
    println!(
        "lab {}: mechanism {}, MTU {} bytes",
        s.name, s.mechanism, s.config.mtu
    );
    println!("  host a: {} in netns {}", s.host_a.address, s.host_a.netns);
    println!("  host b: {} in netns {}", s.host_b.address, s.host_b.netns);
    println!("  a -> b: {}", s.config.forward.describe(s.config.mtu));
    println!("  b -> a: {}", s.config.back.describe(s.config.mtu));
    for (dir, g) in [
        ("a -> b", &s.tcp_goodput_forward),
        ("b -> a", &s.tcp_goodput_back),
    ] {
        if let Some(g) = g {
            println!(
                "  theoretical TCP goodput {dir}: {:.3} Mbit/s ({:.2}% of the rate: {}-byte segments in {}-byte frames)",
                g.tcp_bits_per_s / 1e6,
                g.tcp_efficiency * 100.0,
                g.mtu - 52,
                g.mtu + 14
            );
        }
    }
}

fn exec(name: &str, host: &str, command: &[String]) -> Result<i32> {
    if host != "a" && host != "b" {
        bail!("host '{host}': a lab has hosts a and b");
    }
    crate::lab::load(name)?;
    let namespace = ns(name, host);
    let (program, rest) = command.split_first().context("no command given")?;
    let program = program.clone();
    let rest = rest.to_vec();
    // The command replaces this process (as `ip netns exec` does) from the thread that
    // entered the namespace, instead of running as its child: a child outlived a `lab exec`
    // that was killed, and every lab test left a `wirebench serve` running in a removed lab.
    let code = crate::lab::in_netns(&namespace, move || {
        use std::os::unix::process::CommandExt;
        let e = std::process::Command::new(&program).args(&rest).exec();
        Err(anyhow::Error::new(e).context(format!("cannot run '{program}'")))
    })?;
    Ok(code)
}

fn status(name: Option<String>, json: bool) -> Result<i32> {
    let names = match name {
        Some(n) => vec![n],
        None => crate::lab::list(),
    };
    let mut all = Vec::new();
    for n in &names {
        let state = crate::lab::load(n)?;
        let stats = crate::lab::delay_line_stats(n);
        let running = state.delay_line_pid.map(crate::lab::alive);
        if json {
            all.push(serde_json::json!({"lab": state, "delay_line_running": running, "delay_line": stats}));
            continue;
        }
        print_state(&state);
        match (running, stats) {
            (Some(true), Some(s)) => {
                println!(
                    "  delay line running (pid {})",
                    state.delay_line_pid.unwrap_or_default()
                );
                for (dir, c) in [("a -> b", &s.forward), ("b -> a", &s.back)] {
                    println!("  {dir}: {}", describe_counters(c));
                }
            }
            (Some(true), None) => println!("  delay line running"),
            (Some(false), _) => {
                println!("  delay line NOT running: the link carries nothing; take the lab down")
            }
            (None, _) => {}
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&all)?);
    } else if names.is_empty() {
        println!("no labs");
    }
    Ok(0)
}

/// One direction's delay-line counters for people: what crossed, what the queue dropped, and
/// how late frames left (whether the host kept up with the emulation).
pub fn describe_counters(c: &crate::lab::delayline::CountersSnapshot) -> String {
    format!(
        "{} frames ({} segments, {} wire bytes) forwarded; queue drops {} frames ({} segments), peak {} bytes; \
         refused by the link {}, over the memory bound {}; released late (>100 us) {}, lateness mean {:.1} us, max {:.1} us",
        c.frames_out,
        c.segments_out,
        c.wire_bytes_out,
        c.dropped_queue_full,
        c.dropped_queue_segments,
        c.queue_peak_bytes,
        c.dropped_send,
        c.dropped_memory,
        c.late_frames,
        c.late_mean_ns() / 1e3,
        c.late_max_ns as f64 / 1e3
    )
}

fn run_test(name: Option<String>, link: LinkArgs, test: Vec<String>) -> Result<i32> {
    let config = link.to_config()?;
    let mut argv = vec!["wirebench".to_string(), "run".to_string()];
    argv.extend(test);
    let cli = match <crate::cmd::Cli as clap::Parser>::try_parse_from(&argv) {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // `lab run -- --help`: run's help.
            let _ = e.print();
            return Ok(0);
        }
        Err(e) => {
            // A usage error, as `wirebench run` gives it: all of it on one line, exit 2.
            eprintln!(
                "wirebench: error: the test after --: {}",
                crate::cmd::usage_error_line(&e, &argv[1..])
            );
            return Ok(crate::error::EXIT_USAGE);
        }
    };
    let crate::cmd::Command::Run(args) = cli.command else {
        bail!("the test after -- must be a pattern with its options");
    };
    let mut request = Request::try_from(&*args)?;
    if request.server.to.is_some() {
        bail!("lab run places the server on host b itself; drop --to");
    }
    let name = name.unwrap_or_else(|| format!("run{}", std::process::id()));
    let lab = Lab::up(&name, config)?;
    let io_timeout = request.timeouts.io;
    let transport = request.local.clone();
    // The client takes its key from --psk-file or WIREBENCH_PSK: the lab's server holds it too.
    let psk = crate::control::auth::Psk::load(request.server.psk_file.as_deref())?
        .map(std::sync::Arc::new);
    let server_addr = crate::plan::lab_server::start(&lab.state, io_timeout, transport, psk)?;
    request.server.to = Some(server_addr.to_string());
    let state = lab.state.clone();
    let code = crate::lab::in_netns(&lab.state.host_a.netns, move || {
        Ok(crate::plan::measure::run(&request, Some(state)))
    })?;
    // What the link did during the test, from the delay line's next report: on stderr, so
    // that --json keeps stdout to one document.
    if lab.state.delay_line_pid.is_some() {
        std::thread::sleep(crate::lab::STATS_EVERY + std::time::Duration::from_millis(50));
        if let Some(s) = crate::lab::delay_line_stats(&lab.state.name) {
            for (dir, c) in [("a -> b", &s.forward), ("b -> a", &s.back)] {
                eprintln!("# lab link {dir}: {}", describe_counters(c));
            }
        }
    }
    drop(lab);
    Ok(code)
}

/// Link options shared by `lab up` and `lab run`.
#[derive(Debug, Clone, Args)]
pub struct LinkArgs {
    /// Start from a profile (its values can be overridden by the options below).
    #[arg(long, value_enum)]
    pub profile: Option<Profile>,
    /// Link rate, DECIMAL bits per second (100mbit, 1G); both directions unless --rate-back.
    #[arg(long)]
    pub rate: Option<String>,
    /// One-way delay added in each direction (10ms, 250us).
    #[arg(long, value_parser = parse_duration)]
    pub delay: Option<Duration>,
    /// Uniform jitter of the delay, +/- (frames may then be reordered).
    #[arg(long, value_parser = parse_duration)]
    pub jitter: Option<Duration>,
    /// Random frame loss in each direction, percent (0.5%).
    #[arg(long)]
    pub loss: Option<String>,
    /// Rate from host b to host a, if different (asymmetric link).
    #[arg(long)]
    pub rate_back: Option<String>,
    /// Delay from host b to host a, if different.
    #[arg(long, value_parser = parse_duration)]
    pub delay_back: Option<Duration>,
    /// Jitter from host b to host a, if different.
    #[arg(long, value_parser = parse_duration)]
    pub jitter_back: Option<Duration>,
    /// Loss from host b to host a, if different.
    #[arg(long)]
    pub loss_back: Option<String>,
    /// The queue in front of the wire, each direction: packets (100p) or bytes (64K, 150000B).
    /// Default: 50 ms at the rate, at least 100 frames of the MTU. Overflow is dropped and
    /// counted (lab status).
    #[arg(long, value_parser = QueueLimit::parse)]
    pub queue: Option<QueueLimit>,
    /// Queue from host b to host a, if different.
    #[arg(long, value_parser = QueueLimit::parse)]
    pub queue_back: Option<QueueLimit>,
    /// MTU of every interface of the link, bytes.
    #[arg(long, default_value_t = 1500)]
    pub mtu: u64,
    /// How delay and jitter are made.
    #[arg(long, value_enum, default_value = "auto")]
    pub mechanism: Mechanism,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    units::parse_duration(s)
}

impl LinkArgs {
    pub fn to_config(&self) -> Result<LinkConfig> {
        LinkSpec {
            profile: self.profile,
            rate: self.rate.clone(),
            delay: self.delay,
            jitter: self.jitter,
            loss: self.loss.clone(),
            queue: None,
            rate_back: self.rate_back.clone(),
            delay_back: self.delay_back,
            jitter_back: self.jitter_back,
            loss_back: self.loss_back.clone(),
            queue_back: None,
            mtu: Some(self.mtu),
            mechanism: Some(self.mechanism),
        }
        .to_config()
        .map(|mut c| {
            // The queues were parsed by clap already.
            if self.queue.is_some() {
                c.forward.queue = self.queue;
                c.back.queue = self.queue;
            }
            if self.queue_back.is_some() {
                c.back.queue = self.queue_back;
            }
            c
        })
    }
}
