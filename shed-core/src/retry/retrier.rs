//! The retrier: decides, after each failed attempt, whether and when the
//! operation is tried again.
//!
//! ```
//! use std::time::Duration;
//! use shed_core::retry::{AttemptOutcome, Decision, Pushback, Replay, Retrier};
//!
//! let retrier = Retrier::builder().jitter(|| 0.5).build()?;
//! let mut op = retrier.begin(Replay::Safe);
//!
//! // The original got a 503 after 40 ms: retry after half the first window.
//! let decision = retrier.decide(&mut op, AttemptOutcome::Status(503), Pushback::Absent, Duration::from_millis(40));
//! assert_eq!(decision, Decision::Retry { attempt: 2, delay: Duration::from_millis(50) });
//! # Ok::<(), shed_core::ConfigError>(())
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::builder::Settings;
use super::{
    AttemptOutcome, Decision, Jitter, Operation, Pushback, Reason, Replay, RetrierBuilder,
    RetryBudget, RetryStats,
};

/// A client's retry decisions: per-operation limits (attempt cap, deadline,
/// backoff, what is retryable), the budget retries are drawn from, counters
/// and the jitter source. Built with [`Retrier::builder`].
///
/// Cloning is cheap and every clone shares the budget, the counters and the
/// jitter source: build one per client and hand clones around.
///
/// Time is passed in: `now` is the time elapsed since the operation's
/// original was sent, read by the caller from its monotonic clock (or a
/// manual clock in tests). The retrier never reads a clock and never sleeps.
///
/// ```
/// use std::time::Duration;
/// use shed_core::retry::{AttemptOutcome, Decision, Pushback, Reason, Replay, Retrier};
///
/// let retrier = Retrier::builder().build()?;
/// let mut op = retrier.begin(Replay::Unsafe);
/// let decision = retrier.decide(&mut op, AttemptOutcome::Status(503), Pushback::Absent, Duration::ZERO);
/// assert_eq!(decision, Decision::Stop(Reason::UnsafeOperation));
/// # Ok::<(), shed_core::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Retrier {
    /// One reference count to bump: tower clones the retry policy, and with
    /// it the retrier, for every request.
    inner: Arc<Inner>,
}

struct Inner {
    settings: Settings,
    budget: Arc<RetryBudget>,
    stats: RetryStats,
    jitter: Arc<dyn Jitter + Send + Sync>,
}

impl fmt::Debug for Retrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Retrier")
            .field("settings", &self.inner.settings)
            .field("budget", &self.inner.budget)
            .field("stats", &self.inner.stats)
            .finish_non_exhaustive()
    }
}

impl Retrier {
    /// Starts configuring a retrier; see [`RetrierBuilder`] for every
    /// setting.
    pub fn builder() -> RetrierBuilder {
        RetrierBuilder::default()
    }

