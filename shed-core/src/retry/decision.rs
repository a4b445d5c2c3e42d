//! What the retrier decided after an attempt, and why it stopped.
//!
//! ```
//! use std::time::Duration;
//! use shed_core::retry::{Decision, Reason};
//!
//! // A granted retry says when; only a stop has a reason.
//! fn describe(decision: Decision) -> String {
//!     match decision {
//!         Decision::Retry { attempt, delay } => format!("attempt {attempt} in {delay:?}"),
//!         Decision::Stop(reason) => format!("stopped: {reason}"),
//!     }
//! }
//! let retry = Decision::Retry { attempt: 2, delay: Duration::from_millis(50) };
//! assert_eq!(describe(retry), "attempt 2 in 50ms");
//! assert_eq!(describe(Decision::Stop(Reason::Deadline)), "stopped: deadline");
//! ```

use std::fmt;
use std::time::Duration;

/// The verdict on one attempt's outcome: another attempt, or the end of the
/// operation and why.
///
/// ```
/// use std::time::Duration;
/// use shed_core::retry::{AttemptOutcome, Decision, Pushback, Replay, Retrier};
///
/// let retrier = Retrier::builder().build()?;
/// let mut op = retrier.begin(Replay::Safe);
/// match retrier.decide(&mut op, AttemptOutcome::Status(503), Pushback::Absent, Duration::ZERO) {
///     Decision::Retry { attempt, delay } => {
///         assert_eq!(attempt, 2);
///         assert!(delay < Duration::from_millis(100), "within the first window");
///     }
///     Decision::Stop(reason) => panic!("a first 503 is retried, yet: {reason}"),
/// }
/// # Ok::<(), shed_core::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Decision {
    /// Retry granted: send attempt number `attempt` after waiting `delay`.
    /// The retry's credit has already been taken from the budget.
    Retry {
        /// The number of the attempt to send: 2 for the first retry.
        attempt: u32,
        /// How long to wait before sending it.
        delay: Duration,
    },
    /// Return the last outcome to the caller: [`Reason::Succeeded`] when
    /// the attempt succeeded, otherwise why no retry follows.
    Stop(Reason),
}

impl Decision {
    /// Whether another attempt follows.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::retry::Decision;
    ///
    /// assert!(Decision::Retry { attempt: 2, delay: Duration::ZERO }.is_retry());
    /// ```
    #[must_use]
    pub fn is_retry(&self) -> bool {
        matches!(self, Self::Retry { .. })
    }
}

/// Why an operation stopped: it succeeded, or a retry was denied.
///
/// New reasons may be added, so matches need a wildcard arm;
/// [`Reason::ALL`] lists them (for metrics, with
/// [`RetryStats::denials`](super::RetryStats::denials)).
///
/// ```
/// use shed_core::retry::Reason;
///
/// assert_eq!(Reason::RetryBudget.as_str(), "retry_budget");
/// assert_eq!(Reason::ALL.len(), 8);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Reason {
    /// The attempt succeeded: nothing to retry. Not a denial.
    Succeeded,
    /// The failure is not in the retryable set (a 4xx, a 500, an error after
    /// the request was sent).
    TerminalStatus,
    /// The operation was not declared safe to replay (or was declared
    /// [`Replay::WhenRefused`](super::Replay::WhenRefused) and the server
    /// did not refuse it).
    UnsafeOperation,
    /// The attempt cap is reached.
    AttemptCap,
    /// The next attempt would not start in time to be useful before the
    /// deadline (counting the server's pushback, which is never shortened).
    Deadline,
    /// The shared retry budget is spent.
    RetryBudget,
    /// The server asked not to retry, or for a wait too long to honour.
    ServerRefused,
    /// The request body outgrew what the client keeps to send it again
    /// ([`Operation::mark_body_too_large`](super::Operation::mark_body_too_large)).
    BodyTooLarge,
}

impl Reason {
    /// Every reason, in declaration order.
    pub const ALL: [Self; 8] = [
        Self::Succeeded,
        Self::TerminalStatus,
        Self::UnsafeOperation,
        Self::AttemptCap,
        Self::Deadline,
        Self::RetryBudget,
        Self::ServerRefused,
        Self::BodyTooLarge,
    ];

    /// A stable `snake_case` label, for metrics.
    ///
    /// ```
    /// use shed_core::retry::Reason;
    ///
    /// assert_eq!(Reason::ServerRefused.as_str(), "server_refused");
    /// ```
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "succeeded",
            Self::TerminalStatus => "terminal_status",
            Self::UnsafeOperation => "unsafe_operation",
            Self::AttemptCap => "attempt_cap",
            Self::Deadline => "deadline",
            Self::RetryBudget => "retry_budget",
            Self::ServerRefused => "server_refused",
            Self::BodyTooLarge => "body_too_large",
        }
    }

    pub(crate) const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
