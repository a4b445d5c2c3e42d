//! Random draws the lab shares: the load's Poisson arrivals, the worker
//! pool's service times and the CPU-bound floor's simulation.

/// An exponential draw of mean 1 from `u`, uniform in [0, 1), by the
/// inverse transform: `1 - u` lies in (0, 1], so the logarithm is finite.
pub fn unit_exponential(u: f64) -> f64 {
    -(1.0 - u).ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_draw_is_finite_at_both_ends_and_its_mean_is_one() {
        assert_eq!(unit_exponential(0.0), 0.0);
        assert!(unit_exponential(1.0 - f64::EPSILON).is_finite());
        let n = 100_000;
        let mean = (0..n)
            .map(|i| unit_exponential((f64::from(i) + 0.5) / f64::from(n)))
            .sum::<f64>()
            / f64::from(n);
        assert!((mean - 1.0).abs() < 1e-3, "{mean}");
    }
}
