//! What an emulated link is: per-direction rate, delay, jitter and loss, the MTU, and named
//! profiles for typical paths.

use std::time::Duration;

use anyhow::{bail, Result};
use clap::ValueEnum;
use serde::{Deserialize, Serialize};

use super::link::QueueLimit;
pub use crate::model::lab::{DirectionConfig, Framing, LinkConfig, Mechanism, NamedRate};
use crate::units::format_seconds;

// The link's settings are values of the result model (`model::lab`), which records them with
// every run; how they are parsed, described and judged is the lab's, here.

impl DirectionConfig {
    /// The queue in front of the wire, as configured or by default; None on a link without a
    /// rate, where nothing waits for the wire.
    pub fn effective_queue(&self, mtu: u64) -> Option<QueueLimit> {
        let rate = self.rate_bits_per_s?;
        Some(
            self.queue
                .unwrap_or_else(|| QueueLimit::default_for(rate, mtu)),
        )
    }

    /// One line for people: rate, queue, one-way delay, jitter and loss.
    pub fn describe(&self, mtu: u64) -> String {
        format!(
            "rate {}{}, one-way delay {}, jitter {}, loss {:.4}%",
            self.rate_bits_per_s
                .map(|r| match self.rate_name {
                    Some(n) => format!("{} ({})", crate::units::format_mbit_s(r), n.name()),
                    None => crate::units::format_mbit_s(r),
                })
                .unwrap_or_else(|| "unlimited".into()),
            self.effective_queue(mtu)
                .map(|q| format!(" (queue {})", q.describe()))
                .unwrap_or_default(),
            format_seconds(self.delay.as_secs_f64()),
            format_seconds(self.jitter.as_secs_f64()),
            self.loss * 100.0
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// Gigabit LAN: 1 Gbit/s, 50 us one-way.
    Lan,
    /// Campus backbone: 1 Gbit/s, 1 ms one-way.
    Campus,
    /// Wide-area path: 100 Mbit/s, 20 ms one-way (40 ms RTT).
    Wan,
    /// Long fat pipe: 1 Gbit/s, 50 ms one-way.
    Lfn,
}

impl Profile {
    pub fn direction(self) -> DirectionConfig {
        let (rate, delay_us) = match self {
            Profile::Lan => (1e9, 50),
            Profile::Campus => (1e9, 1_000),
            Profile::Wan => (100e6, 20_000),
            Profile::Lfn => (1e9, 50_000),
        };
        DirectionConfig {
            rate_bits_per_s: Some(rate),
            delay: Duration::from_micros(delay_us),
            jitter: Duration::ZERO,
            loss: 0.0,
            queue: None,
            rate_name: None,
        }
    }
}

/// A link as people write it: `lab up`'s options, or a study file's `[link]` table and link
/// axes, all text ("100mbit", "10ms", "0.5%", "100p"), turned into a [`LinkConfig`] in one
/// place so that both check it the same way. A field left out keeps the profile's value (or
/// none); a `_back` field left out copies the forward direction's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LinkSpec {
    pub profile: Option<Profile>,
    pub rate: Option<String>,
    #[serde(with = "crate::units::opt_duration_text")]
    pub delay: Option<Duration>,
    #[serde(with = "crate::units::opt_duration_text")]
    pub jitter: Option<Duration>,
    pub loss: Option<String>,
    pub queue: Option<String>,
    pub rate_back: Option<String>,
    #[serde(with = "crate::units::opt_duration_text")]
    pub delay_back: Option<Duration>,
    #[serde(with = "crate::units::opt_duration_text")]
    pub jitter_back: Option<Duration>,
    pub loss_back: Option<String>,
    pub queue_back: Option<String>,
    /// Bytes; None: 1500.
    pub mtu: Option<u64>,
    pub mechanism: Option<Mechanism>,
    /// How the wire frames each packet; None: the kernel's frame (`frame`).
    pub framing: Option<Framing>,
    /// CPU budgets of the lab's hosts, as `lab up --host-cpu` ("b=10%"): a study's lab end
    /// systems. Not part of the link itself: `lab up` takes it as its own option.
    pub host_cpu: Option<String>,
    /// The path between a study's client and server: "direct" (None), or "udp-relays" for
    /// PVM's default route: a relay on each host and a UDP leg between them (datagrams of
    /// at most 4 KiB, PVM's UDPMAXLEN; `wirebench relay --forward-udp`), or "udp-relays:SIZE"
    /// for another largest datagram. Not part of the link itself.
    pub route: Option<String>,
}

/// The rate `s` in bits per second, and the network's name when it was given by one.
fn bits(s: &str, what: &str) -> Result<(f64, Option<NamedRate>)> {
    match crate::units::parse_rate_typed(s).map_err(|e| anyhow::anyhow!("--{what}: {e}"))? {
        crate::units::Rate::BitsPerSecond(b) => Ok((b, NamedRate::from_name(s))),
        crate::units::Rate::PacketsPerSecond(_) => {
            bail!("--{what}: a link rate is in bits per second, not packets")
        }
    }
}

fn loss(s: &str, what: &str) -> Result<f64> {
    crate::units::parse_percent(s).map_err(|e| anyhow::anyhow!("--{what}: {e}"))
}

fn queue(s: &str, what: &str) -> Result<QueueLimit> {
    QueueLimit::parse(s).map_err(|e| anyhow::anyhow!("--{what}: {e}"))
}

/// PVM's UDPMAXLEN: the largest datagram between two pvmds, and a study route's default.
pub const PVM_UDPMAXLEN: u64 = 4096;

impl LinkSpec {
    /// The largest datagram of the route's UDP leg, None for the direct path; an unknown
    /// route is an error.
    pub fn relay_datagram(&self) -> Result<Option<u64>> {
        match self.route.as_deref() {
            None | Some("direct") => Ok(None),
            Some("udp-relays") => Ok(Some(PVM_UDPMAXLEN)),
            Some(r) => match r.strip_prefix("udp-relays:") {
                Some(size) => crate::units::parse_bytes(size)
                    .map(Some)
                    .map_err(|e| anyhow::anyhow!("route '{r}': {e}")),
                None => bail!("route '{r}': expected direct, udp-relays or udp-relays:SIZE"),
            },
        }
    }

