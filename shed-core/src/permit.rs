//! The permit: a held slot, returned exactly once.
//!
//! ```
//! use shed_core::{Arrival, Class, Shedder};
//!
//! let shedder = Shedder::builder().limit(1).build()?;
//! let permit = shedder.try_admit(&Arrival::new(Class::Critical)).unwrap();
//! assert_eq!(shedder.in_flight(), 1);
//! drop(permit); // the slot is back, and the next waiter (if any) has it
//! assert_eq!(shedder.in_flight(), 0);
//! # Ok::<(), shed_core::ConfigError>(())
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::Engine;
use crate::limit::Ending;
use crate::{Class, Rank};

/// A slot of the concurrency limit, held while a request is served.
///
/// Dropping the permit returns the slot, exactly once, however the work ends:
/// completion, error, panic (drop runs during unwinding) or cancellation. The
/// slot goes straight to the longest waiting request (in an overload, the
/// most important), and the time the permit was held feeds the controller's
/// measure of service time.
#[must_use = "the slot is returned as soon as the permit is dropped"]
pub struct Permit {
    engine: Arc<Engine>,
    rank: Rank,
    started_at: u64,
    /// How long it waited for its slot, nanoseconds.
    queued: u64,
    deadline: Option<u64>,
    /// The adaptive limit's epoch the permit was admitted in.
    epoch: u32,
    ending: Ending,
}

impl Permit {
    /// A slot taken at `started_at` after waiting `queued` nanoseconds.
    pub(crate) fn new(
        engine: Arc<Engine>,
        rank: Rank,
        started_at: u64,
        queued: u64,
        deadline: Option<u64>,
    ) -> Permit {
        Permit {
            epoch: engine.limit_epoch(),
            engine,
            rank,
            started_at,
            queued,
            deadline,
            ending: Ending::Completed,
        }
    }

    /// Gives the slot back for a request whose caller gave up before its work
    /// finished (a client that hung up, a cancelled future). Dropping the
    /// permit instead says the work finished.
    ///
    /// The difference matters to the adaptive limit: the permit's hold time
    /// is only a lower bound of the work's, and the work may go on downstream
    /// after the caller left, so the sample is counted as censored, a sign of
    /// congestion, never as a fast success.
    ///
    /// ```
    /// use shed_core::{Arrival, Class, Shedder};
    /// let shedder = Shedder::builder().build()?;
    /// let permit = shedder.try_admit(&Arrival::new(Class::Interactive)).unwrap();
    /// permit.abandon(); // the client hung up
    /// assert_eq!(shedder.in_flight(), 0);
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn abandon(mut self) {
        self.ending = Ending::Abandoned;
    }

    /// Gives the slot back for a request whose work was cut off because its
    /// deadline passed. Counted, like [`abandon`](Permit::abandon), as a
    /// censored sample.
    pub fn cut_at_deadline(mut self) {
        self.ending = Ending::DeadlineCut;
    }

    /// The rank the request was admitted at.
    pub fn rank(&self) -> Rank {
        self.rank
    }

    /// The class the request was admitted at.
    pub fn class(&self) -> Class {
        self.rank.class()
    }

    /// The request's deadline, on the engine's clock, if it has one.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline.map(|nanos| self.engine.instant(nanos))
    }

    /// How long the request waited in the queue before it got this slot (zero on the fast path).
    pub fn queued(&self) -> Duration {
        Duration::from_nanos(self.queued)
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.engine.complete(
            self.rank,
            self.started_at,
            self.queued,
            self.epoch,
            self.ending,
        );
    }
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("rank", &self.rank)
            .field("queued", &self.queued())
            .finish_non_exhaustive()
    }
}
