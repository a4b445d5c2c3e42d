//! Building a [`Retrier`]: every setting, its default, and its validation.
//!
//! ```
//! use std::time::Duration;
//! use shed_core::retry::Retrier;
//!
//! let retrier = Retrier::builder()
//!     .max_attempts(2)
//!     .deadline(Duration::from_secs(3))
//!     .build()?;
//! assert_eq!(retrier.forwarded_deadline(), Duration::from_millis(2_950));
//! # Ok::<(), shed_core::ConfigError>(())
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::deadline::OperationDeadline;
use super::{Backoff, Jitter, Retrier, RetryBudget, RetryableSet, SplitMix64};
use crate::ConfigError;

/// Settings for a [`Retrier`], validated by [`build`](Self::build).
///
/// Every setting has a default that suits a client calling an HTTP service
/// with a deadline of a second or two.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use shed_core::retry::{Retrier, RetryBudget};
///
/// // The defaults: 3 attempts in 1,500 ms, drawing on a budget of its own.
/// let retrier = Retrier::builder().build()?;
/// assert_eq!(retrier.forwarded_deadline(), Duration::from_millis(1_450));
///
/// // Two clients of one dependency, sharing one budget.
/// let budget = Arc::new(RetryBudget::default());
/// let reads = Retrier::builder().budget(Arc::clone(&budget)).build()?;
/// let reports = Retrier::builder()
///     .budget(Arc::clone(&budget))
///     .deadline(Duration::from_secs(10))
///     .build()?;
/// assert!(Arc::ptr_eq(reads.budget(), reports.budget()));
///
/// let error = Retrier::builder().max_attempts(0).build().unwrap_err();
/// assert_eq!(
///     error.to_string(),
///     "invalid max_attempts: is 0; set it to at least 1 (the original counts as an attempt)"
/// );
/// # Ok::<(), shed_core::ConfigError>(())
/// ```
#[derive(Clone)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct RetrierBuilder {
    budget: Option<Arc<RetryBudget>>,
    settings: Settings,
    jitter: Arc<dyn Jitter + Send + Sync>,
}

/// The per-operation limits a [`Retrier`] follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Settings {
    pub(super) max_attempts: u32,
    pub(super) deadline: OperationDeadline,
    pub(super) min_attempt_window: Duration,
    pub(super) retryable: RetryableSet,
    pub(super) backoff: Backoff,
}

impl Default for RetrierBuilder {
    fn default() -> Self {
        Self {
            budget: None,
            settings: Settings {
                max_attempts: 3,
                deadline: OperationDeadline {
                    length: Duration::from_millis(1_500),
                    response_reserve: Duration::from_millis(50),
                },
                min_attempt_window: Duration::from_millis(20),
                retryable: RetryableSet::default(),
                backoff: Backoff::default(),
            },
            jitter: Arc::new(SplitMix64::from_entropy()),
        }
    }
}

impl RetrierBuilder {
    /// The budget retries are drawn from, shared with whatever else holds
    /// it. Default: a [`RetryBudget::default`] of this retrier's own, which
    /// its clones share.
    ///
    /// Share one budget between retriers that call the same dependency, so
    /// together they add at most a tenth to its load in an outage:
    ///
    /// ```
    /// use std::sync::Arc;
    /// use shed_core::retry::{Replay, Retrier, RetryBudget};
    ///
    /// let budget = Arc::new(RetryBudget::new(0, 4));
    /// let retrier = Retrier::builder().budget(Arc::clone(&budget)).build()?;
    /// let _op = retrier.begin(Replay::Safe);
    /// assert_eq!(budget.balance_tenths(), 1, "the original earned a tenth");
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn budget(mut self, budget: Arc<RetryBudget>) -> Self {
        self.budget = Some(budget);
        self
    }

