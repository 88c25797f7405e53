//! The lab: emulated networks on one machine. Two hosts (network namespaces `a` and `b`)
//! joined by a link through a middle namespace `m`: wirebench's delay line there is the link
//! (queue, serialisation at the rate, delay and jitter; see `link.rs`), nftables drops frames at
//! random on the receiving host. With nothing to emulate, a bridge. Needs root.
//!
//! ```text
//!  ns wb-NAME-a            ns wb-NAME-m                          ns wb-NAME-b
//!  wb0 10.77.0.1 ==== wba [delay line: queue, wire, delay] wbb ==== wb0 10.77.0.2
//! ```
//!
//! N-host labs (hosts h0.. h{N-1} in a star, a chain or on two switches) are in `hosts.rs`.

pub mod config;
pub mod cpu;
pub mod delayline;
pub mod framing;
pub mod goodput;
mod host;
pub mod hosts;
pub mod link;
pub mod owner;
pub mod set;
mod shaping;
pub mod topology;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use config::{LinkConfig, Mechanism};
use delayline::{Counters, CountersSnapshot};

pub use crate::model::lab::{HostInfo, LabState};
pub use host::in_netns;

/// Addresses of the two hosts: private addresses that exist only inside the lab's namespaces.
pub const ADDR_A: &str = "10.77.0.1";
pub const ADDR_B: &str = "10.77.0.2";
const PREFIX: &str = "/24";

/// How often the delay line writes its counters.
pub const STATS_EVERY: Duration = Duration::from_millis(200);

/// The highest link rate at which the delay line was seen to stay faithful on the small
/// two-CPU virtual machine it is tested on (bench/RESULTS.md, "The lab's faithful rate"): TCP in
/// GSO frames of up to 64 KiB reached 99.6% of the goodput at 1 and 5 Gbit/s. Where every frame
/// holds one segment (random loss turns GSO off; datagrams sent one per call) each frame costs the
/// delay line two system calls, and 1 Gbit/s (89 000 frames/s) is the most it was seen to carry.
pub const FAITHFUL_RATE_GSO: f64 = 5e9;
pub const FAITHFUL_RATE_PER_FRAME: f64 = 1e9;

/// A warning when a link asks for more than the delay line was seen to emulate faithfully.
pub fn faithfulness_warning(config: &LinkConfig) -> Option<String> {
    let lossy = config.forward.loss > 0.0 || config.back.loss > 0.0;
    let limit = if lossy {
        FAITHFUL_RATE_PER_FRAME
    } else {
        FAITHFUL_RATE_GSO
    };
    let fastest = [config.forward, config.back]
        .iter()
        .filter_map(|d| d.rate_bits_per_s)
        .fold(0.0, f64::max);
    (fastest > limit).then(|| {
        format!(
            "warning: the delay line was seen to emulate links faithfully up to {} Gbit/s{}; at {} Gbit/s frames may leave late and the link carry less than its rate (lab status shows late frames)",
            limit / 1e9,
            if lossy { " with loss (one segment per frame)" } else { "" },
            fastest / 1e9
        )
    })
}

/// Where running labs are recorded.
fn state_dir() -> PathBuf {
    PathBuf::from("/run/wirebench/lab")
}

fn state_path(name: &str) -> PathBuf {
    state_dir().join(format!("{name}.json"))
}

fn stats_path(name: &str) -> PathBuf {
    state_dir().join(format!("{name}.stats.json"))
}

/// Where a reader asks the delay line to write its counters now: a FIFO its reporting thread
/// waits on between reports, so that a request wakes it at once and no request costs the
/// delay line nothing (the forwarding threads never look).
fn stats_request_path(name: &str) -> PathBuf {
    state_dir().join(format!("{name}.stats-request"))
}

/// The request FIFO, made and opened by the delay line: read and write, so that it never
/// reads an end of file when a reader has written and gone, and the open does not wait for one.
fn open_request_fifo(path: &std::path::Path) -> Result<std::fs::File> {
    let _ = std::fs::remove_file(path);
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600))
        .with_context(|| format!("making {}", path.display()))?;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))
}

