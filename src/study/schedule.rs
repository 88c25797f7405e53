//! Which points a study has and in which order its runs happen: the axes combined into points
//! (a product, zipped groups, or a list), and every repetition of every point placed in a
//! sequence, random from a recorded seed or in file order.

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use super::file::{Combine, Order, StudyFile};

/// One run of the schedule: a point (an index into the study's points) and which of its
/// repetitions (from 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Slot {
    pub point: usize,
    pub repetition: u32,
}

/// Every point as coordinates: for each axis, the index of its value.
pub fn points(file: &StudyFile) -> Result<Vec<Vec<usize>>> {
    let axes = &file.axes;
    if axes.is_empty() {
        if file.combine == Combine::List && !file.points.is_empty() {
            bail!("[[points]] name axis values, but the study has no [[axis]]");
        }
        return Ok(vec![Vec::new()]);
    }
    match file.combine {
        Combine::Zip => {
            let n = axes[0].values.len();
            if let Some(a) = axes.iter().find(|a| a.values.len() != n) {
                bail!(
                    "combine = \"zip\": axis '{}' has {} values, axis '{}' {}; zipped axes need as many each",
                    a.name,
                    a.values.len(),
                    axes[0].name,
                    n
                );
            }
            Ok((0..n).map(|k| vec![k; axes.len()]).collect())
        }
        Combine::Product => product(file),
        Combine::List => list(file),
    }
}

/// The product of the zip groups and of every axis in no group, the first axis varying
/// slowest (file order reads like nested loops).
fn product(file: &StudyFile) -> Result<Vec<Vec<usize>>> {
    let axes = &file.axes;
    let index = |name: &str| {
        axes.iter()
            .position(|a| a.name == name)
            .ok_or_else(|| anyhow::anyhow!("zip names '{name}', which is not an axis"))
    };
    // Each group: the axes in it and its length.
    let mut group_of = vec![None; axes.len()];
    let mut groups: Vec<(Vec<usize>, usize)> = Vec::new();
    for names in &file.zip {
        let members = names.iter().map(|n| index(n)).collect::<Result<Vec<_>>>()?;
        let Some(&first) = members.first() else {
            continue;
        };
        let n = axes[first].values.len();
        for &m in &members {
            if group_of[m].is_some() {
                bail!("axis '{}' is in two zip groups", axes[m].name);
            }
            if axes[m].values.len() != n {
                bail!(
                    "zip: axis '{}' has {} values, axis '{}' {}; zipped axes need as many each",
                    axes[m].name,
                    axes[m].values.len(),
                    axes[first].name,
                    n
                );
            }
            group_of[m] = Some(groups.len());
        }
        groups.push((members, n));
    }
    // Groups in the order of their first axis; lone axes are groups of one.
    let mut ordered: Vec<(Vec<usize>, usize)> = Vec::new();
    for (i, a) in axes.iter().enumerate() {
        match group_of[i] {
            None => ordered.push((vec![i], a.values.len())),
            Some(g) if groups[g].0[0] == i => ordered.push(groups[g].clone()),
            Some(_) => {}
        }
    }
    // Counted before one point is built, with `run`'s cap: axes of 3000 x 2 x 3000 x 3000
    // asked the allocator for 1.3 TB and aborted the process.
    let count = ordered
        .iter()
        .fold(1u128, |c, (_, n)| c.saturating_mul(*n as u128));
    if count > crate::plan::MAX_POINTS as u128 {
        let shape: Vec<String> = ordered
            .iter()
            .map(|(members, n)| {
                let names: Vec<&str> = members.iter().map(|&m| axes[m].name.as_str()).collect();
                format!("{n} {}", names.join("+"))
            })
            .collect();
        bail!(
            "the study has {count} points ({}); at most {} are allowed",
            shape.join(" x "),
            crate::plan::MAX_POINTS
        );
    }
    let mut out = vec![vec![0; axes.len()]];
    for (members, n) in ordered {
        let mut next = Vec::with_capacity(out.len() * n);
        for coords in &out {
            for k in 0..n {
                let mut c = coords.clone();
                for &m in &members {
                    c[m] = k;
                }
                next.push(c);
            }
        }
        out = next;
    }
    Ok(out)
}

