//! When a figure is a measurement and when it is not: the floors below which wirebench marks a
//! figure invalid, with the reason, instead of printing it as a result. Every floor is here,
//! with where it comes from; the table, the JSON, the CSV and the HTML report all take their
//! verdicts from these functions.
//!
//! A stream's rate is bytes over a timed phase. Its two ends are each set by a read or a
//! write returning, so each end is off by up to one call's worth of bytes and by the time the
//! thread took to run again. A phase too short or too few calls long makes those errors the
//! figure itself: a lab stream with tiny buffers once timed its receiver over 0.3 ms and
//! 160 B in one read, and printed 4.23 Mbit/s against the sender's 0.08.

use serde::{Deserialize, Serialize};

use crate::units::format_seconds;

/// The shortest timed phase a stream side's rate is computed over: 10 ms.
///
/// Each end of a timed phase is a read or a write returning, and a blocked thread runs again
/// some 5-50 us after its data arrive (a cross-CPU wake-up costs 25-30 us on a small two-CPU
/// virtual machine, the one the README's figures were measured on). Two such errors of up to 50 us
/// stay within 1% of the figure from 10 ms on (2 x 50 us / 10 ms). The clock itself is far finer:
/// `Instant` reads CLOCK_MONOTONIC, which resolves 1 ns with the TSC and about 1 us with the
/// slowest clocksources (hpet, acpi_pm), and 10 ms is 10^4 times that, well above the usual rule of
/// 1000 times a clock's resolution.
pub const MIN_TIMED_S: f64 = 0.010;

/// The fewest writes, reads or datagrams a stream side's rate is computed from: 10.
///
/// The receiver's clock starts at a read whose bytes it does not count, and either side's
/// phase ends at its last call: the count is off by up to one call at each end, which is
/// 10% at 10 calls (and 1% at 100, where most streams are after 10 ms). No separate byte
/// floor: a call may carry one byte or megabytes, and a slow link's few bytes over a long
/// phase are a perfectly good measurement; what makes a rate meaningless is too few calls
/// or too short a time, which the two floors cover.
pub const MIN_TIMED_MESSAGES: u64 = 10;

/// The shortest a side's timed phase may be against the other side's: 10%.
///
/// Both sides time the same transfer, each over its own clock, so their phases differ by the
/// buffers in between and the warm-up, not by a factor of ten. A receiver that timed a
/// tenth of what the sender did timed a burst at the end (the rest of the data arrived
/// during its warm-up), and a sender that timed a tenth of the receiver's phase filled
/// socket buffers rather than the path: the rate is that burst's, not the transfer's.
pub const MIN_PHASE_RATIO: f64 = 0.10;

/// The fewest timed samples a latency point's mean and confidence interval stand on: 30.
///
/// The Student-t interval of a mean holds its nominal coverage for non-normal data only once
/// the central limit theorem has taken hold; for right-skewed distributions such as
/// latencies the usual threshold is 30 samples, where t(0.975, 29) = 2.045 is also within
/// 5% of the normal 1.96. Fewer and the interval's "95%" is not what it says.
pub const MIN_LATENCY_SAMPLES: u64 = 30;

/// The fewest distinct sizes a Hockney fit t(n) = t0 + n / r_inf is made from: 3. A line
/// through two points always fits exactly (R^2 = 1) and says nothing about linearity; with
/// three there is one degree of freedom left to judge the fit by.
pub const MIN_FIT_SIZES: usize = 3;

/// A verdict on one figure, serialised next to it as `"valid"` and `"invalid_reason"`.
///
/// `valid` is null only in documents written before wirebench judged figures; reading such a
/// document fills it in from the counts it always stored (see
/// [`crate::model::RunDocument::fill_validity`]), and leaves it null only where the
/// counts are not there (earlier runs of a repeated point).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Validity {
    #[serde(default)]
    pub valid: Option<bool>,
    /// Why the figure is not a measurement; null when it is.
    #[serde(default)]
    pub invalid_reason: Option<String>,
}

