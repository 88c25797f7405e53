//! `lab set`: changes a running lab link's one-way delay and jitter. The new settings go into
//! the lab's state file (what `lab status` shows and a run's physics guard reads as the
//! link's delay); then the delay line is asked for its counters, and before it answers it
//! takes the links' delay and jitter from that file (see `report_counters`), so that once
//! `lab set` returns every frame the link takes in is held the new time. Frames already
//! held keep the time they were given.
//!
//! Only what the delay line holds per frame can change while frames flow: the rate and the
//! queue are its wire's state, and the loss is nftables rules on the hosts (a lab brought up
//! without loss has none to change).

use std::time::Duration;

use anyhow::{bail, Result};

use super::config::{jitter_above_delay, DirectionConfig, LinkConfig};
use super::hosts::HostsLabState;
use super::{LabState, Recorded};

/// What to change; a field left out keeps the link's value. `delay` and `jitter` set both
/// directions unless their `_back` forms are given (as `lab up`'s options do).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Change {
    pub delay: Option<Duration>,
    pub jitter: Option<Duration>,
    pub delay_back: Option<Duration>,
    pub jitter_back: Option<Duration>,
}

impl Change {
    pub fn is_empty(&self) -> bool {
        *self == Change::default()
    }

    /// `cfg` with this change made, checked as `lab up` checks a link.
    pub fn apply(&self, cfg: &LinkConfig) -> Result<LinkConfig> {
        if self.is_empty() {
            bail!("lab set: give what to change: --delay, --jitter, --delay-back or --jitter-back");
        }
        let mut out = cfg.clone();
        let put = |d: &mut DirectionConfig, delay: Option<Duration>, jitter: Option<Duration>| {
            if let Some(x) = delay {
                d.delay = x;
            }
            if let Some(x) = jitter {
                d.jitter = x;
            }
        };
        put(&mut out.forward, self.delay, self.jitter);
        put(
            &mut out.back,
            self.delay_back.or(self.delay),
            self.jitter_back.or(self.jitter),
        );
        for (d, back) in [(&out.forward, ""), (&out.back, "-back")] {
            if d.delay > Duration::from_secs(10) || d.jitter > Duration::from_secs(10) {
                bail!("delay and jitter are limited to 10 s");
            }
            if let Some(e) = jitter_above_delay(d, back) {
                bail!("{e}");
            }
        }
        Ok(out)
    }
}

/// Makes `change` on the link of a two-host lab (`link`: none; it has one).
pub fn in_pair(state: &mut LabState, link: Option<&str>, change: &Change) -> Result<()> {
    let name = &state.name;
    if let Some(l) = link {
        bail!("lab {name} has one link, between hosts a and b: leave out --link (got '{l}')");
    }
    match state.mechanism.as_str() {
        "delay-line" => {}
        "netem" => bail!(
            "lab {name}: its link is emulated by netem (--mechanism netem); lab set changes links the delay line carries"
        ),
        _ => bail!(
            "lab {name}: its link emulates nothing (a bridge: brought up without a rate, delay or jitter); lab set changes links the delay line carries"
        ),
    }
    state.config = change.apply(&state.config)?;
    Ok(())
}

/// Makes `change` on link `link` of an N-host lab; the link's index.
pub fn in_hosts(state: &mut HostsLabState, link: Option<&str>, change: &Change) -> Result<usize> {
    let name = &state.name;
    let names: Vec<&str> = state.links.iter().map(|l| l.name.as_str()).collect();
    let Some(link) = link else {
        bail!(
            "lab {name} has {} links ({}): name one with --link",
            names.len(),
            names.join(", ")
        );
    };
    let Some(i) = names.iter().position(|n| *n == link) else {
        bail!(
            "lab {name} has no link '{link}' (its links: {})",
            names.join(", ")
        );
    };
    let l = &mut state.links[i];
    if l.mechanism != "delay-line" {
        bail!(
            "lab {name}: link {link} emulates nothing (a bridge: brought up without a rate, delay or jitter); lab set changes links the delay line carries"
        );
    }
    l.config = change.apply(&l.config)?;
    Ok(i)
}

