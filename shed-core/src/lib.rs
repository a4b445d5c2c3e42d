//! The admission engine of shed: decide, in well under a microsecond, whether a
//! request is served now, waits briefly for a slot, or is turned away with an
//! answer that tells the caller when to come back.
//!
//! No HTTP framework, no async runtime: `shed-axum` mounts this engine as tower
//! middleware, and anything else can call it directly.
//!
//! ```
//! use shed_core::{Admission, Arrival, Class, Shedder};
//!
//! let shedder = Shedder::builder().limit(1).queue_capacity(0).build()?;
//!
//! let served = shedder.admit(&Arrival::new(Class::Critical));
//! assert!(matches!(served, Admission::Admitted(_)));
//!
//! // The only slot is busy and nothing may wait: a batch retry is refused,
//! // with a computed Retry-After.
//! let refused = shedder.admit(&Arrival::new(Class::Batch).with_attempt(2));
//! let Admission::Rejected(rejection) = refused else { unreachable!() };
//! assert!(rejection.retry_after().unwrap().as_secs() >= 1);
//! # Ok::<(), shed_core::ConfigError>(())
//! ```
//!
//! The journey of a request: [`Arrival`] (class, attempt, deadline, cohort) →
//! [`Shedder::admit`] judges it at the door against the deadline and the
//! [`Level`] → [`Admission::Admitted`] with a [`Permit`], or
//! [`Admission::Queued`] with a [`Waiter`] that resolves to one, or
//! [`Admission::Rejected`] with a [`Rejection`] and its [`RetryAfter`] →
//! dropping the permit returns the slot to the longest waiting request (in an
//! overload, the most important) and feeds the controller.
//!
//! # Metrics
//!
//! With the `metrics` feature the engine reports through the [`metrics`
//! facade](https://docs.rs/metrics), so the application's exporter decides
//! where the figures go (Prometheus, StatsD, OpenTelemetry). The engine
//! registers its instruments when it is built: install the recorder first.
//! Gauges are set where a controller interval closes and whenever
//! [`Shedder::stats`] is read, with the stats' idle rule; a scrape handler
//! that reads the stats first reports an idle service as not shedding.
//!
//! | name | kind | unit | labels | what |
//! |---|---|---|---|---|
//! | `shed.requests` | counter | requests | `class`, `outcome` | requests by class and outcome: `admitted`, `queued`, `shed`, `shed_by_deadline`, `queue_full`, `dropped_from_queue`, `expired`, `completed`, `abandoned`, `cut_at_deadline`; a request counts at each step it takes (queued, then admitted, then completed) |
//! | `shed.shadow.requests` | counter | requests | `class`, `outcome` | in [shadow mode](Mode::Shadow), what enforcing mode would have done with requests it served: `queued`, `shed`, `shed_by_deadline`, `queue_full`, `dropped_from_queue`, `expired`, `cut_at_deadline` |
//! | `shed.requests.bypassed` | counter | requests | | requests let through unjudged ([`Shedder::count_bypassed`]) |
//! | `shed.limit` | gauge | requests | | the concurrency limit |
//! | `shed.in_flight` | gauge | requests | | requests holding a slot |
//! | `shed.queue.length` | gauge | requests | `class`, `attempt` (`original`, `retry`) | requests waiting for a slot, per rank |
//! | `shed.admission.level` | gauge | 1 | | the admission [`Level`]; 0 sheds nothing |
//! | `shed.queue.duration` | histogram | seconds | `class` | how long each finished request waited for its slot |
//! | `shed.service.duration` | histogram | seconds | `class` | how long each finished request held its slot |
//!
//! `class` is one of `background`, `batch`, `interactive`, `critical`.
//! Prometheus exporters write the dots as underscores (`shed_requests`).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod admission;
mod arrival;
mod class;
mod clock;
mod cohort;
pub mod config;
mod controller;
mod engine;
mod histogram;
mod instruments;
mod level;
mod limit;
mod mode;
mod offered_load;
mod patience;
mod permit;
mod queue;
mod random;
mod rehearsal;
mod reject;
pub mod retry;
mod retry_after;
mod service_time;
mod shedder;
mod shedding_log;
mod slots;
mod stats;
mod sync;
mod waiter;
mod wake_list;
pub mod wire;

pub use admission::{Admission, Admit};
pub use arrival::Arrival;
pub use class::{Class, Rank};
pub use clock::{Clock, ManualClock, MonotonicClock};
pub use cohort::Cohort;
pub use config::{ConfigError, ShedderBuilder};
pub use level::Level;
pub use limit::{AdaptiveLimit, AdaptiveStats};
pub use mode::{Mode, ParseModeError};
pub use permit::Permit;
pub use reject::{RejectReason, Rejection, RetryAfter};
pub use shedder::Shedder;
pub use stats::{ClassStats, Stats, WouldStats};
pub use waiter::Waiter;

/// The crate's README, compiled and run as a doctest so it cannot rot.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
