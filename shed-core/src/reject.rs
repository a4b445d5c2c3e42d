//! Why a request was turned away, and when it may come back.
//!
//! ```
//! use shed_core::{Arrival, Class, Admission, RejectReason, Shedder};
//!
//! let shedder = Shedder::builder().limit(1).queue_capacity(0).build()?;
//! let _busy = shedder.try_admit(&Arrival::new(Class::Interactive)).unwrap();
//! let rejection = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap_err();
//! assert_eq!(rejection.reason(), RejectReason::QueueFull);
//! assert!(rejection.retry_after().unwrap().as_secs() >= 1);
//! # Ok::<(), shed_core::ConfigError>(())
//! ```

use std::fmt;
use std::time::Duration;

use crate::{Class, Rank};

/// Why the engine refused a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// The request's rank and cohort lie below the admission level.
    Shed,
    /// No slot was free and the rank's wait queue was full.
    QueueFull,
    /// The request waited its class's maximum wait without getting a slot.
    QueueTimeout,
    /// The controller shed the request's rank while it waited.
    ShedWhileQueued,
    /// The deadline had passed when the request arrived.
    DeadlinePassed,
    /// The deadline would pass before the request could usefully be served.
    DeadlineUnmeetable,
    /// The deadline passed, or came too close, while the request waited.
    DeadlineExpiredInQueue,
    /// The deadline passed while the request was being served (reported by
    /// hosts that enforce deadlines, such as shed-axum; the engine's counters
    /// do not include it).
    DeadlineExceeded,
}

impl RejectReason {
    /// Every reason.
    pub const ALL: [RejectReason; 8] = [
        RejectReason::Shed,
        RejectReason::QueueFull,
        RejectReason::QueueTimeout,
        RejectReason::ShedWhileQueued,
        RejectReason::DeadlinePassed,
        RejectReason::DeadlineUnmeetable,
        RejectReason::DeadlineExpiredInQueue,
        RejectReason::DeadlineExceeded,
    ];

    /// Whether the reason is overload (answered with Retry-After), rather than
    /// the caller's deadline (answered without: the caller's time is gone).
    pub const fn is_overload(self) -> bool {
        !self.is_deadline()
    }

    /// Whether the reason is the caller's deadline.
    pub const fn is_deadline(self) -> bool {
        matches!(
            self,
            RejectReason::DeadlinePassed
                | RejectReason::DeadlineUnmeetable
                | RejectReason::DeadlineExpiredInQueue
                | RejectReason::DeadlineExceeded
        )
    }

    /// A stable snake_case name for logs, metrics and problem bodies.
    pub const fn as_str(self) -> &'static str {
        match self {
            RejectReason::Shed => "shed",
            RejectReason::QueueFull => "queue_full",
            RejectReason::QueueTimeout => "queue_timeout",
            RejectReason::ShedWhileQueued => "shed_while_queued",
            RejectReason::DeadlinePassed => "deadline_passed",
            RejectReason::DeadlineUnmeetable => "deadline_unmeetable",
            RejectReason::DeadlineExpiredInQueue => "deadline_expired_in_queue",
            RejectReason::DeadlineExceeded => "deadline_exceeded",
        }
    }

    /// A one-line human explanation.
    pub const fn description(self) -> &'static str {
        match self {
            RejectReason::Shed => "the service is overloaded and is shedding this kind of request",
            RejectReason::QueueFull => "the service is at capacity and its wait queue is full",
            RejectReason::QueueTimeout => "the request waited too long for capacity",
            RejectReason::ShedWhileQueued => {
                "the service began shedding this kind of request while it waited"
            }
            RejectReason::DeadlinePassed => "the request's deadline had already passed",
            RejectReason::DeadlineUnmeetable => "the request's deadline is too close to be met",
            RejectReason::DeadlineExpiredInQueue => "the request's deadline passed while it waited",
            RejectReason::DeadlineExceeded => "the request's deadline passed while it was served",
        }
    }
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refusal: the reason, who was refused, and for overload, when to return.
///
/// Plain data (`Copy`): building one allocates nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rejection {
    reason: RejectReason,
    rank: Rank,
    retry_after: Option<RetryAfter>,
}

