//! Building a [`Shedder`]: every setting, its default, and its validation.
//!
//! ```
//! use shed_core::{Class, Shedder};
//! use std::time::Duration;
//!
//! // The defaults: an adaptive limit, and waits bounded by what the
//! // service is measured to deliver.
//! let adaptive = Shedder::builder().build()?;
//! assert_eq!(adaptive.stats().limit_bounds, (1, 1_000));
//!
//! let pinned = Shedder::builder()
//!     .limit(32)
//!     .queue_capacity(64)
//!     .max_wait(Class::Batch, Duration::from_secs(2))
//!     .build()?;
//! assert_eq!(pinned.limit(), 32);
//!
//! let error = Shedder::builder().limit(0).build().unwrap_err();
//! assert!(error.to_string().contains("limit"));
//! # Ok::<(), shed_core::ConfigError>(())
//! ```

use std::error::Error;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::limit::{self, AdaptiveLimit};
use crate::retry_after::JITTER_ONE;
use crate::{Class, Clock, Mode, MonotonicClock, Shedder};

/// The largest concurrency limit: far above any real service, far below the
/// engine's 32-bit slot counter.
pub const MAX_LIMIT: usize = 1 << 24;
/// The largest wait queue per rank.
pub const MAX_QUEUE_CAPACITY: usize = 1 << 20;
/// The default wait queue per rank: a bound on memory, not on waiting. How
/// long a request may wait is bounded by time (its class's maximum wait, its
/// deadline, and what the service is measured to deliver), so a deep queue
/// only holds requests that can still be served in time.
pub(crate) const DEFAULT_QUEUE_CAPACITY: usize = 1_024;
/// The longest accepted [`max_wait`](ShedderBuilder::max_wait) and
/// [`min_useful_window`](ShedderBuilder::min_useful_window).
const MAX_WAIT: Duration = Duration::from_secs(3_600);

/// Settings for a [`Shedder`], validated by [`ShedderBuilder::build`].
///
/// Every setting has a default that suits a typical HTTP service, the
/// concurrency limit included: by default it adapts to what the service
/// really does ([`adaptive_limit`](ShedderBuilder::adaptive_limit)).
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct ShedderBuilder {
    limit: LimitChoice,
    queue_capacity: usize,
    max_wait: [Duration; Class::COUNT],
    target_sojourn: Duration,
    interval: Duration,
    interval_completions: u32,
    shed_share: f64,
    recovery_step: u16,
    min_useful_window: Duration,
    retry_after_cap: Duration,
    retry_after_jitter: f64,
    mode: Mode,
    clock: Arc<dyn Clock>,
}

/// A fixed limit, or the adaptive one's settings.
#[derive(Clone, Copy, Debug)]
enum LimitChoice {
    Fixed(usize),
    Adaptive(AdaptiveLimit),
}

impl Default for ShedderBuilder {
    fn default() -> Self {
        ShedderBuilder {
            limit: LimitChoice::Adaptive(AdaptiveLimit::default()),
            queue_capacity: DEFAULT_QUEUE_CAPACITY,
            max_wait: [
                Duration::from_secs(2),     // background
                Duration::from_secs(1),     // batch
                Duration::from_millis(500), // interactive
                Duration::from_secs(1),     // critical
            ],
            target_sojourn: Duration::from_millis(5),
            interval: Duration::from_millis(100),
            interval_completions: 10_000,
            shed_share: 0.05,
            recovery_step: 8,
            min_useful_window: Duration::from_millis(5),
            retry_after_cap: Duration::from_secs(30),
            retry_after_jitter: 0.25,
            mode: Mode::Enforcing,
            clock: Arc::new(MonotonicClock),
        }
    }
}

