//! The per-operation retry state machine and the configuration it follows.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use shed_core::retry::{Decision, AttemptOutcome, Pushback, Replay, RetryBudget, RetryPolicy};
//!
//! let policy = RetryPolicy::new(Arc::new(RetryBudget::default())).with_jitter(|| 0.5);
//! let mut op = policy.begin(Replay::Safe);
//!
//! // The original got a 503 after 40 ms: retry after half the first window.
//! let decision = policy.decide(&mut op, AttemptOutcome::Status(503), Pushback::Absent, Duration::from_millis(40));
//! assert_eq!(decision, Decision::Retry { attempt: 2, delay: Duration::from_millis(50) });
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::ConfigError;

use super::{
    AttemptOutcome, Backoff, Decision, Jitter, Pushback, Reason, Replay, RetryBudget, RetryStats,
    RetryableSet, SplitMix64,
};

/// Per-operation limits: attempt cap, deadline, response reserve, minimum
/// useful attempt window, retryable set and backoff.
///
/// ```
/// use std::time::Duration;
/// use shed_core::retry::RetryConfig;
///
/// let config = RetryConfig::default().with_deadline(Duration::from_secs(1));
/// assert_eq!(config.max_attempts(), 3);
/// assert_eq!(config.deadline(), Duration::from_secs(1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryConfig {
    max_attempts: u32,
    deadline: Duration,
    response_reserve: Duration,
    min_attempt_window: Duration,
    retryable: RetryableSet,
    backoff: Backoff,
}

impl Default for RetryConfig {
    /// 3 attempts, a 1,500 ms deadline, a 50 ms response reserve, a 20 ms
    /// minimum attempt window, [`RetryableSet::default`] and
    /// [`Backoff::default`].
    fn default() -> Self {
        Self {
            max_attempts: 3,
            deadline: Duration::from_millis(1_500),
            response_reserve: Duration::from_millis(50),
            min_attempt_window: Duration::from_millis(20),
            retryable: RetryableSet::default(),
            backoff: Backoff::default(),
        }
    }
}