fn list(file: &StudyFile) -> Result<Vec<Vec<usize>>> {
    if file.points.is_empty() {
        bail!("combine = \"list\" needs [[points]]");
    }
    let mut out = Vec::new();
    for (k, p) in file.points.iter().enumerate() {
        if let Some(name) = p.keys().find(|n| !file.axes.iter().any(|a| &a.name == *n)) {
            bail!("point {}: '{name}' is not an axis", k + 1);
        }
        let mut coords = Vec::new();
        for a in &file.axes {
            let Some(v) = p.get(&a.name) else {
                bail!("point {}: no value for axis '{}'", k + 1, a.name);
            };
            let Some(i) = a.values.iter().position(|x| x == v) else {
                bail!(
                    "point {}: {v} is not one of axis '{}''s values",
                    k + 1,
                    a.name
                );
            };
            coords.push(i);
        }
        out.push(coords);
    }
    Ok(out)
}

/// Every repetition of every point, in the study's order.
pub fn slots(points: usize, repetitions: u32, order: Order, seed: u64) -> Vec<Slot> {
    let mut slots: Vec<Slot> = match order {
        Order::Sequential => (0..points)
            .flat_map(|point| (1..=repetitions).map(move |repetition| Slot { point, repetition }))
            .collect(),
        // Repetition by repetition, so that however the shuffle falls, each repetition of a
        // point keeps its number in run order.
        Order::Random => (1..=repetitions)
            .flat_map(|repetition| (0..points).map(move |point| Slot { point, repetition }))
            .collect(),
    };
    if order == Order::Random {
        fastrand::Rng::with_seed(seed).shuffle(&mut slots);
        renumber(&mut slots);
    }
    slots
}

/// After a shuffle: each point's runs are numbered 1, 2, ... in the order they happen.
fn renumber(slots: &mut [Slot]) {
    let mut seen = std::collections::HashMap::new();
    for s in slots {
        let n = seen.entry(s.point).or_insert(0);
        *n += 1;
        s.repetition = *n;
    }
}

