//! Curves of one figure of a study grid against one of its numeric axes.
//!
//! A colour per value of another axis, a line style per side, confidence intervals as error
//! bars or bands.

use super::scales::{
    axis_title, axis_unit, figure_unit, scale, sequential, with_fixed, LogChoice, BYTES_LOG_RATIO,
    X_LOG_RATIO, Y_LOG_RATIO,
};
use crate::figures::grid::{FigureKey, StudyGrid};
use crate::figures::plots::{Axis, Band, Chart, ErrorBars, LegendAt, Line, StyleKey, Ticks};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CiStyle {
    /// Error bars at each point.
    #[default]
    Bars,
    /// A shaded band along the curve.
    Band,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CurveOptions {
    pub x_log: LogChoice,
    pub y_log: LogChoice,
    pub ci: CiStyle,
}

/// Curves of one figure against the numeric axis `x`: one colour per value of `series` (if
/// given), every side of the figure (sender dashed, receiver solid), the other axes at
/// `fixed`. Invalid points are grey crosses off the curves; CIs are error bars or bands.
pub fn curves(
    grid: &StudyGrid,
    name: &str,
    x: usize,
    series: Option<usize>,
    fixed: &[(usize, usize)],
    opts: CurveOptions,
) -> Option<Chart> {
    let xa = grid.axes.get(x).filter(|a| a.is_numeric())?;
    let sides = grid.sides_of(name);
    let series_values: Vec<Option<usize>> = match series {
        Some(s) => (0..grid.axes.get(s)?.values.len()).map(Some).collect(),
        None => vec![None],
    };
    let xu = axis_unit(xa);
    let in_slice = |i: usize, sv: Option<usize>| {
        let mut free = vec![(x, i)];
        if let (Some(s), Some(v)) = (series, sv) {
            free.push((s, v));
        }
        grid.cell_at(&free, fixed)
    };
    let slice_cells: Vec<_> = series_values
        .iter()
        .flat_map(|sv| (0..xa.values.len()).filter_map(move |i| in_slice(i, *sv)))
        .collect();
    let unit = figure_unit(|k| k.name == name, slice_cells.into_iter())?;
    let mut lines = Vec::new();
    let mut error_bars = Vec::new();
    let mut bands = Vec::new();
    let mut invalid = Vec::new();
    for (colour, sv) in series_values.iter().enumerate() {
        let mut named = false;
        for side in &sides {
            let key = FigureKey {
                name: name.into(),
                side: side.clone(),
            };
            let mut points = Vec::new();
            let mut errors = Vec::new();
            for (i, v) in xa.values.iter().enumerate() {
                let Some(f) = in_slice(i, *sv).and_then(|c| c.figure(&key)) else {
                    continue;
                };
                let xv = v.number.unwrap_or(f64::NAN) / xu.divisor;
                let yv = f.mean / unit.divisor;
                if !f.valid {
                    invalid.push((xv, yv));
                    continue;
                }
                points.push((xv, yv));
                if let Some((lo, hi)) = f.ci {
                    errors.push((xv, lo / unit.divisor, hi / unit.divisor));
                }
            }
            if points.is_empty() {
                continue;
            }
            // One legend entry per colour; the style keys say which side is which.
            let label = match (series, sv) {
                (Some(s), Some(v)) if !named => {
                    format!("{} {}", grid.axes[s].name, grid.axes[s].values[*v].label)
                }
                (None, _) if !named && sides.len() == 1 => key.describe(),
                _ => String::new(),
            };
            named = named || !label.is_empty();
            lines.push(Line {
                label,
                colour,
                dashed: side.as_deref() == Some("sender"),
                markers: true,
                points,
            });
            if !errors.is_empty() {
                match opts.ci {
                    CiStyle::Bars => error_bars.push(ErrorBars {
                        colour,
                        points: errors,
                    }),
                    CiStyle::Band => bands.push(Band {
                        label: String::new(),
                        colour,
                        points: errors,
                    }),
                }
            }
        }
    }
    if lines.is_empty() {
        return None;
    }
    let style_keys = if sides.len() > 1 {
        sides
            .iter()
            .map(|s| {
                let dashed = s.as_deref() == Some("sender");
                StyleKey {
                    label: format!(
                        "{} ({})",
                        s.as_deref().unwrap_or(name),
                        if dashed { "dashed" } else { "solid" }
                    ),
                    dashed,
                }
            })
            .collect()
    } else {
        Vec::new()
    };
    let xs: Vec<f64> = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.0))
        .collect();
    let ys: Vec<f64> = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .collect();
    let per = series
        .map(|s| format!(", per {}", grid.axes[s].name))
        .unwrap_or_default();
    Some(Chart {
        title: with_fixed(format!("{name} against {}{per}", xa.name), grid, fixed),
        x: Axis {
            label: axis_title(xa, &xu),
            scale: scale(
                opts.x_log,
                &xs,
                if xa.unit == "bytes" {
                    BYTES_LOG_RATIO
                } else {
                    X_LOG_RATIO
                },
            ),
            ticks: if xa.unit == "bytes" {
                Ticks::Bytes
            } else {
                Ticks::Number
            },
            from_zero: false,
        },
        y: Axis {
            label: format!("{name} ({})", unit.name),
            scale: scale(opts.y_log, &ys, Y_LOG_RATIO),
            ticks: Ticks::Number,
            from_zero: true,
        },
        bands,
        lines,
        hlines: Vec::new(),
        legend: LegendAt::Best,
        error_bars,
        invalid,
        regressions: Vec::new(),
        style_keys,
        sequential_colours: sequential(series_values.len()),
    })
}

