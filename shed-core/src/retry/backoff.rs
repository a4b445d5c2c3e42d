//! Full-jitter exponential backoff.
//!
//! ```
//! use std::time::Duration;
//! use shed_core::retry::Backoff;
//!
//! let backoff = Backoff::default(); // base 100 ms, cap 800 ms
//! let half = || 0.5;
//! assert_eq!(backoff.delay(0, &half), Duration::from_millis(50));
//! assert_eq!(backoff.delay(1, &half), Duration::from_millis(100));
//! assert_eq!(backoff.delay(9, &half), Duration::from_millis(400)); // capped at 800
//! ```

use std::time::Duration;

use super::Jitter;

/// Full jitter: before retry `k` (0 for the first retry) wait a time drawn
/// uniformly from `[0, min(cap, base * 2^k))`.
///
/// Full jitter spreads retries of many clients evenly over the window instead
/// of bunching them at its edge, which is what keeps a fleet of clients from
/// returning to an overloaded server together.
///
/// ```
/// use std::time::Duration;
/// use shed_core::retry::Backoff;
///
/// let backoff = Backoff::new(Duration::from_millis(10), Duration::from_millis(30));
/// assert_eq!(backoff.ceiling(0), Duration::from_millis(10));
/// assert_eq!(backoff.ceiling(1), Duration::from_millis(20));
/// assert_eq!(backoff.ceiling(2), Duration::from_millis(30));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    base: Duration,
    cap: Duration,
}

impl Backoff {
    /// A backoff doubling from `base` up to `cap`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::retry::Backoff;
    ///
    /// let backoff = Backoff::new(Duration::from_millis(100), Duration::from_millis(800));
    /// assert_eq!(backoff, Backoff::default());
    /// ```
    #[must_use]
    pub const fn new(base: Duration, cap: Duration) -> Self {
        Self { base, cap }
    }

    /// The exclusive upper end of the window before retry `k`:
    /// `min(cap, base * 2^k)`, without overflow for any `k`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::retry::Backoff;
    ///
    /// assert_eq!(Backoff::default().ceiling(u32::MAX), Duration::from_millis(800));
    /// ```
    #[must_use]
    pub fn ceiling(&self, k: u32) -> Duration {
        let factor = 1u32.checked_shl(k).unwrap_or(u32::MAX);
        self.base
            .checked_mul(factor)
            .map_or(self.cap, |window| window.min(self.cap))
    }

    /// The wait before retry `k`, drawn with `jitter` from
    /// `[0, ceiling(k))`. A jitter value outside `[0, 1)` is clamped into
    /// the window; a zero-length window gives zero.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::retry::Backoff;
    ///
    /// let backoff = Backoff::default();
    /// assert_eq!(backoff.delay(0, &|| 0.0), Duration::ZERO);
    /// assert!(backoff.delay(0, &|| 1.0) < Duration::from_millis(100));
    /// assert_eq!(backoff.delay(0, &|| f64::NAN), Duration::ZERO);
    /// ```
    #[must_use]
    pub fn delay(&self, k: u32, jitter: &(impl Jitter + ?Sized)) -> Duration {
        let ceiling = self.ceiling(k).as_nanos();
        let unit = jitter.unit();
        let unit = if unit.is_nan() {
            0.0
        } else {
            unit.clamp(0.0, 1.0)
        };
        // `as` saturates float-to-int; the window is at most `cap`.
        #[allow(
            clippy::cast_precision_loss,
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss
        )]
        let drawn = (ceiling as f64 * unit) as u128;
        let nanos = drawn.min(ceiling.saturating_sub(1));
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }
}

impl Default for Backoff {
    /// Base 100 ms, cap 800 ms.
    fn default() -> Self {
        Self::new(Duration::from_millis(100), Duration::from_millis(800))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_doubles_until_the_cap() {
        let backoff = Backoff::default();
        let ceilings: Vec<u64> = (0..6)
            .map(|k| u64::try_from(backoff.ceiling(k).as_millis()).unwrap_or(u64::MAX))
            .collect();
        assert_eq!(ceilings, [100, 200, 400, 800, 800, 800]);
    }

    #[test]
    fn a_delay_stays_below_its_window() {
        let backoff = Backoff::default();
        for k in 0..10 {
            let delay = backoff.delay(k, &|| 0.999_999_999_999);
            assert!(delay < backoff.ceiling(k));
        }
    }

    #[test]
    fn out_of_range_jitter_is_clamped() {
        let backoff = Backoff::default();
        assert_eq!(backoff.delay(0, &|| -3.0), Duration::ZERO);
        assert!(backoff.delay(0, &|| f64::INFINITY) < Duration::from_millis(100));
    }

    #[test]
    fn a_zero_base_never_waits() {
        let backoff = Backoff::new(Duration::ZERO, Duration::from_secs(1));
        assert_eq!(backoff.delay(3, &|| 0.7), Duration::ZERO);
    }
}
