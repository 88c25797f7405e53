//! Heatmaps of a run that sweeps two parameters or more: its headline over the first two.

use crate::figures::plots::{fmt_bytes_param, Figure, HeatCell, Heatmap};
use crate::model::PointResult;

use super::param::{OtherValues, Param, PARAMS};
use super::Run;

/// The point's headline as a heatmap shows it, with its label.
fn heat_value(pattern: &str, p: &PointResult) -> Option<f64> {
    if p.figures_validity().is_invalid() {
        return None;
    }
    match pattern {
        "stream" => Some(
            p.stream
                .as_ref()?
                .totals
                .iter()
                .map(|t| t.receiver_bits_per_s)
                .sum::<f64>()
                / 1e6,
        ),
        "pingpong" => Some(p.latency.as_ref()?.one_way_mean_ns? / 1e3),
        _ => Some(p.latency.as_ref()?.transactions_per_s),
    }
}

fn heat_label(pattern: &str) -> &'static str {
    match pattern {
        "stream" => "receiver throughput (Mbit/s)",
        "pingpong" => "one-way latency, RTT/2 (µs)",
        _ => "transactions per second (1/s)",
    }
}

/// Most heatmaps one run gets when it sweeps more than two parameters.
pub const MAX_HEATMAPS: usize = 6;

/// A heatmap of the first two swept parameters of a run, one per combination of any
/// further swept parameters; none unless two parameters are swept.
pub fn heatmaps(run: &Run) -> Vec<Figure> {
    let r = run.report;
    let swept: Vec<Param> = PARAMS.into_iter().filter(|p| p.swept(r)).collect();
    let [xp, yp, rest @ ..] = swept.as_slice() else {
        return Vec::new();
    };
    let mut figures = Vec::new();
    let combo_of = |p: &PointResult| {
        (
            rest.iter().map(|o| o.of(&p.key)).collect::<Vec<u64>>(),
            p.key.cc,
        )
    };
    let mut combos: Vec<OtherValues> = Vec::new();
    for p in &r.points {
        let c = combo_of(p);
        if !combos.contains(&c) {
            combos.push(c);
        }
    }
    for combo in combos.into_iter().take(MAX_HEATMAPS) {
        let points: Vec<&PointResult> = r.points.iter().filter(|p| combo_of(p) == combo).collect();
        let mut xs: Vec<u64> = points.iter().map(|p| xp.of(&p.key)).collect();
        let mut ys: Vec<u64> = points.iter().map(|p| yp.of(&p.key)).collect();
        for v in [&mut xs, &mut ys] {
            v.sort_unstable();
            v.dedup();
        }
        let cells: Vec<HeatCell> = points
            .iter()
            .filter_map(|p| {
                let i = xs.iter().position(|v| *v == xp.of(&p.key))?;
                let j = ys.iter().position(|v| *v == yp.of(&p.key))?;
                Some(HeatCell::plain(i, j, heat_value(r.pattern.name(), p)?))
            })
            .collect();
        if cells.is_empty() {
            continue;
        }
        let fixed: Vec<String> = rest
            .iter()
            .zip(&combo.0)
            .map(|(o, v)| format!("{} {}", o.name(r.pattern.name()), fmt_bytes_param(*v)))
            .chain(combo.1.map(|c| format!("cc {c}")))
            .collect();
        figures.push(Figure::Heatmap(Heatmap {
            title: format!(
                "Run {}: {} by {}{}",
                run.name(),
                xp.name(r.pattern.name()),
                yp.name(r.pattern.name()),
                if fixed.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", fixed.join(", "))
                }
            ),
            x_label: xp.axis_label(r.pattern.name()),
            y_label: yp.axis_label(r.pattern.name()),
            x_values: xs.iter().map(|v| fmt_bytes_param(*v)).collect(),
            y_values: ys.iter().map(|v| fmt_bytes_param(*v)).collect(),
            cells,
            value_label: heat_label(r.pattern.name()).into(),
            log_colour: false,
        }));
    }
    figures
}