impl RetryConfig {
    /// Sets the attempt cap, the original included; at least 1 (checked by
    /// [`validate`](RetryConfig::validate)).
    ///
    /// ```
    /// use shed_core::retry::RetryConfig;
    ///
    /// assert_eq!(RetryConfig::default().with_max_attempts(5).max_attempts(), 5);
    /// assert!(RetryConfig::default().with_max_attempts(0).validate().is_err());
    /// ```
    #[must_use]
    pub const fn with_max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = max_attempts;
        self
    }

    /// Checks that the settings make sense together: at least one attempt,
    /// and a deadline longer than the response reserve plus the minimum
    /// attempt window (or no attempt would ever fit).
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the setting and what to set it to.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::retry::RetryConfig;
    ///
    /// assert!(RetryConfig::default().validate().is_ok());
    /// let error = RetryConfig::default()
    ///     .with_deadline(Duration::from_millis(60))
    ///     .validate()
    ///     .unwrap_err();
    /// assert_eq!(error.setting(), "deadline");
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_attempts == 0 {
            return Err(ConfigError::new(
                "max_attempts",
                "is 0; set it to at least 1 (the original counts as an attempt)".to_string(),
            ));
        }
        let needed = self
            .response_reserve
            .saturating_add(self.min_attempt_window);
        if self.deadline <= needed {
            return Err(ConfigError::new(
                "deadline",
                format!(
                    "is {:?}; make it longer than response_reserve + min_attempt_window ({needed:?}), or no attempt fits",
                    self.deadline
                ),
            ));
        }
        Ok(())
    }

    /// Sets the default deadline of an operation, measured from its original.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::retry::RetryConfig;
    ///
    /// let config = RetryConfig::default().with_deadline(Duration::from_secs(3));
    /// assert_eq!(config.deadline(), Duration::from_secs(3));
    /// ```
    #[must_use]
    pub const fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// Sets the time kept back at the end of the deadline for the last
    /// response to reach the caller.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::retry::RetryConfig;
    ///
    /// let config = RetryConfig::default().with_response_reserve(Duration::ZERO);
    /// assert_eq!(config.response_reserve(), Duration::ZERO);
    /// ```
    #[must_use]
    pub const fn with_response_reserve(mut self, reserve: Duration) -> Self {
        self.response_reserve = reserve;
        self
    }

    /// Sets the least time an attempt must have to be worth sending.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::retry::RetryConfig;
    ///
    /// let config = RetryConfig::default().with_min_attempt_window(Duration::from_millis(5));
    /// assert_eq!(config.min_attempt_window(), Duration::from_millis(5));
    /// ```
    #[must_use]
    pub const fn with_min_attempt_window(mut self, window: Duration) -> Self {
        self.min_attempt_window = window;
        self
    }

    /// Sets which failures are retried.
    ///
    /// ```
    /// use shed_core::retry::{AttemptOutcome, RetryConfig, RetryableSet};
    ///
    /// let config = RetryConfig::default().with_retryable(RetryableSet::empty());
    /// assert!(!config.retryable().contains(AttemptOutcome::Status(503)));
    /// ```
    #[must_use]
    pub const fn with_retryable(mut self, retryable: RetryableSet) -> Self {
        self.retryable = retryable;
        self
    }

    /// Sets the backoff between attempts.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::retry::{Backoff, RetryConfig};
    ///
    /// let backoff = Backoff::new(Duration::from_millis(10), Duration::from_millis(80));
    /// assert_eq!(RetryConfig::default().with_backoff(backoff).backoff(), backoff);
    /// ```
    #[must_use]
    pub const fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// The attempt cap, the original included.
    ///
    /// ```
    /// use shed_core::retry::RetryConfig;
    ///
    /// assert_eq!(RetryConfig::default().max_attempts(), 3);
    /// ```
    #[must_use]
    pub const fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The default deadline of an operation.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::retry::RetryConfig;
    ///
    /// assert_eq!(RetryConfig::default().deadline(), Duration::from_millis(1_500));
    /// ```
    #[must_use]
    pub const fn deadline(&self) -> Duration {
        self.deadline
    }

    /// The response reserve.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::retry::RetryConfig;
    ///
    /// assert_eq!(RetryConfig::default().response_reserve(), Duration::from_millis(50));
    /// ```
    #[must_use]
    pub const fn response_reserve(&self) -> Duration {
        self.response_reserve
    }

    /// The minimum useful attempt window.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::retry::RetryConfig;
    ///
    /// assert_eq!(RetryConfig::default().min_attempt_window(), Duration::from_millis(20));
    /// ```
    #[must_use]
    pub const fn min_attempt_window(&self) -> Duration {
        self.min_attempt_window
    }

    /// The retryable set.
    ///
    /// ```
    /// use shed_core::retry::{RetryConfig, RetryableSet};
    ///
    /// assert_eq!(RetryConfig::default().retryable(), RetryableSet::default());
    /// ```
    #[must_use]
    pub const fn retryable(&self) -> RetryableSet {
        self.retryable
    }

    /// The backoff.
    ///
    /// ```
    /// use shed_core::retry::{Backoff, RetryConfig};
    ///
    /// assert_eq!(RetryConfig::default().backoff(), Backoff::default());
    /// ```
    #[must_use]
    pub const fn backoff(&self) -> Backoff {
        self.backoff
    }
}