/// `lab set` on lab `name`: the state as it is now, once the delay line has taken it.
pub fn set(name: &str, link: Option<&str>, change: &Change) -> Result<Recorded> {
    super::check_name(name)?;
    // A lab that is not there is said so before any lock file is made for it.
    super::load_any(name)?;
    // Held until the delay line confirmed: concurrent `lab set`s on one lab take turns.
    let _lock = super::lock_state(name)?;
    let mut recorded = super::load_any(name)?;
    match &mut recorded {
        Recorded::Pair(s) => in_pair(s, link, change)?,
        Recorded::Hosts(s) => {
            in_hosts(s, link, change)?;
        }
    }
    let Some(pid) = recorded.delay_line_pid().filter(|p| super::alive(*p)) else {
        bail!("lab {name}: its delay line is not running (lab status); take the lab down");
    };
    match &recorded {
        Recorded::Pair(s) => super::save(s)?,
        Recorded::Hosts(s) => super::hosts::save(s)?,
    }
    // Answered only after it reloaded the settings just written.
    let confirmed = match &recorded {
        Recorded::Pair(_) => super::delay_line_stats_now(name).is_some(),
        Recorded::Hosts(_) => super::hosts::stats_now(name).is_some(),
    };
    if !confirmed {
        bail!(
            "lab {name}: the delay line (pid {pid}) did not confirm the new settings within 1 s; the state file has them, the link may not"
        );
    }
    Ok(recorded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::config::LinkSpec;
    use crate::lab::hosts::LabLink;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn link(delay: &str, jitter: &str) -> LinkConfig {
        LinkSpec {
            rate: Some("20mbit".into()),
            delay: crate::units::parse_duration(delay).ok(),
            jitter: crate::units::parse_duration(jitter).ok(),
            loss: Some("1%".into()),
            ..LinkSpec::default()
        }
        .to_config()
        .unwrap()
    }

    #[test]
    fn a_delay_sets_both_directions_and_its_back_form_one() {
        let c = link("10ms", "0ms");
        let both = Change {
            delay: Some(ms(40)),
            ..Change::default()
        };
        let out = both.apply(&c).unwrap();
        assert_eq!((out.forward.delay, out.back.delay), (ms(40), ms(40)));
        // Everything else is the link's as it was.
        assert_eq!(out.forward.rate_bits_per_s, Some(20e6));
        assert_eq!(out.back.loss, 0.01);
        assert_eq!(out.mtu, c.mtu);
        let back = Change {
            delay_back: Some(ms(3)),
            jitter: Some(ms(2)),
            ..Change::default()
        };
        let out = back.apply(&c).unwrap();
        assert_eq!((out.forward.delay, out.back.delay), (ms(10), ms(3)));
        assert_eq!((out.forward.jitter, out.back.jitter), (ms(2), ms(2)));
    }

    #[test]
    fn a_change_that_lab_up_would_refuse_is_refused() {
        let c = link("10ms", "0ms");
        let e = |ch: Change| ch.apply(&c).unwrap_err().to_string();
        assert!(e(Change::default()).starts_with("lab set: give what to change"));
        assert!(e(Change {
            jitter: Some(ms(11)),
            ..Change::default()
        })
        .starts_with("--jitter 11.0 ms is above --delay 10.0 ms"));
        assert!(e(Change {
            delay_back: Some(ms(1)),
            jitter: Some(ms(2)),
            delay: Some(ms(5)),
            ..Change::default()
        })
        .starts_with("--jitter-back 2.00 ms is above --delay-back 1.00 ms"));
        assert_eq!(
            e(Change {
                delay: Some(Duration::from_secs(11)),
                ..Change::default()
            }),
            "delay and jitter are limited to 10 s"
        );
    }

    fn hosts_state() -> HostsLabState {
        let l = |name: &str, mechanism: &str, cfg: LinkConfig| LabLink {
            name: name.into(),
            ends: [name.into(), "sw".into()],
            config: cfg,
            mechanism: mechanism.into(),
            devices: ["x".into(), "y".into()],
            loss_forward: None,
            loss_back: None,
        };
        HostsLabState {
            name: "t".into(),
            topology: crate::lab::topology::Topology::Star,
            split: None,
            mtu: 1500,
            hosts: Vec::new(),
            links: vec![
                l("h0", "bridge", LinkSpec::default().to_config().unwrap()),
                l("h1", "delay-line", link("1ms", "0ms")),
                l("h2", "delay-line", link("10ms", "0ms")),
            ],
            delay_line_pid: None,
            created_at: String::new(),
            host_cpu: Vec::new(),
        }
    }

    #[test]
    fn only_the_named_link_of_an_n_host_lab_changes() {
        let mut s = hosts_state();
        let before = s.clone();
        let ch = Change {
            delay: Some(ms(40)),
            ..Change::default()
        };
        assert_eq!(in_hosts(&mut s, Some("h2"), &ch).unwrap(), 2);
        assert_eq!(s.links[2].config.forward.delay, ms(40));
        assert_eq!(s.links[2].config.back.delay, ms(40));
        assert_eq!(s.links[..2], before.links[..2]);
        // The state file's form carries the new delay (what `lab status` and the guard read).
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["links"][2]["config"]["forward"]["delay_ns"], 40_000_000);
    }

    #[test]
    fn an_unknown_or_missing_or_bridged_link_is_one_clear_error() {
        let ch = Change {
            delay: Some(ms(40)),
            ..Change::default()
        };
        let e = |link: Option<&str>| {
            let mut s = hosts_state();
            let e = in_hosts(&mut s, link, &ch).unwrap_err().to_string();
            assert_eq!(s, hosts_state(), "a refused change changes nothing");
            e
        };
        assert_eq!(
            e(Some("h9")),
            "lab t has no link 'h9' (its links: h0, h1, h2)"
        );
        assert_eq!(
            e(None),
            "lab t has 3 links (h0, h1, h2): name one with --link"
        );
        assert!(e(Some("h0")).starts_with("lab t: link h0 emulates nothing"));
    }

    #[test]
    fn a_two_host_lab_takes_no_link_name_and_no_netem_link() {
        let state = |mechanism: &str| LabState {
            name: "p".into(),
            config: link("10ms", "0ms"),
            mechanism: mechanism.into(),
            delay_line_pid: None,
            created_at: String::new(),
            host_a: crate::lab::HostInfo {
                netns: "wb-p-a".into(),
                address: crate::lab::ADDR_A.into(),
            },
            host_b: crate::lab::HostInfo {
                netns: "wb-p-b".into(),
                address: crate::lab::ADDR_B.into(),
            },
            tcp_goodput_forward: None,
            tcp_goodput_back: None,
            host_cpu: Vec::new(),
        };
        let ch = Change {
            delay: Some(ms(25)),
            ..Change::default()
        };
        let mut s = state("delay-line");
        in_pair(&mut s, None, &ch).unwrap();
        assert_eq!(s.config.forward.delay, ms(25));
        let mut s = state("delay-line");
        assert!(in_pair(&mut s, Some("h1"), &ch)
            .unwrap_err()
            .to_string()
            .starts_with("lab p has one link"));
        let mut s = state("netem");
        assert!(in_pair(&mut s, None, &ch)
            .unwrap_err()
            .to_string()
            .contains("emulated by netem"));
    }
}