impl Validity {
    pub fn valid() -> Validity {
        Validity {
            valid: Some(true),
            invalid_reason: None,
        }
    }

    pub fn invalid(reason: impl Into<String>) -> Validity {
        Validity {
            valid: Some(false),
            invalid_reason: Some(reason.into()),
        }
    }

    /// Valid when `reason` is None.
    pub fn from_reason(reason: Option<String>) -> Validity {
        reason.map_or_else(Validity::valid, Validity::invalid)
    }

    /// Judged and found wanting. An unjudged figure (`valid` null) is not invalid.
    pub fn is_invalid(&self) -> bool {
        self.valid == Some(false)
    }

    pub fn is_judged(&self) -> bool {
        self.valid.is_some()
    }

    /// The reason, or "" for a valid or unjudged figure.
    pub fn reason(&self) -> &str {
        if self.is_invalid() {
            self.invalid_reason.as_deref().unwrap_or("invalid")
        } else {
            ""
        }
    }

    /// "!" after an invalid figure in a table, "" otherwise.
    pub fn mark(&self) -> &'static str {
        if self.is_invalid() {
            "!"
        } else {
            ""
        }
    }
}

/// Invalid if any part is; the reasons of the invalid parts joined, each with its label.
pub fn all<'a>(parts: impl IntoIterator<Item = (String, &'a Validity)>) -> Validity {
    let mut reasons = Vec::new();
    let mut judged = true;
    for (label, v) in parts {
        judged &= v.is_judged();
        if v.is_invalid() {
            reasons.push(if label.is_empty() {
                v.reason().to_owned()
            } else {
                format!("{label}: {}", v.reason())
            });
        }
    }
    if !reasons.is_empty() {
        Validity::invalid(reasons.join("; "))
    } else if judged {
        Validity::valid()
    } else {
        Validity::default()
    }
}

/// What one side of a stream counted in its timed phase: the basis of its rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timed {
    pub bytes: u64,
    /// Writes, reads or datagrams.
    pub messages: u64,
    pub seconds: f64,
}

/// Judges one side's rate from its timed phase. `noun` names its calls ("write", "read",
/// "datagram"); `other` is the other side's timed phase, with its name, for the ratio floor.
pub fn rate(t: Timed, noun: &str, other: Option<(&str, f64)>) -> Validity {
    let mut below = Vec::new();
    if t.seconds.is_nan() || t.seconds < MIN_TIMED_S {
        below.push(format_seconds(MIN_TIMED_S));
    }
    if t.messages < MIN_TIMED_MESSAGES {
        below.push(format!("{MIN_TIMED_MESSAGES} {noun}s"));
    }
    let mut reasons = Vec::new();
    if !below.is_empty() {
        reasons.push(format!(
            "timed phase {}, {} B in {} {noun}{}: below the floor of {}",
            format_seconds(t.seconds.max(0.0)),
            t.bytes,
            t.messages,
            if t.messages == 1 { "" } else { "s" },
            below.join(" and ")
        ));
    }
    if let Some((name, other_s)) = other {
        if t.seconds > 0.0 && other_s > 0.0 && t.seconds < MIN_PHASE_RATIO * other_s {
            reasons.push(format!(
                "timed phase {} is {:.1}% of the {name}'s {}: under the floor of {:.0}%, it timed a burst, not the transfer",
                format_seconds(t.seconds),
                t.seconds / other_s * 100.0,
                format_seconds(other_s),
                MIN_PHASE_RATIO * 100.0
            ));
        }
    }
    Validity::from_reason((!reasons.is_empty()).then(|| reasons.join("; ")))
}

