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
use crate::{Class, Mode, Rank};

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
    held: Held,
}

/// What the engine reads when a permit's slot comes back.
#[derive(Debug)]
pub(crate) struct Held {
    pub(crate) rank: Rank,
    pub(crate) started_at: u64,
    /// How long it waited for its slot, nanoseconds.
    pub(crate) queued: u64,
    pub(crate) deadline: Option<u64>,
    /// The adaptive limit's epoch the permit was admitted in.
    pub(crate) epoch: u32,
    pub(crate) ending: Ending,
    /// How the engine gave it (see [`Mode`]).
    pub(crate) given: Given,
}

/// How a permit was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Given {
    /// By an enforcing engine, within the limit.
    Enforced,
    /// By a shadow engine, within the limit, the service within it too.
    Shadow,
    /// By a shadow engine, within the limit, while the service ran beyond
    /// it (other permits were overdrafts).
    ShadowOverdrawn,
    /// By a shadow engine, beyond the limit.
    ShadowOverdraft,
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
            held: Held {
                epoch: engine.limit_epoch(),
                rank,
                started_at,
                queued,
                deadline,
                ending: Ending::Completed,
                given: Given::Enforced,
            },
            engine,
        }
    }

    /// Marks a permit a shadow engine gave.
    pub(crate) fn in_shadow(mut self, given: Given) -> Permit {
        self.held.given = given;
        self
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
        self.held.ending = Ending::Abandoned;
    }

    /// Gives the slot back for a request whose work was cut off because its
    /// deadline passed. Counted, like [`abandon`](Permit::abandon), as a
    /// censored sample.
    pub fn cut_at_deadline(mut self) {
        self.held.ending = Ending::DeadlineCut;
    }

    /// The rank the request was admitted at.
    pub fn rank(&self) -> Rank {
        self.held.rank
    }

    /// The class the request was admitted at.
    pub fn class(&self) -> Class {
        self.held.rank.class()
    }

    /// The request's deadline, on the engine's clock, if it has one.
    pub fn deadline(&self) -> Option<Instant> {
        self.held.deadline.map(|nanos| self.engine.instant(nanos))
    }

    /// The mode of the engine that gave it. A middleware serves a request
    /// whose permit was given in [`Mode::Shadow`] untouched: it cuts
    /// nothing at the deadline.
    ///
    /// ```
    /// use shed_core::{Arrival, Class, Mode, Shedder};
    /// let shedder = Shedder::builder().mode(Mode::Shadow).build()?;
    /// let permit = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
    /// assert_eq!(permit.mode(), Mode::Shadow);
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn mode(&self) -> Mode {
        match self.held.given {
            Given::Enforced => Mode::Enforcing,
            Given::Shadow | Given::ShadowOverdrawn | Given::ShadowOverdraft => Mode::Shadow,
        }
    }

    /// How long the request waited in the queue before it got this slot (zero on the fast path).
    pub fn queued(&self) -> Duration {
        Duration::from_nanos(self.held.queued)
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.engine.complete(&self.held);
    }
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("rank", &self.held.rank)
            .field("queued", &self.queued())
            .finish_non_exhaustive()
    }
}
