//! Calibrated pacing: the highest sending rate at which a point still meets its delivery
//! target ([Müller et al. 1997], see REFERENCES.md, paced PVM over ATM until "at least 95%
//! delivered" and "no sender loss, at most 5% lost at the receiver"). Bisection in the logarithm of
//! the rate, since the answer may lie anywhere over decades; both ends are tried first, so the
//! answer is bracketed by a rate that met the target and one that did not (or is an end, said so).

use anyhow::Result;
use serde::Serialize;

use super::file::SearchSpec;

/// What one run at a rate delivered.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Delivery {
    /// Messages received / messages sent.
    pub delivered: f64,
    /// 1 - delivered.
    pub receiver_loss: f64,
    /// How far the sender fell short of the asked rate: 1 - sent / asked (0 when it kept up).
    pub sender_shortfall: f64,
    /// Why the run's figures are not measurements, when the physics guard or a floor marked
    /// any of them invalid: such a probe meets no target (see [`Delivery::misses`]).
    pub invalid_reason: Option<String>,
}

impl Delivery {
    pub fn new(sent: u64, received: u64, sent_bits_per_s: f64, asked_bits_per_s: f64) -> Delivery {
        let delivered = if sent == 0 {
            0.0
        } else {
            (received as f64 / sent as f64).min(1.0)
        };
        Delivery {
            delivered,
            receiver_loss: 1.0 - delivered,
            sender_shortfall: (1.0 - sent_bits_per_s / asked_bits_per_s).max(0.0),
            invalid_reason: None,
        }
    }

    /// The same run, its figures marked invalid for `reason`.
    pub fn invalid(self, reason: impl Into<String>) -> Delivery {
        Delivery {
            invalid_reason: Some(reason.into()),
            ..self
        }
    }

    pub fn meets(&self, target: &SearchSpec) -> bool {
        self.misses(target).is_empty()
    }

    /// Why the run misses the target, one reason per bound it breaks (empty when it meets
    /// it). Each bound is compared with a slack of [`SHARE_EPSILON`]: the shares are ratios
    /// of counts and rates computed in floating point, and a sender paced exactly at 5e6
    /// bit/s reads 4999999.999999999 (its bits over its phase), which a bound of 0.0 must
    /// accept.
    pub fn misses(&self, target: &SearchSpec) -> Vec<String> {
        let pct = |x: f64| format!("{:.4}%", x * 100.0);
        let mut out = Vec::new();
        // A probe whose figures are invalid is a miss, with the guard's reason, not re-probed:
        // its counts cannot say the target was met (a receiver above the link, a lab that fell
        // behind its schedule), and a miss can only make the answer lower, never a rate the
        // path did not carry. Re-probing the same rate on the same loaded host tends to give
        // the same verdict, and would make the search's length depend on the load.
        if let Some(why) = &self.invalid_reason {
            out.push(format!("figures invalid: {why}"));
        }
        if let Some(m) = target.min_delivered {
            if self.delivered < m - SHARE_EPSILON {
                out.push(format!(
                    "{} delivered, below min_delivered {}",
                    pct(self.delivered),
                    pct(m)
                ));
            }
        }
        if let Some(m) = target.max_receiver_loss {
            if self.receiver_loss > m + SHARE_EPSILON {
                out.push(format!(
                    "{} lost at the receiver, above max_receiver_loss {}",
                    pct(self.receiver_loss),
                    pct(m)
                ));
            }
        }
        if let Some(m) = target.max_sender_loss {
            if self.sender_shortfall > m + SHARE_EPSILON {
                out.push(format!(
                    "sender {} short of the rate, above max_sender_loss {}",
                    pct(self.sender_shortfall),
                    pct(m)
                ));
            }
        }
        out
    }
}

/// Slack of every bound of a target, as a share: one part in a million. Far above the
/// rounding of a ratio of doubles (1e-16) and the nanosecond of a phase's clock over its
/// milliseconds, far below any loss a target could mean (a target's shares are percents).
pub const SHARE_EPSILON: f64 = 1e-6;