impl ShedderBuilder {
    /// Pins the concurrency limit: exactly `limit` requests are served at
    /// once, whatever the service does. 1 to 2^24. Without it the limit
    /// adapts (see [`adaptive_limit`](ShedderBuilder::adaptive_limit)); pin it only
    /// when the capacity really is a constant you know.
    ///
    /// ```
    /// use shed_core::Shedder;
    ///
    /// // Eight workers that each run one request: never more than eight at once.
    /// let shedder = Shedder::builder().limit(8).build()?;
    /// assert_eq!(shedder.limit(), 8);
    /// // Zero would admit nothing: refused, naming the setting.
    /// assert_eq!(Shedder::builder().limit(0).build().unwrap_err().setting(), "limit");
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = LimitChoice::Fixed(limit);
        self
    }

    /// An adaptive concurrency limit with these settings (the default, with
    /// [`AdaptiveLimit::default`]): it finds the concurrency the service
    /// really runs at once and keeps the limit just above it.
    ///
    /// ```
    /// use shed_core::{AdaptiveLimit, Shedder};
    /// let shedder = Shedder::builder()
    ///     .adaptive_limit(AdaptiveLimit::new().min(4).max(64))
    ///     .build()?;
    /// assert_eq!(shedder.stats().limit_bounds, (4, 64));
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn adaptive_limit(mut self, settings: AdaptiveLimit) -> Self {
        self.limit = LimitChoice::Adaptive(settings);
        self
    }

    /// How many requests may wait in each rank's queue: a bound on memory.
    /// Default 1,024; how long a request may
    /// wait is bounded by time, not by this. 0 disables waiting: a full
    /// service refuses at once.
    ///
    /// ```
    /// use shed_core::{Admission, Arrival, Class, Shedder};
    ///
    /// // No waiting room: once the one slot is taken, the next is refused at once.
    /// let shedder = Shedder::builder().limit(1).queue_capacity(0).build()?;
    /// let _serving = shedder.try_admit(&Arrival::new(Class::Interactive)).unwrap();
    /// let next = shedder.admit(&Arrival::new(Class::Interactive));
    /// assert!(matches!(next, Admission::Rejected(_)));
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn queue_capacity(mut self, capacity: usize) -> Self {
        self.queue_capacity = capacity;
        self
    }

    /// The longest a request of `class` may wait for a slot before it is refused.
    /// Defaults: critical 1 s, interactive 500 ms, batch 1 s, background 2 s;
    /// above zero and at most an hour.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::{Class, Shedder};
    ///
    /// // Batch callers wait minutes anyway: their requests may queue for 5 s.
    /// let shedder = Shedder::builder()
    ///     .max_wait(Class::Batch, Duration::from_secs(5))
    ///     .build()?;
    /// // A zero wait would refuse every queued request: refused at build.
    /// let zero = Shedder::builder().max_wait(Class::Batch, Duration::ZERO).build();
    /// assert_eq!(zero.unwrap_err().setting(), "max_wait");
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn max_wait(mut self, class: Class, wait: Duration) -> Self {
        self.max_wait[class.index()] = wait;
        self
    }

    /// The queue delay the controller tolerates: when even the shortest wait of
    /// some admitted rank's queue in an interval exceeds it, that rank has a
    /// standing queue and the service is overloaded. The controller never uses
    /// less than half a slot time (mean service time / limit / 2), the natural
    /// wait for the next slot of a slow service. Default 5 ms.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::Shedder;
    ///
    /// // Callers of a slow report service do not notice 20 ms of queueing.
    /// let shedder = Shedder::builder()
    ///     .target_sojourn(Duration::from_millis(20))
    ///     .build()?;
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn target_sojourn(mut self, target: Duration) -> Self {
        self.target_sojourn = target;
        self
    }

    /// How often the controller judges the queue. Default 100 ms.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::Shedder;
    ///
    /// // A service of 1 ms requests can be judged twice as often.
    /// let shedder = Shedder::builder().interval(Duration::from_millis(50)).build()?;
    /// // The tolerated queue delay must fit in an interval.
    /// let too_short = Shedder::builder().interval(Duration::from_millis(2)).build();
    /// assert_eq!(too_short.unwrap_err().setting(), "target_sojourn");
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// Ends a controller interval early after this many completions. Default 10,000.
    ///
    /// ```
    /// use shed_core::Shedder;
    ///
    /// // At 200,000 requests a second, judge every 20,000 rather than every 100 ms.
    /// let shedder = Shedder::builder().interval_completions(20_000).build()?;
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn interval_completions(mut self, completions: u32) -> Self {
        self.interval_completions = completions;
        self
    }

    /// The share of last interval's admitted work that each overloaded interval
    /// sheds, in `(0, 1]`. Default 0.05 (5%).
    ///
    /// ```
    /// use shed_core::Shedder;
    ///
    /// // Overloads that arrive as steps: shed a tenth at a time to catch up sooner.
    /// let shedder = Shedder::builder().shed_share(0.1).build()?;
    /// assert_eq!(Shedder::builder().shed_share(0.0).build().unwrap_err().setting(), "shed_share");
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn shed_share(mut self, share: f64) -> Self {
        self.shed_share = share;
        self
    }

    /// How many cohorts the level gives back after a healthy interval; the step
    /// doubles with each further healthy interval, up to 16 times. Default 8.
    ///
    /// ```
    /// use shed_core::Shedder;
    ///
    /// // Readmit traffic more cautiously after an overload.
    /// let shedder = Shedder::builder().recovery_step(2).build()?;
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn recovery_step(mut self, cohorts: u16) -> Self {
        self.recovery_step = cohorts;
        self
    }

    /// The least time a request needs to be worth starting: one whose remaining
    /// deadline is shorter than this is refused at once. A request that must
    /// wait for a slot needs its predicted wait plus this, or plus the measured
    /// 95th percentile of service time when that is longer, and leaves the queue unserved
    /// when less is left. Default 5 ms; at most an hour.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::{Arrival, Class, RejectReason, Shedder};
    ///
    /// // No request of this service finishes in under 20 ms.
    /// let shedder = Shedder::builder().min_useful_window(Duration::from_millis(20)).build()?;
    /// let hurried = Arrival::new(Class::Interactive).with_timeout(Duration::from_millis(10));
    /// let rejection = shedder.try_admit(&hurried).unwrap_err();
    /// assert_eq!(rejection.reason(), RejectReason::DeadlineUnmeetable);
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn min_useful_window(mut self, window: Duration) -> Self {
        self.min_useful_window = window;
        self
    }

    /// The longest Retry-After the engine computes. Default 30 s; 1 s to 1 day.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::Shedder;
    ///
    /// // Callers that give up after 10 s gain nothing from being told 30.
    /// let shedder = Shedder::builder().retry_after_cap(Duration::from_secs(10)).build()?;
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn retry_after_cap(mut self, cap: Duration) -> Self {
        self.retry_after_cap = cap;
        self
    }

    /// How much random spread is added to Retry-After, as a fraction of it, in
    /// `[0, 1]`. Default 0.25: a computed 4 s becomes 4 to 5 s.
    ///
    /// ```
    /// use shed_core::Shedder;
    ///
    /// // Many clients refused at once: spread their return over half again the wait.
    /// let shedder = Shedder::builder().retry_after_jitter(0.5).build()?;
    /// let too_wide = Shedder::builder().retry_after_jitter(1.5).build();
    /// assert_eq!(too_wide.unwrap_err().setting(), "retry_after_jitter");
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn retry_after_jitter(mut self, jitter: f64) -> Self {
        self.retry_after_jitter = jitter;
        self
    }

    /// Whether the engine acts on its decisions or only records them.
    /// Default [`Mode::Enforcing`]; [`Mode::Shadow`] serves every request and
    /// counts what enforcing mode would have done (see [`Mode`]). Change it
    /// on a running engine with [`Shedder::set_mode`].
    ///
    /// ```
    /// use shed_core::{Mode, Shedder};
    ///
    /// // Deployed watching: read `stats().class(..).would` for a while first.
    /// let shedder = Shedder::builder().mode(Mode::Shadow).build()?;
    /// assert_eq!(shedder.mode(), Mode::Shadow);
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// The clock the engine reads. Default [`MonotonicClock`]; tests pass a
    /// [`ManualClock`](crate::ManualClock).
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::{ManualClock, Shedder};
    ///
    /// // A test moves time itself.
    /// let clock = ManualClock::new();
    /// let shedder = Shedder::builder().clock(clock.clone()).build()?;
    /// let before = shedder.now();
    /// clock.advance(Duration::from_millis(100));
    /// assert_eq!(shedder.now() - before, Duration::from_millis(100));
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Checks every setting and builds the engine.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the setting and what to change.
    pub fn build(self) -> Result<Shedder, ConfigError> {
        Ok(Shedder::from_config(self.validate()?))
    }

    pub(crate) fn validate(self) -> Result<Config, ConfigError> {
        let fail = |setting, problem: String| Err(ConfigError { setting, problem });
        let limit = match self.limit {
            LimitChoice::Fixed(limit) => LimitConfig::Fixed(validate_limit(limit)?),
            LimitChoice::Adaptive(settings) => LimitConfig::Adaptive(settings.validate()?),
        };
        let queue_capacity = self.queue_capacity;
        if queue_capacity > MAX_QUEUE_CAPACITY {
            return fail(
                "queue_capacity",
                format!(
                    "is {}; set it to at most {MAX_QUEUE_CAPACITY} (waiting requests per rank)",
                    queue_capacity
                ),
            );
        }
        let mut max_wait = [0; Class::COUNT];
        for class in Class::ALL {
            max_wait[class.index()] = check_max_wait(class, self.max_wait[class.index()])?;
        }
        if self.min_useful_window > MAX_WAIT {
            return fail(
                "min_useful_window",
                format!(
                    "is {:?}; set it to at most an hour (the least time a request needs to be worth starting)",
                    self.min_useful_window
                ),
            );
        }
        if self.interval.is_zero() || self.interval > Duration::from_secs(60) {
            return fail(
                "interval",
                format!(
                    "is {:?}; set it between 1 ms and 60 s (100 ms suits most services)",
                    self.interval
                ),
            );
        }
        let target_sojourn = check_target_sojourn(self.target_sojourn, nanos(self.interval))?;
        if self.interval_completions == 0 {
            return fail(
                "interval_completions",
                "is 0; set it to at least 1 (10,000 suits most services)".to_string(),
            );
        }
        if !(self.shed_share > 0.0 && self.shed_share <= 1.0) {
            return fail(
                "shed_share",
                format!("is {}; set it in (0, 1], for example 0.05", self.shed_share),
            );
        }
        if self.recovery_step == 0 || self.recovery_step > 1024 {
            return fail(
                "recovery_step",
                format!("is {}; set it from 1 to 1024 cohorts", self.recovery_step),
            );
        }
        let retry_after_cap = check_retry_after_cap(self.retry_after_cap)?;
        if !(0.0..=1.0).contains(&self.retry_after_jitter) {
            return fail(
                "retry_after_jitter",
                format!(
                    "is {}; set it in [0, 1], for example 0.25",
                    self.retry_after_jitter
                ),
            );
        }
        Ok(Config {
            limit,
            queue_capacity,
            live: Live::new(max_wait, target_sojourn, retry_after_cap, self.mode),
            interval: nanos(self.interval),
            interval_completions: self.interval_completions,
            shed_share: self.shed_share,
            recovery_step: self.recovery_step,
            min_useful_window: nanos(self.min_useful_window),
            retry_after_jitter: (self.retry_after_jitter * JITTER_ONE as f64).round() as u64,
            clock: self.clock,
        })
    }
}

