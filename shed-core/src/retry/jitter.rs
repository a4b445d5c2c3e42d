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

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

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

/// A small, lock-free `SplitMix64` generator: good enough spread for jitter,
/// not for anything secret.
///
/// Each call advances one shared atomic counter (`Relaxed` is enough: only
/// that counter is involved), so threads drawing at once still get distinct
/// values.
///
/// ```
/// use shed_core::retry::{Jitter, SplitMix64};
///
/// let a = SplitMix64::new(1);
/// let b = SplitMix64::new(1);
/// assert_eq!(a.unit(), b.unit()); // same seed, same sequence
/// ```
#[derive(Debug)]
pub struct SplitMix64 {
    state: AtomicU64,
}

const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

impl SplitMix64 {
    /// A generator with a fixed seed, for reproducible runs.
    ///
    /// ```
    /// use shed_core::retry::{Jitter, SplitMix64};
    ///
    /// assert!(SplitMix64::new(42).unit() < 1.0);
    /// ```
    #[must_use]
    pub const fn new(seed: u64) -> Self {
        Self {
            state: AtomicU64::new(seed),
        }
    }

    /// A generator seeded from the process's random hash keys, so clients in
    /// different processes do not jitter in step.
    ///
    /// ```
    /// use shed_core::retry::{Jitter, SplitMix64};
    ///
    /// assert!(SplitMix64::from_entropy().unit() < 1.0);
    /// ```
    #[must_use]
    pub fn from_entropy() -> Self {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u64(GOLDEN_GAMMA);
        Self::new(hasher.finish())
    }

    /// The next raw 64-bit value.
    ///
    /// ```
    /// use shed_core::retry::SplitMix64;
    ///
    /// let generator = SplitMix64::new(0);
    /// assert_ne!(generator.next_u64(), generator.next_u64());
    /// ```
    pub fn next_u64(&self) -> u64 {
        let mut z = self
            .state
            .fetch_add(GOLDEN_GAMMA, Ordering::Relaxed)
            .wrapping_add(GOLDEN_GAMMA);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

impl Default for SplitMix64 {
    fn default() -> Self {
        Self::from_entropy()
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
