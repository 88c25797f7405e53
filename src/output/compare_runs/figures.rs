//! Which figures of a point are compared, in the units shown, with their per-run values.
//!
//! Each with its verdict as a measurement.

use crate::model::PointResult;
use crate::stats::validity::Validity;

/// One figure of one point: its value and what can be tested about it.
pub(super) struct Figure {
    pub(super) name: &'static str,
    pub(super) higher_is_better: bool,
    /// Value shown, in display units.
    pub(super) value: f64,
    /// The figure in every run (any unit proportional to the value's), when kept per run.
    pub(super) runs: Option<Vec<f64>>,
    /// The verdict on the figure the value comes from.
    pub(super) validity: Validity,
}

fn mean_of_runs(p: &PointResult) -> Option<f64> {
    let v = &p.headline.values;
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// The figures of a point. `repeated` says whether both points have two runs or more, so
/// that the mean of the runs is shown; the same basis is used on both sides.
pub(super) fn figures(pattern: &str, p: &PointResult, repeated: bool) -> Vec<Figure> {
    let mut out = Vec::new();
    let runs = Some(p.headline.values.clone());
    match pattern {
        "pingpong" => {
            if repeated {
                if let Some(m) = mean_of_runs(p) {
                    out.push(Figure {
                        name: "one-way latency, mean of runs (us)",
                        higher_is_better: false,
                        value: m / 1e3,
                        runs,
                        validity: p.headline.validity.clone(),
                    });
                }
            } else if let Some(l) = p.latency.as_ref() {
                out.push(Figure {
                    name: "one-way latency, RTT/2 mean (us)",
                    higher_is_better: false,
                    value: l.rtt.mean_ns / 2e3,
                    runs,
                    validity: p.figures_validity(),
                });
            }
        }
        "rr" | "crr" => {
            let Some(l) = p.latency.as_ref() else {
                return out;
            };
            out.push(Figure {
                name: "transactions per second (1/s)",
                higher_is_better: true,
                value: if repeated {
                    mean_of_runs(p).unwrap_or(l.transactions_per_s)
                } else {
                    l.transactions_per_s
                },
                runs,
                validity: if repeated {
                    p.headline.validity.clone()
                } else {
                    l.validity.clone()
                },
            });
            // The round trips are merged over the runs: no per-run figure to test. Per
            // connection it is the inverse of the transactions per second, tested above.
            out.push(Figure {
                name: "transaction round trip, mean (us)",
                higher_is_better: false,
                value: l.rtt.mean_ns / 1e3,
                runs: None,
                validity: l.validity.clone(),
            });
        }
        _ => {
            let Some(s) = p.stream.as_ref() else {
                return out;
            };
            let receiver: f64 = s.totals.iter().map(|t| t.receiver_bits_per_s).sum();
            out.push(Figure {
                name: "receiver throughput (Mbit/s)",
                higher_is_better: true,
                value: if repeated {
                    mean_of_runs(p).unwrap_or(receiver) / 1e6
                } else {
                    receiver / 1e6
                },
                runs,
                validity: if repeated {
                    p.headline.validity.clone()
                } else {
                    s.receivers_validity()
                },
            });
        }
    }
    out
}
