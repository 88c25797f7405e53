//! The heatmaps of a mesh's matrices, for `mesh --report DIR` and for the HTML report of a
//! saved mesh run.

use crate::figures::plots::{HeatCell, Heatmap};
use crate::model::mesh::MeshResult;

/// The heatmaps of a mesh: each matrix's headline, rows the client (or sending) rank, columns
/// the server (receiving) rank.
pub fn heatmaps(mesh: &MeshResult) -> Vec<(String, Heatmap)> {
    let n = mesh.ranks.len();
    let labels: Vec<String> = (0..n).map(|r| r.to_string()).collect();
    let mut out = Vec::new();
    for (i, m) in mesh.matrices.iter().enumerate() {
        let size = m.size_name();
        if let Some(l) = &m.latency {
            let cells = l
                .cells
                .iter()
                .map(|c| cell(c.to, c.from, c.mean_ns / 1e3, !c.validity.is_invalid()))
                .collect();
            let what = if l.kind == "one_way" {
                "one-way latency"
            } else {
                "round-trip time"
            };
            out.push((
                format!("mesh-{}-latency", i + 1),
                heatmap(format!("{what}, {size}"), "mean, us", &labels, cells),
            ));
        }
        if let Some(b) = &m.bandwidth {
            for (side, receiver) in [("receiver", true), ("sender", false)] {
                let cells = b
                    .cells
                    .iter()
                    .map(|c| {
                        let (v, ok) = if receiver {
                            (c.receiver_bits_per_s, c.receiver_valid != Some(false))
                        } else {
                            (c.sender_bits_per_s, c.sender_valid != Some(false))
                        };
                        cell(c.to, c.from, v / 1e6, ok)
                    })
                    .collect();
                out.push((
                    format!("mesh-{}-bandwidth-{side}", i + 1),
                    heatmap(
                        format!("bandwidth ({side}), {size}"),
                        &format!("{side}, Mbit/s"),
                        &labels,
                        cells,
                    ),
                ));
            }
        }
    }
    out
}

fn cell(column: usize, row: usize, value: f64, valid: bool) -> HeatCell {
    if valid {
        HeatCell::plain(column, row, value)
    } else {
        HeatCell {
            column,
            row,
            value: None,
            text: String::new(),
            outlined: false,
        }
    }
}

fn heatmap(title: String, value_label: &str, labels: &[String], cells: Vec<HeatCell>) -> Heatmap {
    let values: Vec<f64> = cells.iter().filter_map(|c: &HeatCell| c.value).collect();
    Heatmap {
        title,
        x_label: "to (server / receiving rank)".into(),
        y_label: "from (client / sending rank)".into(),
        x_values: labels.to_vec(),
        y_values: labels.to_vec(),
        cells,
        value_label: value_label.to_owned(),
        log_colour: crate::figures::study_figures::log_wanted(&values, 10.0),
    }
}
