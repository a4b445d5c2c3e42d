//! What the engine knows about a request when it arrives at the door.
//!
//! ```
//! use shed_core::{Arrival, Class};
//! use std::time::{Duration, Instant};
//!
//! let arrival = Arrival::new(Class::Batch)
//!     .with_attempt(2)
//!     .with_deadline(Instant::now() + Duration::from_millis(300))
//!     .with_cohort_key(0xfeed);
//! assert!(arrival.is_retry());
//! ```

use std::time::{Duration, Instant};

use crate::{Class, Cohort, Rank};

/// A request's class, attempt number, deadline and cohort, as judged at the door.
///
/// Plain data: cheap to build and copy, no allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    class: Class,
    attempt: u32,
    deadline: DeadlineSource,
    cohort: CohortSource,
}

/// How an arrival's deadline is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DeadlineSource {
    /// No deadline.
    None,
    /// An instant on the engine's clock.
    At(Instant),
    /// A time from the moment the engine judges the request.
    After(Duration),
}

/// How an arrival's cohort is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CohortSource {
    /// Spread evenly (no caller key).
    Spread,
    /// Hashed from a caller key, rotated hourly.
    Key(u64),
    /// Chosen by the caller of the engine.
    Fixed(Cohort),
}

impl Arrival {
    /// A first attempt of `class`, with no deadline and no caller key.
    pub const fn new(class: Class) -> Arrival {
        Arrival {
            class,
            attempt: 1,
            deadline: DeadlineSource::None,
            cohort: CohortSource::Spread,
        }
    }

    /// Sets the attempt number: 1 for the original, 2 and up for retries (0 counts as 1).
    pub const fn with_attempt(mut self, attempt: u32) -> Arrival {
        self.attempt = if attempt == 0 { 1 } else { attempt };
        self
    }

    /// Sets the instant after which an answer is useless to the caller.
    pub const fn with_deadline(mut self, deadline: Instant) -> Arrival {
        self.deadline = DeadlineSource::At(deadline);
        self
    }

    /// Sets the deadline as a time from the moment the engine judges the
    /// request. The engine turns it into an instant with the
    /// clock read it makes anyway (see [`Permit::deadline`](crate::Permit::deadline)),
    /// so a host that only has a relative timeout (a `grpc-timeout` header)
    /// need not read the clock itself.
    ///
    /// ```
    /// use shed_core::{Arrival, Class, Shedder};
    /// use std::time::Duration;
    ///
    /// let shedder = Shedder::with_limit(1)?;
    /// let arrival = Arrival::new(Class::Interactive).with_timeout(Duration::from_millis(250));
    /// let permit = shedder.try_admit(&arrival).unwrap();
    /// assert!(permit.deadline().is_some());
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub const fn with_timeout(mut self, timeout: Duration) -> Arrival {
        self.deadline = DeadlineSource::After(timeout);
        self
    }

    /// Places the request by a caller key (user, tenant, API key, address hash):
    /// one key keeps one cohort for an hour.
    pub const fn with_cohort_key(mut self, key: u64) -> Arrival {
        self.cohort = CohortSource::Key(key);
        self
    }

    /// Places the request in an exact cohort.
    pub const fn with_cohort(mut self, cohort: Cohort) -> Arrival {
        self.cohort = CohortSource::Fixed(cohort);
        self
    }

    /// The request's class.
    pub const fn class(&self) -> Class {
        self.class
    }

    /// The attempt number (1 = original).
    pub const fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Whether this attempt is a retry.
    pub const fn is_retry(&self) -> bool {
        self.attempt > 1
    }

    /// The request's place in the shed order.
    pub const fn rank(&self) -> Rank {
        Rank::of(self.class, self.attempt)
    }

    pub(crate) const fn deadline_source(&self) -> DeadlineSource {
        self.deadline
    }

    pub(crate) const fn cohort_source(&self) -> CohortSource {
        self.cohort
    }
}

impl Default for Arrival {
    fn default() -> Self {
        Arrival::new(Class::default())
    }
}
