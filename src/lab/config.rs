//! What an emulated link is: per-direction rate, delay, jitter and loss, the MTU, and named
//! profiles for typical paths.

use std::time::Duration;

use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};

use super::link::QueueLimit;
use crate::units::{self, Rate};

/// One direction of the link.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DirectionConfig {
    /// Bits per second; None = unlimited.
    pub rate_bits_per_s: Option<f64>,
    /// One-way delay added in this direction.
    pub delay: Duration,
    /// Uniform jitter of the delay, +/- this much (frames may then be reordered).
    pub jitter: Duration,
    /// Probability that a frame is dropped, 0..1.
    pub loss: f64,
    /// The queue in front of the wire; None: the default for the rate and MTU (absent in
    /// state files of labs made before queues were configurable).
    #[serde(default)]
    pub queue: Option<QueueLimit>,
}

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
            "rate {}{}, one-way delay {:.3} ms, jitter {:.3} ms, loss {:.4}%",
            self.rate_bits_per_s
                .map(|r| format!("{} Mbit/s", r / 1e6))
                .unwrap_or_else(|| "unlimited".into()),
            self.effective_queue(mtu)
                .map(|q| format!(" (queue {})", q.describe()))
                .unwrap_or_default(),
            self.delay.as_secs_f64() * 1e3,
            self.jitter.as_secs_f64() * 1e3,
            self.loss * 100.0
        )
    }
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ValueEnum, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Mechanism {
    /// wirebench's delay line (the emulation the tests check); the same as delay-line.
    Auto,
    /// The kernel's netem qdisc with its own `rate` and `limit` (fails where the kernel lacks
    /// netem; not exercised by wirebench's tests).
    Netem,
    /// wirebench's own delay line in a middle namespace.
    DelayLine,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ValueEnum)]
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
    fn direction(self) -> DirectionConfig {
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
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LinkConfig {
    /// Host a to host b.
    pub forward: DirectionConfig,
    /// Host b to host a.
    pub back: DirectionConfig,
    pub mtu: u64,
    pub mechanism: Mechanism,
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

fn bits(s: &str, what: &str) -> Result<f64> {
    match units::parse_rate(s).map_err(|e| anyhow::anyhow!("--{what}: {e}"))? {
        Rate::BitsPerSecond(b) => Ok(b),
        Rate::PacketsPerSecond(_) => {
            bail!("--{what}: a link rate is in bits per second, not packets")
        }
    }
}

fn loss(s: &str, what: &str) -> Result<f64> {
    units::parse_percent(s).map_err(|e| anyhow::anyhow!("--{what}: {e}"))
}

impl LinkArgs {
    pub fn to_config(&self) -> Result<LinkConfig> {
        let base = self.profile.map(Profile::direction).unwrap_or_default();
        let mut fwd = base;
        if let Some(r) = &self.rate {
            fwd.rate_bits_per_s = Some(bits(r, "rate")?);
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
        if self.queue.is_some() {
            fwd.queue = self.queue;
        }
        let mut back = fwd;
        if let Some(r) = &self.rate_back {
            back.rate_bits_per_s = Some(bits(r, "rate-back")?);
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
        if self.queue_back.is_some() {
            back.queue = self.queue_back;
        }
        if !(68..=65_535).contains(&self.mtu) {
            bail!("--mtu {}: an IPv4 link MTU is 68 to 65535 bytes", self.mtu);
        }
        for d in [fwd, back] {
            if d.delay > Duration::from_secs(10) || d.jitter > Duration::from_secs(10) {
                bail!("delay and jitter are limited to 10 s");
            }
            if d.rate_bits_per_s.is_some_and(|r| r < 8_000.0) {
                bail!("a link rate below 8 kbit/s is not supported");
            }
        }
        Ok(LinkConfig {
            forward: fwd,
            back,
            mtu: self.mtu,
            mechanism: self.mechanism,
        })
    }
}