/// The last request number in what was read from the FIFO ("N\n" per request).
fn last_request(bytes: &[u8]) -> Option<u64> {
    String::from_utf8_lossy(bytes)
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .next_back()
}

pub fn ns(name: &str, host: &str) -> String {
    format!("wb-{name}-{host}")
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelayLineStats {
    pub forward: CountersSnapshot,
    pub back: CountersSnapshot,
    /// The last request (see [`delay_line_stats_now`]) these counters answer; 0 until one
    /// came.
    #[serde(default)]
    pub answered: u64,
}

fn check_name(name: &str) -> Result<()> {
    if name.is_empty()
        || name.len() > 16
        || !name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        bail!("lab name '{name}': use 1 to 16 characters a-z, 0-9 and '-'");
    }
    Ok(())
}

fn check_environment() -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("wirebench lab needs root (CAP_NET_ADMIN) to create network namespaces");
    }
    if !std::path::Path::new("/proc/self/ns/net").exists() {
        bail!("this kernel has no network namespaces (CONFIG_NET_NS)");
    }
    Ok(())
}

/// A running lab; taking it down on drop means a failure anywhere still cleans up.
pub struct Lab {
    pub state: LabState,
    keep: bool,
}

impl Drop for Lab {
    fn drop(&mut self) {
        if !self.keep {
            let _ = down(&self.state.name);
        }
    }
}

impl Lab {
    /// Leaves the lab running after this value is gone (for `lab up`).
    pub fn keep(mut self) -> LabState {
        self.keep = true;
        self.state.clone()
    }

    pub fn up(name: &str, config: LinkConfig) -> Result<Lab> {
        Lab::up_with(name, config, &[])
    }

    /// [`Lab::up`] with CPU budgets for hosts a and b (see `cpu.rs`).
    pub fn up_with(name: &str, config: LinkConfig, host_cpu: &[(String, f64)]) -> Result<Lab> {
        check_name(name)?;
        if let Some((h, _)) = host_cpu.iter().find(|(h, _)| h != "a" && h != "b") {
            bail!("--host-cpu: host '{h}': a lab has hosts a and b");
        }
        check_environment()?;
        check_free(name)?;
        let controller = if host_cpu.is_empty() {
            None
        } else {
            Some(cpu::Controller::find()?)
        };
        std::fs::create_dir_all(state_dir()).context("creating /run/wirebench/lab")?;
        if let Some(w) = faithfulness_warning(&config) {
            eprintln!("wirebench lab: {w}");
        }
        let state = LabState {
            name: name.to_owned(),
            config: config.clone(),
            mechanism: "bridge".into(),
            delay_line_pid: None,
            created_at: crate::env::now_rfc3339(),
            host_a: HostInfo {
                netns: ns(name, "a"),
                address: ADDR_A.into(),
            },
            host_b: HostInfo {
                netns: ns(name, "b"),
                address: ADDR_B.into(),
            },
            tcp_goodput_forward: config
                .forward
                .rate_bits_per_s
                .map(|r| goodput::tcp(r, config.mtu, config.framing)),
            tcp_goodput_back: config
                .back
                .rate_bits_per_s
                .map(|r| goodput::tcp(r, config.mtu, config.framing)),
            host_cpu: Vec::new(),
        };
        // Record first, so that `down` (run by the guard on failure) finds every part built.
        save(&state)?;
        let mut lab = Lab { state, keep: false };
        owner::record(name)?;
        build(&mut lab.state)?;
        if let Some(c) = &controller {
            for (h, share) in host_cpu {
                let b = cpu::create(c, name, h, *share)?;
                lab.state.host_cpu.push(b);
            }
        }
        save(&lab.state)?;
        Ok(lab)
    }
}

impl Recorded {
    /// The CPU budget of host `host`, if it has one.
    pub fn host_cpu(&self, host: &str) -> Option<&cpu::HostCpu> {
        let all = match self {
            Recorded::Pair(s) => &s.host_cpu,
            Recorded::Hosts(s) => &s.host_cpu,
        };
        all.iter().find(|b| b.host == host)
    }
}

