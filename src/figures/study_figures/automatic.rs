//! Which figures a study grid gets by itself, with their captions.
//!
//! Chosen from how many axes vary and which of them are numeric.

use super::bars::bars;
use super::curves::{curves, CurveOptions};
use super::heatmap::heatmap;
use crate::figures::grid::{FigureKey, Fixed, StudyGrid};
use crate::figures::plots::Figure;

/// Most figures of one kind per figure name: a grid of many further axes would otherwise
/// bury the page (the values table lists every point).
pub const MAX_COMBINATIONS: usize = 6;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FigureKind {
    Heatmap,
    Curves,
    Bars,
}

impl FigureKind {
    pub fn name(self) -> &'static str {
        match self {
            FigureKind::Heatmap => "heatmap",
            FigureKind::Curves => "curves",
            FigureKind::Bars => "bars",
        }
    }
}

/// A figure of a study page, with its caption.
#[derive(Debug, Clone, PartialEq)]
pub struct StudyFigure {
    pub kind: FigureKind,
    pub figure: Figure,
    pub caption: String,
}

const HEATMAP_CAPTION: &str = "Each cell is one point, its value in the colour bar's unit. Hatched grey: the figure is not a valid measurement (listed below); outlined: the point was flagged as an anomaly.";
const CURVES_CAPTION: &str = "Mean over repetitions with its confidence interval; sender dashed, receiver solid. Grey crosses: not valid measurements, kept off the curves (listed below).";
const BARS_CAPTION: &str = "Mean over repetitions with its confidence interval. Hatched grey: not a valid measurement (listed below); outlined: flagged as an anomaly.";

/// The side a heatmap or a bar chart shows of a figure with several: the receiver's (what
/// arrived), else the first.
fn primary_key(grid: &StudyGrid, name: &str) -> FigureKey {
    let sides = grid.sides_of(name);
    let side = sides
        .iter()
        .find(|s| s.as_deref() == Some("receiver"))
        .or_else(|| sides.first())
        .cloned()
        .flatten();
    FigureKey {
        name: name.into(),
        side,
    }
}

/// The figures a grid gets by itself, per figure name, over the axes with more than one
/// value: two numeric axes give a heatmap of the first two and curves along each of them;
/// a categorical axis among the first two gives bars (groups per the categorical axis) and,
/// with a numeric axis of 3 or more values, curves along it; a single axis gives curves
/// (numeric) or bars. Further axes are held at each combination (at most
/// [`MAX_COMBINATIONS`] figures of a kind).
pub fn automatic(grid: &StudyGrid) -> Vec<StudyFigure> {
    let active: Vec<usize> = (0..grid.axes.len())
        .filter(|&a| grid.axes[a].values.len() > 1)
        .collect();
    let numeric: Vec<usize> = active
        .iter()
        .copied()
        .filter(|&a| grid.axes[a].is_numeric())
        .collect();
    let categorical: Vec<usize> = active
        .iter()
        .copied()
        .filter(|&a| !grid.axes[a].is_numeric())
        .collect();
    let opts = CurveOptions::default();
    let mut names: Vec<String> = Vec::new();
    for k in grid.figure_keys() {
        if !names.contains(&k.name) {
            names.push(k.name);
        }
    }
    let mut out = Vec::new();
    let mut push = |kind: FigureKind, figure: Option<Figure>| {
        if let Some(figure) = figure {
            let caption = match kind {
                FigureKind::Heatmap => HEATMAP_CAPTION,
                FigureKind::Curves => CURVES_CAPTION,
                FigureKind::Bars => BARS_CAPTION,
            };
            out.push(StudyFigure {
                kind,
                figure,
                caption: caption.into(),
            });
        }
    };
    for name in &names {
        let key = primary_key(grid, name);
        let combos = |shown: &[usize]| {
            let mut c = grid.fixed_combinations(shown);
            c.truncate(MAX_COMBINATIONS);
            c
        };
        let curves_along = |x: usize, series: Option<usize>| -> Vec<Option<Figure>> {
            let shown: Vec<usize> = std::iter::once(x).chain(series).collect();
            combos(&shown)
                .iter()
                .map(|f: &Fixed| curves(grid, name, x, series, f, opts).map(Figure::Chart))
                .collect()
        };
        match active.as_slice() {
            [] => {}
            [a] if grid.axes[*a].is_numeric() => {
                for f in curves_along(*a, None) {
                    push(FigureKind::Curves, f);
                }
            }
            [a] => {
                for f in combos(&[*a]) {
                    push(
                        FigureKind::Bars,
                        bars(grid, &key, *a, None, &f).map(Figure::Bars),
                    );
                }
            }
            _ if numeric.len() >= 2 => {
                let (x, y) = (numeric[0], numeric[1]);
                for f in combos(&[x, y]) {
                    push(
                        FigureKind::Heatmap,
                        heatmap(grid, &key, x, y, &f).map(Figure::Heatmap),
                    );
                }
                for (x, s) in [(x, y), (y, x)] {
                    for f in curves_along(x, Some(s)) {
                        push(FigureKind::Curves, f);
                    }
                }
            }
            [a, b, ..] => {
                // The groups are the categorical one of the two (the second if both are).
                let (groups, each) = if !grid.axes[*b].is_numeric() {
                    (*b, *a)
                } else {
                    (*a, *b)
                };
                for f in combos(&[groups, each]) {
                    push(
                        FigureKind::Bars,
                        bars(grid, &key, groups, Some(each), &f).map(Figure::Bars),
                    );
                }
                if let Some(&x) = numeric.iter().find(|&&n| grid.axes[n].values.len() >= 3) {
                    for f in curves_along(x, categorical.first().copied()) {
                        push(FigureKind::Curves, f);
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figures::grid::tests::window_study;
    use crate::figures::study_figures::tests::cc_path_study;

    #[test]
    fn a_grid_gets_the_figures_its_axes_call_for() {
        let kinds = |g: &StudyGrid| automatic(g).iter().map(|f| f.kind).collect::<Vec<_>>();
        use FigureKind::*;
        // Two numeric axes and a path: a heatmap and curves both ways, per path.
        assert_eq!(
            kinds(&window_study()),
            [Heatmap, Heatmap, Curves, Curves, Curves, Curves]
        );
        // Two categorical axes: bars.
        let figs = automatic(&cc_path_study());
        assert_eq!(figs.len(), 1);
        let Figure::Bars(b) = &figs[0].figure else {
            panic!("not bars")
        };
        assert_eq!(b.groups, ["lan", "wan-50ms", "lossy"]);
        // One numeric axis: a curve.
        let mut g = window_study();
        g.axes.truncate(1);
        g.cells.retain(|c| c.coords[1] == 0 && c.coords[2] == 0);
        for c in &mut g.cells {
            c.coords.truncate(1);
        }
        assert_eq!(kinds(&g), [Curves]);
    }
}
