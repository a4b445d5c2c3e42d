//! Which failures may be retried at all: the operation must be declared safe
//! to replay, and the failure must be in a narrow transient set.
//!
//! ```
//! use shed_core::retry::{AttemptOutcome, RetryableSet};
//!
//! let retryable = RetryableSet::default(); // 429, 503, 504, connect errors
//! assert!(retryable.contains(AttemptOutcome::Status(503)));
//! assert!(retryable.contains(AttemptOutcome::ConnectError));
//! assert!(!retryable.contains(AttemptOutcome::Status(400)));
//! assert!(!retryable.contains(AttemptOutcome::Status(500)));
//! ```

use std::fmt;

use super::AttemptOutcome;
use crate::ConfigError;

/// Whether the caller declared an operation safe to send more than once.
///
/// Nothing is retried unless declared [`Replay::Safe`]: only the caller knows
/// whether doing the operation twice is harmless.
///
/// ```
/// use shed_core::retry::Replay;
///
/// assert_eq!(Replay::default(), Replay::Unsafe);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Replay {
    /// Sending the operation again is harmless (idempotent or read-only).
    Safe,
    /// Sending it again could do the work twice: never retried.
    #[default]
    Unsafe,
}

/// The failures that may be retried: a set of 4xx/5xx statuses, plus
/// connect errors. By default 429, 503, 504 and connect errors. Given to
/// [`RetrierBuilder::retryable`](super::RetrierBuilder::retryable).
///
/// Among 4xx statuses only 408 and 429 can be retried: any other 4xx says
/// the request itself is wrong, and sending it again cannot help.
/// [`add_status`](Self::add_status) refuses them.
///
/// ```
/// use shed_core::retry::{AttemptOutcome, RetryableSet};
///
/// let retryable = RetryableSet::default().add_status(502)?.remove_status(504);
/// assert!(retryable.contains(AttemptOutcome::Status(502)));
/// assert!(!retryable.contains(AttemptOutcome::Status(504)));
/// # Ok::<(), shed_core::ConfigError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct RetryableSet {
    /// Bit `code - 400` is set for each retryable status in 400..=599.
    statuses: [u64; 4],
    connect_errors: bool,
}

impl RetryableSet {
    /// Nothing is retryable.
    ///
    /// ```
    /// use shed_core::retry::{AttemptOutcome, RetryableSet};
    ///
    /// let only_connect_errors = RetryableSet::empty().connect_errors(true);
    /// assert!(!only_connect_errors.contains(AttemptOutcome::Status(503)));
    /// ```
    #[must_use]
    pub const fn empty() -> Self {
        Self {
            statuses: [0; 4],
            connect_errors: false,
        }
    }

    /// Adds a status: 408, 429 or 5xx.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] (setting `retryable`) naming any other status,
    /// which is never retried: any other 4xx says the request itself is
    /// wrong, and a status below 400 is not a failure.
    ///
    /// ```
    /// use shed_core::retry::{AttemptOutcome, RetryableSet};
    ///
    /// let retryable = RetryableSet::default().add_status(502)?;
    /// assert!(retryable.contains(AttemptOutcome::Status(502)));
    ///
    /// let error = RetryableSet::default().add_status(404).unwrap_err();
    /// assert_eq!(
    ///     error.to_string(),
    ///     "invalid retryable: adds status 404, which is never retried; add only 408, 429 or 5xx \
    ///      (any other 4xx says the request itself is wrong)"
    /// );
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn add_status(mut self, status: u16) -> Result<Self, ConfigError> {
        if !matches!(status, 408 | 429 | 500..=599) {
            return Err(ConfigError::new(
                "retryable",
                format!(
                    "adds status {status}, which is never retried; add only 408, 429 or 5xx \
                     (any other 4xx says the request itself is wrong)"
                ),
            ));
        }
        self.insert(status);
        Ok(self)
    }

    /// Removes a status (a no-op if absent).
    ///
    /// ```
    /// use shed_core::retry::{AttemptOutcome, RetryableSet};
    ///
    /// let retryable = RetryableSet::default().remove_status(504);
    /// assert!(!retryable.contains(AttemptOutcome::Status(504)));
    /// ```
    #[must_use]
    pub fn remove_status(mut self, status: u16) -> Self {
        if let Some(bit) = Self::bit(status) {
            self.statuses[bit / 64] &= !(1 << (bit % 64));
        }
        self
    }

    /// Sets whether connect errors are retried.
    ///
    /// ```
    /// use shed_core::retry::{AttemptOutcome, RetryableSet};
    ///
    /// let retryable = RetryableSet::default().connect_errors(false);
    /// assert!(!retryable.contains(AttemptOutcome::ConnectError));
    /// ```
    #[must_use]
    pub const fn connect_errors(mut self, retry: bool) -> Self {
        self.connect_errors = retry;
        self
    }

    /// Whether `outcome` may be retried. Successes never are.
    #[must_use]
    pub fn contains(&self, outcome: AttemptOutcome) -> bool {
        match outcome {
            AttemptOutcome::Status(status) => Self::bit(status)
                .is_some_and(|bit| self.statuses[bit / 64] & (1 << (bit % 64)) != 0),
            AttemptOutcome::ConnectError => self.connect_errors,
            AttemptOutcome::OtherError => false,
        }
    }

    /// Sets the bit of `status`; statuses outside 400..=599 are ignored.
    fn insert(&mut self, status: u16) {
        if let Some(bit) = Self::bit(status) {
            self.statuses[bit / 64] |= 1 << (bit % 64);
        }
    }

    fn bit(status: u16) -> Option<usize> {
        (400..=599)
            .contains(&status)
            .then(|| usize::from(status - 400))
    }

    fn statuses(&self) -> impl Iterator<Item = u16> + '_ {
        (400..=599u16).filter(|&status| self.contains(AttemptOutcome::Status(status)))
    }
}

impl Default for RetryableSet {
    /// 429, 503, 504 and connect errors.
    fn default() -> Self {
        let mut set = Self::empty().connect_errors(true);
        for status in [429, 503, 504] {
            set.insert(status);
        }
        set
    }
}

impl fmt::Debug for RetryableSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryableSet")
            .field("statuses", &self.statuses().collect::<Vec<_>>())
            .field("connect_errors", &self.connect_errors)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_default_only_429_503_504_and_connect_errors_are_retryable() {
        let set = RetryableSet::default();
        let statuses: Vec<u16> = (0..=999)
            .filter(|&s| set.contains(AttemptOutcome::Status(s)))
            .collect();
        assert_eq!(statuses, [429, 503, 504]);
        assert!(set.contains(AttemptOutcome::ConnectError));
        assert!(!set.contains(AttemptOutcome::OtherError));
    }

    #[test]
    fn other_4xx_and_non_errors_cannot_be_added() {
        for status in [0, 200, 302, 400, 401, 404, 409, 499, 600, u16::MAX] {
            let error = RetryableSet::default().add_status(status).unwrap_err();
            assert_eq!(error.setting(), "retryable");
            assert!(
                error.to_string().contains(&format!("status {status},")),
                "{error}"
            );
        }
    }

    #[test]
    fn statuses_408_429_and_5xx_can_be_added() {
        for status in [408, 429, 500, 502, 599] {
            let set = RetryableSet::empty().add_status(status).unwrap();
            assert!(set.contains(AttemptOutcome::Status(status)), "{status}");
        }
    }

    #[test]
    fn debug_lists_the_statuses() {
        assert_eq!(
            format!("{:?}", RetryableSet::default()),
            "RetryableSet { statuses: [429, 503, 504], connect_errors: true }"
        );
    }
}