/// The suffixes of every namespace a lab of either kind may have.
fn namespace_suffixes() -> Vec<String> {
    let mut all: Vec<String> = ["a", "b", "m", topology::NET]
        .iter()
        .map(|s| s.to_string())
        .collect();
    all.extend((0..topology::MAX_HOSTS).map(topology::host_name));
    all
}

/// The namespaces of lab `name` that exist now (of a half-built lab too).
fn existing_namespaces(name: &str) -> Vec<String> {
    namespace_suffixes()
        .iter()
        .map(|s| ns(name, s))
        .filter(|n| host::netns_path(n).exists())
        .collect()
}

fn check_free(name: &str) -> Result<()> {
    if state_path(name).exists() || !existing_namespaces(name).is_empty() {
        bail!("lab '{name}' already exists (wirebench lab down --name {name})");
    }
    Ok(())
}

/// A recorded lab of either kind.
#[derive(Debug, Clone)]
pub enum Recorded {
    /// Hosts a and b, one link (boxed: its state is the larger).
    Pair(Box<LabState>),
    Hosts(hosts::HostsLabState),
}

impl Recorded {
    pub fn delay_line_pid(&self) -> Option<u32> {
        match self {
            Recorded::Pair(s) => s.delay_line_pid,
            Recorded::Hosts(s) => s.delay_line_pid,
        }
    }
}

/// A lab's state, whichever kind it is (an N-host lab's lists its hosts).
pub fn load_any(name: &str) -> Result<Recorded> {
    let text = std::fs::read_to_string(state_path(name))
        .with_context(|| format!("no lab named '{name}' (wirebench lab status lists them)"))?;
    let damaged = || format!("lab '{name}' has a damaged state file");
    let v: serde_json::Value = serde_json::from_str(&text).with_context(damaged)?;
    if v.get("hosts").is_some() {
        serde_json::from_value(v)
            .map(Recorded::Hosts)
            .with_context(damaged)
    } else {
        serde_json::from_value(v)
            .map(|s| Recorded::Pair(Box::new(s)))
            .with_context(damaged)
    }
}

fn save(state: &LabState) -> Result<()> {
    write_state(&state.name, &serde_json::to_string_pretty(state)?)
}

/// Writes a lab's state file aside and renames it into place: `lab set` rewrites the file of
/// a running lab, whose readers (the delay line, `lab status`, a run's physics guard) must
/// never read half of it.
fn write_state(name: &str, json: &str) -> Result<()> {
    write_aside(&state_path(name), json.as_bytes()).context("writing the lab state")
}

/// The number of this process's next side file (see [`write_aside`]).
static NEXT_SIDE_FILE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Writes `bytes` to `path` by way of a new file beside it, renamed into place: readers see
/// the old file or the new one, never half of one. The side file's name is this process's
/// and this call's alone (two writers once shared one, and one's rename took the other's
/// file), and it is created new (O_EXCL), so a link planted at its name is never followed.
fn write_aside(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let n = NEXT_SIDE_FILE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let file = path
        .file_name()
        .map_or_else(|| "state".into(), |f| f.to_string_lossy().into_owned());
    let tmp = path.with_file_name(format!(".{file}.{}.{n}.new", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut f| f.write_all(bytes))
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Side files of lab `name` left by a writer that died between writing and renaming.
fn remove_side_files(name: &str) {
    let prefixes = [format!(".{name}.json."), format!(".{name}.stats.json.")];
    for e in std::fs::read_dir(state_dir())
        .into_iter()
        .flatten()
        .flatten()
    {
        let f = e.file_name().to_string_lossy().into_owned();
        if f.ends_with(".new") && prefixes.iter().any(|p| f.starts_with(p.as_str())) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Holds lab `name`'s state for one read-change-write (`lab set`): another `lab set` on the
/// same lab waits for it, so that neither loses the other's change. Released when dropped.
fn lock_state(name: &str) -> Result<nix::fcntl::Flock<std::fs::File>> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = state_dir().join(format!("{name}.lock"));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&path)
        .with_context(|| format!("lab {name}: opening its lock {}", path.display()))?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| anyhow::anyhow!("lab {name}: locking its state: {e}"))
}

/// A two-host lab's state (an N-host lab is refused: it has no hosts a and b).
pub fn load(name: &str) -> Result<LabState> {
    match load_any(name)? {
        Recorded::Pair(s) => Ok(*s),
        Recorded::Hosts(s) => bail!(
            "lab '{name}' has {} hosts (h0..h{}); this needs a two-host lab (hosts a and b)",
            s.hosts.len(),
            s.hosts.len() - 1
        ),
    }
}

/// Names of every recorded lab.
pub fn list() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(state_dir())
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let f = e.file_name().to_string_lossy().into_owned();
            f.strip_suffix(".json")
                .filter(|n| !n.ends_with(".stats"))
                .map(str::to_owned)
        })
        .collect();
    names.sort();
    names
}

