//! Shared by the statistics tests.

/// Asserts `actual` is within relative tolerance `tol` of `expected`.
pub fn assert_rel(actual: f64, expected: f64, tol: f64) {
    let rel = ((actual - expected) / expected).abs();
    assert!(
        rel <= tol,
        "actual {actual}, expected {expected}, relative error {rel:e} > {tol:e}"
    );
}
