//! N-host labs: hosts `wb-NAME-h0` .. `wb-NAME-h{N-1}` joined by a star, a chain or two
//! switches (see `topology.rs`), every link emulated by the delay line, as the two-host lab's
//! one link is. One delay-line process carries all of a lab's links, a thread per direction:
//! an idle direction sleeps in poll (waking every 100 ms), so eight idle links cost next to
//! nothing.

use std::sync::Arc;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::config::{LinkConfig, Mechanism};
use super::delayline::{self, Counters, CountersSnapshot, LiveHold};
use super::host;
use super::topology::{self, Shape, Topology, NET};
use super::{ns, shaping};

/// An N-host lab as recorded on disk (`/run/wirebench/lab/NAME.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostsLabState {
    pub name: String,
    pub topology: Topology,
    /// Hosts on the first switch (two-switches).
    pub split: Option<usize>,
    pub mtu: u64,
    /// Host i is `hosts[i]`.
    pub hosts: Vec<LabHost>,
    pub links: Vec<LabLink>,
    pub delay_line_pid: Option<u32>,
    pub created_at: String,
    /// The CPU budgets of its hosts (`--host-cpu h1=25%`); absent without one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_cpu: Vec<super::cpu::HostCpu>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabHost {
    /// "h3": the name `lab exec` takes.
    pub name: String,
    pub netns: String,
    /// The address other hosts reach it at.
    pub address: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabLink {
    /// "h3" (host 3's link to its switch), "h0-h1" (chain), "trunk".
    pub name: String,
    /// The ends: forward is ends[0] -> ends[1], back the other way.
    pub ends: [String; 2],
    pub config: LinkConfig,
    /// "delay-line" or "bridge" (nothing to emulate).
    pub mechanism: String,
    /// Its two interfaces in the lab's net namespace (forward leaves through the second).
    pub devices: [String; 2],
    /// Where the random loss of each direction is applied (nftables chain), if any.
    pub loss_forward: Option<LossPoint>,
    pub loss_back: Option<LossPoint>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LossPoint {
    pub netns: String,
    pub dev: String,
    pub chain: String,
}

/// The delay line's counters of every link (None: a bridged link, nothing counted).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostsStats {
    pub links: Vec<Option<LinkCounters>>,
    #[serde(default)]
    pub answered: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkCounters {
    pub forward: CountersSnapshot,
    pub back: CountersSnapshot,
}

impl HostsLabState {
    pub fn namespaces(&self) -> Vec<String> {
        let mut all: Vec<String> = self.hosts.iter().map(|h| h.netns.clone()).collect();
        all.push(ns(&self.name, NET));
        all
    }

    pub fn host(&self, name: &str) -> Option<&LabHost> {
        self.hosts.iter().find(|h| h.name == name)
    }
}

/// A running N-host lab; taken down on drop unless kept.
pub struct HostsLab {
    pub state: HostsLabState,
    keep: bool,
}

impl Drop for HostsLab {
    fn drop(&mut self) {
        if !self.keep {
            let _ = super::down(&self.state.name);
        }
    }
}

impl HostsLab {
    pub fn keep(mut self) -> HostsLabState {
        self.keep = true;
        self.state.clone()
    }

    pub fn up(name: &str, shape: &Shape) -> Result<HostsLab> {
        HostsLab::up_with(name, shape, &[])
    }

    /// [`HostsLab::up`] with CPU budgets for some of its hosts (h0, h1, ...).
    pub fn up_with(name: &str, shape: &Shape, host_cpu: &[(String, f64)]) -> Result<HostsLab> {
        super::check_name(name)?;
        for (h, _) in host_cpu {
            let known = h
                .strip_prefix('h')
                .and_then(|i| i.parse::<usize>().ok())
                .is_some_and(|i| i < shape.hosts && h == &topology::host_name(i));
            if !known {
                bail!(
                    "--host-cpu: host '{h}': lab {name} has hosts h0 to h{}",
                    shape.hosts.saturating_sub(1)
                );
            }
        }
        let controller = if host_cpu.is_empty() {
            None
        } else {
            Some(super::cpu::Controller::find()?)
        };
        let plan = topology::plan(shape)?;
        let mut mtus = plan.links.iter().map(|l| l.config.mtu);
        let mtu = mtus.next().unwrap_or(1500);
        for l in &plan.links {
            if l.config.mtu != mtu {
                bail!("every link of a lab has the same MTU (--mtu)");
            }
            if l.config.mechanism == Mechanism::Netem {
                bail!("an N-host lab's links are emulated by the delay line: leave out --mechanism netem");
            }
            if let Some(w) = super::faithfulness_warning(&l.config) {
                eprintln!("wirebench lab: link {}: {w}", l.name);
            }
        }
        super::check_environment()?;
        super::check_free(name)?;
        std::fs::create_dir_all(super::state_dir()).context("creating /run/wirebench/lab")?;
        let loss_point = |end: &topology::End| LossPoint {
            netns: match end.host {
                Some(h) => ns(name, &topology::host_name(h)),
                None => ns(name, NET),
            },
            dev: end.dev.clone(),
            chain: format!("loss-{}", end.dev),
        };
        let state = HostsLabState {
            name: name.to_owned(),
            topology: shape.topology,
            split: shape.split,
            mtu,
            hosts: (0..plan.hosts)
                .map(|i| LabHost {
                    name: topology::host_name(i),
                    netns: ns(name, &topology::host_name(i)),
                    address: plan.host_addresses[i].clone(),
                })
                .collect(),
            links: plan
                .links
                .iter()
                .map(|l| LabLink {
                    name: l.name.clone(),
                    ends: l.ends.clone(),
                    config: l.config.clone(),
                    mechanism: if l.config.needs_emulation() {
                        "delay-line"
                    } else {
                        "bridge"
                    }
                    .into(),
                    devices: [l.a_dev.clone(), l.b_dev.clone()],
                    // Frames leave the link forward at b's peer, back at a's peer.
                    loss_forward: (l.config.forward.loss > 0.0).then(|| loss_point(&l.b_peer)),
                    loss_back: (l.config.back.loss > 0.0).then(|| loss_point(&l.a_peer)),
                })
                .collect(),
            delay_line_pid: None,
            created_at: crate::env::now_rfc3339(),
            host_cpu: Vec::new(),
        };
        // Recorded first, so that `down` (run by the guard on failure) finds every part built.
        save(&state)?;
        let mut lab = HostsLab { state, keep: false };
        super::owner::record(name)?;
        build(&mut lab.state, &plan)?;
        if let Some(c) = &controller {
            for (h, share) in host_cpu {
                let b = super::cpu::create(c, name, h, *share)?;
                lab.state.host_cpu.push(b);
            }
        }
        save(&lab.state)?;
        Ok(lab)
    }
}

pub(super) fn save(state: &HostsLabState) -> Result<()> {
    super::write_state(&state.name, &serde_json::to_string_pretty(state)?)
}

fn build(state: &mut HostsLabState, plan: &topology::Plan) -> Result<()> {
    let name = state.name.clone();
    let net = ns(&name, NET);
    let in_ns = |end: &topology::End| match end.host {
        Some(h) => state.hosts[h].netns.clone(),
        None => net.clone(),
    };
    for n in state.namespaces() {
        host::sh("ip", &["netns", "add", &n])?;
        host::sh("ip", &["-n", &n, "link", "set", "lo", "up"])?;
    }
    let mtu = state.mtu.to_string();
    let mut devices = Vec::new();
    for (x, y) in &plan.veths {
        let (xn, yn) = (in_ns(x), in_ns(y));
        host::sh(
            "ip",
            &[
                "link", "add", &x.dev, "netns", &xn, "type", "veth", "peer", "name", &y.dev,
                "netns", &yn,
            ],
        )?;
        devices.push((xn, x.dev.clone()));
        devices.push((yn, y.dev.clone()));
    }
    for (n, dev) in &devices {
        host::sh("ip", &["-n", n, "link", "set", "dev", dev, "mtu", &mtu])?;
    }
    // Links with nothing to emulate: a bridge of their own joins their two sides.
    let mut bridges = plan.bridges.clone();
    for (i, l) in state.links.iter().enumerate() {
        if l.mechanism == "bridge" {
            bridges.push((format!("j{i}"), l.devices.to_vec()));
        }
    }
    for (br, ports) in &bridges {
        host::sh("ip", &["-n", &net, "link", "add", br, "type", "bridge"])?;
        host::sh("ip", &["-n", &net, "link", "set", "dev", br, "mtu", &mtu])?;
        for port in ports {
            host::sh(
                "ip",
                &["-n", &net, "link", "set", "dev", port, "master", br],
            )?;
        }
        host::sh("ip", &["-n", &net, "link", "set", "dev", br, "up"])?;
    }
    for a in &plan.addresses {
        let n = &state.hosts[a.host].netns;
        host::sh("ip", &["-n", n, "addr", "add", &a.cidr, "dev", &a.dev])?;
    }
    for l in &state.links {
        for (p, loss) in [
            (&l.loss_forward, l.config.forward.loss),
            (&l.loss_back, l.config.back.loss),
        ] {
            if let Some(p) = p {
                shaping::random_loss_in_chain(&p.netns, &p.dev, loss, &p.chain)?;
            }
        }
    }
    // With loss anywhere, every frame a host sends is one segment, so that a dropped frame
    // is one segment and the configured loss a per-segment probability (as the two-host lab).
    if state
        .links
        .iter()
        .any(|l| l.loss_forward.is_some() || l.loss_back.is_some())
    {
        for (n, dev) in devices.iter().filter(|(n, _)| *n != net) {
            shaping::segment_per_frame(n, dev)?;
        }
    }
    for (n, dev) in &devices {
        host::sh("ip", &["-n", n, "link", "set", "dev", dev, "up"])?;
    }
    for &h in &plan.forwarding {
        host::sh_in(
            &state.hosts[h].netns,
            "sysctl",
            &["-qw", "net.ipv4.ip_forward=1"],
        )?;
    }
    for r in &plan.routes {
        let n = &state.hosts[r.host].netns;
        host::sh("ip", &["-n", n, "route", "add", &r.dest, "via", &r.via])?;
    }
    if state.links.iter().any(|l| l.mechanism == "delay-line") {
        save(state)?;
        state.delay_line_pid = Some(super::start_delay_line(&name)?);
    }
    Ok(())
}

/// The delay line of an N-host lab: every emulated link, both directions, in one process.
pub(super) fn run_delay_line(state: &HostsLabState) -> Result<()> {
    crate::sys::enter_netns(&host::netns_path(&ns(&state.name, NET)))
        .context("entering the lab's net namespace")?;
    let mut counters = Vec::new();
    let mut holds = Vec::new();
    // Held for the process's life: the delay line's lateness is the link's, and a halted CPU
    // wakes late (see the function).
    let _fast_wakeups = crate::sys::hold_fast_wakeups().ok();
    for l in &state.links {
        if l.mechanism != "delay-line" {
            counters.push(None);
            holds.push(None);
            continue;
        }
        let [a, b] = &l.devices;
        let a = Arc::new(
            crate::sys::packet::open(a, 16 << 20)
                .with_context(|| format!("packet socket on {a}"))?,
        );
        let b = Arc::new(
            crate::sys::packet::open(b, 16 << 20)
                .with_context(|| format!("packet socket on {b}"))?,
        );
        let (fwd, back) = (Arc::new(Counters::default()), Arc::new(Counters::default()));
        let (mtu, framing) = (l.config.mtu, l.config.framing);
        let fwd_hold = Arc::new(LiveHold::new(&l.config.forward));
        let back_hold = Arc::new(LiveHold::new(&l.config.back));
        for (rx, tx, cfg, own, reverse, c) in [
            (
                a.clone(),
                b.clone(),
                l.config.forward,
                fwd_hold.clone(),
                back_hold.clone(),
                fwd.clone(),
            ),
            (
                b,
                a,
                l.config.back,
                back_hold.clone(),
                fwd_hold.clone(),
                back.clone(),
            ),
        ] {
            std::thread::Builder::new()
                .name(format!("wb-delay-{}", l.name))
                .spawn(move || {
                    let link = delayline::Direction { cfg, mtu, framing };
                    let holds = delayline::Holds { own, reverse };
                    if let Err(e) = delayline::forward(&rx, &tx, link, holds, c) {
                        eprintln!("wirebench delay line: {e}");
                        std::process::exit(1);
                    }
                })?;
        }
        counters.push(Some((fwd, back)));
        holds.push(Some((fwd_hold, back_hold)));
    }
    println!("ready");
    let reload = || {
        // The links are matched by position: `lab set` changes settings, never the list.
        if let Ok(super::Recorded::Hosts(s)) = super::load_any(&state.name) {
            for (l, h) in s.links.iter().zip(&holds) {
                if let Some((f, b)) = h {
                    f.set(&l.config.forward);
                    b.set(&l.config.back);
                }
            }
        }
    };
    super::report_counters(&state.name, reload, |answered| {
        serde_json::to_string(&HostsStats {
            links: counters
                .iter()
                .map(|c| {
                    c.as_ref().map(|(f, b)| LinkCounters {
                        forward: f.snapshot(),
                        back: b.snapshot(),
                    })
                })
                .collect(),
            answered,
        })
        .ok()
    })
}

/// The delay line's counters of every link as they are now (None: no delay line answers).
pub fn stats_now(name: &str) -> Option<HostsStats> {
    super::stats_now(name, |s: &HostsStats| s.answered)
}

/// Frames the random loss rules of a link direction dropped so far: (UDP, others).
pub fn random_drops(p: &LossPoint) -> Option<(u64, u64)> {
    shaping::random_loss_drops_in_chain(&p.netns, &p.chain)
}