/// One slice of the grid as curves, named as a person asks for it: "throughput against
/// window at write_size 8K" is `slice_curves(g, "throughput", "window", None,
/// &[("write_size", "8K")], ..)`. Axes with one value need not be named; any other axis
/// that is neither `x`, `series` nor fixed is an error, because its points would be mixed.
pub fn slice_curves(
    grid: &StudyGrid,
    name: &str,
    x: &str,
    series: Option<&str>,
    fixed: &[(&str, &str)],
    opts: CurveOptions,
) -> Result<Chart, String> {
    let xi = grid.axis_index(x).ok_or_else(|| {
        format!(
            "no axis \"{x}\" in the study; its axes: {}",
            grid.axis_names()
        )
    })?;
    if !grid.axes[xi].is_numeric() {
        return Err(format!(
            "axis \"{x}\" is not numeric: curves need numbers on the x axis (bars show it)"
        ));
    }
    let si = series
        .map(|s| {
            grid.axis_index(s).ok_or_else(|| {
                format!(
                    "no axis \"{s}\" in the study; its axes: {}",
                    grid.axis_names()
                )
            })
        })
        .transpose()?;
    let mut held = grid.resolve_fixed(fixed)?;
    for (a, axis) in grid.axes.iter().enumerate() {
        if a == xi || Some(a) == si || held.iter().any(|h| h.0 == a) {
            continue;
        }
        if axis.values.len() == 1 {
            held.push((a, 0));
        } else {
            return Err(format!(
                "axis \"{}\" is neither the x axis, the curves' axis nor fixed: give one of its values",
                axis.name
            ));
        }
    }
    held.sort();
    curves(grid, name, xi, si, &held, opts)
        .ok_or_else(|| format!("no measured \"{name}\" in that slice of the study"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figures::grid::tests::window_study;
    use crate::figures::plots::Scale;

    const LAN: (usize, usize) = (2, 0);

    #[test]
    fn curves_have_a_colour_per_series_value_and_a_style_per_side() {
        let g = window_study();
        let c = curves(
            &g,
            "throughput",
            0,
            Some(1),
            &[LAN],
            CurveOptions::default(),
        )
        .unwrap();
        assert_eq!(
            c.title,
            "throughput against window, per write_size (path lan)"
        );
        assert_eq!(c.lines.len(), 4);
        let labels: Vec<&str> = c.lines.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(labels, ["write_size 1K", "", "write_size 8K", ""]);
        let dashed: Vec<bool> = c.lines.iter().map(|l| l.dashed).collect();
        assert_eq!(dashed, [true, false, true, false]);
        assert_eq!(
            c.style_keys
                .iter()
                .map(|k| k.label.as_str())
                .collect::<Vec<_>>(),
            ["sender (dashed)", "receiver (solid)"]
        );
        // Receiver of write size 8K: x in bytes, y in the figure's unit (Gbit/s).
        assert_eq!(
            c.lines[3].points,
            vec![
                (4096.0, 4096.0 * 8192.0 * 1000.0 / 1e9),
                (16384.0, 16384.0 * 8192.0 * 1000.0 / 1e9),
                (65536.0, 65536.0 * 8192.0 * 1000.0 / 1e9),
            ]
        );
        assert_eq!(c.error_bars.len(), 4);
        assert_eq!(c.x.scale, Scale::Log, "4K to 64K spans 16x");
        assert_eq!(c.x.ticks, Ticks::Bytes);
        // 4.19 to 545 Gbit/s: more than two decades.
        assert_eq!(c.y.scale, Scale::Log);
        assert_eq!(c.y.label, "throughput (Gbit/s)");
        let linear = CurveOptions {
            y_log: LogChoice::Linear,
            ..CurveOptions::default()
        };
        let c = curves(&g, "throughput", 0, Some(1), &[LAN], linear).unwrap();
        assert_eq!(c.y.scale, Scale::Linear);
        // Write sizes 1K to 8K: bytes from a factor of 4 on are drawn on a log axis.
        let c = curves(&g, "throughput", 1, Some(0), &[LAN], linear).unwrap();
        assert_eq!(c.x.scale, Scale::Log);
        assert_eq!(c.legend, LegendAt::Best);
    }

    #[test]
    fn a_slice_at_a_fixed_write_size_is_one_curve_pair() {
        let g = window_study();
        let c = slice_curves(
            &g,
            "throughput",
            "window",
            None,
            &[("write_size", "8K"), ("path", "lan")],
            CurveOptions::default(),
        )
        .unwrap();
        assert_eq!(
            c.title,
            "throughput against window (write_size 8K, path lan)"
        );
        assert_eq!(c.lines.len(), 2);
        assert_eq!(
            c.lines[1].points[0],
            (4096.0, 4096.0 * 8192.0 * 1000.0 / 1e9)
        );
        let e = slice_curves(
            &g,
            "throughput",
            "window",
            None,
            &[("write_size", "8K")],
            CurveOptions::default(),
        )
        .unwrap_err();
        assert_eq!(
            e,
            "axis \"path\" is neither the x axis, the curves' axis nor fixed: give one of its values"
        );
        let e =
            slice_curves(&g, "throughput", "path", None, &[], CurveOptions::default()).unwrap_err();
        assert!(e.contains("not numeric"), "{e}");
    }

    #[test]
    fn invalid_points_are_off_the_curves() {
        let mut g = window_study();
        g.cells[0].figures[1].valid = false; // window 4K, write 1K, lan, receiver
        let c = curves(
            &g,
            "throughput",
            0,
            Some(1),
            &[LAN],
            CurveOptions::default(),
        )
        .unwrap();
        assert_eq!(c.invalid, vec![(4096.0, 4096.0 * 1024.0 * 1000.0 / 1e9)]);
        assert_eq!(c.lines[1].points.len(), 2);
        assert_eq!(c.error_bars[1].points.len(), 2);
    }
}
