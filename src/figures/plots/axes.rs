//! A chart's axes: the range each shows of the data, and where and how ticks are labelled.

use std::ops::Range;

use super::figure::{Axis, Scale, Ticks};
use super::numbers::fmt_num;
use crate::units::format_bytes;

/// On a log axis plotters puts ticks at every multiple of a power of ten (10, 20, ... 90);
/// labelling only 1, 2 and 5 times a power keeps the labels apart.
fn log_label_wanted(v: f64) -> bool {
    if v <= 0.0 || !v.is_finite() {
        return false;
    }
    let mantissa = v / 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .any(|m| (mantissa - m).abs() < 1e-6 * m)
}

/// A tick's label on a log axis: numbers only at 1, 2 and 5 times a power of ten,
/// percentiles only at whole nines.
pub(super) fn fmt_log_tick(v: f64, ticks: Ticks) -> String {
    if ticks == Ticks::Number && !log_label_wanted(v) {
        return String::new();
    }
    fmt_tick(v, ticks)
}

/// The percentile a [`Ticks::Nines`] value stands for, at a power of ten: "0%", "90%",
/// "99%", "99.9%"; nothing between the nines.
fn fmt_nines(v: f64) -> String {
    if !(v >= 1.0 && v.is_finite()) {
        return String::new();
    }
    let nines = v.log10().round();
    if (10f64.powf(nines) - v).abs() > 1e-6 * v || nines > 15.0 {
        return String::new();
    }
    match nines as usize {
        0 => "0%".into(),
        1 => "90%".into(),
        n => format!("99{}{}%", if n > 2 { "." } else { "" }, "9".repeat(n - 2)),
    }
}

/// A tick's label on a linear axis, and a labelled tick's on a log axis.
pub(super) fn fmt_tick(v: f64, ticks: Ticks) -> String {
    match ticks {
        Ticks::Number => fmt_num(v),
        Ticks::Bytes if (1.0..1.8e19).contains(&v) => format_bytes(v.round() as u64),
        Ticks::Bytes => fmt_num(v),
        Ticks::Nines => fmt_nines(v),
        Ticks::Utc { with_date } => fmt_utc(v, with_date),
    }
}

/// A UTC clock time of `secs` since the Unix epoch (whole seconds): `HH:MM:SS`, or
/// `MM-DD HH:MM` with the date; nothing for a time before the epoch or past year 9999.
fn fmt_utc(secs: f64, with_date: bool) -> String {
    if !(0.0..253_402_300_800.0).contains(&secs) {
        return String::new();
    }
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs.round() as u64);
    // "YYYY-MM-DDTHH:MM:SSZ"
    let s = humantime::format_rfc3339_seconds(t).to_string();
    if with_date {
        format!("{} {}", &s[5..10], &s[11..16])
    } else {
        s[11..19].to_owned()
    }
}

/// Positive values spanning more than this factor (a decade) go on a log axis.
pub const LOG_RATIO: f64 = 10.0;

/// An axis's scale from the values it shows: log when the positive values span more than
/// [`LOG_RATIO`], so that a stall at 0.5 Mbit/s beside 500 Mbit/s does not sit on the axis.
/// Linear when `zero_matters` (a rate, a count) and some value is 0 or below: a log axis
/// would leave it out.
pub fn auto_scale(values: impl IntoIterator<Item = f64>, zero_matters: bool) -> Scale {
    let vs: Vec<f64> = values.into_iter().filter(|v| v.is_finite()).collect();
    if zero_matters && vs.iter().any(|v| *v <= 0.0) {
        return Scale::Linear;
    }
    let positive = vs.iter().copied().filter(|v| *v > 0.0);
    let lo = positive.clone().reduce(f64::min);
    let hi = positive.reduce(f64::max);
    match (lo, hi) {
        (Some(lo), Some(hi)) if hi / lo > LOG_RATIO => Scale::Log,
        _ => Scale::Linear,
    }
}

/// Whether a value has a place on the axis: finite, and positive on a log axis.
pub(super) fn usable(v: f64, scale: Scale) -> bool {
    v.is_finite() && (scale == Scale::Linear || v > 0.0)
}

