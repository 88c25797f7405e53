//! Figures and pages drawn from result documents: [`series`] turns runs into plottable data,
//! which [`plots`] draws as SVG (and [`png`] rasterises) and [`html_report`] assembles into
//! the one HTML file of `wirebench report`; the figures of `run --plot` under load or
//! competition ([`load_figures`]), of a mesh ([`mesh_figures`]) and of a segment trace
//! ([`trace_figures`]). A study's matrix of runs comes as a [`grid::StudyGrid`], which
//! [`study_figures`] turns into heatmaps, curves and bars and [`study_page`] into one HTML
//! page or figure files.

pub mod agent_history;
pub mod grid;
pub mod html_report;
pub mod load_figures;
pub mod mesh_figures;
pub mod plots;
pub mod png;
pub mod probe_figures;
pub mod series;
pub mod study_figures;
pub mod study_page;
pub mod trace_figures;

use crate::units::DisplayUnit;

/// The unit a whole table (or figure) gives its rates in, from its largest rate in bit/s:
/// [`crate::units::RateUnit`]'s choice, as every text table makes it; its name and bit/s per
/// unit.
fn rate_unit_for_max(max_bits_per_s: f64) -> (&'static str, f64) {
    let unit = crate::units::RateUnit::for_max(max_bits_per_s);
    (unit.name(), unit.divisor())
}

/// The unit measured figures of base unit `base` are shown in, up to `max`: a latency (ns) in
/// µs whatever its size, so that figures side by side compare at a glance; a rate (bit/s) in
/// Mbit/s or Gbit/s by [`rate_unit_for_max`]; any other unit as given. Settings (a study
/// axis's delay or buffer size) keep [`DisplayUnit::for_values`]: they are read, not compared.
fn measured_unit(base: &str, max: f64) -> DisplayUnit {
    match base {
        "ns" => DisplayUnit {
            divisor: 1e3,
            name: "µs".into(),
        },
        "bit/s" => {
            let (name, divisor) = rate_unit_for_max(max);
            DisplayUnit {
                divisor,
                name: name.into(),
            }
        }
        _ => DisplayUnit::for_values(base, max),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Latencies in µs whatever their size; rates in Mbit/s up to 10 Gbit/s, in Gbit/s from
    /// there on; other units as they are.
    #[test]
    fn measured_figures_follow_the_unit_policy() {
        let u = |base: &str, max: f64| {
            let d = measured_unit(base, max);
            (d.name, d.divisor)
        };
        assert_eq!(u("ns", 50e6), ("µs".into(), 1e3));
        assert_eq!(u("ns", 80.0), ("µs".into(), 1e3));
        assert_eq!(u("bit/s", 2.1e10), ("Gbit/s".into(), 1e9));
        assert_eq!(u("bit/s", 1e10), ("Gbit/s".into(), 1e9));
        assert_eq!(u("bit/s", 9.99e9), ("Mbit/s".into(), 1e6));
        assert_eq!(u("bit/s", 5e5), ("Mbit/s".into(), 1e6));
        assert_eq!(u("bit/s", f64::NAN), ("Mbit/s".into(), 1e6));
        assert_eq!(u("1/s", 3e4), ("1/s".into(), 1.0));
    }
}
