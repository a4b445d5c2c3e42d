//! The source of randomness behind backoff jitter, injectable for tests.
//!
//! ```
//! use shed_core::retry::{Jitter, SplitMix64};
//!
//! let fixed = || 0.5;
//! assert_eq!(fixed.unit(), 0.5);
//!
//! let random = SplitMix64::new(7);
//! let u = random.unit();
//! assert!((0.0..1.0).contains(&u));
//! ```

pub use crate::random::SplitMix64;

/// A source of numbers uniform in `[0, 1)`, shared by the operations of a
/// client (hence `&self`).
///
/// Any `Fn() -> f64` is a `Jitter`, which is how tests fix the randomness.
/// Values outside `[0, 1)` (and NaN) are tolerated by the backoff, which
/// clamps them into its range.
///
/// ```
/// use shed_core::retry::Jitter;
///
/// let always_half = || 0.5;
/// assert_eq!(always_half.unit(), 0.5);
/// ```
pub trait Jitter {
    /// The next number, uniform in `[0, 1)`.
    fn unit(&self) -> f64;
}

impl<F: Fn() -> f64> Jitter for F {
    fn unit(&self) -> f64 {
        self()
    }
}

impl Jitter for SplitMix64 {
    fn unit(&self) -> f64 {
        // The top 53 bits fill an f64 mantissa exactly: uniform in [0, 1).
        const SCALE: f64 = 1.0 / 9_007_199_254_740_992.0; // 2^-53
        #[allow(clippy::cast_precision_loss)] // 53 significant bits: exact
        let top = (self.next_u64() >> 11) as f64;
        top * SCALE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_stays_in_the_unit_interval() {
        let generator = SplitMix64::new(3);
        for _ in 0..10_000 {
            let u = generator.unit();
            assert!((0.0..1.0).contains(&u), "{u}");
        }
    }

    #[test]
    fn splitmix_spreads_over_the_interval() {
        let generator = SplitMix64::new(11);
        let low = (0..10_000).filter(|_| generator.unit() < 0.5).count();
        assert!((4_500..5_500).contains(&low), "{low}");
    }
}
