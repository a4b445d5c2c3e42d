//! Which failures may be retried at all: the operation must be declared safe
//! to replay, and the failure must be in a narrow transient set.
//!
//! ```
//! use shed_core::retry::{AttemptOutcome, RetryableSet};
//!
//! // 429, 503, 504, connect errors; gRPC RESOURCE_EXHAUSTED and UNAVAILABLE.
//! let retryable = RetryableSet::default();
//! assert!(retryable.contains(AttemptOutcome::Status(503)));
//! assert!(retryable.contains(AttemptOutcome::ConnectError));
//! assert!(retryable.contains(AttemptOutcome::GrpcStatus(14)));
//! assert!(!retryable.contains(AttemptOutcome::Status(400)));
//! assert!(!retryable.contains(AttemptOutcome::Status(500)));
//! assert!(!retryable.contains(AttemptOutcome::GrpcStatus(4))); // DEADLINE_EXCEEDED
//! ```

use std::fmt;

use super::{AttemptOutcome, Pushback};
use crate::ConfigError;

/// gRPC's status codes run from 0 (`OK`) to 16 (`UNAUTHENTICATED`).
const GRPC_CODES: u32 = 17;

/// The gRPC codes that say the call itself is wrong, as a 4xx other than
/// 408 and 429 does: `INVALID_ARGUMENT`, `NOT_FOUND`, `ALREADY_EXISTS`,
/// `PERMISSION_DENIED`, `FAILED_PRECONDITION`, `OUT_OF_RANGE`,
/// `UNIMPLEMENTED`, `UNAUTHENTICATED`.
const GRPC_CALL_IS_WRONG: [u32; 8] = [3, 5, 6, 7, 9, 11, 12, 16];

/// Whether the caller declared an operation safe to send more than once.
///
/// Nothing is retried unless declared [`Replay::Safe`], or
/// [`Replay::WhenRefused`] and refused: only the caller knows whether doing
/// the operation twice is harmless.
///
/// ```
/// use std::time::Duration;
/// use shed_core::retry::{AttemptOutcome, Decision, Pushback, Reason, Replay, Retrier};
///
/// assert_eq!(Replay::default(), Replay::Unsafe);
///
/// // A call that may be resent only if the server did not run it:
/// let retrier = Retrier::builder().build()?;
/// let exhausted = AttemptOutcome::GrpcStatus(8);
/// let mut op = retrier.begin(Replay::WhenRefused);
/// let no_hint = retrier.decide(&mut op, exhausted, Pushback::Absent, Duration::ZERO);
/// assert_eq!(no_hint, Decision::Stop(Reason::UnsafeOperation));
/// let mut op = retrier.begin(Replay::WhenRefused);
/// let pushback = Pushback::Wait(Duration::from_millis(200));
/// let refused = retrier.decide(&mut op, exhausted, pushback, Duration::ZERO);
/// assert!(refused.is_retry());
/// # Ok::<(), shed_core::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Replay {
    /// Sending the operation again is harmless (idempotent or read-only).
    Safe,
    /// Sending it again could do the work twice: never retried.
    #[default]
    Unsafe,
    /// Sending it again is harmless only if the server did not act on it:
    /// retried after a connect error (it never reached the server), or
    /// after a failure whose answer carried a pushback hint (the server
    /// turned it away and said when to come back, as a shed server's door
    /// does); never after any other failure, which may have done the work.
    WhenRefused,
}

impl Replay {
    /// Whether an attempt that ended with `outcome` and `pushback` may be
    /// sent again, as far as the operation's own safety goes.
    pub(super) fn allows(self, outcome: AttemptOutcome, pushback: Pushback) -> bool {
        match self {
            Self::Safe => true,
            Self::Unsafe => false,
            Self::WhenRefused => {
                outcome == AttemptOutcome::ConnectError || pushback != Pushback::Absent
            }
        }
    }
}

