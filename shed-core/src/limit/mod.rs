//! The concurrency limit: adaptive by default, fixed when asked.
//!
//! Nobody knows their service's capacity, and it moves with deploys, CPU,
//! dependencies and request mix. So by default the limit adapts: it finds
//! the *knee* of the service, the concurrency beyond which throughput stops
//! growing and hold times start to, and keeps the limit just above it (see
//! [`estimator`] for the algorithm). Pin it with
//! [`ShedderBuilder::limit`](crate::ShedderBuilder::limit) only when the capacity really
//! is a constant you know.
//!
//! ```
//! use shed_core::{AdaptiveLimit, Shedder};
//!
//! // The default: adaptive, from 8 in flight, between 1 and 1,000.
//! let adaptive = Shedder::builder().build()?;
//! assert_eq!(adaptive.limit(), 8);
//! assert_eq!(adaptive.stats().limit_bounds, (1, 1_000));
//!
//! // Adaptive within bounds a team knows are sane.
//! let bounded = Shedder::builder()
//!     .adaptive_limit(AdaptiveLimit::new().initial(16).min(4).max(256))
//!     .build()?;
//! assert_eq!(bounded.stats().limit_bounds, (4, 256));
//!
//! // Pinned.
//! let pinned = Shedder::builder().limit(64).build()?;
//! assert_eq!(pinned.stats().limit_bounds, (64, 64));
//! # Ok::<(), shed_core::ConfigError>(())
//! ```
//!
//! # Cost
//!
//! The admit path reads one more atomic (the epoch a permit is admitted in);
//! the release path adds a few relaxed counters; the estimator itself runs
//! once per controller interval, on the thread that closes it, under a mutex
//! nobody else takes.

pub(crate) mod estimator;
mod sampler;

use std::time::Duration;

pub(crate) use estimator::{Estimator, Settings};
pub(crate) use sampler::{Ending, Sampler};

use crate::config::{nanos, ConfigError, MAX_LIMIT};

/// Settings of the adaptive concurrency limit, for
/// [`ShedderBuilder::adaptive_limit`](crate::ShedderBuilder::adaptive_limit).
///
/// The defaults suit a typical HTTP service; the bounds are the settings
/// most worth choosing. Every setting is checked when the shedder is built.
///
/// ```
/// use shed_core::{AdaptiveLimit, Shedder};
///
/// let error = Shedder::builder()
///     .adaptive_limit(AdaptiveLimit::new().min(10).max(5))
///     .build()
///     .unwrap_err();
/// assert_eq!(error.setting(), "adaptive_limit");
/// assert!(error.to_string().contains("min"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[must_use = "settings do nothing until passed to ShedderBuilder::adaptive_limit"]
pub struct AdaptiveLimit {
    initial: usize,
    min: usize,
    max: usize,
    round_samples: u32,
    max_round: Duration,
    inflation: f64,
    censored_share: f64,
    headroom: (f64, f64),
    refresh_rounds: u32,
}

impl Default for AdaptiveLimit {
    fn default() -> Self {
        AdaptiveLimit {
            initial: 8,
            min: 1,
            max: 1_000,
            round_samples: 64,
            max_round: Duration::from_secs(5),
            inflation: 1.6,
            censored_share: 0.1,
            headroom: (0.06, 0.2),
            refresh_rounds: 300,
        }
    }
}

impl AdaptiveLimit {
    /// The default settings.
    pub fn new() -> AdaptiveLimit {
        AdaptiveLimit::default()
    }

    /// The limit to start from. Default 8: from 8 or less the limit doubles
    /// while throughput doubles with it (slow start); from more it first
    /// probes down to measure the service's baseline.
    ///
    /// ```
    /// use shed_core::{AdaptiveLimit, Shedder};
    ///
    /// // A service known to run about 200 at once need not slow-start from 8.
    /// let shedder = Shedder::builder()
    ///     .adaptive_limit(AdaptiveLimit::new().initial(200))
    ///     .build()?;
    /// assert_eq!(shedder.limit(), 200);
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn initial(mut self, limit: usize) -> Self {
        self.initial = limit;
        self
    }

    /// The lowest the limit may go. Default 1: a service that truly runs
    /// one request at a time (one core, one connection) is read at a knee
    /// of about 1, and a second slot there only queues a second request
    /// inside it, which doubles the time every request holds its slot. In
    /// the lab's one-core scenario at 4x load, a floor of 2 gave a p99 of
    /// 75-85 ms in four trials, one slot 38-52 ms (pinned at 1: 34-39 ms;
    /// `overload cpu-bound --policies shed,shed@true`). A second slot
    /// overlaps the moment the service idles between a permit's release
    /// and the next request's start (the hand-off goes through the
    /// scheduler, the response is written): in the closed loops of those
    /// trials' calibrations the core finished 1.7-3.0% more at two slots
    /// than at one, and at 2x the floor of 2 served 1-3.5 points more. Set 2 where
    /// that matters more than latency.
    ///
    /// ```
    /// use shed_core::{AdaptiveLimit, Shedder};
    ///
    /// // Four requests at once always fit, however slow the service looks.
    /// let shedder = Shedder::builder()
    ///     .adaptive_limit(AdaptiveLimit::new().min(4))
    ///     .build()?;
    /// assert_eq!(shedder.stats().limit_bounds.0, 4);
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn min(mut self, limit: usize) -> Self {
        self.min = limit;
        self
    }