/// Moves the slots into groups by `key` (the lab link each needs), the groups in the order
/// their first slot had, keeping the order within each: one lab per link, not one per run.
pub fn group_by<K: PartialEq + Clone>(slots: &[Slot], key: impl Fn(&Slot) -> K) -> Vec<Slot> {
    let mut keys: Vec<K> = Vec::new();
    for s in slots {
        let k = key(s);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let mut out = Vec::with_capacity(slots.len());
    for k in &keys {
        out.extend(slots.iter().filter(|s| &key(s) == k).copied());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> StudyFile {
        StudyFile::parse(&format!("name = \"t\"\n{text}")).unwrap()
    }

    const TWO_BY_THREE: &str = "[[axis]]\nname = \"window\"\nvalues = [1, 2]\n[[axis]]\nname = \"write_size\"\nvalues = [10, 20, 30]\n";

    #[test]
    fn a_product_varies_the_last_axis_fastest() {
        let p = points(&file(TWO_BY_THREE)).unwrap();
        assert_eq!(
            p,
            vec![
                vec![0, 0],
                vec![0, 1],
                vec![0, 2],
                vec![1, 0],
                vec![1, 1],
                vec![1, 2]
            ]
        );
    }

    /// Axes of 3000 x 2 x 3000 x 3000 once aborted the process on a 1.3 TB
    /// allocation; the product is counted before a point is built, with `run`'s cap.
    #[test]
    fn a_product_above_the_cap_is_refused_before_it_is_built() {
        let axis = |name: &str, n: usize| {
            let values: Vec<String> = (1..=n).map(|v| v.to_string()).collect();
            format!(
                "[[axis]]\nname = \"{name}\"\nvalues = [{}]\n",
                values.join(", ")
            )
        };
        let f = file(&format!(
            "zip = [[\"sndbuf\", \"rcvbuf\"]]\n{}{}{}{}",
            axis("size", 400),
            axis("window", 2),
            axis("sndbuf", 400),
            axis("rcvbuf", 400)
        ));
        // The zipped pair counts once: 400 x 2 x 400 = 320 000.
        let e = points(&f).unwrap_err().to_string();
        assert_eq!(
            e,
            "the study has 320000 points (400 size x 2 window x 400 sndbuf+rcvbuf); at most 100000 are allowed"
        );
        let f = file(&format!("{}{}", axis("size", 400), axis("window", 250)));
        assert_eq!(points(&f).unwrap().len(), 100_000);
    }

    #[test]
    fn zipped_groups_move_together_inside_a_product() {
        let f = file(
            "zip = [[\"sndbuf\", \"rcvbuf\"]]\n[[axis]]\nname = \"size\"\nvalues = [1, 2]\n[[axis]]\nname = \"sndbuf\"\nvalues = [8, 16, 32]\n[[axis]]\nname = \"rcvbuf\"\nvalues = [8, 16, 32]\n",
        );
        let p = points(&f).unwrap();
        assert_eq!(p.len(), 6);
        assert!(p.iter().all(|c| c[1] == c[2]));
        assert_eq!(p[0], vec![0, 0, 0]);
        assert_eq!(p[5], vec![1, 2, 2]);
        let bad = file(
            "zip = [[\"a\", \"b\"]]\n[[axis]]\nname = \"a\"\nvalues = [1, 2]\n[[axis]]\nname = \"b\"\nvalues = [1]\n",
        );
        assert!(points(&bad)
            .unwrap_err()
            .to_string()
            .contains("as many each"));
    }

    #[test]
    fn zip_and_list() {
        let z = file("combine = \"zip\"\n[[axis]]\nname = \"a\"\nvalues = [1, 2]\n[[axis]]\nname = \"b\"\nvalues = [3, 4]\n");
        assert_eq!(points(&z).unwrap(), vec![vec![0, 0], vec![1, 1]]);
        let l = file(&format!(
            "combine = \"list\"\n{TWO_BY_THREE}[[points]]\nwindow = 2\nwrite_size = 10\n[[points]]\nwindow = 1\nwrite_size = 30\n"
        ));
        assert_eq!(points(&l).unwrap(), vec![vec![1, 0], vec![0, 2]]);
        let bad = file(&format!(
            "combine = \"list\"\n{TWO_BY_THREE}[[points]]\nwindow = 3\nwrite_size = 10\n"
        ));
        assert!(points(&bad).unwrap_err().to_string().contains("not one of"));
    }

    #[test]
    fn a_random_order_is_fixed_by_its_seed_and_holds_every_run_once() {
        let a = slots(6, 3, Order::Random, 42);
        assert_eq!(a, slots(6, 3, Order::Random, 42));
        assert_ne!(a, slots(6, 3, Order::Random, 43));
        assert_eq!(a.len(), 18);
        for point in 0..6 {
            let reps: Vec<u32> = a
                .iter()
                .filter(|s| s.point == point)
                .map(|s| s.repetition)
                .collect();
            assert_eq!(reps, vec![1, 2, 3]);
        }
        let s = slots(2, 2, Order::Sequential, 0);
        assert_eq!(
            s.iter()
                .map(|s| (s.point, s.repetition))
                .collect::<Vec<_>>(),
            vec![(0, 1), (0, 2), (1, 1), (1, 2)]
        );
    }

    #[test]
    fn grouping_keeps_the_order_inside_each_group() {
        let s = slots(4, 1, Order::Sequential, 0);
        let g = group_by(&s, |s| s.point % 2);
        assert_eq!(
            g.iter().map(|s| s.point).collect::<Vec<_>>(),
            vec![0, 2, 1, 3]
        );
    }
}