/// A client's retry policy: configuration, the shared budget, counters and
/// the jitter source. Cloning is cheap and every clone shares the budget,
/// the counters and the jitter source.
///
/// Time is passed in: `now` is the time elapsed since the operation's
/// original was sent, read by the caller from its monotonic clock (or a
/// manual clock in tests). The policy never reads a clock and never sleeps.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use shed_core::retry::{Decision, AttemptOutcome, Pushback, Reason, Replay, RetryBudget, RetryPolicy};
///
/// let policy = RetryPolicy::new(Arc::new(RetryBudget::default()));
/// let mut op = policy.begin(Replay::Unsafe);
/// let decision = policy.decide(&mut op, AttemptOutcome::Status(503), Pushback::Absent, Duration::ZERO);
/// assert_eq!(decision, Decision::Stop(Reason::UnsafeOperation));
/// ```
#[derive(Clone)]
pub struct RetryPolicy {
    config: RetryConfig,
    budget: Arc<RetryBudget>,
    stats: Arc<RetryStats>,
    jitter: Arc<dyn Jitter + Send + Sync>,
}

impl fmt::Debug for RetryPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("config", &self.config)
            .field("budget", &self.budget)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl RetryPolicy {
    /// A policy with the default configuration drawing on `budget`, with
    /// jitter from [`SplitMix64::from_entropy`].
    ///
    /// ```
    /// use std::sync::Arc;
    /// use shed_core::retry::{RetryBudget, RetryPolicy};
    ///
    /// let budget = Arc::new(RetryBudget::default());
    /// let policy = RetryPolicy::new(Arc::clone(&budget));
    /// assert!(Arc::ptr_eq(policy.budget(), &budget));
    /// ```
    #[must_use]
    pub fn new(budget: Arc<RetryBudget>) -> Self {
        Self {
            config: RetryConfig::default(),
            budget,
            stats: Arc::default(),
            jitter: Arc::new(SplitMix64::from_entropy()),
        }
    }

    /// Replaces the configuration, once it passes [`RetryConfig::validate`].
    ///
    /// # Errors
    ///
    /// The [`ConfigError`] of an invalid configuration.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use shed_core::retry::{RetryBudget, RetryConfig, RetryPolicy};
    ///
    /// let policy = RetryPolicy::new(Arc::new(RetryBudget::default()))
    ///     .with_config(RetryConfig::default().with_max_attempts(2))?;
    /// assert_eq!(policy.config().max_attempts(), 2);
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn with_config(mut self, config: RetryConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        self.config = config;
        Ok(self)
    }

    /// Replaces the jitter source, e.g. with `|| 0.5` in tests.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use shed_core::retry::{RetryBudget, RetryPolicy};
    ///
    /// let policy = RetryPolicy::new(Arc::new(RetryBudget::default())).with_jitter(|| 0.5);
    /// # let _ = policy;
    /// ```
    #[must_use]
    pub fn with_jitter(mut self, jitter: impl Jitter + Send + Sync + 'static) -> Self {
        self.jitter = Arc::new(jitter);
        self
    }

    /// The configuration.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use shed_core::retry::{RetryBudget, RetryConfig, RetryPolicy};
    ///
    /// let policy = RetryPolicy::new(Arc::new(RetryBudget::default()));
    /// assert_eq!(*policy.config(), RetryConfig::default());
    /// ```
    #[must_use]
    pub fn config(&self) -> &RetryConfig {
        &self.config
    }

    /// The shared budget.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use shed_core::retry::{RetryBudget, RetryPolicy};
    ///
    /// let policy = RetryPolicy::new(Arc::new(RetryBudget::default()));
    /// assert_eq!(policy.budget().balance_tenths(), 20);
    /// ```
    #[must_use]
    pub fn budget(&self) -> &Arc<RetryBudget> {
        &self.budget
    }

    /// The counters, shared by every clone of this policy.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use shed_core::retry::{Replay, RetryBudget, RetryPolicy};
    ///
    /// let policy = RetryPolicy::new(Arc::new(RetryBudget::default()));
    /// let _op = policy.clone().begin(Replay::Safe);
    /// assert_eq!(policy.stats().originals(), 1);
    /// ```
    #[must_use]
    pub fn stats(&self) -> &RetryStats {
        &self.stats
    }

    /// Begins an operation whose original is being sent now: counts the
    /// original and earns its tenth of a retry in the budget.
    ///
    /// Call it only for originals actually sent; work refused before it was
    /// sent must not earn retries.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use shed_core::retry::{Replay, RetryBudget, RetryPolicy};
    ///
    /// let policy = RetryPolicy::new(Arc::new(RetryBudget::default()));
    /// let op = policy.begin(Replay::Safe);
    /// assert_eq!(op.attempt(), 1);
    /// assert_eq!(policy.budget().balance_tenths(), 21);
    /// ```
    #[must_use]
    pub fn begin(&self, replay: Replay) -> Operation {
        self.stats.record_original();
        self.budget.deposit();
        Operation {
            replay,
            deadline: self.config.deadline,
            response_reserve: self.config.response_reserve,
            attempts: 1,
        }
    }

    /// Decides what follows the latest attempt of `op`, which ended with
    /// `outcome` and `pushback` at `now` (time since the original was sent).
    ///
    /// In order: a success stops with [`Reason::Succeeded`]; a failure outside the
    /// retryable set stops ([`Reason::TerminalStatus`]), as does an operation
    /// not declared safe, a reached attempt cap and a server refusal. The
    /// wait is then the longer of the pushback and the jittered backoff (the
    /// pushback is a floor, never shortened); if the retry would not start
    /// at least the minimum attempt window before the deadline less the
    /// response reserve, the operation ends now ([`Reason::Deadline`]). Only
    /// then is the retry's credit taken from the budget
    /// ([`Reason::RetryBudget`] if it is spent).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use shed_core::retry::{Decision, AttemptOutcome, Pushback, Reason, Replay, RetryBudget, RetryPolicy};
    ///
    /// let policy = RetryPolicy::new(Arc::new(RetryBudget::default()));
    /// let mut op = policy.begin(Replay::Safe);
    /// let two_seconds = Pushback::Wait(Duration::from_secs(2));
    /// let decision = policy.decide(&mut op, AttemptOutcome::Status(429), two_seconds, Duration::from_millis(10));
    /// assert_eq!(decision, Decision::Stop(Reason::Deadline));
    /// assert_eq!(policy.budget().balance_tenths(), 21, "no credit taken");
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
            Decision::Retry { .. } => self.stats.record_retry(),
            Decision::Stop(reason) => self.stats.record_denial(reason),
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
        let config = &self.config;
        if !config.retryable.contains(outcome) {
            return Decision::Stop(Reason::TerminalStatus);
        }
        if op.replay != Replay::Safe {
            return Decision::Stop(Reason::UnsafeOperation);
        }
        if op.attempts >= config.max_attempts {
            return Decision::Stop(Reason::AttemptCap);
        }
        let Some(floor) = pushback.floor() else {
            return Decision::Stop(Reason::ServerRefused);
        };
        let jittered = config.backoff.delay(op.attempts - 1, self.jitter.as_ref());
        let delay = floor.max(jittered);
        let starts = now.saturating_add(delay);
        let fits = op
            .latest_useful_start(config.min_attempt_window)
            .is_some_and(|latest| starts <= latest);
        if !fits {
            return Decision::Stop(Reason::Deadline);
        }
        if !self.budget.try_withdraw() {
            return Decision::Stop(Reason::RetryBudget);
        }
        op.attempts += 1;
        Decision::Retry {
            attempt: op.attempts,
            delay,
        }
    }
}