    /// This spec's fields, and `base`'s where this one leaves them out (an N-host lab's
    /// per-link settings over the lab's link options).
    pub fn over(&self, base: &LinkSpec) -> LinkSpec {
        LinkSpec {
            profile: self.profile.or(base.profile),
            rate: self.rate.clone().or_else(|| base.rate.clone()),
            delay: self.delay.or(base.delay),
            jitter: self.jitter.or(base.jitter),
            loss: self.loss.clone().or_else(|| base.loss.clone()),
            queue: self.queue.clone().or_else(|| base.queue.clone()),
            rate_back: self.rate_back.clone().or_else(|| base.rate_back.clone()),
            delay_back: self.delay_back.or(base.delay_back),
            jitter_back: self.jitter_back.or(base.jitter_back),
            loss_back: self.loss_back.clone().or_else(|| base.loss_back.clone()),
            queue_back: self.queue_back.clone().or_else(|| base.queue_back.clone()),
            mtu: self.mtu.or(base.mtu),
            mechanism: self.mechanism.or(base.mechanism),
            framing: self.framing.or(base.framing),
            host_cpu: self.host_cpu.clone().or_else(|| base.host_cpu.clone()),
            route: self.route.clone().or_else(|| base.route.clone()),
        }
    }

    pub fn to_config(&self) -> Result<LinkConfig> {
        let base = self.profile.map(Profile::direction).unwrap_or_default();
        let mut fwd = base;
        if let Some(r) = &self.rate {
            let (b, name) = bits(r, "rate")?;
            fwd.rate_bits_per_s = Some(b);
            fwd.rate_name = name;
        }
        if let Some(d) = self.delay {
            fwd.delay = d;
        }
        if let Some(j) = self.jitter {
            fwd.jitter = j;
        }
        if let Some(l) = &self.loss {
            fwd.loss = loss(l, "loss")?;
        }
        if let Some(q) = &self.queue {
            fwd.queue = Some(queue(q, "queue")?);
        }
        let mut back = fwd;
        if let Some(r) = &self.rate_back {
            let (b, name) = bits(r, "rate-back")?;
            back.rate_bits_per_s = Some(b);
            back.rate_name = name;
        }
        if let Some(d) = self.delay_back {
            back.delay = d;
        }
        if let Some(j) = self.jitter_back {
            back.jitter = j;
        }
        if let Some(l) = &self.loss_back {
            back.loss = loss(l, "loss-back")?;
        }
        if let Some(q) = &self.queue_back {
            back.queue = Some(queue(q, "queue-back")?);
        }
        let mtu = self.mtu.unwrap_or(1500);
        if !(68..=65_535).contains(&mtu) {
            bail!("--mtu {mtu}: an IPv4 link MTU is 68 to 65535 bytes");
        }
        for (d, back) in [(fwd, ""), (back, "-back")] {
            if d.delay > Duration::from_secs(10) || d.jitter > Duration::from_secs(10) {
                bail!("delay and jitter are limited to 10 s");
            }
            if let Some(e) = jitter_above_delay(&d, back) {
                bail!("{e}");
            }
            if d.rate_bits_per_s.is_some_and(|r| r < 8_000.0) {
                bail!("a link rate below 8 kbit/s is not supported");
            }
        }
        Ok(LinkConfig {
            forward: fwd,
            back,
            mtu,
            mechanism: self.mechanism.unwrap_or(Mechanism::Auto),
            framing: self.framing.unwrap_or_default(),
        })
    }
}

/// Why a direction's jitter is refused: above its delay. A frame cannot leave before it
/// arrived, so the delay line holds each frame max(0, delay + uniform(-jitter, +jitter)): with
/// jitter above the delay a share (jitter - delay) / (2 jitter) of the frames would be held no
/// time at all, and the mean hold would be (delay + jitter)^2 / (4 jitter), not the delay
/// asked for (a 1 ms link with 3 ms of jitter: a third of its frames undelayed, mean 1.333
/// ms, and one-way times as short as the wire alone). Refused, rather than emulated as a
/// different link than the one asked for. `back` is "" or "-back", for the option's name.
pub fn jitter_above_delay(d: &DirectionConfig, back: &str) -> Option<String> {
    if d.jitter <= d.delay {
        return None;
    }
    let (delay, jitter) = (d.delay.as_secs_f64(), d.jitter.as_secs_f64());
    Some(format!(
        "--jitter{back} {} is above --delay{back} {}: a frame cannot leave before it arrived, so {:.0}% of the frames would not be delayed at all and the mean delay would be {}; give a jitter of at most the delay",
        format_seconds(jitter),
        format_seconds(delay),
        (jitter - delay) / (2.0 * jitter) * 100.0,
        format_seconds((delay + jitter).powi(2) / (4.0 * jitter))
    ))
}

impl LinkConfig {
    pub fn needs_delay(&self) -> bool {
        [self.forward, self.back]
            .iter()
            .any(|d| !d.delay.is_zero() || !d.jitter.is_zero())
    }

