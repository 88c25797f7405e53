//! What an emulated link is: per-direction rate, delay, jitter and loss, the MTU, and named
//! profiles for typical paths.

use std::time::Duration;

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

use super::link::QueueLimit;

/// One direction of the link.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DirectionConfig {
    /// Bits per second; None = unlimited.
    pub rate_bits_per_s: Option<f64>,
    /// One-way delay added in this direction, nanoseconds (`delay` in lab state files and
    /// run documents written before times were all in nanoseconds still reads).
    #[serde(
        rename = "delay_ns",
        alias = "delay",
        with = "crate::units::duration_ns"
    )]
    #[schemars(with = "u64")]
    pub delay: Duration,
    /// Uniform jitter of the delay, +/- this much (frames may then be reordered), nanoseconds.
    #[serde(
        rename = "jitter_ns",
        alias = "jitter",
        with = "crate::units::duration_ns"
    )]
    #[schemars(with = "u64")]
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

#[cfg(test)]
mod tests {
    use super::*;

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