/// The failures that may be retried: a set of 4xx/5xx statuses, a set of
/// gRPC status codes, plus connect errors. By default 429, 503, 504,
/// connect errors, and gRPC `RESOURCE_EXHAUSTED` (8) and `UNAVAILABLE`
/// (14), the codes a gRPC retry policy (gRFC A6 `retryableStatusCodes`)
/// usually names. gRPC `DEADLINE_EXCEEDED` (4) is not retried by default:
/// the deadline it reports is spent. Given to
/// [`RetrierBuilder::retryable`](super::RetrierBuilder::retryable).
///
/// Among 4xx statuses only 408 and 429 can be retried: any other 4xx says
/// the request itself is wrong, and sending it again cannot help.
/// [`add_status`](Self::add_status) refuses them, and
/// [`add_grpc_status`](Self::add_grpc_status) refuses the gRPC codes that
/// say the same.
///
/// ```
/// use shed_core::retry::{AttemptOutcome, RetryableSet};
///
/// let retryable = RetryableSet::default().add_status(502)?.remove_status(504);
/// assert!(retryable.contains(AttemptOutcome::Status(502)));
/// assert!(!retryable.contains(AttemptOutcome::Status(504)));
///
/// let aborted = 10;
/// let retryable = RetryableSet::default().add_grpc_status(aborted)?;
/// assert!(retryable.contains(AttemptOutcome::GrpcStatus(aborted)));
/// # Ok::<(), shed_core::ConfigError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct RetryableSet {
    /// Bit `code - 400` is set for each retryable status in 400..=599.
    statuses: [u64; 4],
    /// Bit `code` is set for each retryable gRPC status code in 0..=16.
    grpc_statuses: u32,
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
            grpc_statuses: 0,
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

    /// Adds a gRPC status code: one of `CANCELLED` (1), `UNKNOWN` (2),
    /// `DEADLINE_EXCEEDED` (4), `RESOURCE_EXHAUSTED` (8), `ABORTED` (10),
    /// `INTERNAL` (13), `UNAVAILABLE` (14) or `DATA_LOSS` (15).
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] (setting `retryable`) naming any other code: `OK`
    /// (0) is not a failure, codes above 16 do not exist, and the rest say
    /// the call itself is wrong (`INVALID_ARGUMENT`, `NOT_FOUND`...), so
    /// sending it again cannot help.
    ///
    /// ```
    /// use shed_core::retry::{AttemptOutcome, RetryableSet};
    ///
    /// let deadline_exceeded = 4;
    /// let retryable = RetryableSet::default().add_grpc_status(deadline_exceeded)?;
    /// assert!(retryable.contains(AttemptOutcome::GrpcStatus(deadline_exceeded)));
    ///
    /// let error = RetryableSet::default().add_grpc_status(5).unwrap_err();
    /// assert_eq!(
    ///     error.to_string(),
    ///     "invalid retryable: adds gRPC status 5, which is never retried; add only 1, 2, 4, 8, \
    ///      10, 13, 14 or 15 (0 is OK, and the other codes say the call itself is wrong)"
    /// );
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn add_grpc_status(mut self, code: u32) -> Result<Self, ConfigError> {
        if code == 0 || code >= GRPC_CODES || GRPC_CALL_IS_WRONG.contains(&code) {
            return Err(ConfigError::new(
                "retryable",
                format!(
                    "adds gRPC status {code}, which is never retried; add only 1, 2, 4, 8, \
                     10, 13, 14 or 15 (0 is OK, and the other codes say the call itself is wrong)"
                ),
            ));
        }
        self.grpc_statuses |= 1 << code;
        Ok(self)
    }

    /// Removes a gRPC status code (a no-op if absent).
    ///
    /// ```
    /// use shed_core::retry::{AttemptOutcome, RetryableSet};
    ///
    /// let unavailable = 14;
    /// let retryable = RetryableSet::default().remove_grpc_status(unavailable);
    /// assert!(!retryable.contains(AttemptOutcome::GrpcStatus(unavailable)));
    /// ```
    #[must_use]
    pub fn remove_grpc_status(mut self, code: u32) -> Self {
        if code < GRPC_CODES {
            self.grpc_statuses &= !(1 << code);
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
            AttemptOutcome::GrpcStatus(code) => {
                code < GRPC_CODES && self.grpc_statuses & (1 << code) != 0
            }
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

    fn grpc_statuses(&self) -> impl Iterator<Item = u32> + '_ {
        (0..GRPC_CODES).filter(|&code| self.contains(AttemptOutcome::GrpcStatus(code)))
    }
}

impl Default for RetryableSet {
    /// 429, 503, 504, connect errors, and gRPC `RESOURCE_EXHAUSTED` (8)
    /// and `UNAVAILABLE` (14).
    fn default() -> Self {
        let mut set = Self::empty().connect_errors(true);
        for status in [429, 503, 504] {
            set.insert(status);
        }
        set.grpc_statuses = 1 << 8 | 1 << 14;
        set
    }
}

impl fmt::Debug for RetryableSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryableSet")
            .field("statuses", &self.statuses().collect::<Vec<_>>())
            .field("grpc_statuses", &self.grpc_statuses().collect::<Vec<_>>())
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
            "RetryableSet { statuses: [429, 503, 504], grpc_statuses: [8, 14], connect_errors: true }"
        );
    }

    #[test]
    fn by_default_only_grpc_resource_exhausted_and_unavailable_are_retryable() {
        let set = RetryableSet::default();
        let codes: Vec<u32> = (0..=99)
            .filter(|&code| set.contains(AttemptOutcome::GrpcStatus(code)))
            .collect();
        assert_eq!(codes, [8, 14]);
    }

    #[test]
    fn grpc_ok_unknown_codes_and_codes_that_blame_the_call_cannot_be_added() {
        for code in [0, 3, 5, 6, 7, 9, 11, 12, 16, 17, u32::MAX] {
            let error = RetryableSet::default().add_grpc_status(code).unwrap_err();
            assert_eq!(error.setting(), "retryable");
            assert!(
                error.to_string().contains(&format!("gRPC status {code},")),
                "{error}"
            );
        }
    }

    #[test]
    fn transient_grpc_codes_can_be_added_and_removed() {
        for code in [1, 2, 4, 8, 10, 13, 14, 15] {
            let set = RetryableSet::empty().add_grpc_status(code).unwrap();
            assert!(set.contains(AttemptOutcome::GrpcStatus(code)), "{code}");
            let set = set.remove_grpc_status(code);
            assert!(!set.contains(AttemptOutcome::GrpcStatus(code)), "{code}");
        }
    }

    #[test]
    fn grpc_codes_and_http_statuses_are_apart() {
        let set = RetryableSet::empty().add_grpc_status(14).unwrap();
        assert!(!set.contains(AttemptOutcome::Status(14)));
        let set = RetryableSet::empty().add_status(503).unwrap();
        assert!(!set.contains(AttemptOutcome::GrpcStatus(503)));
    }

    #[test]
    fn when_refused_allows_connect_errors_and_answers_with_pushback_only() {
        let refused = Replay::WhenRefused;
        let exhausted = AttemptOutcome::GrpcStatus(8);
        assert!(refused.allows(AttemptOutcome::ConnectError, Pushback::Absent));
        assert!(refused.allows(exhausted, Pushback::Wait(std::time::Duration::ZERO)));
        assert!(refused.allows(exhausted, Pushback::Refuse));
        assert!(!refused.allows(exhausted, Pushback::Absent));
        assert!(!refused.allows(AttemptOutcome::OtherError, Pushback::Absent));
    }
}