/// Checks a class's maximum wait; in nanoseconds.
fn check_max_wait(class: Class, wait: Duration) -> Result<u64, ConfigError> {
    let problem = if wait.is_zero() {
        format!("for {class} is zero; give it a positive wait, or set queue_capacity(0) to disable waiting")
    } else if wait > MAX_WAIT {
        format!("for {class} is {wait:?}; set it to at most an hour (a request that waits longer has long been given up on)")
    } else {
        return Ok(nanos(wait));
    };
    Err(ConfigError::new("max_wait", problem))
}

/// Checks the queue-delay target against the controller's interval (in
/// nanoseconds); in nanoseconds.
fn check_target_sojourn(target: Duration, interval: u64) -> Result<u64, ConfigError> {
    if target.is_zero() || nanos(target) >= interval {
        return Err(ConfigError::new(
            "target_sojourn",
            format!(
                "is {target:?}; set it above zero and below the interval ({:?})",
                Duration::from_nanos(interval)
            ),
        ));
    }
    Ok(nanos(target))
}

/// Checks the Retry-After cap; in nanoseconds.
fn check_retry_after_cap(cap: Duration) -> Result<u64, ConfigError> {
    if cap < Duration::from_secs(1) || cap > Duration::from_secs(86_400) {
        return Err(ConfigError::new(
            "retry_after_cap",
            format!("is {cap:?}; set it from 1 s to 1 day"),
        ));
    }
    Ok(nanos(cap))
}

