//! Bars of one figure of a study grid: a group per value of one axis, a bar per value of another.

use super::scales::{figure_unit, sequential, with_fixed};
use crate::figures::grid::{FigureKey, StudyGrid};
use crate::figures::plots::{Bar, BarSeries, Bars};

/// Bars of one figure: a group per value of `groups`, a bar per value of `bars` (or one bar
/// per group without), the other axes at `fixed`; error bars from the CIs.
pub fn bars(
    grid: &StudyGrid,
    key: &FigureKey,
    groups: usize,
    bars: Option<usize>,
    fixed: &[(usize, usize)],
) -> Option<Bars> {
    let ga = grid.axes.get(groups)?;
    let bar_values: Vec<Option<usize>> = match bars {
        Some(b) => (0..grid.axes.get(b)?.values.len()).map(Some).collect(),
        None => vec![None],
    };
    let at = |g: usize, bv: Option<usize>| {
        let mut free = vec![(groups, g)];
        if let (Some(b), Some(v)) = (bars, bv) {
            free.push((b, v));
        }
        grid.cell_at(&free, fixed)
    };
    let cells: Vec<_> = bar_values
        .iter()
        .flat_map(|bv| (0..ga.values.len()).filter_map(move |g| at(g, *bv)))
        .collect();
    let unit = figure_unit(|k| k == key, cells.into_iter())?;
    let mut series = Vec::new();
    for (colour, bv) in bar_values.iter().enumerate() {
        let values: Vec<Option<Bar>> = (0..ga.values.len())
            .map(|g| {
                let c = at(g, *bv)?;
                let f = c.figure(key)?;
                Some(Bar {
                    value: f.mean / unit.divisor,
                    ci: f
                        .ci
                        .filter(|_| f.valid)
                        .map(|(l, h)| (l / unit.divisor, h / unit.divisor)),
                    invalid: !f.valid,
                    outlined: c.anomaly.is_some(),
                })
            })
            .collect();
        if values.iter().all(Option::is_none) {
            continue;
        }
        series.push(BarSeries {
            label: match (bars, bv) {
                (Some(b), Some(v)) => {
                    format!("{} {}", grid.axes[b].name, grid.axes[b].values[*v].label)
                }
                _ => key.describe(),
            },
            colour,
            bars: values,
        });
    }
    if series.is_empty() {
        return None;
    }
    let by = bars
        .map(|b| format!(" and {}", grid.axes[b].name))
        .unwrap_or_default();
    Some(Bars {
        title: with_fixed(
            format!("{} by {}{by}", key.describe(), ga.name),
            grid,
            fixed,
        ),
        x_label: ga.name.clone(),
        y_label: format!("{} ({})", key.describe(), unit.name),
        groups: ga.values.iter().map(|v| v.label.clone()).collect(),
        sequential_colours: sequential(bar_values.len()),
        series,
        stacked: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figures::study_figures::tests::cc_path_study;

    #[test]
    fn bars_group_by_one_axis_with_a_bar_per_value_of_the_other() {
        let g = cc_path_study();
        let key = FigureKey::new("throughput", Some("receiver"));
        let b = bars(&g, &key, 1, Some(0), &[]).unwrap();
        assert_eq!(b.groups, ["lan", "wan-50ms", "lossy"]);
        assert_eq!(b.series.len(), 2);
        assert_eq!(b.series[1].label, "cc bbr");
        assert_eq!(b.y_label, "throughput, receiver (Mbit/s)");
        let bar = b.series[1].bars[1].as_ref().unwrap();
        assert_eq!((bar.value, bar.ci), (400.0, Some((390.0, 410.0))));
        let bad = b.series[1].bars[2].as_ref().unwrap();
        assert!(bad.invalid && bad.ci.is_none());
    }
}
