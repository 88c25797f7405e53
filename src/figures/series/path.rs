//! `--path-timing`'s figure: a stacked bar per point (per message size in a sweep), one part
//! per stage of the round trip in the order a message meets them, each the stage's mean
//! time, as Fig. 4 of [Moldeklev et al. n.d.] (REFERENCES.md) splits a segment's time per size
//! between the socket layer, TCP/IP and the driver on each host.

use crate::figures::plots::{Bar, BarSeries, Bars, Figure};
use crate::model::path::{PathTiming, StageName};
use crate::model::PointResult;

use super::curves::valid_latency;
use super::points::short_point;
use super::Run;

/// The points of `runs` with path timing, each with its group name: its size (and swept
/// settings), the run's name before it when there are several runs.
pub fn path_points<'a>(runs: &[Run<'a>]) -> Vec<(String, &'a PointResult, &'a PathTiming)> {
    let mut out = Vec::new();
    for run in runs {
        for p in &run.report.points {
            let Some(t) = &p.path_timing else { continue };
            let name = short_point(run.report, p);
            let name = name.strip_prefix("size ").unwrap_or(&name).to_owned();
            let name = if runs.len() > 1 {
                format!("{} {name}", run.name())
            } else {
                name
            };
            out.push((name, p, t));
        }
    }
    out
}

/// Stacked bars of each point's stages, mean µs per round trip; None without a point with
/// path timing. A point whose latency is not a valid measurement is drawn hatched grey.
pub fn path(runs: &[Run]) -> Option<Figure> {
    let points = path_points(runs);
    if points.is_empty() {
        return None;
    }
    let stages: Vec<StageName> = StageName::SHOWN
        .into_iter()
        .filter(|s| {
            points
                .iter()
                .any(|(_, _, t)| t.stages.iter().any(|x| x.name == *s))
        })
        .collect();
    if stages.is_empty() {
        return None;
    }
    let series: Vec<BarSeries> = stages
        .iter()
        .enumerate()
        .map(|(k, s)| BarSeries {
            label: s.label().to_owned(),
            colour: k,
            bars: points
                .iter()
                .map(|(_, p, t)| {
                    let x = t.stages.iter().find(|x| x.name == *s)?;
                    Some(Bar {
                        value: x.mean_ns / 1e3,
                        ci: None,
                        invalid: valid_latency(p).is_none(),
                        // A part that stands for a merged neighbour too.
                        outlined: !x.merged.is_empty(),
                    })
                })
                .collect(),
        })
        .collect();
    let messages: u64 = points.iter().map(|(_, _, t)| t.messages).sum();
    let merged = points
        .iter()
        .any(|(_, _, t)| t.stages.iter().any(|s| !s.merged.is_empty()));
    Some(Figure::Bars(Bars {
        title: format!(
            "Where the round trip's time goes, from both ends' kernel stamps ({messages} round trips over {} point{})",
            points.len(),
            if points.len() == 1 { "" } else { "s" }
        ),
        x_label: if merged {
            "message size (bytes); outlined: a stage merged with its neighbour".into()
        } else {
            "message size (bytes)".into()
        },
        y_label: "mean per round trip, stages stacked (µs)".into(),
        groups: points.iter().map(|(name, _, _)| name.clone()).collect(),
        sequential_colours: (stages.len() > 7).then_some(stages.len()),
        series,
        stacked: true,
    }))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::model::path::{PathClock, Stage};
    use crate::store::db::tests::report;

    /// Nine stages of one clock, stage i taking i µs on average.
    pub(crate) fn timing(messages: u64) -> PathTiming {
        let stages: Vec<Stage> = StageName::ALL
            .iter()
            .enumerate()
            .map(|(i, s)| Stage {
                name: *s,
                merged: Vec::new(),
                samples: messages,
                min_ns: 500,
                p50_ns: 1000 * (i as u64 + 1),
                p99_ns: 3000 * (i as u64 + 1),
                mean_ns: 1000.0 * (i as f64 + 1.0),
            })
            .collect();
        PathTiming {
            messages,
            incomplete: 0,
            clock: PathClock::Shared,
            stages,
            rtt_min_ns: 40_000,
            rtt_p50_ns: 45_000,
            rtt_p99_ns: 90_000,
            rtt_mean_ns: 45_500.0,
            residual_mean_ns: 500.0,
            residual_max_abs_ns: 2000,
            client_driver_to_ack: None,
            validity: crate::stats::Validity::default(),
            wire_both: None,
            cost: None,
            notes: Vec::new(),
        }
    }

    /// One bar per point, a part per stage in order, in µs; a merged stage is outlined and
    /// the stage it stands for has no part.
    #[test]
    fn a_stacked_bar_per_size_with_a_part_per_stage() {
        let mut r = report("pingpong", 3, 20_000.0);
        r.points[0].path_timing = Some(timing(1000));
        let mut merged = timing(2000);
        merged.stages.remove(1);
        merged.stages[1].merged = vec![StageName::ClientQueueToDriver];
        r.points[2].path_timing = Some(merged);
        let Some(Figure::Bars(b)) = path(&[Run { id: 1, report: &r }]) else {
            panic!("no bars")
        };
        assert!(b.stacked);
        assert_eq!(b.groups, ["1", "3"]);
        assert_eq!(
            b.title,
            "Where the round trip's time goes, from both ends' kernel stamps (3000 round trips over 2 points)"
        );
        let labels: Vec<&str> = b.series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "client send→queue",
                "client queue→driver",
                "wire out",
                "server arrival→read",
                "server turnaround",
                "server send→queue",
                "server queue→driver",
                "wire back",
                "client arrival→read"
            ]
        );
        assert_eq!(b.series[2].bars[0].as_ref().map(|x| x.value), Some(3.0));
        assert_eq!(b.series[1].bars[1], None);
        assert!(b.series[2].bars[1].as_ref().is_some_and(|x| x.outlined));
        assert_eq!(b.sequential_colours, Some(9));
        let svg = crate::figures::plots::render_svg(&Figure::Bars(b)).unwrap();
        assert!(svg.contains("client arrival→read"), "{svg}");
        assert!(svg.contains("mean per round trip, stages stacked (µs)"));
    }

    #[test]
    fn no_path_timing_no_figure() {
        let r = report("pingpong", 3, 20_000.0);
        assert_eq!(path(&[Run { id: 1, report: &r }]), None);
    }
}