/// Checks a concurrency limit.
pub(crate) fn validate_limit(limit: usize) -> Result<u32, ConfigError> {
    if limit == 0 || limit > MAX_LIMIT {
        return Err(ConfigError {
            setting: "limit",
            problem: format!(
                "is {limit}; set it to the number of requests served at once, from 1 to {MAX_LIMIT}"
            ),
        });
    }
    Ok(limit as u32)
}

/// Converts a duration to whole nanoseconds, saturating.
pub(crate) fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// The validated limit: fixed, or the adaptive one's settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum LimitConfig {
    Fixed(u32),
    Adaptive(limit::Settings),
}

impl LimitConfig {
    /// The limit the engine starts with.
    pub(crate) fn initial(&self) -> u32 {
        match self {
            LimitConfig::Fixed(limit) => *limit,
            LimitConfig::Adaptive(settings) => settings.initial,
        }
    }
}

/// Validated settings, times in nanoseconds.
#[derive(Debug)]
pub(crate) struct Config {
    pub(crate) limit: LimitConfig,
    pub(crate) queue_capacity: usize,
    /// The settings an operator may change while the engine runs.
    pub(crate) live: Live,
    pub(crate) interval: u64,
    pub(crate) interval_completions: u32,
    pub(crate) shed_share: f64,
    pub(crate) recovery_step: u16,
    pub(crate) min_useful_window: u64,
    /// In 1/65,536ths.
    pub(crate) retry_after_jitter: u64,
    pub(crate) clock: Arc<dyn Clock>,
}