    /// The highest the limit may go. Default 1,000.
    ///
    /// ```
    /// use shed_core::{AdaptiveLimit, Shedder};
    ///
    /// // The database behind the service takes 64 connections: never more at once.
    /// let shedder = Shedder::builder()
    ///     .adaptive_limit(AdaptiveLimit::new().max(64))
    ///     .build()?;
    /// assert_eq!(shedder.stats().limit_bounds.1, 64);
    /// // A floor above the ceiling is refused at build.
    /// let crossed = Shedder::builder().adaptive_limit(AdaptiveLimit::new().min(65).max(64)).build();
    /// assert_eq!(crossed.unwrap_err().setting(), "adaptive_limit");
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn max(mut self, limit: usize) -> Self {
        self.max = limit;
        self
    }

    /// How many released permits a decision is made on. Default 64; more
    /// is steadier and slower. From 16 to 65,536.
    ///
    /// ```
    /// use shed_core::{AdaptiveLimit, Shedder};
    ///
    /// // A busy service whose hold times vary widely: decide on more samples.
    /// let shedder = Shedder::builder()
    ///     .adaptive_limit(AdaptiveLimit::new().round_samples(256))
    ///     .build()?;
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn round_samples(mut self, samples: u32) -> Self {
        self.round_samples = samples;
        self
    }

    /// A decision that has not gathered its samples by then is dropped, and
    /// the limit kept (a quiet service keeps its limit). Default 5 s.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::{AdaptiveLimit, Shedder};
    ///
    /// // A low-volume service: give a decision up to 30 s to gather its samples.
    /// let shedder = Shedder::builder()
    ///     .adaptive_limit(AdaptiveLimit::new().max_round(Duration::from_secs(30)))
    ///     .build()?;
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn max_round(mut self, duration: Duration) -> Self {
        self.max_round = duration;
        self
    }

    /// How far hold times may inflate over the service's measured baseline
    /// (for two decisions in a row) before the limit is probed. Default 1.6;
    /// more than 1.
    ///
    /// ```
    /// use shed_core::{AdaptiveLimit, Shedder};
    ///
    /// // Hold times that swing with the request mix: probe only past a doubling.
    /// let shedder = Shedder::builder()
    ///     .adaptive_limit(AdaptiveLimit::new().inflation(2.0))
    ///     .build()?;
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn inflation(mut self, ratio: f64) -> Self {
        self.inflation = ratio;
        self
    }

    /// The share of permits, abandoned by their caller or cut at their
    /// deadline, above which the limit backs off. Default 0.1; in (0, 1].
    ///
    /// ```
    /// use shed_core::{AdaptiveLimit, Shedder};
    ///
    /// // Callers that often hang up for reasons of their own: back off past 30%.
    /// let shedder = Shedder::builder()
    ///     .adaptive_limit(AdaptiveLimit::new().censored_share(0.3))
    ///     .build()?;
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn censored_share(mut self, share: f64) -> Self {
        self.censored_share = share;
        self
    }

    /// The headroom kept above the knee, as a range the limit moves in: more
    /// while hold times stay flat, less while they inflate at peak
    /// throughput. Default 6% to 20%; `0 <= low <= high <= 1`. While the
    /// knee believed rests on one reading, the limit keeps 12 points more
    /// than `low` above it (no more than `high`): one probe's reading is
    /// off by a tenth or so, more often low than high.
    ///
    /// ```
    /// use shed_core::{AdaptiveLimit, Shedder};
    ///
    /// // Bursty arrivals: keep 15% to 40% above the measured knee.
    /// let shedder = Shedder::builder()
    ///     .adaptive_limit(AdaptiveLimit::new().headroom(0.15, 0.4))
    ///     .build()?;
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn headroom(mut self, low: f64, high: f64) -> Self {
        self.headroom = (low, high);
        self
    }

    /// The most rounds (decisions) between unprompted probes that measure
    /// the knee and the baseline again (each raises the limit by a quarter
    /// for a round, then cuts it by a third for one). The first comes 8
    /// rounds after the first knee is found, and the spacing grows fourfold
    /// up to this. A probe waits for an overload clearly beyond the service
    /// (slow start's exit also for a few rounds found overloaded), but no
    /// longer than this many rounds under load since the last probe (or the
    /// start). Default 300; at least 10.
    ///
    /// ```
    /// use shed_core::{AdaptiveLimit, Shedder};
    ///
    /// // Capacity that moves often (autoscaled dependencies): measure again sooner.
    /// let shedder = Shedder::builder()
    ///     .adaptive_limit(AdaptiveLimit::new().refresh_rounds(60))
    ///     .build()?;
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn refresh_rounds(mut self, rounds: u32) -> Self {
        self.refresh_rounds = rounds;
        self
    }

