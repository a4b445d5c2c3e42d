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
use std::time::Instant;

use crate::config::Config;
use crate::engine::Engine;
use crate::{
    Admission, Arrival, ConfigError, Level, Permit, Rank, Rejection, ShedderBuilder, Stats,
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
    pub fn admit(&self, arrival: &Arrival) -> Admission {
        self.engine.admit(arrival, true)
    }

    /// Like [`admit`](Shedder::admit), but never waits: a request that would
    /// queue is refused with [`RejectReason::QueueFull`](crate::RejectReason::QueueFull).
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
    /// value, within its bounds (build with [`ShedderBuilder::limit`] to pin it).
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

    /// Requests holding a slot now.
    pub fn in_flight(&self) -> u32 {
        self.engine.in_flight()
    }

    /// The current admission level.
    pub fn level(&self) -> Level {
        self.engine.level()
    }

    /// Requests waiting in `rank`'s queue now.
    pub fn queue_len(&self, rank: Rank) -> u32 {
        self.engine.queue_len(rank)
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