/// The settings an operator may change on a running engine
/// ([`Shedder::set_max_wait`], [`Shedder::set_target_sojourn`],
/// [`Shedder::set_retry_after_cap`], [`Shedder::set_mode`]), times in nanoseconds, checked before they
/// are stored. Each is read with one relaxed load where it is used, so a
/// change takes effect for the next request.
///
/// # Memory ordering
///
/// `Relaxed`: each setting stands alone, and a request that reads the old
/// value an instant after the change is as right as one that came an
/// instant before it.
#[derive(Debug)]
pub(crate) struct Live {
    max_wait: [AtomicU64; Class::COUNT],
    target_sojourn: AtomicU64,
    retry_after_cap: AtomicU64,
    shadow: AtomicBool,
}

impl Live {
    fn new(
        max_wait: [u64; Class::COUNT],
        target_sojourn: u64,
        retry_after_cap: u64,
        mode: Mode,
    ) -> Live {
        Live {
            max_wait: max_wait.map(AtomicU64::new),
            target_sojourn: AtomicU64::new(target_sojourn),
            retry_after_cap: AtomicU64::new(retry_after_cap),
            shadow: AtomicBool::new(mode == Mode::Shadow),
        }
    }

    /// Whether decisions are enforced or only recorded.
    pub(crate) fn mode(&self) -> Mode {
        if self.shadow.load(Ordering::Relaxed) {
            Mode::Shadow
        } else {
            Mode::Enforcing
        }
    }

    /// Stores the mode (the engine also drops the rehearsed queue: see
    /// `Engine::set_mode`).
    pub(crate) fn set_mode(&self, mode: Mode) {
        self.shadow.store(mode == Mode::Shadow, Ordering::Relaxed);
    }

    /// The longest a request of `class` may wait for a slot.
    pub(crate) fn max_wait(&self, class: Class) -> u64 {
        self.max_wait[class.index()].load(Ordering::Relaxed)
    }

    /// The queue delay the controller tolerates.
    pub(crate) fn target_sojourn(&self) -> u64 {
        self.target_sojourn.load(Ordering::Relaxed)
    }

    /// The longest Retry-After computed.
    pub(crate) fn retry_after_cap(&self) -> u64 {
        self.retry_after_cap.load(Ordering::Relaxed)
    }
}

impl Config {
    /// Changes a class's maximum wait on a running engine, checked as the
    /// builder checks it.
    pub(crate) fn set_max_wait(&self, class: Class, wait: Duration) -> Result<(), ConfigError> {
        let wait = check_max_wait(class, wait)?;
        self.live.max_wait[class.index()].store(wait, Ordering::Relaxed);
        Ok(())
    }

    /// Changes the queue-delay target on a running engine, checked against
    /// the interval as the builder checks it.
    pub(crate) fn set_target_sojourn(&self, target: Duration) -> Result<(), ConfigError> {
        let target = check_target_sojourn(target, self.interval)?;
        self.live.target_sojourn.store(target, Ordering::Relaxed);
        Ok(())
    }

    /// Changes the Retry-After cap on a running engine, checked as the
    /// builder checks it.
    pub(crate) fn set_retry_after_cap(&self, cap: Duration) -> Result<(), ConfigError> {
        let cap = check_retry_after_cap(cap)?;
        self.live.retry_after_cap.store(cap, Ordering::Relaxed);
        Ok(())
    }
}

/// A setting [`ShedderBuilder::build`] refused, with what to do about it.
///
/// ```
/// let error = shed_core::Shedder::builder().shed_share(2.0).build().unwrap_err();
/// assert_eq!(error.setting(), "shed_share");
/// assert_eq!(error.to_string(), "invalid shed_share: is 2; set it in (0, 1], for example 0.05");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    setting: &'static str,
    problem: String,
}

impl ConfigError {
    pub(crate) fn new(setting: &'static str, problem: String) -> ConfigError {
        ConfigError { setting, problem }
    }

    /// The name of the builder method whose value was refused.
    pub fn setting(&self) -> &'static str {
        self.setting
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid {}: {}", self.setting, self.problem)
    }
}

impl Error for ConfigError {}
