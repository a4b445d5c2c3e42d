//! Counters and a snapshot of the engine's state, cheap to read while serving.
//!
//! ```
//! use shed_core::{Arrival, Class, Shedder};
//!
//! let shedder = Shedder::builder().limit(4).build()?;
//! let permit = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
//! let stats = shedder.stats();
//! assert_eq!(stats.in_flight, 1);
//! assert_eq!(stats.class(Class::Batch).admitted, 1);
//! drop(permit);
//! assert_eq!(shedder.stats().in_flight, 0);
//! # Ok::<(), shed_core::ConfigError>(())
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::instruments::{Gauges, Instruments};
use crate::{AdaptiveStats, Class, Level, Mode, Rank, RejectReason};

/// What happened to a request at one step of its journey.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Admitted,
    Queued,
    Shed,
    ShedByDeadline,
    QueueFull,
    DroppedFromQueue,
    Expired,
    Completed,
    Abandoned,
    CutAtDeadline,
}

pub(crate) const OUTCOMES: usize = 10;

impl Outcome {
    /// Every outcome, in declaration order (their counters' order).
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) const ALL: [Outcome; OUTCOMES] = [
        Outcome::Admitted,
        Outcome::Queued,
        Outcome::Shed,
        Outcome::ShedByDeadline,
        Outcome::QueueFull,
        Outcome::DroppedFromQueue,
        Outcome::Expired,
        Outcome::Completed,
        Outcome::Abandoned,
        Outcome::CutAtDeadline,
    ];

    /// What shadow mode counts as what enforcing mode would have done.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) const WOULD: [Outcome; 7] = [
        Outcome::Queued,
        Outcome::Shed,
        Outcome::ShedByDeadline,
        Outcome::QueueFull,
        Outcome::DroppedFromQueue,
        Outcome::Expired,
        Outcome::CutAtDeadline,
    ];

    /// A stable `snake_case` label, for metrics.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Outcome::Admitted => "admitted",
            Outcome::Queued => "queued",
            Outcome::Shed => "shed",
            Outcome::ShedByDeadline => "shed_by_deadline",
            Outcome::QueueFull => "queue_full",
            Outcome::DroppedFromQueue => "dropped_from_queue",
            Outcome::Expired => "expired",
            Outcome::Completed => "completed",
            Outcome::Abandoned => "abandoned",
            Outcome::CutAtDeadline => "cut_at_deadline",
        }
    }

    /// The counter a rejection reason lands in.
    pub(crate) const fn of(reason: RejectReason) -> Outcome {
        match reason {
            RejectReason::Shed => Outcome::Shed,
            RejectReason::QueueFull => Outcome::QueueFull,
            RejectReason::QueueTimeout | RejectReason::ShedWhileQueued => Outcome::DroppedFromQueue,
            RejectReason::DeadlinePassed | RejectReason::DeadlineUnmeetable => {
                Outcome::ShedByDeadline
            }
            RejectReason::DeadlineExpiredInQueue | RejectReason::DeadlineExceeded => {
                Outcome::Expired
            }
        }
    }
}

/// Monotonic counters per class and outcome.
///
/// # Memory ordering
///
/// `Relaxed` throughout: each counter is exact, but a snapshot of several is
/// not taken at one instant.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    by_class: [[AtomicU64; OUTCOMES]; Class::COUNT],
    /// What enforcing mode would have done, in shadow mode.
    would: [[AtomicU64; OUTCOMES]; Class::COUNT],
    bypassed: AtomicU64,
    /// The same counts and more, for the application's metrics recorder.
    instruments: Instruments,
}

impl Counters {
    pub(crate) fn count(&self, class: Class, outcome: Outcome) {
        self.by_class[class.index()][outcome as usize].fetch_add(1, Ordering::Relaxed);
        self.instruments.count(class, outcome);
    }

    /// Counts what enforcing mode would have done with a request shadow
    /// mode served.
    pub(crate) fn count_would(&self, class: Class, outcome: Outcome) {
        self.would[class.index()][outcome as usize].fetch_add(1, Ordering::Relaxed);
        self.instruments.count_would(class, outcome);
    }

