//! The engine's handle: build it once, share it by cloning, ask it at the door.
//!
//! ```
//! use shed_core::{Admission, Arrival, Class, Shedder};
//! use std::time::{Duration, Instant};
//!
//! let shedder = Shedder::builder().limit(2).build()?;
//! let arrival = Arrival::new(Class::Interactive)
//!     .with_deadline(Instant::now() + Duration::from_millis(500));
//! match shedder.admit(&arrival) {
//!     Admission::Admitted(permit) => { /* serve, then drop the permit */ drop(permit) }
//!     Admission::Queued(waiter) => { /* await the waiter */ drop(waiter) }
//!     Admission::Rejected(rejection) => println!("429, Retry-After: {:?}", rejection.retry_after()),
//! }
//! # Ok::<(), shed_core::ConfigError>(())
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::engine::Engine;
use crate::wire::LoadReport;
use crate::{
    Admission, Arrival, Class, ConfigError, Level, Mode, Permit, Rank, Rejection, ShedderBuilder,
    Stats,
};

/// Admission control for one service: a concurrency limit, priority wait
/// queues, an admission level driven by queue delay, and computed Retry-After.
///
/// Cloning is cheap and every clone shares one engine, so build it once and
/// hand clones to every route and worker.
///
/// # Memory ordering
///
/// The door and the fast paths use atomics only (see the `slots` and
/// `controller` module docs for each ordering); a `parking_lot` mutex guards
/// the wait queues, taken only by requests that must wait, completions that
/// find somebody waiting, and waiters that leave. Wakers of waiting requests
/// are called after that mutex is released, never under it.
#[derive(Clone)]
pub struct Shedder {
    engine: Arc<Engine>,
}

impl Shedder {
    /// Starts configuring a shedder; see [`ShedderBuilder`] for every setting.
    pub fn builder() -> ShedderBuilder {
        ShedderBuilder::default()
    }

    /// A shedder with `limit` concurrent requests and every other setting at its default.
    ///
    /// # Errors
    ///
    /// When `limit` is 0 or above [`MAX_LIMIT`](crate::config::MAX_LIMIT).
    pub fn with_limit(limit: usize) -> Result<Shedder, ConfigError> {
        Shedder::builder().limit(limit).build()
    }

    pub(crate) fn from_config(config: Config) -> Shedder {
        Shedder {
            engine: Arc::new(Engine::new(config)),
        }
    }

    /// Judges a request at the door: admits it, queues it, or refuses it.
    ///
    /// Never blocks. Admission on the fast path takes no lock, and refusals
    /// decided at the door (a passed or unmeetable deadline, a shed rank, a
    /// full queue) take no lock and allocate nothing. Only a request that
    /// must wait takes the queue lock, to join its queue; a refusal decided
    /// there (its queue filled up, or the level rose, in the meantime) comes
    /// from under that lock. Await the result (it is
    /// [`IntoFuture`](std::future::IntoFuture)) to wait for a slot when queued.
    ///
    /// In [shadow mode](Mode::Shadow) every request is admitted at once,
    /// and what enforcing mode would have done is counted.
    pub fn admit(&self, arrival: &Arrival) -> Admission {
        self.engine.admit(arrival, true)
    }

    /// Like [`admit`](Shedder::admit), but never waits: a request that would
    /// queue is refused with [`RejectReason::QueueFull`](crate::RejectReason::QueueFull).
    /// In [shadow mode](Mode::Shadow) it never refuses.
    ///
    /// # Errors
    ///
    /// The [`Rejection`] when the request is refused.
    pub fn try_admit(&self, arrival: &Arrival) -> Result<Permit, Rejection> {
        match self.engine.admit(arrival, false) {
            Admission::Admitted(permit) => Ok(permit),
            Admission::Rejected(rejection) => Err(rejection),
            Admission::Queued(_) => unreachable!("admit without waiting never queues"),
        }
    }

    /// The engine's clock, read now. Use it to turn a relative deadline into
    /// an instant the engine compares against.
    pub fn now(&self) -> Instant {
        self.engine.clock().now()
    }

    /// The concurrency limit.
    pub fn limit(&self) -> u32 {
        self.engine.limit()
    }