/// One rate tried.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Probe<T> {
    pub rate_bits_per_s: f64,
    pub delivery: Delivery,
    pub meets: bool,
    /// What the caller keeps of the run (its id).
    pub run: T,
}

/// Where the search ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome<T> {
    /// The highest rate tried that met the target; None when even the lowest did not.
    pub best: Option<Probe<T>>,
    /// The lowest rate tried that did not; None when even the highest met it (the answer
    /// is then only "at least the upper end").
    pub first_failing: Option<Probe<T>>,
    pub probes: Vec<Probe<T>>,
}

/// Runs the search: `measure(rate)` is one run at that rate.
pub fn bisect<T: Copy>(
    target: &SearchSpec,
    low: f64,
    high: f64,
    mut measure: impl FnMut(f64) -> Result<(Delivery, T)>,
) -> Result<Outcome<T>> {
    let mut probes = Vec::new();
    let mut probe = |rate: f64, probes: &mut Vec<Probe<T>>| -> Result<Probe<T>> {
        let (delivery, run) = measure(rate)?;
        let p = Probe {
            rate_bits_per_s: rate,
            meets: delivery.meets(target),
            delivery,
            run,
        };
        probes.push(p.clone());
        Ok(p)
    };
    let top = probe(high, &mut probes)?;
    if top.meets {
        return Ok(Outcome {
            best: Some(top),
            first_failing: None,
            probes,
        });
    }
    let bottom = probe(low, &mut probes)?;
    if !bottom.meets {
        return Ok(Outcome {
            best: None,
            first_failing: Some(bottom),
            probes,
        });
    }
    let (mut good, mut bad) = (bottom, top);
    for _ in 0..target.steps {
        let mid = (good.rate_bits_per_s * bad.rate_bits_per_s).sqrt();
        let p = probe(mid, &mut probes)?;
        if p.meets {
            good = p;
        } else {
            bad = p;
        }
    }
    Ok(Outcome {
        best: Some(good),
        first_failing: Some(bad),
        probes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> SearchSpec {
        SearchSpec {
            low: "1M".into(),
            high: "1G".into(),
            steps: 10,
            min_delivered: Some(0.95),
            max_receiver_loss: None,
            max_sender_loss: Some(0.0),
        }
    }

    /// A path that carries up to 123 Mbit/s: above it, the excess is lost.
    fn path(rate: f64) -> Result<(Delivery, u32)> {
        let carried = rate.min(123e6);
        let sent = (rate / 1e3) as u64;
        let received = (carried / 1e3) as u64;
        Ok((Delivery::new(sent, received, rate, rate), 0))
    }

    #[test]
    fn finds_the_rate_where_delivery_falls_below_the_target() {
        let o = bisect(&target(), 1e6, 1e9, path).unwrap();
        let best = o.best.unwrap().rate_bits_per_s;
        let failing = o.first_failing.unwrap().rate_bits_per_s;
        // 95% delivered up to 123/0.95 = 129.47 Mbit/s.
        assert!(best <= 129.48e6 && failing > 129.47e6, "{best} {failing}");
        // Ten halvings of a 1000x range in log space: within 1000^(1/1024) = 0.68%.
        assert!(failing / best < 1.0068, "{best} {failing}");
        assert_eq!(o.probes.len(), 12);
    }

    #[test]
    fn the_ends_answer_at_once() {
        let o = bisect(&target(), 1e6, 100e6, path).unwrap();
        assert_eq!(o.probes.len(), 1);
        assert_eq!(o.best.unwrap().rate_bits_per_s, 100e6);
        assert!(o.first_failing.is_none());
        let o = bisect(&target(), 200e6, 1e9, path).unwrap();
        assert!(o.best.is_none());
        assert_eq!(o.probes.len(), 2);
    }

    #[test]
    fn a_sender_that_falls_short_fails_a_no_sender_loss_target() {
        let d = Delivery::new(1000, 1000, 90e6, 100e6);
        assert!((d.sender_shortfall - 0.1).abs() < 1e-12);
        assert!(!d.meets(&target()));
        assert!(Delivery::new(1000, 960, 100e6, 100e6).meets(&target()));
        assert!(!Delivery::new(1000, 940, 100e6, 100e6).meets(&target()));
        assert_eq!(Delivery::new(0, 0, 0.0, 1e6).delivered, 0.0);
    }

    /// The paced sender once reported 4999999.999999999 bit/s for 5e6 asked, and a
    /// `max_sender_loss = 0.0` target failed every probe with "sender 0.00% short" and no
    /// reason. Within the slack it meets the target; beyond it, the reason is given.
    #[test]
    fn bounds_compare_with_a_relative_slack_and_a_miss_says_why() {
        let d = Delivery::new(1000, 1000, 4_999_999.999_999_999, 5e6);
        assert!(d.sender_shortfall > 0.0, "the rounding is there: {d:?}");
        assert!(d.meets(&target()), "{:?}", d.misses(&target()));
        // 95 % delivered exactly meets min_delivered 0.95, and its loss 1 - 0.95 (which is
        // 0.050000000000000044 in doubles) meets max_receiver_loss 0.05.
        let loss = SearchSpec {
            max_receiver_loss: Some(0.05),
            ..target()
        };
        let d = Delivery::new(1000, 950, 5e6, 5e6);
        assert!(d.receiver_loss > 0.05);
        assert!(d.meets(&loss), "{:?}", d.misses(&loss));
        // A real shortfall of 0.01 % is a miss, with its reason.
        let d = Delivery::new(1000, 1000, 4_999_500.0, 5e6);
        assert_eq!(
            d.misses(&target()),
            vec!["sender 0.0100% short of the rate, above max_sender_loss 0.0000%"]
        );
        let d = Delivery::new(1000, 900, 5e6, 5e6);
        assert_eq!(
            d.misses(&loss),
            vec![
                "90.0000% delivered, below min_delivered 95.0000%",
                "10.0000% lost at the receiver, above max_receiver_loss 5.0000%"
            ]
        );
    }

    /// A probe whose figures the physics guard marked invalid meets no target, whatever its
    /// counts say, and the miss gives the guard's reason; the search then answers below it.
    #[test]
    fn an_invalid_probe_is_a_miss_with_its_reason() {
        let why = "receiver 136.6 Mbit/s is 109.1% of the link's goodput 125.2 Mbit/s";
        let d = Delivery::new(1000, 1000, 5e6, 5e6).invalid(why);
        assert!(!d.meets(&target()));
        assert_eq!(d.misses(&target()), vec![format!("figures invalid: {why}")]);
        // The path of 123 Mbit/s, whose probes above 100 Mbit/s are marked invalid: the answer
        // is the highest valid rate that met the target, below 100, where it was 129.47 before.
        let o = bisect(&target(), 1e6, 1e9, |rate| {
            let (d, run) = path(rate)?;
            Ok((if rate > 100e6 { d.invalid(why) } else { d }, run))
        })
        .unwrap();
        let best = o.best.as_ref().unwrap();
        assert!(best.rate_bits_per_s <= 100e6, "{}", best.rate_bits_per_s);
        assert!(best.delivery.invalid_reason.is_none());
        let failing = o.first_failing.as_ref().unwrap();
        assert!(failing.rate_bits_per_s > 100e6);
        assert!(failing.delivery.misses(&target())[0].starts_with("figures invalid"));
        assert!(o
            .probes
            .iter()
            .all(
                |p| p.meets == p.delivery.invalid_reason.is_none() && p.rate_bits_per_s <= 100e6
                    || !p.meets
            ));
    }
}
