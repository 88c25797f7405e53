//! Pairs the points two runs have in common and collects the judged figures of each pair.
//!
//! Points pair on the same key and sizes. Runs of different patterns, or of different
//! settings unless allowed, are refused.

use anyhow::{bail, Result};

use crate::figures::series::describe_point;
use crate::model::{PointResult, RunDocument};

use super::figures::figures;
use super::judge::judge;
use super::settings::setting_differences;
use super::Comparison;

fn same_point(a: &PointResult, b: &PointResult) -> bool {
    a.key == b.key && a.request_size == b.request_size && a.response_size == b.response_size
}

/// Compares run B with run A point by point. Runs that differ in a setting (one with
/// `--nodelay`, one without) are refused unless `allow_different`: their difference is the
/// setting's, and calling it better or worse would judge a change that was not made.
pub fn compare(
    a: &RunDocument,
    b: &RunDocument,
    allow_different: bool,
    margin_percent: f64,
) -> Result<Comparison> {
    if a.pattern != b.pattern {
        bail!(
            "run A measured {} and run B {}: only runs of the same pattern compare",
            a.pattern,
            b.pattern
        );
    }
    if !(margin_percent.is_finite() && margin_percent >= 0.0) {
        bail!("the margin must be a percentage of 0 or more, not {margin_percent}");
    }
    let different_settings = setting_differences(a, b);
    if !different_settings.is_empty() && !allow_different {
        bail!(
            "runs A and B were measured with different settings ({}): their difference is the settings', not a change's; add --allow-different to compare them anyway",
            different_settings.join("; ")
        );
    }
    let confidence = a.settings.confidence.max(b.settings.confidence);
    let mut changes = Vec::new();
    let mut only_in_a = Vec::new();
    for pa in &a.points {
        let Some(pb) = b.points.iter().find(|pb| same_point(pa, pb)) else {
            only_in_a.push(describe_point(a, pa));
            continue;
        };
        let repeated = pa.runs >= 2 && pb.runs >= 2;
        let fb = figures(b.pattern.name(), pb, repeated);
        for fa in figures(a.pattern.name(), pa, repeated) {
            let Some(fb) = fb.iter().find(|f| f.name == fa.name) else {
                continue;
            };
            changes.push(judge(
                describe_point(a, pa),
                &fa,
                fb,
                confidence,
                margin_percent,
            ));
        }
    }
    let only_in_b = b
        .points
        .iter()
        .filter(|pb| !a.points.iter().any(|pa| same_point(pa, pb)))
        .map(|pb| describe_point(b, pb))
        .collect();
    if changes.is_empty() {
        bail!("runs A and B have no point in common to compare");
    }
    Ok(Comparison {
        changes,
        different_settings,
        confidence,
        margin_percent,
        only_in_a,
        only_in_b,
    })
}

#[cfg(test)]
mod tests {
    use crate::output::compare_runs::compare;
    use crate::stats::between_runs::DEFAULT_MARGIN_PERCENT as DEFAULT_MARGIN;
    use crate::store::db::tests::report;

    /// A congestion-control sweep is an axis, not a setting: two sweeps over the same
    /// algorithms compare point by point, each algorithm's against its own, and a point of an
    /// algorithm only one run measured is listed as such.
    #[test]
    fn a_congestion_control_sweep_is_an_axis_not_a_setting_difference() {
        use crate::model::vocab::CcName;
        let sweep = |names: [&str; 2], rtt: f64| {
            let mut r = report("pingpong", 2, rtt);
            r.swept.cc = true;
            r.settings.cc = None;
            for (p, name) in r.points.iter_mut().zip(names) {
                p.key.size = 64;
                p.key.cc = CcName::new(name);
            }
            r
        };
        let a = sweep(["cubic", "reno"], 20_000.0);
        let b = sweep(["cubic", "bbr"], 20_000.0);
        let c = compare(&a, &b, false, DEFAULT_MARGIN).unwrap();
        assert!(c.different_settings.is_empty());
        assert!(c.changes.iter().all(|ch| ch.point.contains("cc cubic")));
        assert_eq!(c.only_in_a.len(), 1, "{:?}", c.only_in_a);
        assert!(c.only_in_a[0].contains("cc reno"), "{:?}", c.only_in_a);
        assert!(c.only_in_b[0].contains("cc bbr"), "{:?}", c.only_in_b);
    }
}