    pub(crate) fn count_bypassed(&self) {
        self.bypassed.fetch_add(1, Ordering::Relaxed);
        self.instruments.count_bypassed();
    }

    /// A finished request's wait for its slot and the time it held it, in
    /// nanoseconds (for the metrics' histograms).
    pub(crate) fn record_times(&self, class: Class, queued: u64, held: u64) {
        self.instruments.record_times(class, queued, held);
    }

    /// Sets the metrics' gauges to what `gauges` reads (only read when
    /// they are reported).
    pub(crate) fn publish(&self, gauges: impl FnOnce() -> Gauges) {
        self.instruments.set_gauges(gauges);
    }

    /// How many requests of every class ended in `outcome` so far, in
    /// either mode (in shadow mode, what enforcing mode would have done
    /// counts).
    pub(crate) fn tally(&self, outcome: Outcome) -> u64 {
        (self.by_class.iter().chain(&self.would))
            .map(|counts| counts[outcome as usize].load(Ordering::Relaxed))
            .fold(0, u64::saturating_add)
    }

    pub(crate) fn bypassed(&self) -> u64 {
        self.bypassed.load(Ordering::Relaxed)
    }

    pub(crate) fn class(&self, class: Class) -> ClassStats {
        let read = |outcome: Outcome| {
            self.by_class[class.index()][outcome as usize].load(Ordering::Relaxed)
        };
        let would =
            |outcome: Outcome| self.would[class.index()][outcome as usize].load(Ordering::Relaxed);
        ClassStats {
            class,
            admitted: read(Outcome::Admitted),
            queued: read(Outcome::Queued),
            shed: read(Outcome::Shed),
            shed_by_deadline: read(Outcome::ShedByDeadline),
            queue_full: read(Outcome::QueueFull),
            dropped_from_queue: read(Outcome::DroppedFromQueue),
            expired: read(Outcome::Expired),
            completed: read(Outcome::Completed),
            abandoned: read(Outcome::Abandoned),
            cut_at_deadline: read(Outcome::CutAtDeadline),
            would: WouldStats {
                queued: would(Outcome::Queued),
                shed: would(Outcome::Shed),
                shed_by_deadline: would(Outcome::ShedByDeadline),
                queue_full: would(Outcome::QueueFull),
                dropped_from_queue: would(Outcome::DroppedFromQueue),
                expired: would(Outcome::Expired),
                cut_at_deadline: would(Outcome::CutAtDeadline),
            },
        }
    }
}

/// Counts of what happened to one class's requests since the engine was built.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClassStats {
    /// The class counted.
    pub class: Class,
    /// Requests that got a slot, at once or after waiting.
    pub admitted: u64,
    /// Requests that joined a wait queue.
    pub queued: u64,
    /// Requests refused at the door by the admission level.
    pub shed: u64,
    /// Requests refused at the door because their deadline had passed or could not be met.
    pub shed_by_deadline: u64,
    /// Requests refused because their rank's queue was full.
    pub queue_full: u64,
    /// Queued requests dropped unserved: maximum wait exceeded, or shed while waiting.
    pub dropped_from_queue: u64,
    /// Queued requests whose deadline passed while they waited.
    pub expired: u64,
    /// Admitted requests whose work finished (successfully or not).
    pub completed: u64,
    /// Admitted requests whose caller gave up before the work finished
    /// ([`Permit::abandon`](crate::Permit::abandon)).
    pub abandoned: u64,
    /// Admitted requests cut off at their deadline
    /// ([`Permit::cut_at_deadline`](crate::Permit::cut_at_deadline)).
    pub cut_at_deadline: u64,
    /// In [shadow mode](Mode::Shadow), what enforcing mode would have done
    /// with the requests that were served (all counted as admitted above).
    pub would: WouldStats,
}