/// One operation: its original and any retries, with the deadline they
/// share. Created by [`RetryPolicy::begin`], advanced by
/// [`RetryPolicy::decide`].
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use shed_core::retry::{Replay, RetryBudget, RetryPolicy};
///
/// let policy = RetryPolicy::new(Arc::new(RetryBudget::default()));
/// let op = policy.begin(Replay::Safe);
/// // Time left to give the server, kept back the response reserve:
/// assert_eq!(op.remaining(Duration::ZERO), Duration::from_millis(1_450));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    replay: Replay,
    deadline: Duration,
    response_reserve: Duration,
    attempts: u32,
}

impl Operation {
    /// Replaces the deadline (measured from the original), e.g. with one the
    /// caller was itself given.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use shed_core::retry::{Replay, RetryBudget, RetryPolicy};
    ///
    /// let policy = RetryPolicy::new(Arc::new(RetryBudget::default()));
    /// let op = policy.begin(Replay::Safe).with_deadline(Duration::from_secs(1));
    /// assert_eq!(op.deadline(), Duration::from_secs(1));
    /// ```
    #[must_use]
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// The number of the latest attempt sent: 1 for the original.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use shed_core::retry::{Replay, RetryBudget, RetryPolicy};
    ///
    /// let policy = RetryPolicy::new(Arc::new(RetryBudget::default()));
    /// assert_eq!(policy.begin(Replay::Safe).attempt(), 1);
    /// ```
    #[must_use]
    pub fn attempt(&self) -> u32 {
        self.attempts
    }