    /// Whether either direction has a rate, delay or jitter to emulate (else a plain bridge).
    pub fn needs_emulation(&self) -> bool {
        self.needs_delay()
            || [self.forward, self.back]
                .iter()
                .any(|d| d.rate_bits_per_s.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--delay 1ms --jitter 3ms` once gave one-way times of 39 us.
    #[test]
    fn jitter_above_the_delay_is_refused_with_what_the_link_would_do() {
        let spec = |delay: &str, jitter: &str| LinkSpec {
            rate: Some("50mbit".into()),
            delay: Some(crate::units::parse_duration(delay).unwrap()),
            jitter: Some(crate::units::parse_duration(jitter).unwrap()),
            ..LinkSpec::default()
        };
        let e = spec("1ms", "3ms").to_config().unwrap_err().to_string();
        assert_eq!(
            e,
            "--jitter 3.00 ms is above --delay 1.00 ms: a frame cannot leave before it arrived, so 33% of the frames would not be delayed at all and the mean delay would be 1.33 ms; give a jitter of at most the delay"
        );
        assert!(spec("1ms", "1ms").to_config().is_ok());
        assert!(spec("5ms", "2ms").to_config().is_ok());
        let back = LinkSpec {
            jitter_back: Some(Duration::from_millis(2)),
            ..spec("1ms", "0ms")
        };
        assert!(back
            .to_config()
            .unwrap_err()
            .to_string()
            .starts_with("--jitter-back 2.00 ms is above --delay-back 1.00 ms"));
    }

    #[test]
    fn named_rates_give_their_number_and_keep_their_name() {
        let spec = LinkSpec {
            rate: Some("OC3".into()),
            rate_back: Some("10base-t".into()),
            framing: Some(Framing::AtmAal5),
            ..LinkSpec::default()
        };
        let c = spec.to_config().unwrap();
        assert_eq!(c.forward.rate_bits_per_s, Some(149.76e6));
        assert_eq!(c.forward.rate_name, Some(NamedRate::Oc3));
        assert_eq!(c.back.rate_bits_per_s, Some(10e6));
        assert_eq!(c.back.rate_name, Some(NamedRate::TenBaseT));
        assert_eq!(c.framing, Framing::AtmAal5);
        let v = serde_json::to_value(c.forward).unwrap();
        assert_eq!(v["rate_name"], "oc3");
        assert_eq!(v["rate_bits_per_s"], 149.76e6);
        // A number keeps no name; every name's number is the units table's.
        let c = LinkSpec {
            rate: Some("100M".into()),
            ..LinkSpec::default()
        }
        .to_config()
        .unwrap();
        assert_eq!(c.forward.rate_name, None);
        assert!(serde_json::to_value(c.forward)
            .unwrap()
            .get("rate_name")
            .is_none());
        let want = [149.76e6, 599.04e6, 100e6, 100e6, 10e6, 100e6, 1000e6];
        for (n, bits) in NamedRate::ALL.iter().zip(want) {
            assert_eq!(n.bits_per_s(), bits, "{}", n.name());
            assert_eq!(NamedRate::from_name(n.name()), Some(*n));
        }
        assert!(c.forward.describe(1500).starts_with("rate 100"));
    }

    #[test]
    fn delays_are_written_in_nanoseconds_and_the_older_form_still_reads() {
        let d = DirectionConfig {
            delay: Duration::from_micros(1500),
            jitter: Duration::from_nanos(7),
            ..DirectionConfig::default()
        };
        let v = serde_json::to_value(d).unwrap();
        assert_eq!(v["delay_ns"], 1_500_000);
        assert_eq!(v["jitter_ns"], 7);
        assert!(v.get("delay").is_none());
        assert_eq!(serde_json::from_value::<DirectionConfig>(v).unwrap(), d);
        // As a lab brought up by an earlier build wrote its state file.
        let old = serde_json::json!({"rate_bits_per_s": null, "loss": 0.0,
            "delay": {"secs": 0, "nanos": 1_500_000}, "jitter": {"secs": 0, "nanos": 7}});
        assert_eq!(serde_json::from_value::<DirectionConfig>(old).unwrap(), d);
        // Out of range is an error, not a panic.
        let huge = serde_json::json!({"rate_bits_per_s": null, "loss": 0.0, "jitter_ns": 0,
            "delay": {"secs": u64::MAX, "nanos": 2_000_000_000u32}});
        assert!(serde_json::from_value::<DirectionConfig>(huge).is_err());
    }
}
