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
//! A budget counts in tenths of a retry. It starts with `b` tenths (`10 * I`
//! for an initial balance of `I` retries), gains one tenth per original
//! ([`Retrier::begin`]; credit above the cap is discarded), loses ten per
//! retry granted, and never goes below zero. After `O` originals,
//! `b + O - 10 * R >= 0`, so one budget has granted
//!
//! ```text
//! R <= floor((b + O) / 10) = I + floor(O / 10)
//! ```
//!
//! retries (fewer when credit is discarded at the cap). With the defaults
//! (`I` = 2, cap 4), 100 operations against a complete outage make at most
//! 112 attempts in all, where three attempts per operation with no budget
//! would make 300: the outage sees 1.12 times its normal load, not 3 times.
//! Every retry is also bounded per operation by the attempt cap and the
//! deadline, and is never sent before the server's pushback has elapsed.
//!
//! # The bound across a fleet
//!
//! Budgets are not shared between processes, and a process does not keep
//! its balance across a restart: every budget a fleet has ever held starts
//! with its own balance. That is one per client process and one more per
//! restart (and one per retrier a process builds without sharing a budget:
//! count budgets, not processes). Summing the bound over the `K` budgets,
//! budget `j` starting with `b_j` tenths and earning from `O_j` of the
//! fleet's `O` originals:
//!
//! ```text
//! R <= sum over j of floor((b_j + O_j) / 10)
//!   <= floor((sum of b_j + O) / 10)
//! ```
//!
//! The first line is exact: it is what the budgets' accounting guarantees,
//! and it is reached when every budget spends all it earns and discards
//! nothing at its cap. Its floors are per budget, so a process's leftover
//! tenths never fund another's retry: ten processes with nine originals
//! each earn no retry at all. The second line needs only fleet-wide totals
//! and is larger by less than one retry per budget.
//!
//! With `N` processes each holding a budget of `I` retries
//! ([`RetryBudget::new`], [`RetryBudget::default`]: `b_j = 10 * I`) and `S`
//! restarts (`K = N + S`), the second line is
//!
//! ```text
//! R <= N * I + S * I + floor(O / 10)
//! ```
//!
//! With shares of a fleet-wide initial balance `I_F` over `N` processes
//! ([`RetryBudget::fleet_share`]: each starts with `s = floor(10 * I_F / N)`
//! tenths, so `N * s <= 10 * I_F`), it is
//!
//! ```text
//! R <= I_F + floor((S * s + O) / 10)
//! ```
//!
//! Every attempt is either an original or a retry the budget granted, so
//! the attempts `A` the servers see are at most
//!
//! ```text
//! A <= O + R
//! ```
//!
//! reached in a complete outage, where every attempt fails and every
//! operation asks for its retries. Three processes with the default budget
//! (`I` = 2), one of them restarted once, sending 90 originals in all into
//! an outage: `R <= 8 + 9 = 17` and `A <= 107`, against 270 without a budget.
//! `tests/fleet_budget.rs` in the repository runs such a fleet as separate
//! OS processes against a loopback server that refuses everything, and
//! checks the count. Attempts are counted at the retry layer: a transport
//! beneath it that resends on its own adds attempts outside the bound.
//!
//! ```
//! use shed_core::retry::RetryBudget;
//!
//! // Each process's budget grants at most floor((b + O) / 10) retries.
//! fn spend(budget: &RetryBudget, originals: u64) -> u64 {
//!     let mut retries = 0;
//!     for _ in 0..originals {
//!         budget.deposit();
//!         while budget.try_withdraw() {
//!             retries += 1;
//!         }
//!     }
//!     retries
//! }
//! // Three processes and one restart (4 budgets), 90 originals.
//! let retries: u64 = [30, 30, 12, 18]
//!     .into_iter()
//!     .map(|originals| spend(&RetryBudget::new(2, 4), originals))
//!     .sum();
//! assert_eq!(retries, 5 + 5 + 3 + 3, "the exact bound, per budget");
//! assert!(retries <= 3 * 2 + 1 * 2 + 90 / 10, "the fleet-wide bound");
//! ```
//!
//! # Per-process or fleet-wide
//!
//! The per-budget constant is what grows with the fleet: `N * I` retries
//! need no originals at all, and every restart adds `I` more. That is fine
//! for a handful of long-lived clients. When the fleet is large compared
//! with its traffic (`N * I` is not small next to `O / 10`), state the
//! budget for the fleet and give each process its share
//! ([`RetryBudget::fleet_share`]), or lower `I` to 0 so that only traffic
//! earns retries. When clients are short-lived (serverless, batch jobs,
//! crash loops) restarts dominate: start them empty (`I` = 0), or enforce
//! the budget where all calls meet, in the proxy or sidecar they pass
//! through.

mod backoff;
mod budget;
mod builder;
mod deadline;
mod decision;
mod eligibility;
mod fleet;
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
