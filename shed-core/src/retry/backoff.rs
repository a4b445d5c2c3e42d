//! Full-jitter exponential backoff.
//!
//! ```
//! use std::time::Duration;
//! use shed_core::retry::Backoff;
//!
//! let backoff = Backoff::new()
//!     .base(Duration::from_millis(100))
//!     .cap(Duration::from_millis(800));
//! assert_eq!(backoff, Backoff::default());
//! ```

use std::time::Duration;

use super::Jitter;

/// Full jitter: before retry `k` (0 for the first retry) wait a time drawn
/// uniformly from `[0, min(cap, base * 2^k))`. Given to
/// [`RetrierBuilder::backoff`](super::RetrierBuilder::backoff).
///
/// Full jitter spreads retries of many clients evenly over the window instead
/// of bunching them at its edge, which is what keeps a fleet of clients from
/// returning to an overloaded server together.
///
/// ```
/// use std::time::Duration;
/// use shed_core::retry::{AttemptOutcome, Backoff, Decision, Pushback, Replay, Retrier};
///
/// // Windows of 10, 20, 40, 40... ms; a jitter of 0.5 waits half of each.
/// let retrier = Retrier::builder()
///     .backoff(Backoff::new().base(Duration::from_millis(10)).cap(Duration::from_millis(40)))
///     .jitter(|| 0.5)
///     .build()?;
/// let mut op = retrier.begin(Replay::Safe);
/// let first = retrier.decide(&mut op, AttemptOutcome::Status(503), Pushback::Absent, Duration::ZERO);
/// assert_eq!(first, Decision::Retry { attempt: 2, delay: Duration::from_millis(5) });
/// let second = retrier.decide(&mut op, AttemptOutcome::Status(503), Pushback::Absent, Duration::from_millis(5));
/// assert_eq!(second, Decision::Retry { attempt: 3, delay: Duration::from_millis(10) });
/// # Ok::<(), shed_core::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    base: Duration,
    cap: Duration,
}

impl Backoff {
    /// The default backoff: a base of 100 ms, doubling up to 800 ms.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            base: Duration::from_millis(100),
            cap: Duration::from_millis(800),
        }
    }

    /// Sets the window before the first retry. Zero never waits (beyond
    /// the server's pushback).
    #[must_use]
    pub const fn base(mut self, base: Duration) -> Self {
        self.base = base;
        self
    }

    /// Sets the widest window, which the doubling never passes.
    #[must_use]
    pub const fn cap(mut self, cap: Duration) -> Self {
        self.cap = cap;
        self
    }

    /// The exclusive upper end of the window before retry `k`:
    /// `min(cap, base * 2^k)`, without overflow for any `k`.
    pub(crate) fn ceiling(&self, k: u32) -> Duration {
        let factor = 1u32.checked_shl(k).unwrap_or(u32::MAX);
        self.base
            .checked_mul(factor)
            .map_or(self.cap, |window| window.min(self.cap))
    }

    /// The wait before retry `k`, drawn with `jitter` from
    /// `[0, ceiling(k))`. A jitter value outside `[0, 1)` is clamped into
    /// the window; a zero-length window gives zero.
    pub(crate) fn delay(&self, k: u32, jitter: &(impl Jitter + ?Sized)) -> Duration {
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
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn millis(base: u64, cap: u64) -> Backoff {
        Backoff::new()
            .base(Duration::from_millis(base))
            .cap(Duration::from_millis(cap))
    }

    #[test]
    fn the_window_doubles_until_the_cap() {
        let backoff = Backoff::default();
        let ceilings: Vec<u64> = (0..6)
            .map(|k| u64::try_from(backoff.ceiling(k).as_millis()).unwrap_or(u64::MAX))
            .collect();
        assert_eq!(ceilings, [100, 200, 400, 800, 800, 800]);
    }

    #[test]
    fn a_cap_between_two_doublings_is_the_last_window() {
        let backoff = millis(10, 30);
        assert_eq!(backoff.ceiling(0), Duration::from_millis(10));
        assert_eq!(backoff.ceiling(1), Duration::from_millis(20));
        assert_eq!(backoff.ceiling(2), Duration::from_millis(30));
    }

    #[test]
    fn the_window_of_any_retry_is_at_most_the_cap() {
        assert_eq!(
            Backoff::default().ceiling(u32::MAX),
            Duration::from_millis(800)
        );
    }

    #[test]
    fn a_jitter_of_one_half_waits_half_the_window() {
        let backoff = Backoff::default();
        let half = || 0.5;
        assert_eq!(backoff.delay(0, &half), Duration::from_millis(50));
        assert_eq!(backoff.delay(1, &half), Duration::from_millis(100));
        assert_eq!(backoff.delay(9, &half), Duration::from_millis(400));
    }

    #[test]
    fn a_delay_stays_below_its_window() {
        let backoff = Backoff::default();
        assert_eq!(backoff.delay(0, &|| 0.0), Duration::ZERO);
        assert!(backoff.delay(0, &|| 1.0) < Duration::from_millis(100));
        for k in 0..10 {
            let delay = backoff.delay(k, &|| 0.999_999_999_999);
            assert!(delay < backoff.ceiling(k));
        }
    }

    #[test]
    fn out_of_range_jitter_is_clamped() {
        let backoff = Backoff::default();
        assert_eq!(backoff.delay(0, &|| -3.0), Duration::ZERO);
        assert_eq!(backoff.delay(0, &|| f64::NAN), Duration::ZERO);
        assert!(backoff.delay(0, &|| f64::INFINITY) < Duration::from_millis(100));
    }

    #[test]
    fn a_zero_base_never_waits() {
        let backoff = Backoff::new()
            .base(Duration::ZERO)
            .cap(Duration::from_secs(1));
        assert_eq!(backoff.delay(3, &|| 0.7), Duration::ZERO);
    }
}
