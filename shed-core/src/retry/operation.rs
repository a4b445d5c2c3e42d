//! One operation: its original and any retries, with the deadline they share.

use std::time::Duration;

use super::deadline::OperationDeadline;
use super::Replay;

/// One operation: its original and any retries, with the deadline they
/// share. Created by [`Retrier::begin`](super::Retrier::begin), advanced by
/// [`Retrier::decide`](super::Retrier::decide).
///
/// ```
/// use std::time::Duration;
/// use shed_core::retry::{Replay, Retrier};
///
/// let retrier = Retrier::builder().build()?;
/// let op = retrier.begin(Replay::Safe);
/// // Time left to give the server, kept back the response reserve:
/// assert_eq!(op.forwarded_deadline(Duration::ZERO), Duration::from_millis(1_450));
/// # Ok::<(), shed_core::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    replay: Replay,
    deadline: OperationDeadline,
    attempts: u32,
    body_too_large: bool,
}

impl Operation {
    pub(super) fn new(replay: Replay, deadline: OperationDeadline) -> Self {
        Self {
            replay,
            deadline,
            attempts: 1,
            body_too_large: false,
        }
    }

    /// Replaces the deadline (measured from the original), e.g. with one the
    /// caller was itself given.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::retry::{Replay, Retrier};
    ///
    /// let retrier = Retrier::builder().build()?;
    /// let op = retrier.begin(Replay::Safe).with_deadline(Duration::from_secs(1));
    /// assert_eq!(op.forwarded_deadline(Duration::ZERO), Duration::from_millis(950));
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    #[must_use]
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline.length = deadline;
        self
    }

    /// The number of the latest attempt sent: 1 for the original.
    #[must_use]
    pub fn attempt(&self) -> u32 {
        self.attempts
    }

    /// The deadline, measured from the original.
    #[must_use]
    pub fn deadline(&self) -> Duration {
        self.deadline.length
    }

    /// Whether the operation was declared safe to replay.
    #[must_use]
    pub fn replay(&self) -> Replay {
        self.replay
    }

    /// Records that the request body outgrew what the client keeps to send
    /// it again: no further attempt can be sent, and the next failure stops
    /// with [`Reason::BodyTooLarge`](super::Reason::BodyTooLarge) (a failure
    /// that would not have been retried anyway keeps its own reason).
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::retry::{AttemptOutcome, Decision, Pushback, Reason, Replay, Retrier};
    ///
    /// let retrier = Retrier::builder().build()?;
    /// let mut op = retrier.begin(Replay::Safe);
    /// op.mark_body_too_large();
    /// let decision = retrier.decide(&mut op, AttemptOutcome::Status(503), Pushback::Absent, Duration::ZERO);
    /// assert_eq!(decision, Decision::Stop(Reason::BodyTooLarge));
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn mark_body_too_large(&mut self) {
        self.body_too_large = true;
    }

    /// Whether [`mark_body_too_large`](Self::mark_body_too_large) was
    /// called.
    #[must_use]
    pub fn is_body_too_large(&self) -> bool {
        self.body_too_large
    }

    /// The deadline to forward to the server with an attempt sent at
    /// `sent_at` (time since the original): what is left of the operation's
    /// deadline, less the response reserve; zero if nothing is.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::retry::{Replay, Retrier};
    ///
    /// let retrier = Retrier::builder().build()?;
    /// let op = retrier.begin(Replay::Safe);
    /// assert_eq!(op.forwarded_deadline(Duration::from_millis(90)), Duration::from_millis(1_360));
    /// assert_eq!(op.forwarded_deadline(Duration::from_secs(9)), Duration::ZERO);
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    #[must_use]
    pub fn forwarded_deadline(&self, sent_at: Duration) -> Duration {
        self.deadline.forwarded(sent_at)
    }

    /// Counts a granted retry; returns its attempt number.
    pub(super) fn advance(&mut self) -> u32 {
        self.attempts += 1;
        self.attempts
    }

    /// The latest time a retry may start and still have `window` before the
    /// deadline less the response reserve.
    pub(super) fn latest_useful_start(&self, window: Duration) -> Option<Duration> {
        self.deadline.latest_useful_start(window)
    }
}
