//! A figure as data: what a line chart, a heatmap or a bar chart shows, not how it is drawn.

use super::numbers::fmt_num;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    Linear,
    Log,
}

/// How tick labels are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ticks {
    Number,
    /// Binary suffixes (64K), log ticks on powers of two.
    Bytes,
    /// Percentiles on a log "nines" axis, values 1/(1 - p): labels 0% at 1, 90% at 10,
    /// 99% at 100, 99.9% at 1000 (see [`nines_x`]).
    Nines,
    /// Seconds since the Unix epoch, labelled as UTC clock times: `HH:MM:SS`, or
    /// `MM-DD HH:MM` when `with_date` (an axis spanning days).
    Utc {
        with_date: bool,
    },
}

/// Where percentile `p` (a fraction, below 1) lies on a [`Ticks::Nines`] axis: 1/(1 - p), so
/// that each further nine takes a decade.
pub fn nines_x(p: f64) -> f64 {
    1.0 / (1.0 - p)
}

#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// With its unit, e.g. "message size (bytes)".
    pub label: String,
    pub scale: Scale,
    pub ticks: Ticks,
    /// A linear axis that starts at 0 (rates, counts), rather than at the data.
    pub from_zero: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub label: String,
    pub colour: usize,
    pub dashed: bool,
    pub markers: bool,
    pub points: Vec<(f64, f64)>,
}

/// A shaded area between two curves, e.g. the 50th to 99th percentile.
#[derive(Debug, Clone, PartialEq)]
pub struct Band {
    pub label: String,
    pub colour: usize,
    /// (x, low, high).
    pub points: Vec<(f64, f64, f64)>,
}

/// A horizontal reference line, e.g. the rate with the kernel's buffer autotuning.
#[derive(Debug, Clone, PartialEq)]
pub struct HLine {
    pub label: String,
    pub colour: usize,
    pub y: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LegendAt {
    UpperLeft,
    UpperRight,
    LowerRight,
    LowerLeft,
    /// The corner where the legend covers the fewest drawn points.
    Best,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub bands: Vec<Band>,
    pub lines: Vec<Line>,
    pub hlines: Vec<HLine>,
    pub legend: LegendAt,
    pub error_bars: Vec<ErrorBars>,
    /// Points whose figure is not a valid measurement: grey open markers, never on a curve.
    pub invalid: Vec<(f64, f64)>,
    /// Points at which a regression was found (`wirebench agent`): a red triangle over the
    /// point, one per point, whatever else is drawn there.
    pub regressions: Vec<(f64, f64)>,
    pub style_keys: Vec<StyleKey>,
    /// `Some(n)`: n ordered colours along a sequential scale instead of the palette, for
    /// more series than the palette has colours.
    pub sequential_colours: Option<usize>,
}

/// Vertical error bars at curve points, e.g. a confidence interval over repetitions.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorBars {
    pub colour: usize,
    /// (x, low, high).
    pub points: Vec<(f64, f64, f64)>,
}

/// A legend entry that explains a line style rather than a curve: "sender (dashed)".
#[derive(Debug, Clone, PartialEq)]
pub struct StyleKey {
    pub label: String,
    pub dashed: bool,
}

/// A value for every combination of two parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Heatmap {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// Column and row names, in the order drawn (columns left to right, rows bottom to top).
    pub x_values: Vec<String>,
    pub y_values: Vec<String>,
    /// A missing combination stays blank.
    pub cells: Vec<HeatCell>,
    /// What the colour means, with its unit.
    pub value_label: String,
    /// Colours on a log scale (values spanning decades), else linear. Needs positive values.
    pub log_colour: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HeatCell {
    pub column: usize,
    pub row: usize,
    /// The coloured value; `None` for a figure that is not a valid measurement, drawn hatched
    /// grey and never as a value.
    pub value: Option<f64>,
    /// What the cell says: the value in the colour bar's unit.
    pub text: String,
    /// Outlined: the point was flagged as an anomaly.
    pub outlined: bool,
}

impl HeatCell {
    /// A valid cell showing its value as [`fmt_num`] writes it.
    pub fn plain(column: usize, row: usize, value: f64) -> HeatCell {
        HeatCell {
            column,
            row,
            value: Some(value),
            text: fmt_num(value),
            outlined: false,
        }
    }
}

impl Heatmap {
    /// The colour scale's range: the lowest and highest valid, finite value.
    pub fn colour_range(&self) -> Option<(f64, f64)> {
        let values = self
            .cells
            .iter()
            .filter_map(|c| c.value)
            .filter(|v| v.is_finite());
        let lo = values.clone().reduce(f64::min)?;
        let hi = values.reduce(f64::max)?;
        Some((lo, hi))
    }

    /// Where a value lies on the colour scale, 0 to 1.
    pub fn colour_position(&self, v: f64) -> f64 {
        let Some((lo, hi)) = self.colour_range() else {
            return 0.0;
        };
        if self.log_scale() {
            (v / lo).ln() / (hi / lo).ln()
        } else if hi > lo {
            (v - lo) / (hi - lo)
        } else {
            0.0
        }
    }

    pub(super) fn log_scale(&self) -> bool {
        self.log_colour
            && self
                .colour_range()
                .is_some_and(|(lo, hi)| lo > 0.0 && hi > lo)
    }
}

/// Grouped bars: one group per value of one parameter, one bar per series in each group (or
/// one bar of stacked parts, [`Bars::stacked`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Bars {
    pub title: String,
    /// Names the groups' parameter, under the group names.
    pub x_label: String,
    /// With its unit.
    pub y_label: String,
    pub groups: Vec<String>,
    pub series: Vec<BarSeries>,
    /// As [`Chart::sequential_colours`].
    pub sequential_colours: Option<usize>,
    /// One bar per group, the series' values stacked on each other in their order (the
    /// parts of a whole, e.g. the stages of a round trip), rather than side by side. Error
    /// bars are not drawn on stacked parts.
    pub stacked: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BarSeries {
    pub label: String,
    pub colour: usize,
    /// One per group; `None` where nothing was measured.
    pub bars: Vec<Option<Bar>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub value: f64,
    /// (low, high), drawn as an error bar.
    pub ci: Option<(f64, f64)>,
    /// Not a valid measurement: drawn hatched grey.
    pub invalid: bool,
    /// Flagged as an anomaly: outlined.
    pub outlined: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Figure {
    Chart(Chart),
    Heatmap(Heatmap),
    Bars(Bars),
}

impl Figure {
    pub fn title(&self) -> &str {
        match self {
            Figure::Chart(c) => &c.title,
            Figure::Heatmap(h) => &h.title,
            Figure::Bars(b) => &b.title,
        }
    }
}