fn build(state: &mut LabState) -> Result<()> {
    let name = state.name.clone();
    let cfg = state.config.clone();
    let (a, b, m) = (ns(&name, "a"), ns(&name, "b"), ns(&name, "m"));
    for n in [&a, &b, &m] {
        host::sh("ip", &["netns", "add", n])?;
        host::sh("ip", &["-n", n, "link", "set", "lo", "up"])?;
    }
    host::sh(
        "ip",
        &[
            "link", "add", "wba", "netns", &m, "type", "veth", "peer", "name", "wb0", "netns", &a,
        ],
    )?;
    host::sh(
        "ip",
        &[
            "link", "add", "wbb", "netns", &m, "type", "veth", "peer", "name", "wb0", "netns", &b,
        ],
    )?;
    let mtu = cfg.mtu.to_string();
    for (n, dev) in [(&a, "wb0"), (&b, "wb0"), (&m, "wba"), (&m, "wbb")] {
        host::sh("ip", &["-n", n, "link", "set", "dev", dev, "mtu", &mtu])?;
    }
    host::sh(
        "ip",
        &[
            "-n",
            &a,
            "addr",
            "add",
            &format!("{ADDR_A}{PREFIX}"),
            "dev",
            "wb0",
        ],
    )?;
    host::sh(
        "ip",
        &[
            "-n",
            &b,
            "addr",
            "add",
            &format!("{ADDR_B}{PREFIX}"),
            "dev",
            "wb0",
        ],
    )?;

    // Rate, queue, delay and jitter all come from one place: the delay line (a user-space
    // link that serialises every frame at the rate), or netem's delay and rate when asked.
    let emulate = cfg.needs_emulation();
    let netem = emulate
        && match cfg.mechanism {
            Mechanism::DelayLine | Mechanism::Auto => false,
            Mechanism::Netem => {
                if !shaping::netem_available(&m, "wba") {
                    bail!("--mechanism netem: this kernel has no netem qdisc (use --mechanism delay-line or auto)");
                }
                true
            }
        };
    let delay_line = emulate && !netem;
    if !delay_line {
        host::sh("ip", &["-n", &m, "link", "add", "wbbr", "type", "bridge"])?;
        host::sh("ip", &["-n", &m, "link", "set", "dev", "wbbr", "mtu", &mtu])?;
        for dev in ["wba", "wbb"] {
            host::sh(
                "ip",
                &["-n", &m, "link", "set", "dev", dev, "master", "wbbr"],
            )?;
        }
        host::sh("ip", &["-n", &m, "link", "set", "dev", "wbbr", "up"])?;
    }
    // a->b leaves the middle through wbb; b->a through wba.
    if netem {
        shaping::netem(&m, "wbb", &cfg.forward, cfg.mtu)?;
        shaping::netem(&m, "wba", &cfg.back, cfg.mtu)?;
    }
    if cfg.forward.loss > 0.0 {
        shaping::segment_per_frame(&a, "wb0")?;
        shaping::random_loss(&b, "wb0", cfg.forward.loss)?;
    }
    if cfg.back.loss > 0.0 {
        shaping::segment_per_frame(&b, "wb0")?;
        shaping::random_loss(&a, "wb0", cfg.back.loss)?;
    }
    for (n, dev) in [(&m, "wba"), (&m, "wbb"), (&a, "wb0"), (&b, "wb0")] {
        host::sh("ip", &["-n", n, "link", "set", "dev", dev, "up"])?;
    }
    state.mechanism = if delay_line {
        "delay-line"
    } else if netem {
        "netem"
    } else {
        "bridge"
    }
    .into();
    if delay_line {
        save(state)?;
        state.delay_line_pid = Some(start_delay_line(&name)?);
    }
    Ok(())
}