    pub(super) fn new(
        settings: Settings,
        budget: Arc<RetryBudget>,
        jitter: Arc<dyn Jitter + Send + Sync>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                settings,
                budget,
                stats: RetryStats::default(),
                jitter,
            }),
        }
    }

    /// The budget retries are drawn from.
    #[must_use]
    pub fn budget(&self) -> &Arc<RetryBudget> {
        &self.inner.budget
    }

    /// The counters, shared by every clone of this retrier.
    #[must_use]
    pub fn stats(&self) -> &RetryStats {
        &self.inner.stats
    }

    /// The deadline an original forwards to the server: the operation's
    /// deadline less the response reserve. Retries forward what is left of
    /// it ([`Operation::forwarded_deadline`]).
    #[must_use]
    pub fn forwarded_deadline(&self) -> Duration {
        self.inner.settings.deadline.forwarded(Duration::ZERO)
    }

    /// The deadline an original forwards when its caller allows it only
    /// `caller_deadline` (a deadline the request arrived with, such as one
    /// set with tonic's `Request::set_timeout`): the shorter of that and the
    /// operation's deadline, less the response reserve. A caller's deadline
    /// is never lengthened; begin its operation
    /// [`with_deadline`](Operation::with_deadline) the same shorter one.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::retry::Retrier;
    ///
    /// let retrier = Retrier::builder().build()?; // 1.5 s, a 50 ms reserve
    /// let within = |ms| retrier.forwarded_deadline_within(Duration::from_millis(ms));
    /// assert_eq!(within(300), Duration::from_millis(250));
    /// assert_eq!(within(60_000), retrier.forwarded_deadline());
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    #[must_use]
    pub fn forwarded_deadline_within(&self, caller_deadline: Duration) -> Duration {
        let mut deadline = self.inner.settings.deadline;
        deadline.length = deadline.length.min(caller_deadline);
        deadline.forwarded(Duration::ZERO)
    }

    /// Begins an operation whose original is being sent now: counts the
    /// original and earns its tenth of a retry in the budget.
    ///
    /// Call it only for originals actually sent; work refused before it was
    /// sent must not earn retries.
    ///
    /// ```
    /// use shed_core::retry::{Replay, Retrier};
    ///
    /// let retrier = Retrier::builder().build()?;
    /// let op = retrier.begin(Replay::Safe);
    /// assert_eq!(op.attempt(), 1);
    /// assert_eq!(retrier.stats().originals(), 1);
    /// assert_eq!(retrier.budget().balance_tenths(), 21);
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    #[must_use]
    pub fn begin(&self, replay: Replay) -> Operation {
        self.inner.stats.record_original();
        self.inner.budget.deposit();
        Operation::new(replay, self.inner.settings.deadline)
    }

    /// The latest attempt of `op` was never sent: a client-side throttle
    /// refused it before it left. What that attempt did to the budget is
    /// undone, so attempts that reach no server neither earn nor spend
    /// retries: an original's tenth is taken back (if the balance still
    /// holds it), a granted retry's credit given back (up to the cap). The
    /// counters in [`stats`](Self::stats) keep the original begun and the
    /// retry granted.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::retry::{AttemptOutcome, Decision, Pushback, Replay, Retrier};
    ///
    /// let retrier = Retrier::builder().jitter(|| 0.0).build()?;
    /// let mut op = retrier.begin(Replay::Safe);
    /// assert_eq!(retrier.budget().balance_tenths(), 21);
    /// let decision = retrier.decide(&mut op, AttemptOutcome::ConnectError, Pushback::Absent, Duration::ZERO);
    /// assert!(matches!(decision, Decision::Retry { attempt: 2, .. }));
    /// assert_eq!(retrier.budget().balance_tenths(), 11);
    /// // The retry was refused on its way out: its credit comes back.
    /// retrier.unsent(&op);
    /// assert_eq!(retrier.budget().balance_tenths(), 21);
    ///
    /// // An original refused on its way out earns nothing.
    /// let op = retrier.begin(Replay::Safe);
    /// retrier.unsent(&op);
    /// assert_eq!(retrier.budget().balance_tenths(), 21);
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn unsent(&self, op: &Operation) {
        if op.attempt() <= 1 {
            self.inner.budget.take_back_earning();
        } else {
            self.inner.budget.refund();
        }
    }

    /// Decides what follows the latest attempt of `op`, which ended with
    /// `outcome` and `pushback` at `now` (time since the original was sent).
    ///
    /// In order: a success stops with [`Reason::Succeeded`]; a failure
    /// outside the retryable set stops ([`Reason::TerminalStatus`]), as does
    /// an operation not declared safe (or declared
    /// [`Replay::WhenRefused`] and not refused), a body too large to send
    /// again, a reached attempt cap and a server refusal. The wait is then the longer of the pushback and the jittered
    /// backoff (the pushback is a floor, never shortened); if the retry
    /// would not start at least the minimum attempt window before the
    /// deadline less the response reserve, the operation ends now
    /// ([`Reason::Deadline`]). Only then is the retry's credit taken from
    /// the budget ([`Reason::RetryBudget`] if it is spent).
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::retry::{AttemptOutcome, Decision, Pushback, Reason, Replay, Retrier};
    ///
    /// let retrier = Retrier::builder().build()?;
    /// let mut op = retrier.begin(Replay::Safe);
    /// let two_seconds = Pushback::Wait(Duration::from_secs(2));
    /// let decision = retrier.decide(&mut op, AttemptOutcome::Status(429), two_seconds, Duration::from_millis(10));
    /// assert_eq!(decision, Decision::Stop(Reason::Deadline));
    /// assert_eq!(retrier.budget().balance_tenths(), 21, "no credit taken");
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn decide(
        &self,
        op: &mut Operation,
        outcome: AttemptOutcome,
        pushback: Pushback,
        now: Duration,
    ) -> Decision {
        if outcome.is_success() {
            return Decision::Stop(Reason::Succeeded);
        }
        let decision = self.judge(op, outcome, pushback, now);
        match decision {
            Decision::Retry { .. } => self.inner.stats.record_retry(),
            Decision::Stop(reason) => self.inner.stats.record_denial(reason),
        }
        decision
    }

    fn judge(
        &self,
        op: &mut Operation,
        outcome: AttemptOutcome,
        pushback: Pushback,
        now: Duration,
    ) -> Decision {
        let Inner {
            settings,
            budget,
            jitter,
            ..
        } = &*self.inner;
        if !settings.retryable.contains(outcome) {
            return Decision::Stop(Reason::TerminalStatus);
        }
        if !op.replay().allows(outcome, pushback) {
            return Decision::Stop(Reason::UnsafeOperation);
        }
        if op.is_body_too_large() {
            return Decision::Stop(Reason::BodyTooLarge);
        }
        if op.attempt() >= settings.max_attempts {
            return Decision::Stop(Reason::AttemptCap);
        }
        let Some(floor) = pushback.floor() else {
            return Decision::Stop(Reason::ServerRefused);
        };
        let jittered = settings.backoff.delay(op.attempt() - 1, jitter.as_ref());
        let delay = floor.max(jittered);
        let starts = now.saturating_add(delay);
        let fits = op
            .latest_useful_start(settings.min_attempt_window)
            .is_some_and(|latest| starts <= latest);
        if !fits {
            return Decision::Stop(Reason::Deadline);
        }
        if !budget.try_withdraw() {
            return Decision::Stop(Reason::RetryBudget);
        }
        Decision::Retry {
            attempt: op.advance(),
            delay,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEADLINE_EXCEEDED: AttemptOutcome = AttemptOutcome::GrpcStatus(4);
    const RESOURCE_EXHAUSTED: AttemptOutcome = AttemptOutcome::GrpcStatus(8);
    const UNAVAILABLE: AttemptOutcome = AttemptOutcome::GrpcStatus(14);

    fn retrier() -> Retrier {
        Retrier::builder().jitter(|| 0.5).build().unwrap()
    }

    fn first_decision(replay: Replay, outcome: AttemptOutcome, pushback: Pushback) -> Decision {
        let retrier = retrier();
        let mut op = retrier.begin(replay);
        retrier.decide(&mut op, outcome, pushback, Duration::ZERO)
    }

    #[test]
    fn grpc_ok_is_a_success() {
        let decision = first_decision(
            Replay::Safe,
            AttemptOutcome::GrpcStatus(0),
            Pushback::Absent,
        );
        assert_eq!(decision, Decision::Stop(Reason::Succeeded));
    }

    #[test]
    fn grpc_resource_exhausted_and_unavailable_are_retried() {
        for outcome in [RESOURCE_EXHAUSTED, UNAVAILABLE] {
            let decision = first_decision(Replay::Safe, outcome, Pushback::Absent);
            assert!(decision.is_retry(), "{outcome:?}: {decision:?}");
        }
    }

    #[test]
    fn grpc_deadline_exceeded_is_terminal() {
        let decision = first_decision(Replay::Safe, DEADLINE_EXCEEDED, Pushback::Absent);
        assert_eq!(decision, Decision::Stop(Reason::TerminalStatus));
    }

    #[test]
    fn grpc_pushback_waits_at_least_as_long_as_asked() {
        let pushback = Pushback::Wait(Duration::from_millis(700));
        let decision = first_decision(Replay::Safe, RESOURCE_EXHAUSTED, pushback);
        assert_eq!(
            decision,
            Decision::Retry {
                attempt: 2,
                delay: Duration::from_millis(700)
            }
        );
    }

    #[test]
    fn a_refusing_pushback_stops_the_operation() {
        let decision = first_decision(Replay::Safe, RESOURCE_EXHAUSTED, Pushback::Refuse);
        assert_eq!(decision, Decision::Stop(Reason::ServerRefused));
    }

    #[test]
    fn when_refused_without_pushback_is_not_retried() {
        let decision = first_decision(Replay::WhenRefused, UNAVAILABLE, Pushback::Absent);
        assert_eq!(decision, Decision::Stop(Reason::UnsafeOperation));
    }

    #[test]
    fn when_refused_with_pushback_is_retried_after_it() {
        let pushback = Pushback::Wait(Duration::from_millis(300));
        let decision = first_decision(Replay::WhenRefused, RESOURCE_EXHAUSTED, pushback);
        assert_eq!(
            decision,
            Decision::Retry {
                attempt: 2,
                delay: Duration::from_millis(300)
            }
        );
    }

    #[test]
    fn when_refused_with_a_refusing_pushback_is_a_server_refusal() {
        let decision = first_decision(Replay::WhenRefused, RESOURCE_EXHAUSTED, Pushback::Refuse);
        assert_eq!(decision, Decision::Stop(Reason::ServerRefused));
    }

    #[test]
    fn when_refused_retries_connect_errors() {
        let retrier = Retrier::builder().build().unwrap();
        let mut op = retrier.begin(Replay::WhenRefused);
        let decision = retrier.decide(
            &mut op,
            AttemptOutcome::ConnectError,
            Pushback::Absent,
            Duration::ZERO,
        );
        assert!(decision.is_retry(), "{decision:?}");
    }

    #[test]
    fn a_body_too_large_stops_a_retryable_failure_and_is_counted() {
        let retrier = retrier();
        let mut op = retrier.begin(Replay::Safe);
        op.mark_body_too_large();
        let decision = retrier.decide(&mut op, UNAVAILABLE, Pushback::Absent, Duration::ZERO);
        assert_eq!(decision, Decision::Stop(Reason::BodyTooLarge));
        assert_eq!(retrier.stats().denials(Reason::BodyTooLarge), 1);
        assert_eq!(retrier.budget().balance_tenths(), 21, "no credit taken");
    }

    #[test]
    fn a_body_too_large_leaves_other_reasons_their_own() {
        let retrier = retrier();
        let mut op = retrier.begin(Replay::Safe);
        op.mark_body_too_large();
        let terminal = retrier.decide(&mut op, DEADLINE_EXCEEDED, Pushback::Absent, Duration::ZERO);
        assert_eq!(terminal, Decision::Stop(Reason::TerminalStatus));
        let mut op = retrier.begin(Replay::Unsafe);
        op.mark_body_too_large();
        let unsafe_op = retrier.decide(&mut op, UNAVAILABLE, Pushback::Absent, Duration::ZERO);
        assert_eq!(unsafe_op, Decision::Stop(Reason::UnsafeOperation));
    }
}
