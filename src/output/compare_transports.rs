//! The table of `wirebench compare-transports`: t0, r_max, n_1/2 and overhead per transport.

use crate::model::transports::{Comparison, Estimate};
use crate::units::{format_seconds, format_us};

/// A mean with its interval, after `prefix` (">=" for a lower bound, "~" for an estimate).
fn with_ci(e: &Option<Estimate>, scale: f64, decimals: usize, prefix: &str) -> String {
    match e {
        None => "-".into(),
        Some(e) => match e.ci_half_width {
            Some(h) => format!(
                "{prefix}{:.*} ±{:.*}",
                decimals,
                e.mean * scale,
                decimals,
                h * scale
            ),
            None => format!("{prefix}{:.*}", decimals, e.mean * scale),
        },
    }
}

pub fn print(c: &Comparison) {
    println!(
        "# wirebench compare-transports: ping-pong size sweep per transport, {} per size, {} run(s) interleaved; server {}",
        format_seconds(c.duration_per_size_ns as f64 / 1e9),
        c.runs,
        c.server.as_deref().unwrap_or("self-hosted on loopback")
    );
    println!(
        "# t0 = one-way time (RTT/2) of the smallest message; r_max = highest throughput, size / one-way time, MB/s = 10^6 B/s; n_1/2 = size reaching r_max/2"
    );
    println!(
        "# ± = {:.0}% confidence interval {}",
        c.confidence * 100.0,
        if c.runs > 1 {
            "of the mean over runs"
        } else {
            "within the single run (n_1/2 has none)"
        }
    );
    println!(
        "{:<10} {:<28} {:>18} {:>22} {:>10} {:>20} {:>11} {:>9} {:>9}",
        "transport",
        "layer",
        "t0(us)",
        "r_max(MB/s)",
        "at(B)",
        "n_1/2(B)",
        "t0 extra",
        "t0 x",
        "r_max x"
    );
    for r in &c.transports {
        if let Some(e) = &r.error {
            println!("{:<10} {:<28} error: {e}", r.transport, r.layer);
            continue;
        }
        let (extra, t0x, rx) = match &r.overhead {
            Some(o) if Some(&r.transport) == c.baseline.as_ref() => (
                "baseline".to_string(),
                format!("{:.2}", o.t0_ratio),
                format!("{:.2}", o.r_max_ratio),
            ),
            Some(o) => (
                // A sign on every difference: `{:+}` does not give one to text.
                format!(
                    "{}{}",
                    if o.t0_extra_ns > 0.0 { "+" } else { "" },
                    format_us(o.t0_extra_ns)
                ),
                format!("{:.2}", o.t0_ratio),
                format!("{:.2}", o.r_max_ratio),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        let (bound, estimate) = if r.r_max_at_largest {
            (">=", "~")
        } else {
            ("", "")
        };
        println!(
            "{:<10} {:<28} {:>18} {:>22} {:>10} {:>20} {:>11} {:>9} {:>9}",
            r.transport,
            r.layer,
            with_ci(&r.t0_ns, 1e-3, 2, ""),
            with_ci(&r.r_max_bits_per_s, 1.0 / 8e6, 1, bound),
            r.r_max_size
                .map(|s| s.to_string())
                .unwrap_or_else(|| "-".into()),
            with_ci(&r.n_half_bytes, 1.0, 0, estimate),
            extra,
            t0x,
            rx
        );
    }
    if let Some(b) = &c.baseline {
        println!(
            "# overhead against {b}: t0 extra = t0 - t0({b}); t0 x and r_max x = ratios to {b}'s figures"
        );
    }
    for r in &c.transports {
        if let Some(note) = &r.r_max_note {
            println!("# {} >= and ~: {note}", r.transport);
        }
    }
    for r in &c.transports {
        if r.error.is_some() {
            continue;
        }
        let sizes = format!(
            "sizes {}..{} B",
            r.sizes.first().copied().unwrap_or(0),
            r.sizes.last().copied().unwrap_or(0)
        );
        match (r.fit_valid, r.fit_t0_ns, r.fit_r_inf_bits_per_s) {
            (true, Some(t0), Some(ri)) => println!(
                "# {} fit t(n) = t0 + n/r_inf: t0 = {}, r_inf = {:.1} MB/s, {sizes}",
                r.transport,
                format_us(t0),
                ri / 8e6,
            ),
            _ => println!(
                "# {} fit t(n) = t0 + n/r_inf, {sizes}: no valid fit: {}",
                r.transport,
                r.fit_invalid_reason.as_deref().unwrap_or("no fit")
            ),
        }
    }
}