/// Starts `wirebench lab delay-line` in its own process group (it outlives `lab up`) and
/// waits until it says its sockets are open.
fn start_delay_line(name: &str) -> Result<u32> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().context("finding the wirebench executable")?;
    let mut child = Command::new(exe)
        .args(["lab", "delay-line", "--name", name])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .context("starting the delay line")?;
    let pid = child.id();
    let stdout = child.stdout.take().context("delay line stdout")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(l) if l.trim() == "ready" => Ok(pid),
        Ok(l) => {
            let _ = child.kill();
            bail!("the delay line failed to start: {}", l.trim())
        }
        Err(_) => {
            let _ = child.kill();
            bail!("the delay line did not start within 10 s")
        }
    }
}

/// The delay line process: enters the middle namespace and forwards both directions (of
/// every link, in an N-host lab).
pub fn run_delay_line(name: &str) -> Result<()> {
    let result = match load_any(name) {
        Ok(Recorded::Pair(state)) => run_pair_delay_line(&state),
        Ok(Recorded::Hosts(state)) => hosts::run_delay_line(&state),
        Err(e) => Err(e),
    };
    if let Err(e) = &result {
        println!("{}", crate::error::one_line(e));
    }
    result
}

fn run_pair_delay_line(state: &LabState) -> Result<()> {
    let name = &state.name;
    crate::sys::enter_netns(&host::netns_path(&ns(name, "m")))
        .context("entering the middle namespace")?;
    let wba = Arc::new(crate::sys::packet::open("wba", 16 << 20).context("packet socket on wba")?);
    let wbb = Arc::new(crate::sys::packet::open("wbb", 16 << 20).context("packet socket on wbb")?);
    let fwd = Arc::new(Counters::default());
    let back = Arc::new(Counters::default());
    let fwd_hold = Arc::new(delayline::LiveHold::new(&state.config.forward));
    let back_hold = Arc::new(delayline::LiveHold::new(&state.config.back));
    // Held for the process's life: the delay line's lateness is the link's, and a halted CPU
    // wakes late (see the function).
    let _fast_wakeups = crate::sys::hold_fast_wakeups().ok();
    let (mtu, framing) = (state.config.mtu, state.config.framing);
    for (rx, tx, cfg, own, reverse, c) in [
        (
            wba.clone(),
            wbb.clone(),
            state.config.forward,
            fwd_hold.clone(),
            back_hold.clone(),
            fwd.clone(),
        ),
        (
            wbb.clone(),
            wba.clone(),
            state.config.back,
            back_hold.clone(),
            fwd_hold.clone(),
            back.clone(),
        ),
    ] {
        std::thread::Builder::new()
            .name("wb-delay".into())
            .spawn(move || {
                let link = delayline::Direction { cfg, mtu, framing };
                let holds = delayline::Holds { own, reverse };
                if let Err(e) = delayline::forward(&rx, &tx, link, holds, c) {
                    eprintln!("wirebench delay line: {e}");
                    std::process::exit(1);
                }
            })?;
    }
    println!("ready");
    let reload = || {
        if let Ok(Recorded::Pair(s)) = load_any(name) {
            fwd_hold.set(&s.config.forward);
            back_hold.set(&s.config.back);
        }
    };
    report_counters(name, reload, |answered| {
        serde_json::to_string(&DelayLineStats {
            forward: fwd.snapshot(),
            back: back.snapshot(),
            answered,
        })
        .ok()
    })
}

