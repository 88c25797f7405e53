//! A heatmap of one figure over two axes of a study grid, the other axes held.

use super::scales::{
    axis_title, axis_unit, figure_unit, log_wanted, with_fixed, DIGITS, Y_LOG_RATIO,
};
use crate::figures::grid::{FigureKey, StudyGrid};
use crate::figures::plots::{HeatCell, Heatmap};

/// A heatmap of one figure over axes `x` (columns) and `y` (rows), the other axes at `fixed`.
/// Invalid figures are hatched without a value, flagged points outlined; the colour scale
/// spans the valid values only.
pub fn heatmap(
    grid: &StudyGrid,
    key: &FigureKey,
    x: usize,
    y: usize,
    fixed: &[(usize, usize)],
) -> Option<Heatmap> {
    let (xa, ya) = (grid.axes.get(x)?, grid.axes.get(y)?);
    let mut found = Vec::new();
    for i in 0..xa.values.len() {
        for j in 0..ya.values.len() {
            if let Some(c) = grid.cell_at(&[(x, i), (y, j)], fixed) {
                if let Some(f) = c.figure(key) {
                    found.push((i, j, c, f));
                }
            }
        }
    }
    let unit = figure_unit(|k| k == key, found.iter().map(|t| t.2))?;
    let cells: Vec<HeatCell> = found
        .iter()
        .map(|&(i, j, c, f)| HeatCell {
            column: i,
            row: j,
            value: (f.valid && f.mean.is_finite()).then(|| f.mean / unit.divisor),
            text: if f.valid {
                unit.number(f.mean, DIGITS)
            } else {
                String::new()
            },
            outlined: c.anomaly.is_some(),
        })
        .collect();
    if cells.iter().all(|c| c.value.is_none()) {
        return None;
    }
    let (xu, yu) = (axis_unit(xa), axis_unit(ya));
    let values: Vec<f64> = cells.iter().filter_map(|c| c.value).collect();
    Some(Heatmap {
        title: with_fixed(
            format!("{} by {} and {}", key.describe(), xa.name, ya.name),
            grid,
            fixed,
        ),
        x_label: axis_title(xa, &xu),
        y_label: axis_title(ya, &yu),
        x_values: xa.values.iter().map(|v| v.label.clone()).collect(),
        y_values: ya.values.iter().map(|v| v.label.clone()).collect(),
        cells,
        value_label: format!("{} ({})", key.describe(), unit.name),
        log_colour: log_wanted(&values, Y_LOG_RATIO),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figures::grid::tests::window_study;
    use crate::figures::plots::{render_svg, Figure};

    const LAN: (usize, usize) = (2, 0);
    const WAN: (usize, usize) = (2, 1);

    #[test]
    fn a_heatmap_holds_every_cell_of_its_slice_in_one_unit() {
        let g = window_study();
        let key = FigureKey::new("throughput", Some("receiver"));
        let h = heatmap(&g, &key, 0, 1, &[WAN]).unwrap();
        assert_eq!(h.x_values, ["4K", "16K", "64K"]);
        assert_eq!(h.y_values, ["1K", "8K"]);
        assert_eq!(h.x_label, "window (bytes)");
        // 64K * 8K * 1000 / 2 = 268 Gbit/s: the largest value picks Gbit/s for all.
        assert_eq!(h.value_label, "throughput, receiver (Gbit/s)");
        assert_eq!(
            h.title,
            "throughput, receiver by window and write_size (path wan)"
        );
        assert_eq!(h.cells.len(), 6);
        let c = h
            .cells
            .iter()
            .find(|c| c.column == 2 && c.row == 1)
            .unwrap();
        assert_eq!(c.value, Some(65536.0 * 8192.0 * 1000.0 / 2.0 / 1e9));
        assert_eq!(c.text, "268");
        let c = h
            .cells
            .iter()
            .find(|c| c.column == 0 && c.row == 0)
            .unwrap();
        assert_eq!(c.text, "2.1");
        assert_eq!(
            h.colour_range(),
            Some((
                4096.0 * 1024.0 * 500.0 / 1e9,
                65536.0 * 8192.0 * 500.0 / 1e9
            ))
        );
        // 2.1 to 268: more than two decades, so the colours are on a log scale.
        assert!(h.log_colour);
        assert_eq!(h.colour_position(h.colour_range().unwrap().0), 0.0);
        assert_eq!(h.colour_position(h.colour_range().unwrap().1), 1.0);
        // 16K x 8K is 2^(2+3) = 32 times the lowest, of 2^7 = 128: position 5/7.
        let mid = 16384.0 * 8192.0 * 500.0 / 1e9;
        assert!((h.colour_position(mid) - 5.0 / 7.0).abs() < 1e-12);
        // One write size: 4K to 64K windows span 16x, a linear colour scale.
        let h = heatmap(&g, &key, 0, 2, &[(1, 0)]).unwrap();
        assert!(!h.log_colour);
        assert_eq!(h.y_values, ["lan", "wan"]);
        assert_eq!(h.y_label, "path");
    }

    #[test]
    fn invalid_cells_have_no_value_and_stay_off_the_colour_scale() {
        let mut g = window_study();
        for c in &mut g.cells {
            if c.coords == vec![2, 1, 0] {
                c.figures[1].valid = false;
                c.figures[1].mean = 1e15;
            }
            if c.coords == vec![0, 0, 0] {
                c.anomaly = Some("50% below both neighbours".into());
            }
        }
        let key = FigureKey::new("throughput", Some("receiver"));
        let h = heatmap(&g, &key, 0, 1, &[LAN]).unwrap();
        let bad = h
            .cells
            .iter()
            .find(|c| c.column == 2 && c.row == 1)
            .unwrap();
        assert_eq!((bad.value, bad.text.as_str()), (None, ""));
        assert_eq!(h.cells.iter().filter(|c| c.outlined).count(), 1);
        // The highest valid value now is 16K * 8K * 1000.
        assert_eq!(h.colour_range().unwrap().1, 16384.0 * 8192.0 * 1000.0 / 1e9);
        let svg = render_svg(&Figure::Heatmap(h)).unwrap();
        assert!(svg.contains("throughput, receiver (Gbit/s)"));
    }
}
