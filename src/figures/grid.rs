//! A study's results as a neutral grid: named axes, and one cell per point with its
//! coordinates along them. The study runner fills it; [`super::study_figures`] draws it. It
//! knows nothing of runs, patterns or transports, so that any matrix of runs fits.

/// One study's results as a grid: every point is a cell with its coordinates along the axes.
#[derive(Debug, Clone, PartialEq)]
pub struct StudyGrid {
    pub title: String,
    pub axes: Vec<GridAxis>,
    pub cells: Vec<GridCell>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GridAxis {
    /// "window", "write_size", "cc", "path", "size".
    pub name: String,
    /// In the study's order.
    pub values: Vec<AxisValue>,
    /// The unit of the values' numbers: "bytes", "bit/s", "ns", or "" (a count, or a
    /// categorical axis). Decides how an axis of a figure is labelled and ticked.
    pub unit: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AxisValue {
    /// "4K", "cubic", "wan-50ms".
    pub label: String,
    /// Some(4096.0) for numeric axes (sizes in bytes, rates in bit/s, durations in ns).
    pub number: Option<f64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GridCell {
    /// Index into each axis's values, same order as `axes`.
    pub coords: Vec<usize>,
    pub figures: Vec<CellFigure>,
    /// Counter deltas of the point (name, delta), may be empty.
    pub counters: Vec<(String, i64)>,
    /// Why the point was flagged, if it was.
    pub anomaly: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CellFigure {
    /// "throughput", "one-way latency".
    pub name: String,
    /// "sender" / "receiver" / None.
    pub side: Option<String>,
    /// "bit/s", "ns".
    pub unit: String,
    pub mean: f64,
    /// Interval over repetitions (low, high).
    pub ci: Option<(f64, f64)>,
    /// Repetitions behind the mean.
    pub samples: u32,
    /// false: drawn hatched/greyed and listed, never as a plain value.
    pub valid: bool,
}

impl GridAxis {
    /// An axis of numbers with their labels, e.g. sizes in bytes.
    pub fn numeric(name: &str, unit: &str, values: &[(&str, f64)]) -> GridAxis {
        GridAxis {
            name: name.into(),
            unit: unit.into(),
            values: values
                .iter()
                .map(|(l, n)| AxisValue {
                    label: (*l).into(),
                    number: Some(*n),
                })
                .collect(),
        }
    }

    /// An axis of names, e.g. congestion control algorithms.
    pub fn categorical(name: &str, labels: &[&str]) -> GridAxis {
        GridAxis {
            name: name.into(),
            unit: String::new(),
            values: labels
                .iter()
                .map(|l| AxisValue {
                    label: (*l).into(),
                    number: None,
                })
                .collect(),
        }
    }

    /// Every value has a number, so the axis can be an x axis of a curve.
    pub fn is_numeric(&self) -> bool {
        !self.values.is_empty()
            && self
                .values
                .iter()
                .all(|v| v.number.is_some_and(f64::is_finite))
    }

    pub fn index_of(&self, label: &str) -> Option<usize> {
        self.values.iter().position(|v| v.label == label)
    }
}

/// Which figure of a cell: its name and side (None matches a figure without a side).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FigureKey {
    pub name: String,
    pub side: Option<String>,
}

impl FigureKey {
    pub fn new(name: &str, side: Option<&str>) -> FigureKey {
        FigureKey {
            name: name.into(),
            side: side.map(Into::into),
        }
    }

    /// "throughput, receiver" or "throughput".
    pub fn describe(&self) -> String {
        match &self.side {
            Some(s) => format!("{}, {s}", self.name),
            None => self.name.clone(),
        }
    }
}

impl GridCell {
    pub fn figure(&self, key: &FigureKey) -> Option<&CellFigure> {
        self.figures
            .iter()
            .find(|f| f.name == key.name && f.side == key.side)
    }
}

/// Axes held at one value while a figure shows others: (axis index, value index).
pub type Fixed = Vec<(usize, usize)>;

impl StudyGrid {
    pub fn axis_index(&self, name: &str) -> Option<usize> {
        self.axes.iter().position(|a| a.name == name)
    }

    /// The figures the grid's cells have, in the order first met: one key per name and side.
    pub fn figure_keys(&self) -> Vec<FigureKey> {
        let mut keys: Vec<FigureKey> = Vec::new();
        for f in self.cells.iter().flat_map(|c| &c.figures) {
            let k = FigureKey {
                name: f.name.clone(),
                side: f.side.clone(),
            };
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        keys
    }

    /// The sides a figure name has, in the order first met (`None` for a figure without one).
    pub fn sides_of(&self, name: &str) -> Vec<Option<String>> {
        let mut sides = Vec::new();
        for k in self.figure_keys() {
            if k.name == name && !sides.contains(&k.side) {
                sides.push(k.side);
            }
        }
        sides
    }

    /// The cell at these coordinates along `free` axes, the other axes at `fixed`; the first
    /// such cell if the study measured one twice.
    pub fn cell_at(&self, free: &[(usize, usize)], fixed: &[(usize, usize)]) -> Option<&GridCell> {
        self.cells.iter().find(|c| {
            free.iter()
                .chain(fixed)
                .all(|&(axis, value)| c.coords.get(axis) == Some(&value))
        })
    }

    /// Every combination of values of the axes not in `shown`, in the study's order, limited
    /// to combinations some cell has: each is one figure's fixed values.
    pub fn fixed_combinations(&self, shown: &[usize]) -> Vec<Fixed> {
        let others: Vec<usize> = (0..self.axes.len())
            .filter(|a| !shown.contains(a))
            .collect();
        let mut combos: Vec<Fixed> = Vec::new();
        for c in &self.cells {
            let combo: Fixed = others
                .iter()
                .filter_map(|&a| Some((a, *c.coords.get(a)?)))
                .collect();
            if combo.len() == others.len() && !combos.contains(&combo) {
                combos.push(combo);
            }
        }
        combos.sort();
        combos
    }

    /// "write_size 8K, path lan": the fixed values a figure's title names.
    pub fn describe_fixed(&self, fixed: &[(usize, usize)]) -> String {
        fixed
            .iter()
            .filter_map(|&(a, v)| {
                let axis = self.axes.get(a)?;
                Some(format!("{} {}", axis.name, axis.values.get(v)?.label))
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// "window 4K, write_size 8K": a cell's coordinates as a table row names them.
    pub fn describe_cell(&self, cell: &GridCell) -> String {
        let coords: Vec<(usize, usize)> = cell.coords.iter().copied().enumerate().collect();
        self.describe_fixed(&coords)
    }

    /// Resolves ("write_size", "8K") pairs to axis and value indexes; an unknown name or
    /// label is a one-line error naming what exists.
    pub fn resolve_fixed(&self, fixed: &[(&str, &str)]) -> Result<Fixed, String> {
        fixed
            .iter()
            .map(|(axis, label)| {
                let a = self.axis_index(axis).ok_or_else(|| {
                    format!(
                        "no axis \"{axis}\" in the study; its axes: {}",
                        self.axis_names()
                    )
                })?;
                let v = self.axes[a].index_of(label).ok_or_else(|| {
                    format!(
                        "axis \"{axis}\" has no value \"{label}\"; its values: {}",
                        self.axes[a]
                            .values
                            .iter()
                            .map(|v| v.label.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                })?;
                Ok((a, v))
            })
            .collect()
    }

    pub fn axis_names(&self) -> String {
        self.axes
            .iter()
            .map(|a| a.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn fig(name: &str, side: Option<&str>, unit: &str, mean: f64) -> CellFigure {
        CellFigure {
            name: name.into(),
            side: side.map(Into::into),
            unit: unit.into(),
            mean,
            ci: Some((mean * 0.95, mean * 1.05)),
            samples: 3,
            valid: true,
        }
    }

    /// window (4K, 16K, 64K) x write_size (1K, 8K) x path (lan, wan): throughput sender and
    /// receiver, rate = window * write_size * 1000 (path wan: half), so each cell is known.
    pub fn window_study() -> StudyGrid {
        let windows = [("4K", 4096.0), ("16K", 16384.0), ("64K", 65536.0)];
        let writes = [("1K", 1024.0), ("8K", 8192.0)];
        let mut cells = Vec::new();
        for (w, (_, wn)) in windows.iter().enumerate() {
            for (s, (_, sn)) in writes.iter().enumerate() {
                for p in 0..2 {
                    let rate = wn * sn * 1000.0 / if p == 1 { 2.0 } else { 1.0 };
                    cells.push(GridCell {
                        coords: vec![w, s, p],
                        figures: vec![
                            fig("throughput", Some("sender"), "bit/s", rate * 1.01),
                            fig("throughput", Some("receiver"), "bit/s", rate),
                        ],
                        counters: vec![
                            ("retransmits".into(), if p == 1 { 3 } else { 0 }),
                            ("drops".into(), 0),
                        ],
                        anomaly: None,
                    });
                }
            }
        }
        StudyGrid {
            title: "Window against write size".into(),
            axes: vec![
                GridAxis::numeric("window", "bytes", &windows),
                GridAxis::numeric("write_size", "bytes", &writes),
                GridAxis::categorical("path", &["lan", "wan"]),
            ],
            cells,
        }
    }

    #[test]
    fn lookups_find_cells_axes_and_figures() {
        let g = window_study();
        assert_eq!(g.figure_keys().len(), 2);
        assert_eq!(
            g.sides_of("throughput"),
            vec![Some("sender".into()), Some("receiver".into())]
        );
        assert!(g.axes[0].is_numeric() && !g.axes[2].is_numeric());
        let fixed = g
            .resolve_fixed(&[("write_size", "8K"), ("path", "wan")])
            .unwrap();
        assert_eq!(fixed, vec![(1, 1), (2, 1)]);
        let c = g.cell_at(&[(0, 2)], &fixed).unwrap();
        assert_eq!(c.coords, vec![2, 1, 1]);
        assert_eq!(
            c.figure(&FigureKey::new("throughput", Some("receiver")))
                .unwrap()
                .mean,
            65536.0 * 8192.0 * 1000.0 / 2.0
        );
        assert_eq!(g.describe_cell(c), "window 64K, write_size 8K, path wan");
        assert_eq!(
            g.fixed_combinations(&[0, 1]),
            vec![vec![(2, 0)], vec![(2, 1)]]
        );
        let e = g.resolve_fixed(&[("write", "8K")]).unwrap_err();
        assert_eq!(
            e,
            "no axis \"write\" in the study; its axes: window, write_size, path"
        );
        let e = g.resolve_fixed(&[("path", "moon")]).unwrap_err();
        assert_eq!(
            e,
            "axis \"path\" has no value \"moon\"; its values: lan, wan"
        );
    }
}