/// The delay line's reporting loop (forever): `snapshot(answered)` written to the stats file
/// every STATS_EVERY, and at once when a reader asks (writing its number into the FIFO), so
/// that counters read around a point are exact. Before it answers a request it calls
/// `reload`, which takes the links' delay and jitter from the lab's state file: `lab set`
/// writes the file, then asks, and so knows once answered that the links use its settings.
fn report_counters(
    name: &str,
    reload: impl Fn(),
    snapshot: impl Fn(u64) -> Option<String>,
) -> Result<()> {
    let mut requests = open_request_fifo(&stats_request_path(name))?;
    let mut last_written = Instant::now();
    let mut answered = 0;
    loop {
        let left = STATS_EVERY.saturating_sub(last_written.elapsed());
        if crate::sys::wait_readable(std::os::fd::AsFd::as_fd(&requests), left).unwrap_or(false) {
            let mut buf = [0u8; 512];
            if let Ok(n) = std::io::Read::read(&mut requests, &mut buf) {
                if let Some(r) = last_request(&buf[..n]) {
                    reload();
                    answered = r;
                }
            }
        } else if last_written.elapsed() < STATS_EVERY {
            continue;
        }
        last_written = Instant::now();
        // Written aside and renamed, so that `lab status` never reads half a file.
        if let Some(s) = snapshot(answered) {
            let _ = write_aside(&stats_path(name), s.as_bytes());
        }
    }
}

/// Takes a lab down: stops its delay line, ends the processes still running in its
/// namespaces, deletes the namespaces (and with them its links) and its state. Safe to call
/// on a half-built or already removed lab. Returns how many processes it ended (besides the
/// delay line).
pub fn down(name: &str) -> Result<usize> {
    check_name(name)?;
    if let Some(pid) = load_any(name).ok().and_then(|r| r.delay_line_pid()) {
        stop_process(pid);
    }
    let namespaces = existing_namespaces(name);
    let ended = owner::end_processes(&namespaces);
    // After the processes ended: a cgroup with processes in it cannot be removed.
    let mut errors = cpu::remove_all(name);
    for n in &namespaces {
        if let Err(e) = host::sh("ip", &["netns", "del", n]) {
            errors.push(crate::error::one_line(&e));
        }
    }
    let _ = std::fs::remove_file(state_path(name));
    let _ = std::fs::remove_file(stats_path(name));
    let _ = std::fs::remove_file(state_dir().join(format!("{name}.lock")));
    remove_side_files(name);
    let _ = std::fs::remove_file(stats_request_path(name));
    owner::forget(name);
    if !errors.is_empty() {
        bail!("{}", errors.join("; "));
    }
    Ok(ended)
}