    /// Changes the concurrency limit (an operator's hand). Raising it hands
    /// the new slots to waiters at once; lowering it lets the excess drain as
    /// requests complete. An adaptive limit goes on adapting from the new
    /// value, within its bounds (build with [`ShedderBuilder::limit`] to pin it);
    /// set during the adaptive limit's slow start, it ends slow start: the
    /// value is held until an overload calls for a probe, not doubled.
    ///
    /// # Errors
    ///
    /// When `limit` is 0 or above [`MAX_LIMIT`](crate::config::MAX_LIMIT);
    /// the limit is then unchanged.
    pub fn set_limit(&self, limit: usize) -> Result<(), ConfigError> {
        let limit = crate::config::validate_limit(limit)?;
        self.engine.set_limit(limit);
        Ok(())
    }

    /// Moves the bounds of an adaptive limit (an operator's hand): a limit
    /// outside them is brought inside at once, handing new slots to
    /// waiters or letting the excess drain as requests complete; the limit
    /// goes on adapting within them.
    ///
    /// ```
    /// use shed_core::{AdaptiveLimit, Shedder};
    ///
    /// let shedder = Shedder::builder().adaptive_limit(AdaptiveLimit::new().initial(32)).build()?;
    /// // During an incident: the database behind takes no more than 16 at once.
    /// shedder.set_limit_bounds(1, 16)?;
    /// assert_eq!(shedder.limit(), 16);
    /// assert_eq!(shedder.stats().limit_bounds, (1, 16));
    /// // Checked as the builder checks: an empty range is refused, nothing changes.
    /// assert!(shedder.set_limit_bounds(20, 10).is_err());
    /// assert_eq!(shedder.stats().limit_bounds, (1, 16));
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// When a bound is 0 or above [`MAX_LIMIT`](crate::config::MAX_LIMIT),
    /// when `min > max`, or when the limit is pinned (built with
    /// [`ShedderBuilder::limit`]: change it with [`set_limit`](Shedder::set_limit)).
    pub fn set_limit_bounds(&self, min: usize, max: usize) -> Result<(), ConfigError> {
        let (min, max) = crate::limit::check_bounds(min, max)?;
        if self.engine.set_limit_bounds(min, max) {
            Ok(())
        } else {
            Err(ConfigError::new(
                "limit_bounds",
                "apply to an adaptive limit, and this one is pinned (built with .limit(n)); change it with set_limit".to_string(),
            ))
        }
    }

    /// Changes how long a request of `class` may wait for a slot, from the
    /// next request on; those already waiting keep the wait they were given.
    /// Checked as [`ShedderBuilder::max_wait`] is.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::{Class, Shedder};
    ///
    /// let shedder = Shedder::builder().build()?;
    /// // Batch callers are timing out at 300 ms today: stop holding them longer.
    /// shedder.set_max_wait(Class::Batch, Duration::from_millis(300))?;
    /// assert!(shedder.set_max_wait(Class::Batch, Duration::ZERO).is_err());
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// When `wait` is zero or above an hour; the wait is then unchanged.
    pub fn set_max_wait(&self, class: Class, wait: Duration) -> Result<(), ConfigError> {
        self.engine.config().set_max_wait(class, wait)
    }

    /// Changes the queue delay the controller tolerates, from the interval
    /// that is open on. Checked as [`ShedderBuilder::target_sojourn`] is.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::Shedder;
    ///
    /// let shedder = Shedder::builder().build()?;
    /// shedder.set_target_sojourn(Duration::from_millis(20))?;
    /// // It must stay below the controller's interval (100 ms by default).
    /// assert!(shedder.set_target_sojourn(Duration::from_millis(100)).is_err());
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// When `target` is zero or not below the interval; it is then unchanged.
    pub fn set_target_sojourn(&self, target: Duration) -> Result<(), ConfigError> {
        self.engine.config().set_target_sojourn(target)
    }

