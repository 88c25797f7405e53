//! Sharing a bottleneck: each flow's share of what all received, and Jain's fairness index,
//! J = (sum x)^2 / (n * sum x^2): 1 when every flow got the same, 1/n when one got everything.

/// Jain's index of the flows' amounts (bytes, rates); None without flows or when nothing
/// moved (no share to judge).
pub fn jain(x: &[f64]) -> Option<f64> {
    let sum: f64 = x.iter().sum();
    let squares: f64 = x.iter().map(|v| v * v).sum();
    (!x.is_empty() && squares > 0.0).then(|| sum * sum / (x.len() as f64 * squares))
}

/// Each flow's share of the total (0 to 1); all None when the total is 0.
pub fn shares(x: &[f64]) -> Vec<Option<f64>> {
    let sum: f64 = x.iter().sum();
    x.iter().map(|v| (sum > 0.0).then(|| v / sum)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_flows_are_perfectly_fair() {
        assert_eq!(jain(&[5.0, 5.0]), Some(1.0));
        assert_eq!(jain(&[3.0, 3.0, 3.0, 3.0]), Some(1.0));
        assert_eq!(shares(&[5.0, 5.0]), vec![Some(0.5), Some(0.5)]);
    }

    #[test]
    fn one_flow_taking_everything_is_one_over_n() {
        assert_eq!(jain(&[8.0, 0.0]), Some(0.5));
        assert_eq!(jain(&[0.0, 0.0, 0.0, 2.0]), Some(0.25));
        assert_eq!(shares(&[8.0, 0.0]), vec![Some(1.0), Some(0.0)]);
    }

    #[test]
    fn uneven_flows_by_the_formula() {
        // (1 + 3)^2 / (2 * (1 + 9)) = 16 / 20.
        assert_eq!(jain(&[1.0, 3.0]), Some(0.8));
        assert_eq!(shares(&[1.0, 3.0]), vec![Some(0.25), Some(0.75)]);
    }

    #[test]
    fn nothing_to_judge() {
        assert_eq!(jain(&[]), None);
        assert_eq!(jain(&[0.0, 0.0]), None);
        assert_eq!(shares(&[0.0, 0.0]), vec![None, None]);
    }
}