/// What enforcing mode would have done with one class's requests that
/// [shadow mode](Mode::Shadow) served, since the engine was built: the
/// counters of [`ClassStats`] that shadow mode does not act on, judged as
/// enforcing mode judges (see [`Mode`] for how the shadow engine accounts
/// for them).
///
/// ```
/// use shed_core::{Arrival, Class, Mode, Shedder};
///
/// let shedder = Shedder::builder().limit(1).mode(Mode::Shadow).build()?;
/// let served: Vec<_> = (0..3)
///     .map(|_| shedder.try_admit(&Arrival::new(Class::Batch)).unwrap())
///     .collect();
/// let batch = *shedder.stats().class(Class::Batch);
/// assert_eq!(batch.admitted, 3);
/// assert_eq!(batch.would.queue_full, 2); // no room to wait: `try_admit`
/// assert_eq!(batch.would.rejected(), 2);
/// # drop(served);
/// # Ok::<(), shed_core::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WouldStats {
    /// Requests that would have waited for a slot.
    pub queued: u64,
    /// Requests the admission level would have refused at the door.
    pub shed: u64,
    /// Requests that would have been refused at the door for their deadline.
    pub shed_by_deadline: u64,
    /// Requests that would have been refused for a full queue (or a wait
    /// longer than callers wait).
    pub queue_full: u64,
    /// Requests that would have been dropped while waiting: maximum wait
    /// exceeded, or shed as the level rose.
    pub dropped_from_queue: u64,
    /// Requests whose deadline would have passed while they waited.
    pub expired: u64,
    /// Requests whose deadline passed while they were served: enforcing,
    /// the middleware would have cut them off.
    pub cut_at_deadline: u64,
}

impl WouldStats {
    /// Every refusal enforcing mode would have made, whatever the reason
    /// (as [`ClassStats::rejected`]: cuts at the deadline not included).
    pub fn rejected(&self) -> u64 {
        self.shed + self.shed_by_deadline + self.queue_full + self.dropped_from_queue + self.expired
    }
}

impl ClassStats {
    /// Every refusal of this class, whatever the reason.
    pub fn rejected(&self) -> u64 {
        self.shed + self.shed_by_deadline + self.queue_full + self.dropped_from_queue + self.expired
    }
}

/// A snapshot of the engine, from [`Shedder::stats`](crate::Shedder::stats).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Stats {
    /// The concurrency limit now.
    pub limit: u32,
    /// The lowest and highest the limit may be: its bounds when adaptive,
    /// the limit twice when pinned.
    pub limit_bounds: (u32, u32),
    /// What the adaptive limit believes; `None` when the limit is pinned.
    pub adaptive: Option<AdaptiveStats>,
    /// Requests holding a slot now.
    pub in_flight: u32,
    /// Requests waiting, per rank in shed order ([`Rank::ALL`]).
    pub queued: [u32; Rank::COUNT],
    /// The admission level, as the next request would find it (an idle
    /// service reads as not shedding: see [`Shedder::level`](crate::Shedder::level)).
    pub level: Level,
    /// The worst standing queue of the last controller interval: the largest
    /// of the ranks' shortest waits (zero for a rank whose requests took a
    /// slot without waiting); `None` when no request came.
    pub recent_sojourn: Option<Duration>,
    /// Measured completions per second at full concurrency, once known.
    pub drain_rate: Option<f64>,
    /// Counters per class, least important first ([`Class::ALL`]).
    pub classes: [ClassStats; Class::COUNT],
    /// Requests let through unjudged, in no class (health checks, metrics
    /// scrapes: see [`Shedder::count_bypassed`](crate::Shedder::count_bypassed)).
    pub bypassed: u64,
    /// Whether decisions are enforced or only recorded ([`Mode`]).
    pub mode: Mode,
}

impl Stats {
    /// The counters of one class.
    pub fn class(&self, class: Class) -> &ClassStats {
        &self.classes[class.index()]
    }

    /// Requests waiting in all queues.
    pub fn queue_len(&self) -> u32 {
        self.queued.iter().sum()
    }
}