fn stop_process(pid: u32) {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let pid = Pid::from_raw(pid as i32);
    if kill(pid, Signal::SIGTERM).is_err() {
        return;
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline && kill(pid, None).is_ok() {
        // Reap it if it is our child; otherwise just wait for it to go.
        let _ = nix::sys::wait::waitpid(pid, Some(nix::sys::wait::WaitPidFlag::WNOHANG));
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = kill(pid, Signal::SIGKILL);
}

/// The delay line's counters, when it runs.
pub fn delay_line_stats(name: &str) -> Option<DelayLineStats> {
    let text = std::fs::read_to_string(stats_path(name)).ok()?;
    serde_json::from_str(&text).ok()
}

/// The delay line's counters as they are now: asks it to write them (a number written into
/// its request FIFO) and waits for the answer, up to a second. None when no delay line
/// answers (none runs: opening the FIFO for writing finds no reader).
pub fn delay_line_stats_now(name: &str) -> Option<DelayLineStats> {
    stats_now(name, |s: &DelayLineStats| s.answered)
}

/// Asks the delay line of lab `name` for its counters now and reads them as `T`.
fn stats_now<T: DeserializeOwned>(name: &str, answered: impl Fn(&T) -> u64) -> Option<T> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    // Unique across readers: this process's id and its own count.
    let request = (u64::from(std::process::id()) << 32)
        | NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut fifo = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(stats_request_path(name))
        .ok()?;
    // One write of under PIPE_BUF bytes: whole, never interleaved with another reader's.
    let line = format!("{request}\n");
    fifo.write_all(line.as_bytes()).ok()?;
    let deadline = Instant::now() + Duration::from_secs(1);
    let mut asked = Instant::now();
    while Instant::now() < deadline {
        let read = std::fs::read_to_string(stats_path(name))
            .ok()
            .and_then(|t| serde_json::from_str::<T>(&t).ok());
        if let Some(s) = read.filter(|s| answered(s) == request) {
            return Some(s);
        }
        // The delay line answers the last request of what it reads at once: when another
        // reader's came in the same read, this one was passed over. Asked again.
        if asked.elapsed() >= Duration::from_millis(50) {
            let _ = fifo.write_all(line.as_bytes());
            asked = Instant::now();
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    None
}

/// The lab link's drop counters now (absolute; see [`crate::instruments::LabDirection`]):
/// the delay line's, asked for exactly, and the random loss rules' of both hosts.
pub fn link_counters(state: &LabState) -> crate::instruments::LabCounters {
    use crate::instruments::{LabCounters, LabDirection};
    let stats = if state.delay_line_pid.is_some() {
        delay_line_stats_now(&state.name)
    } else {
        None
    };
    let direction = |c: Option<&CountersSnapshot>, loss: f64, loss_ns: &str| {
        let c = c.copied().unwrap_or_default();
        // a->b frames are dropped on b's ingress, b->a on a's; the rules exist only where
        // there is loss.
        let (udp, other) = if loss > 0.0 {
            shaping::random_loss_drops(loss_ns).unwrap_or((0, 0))
        } else {
            (0, 0)
        };
        LabDirection {
            queue_dropped_frames: c.dropped_queue_full,
            queue_dropped_segments: c.dropped_queue_segments,
            queue_dropped_udp_segments: c.dropped_queue_udp_segments,
            queue_dropped_tcp_segments: c.dropped_queue_tcp_segments,
            dropped_send: c.dropped_send,
            dropped_memory: c.dropped_memory,
            random_loss_udp: udp,
            random_loss_other: other,
            frames_out: c.frames_out + c.dropped_send,
            late_frames: c.late_frames,
            late_sum_ns: c.late_sum_ns,
            late_max_ns: c.late_max_ns,
            late_window_sum_ns: c.late_window_sum_ns,
        }
    };
    let cfg = &state.config;
    LabCounters {
        forward: direction(
            stats.as_ref().map(|s| &s.forward),
            cfg.forward.loss,
            &state.host_b.netns,
        ),
        back: direction(
            stats.as_ref().map(|s| &s.back),
            cfg.back.loss,
            &state.host_a.netns,
        ),
        delay_line_read: stats.is_some(),
    }
}

/// Whether a process is alive.
pub fn alive(pid: u32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_of_several_requests_read_at_once_is_answered() {
        assert_eq!(last_request(b"17\n"), Some(17));
        assert_eq!(last_request(b"17\n4294967298\n"), Some(4_294_967_298));
        assert_eq!(last_request(b""), None);
        assert_eq!(last_request(b"x\n"), None);
    }

    /// The side file is this call's own and created new: a link planted at any name a
    /// writer of this process could take next is never written through, and a second
    /// writer never takes the first one's file.
    #[test]
    fn a_state_file_is_written_aside_never_through_a_planted_link() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("lab.json");
        write_aside(&path, b"one").unwrap();
        write_aside(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        let victim = d.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let next = NEXT_SIDE_FILE.load(std::sync::atomic::Ordering::Relaxed);
        for n in next..next + 64 {
            let name = format!(".lab.json.{}.{n}.new", std::process::id());
            std::os::unix::fs::symlink(&victim, d.path().join(name)).unwrap();
        }
        let e = write_aside(&path, b"three").unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
    }
}