    /// Checks every setting.
    pub(crate) fn validate(&self) -> Result<Settings, ConfigError> {
        let fail = |problem: String| Err(ConfigError::new("adaptive_limit", problem));
        let in_range = |n: usize| (1..=MAX_LIMIT).contains(&n);
        if !in_range(self.min) || !in_range(self.max) || !in_range(self.initial) {
            return fail(format!(
                "has min {}, initial {}, max {}; set each from 1 to {MAX_LIMIT}",
                self.min, self.initial, self.max
            ));
        }
        if self.min > self.max || !(self.min..=self.max).contains(&self.initial) {
            return fail(format!(
                "has min {}, initial {}, max {}; set them so that min <= initial <= max",
                self.min, self.initial, self.max
            ));
        }
        if !(16..=65_536).contains(&self.round_samples) {
            return fail(format!(
                "has round_samples {}; set it from 16 to 65,536 (64 suits most services)",
                self.round_samples
            ));
        }
        if self.max_round < Duration::from_millis(100)
            || self.max_round > Duration::from_secs(3_600)
        {
            return fail(format!(
                "has max_round {:?}; set it from 100 ms to an hour",
                self.max_round
            ));
        }
        if !(self.inflation > 1.0 && self.inflation <= 100.0) {
            return fail(format!(
                "has inflation {}; set it above 1 and at most 100, for example 1.6",
                self.inflation
            ));
        }
        if !(self.censored_share > 0.0 && self.censored_share <= 1.0) {
            return fail(format!(
                "has censored_share {}; set it in (0, 1], for example 0.1",
                self.censored_share
            ));
        }
        let (low, high) = self.headroom;
        if !(0.0 <= low && low <= high && high <= 1.0) {
            return fail(format!(
                "has headroom ({low}, {high}); set 0 <= low <= high <= 1, for example (0.06, 0.2)"
            ));
        }
        if self.refresh_rounds < 10 {
            return fail(format!(
                "has refresh_rounds {}; set it to at least 10 (300 suits most services)",
                self.refresh_rounds
            ));
        }
        Ok(Settings {
            initial: self.initial as u32,
            min: self.min as u32,
            max: self.max as u32,
            round_samples: self.round_samples,
            max_round: nanos(self.max_round),
            inflation: self.inflation,
            censored_share: self.censored_share,
            headroom: self.headroom,
            refresh_rounds: self.refresh_rounds,
        })
    }
}

/// What the adaptive limit currently believes, in [`Stats`](crate::Stats).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct AdaptiveStats {
    /// `"slow start"`, `"steady"` or `"probing"` (a probe's cut, or the
    /// round a refresh raises the limit for before its probe).
    pub phase: &'static str,
    /// The hold time of a permit when nothing waits inside the service, as
    /// last measured below the knee; until a probe has measured it, the
    /// hold time of the first round the limit bound in. `None` until the
    /// limit has bound: the hold times of a service the limit never held
    /// back (at a quiet hour, health checks) say nothing of it.
    pub baseline: Option<Duration>,
    /// The concurrency the probes found the service to run at once (those
    /// that agree are averaged).
    pub knee: Option<f64>,
    /// Permits released per second while the service is kept full (smoothed).
    pub delivery_rate: Option<f64>,
    /// The headroom currently kept above the knee (a fraction).
    pub headroom: f64,
    /// Probes run since the engine was built.
    pub probes: u64,
    /// Times the limit was cut for censored permits since the engine was
    /// built.
    pub back_offs: u64,
}

impl From<estimator::Beliefs> for AdaptiveStats {
    fn from(beliefs: estimator::Beliefs) -> Self {
        AdaptiveStats {
            phase: beliefs.phase,
            baseline: beliefs.baseline,
            knee: beliefs.knee,
            delivery_rate: beliefs.delivery_rate,
            headroom: beliefs.headroom,
            probes: beliefs.probes,
            back_offs: beliefs.back_offs,
        }
    }
}

/// Checks the bounds of an adaptive limit given to
/// [`Shedder::set_limit_bounds`](crate::Shedder::set_limit_bounds), with the
/// builder's rule (each from 1 to [`MAX_LIMIT`], `min <= max`).
pub(crate) fn check_bounds(min: usize, max: usize) -> Result<(u32, u32), ConfigError> {
    let in_range = |n: usize| (1..=MAX_LIMIT).contains(&n);
    let problem = if !in_range(min) || !in_range(max) {
        format!("are min {min}, max {max}; set each from 1 to {MAX_LIMIT}")
    } else if min > max {
        format!("are min {min}, max {max}; set them so that min <= max")
    } else {
        return Ok((min as u32, max as u32));
    };
    Err(ConfigError::new("limit_bounds", problem))
}