/// The data range of one axis, padded; `None` without a single usable value.
pub(super) fn range_of(values: &[f64], axis: &Axis) -> Option<Range<f64>> {
    let vs: Vec<f64> = values
        .iter()
        .copied()
        .filter(|v| usable(*v, axis.scale))
        .collect();
    let lo = vs.iter().copied().reduce(f64::min)?;
    let hi = vs.iter().copied().reduce(f64::max)?;
    Some(match axis.scale {
        Scale::Log => {
            let (lo, hi) = if hi / lo < 1.5 {
                (lo / 1.5, hi * 1.5)
            } else {
                (lo, hi)
            };
            lo / 1.15..hi * 1.15
        }
        // Times since the epoch: a pad in proportion to the value would span decades around
        // one run; half a minute either side shows it, and a span is padded by 6% of itself.
        Scale::Linear if matches!(axis.ticks, Ticks::Utc { .. }) => {
            let pad = if hi - lo < 1.0 {
                30.0
            } else {
                ((hi - lo) * 0.06).max(0.5)
            };
            lo - pad..hi + pad
        }
        Scale::Linear if axis.from_zero && lo >= 0.0 => 0.0..if hi > 0.0 { hi * 1.08 } else { 1.0 },
        Scale::Linear => {
            let pad = if hi > lo {
                (hi - lo) * 0.06
            } else {
                lo.abs().max(1.0) * 0.1
            };
            lo - pad..hi + pad
        }
    })
}

/// Log tick spacing: powers of two for bytes, spread to about eight labels; decades otherwise.
pub(super) fn log_base(range: &Range<f64>, ticks: Ticks) -> f64 {
    match ticks {
        Ticks::Number | Ticks::Nines | Ticks::Utc { .. } => 10.0,
        Ticks::Bytes => {
            let octaves = (range.end / range.start).log2().max(1.0);
            2f64.powf((octaves / 8.0).ceil().max(1.0))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_spanning_decades_get_a_log_axis() {
        let decades = (0..=30).map(|k| 0.5 * 10f64.powf(f64::from(k) / 10.0));
        assert_eq!(auto_scale(decades.clone(), true), Scale::Log);
        assert_eq!(auto_scale([40.0, 45.0, 52.0, 60.0], true), Scale::Linear);
        // A measured 0 has no place on a log axis; where 0 means nothing it is left out.
        assert_eq!(
            auto_scale(decades.clone().chain([0.0]), true),
            Scale::Linear
        );
        assert_eq!(auto_scale(decades.chain([0.0]), false), Scale::Log);
        assert_eq!(auto_scale([], true), Scale::Linear);
    }

    #[test]
    fn a_nines_axis_is_labelled_at_whole_nines() {
        let labels: Vec<String> = [1.0, 10.0, 100.0, 1000.0, 1e4, 1e5]
            .iter()
            .map(|v| fmt_log_tick(*v, Ticks::Nines))
            .collect();
        assert_eq!(labels, ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%"]);
        assert_eq!(fmt_log_tick(20.0, Ticks::Nines), "");
        assert_eq!(fmt_log_tick(0.5, Ticks::Nines), "");
        assert!((super::super::figure::nines_x(0.999) - 1000.0).abs() < 1e-6);
    }

    #[test]
    fn ticks_read_well() {
        assert_eq!(fmt_tick(65536.0, Ticks::Bytes), "64K");
        assert_eq!(fmt_log_tick(20.0, Ticks::Number), "20");
        assert_eq!(fmt_log_tick(30.0, Ticks::Number), "");
        assert_eq!(fmt_log_tick(0.5, Ticks::Number), "0.5");
        assert_eq!(fmt_log_tick(1000.0, Ticks::Number), "1000");
    }

    #[test]
    fn utc_ticks_are_clock_times() {
        // 2026-03-30T12:34:56Z
        let t = 1_774_874_096.0;
        assert_eq!(fmt_tick(t, Ticks::Utc { with_date: false }), "12:34:56");
        assert_eq!(fmt_tick(t, Ticks::Utc { with_date: true }), "03-30 12:34");
        assert_eq!(fmt_tick(-1.0, Ticks::Utc { with_date: false }), "");
        assert_eq!(fmt_tick(f64::NAN, Ticks::Utc { with_date: true }), "");
    }
}