    /// The deadline, measured from the original.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use shed_core::retry::{Replay, RetryBudget, RetryPolicy};
    ///
    /// let policy = RetryPolicy::new(Arc::new(RetryBudget::default()));
    /// assert_eq!(policy.begin(Replay::Safe).deadline(), Duration::from_millis(1_500));
    /// ```
    #[must_use]
    pub fn deadline(&self) -> Duration {
        self.deadline
    }

    /// Whether the operation was declared safe to replay.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use shed_core::retry::{Replay, RetryBudget, RetryPolicy};
    ///
    /// let policy = RetryPolicy::new(Arc::new(RetryBudget::default()));
    /// assert_eq!(policy.begin(Replay::Unsafe).replay(), Replay::Unsafe);
    /// ```
    #[must_use]
    pub fn replay(&self) -> Replay {
        self.replay
    }

    /// The time an attempt sent at `now` has before the deadline, less the
    /// response reserve (zero if none): what to forward to the server as its
    /// deadline.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use shed_core::retry::{Replay, RetryBudget, RetryPolicy};
    ///
    /// let policy = RetryPolicy::new(Arc::new(RetryBudget::default()));
    /// let op = policy.begin(Replay::Safe);
    /// assert_eq!(op.remaining(Duration::from_millis(90)), Duration::from_millis(1_360));
    /// assert_eq!(op.remaining(Duration::from_secs(9)), Duration::ZERO);
    /// ```
    #[must_use]
    pub fn remaining(&self, now: Duration) -> Duration {
        self.deadline
            .saturating_sub(self.response_reserve)
            .saturating_sub(now)
    }

    /// The latest time a retry may start and still have `window` before the
    /// deadline less the response reserve.
    fn latest_useful_start(&self, window: Duration) -> Option<Duration> {
        self.deadline
            .checked_sub(self.response_reserve)?
            .checked_sub(window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_configuration_is_valid() {
        assert_eq!(RetryConfig::default().validate(), Ok(()));
    }

    #[test]
    fn an_attempt_cap_of_zero_is_refused_with_what_to_set() {
        let error = RetryConfig::default()
            .with_max_attempts(0)
            .validate()
            .unwrap_err();
        assert_eq!(error.setting(), "max_attempts");
        assert!(error.to_string().contains("at least 1"), "{error}");
    }

    #[test]
    fn a_deadline_no_attempt_fits_in_is_refused() {
        // 50 ms reserve + 20 ms window: a 70 ms deadline leaves nothing.
        let config = RetryConfig::default().with_deadline(Duration::from_millis(70));
        assert_eq!(config.validate().unwrap_err().setting(), "deadline");
        let config = RetryConfig::default().with_deadline(Duration::from_millis(71));
        assert_eq!(config.validate(), Ok(()));
    }

    #[test]
    fn an_invalid_configuration_leaves_the_policy_unbuilt() {
        let policy = RetryPolicy::new(Arc::new(RetryBudget::default()));
        assert!(policy
            .with_config(RetryConfig::default().with_max_attempts(0))
            .is_err());
    }
}