    /// The most attempts of one operation, the original included. Default
    /// 3; at least 1 (1 never retries).
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::retry::{AttemptOutcome, Decision, Pushback, Reason, Replay, Retrier};
    ///
    /// let retrier = Retrier::builder().max_attempts(1).build()?;
    /// let mut op = retrier.begin(Replay::Safe);
    /// let decision = retrier.decide(&mut op, AttemptOutcome::Status(503), Pushback::Absent, Duration::ZERO);
    /// assert_eq!(decision, Decision::Stop(Reason::AttemptCap));
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.settings.max_attempts = attempts;
        self
    }

    /// How long an operation may take, measured from when its original is
    /// sent; [`Operation::with_deadline`](super::Operation::with_deadline)
    /// replaces it for one operation. Default 1,500 ms; longer than the
    /// response reserve plus the minimum attempt window.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::retry::Retrier;
    ///
    /// let retrier = Retrier::builder().deadline(Duration::from_secs(3)).build()?;
    /// // What an original tells the server it has: the deadline less the reserve.
    /// assert_eq!(retrier.forwarded_deadline(), Duration::from_millis(2_950));
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.settings.deadline.length = deadline;
        self
    }

    /// The time kept back at the end of the deadline for the last response
    /// to reach the caller: no attempt is promised it. Default 50 ms.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::retry::Retrier;
    ///
    /// let retrier = Retrier::builder().response_reserve(Duration::ZERO).build()?;
    /// assert_eq!(retrier.forwarded_deadline(), Duration::from_millis(1_500));
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn response_reserve(mut self, reserve: Duration) -> Self {
        self.settings.deadline.response_reserve = reserve;
        self
    }

    /// The least time an attempt must have before the deadline (less the
    /// reserve) to be worth sending: a retry that would start later is not
    /// sent. Default 20 ms.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::retry::{AttemptOutcome, Decision, Pushback, Reason, Replay, Retrier};
    ///
    /// let retrier = Retrier::builder()
    ///     .min_attempt_window(Duration::from_millis(500))
    ///     .build()?;
    /// let mut op = retrier.begin(Replay::Safe);
    /// // A 503 at 1 s: a retry would have under 450 ms left.
    /// let at_one_second = Duration::from_secs(1);
    /// let decision = retrier.decide(&mut op, AttemptOutcome::Status(503), Pushback::Absent, at_one_second);
    /// assert_eq!(decision, Decision::Stop(Reason::Deadline));
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn min_attempt_window(mut self, window: Duration) -> Self {
        self.settings.min_attempt_window = window;
        self
    }

    /// Which failures are retried. Default [`RetryableSet::default`]: 429,
    /// 503, 504 and connect errors.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::retry::{AttemptOutcome, Decision, Pushback, Replay, Retrier, RetryableSet};
    ///
    /// let retrier = Retrier::builder()
    ///     .retryable(RetryableSet::default().add_status(502)?)
    ///     .build()?;
    /// let mut op = retrier.begin(Replay::Safe);
    /// let decision = retrier.decide(&mut op, AttemptOutcome::Status(502), Pushback::Absent, Duration::ZERO);
    /// assert!(matches!(decision, Decision::Retry { attempt: 2, .. }));
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn retryable(mut self, retryable: RetryableSet) -> Self {
        self.settings.retryable = retryable;
        self
    }

    /// The backoff between attempts. Default [`Backoff::default`]: full
    /// jitter over windows of 100 ms doubling to 800 ms.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::retry::{AttemptOutcome, Backoff, Decision, Pushback, Replay, Retrier};
    ///
    /// let retrier = Retrier::builder()
    ///     .backoff(Backoff::new().base(Duration::from_millis(20)).cap(Duration::from_secs(1)))
    ///     .jitter(|| 0.5)
    ///     .build()?;
    /// let mut op = retrier.begin(Replay::Safe);
    /// // Half of the first window, 20 ms.
    /// let decision = retrier.decide(&mut op, AttemptOutcome::Status(503), Pushback::Absent, Duration::ZERO);
    /// assert_eq!(decision, Decision::Retry { attempt: 2, delay: Duration::from_millis(10) });
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.settings.backoff = backoff;
        self
    }

    /// The source of randomness for the backoff. Default
    /// [`SplitMix64::from_entropy`]; tests fix it, any `Fn() -> f64` will do.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::retry::{AttemptOutcome, Decision, Pushback, Replay, Retrier};
    ///
    /// let retrier = Retrier::builder().jitter(|| 0.5).build()?;
    /// let mut op = retrier.begin(Replay::Safe);
    /// // Half of the first window, 100 ms.
    /// let decision = retrier.decide(&mut op, AttemptOutcome::Status(503), Pushback::Absent, Duration::ZERO);
    /// assert_eq!(decision, Decision::Retry { attempt: 2, delay: Duration::from_millis(50) });
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn jitter(mut self, jitter: impl Jitter + Send + Sync + 'static) -> Self {
        self.jitter = Arc::new(jitter);
        self
    }

    /// Checks every setting and builds the retrier.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the setting and what to change.
    pub fn build(self) -> Result<Retrier, ConfigError> {
        let settings = self.settings.validate()?;
        let budget = self.budget.unwrap_or_default();
        Ok(Retrier::new(settings, budget, self.jitter))
    }
}

impl fmt::Debug for RetrierBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetrierBuilder")
            .field("budget", &self.budget)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Settings {
    /// The settings, if they make sense together: at least one attempt, and
    /// a deadline longer than the response reserve plus the minimum attempt
    /// window (or no attempt would ever fit).
    fn validate(self) -> Result<Settings, ConfigError> {
        if self.max_attempts == 0 {
            return Err(ConfigError::new(
                "max_attempts",
                "is 0; set it to at least 1 (the original counts as an attempt)".to_string(),
            ));
        }
        let OperationDeadline {
            length,
            response_reserve,
        } = self.deadline;
        let needed = response_reserve.saturating_add(self.min_attempt_window);
        if length <= needed {
            return Err(ConfigError::new(
                "deadline",
                format!(
                    "is {length:?}; make it longer than response_reserve + min_attempt_window ({needed:?}), or no attempt fits"
                ),
            ));
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_valid() {
        assert!(RetrierBuilder::default().build().is_ok());
    }

    #[test]
    fn an_attempt_cap_of_zero_is_refused_with_what_to_set() {
        let error = Retrier::builder().max_attempts(0).build().unwrap_err();
        assert_eq!(error.setting(), "max_attempts");
        assert!(error.to_string().contains("at least 1"), "{error}");
    }

    #[test]
    fn a_deadline_no_attempt_fits_in_is_refused() {
        // 50 ms reserve + 20 ms window: a 70 ms deadline leaves nothing.
        let error = Retrier::builder()
            .deadline(Duration::from_millis(70))
            .build()
            .unwrap_err();
        assert_eq!(error.setting(), "deadline");
        let fits = Retrier::builder()
            .deadline(Duration::from_millis(71))
            .build();
        assert!(fits.is_ok());
    }

    #[test]
    fn retriers_built_without_a_budget_each_have_their_own() {
        let first = Retrier::builder().build().unwrap();
        let second = Retrier::builder().build().unwrap();
        assert!(!Arc::ptr_eq(first.budget(), second.budget()));
        assert!(Arc::ptr_eq(first.budget(), first.clone().budget()));
    }
}
