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
/// [`RetrierBuilder::retryable`](super::RetrierBuilder::retryable), which
/// checks it.
///
/// Among 4xx statuses only 408 and 429 can be retried: any other 4xx says
/// the request itself is wrong, and sending it again cannot help.
///
/// ```
/// use shed_core::retry::{AttemptOutcome, Retrier, RetryableSet};
///
/// let retryable = RetryableSet::default().add_status(502).remove_status(504);
/// assert!(retryable.contains(AttemptOutcome::Status(502)));
/// assert!(!retryable.contains(AttemptOutcome::Status(504)));
///
/// let error = Retrier::builder()
///     .retryable(RetryableSet::empty().add_status(404))
///     .build()
///     .unwrap_err();
/// assert_eq!(error.setting(), "retryable");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct RetryableSet {
    /// Bit `code - 400` is set for each retryable status in 400..=599.
    statuses: [u64; 4],
    connect_errors: bool,
    /// The first status added that can never be retried, for the builder
    /// to refuse.
    refused: Option<u16>,
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
            refused: None,
        }
    }

    /// Adds a status: 408, 429 or 5xx. Any other status is never retried,
    /// and makes [`RetrierBuilder::build`](super::RetrierBuilder::build)
    /// fail, naming it.
    ///
    /// ```
    /// use shed_core::retry::{AttemptOutcome, RetryableSet};
    ///
    /// let retryable = RetryableSet::default().add_status(502);
    /// assert!(retryable.contains(AttemptOutcome::Status(502)));
    /// ```
    #[must_use]
    pub fn add_status(mut self, status: u16) -> Self {
        if matches!(status, 408 | 429 | 500..=599) {
            self.insert(status);
        } else {
            self.refused = self.refused.or(Some(status));
        }
        self
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

    /// Refuses a set to which a status that is never retried was added.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        match self.refused {
            Some(status) => Err(ConfigError::new(
                "retryable",
                format!(
                    "adds status {status}, which is never retried; add only 408, 429 or 5xx \
                     (any other 4xx says the request itself is wrong)"
                ),
            )),
            None => Ok(()),
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
        Self::empty()
            .connect_errors(true)
            .add_status(429)
            .add_status(503)
            .add_status(504)
    }
}

impl fmt::Debug for RetryableSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("RetryableSet");
        debug
            .field("statuses", &self.statuses().collect::<Vec<_>>())
            .field("connect_errors", &self.connect_errors);
        if let Some(status) = self.refused {
            debug.field("refused", &status);
        }
        debug.finish()
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
            let set = RetryableSet::default().add_status(status);
            assert!(!set.contains(AttemptOutcome::Status(status)), "{status}");
            let error = set.validate().unwrap_err();
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
            let set = RetryableSet::empty().add_status(status);
            assert!(set.contains(AttemptOutcome::Status(status)), "{status}");
            assert_eq!(set.validate(), Ok(()));
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