/// Judges a latency point: its mean and interval from `samples` timed transactions.
///
/// Its transactions per second need no floor of their own: an exchange's timed phase
/// starts and ends with the pattern's own clock reads around its transactions, so its ends
/// are off by a fraction of one transaction out of `samples`, which the same floor bounds
/// (under 1/30), however short the phase.
pub fn latency(samples: u64) -> Validity {
    Validity::from_reason((samples < MIN_LATENCY_SAMPLES).then(|| {
        format!(
            "{samples} sample{}: below the floor of {MIN_LATENCY_SAMPLES} for a mean and its confidence interval",
            if samples == 1 { "" } else { "s" }
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reproduction_is_refused_with_its_counts() {
        // The lab stream with tiny buffers: the receiver timed 160 B in one read over 0.3 ms
        // while its sender timed 300 ms.
        let v = rate(
            Timed {
                bytes: 160,
                messages: 1,
                seconds: 0.0003,
            },
            "read",
            Some(("sender", 0.3)),
        );
        assert!(v.is_invalid());
        assert_eq!(
            v.reason(),
            "timed phase 0.30 ms, 160 B in 1 read: below the floor of 10.0 ms and 10 reads; \
             timed phase 0.30 ms is 0.1% of the sender's 300.0 ms: under the floor of 10%, \
             it timed a burst, not the transfer"
        );
        assert_eq!(v.mark(), "!");
    }

    #[test]
    fn floors_are_inclusive_and_each_is_named_alone() {
        let at = |bytes, messages, seconds| Timed {
            bytes,
            messages,
            seconds,
        };
        assert_eq!(rate(at(1, 10, 0.010), "write", None), Validity::valid());
        assert_eq!(
            rate(at(1000, 9, 2.0), "write", None).reason(),
            "timed phase 2.000 s, 1000 B in 9 writes: below the floor of 10 writes"
        );
        assert_eq!(
            rate(at(5_000_000, 400, 0.0099), "datagram", None).reason(),
            "timed phase 9.90 ms, 5000000 B in 400 datagrams: below the floor of 10.0 ms"
        );
        // Nothing timed at all.
        assert_eq!(
            rate(at(0, 0, 0.0), "read", Some(("sender", 1.0))).reason(),
            "timed phase 0.0 us, 0 B in 0 reads: below the floor of 10.0 ms and 10 reads"
        );
        // Exactly 10% of the other side is enough; a little less is not.
        assert!(!rate(at(1, 100, 0.1), "read", Some(("sender", 1.0))).is_invalid());
        assert_eq!(
            rate(at(1, 100, 0.099), "read", Some(("sender", 1.0))).reason(),
            "timed phase 99.0 ms is 9.9% of the sender's 1.000 s: under the floor of 10%, \
             it timed a burst, not the transfer"
        );
    }

    #[test]
    fn latency_needs_thirty_samples() {
        assert_eq!(latency(30), Validity::valid());
        assert_eq!(
            latency(29).reason(),
            "29 samples: below the floor of 30 for a mean and its confidence interval"
        );
        assert_eq!(
            latency(1).reason(),
            "1 sample: below the floor of 30 for a mean and its confidence interval"
        );
    }

    #[test]
    fn all_joins_the_invalid_parts_and_keeps_unknown_unknown() {
        let ok = Validity::valid();
        let bad = Validity::invalid("too short");
        assert_eq!(all([("a".into(), &ok), ("b".into(), &ok)]), ok);
        assert_eq!(
            all([("stream 0".into(), &bad), ("stream 1".into(), &ok)]).reason(),
            "stream 0: too short"
        );
        assert_eq!(all([(String::new(), &bad)]).reason(), "too short");
        let unknown = Validity::default();
        assert_eq!(all([("a".into(), &ok), ("b".into(), &unknown)]), unknown);
        assert!(all([("a".into(), &bad), ("b".into(), &unknown)]).is_invalid());
    }

    #[test]
    fn absent_fields_read_as_unjudged() {
        let v: Validity = serde_json::from_str("{}").unwrap();
        assert_eq!(v, Validity::default());
        assert!(!v.is_invalid() && !v.is_judged());
        let v: Validity =
            serde_json::from_str(r#"{"valid": false, "invalid_reason": "why"}"#).unwrap();
        assert_eq!(v.reason(), "why");
    }
}
