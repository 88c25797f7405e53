//! `wirebench lab ...`: bring emulated links up and down, run commands on their hosts, and
//! run a whole test across one.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};

use crate::lab::config::{Framing, LinkConfig, LinkSpec, Mechanism, Profile};
use crate::lab::hosts::{HostsLabState, HostsStats, LinkCounters};
use crate::lab::link::QueueLimit;
use crate::lab::topology::{Shape, Topology};
use crate::lab::{ns, Lab, LabState, Recorded};
use crate::request::Request;
use crate::units;

#[derive(Debug, Args)]
pub struct LabArgs {
    #[command(subcommand)]
    pub command: LabCommand,
}

#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// Create two hosts (network namespaces a and b) joined by an emulated link, or with
    /// --hosts N hosts h0..h{N-1} (namespaces wb-NAME-h0..) in a topology of emulated links.
    Up {
        /// Lab name (a-z, 0-9, '-'; at most 16).
        #[arg(long, default_value = "lab")]
        name: String,
        #[command(flatten)]
        link: LinkArgs,
        #[command(flatten)]
        hosts: HostsArgs,
        /// CPU budget of hosts, HOST=SHARE%,... (b=25%; h1=10%,h2=50% in an N-host lab): every
        /// process the lab runs in that host's namespace (`lab exec`, `lab run`'s server or
        /// client) gets SHARE of one CPU through the kernel's CPU controller (cgroup2 cpu.max,
        /// else cgroup v1 cpu.cfs_quota_us), with the shortest period the kernel allows:
        /// max(1 ms, 1 ms / SHARE) (25%: 1 ms every 4 ms), so that it acts as a slower CPU
        /// rather than as long stalls. Removed at lab down.
        #[arg(long, value_name = "HOST=SHARE%,...")]
        host_cpu: Option<String>,
    },
    /// Run a command on a host of a lab (a or b; h0, h1, ... in an N-host lab).
    Exec {
        /// Lab name, as given to `lab up`.
        #[arg(long, default_value = "lab")]
        name: String,
        /// The host to run on: a or b (`lab run` runs the client on a and the server on b);
        /// h0, h1, ... in an N-host lab.
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
    /// Change a running lab link's one-way delay and jitter: frames the link takes in from
    /// now on are held the new time (frames already held keep theirs); `lab status` shows the
    /// settings now. Only links the delay line carries (not a bridge, not --mechanism netem).
    Set {
        /// Lab name, as given to `lab up`.
        #[arg(long, default_value = "lab")]
        name: String,
        /// The link, in an N-host lab: as `lab status` names it (h3: host 3's link to its
        /// switch; h0-h1 in a chain; trunk). Left out in a two-host lab (it has one).
        #[arg(long)]
        link: Option<String>,
        /// One-way delay, each direction unless --delay-back (10ms, 250us).
        #[arg(long, value_parser = parse_duration)]
        delay: Option<Duration>,
        /// Uniform jitter of the delay, +/-, each direction unless --jitter-back (at most the
        /// delay).
        #[arg(long, value_parser = parse_duration)]
        jitter: Option<Duration>,
        /// Delay of the link's back direction (b -> a; in an N-host lab the second end's).
        #[arg(long, value_parser = parse_duration)]
        delay_back: Option<Duration>,
        /// Jitter of the link's back direction.
        #[arg(long, value_parser = parse_duration)]
        jitter_back: Option<Duration>,
    },
    /// Remove a lab (or all of yours), ending the processes still running in it.
    Down {
        /// Lab name, as given to `lab up`.
        #[arg(long, default_value = "lab", conflicts_with = "all")]
        name: String,
        /// Remove every lab made in this session (by this user); others' are listed, not
        /// touched.
        #[arg(long)]
        all: bool,
        /// With --all: every lab on the machine, whoever made it.
        #[arg(long, requires = "all")]
        everyone: bool,
    },
    /// Set up a link, run the server on host b and the client on host a, print the result,
    /// and remove everything: `wirebench lab run --rate 100mbit -- stream -d 5s`.
    Run {
        /// Lab name (default: one made from the process id).
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        link: LinkArgs,
        /// CPU budget of hosts, HOST=SHARE%,... (a=50%,b=25%): every
        /// process the lab runs in that host's namespace (`lab exec`, `lab run`'s server or
        /// client) gets SHARE of one CPU through the kernel's CPU controller (cgroup2 cpu.max,
        /// else cgroup v1 cpu.cfs_quota_us), with the shortest period the kernel allows:
        /// max(1 ms, 1 ms / SHARE) (25%: 1 ms every 4 ms), so that it acts as a slower CPU
        /// rather than as long stalls. Removed at lab down.
        #[arg(long, value_name = "HOST=SHARE%,...")]
        host_cpu: Option<String>,
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
        LabCommand::Up {
            name,
            link,
            hosts,
            host_cpu,
        } if hosts.selects_n_hosts() => {
            let shape = hosts.to_shape(&link)?;
            let budgets = parse_host_cpu(host_cpu.as_deref())?;
            let state = crate::lab::hosts::HostsLab::up_with(&name, &shape, &budgets)?.keep();
            print_hosts_state(&state);
            println!(
                "reach the hosts with: wirebench lab exec --name {name} h0 -- COMMAND (h0..h{}); remove with: wirebench lab down --name {name}",
                state.hosts.len() - 1
            );
            Ok(0)
        }
        LabCommand::Up {
            name,
            link,
            host_cpu,
            ..
        } => {
            let budgets = parse_host_cpu(host_cpu.as_deref())?;
            let state = Lab::up_with(&name, link.to_config()?, &budgets)?.keep();
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
        LabCommand::Set {
            name,
            link,
            delay,
            jitter,
            delay_back,
            jitter_back,
        } => {
            let change = crate::lab::set::Change {
                delay,
                jitter,
                delay_back,
                jitter_back,
            };
            print_set(
                &crate::lab::set::set(&name, link.as_deref(), &change)?,
                link.as_deref(),
            );
            Ok(0)
        }
        LabCommand::Down {
            name,
            all,
            everyone,
        } => down(name, all, everyone),
        LabCommand::Run {
            name,
            link,
            host_cpu,
            test,
        } => run_test(name, link, host_cpu, test),
        LabCommand::DelayLine { name } => crate::lab::run_delay_line(&name).map(|_| 0),
    }
}

/// `--host-cpu`'s budgets; none without it.
fn parse_host_cpu(spec: Option<&str>) -> Result<Vec<(String, f64)>> {
    spec.map_or(Ok(Vec::new()), crate::lab::cpu::parse)
}

pub fn print_state(s: &LabState) {
    println!(
        "lab {}: mechanism {}, MTU {} bytes, framing {}",
        s.name,
        s.mechanism,
        s.config.mtu,
        s.config.framing.describe()
    );
    println!("  host a: {} in netns {}", s.host_a.address, s.host_a.netns);
    println!("  host b: {} in netns {}", s.host_b.address, s.host_b.netns);
    println!("  a -> b: {}", s.config.forward.describe(s.config.mtu));
    println!("  b -> a: {}", s.config.back.describe(s.config.mtu));
    for b in &s.host_cpu {
        println!("  {}", crate::lab::cpu::describe(b));
    }
    for (dir, g) in [
        ("a -> b", &s.tcp_goodput_forward),
        ("b -> a", &s.tcp_goodput_back),
    ] {
        if let Some(g) = g {
            println!(
                "  theoretical TCP goodput {dir}: {} ({:.2}% of the rate: {}-byte segments in {} wire bytes{})",
                crate::units::format_mbit_s(g.tcp_bits_per_s),
                g.tcp_efficiency * 100.0,
                g.mtu - 52,
                s.config.framing.wire_bytes(g.mtu),
                match s.config.framing.cells(g.mtu) {
                    0 => String::new(),
                    c => format!(", {c} cells"),
                }
            );
        }
    }
}

/// What `lab set` left the link at.
fn print_set(recorded: &Recorded, link: Option<&str>) {
    match recorded {
        Recorded::Pair(s) => {
            println!("lab {}: link set", s.name);
            println!("  a -> b: {}", s.config.forward.describe(s.config.mtu));
            println!("  b -> a: {}", s.config.back.describe(s.config.mtu));
        }
        Recorded::Hosts(s) => {
            for l in s.links.iter().filter(|l| Some(l.name.as_str()) == link) {
                let [x, y] = &l.ends;
                println!("lab {}: link {} set", s.name, l.name);
                println!("  {x} -> {y}: {}", l.config.forward.describe(l.config.mtu));
                println!("  {y} -> {x}: {}", l.config.back.describe(l.config.mtu));
            }
        }
    }
}

fn exec(name: &str, host: &str, command: &[String]) -> Result<i32> {
    let recorded = crate::lab::load_any(name)?;
    let budget = recorded.host_cpu(host).cloned();
    let namespace = match recorded {
        Recorded::Pair(_) if host == "a" || host == "b" => ns(name, host),
        Recorded::Pair(_) => bail!("host '{host}': a lab has hosts a and b"),
        Recorded::Hosts(s) => match s.host(host) {
            Some(h) => h.netns.clone(),
            None => bail!(
                "host '{host}': lab {name} has hosts h0 to h{}",
                s.hosts.len() - 1
            ),
        },
    };
    let (program, rest) = command.split_first().context("no command given")?;
    let program = program.clone();
    let rest = rest.to_vec();
    // The command replaces this process (as `ip netns exec` does) from the thread that
    // entered the namespace, instead of running as its child: a child outlived a `lab exec`
    // that was killed, and every lab test left a `wirebench serve` running in a removed lab.
    let code = crate::lab::in_netns(&namespace, move || {
        use std::os::unix::process::CommandExt;
        // The host's CPU budget holds the command and every process it starts.
        if let Some(b) = &budget {
            crate::lab::cpu::join(b, std::process::id())?;
        }
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
        let state = match crate::lab::load_any(n)? {
            Recorded::Pair(s) => *s,
            Recorded::Hosts(s) => {
                let running = s.delay_line_pid.map(crate::lab::alive);
                let stats = if running == Some(true) {
                    crate::lab::hosts::stats_now(n)
                } else {
                    None
                };
                if json {
                    all.push(hosts_status_json(&s, running, stats.as_ref()));
                } else {
                    print_hosts_status(&s, running, stats.as_ref());
                }
                continue;
            }
        };
        let stats = crate::lab::delay_line_stats(n);
        let running = state.delay_line_pid.map(crate::lab::alive);
        if json {
            all.push(
                serde_json::json!({"lab": state, "delay_line_running": running, "delay_line": stats,
                "owner": crate::lab::owner::of(n)}),
            );
            continue;
        }
        print_state(&state);
        print_owner(n);
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
        "{} frames ({} segments, {} wire bytes{}) forwarded; queue drops {} frames ({} segments), peak {} bytes; \
         refused by the link {}, over the memory bound {}; released late (>100 us) {}, lateness mean {}, max {}",
        c.frames_out,
        c.segments_out,
        c.wire_bytes_out,
        match c.cells_out {
            0 => String::new(),
            n => format!(", {n} cells"),
        },
        c.dropped_queue_full,
        c.dropped_queue_segments,
        c.queue_peak_bytes,
        c.dropped_send,
        c.dropped_memory,
        c.late_frames,
        crate::units::format_us(c.late_mean_ns()),
        crate::units::format_us(c.late_max_ns as f64)
    )
}

fn down(name: String, all: bool, everyone: bool) -> Result<i32> {
    let (mine, others): (Vec<String>, Vec<String>) = if all {
        crate::lab::list()
            .into_iter()
            .partition(|n| everyone || crate::lab::owner::of(n).is_some_and(|o| o.is_callers()))
    } else {
        (vec![name], Vec::new())
    };
    for n in &mine {
        let ended = crate::lab::down(n)?;
        match ended {
            0 => eprintln!("lab {n} removed"),
            1 => eprintln!("lab {n} removed (ended 1 process still running in it)"),
            k => eprintln!("lab {n} removed (ended {k} processes still running in it)"),
        }
    }
    if !others.is_empty() {
        eprintln!(
            "left {} lab(s) made in other sessions or by other users:",
            others.len()
        );
        for n in &others {
            let who = crate::lab::owner::of(n)
                .map(|o| o.describe())
                .unwrap_or_else(|| "maker not recorded".into());
            eprintln!("  {n}: {who}; remove with: wirebench lab down --name {n}");
        }
        eprintln!("  (or all of them: wirebench lab down --all --everyone)");
    }
    if all && mine.is_empty() && others.is_empty() {
        eprintln!("no labs");
    }
    Ok(0)
}

pub fn print_hosts_state(s: &HostsLabState) {
    println!(
        "lab {}: {} hosts, {} topology{}, MTU {} bytes",
        s.name,
        s.hosts.len(),
        s.topology
            .to_possible_value()
            .map(|v| v.get_name().to_owned())
            .unwrap_or_default(),
        s.split
            .map(|k| format!(
                " (h0..h{} on switch1, h{k}..h{} on switch2)",
                k - 1,
                s.hosts.len() - 1
            ))
            .unwrap_or_default(),
        s.mtu
    );
    for h in &s.hosts {
        println!("  host {}: {} in netns {}", h.name, h.address, h.netns);
    }
    for b in &s.host_cpu {
        println!("  {}", crate::lab::cpu::describe(b));
    }
    for l in &s.links {
        let [x, y] = &l.ends;
        println!(
            "  link {} ({}, framing {}):",
            l.name,
            l.mechanism,
            l.config.framing.name()
        );
        println!(
            "    {x} -> {y}: {}",
            l.config.forward.describe(l.config.mtu)
        );
        println!("    {y} -> {x}: {}", l.config.back.describe(l.config.mtu));
    }
}

fn print_owner(name: &str) {
    if let Some(o) = crate::lab::owner::of(name) {
        println!("  {}", o.describe());
    }
}

fn print_hosts_status(s: &HostsLabState, running: Option<bool>, stats: Option<&HostsStats>) {
    print_hosts_state(s);
    print_owner(&s.name);
    match running {
        Some(true) => println!(
            "  delay line running (pid {})",
            s.delay_line_pid.unwrap_or_default()
        ),
        Some(false) => {
            println!("  delay line NOT running: the links carry nothing; take the lab down")
        }
        None => {}
    }
    for (i, l) in s.links.iter().enumerate() {
        let [x, y] = &l.ends;
        let c = stats.and_then(|st| st.links.get(i).copied().flatten());
        for (dir, counters, loss) in [
            (format!("{x} -> {y}"), c.map(|c| c.forward), &l.loss_forward),
            (format!("{y} -> {x}"), c.map(|c| c.back), &l.loss_back),
        ] {
            let random = loss
                .as_ref()
                .and_then(crate::lab::hosts::random_drops)
                .map(|(udp, other)| format!("; random drops {} frames", udp + other))
                .unwrap_or_default();
            match counters {
                Some(c) => println!(
                    "  {dir} (link {}): {}{random}",
                    l.name,
                    describe_counters(&c)
                ),
                None if !random.is_empty() => println!("  {dir} (link {}): {random}", l.name),
                None => {}
            }
        }
    }
}

fn hosts_status_json(
    s: &HostsLabState,
    running: Option<bool>,
    stats: Option<&HostsStats>,
) -> serde_json::Value {
    let links: Vec<serde_json::Value> = s
        .links
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let c: Option<LinkCounters> = stats.and_then(|st| st.links.get(i).copied().flatten());
            let random = |p: &Option<crate::lab::hosts::LossPoint>| {
                p.as_ref()
                    .and_then(crate::lab::hosts::random_drops)
                    .map(|(udp, other)| serde_json::json!({"udp": udp, "other": other}))
            };
            serde_json::json!({
                "name": l.name,
                "ends": l.ends,
                "mechanism": l.mechanism,
                "config": l.config,
                "forward": c.map(|c| c.forward),
                "back": c.map(|c| c.back),
                "random_drops_forward": random(&l.loss_forward),
                "random_drops_back": random(&l.loss_back),
            })
        })
        .collect();
    serde_json::json!({"lab": s, "delay_line_running": running, "links": links,
        "owner": crate::lab::owner::of(&s.name)})
}

