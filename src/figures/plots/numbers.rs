//! Numbers as figures and tables write them: few digits, byte counts with binary suffixes.

use crate::units::format_bytes;

/// A number for a tick label or a figure's cell: at most 4 significant digits, no trailing
/// zeros. Outside 0.001 to 10⁷ it is in scientific notation ("1.50e9"), which a log axis
/// spanning many decades needs to keep its labels short; figures give their values in units
/// (µs, Mbit/s) that keep them inside that range. Tables never use it for that reason: the
/// HTML report's tables write their numbers without an exponent.
pub fn fmt_num(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return if v == 0.0 { "0".into() } else { "-".into() };
    }
    let a = v.abs();
    if !(1e-3..1e7).contains(&a) {
        return format!("{v:.2e}");
    }
    let decimals = (3 - a.log10().floor() as i32).max(0) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

/// A byte count for an axis or a cell: "auto" for 0 (kernel autotuning).
pub fn fmt_bytes_param(v: u64) -> String {
    if v == 0 {
        "auto".into()
    } else {
        format_bytes(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_well() {
        assert_eq!(fmt_num(0.0), "0");
        assert_eq!(fmt_num(1.0), "1");
        assert_eq!(fmt_num(34.62), "34.62");
        assert_eq!(fmt_num(40797.31), "40797");
        assert_eq!(fmt_num(0.2345), "0.2345");
        assert_eq!(fmt_num(1.5e9), "1.50e9");
        assert_eq!(fmt_bytes_param(0), "auto");
    }
}