    /// Changes the longest Retry-After the engine computes, from the next
    /// refusal on. Checked as [`ShedderBuilder::retry_after_cap`] is.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::Shedder;
    ///
    /// let shedder = Shedder::builder().build()?;
    /// // A deploy is rolling out: tell refused callers to come back within 5 s.
    /// shedder.set_retry_after_cap(Duration::from_secs(5))?;
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// When `cap` is under 1 s or over a day; it is then unchanged.
    pub fn set_retry_after_cap(&self, cap: Duration) -> Result<(), ConfigError> {
        self.engine.config().set_retry_after_cap(cap)
    }

    /// Switches between enforcing decisions and only recording them, from
    /// the next request on; no slot and no queued request is lost (see
    /// [`Mode`] for what happens to requests already admitted or waiting).
    ///
    /// ```
    /// use shed_core::{Arrival, Class, Mode, Shedder};
    ///
    /// let shedder = Shedder::builder().limit(1).mode(Mode::Shadow).build()?;
    /// let served = [(); 3].map(|()| shedder.try_admit(&Arrival::new(Class::Batch)).unwrap());
    /// assert_eq!(shedder.in_flight(), 3);
    /// // A week of reading `would` later: enforce. The two beyond the limit
    /// // finish; new arrivals are held to it.
    /// shedder.set_mode(Mode::Enforcing);
    /// assert!(shedder.try_admit(&Arrival::new(Class::Batch)).is_err());
    /// drop(served);
    /// assert_eq!(shedder.in_flight(), 0);
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn set_mode(&self, mode: Mode) {
        self.engine.set_mode(mode);
    }

    /// Whether the engine enforces its decisions or only records them.
    pub fn mode(&self) -> Mode {
        self.engine.config().live.mode()
    }

    /// Requests holding a slot now.
    pub fn in_flight(&self) -> u32 {
        self.engine.in_flight()
    }

    /// The admission level as the next request would find it: after sixteen
    /// controller intervals without one, the level reads as not shedding
    /// even before a request arrives to reset it.
    pub fn level(&self) -> Level {
        self.engine.level()
    }

    /// Requests waiting in `rank`'s queue now.
    pub fn queue_len(&self, rank: Rank) -> u32 {
        self.engine.queue_len(rank)
    }

    /// What the service's answers state about its load (the `shed-load`
    /// header, [`wire::format_load_report`](crate::wire::format_load_report)):
    /// the [level](Shedder::level), requests in flight, the limit, and the
    /// requests queued in all ranks. One clock read (for the level) and a
    /// few relaxed atomic loads; no lock.
    ///
    /// ```
    /// use shed_core::{Arrival, Class, Level, Shedder};
    ///
    /// let shedder = Shedder::builder().limit(8).build()?;
    /// let _permit = shedder.try_admit(&Arrival::new(Class::Interactive)).unwrap();
    /// let report = shedder.load_report();
    /// assert_eq!((report.level, report.in_flight, report.limit, report.queued), (Level::NONE, 1, 8, 0));
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn load_report(&self) -> LoadReport {
        LoadReport {
            level: self.level(),
            in_flight: self.in_flight(),
            limit: self.limit(),
            queued: Rank::ALL
                .iter()
                .fold(0u32, |sum, rank| sum.saturating_add(self.queue_len(*rank))),
        }
    }

    /// Counts a request its host let through without asking the engine (a
    /// health check, a metrics scrape), so the stats show how much traffic
    /// passed outside the limit. Only the [`Stats::bypassed`] counter moves:
    /// the limit, the level and the controller never see the request, so
    /// cheap answers cannot shorten the service times the engine measures.
    ///
    /// ```
    /// use shed_core::Shedder;
    ///
    /// let shedder = Shedder::builder().build()?;
    /// shedder.count_bypassed();
    /// assert_eq!(shedder.stats().bypassed, 1);
    /// assert_eq!(shedder.in_flight(), 0);
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn count_bypassed(&self) {
        self.engine.count_bypassed();
    }

    /// A snapshot of limits, queues, level and counters. Cheap: a few dozen
    /// relaxed atomic loads, and with an adaptive limit one lock that only
    /// the thread closing a controller interval ever holds.
    pub fn stats(&self) -> Stats {
        self.engine.stats()
    }
}

impl fmt::Debug for Shedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shedder")
            .field("limit", &self.limit())
            .field("in_flight", &self.in_flight())
            .field("level", &self.level())
            .finish_non_exhaustive()
    }
}