fn run_test(
    name: Option<String>,
    link: LinkArgs,
    host_cpu: Option<String>,
    test: Vec<String>,
) -> Result<i32> {
    let config = link.to_config()?;
    let budgets = parse_host_cpu(host_cpu.as_deref())?;
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
    let lab = Lab::up_with(&name, config, &budgets)?;
    let io_timeout = request.timeouts.io;
    let transport = request.local.clone();
    // The client takes its key from --psk-file or WIREBENCH_PSK: the lab's server holds it too.
    let psk = crate::control::auth::Psk::load(request.server.psk_file.as_deref())?
        .map(std::sync::Arc::new);
    let server_addr = crate::plan::lab_server::start(&lab.state, io_timeout, transport, psk)?;
    request.server.to = Some(server_addr.to_string());
    let state = lab.state.clone();
    let client_budget = state.host_cpu.iter().find(|b| b.host == "a").cloned();
    let code = crate::lab::in_netns(&lab.state.host_a.netns, move || {
        // The client's threads in host a's budget (the server's are placed as it starts).
        if let Some(b) = &client_budget {
            crate::lab::cpu::join_this_thread(b)?;
        }
        Ok(crate::glue::measure::run(&request, Some(state)))
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
    /// Link rate, DECIMAL bits per second (100mbit, 1G), or a network's name: oc3 (149.76M,
    /// what SONET's 155.52M leaves for ATM cells), oc12 (599.04M), taxi (100M), fddi (100M),
    /// 10base-t (10M), 100base-tx (100M), 1000base-t (1000M); both directions unless
    /// --rate-back.
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
    /// What the wire charges each packet (each segment of a GSO frame) [default: frame]:
    /// frame (the kernel's frame: 14-byte Ethernet header + IP packet), ethernet (+ FCS 4,
    /// min 64, + preamble 8 + gap 12), atm-aal5 (LLC/SNAP 8 + IP + trailer 8 in 48-byte
    /// payloads of 53-byte cells), atm-aal34 (CPCS 4 + IP + 4, 44 bytes per 53-byte cell),
    /// fddi (IP + 36; give --mtu 4352 for FDDI's MTU). The goodput line and the physics guard
    /// count the same bytes.
    #[arg(long, value_enum, hide_possible_values = true)]
    pub framing: Option<Framing>,
}

/// `lab up`'s options for an N-host lab.
#[derive(Debug, Clone, Args)]
pub struct HostsArgs {
    /// Hosts h0..h{N-1} (2 to 8; more than 2, or a --topology, makes an N-host lab).
    #[arg(long)]
    pub hosts: Option<usize>,
    /// How the hosts are joined [default: star]: star (every host's own link to one switch),
    /// chain (h0 - h1 - ..., the hosts between route), two-switches (--split, --trunk).
    #[arg(long, value_enum)]
    pub topology: Option<Topology>,
    /// two-switches: hosts h0..h{K-1} on the first switch, the rest on the second.
    #[arg(long)]
    pub split: Option<usize>,
    /// two-switches: the link between the switches, as KEY=VALUE,... over the link options
    /// above (rate=100mbit,delay=20ms).
    #[arg(long)]
    pub trunk: Option<String>,
    /// One link's own settings, I=KEY=VALUE,... over the link options above
    /// (3=rate=10mbit,delay=5ms; keys rate, delay, jitter, loss, queue, profile and their
    /// -back forms). Star and two-switches: host I's link to its switch; chain: the link
    /// from hI to h(I+1). Repeatable.
    #[arg(long = "host-link")]
    pub host_link: Vec<String>,
}

impl HostsArgs {
    pub fn selects_n_hosts(&self) -> bool {
        self.hosts.is_some_and(|n| n != 2)
            || self.topology.is_some()
            || self.split.is_some()
            || self.trunk.is_some()
            || !self.host_link.is_empty()
    }

    pub fn to_shape(&self, link: &LinkArgs) -> Result<Shape> {
        let Some(hosts) = self.hosts else {
            bail!("--topology, --split, --trunk and --host-link need --hosts N");
        };
        let topology = self.topology.unwrap_or(Topology::Star);
        let base = link.to_spec();
        let count = Shape::link_count(topology, hosts);
        let mut specs = vec![base.clone(); count];
        for h in &self.host_link {
            let (index, spec) = h
                .split_once('=')
                .with_context(|| format!("--host-link '{h}': give I=KEY=VALUE,..."))?;
            let i: usize = index
                .trim()
                .parse()
                .ok()
                .filter(|&i| i < count)
                .with_context(|| {
                    format!(
                        "--host-link '{h}': the link number is 0 to {}",
                        count.saturating_sub(1)
                    )
                })?;
            specs[i] = parse_link_spec(spec)
                .with_context(|| format!("--host-link '{h}'"))?
                .over(&base);
        }
        let links = specs
            .iter()
            .map(LinkSpec::to_config)
            .collect::<Result<Vec<_>>>()?;
        let trunk = self
            .trunk
            .as_deref()
            .map(|t| {
                parse_link_spec(t)
                    .with_context(|| format!("--trunk '{t}'"))?
                    .over(&base)
                    .to_config()
            })
            .transpose()?;
        Ok(Shape {
            hosts,
            topology,
            split: self.split,
            links,
            trunk,
        })
    }
}

/// `rate=10mbit,delay=5ms,...` as a [`LinkSpec`], checked as a study's `[link]` table is
/// (unknown keys are refused). The MTU is the lab's, not a link's.
pub fn parse_link_spec(text: &str) -> Result<LinkSpec> {
    let mut map = serde_json::Map::new();
    for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (key, value) = item
            .split_once('=')
            .with_context(|| format!("'{item}': give KEY=VALUE"))?;
        let key = key.trim().replace('-', "_");
        if key == "mtu" || key == "mechanism" {
            bail!("'{item}': the {key} is the lab's (--{key}), not one link's");
        }
        map.insert(key, serde_json::Value::String(value.trim().to_owned()));
    }
    serde_json::from_value(serde_json::Value::Object(map)).map_err(|e| anyhow::anyhow!("{e}"))
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    units::parse_duration(s)
}

impl LinkArgs {
    /// The options as a [`LinkSpec`] (queues back as text), the base of an N-host lab's links.
    pub fn to_spec(&self) -> LinkSpec {
        let text = |q: QueueLimit| match q {
            QueueLimit::Packets(n) => format!("{n}p"),
            QueueLimit::Bytes(b) => format!("{b}B"),
        };
        LinkSpec {
            profile: self.profile,
            rate: self.rate.clone(),
            delay: self.delay,
            jitter: self.jitter,
            loss: self.loss.clone(),
            queue: self.queue.map(text),
            rate_back: self.rate_back.clone(),
            delay_back: self.delay_back,
            jitter_back: self.jitter_back,
            loss_back: self.loss_back.clone(),
            queue_back: self.queue_back.map(text),
            mtu: Some(self.mtu),
            mechanism: Some(self.mechanism),
            framing: self.framing,
            host_cpu: None,
            route: None,
        }
    }

    pub fn to_config(&self) -> Result<LinkConfig> {
        // The queues go back to text and are parsed again: the text is QueueLimit's own form.
        self.to_spec().to_config()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Up {
        #[command(flatten)]
        link: LinkArgs,
        #[command(flatten)]
        hosts: HostsArgs,
    }

    fn shape(args: &[&str]) -> Result<Shape> {
        let up = Up::try_parse_from(std::iter::once("up").chain(args.iter().copied()))?;
        up.hosts.to_shape(&up.link)
    }

    #[test]
    fn a_host_link_overrides_the_lab_link_options_field_by_field() {
        let s = shape(&[
            "--hosts",
            "4",
            "--delay",
            "1ms",
            "--queue",
            "30p",
            "--host-link",
            "3=rate=10mbit,delay=5ms",
        ])
        .unwrap();
        assert_eq!(s.topology, Topology::Star);
        assert_eq!(s.links.len(), 4);
        assert_eq!(s.links[0].forward.delay, Duration::from_millis(1));
        assert_eq!(s.links[0].forward.rate_bits_per_s, None);
        assert_eq!(s.links[0].back.queue, Some(QueueLimit::Packets(30)));
        let h3 = &s.links[3];
        assert_eq!(h3.forward.rate_bits_per_s, Some(10e6));
        assert_eq!(h3.back.delay, Duration::from_millis(5));
        // What the override leaves out is the lab's.
        assert_eq!(h3.back.queue, Some(QueueLimit::Packets(30)));
    }

    #[test]
    fn the_two_host_link_keeps_its_queues_in_both_directions() {
        let parse = |args: &[&str]| {
            Up::try_parse_from(std::iter::once("up").chain(args.iter().copied()))
                .unwrap()
                .link
                .to_config()
                .unwrap()
        };
        let c = parse(&["--queue", "30p"]);
        assert_eq!(c.forward.queue, Some(QueueLimit::Packets(30)));
        assert_eq!(c.back.queue, Some(QueueLimit::Packets(30)));
        let c = parse(&["--queue", "30p", "--queue-back", "150000B"]);
        assert_eq!(c.forward.queue, Some(QueueLimit::Packets(30)));
        assert_eq!(c.back.queue, Some(QueueLimit::Bytes(150_000)));
        let c = parse(&["--queue-back", "64K"]);
        assert_eq!(c.forward.queue, None);
        assert_eq!(c.back.queue, Some(QueueLimit::Bytes(65_536)));
    }

    #[test]
    fn a_trunk_and_chain_links_are_parsed_like_any_link() {
        let s = shape(&[
            "--hosts",
            "6",
            "--topology",
            "two-switches",
            "--split",
            "3",
            "--rate",
            "1G",
            "--queue",
            "150000B",
            "--trunk",
            "rate=100mbit,delay=20ms,loss-back=1%",
        ])
        .unwrap();
        let t = s.trunk.unwrap();
        assert_eq!(t.forward.rate_bits_per_s, Some(100e6));
        assert_eq!(t.back.loss, 0.01);
        assert_eq!(t.forward.loss, 0.0);
        assert_eq!(t.forward.queue, Some(QueueLimit::Bytes(150_000)));
        let s = shape(&[
            "--hosts",
            "3",
            "--topology",
            "chain",
            "--host-link",
            "1=delay=3ms",
        ])
        .unwrap();
        assert_eq!(s.links.len(), 2);
        assert_eq!(s.links[1].forward.delay, Duration::from_millis(3));
    }

    #[test]
    fn two_hosts_without_a_topology_are_the_two_host_lab() {
        let up = Up::try_parse_from(["up", "--hosts", "2"]).unwrap();
        assert!(!up.hosts.selects_n_hosts());
        let up = Up::try_parse_from(["up", "--hosts", "2", "--topology", "star"]).unwrap();
        assert!(up.hosts.selects_n_hosts());
        for bad in [
            "rate",
            "mtu=9000",
            "colour=red",
            "rate=fast",
            "queue=100",
            "delay=soon",
        ] {
            let r = parse_link_spec(bad).and_then(|s| s.to_config());
            assert!(r.is_err(), "{bad}");
        }
    }
}
