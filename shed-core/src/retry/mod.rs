//! The client half of overload: a shared retry budget and a pushback-aware,
//! deadline-aware retrier, deterministic and free of any runtime.
//!
//! ```
//! use std::time::Duration;
//! use shed_core::retry::{AttemptOutcome, Decision, Pushback, Reason, Replay, Retrier};
//!
//! // One retrier for the whole client: its clones share one budget.
//! let retrier = Retrier::builder().jitter(|| 0.5).build()?;
//!
//! let mut op = retrier.begin(Replay::Safe); // the original is sent at 0 ms
//! // ... a 503 arrives at 40 ms: back off for 50 ms (half of [0, 100 ms)).
//! let retry = retrier.decide(&mut op, AttemptOutcome::Status(503), Pushback::Absent, Duration::from_millis(40));
//! assert_eq!(retry, Decision::Retry { attempt: 2, delay: Duration::from_millis(50) });
//! // ... a 429 with `Retry-After: 1` at 120 ms: the pushback is a floor.
//! let retry = retrier.decide(&mut op, AttemptOutcome::Status(429), Pushback::Wait(Duration::from_secs(1)), Duration::from_millis(120));
//! assert_eq!(retry, Decision::Retry { attempt: 3, delay: Duration::from_secs(1) });
//! // ... a 200 at 1,140 ms.
//! let done = retrier.decide(&mut op, AttemptOutcome::Status(200), Pushback::Absent, Duration::from_millis(1_140));
//! assert_eq!(done, Decision::Stop(Reason::Succeeded));
//! # Ok::<(), shed_core::ConfigError>(())
//! ```
//!
//! # The pieces
//!
//! - [`Retrier`], built by [`RetrierBuilder`]: the per-operation state
//!   machine ([`Operation`]); [`Decision`] and [`Reason`]: what it decided
//!   and why; [`RetryStats`]: counters of originals, retries and denials by
//!   reason.
//! - [`RetryBudget`]: retries earned by originals, shared (`Arc`, lock-free).
//! - [`Backoff`] and [`Jitter`]: full-jitter exponential backoff with
//!   injectable randomness.
//! - [`Pushback`]: `Retry-After` (seconds or HTTP-date), `retry-after-ms`,
//!   `grpc-retry-pushback-ms`.
//! - [`RetryableSet`], [`AttemptOutcome`], [`Replay`]: what may be retried
//!   at all, HTTP statuses and gRPC status codes alike.
//!
//! Time is passed in by the caller (time since the original was sent), so the
//! retrier is a pure function of its inputs plus the budget: tests drive it
//! with a manual clock and never sleep. The tower retry policy in
//! `shed-axum` (`shed_axum::client`) drives it for HTTP and gRPC clients.
//!
//! # The bound
//!
//! One budget with an initial balance of `I` retries, over `O` originals,
//! grants at most
//!
//! ```text
//! R <= I + floor(O / 10)
//! ```
//!
//! retries (fewer when credit is discarded at the cap). With the defaults
//! (`I` = 2, cap 4), 100 operations against a complete outage make at most
//! 112 attempts in all, where three attempts per operation with no budget
//! would make 300: the outage sees 1.12 times its normal load, not 3 times.
//! Every retry is also bounded per operation by the attempt cap and the
//! deadline, and is never sent before the server's pushback has elapsed.
//!
//! # Per-process or fleet-wide
//!
//! A budget bounds the retries of the processes that share it. With `N`
//! client processes each holding its own budget, the initial balances add
//! up (`N * I` retries that need no originals at all), and every restart
//! refills a process's balance. That is fine for a handful of long-lived
//! clients. When the fleet is large compared with its traffic (`N * I` is
//! not small next to `O / 10`), when clients are short-lived (serverless,
//! batch jobs, crash loops), or when many processes hit one fragile
//! dependency, enforce the budget fleet-wide instead: share it through the
//! proxy or sidecar all calls pass through, or lower `I` to 0 so that only
//! traffic earns retries.

mod backoff;
mod budget;
mod builder;
mod deadline;
mod decision;
mod eligibility;
mod jitter;
mod operation;
mod outcome;
mod pushback;
mod retrier;
mod stats;

pub use backoff::Backoff;
pub use budget::RetryBudget;
pub use builder::RetrierBuilder;
pub use decision::{Decision, Reason};
pub use eligibility::{Replay, RetryableSet};
pub use jitter::{Jitter, SplitMix64};
pub use operation::Operation;
pub use outcome::AttemptOutcome;
pub use pushback::{Pushback, MAX_PUSHBACK};
pub use retrier::Retrier;
pub use stats::RetryStats;