impl Rejection {
    pub(crate) const fn new(
        reason: RejectReason,
        rank: Rank,
        retry_after: Option<RetryAfter>,
    ) -> Self {
        Rejection {
            reason,
            rank,
            retry_after,
        }
    }

    /// The answer for a request whose deadline passed while it was served:
    /// for hosts that enforce deadlines on running work.
    ///
    /// ```
    /// use shed_core::{Class, Rank, RejectReason, Rejection};
    /// let late = Rejection::deadline_exceeded(Rank::original(Class::Interactive));
    /// assert_eq!(late.reason(), RejectReason::DeadlineExceeded);
    /// assert!(late.retry_after().is_none());
    /// ```
    pub const fn deadline_exceeded(rank: Rank) -> Rejection {
        Rejection::new(RejectReason::DeadlineExceeded, rank, None)
    }

    /// Why the request was refused.
    pub const fn reason(&self) -> RejectReason {
        self.reason
    }

    /// The refused request's rank.
    pub const fn rank(&self) -> Rank {
        self.rank
    }

    /// The refused request's class.
    pub const fn class(&self) -> Class {
        self.rank.class()
    }

    /// When the caller may come back: present for overload, absent for deadlines.
    pub const fn retry_after(&self) -> Option<RetryAfter> {
        self.retry_after
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} refused: {}", self.rank, self.reason.description())?;
        if let Some(after) = self.retry_after {
            write!(f, "; retry after {} s", after.as_secs())?;
        }
        Ok(())
    }
}

/// A computed delay before the caller should try again.
///
/// [`as_secs`](RetryAfter::as_secs) is the whole-second value for the
/// `Retry-After` header (at least 1); [`exact`](RetryAfter::exact) keeps the
/// precise, jittered delay for millisecond hints such as `grpc-retry-pushback-ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RetryAfter {
    exact: Duration,
}

impl RetryAfter {
    /// A delay; zero is raised to one millisecond.
    pub(crate) const fn new(exact: Duration) -> RetryAfter {
        let floor = Duration::from_millis(1);
        RetryAfter {
            exact: if exact.as_nanos() < floor.as_nanos() {
                floor
            } else {
                exact
            },
        }
    }

    /// The precise delay.
    pub const fn exact(&self) -> Duration {
        self.exact
    }

    /// Whole seconds, rounded up, at least 1: the `Retry-After` header value.
    /// Saturates at `u64::MAX` (the engine itself never computes more than
    /// its cap, at most a day).
    pub const fn as_secs(&self) -> u64 {
        let secs = self
            .exact
            .as_secs()
            .saturating_add((self.exact.subsec_nanos() > 0) as u64);
        if secs == 0 {
            1
        } else {
            secs
        }
    }

    /// Whole milliseconds, rounded up: for `grpc-retry-pushback-ms` and `retry-after-ms`.
    pub const fn as_millis(&self) -> u64 {
        let nanos = self.exact.as_nanos();
        let millis = nanos.div_ceil(1_000_000);
        if millis > u64::MAX as u128 {
            u64::MAX
        } else {
            millis as u64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_rounds_up_to_whole_seconds_and_milliseconds() {
        let after = RetryAfter::new(Duration::from_micros(1_200_001));
        assert_eq!(after.as_secs(), 2);
        assert_eq!(after.as_millis(), 1_201);
    }

    #[test]
    fn retry_after_in_whole_seconds_saturates_instead_of_wrapping_to_one() {
        assert_eq!(RetryAfter::new(Duration::MAX).as_secs(), u64::MAX);
        assert_eq!(RetryAfter::new(Duration::MAX).as_millis(), u64::MAX);
        let just_below = Duration::new(u64::MAX - 1, 1);
        assert_eq!(RetryAfter::new(just_below).as_secs(), u64::MAX);
    }

    #[test]
    fn a_zero_retry_after_still_asks_for_a_second() {
        let after = RetryAfter::new(Duration::ZERO);
        assert_eq!(after.exact(), Duration::from_millis(1));
        assert_eq!(after.as_secs(), 1);
    }
}
