//! The invariants of shed's wire parsers, one check per fuzz target.
//!
//! Each check takes the raw bytes of one fuzz input, runs a parser (or, for
//! [`classify`], a whole `ShedLayer`) on them, and panics when an invariant
//! breaks. The same functions run in two places:
//!
//! - the libFuzzer targets in `fuzz/fuzz_targets/` (nightly,
//!   `cargo +nightly fuzz run <target>`), and
//! - `tests/fuzz_corpus.rs` in the root package (stable, `cargo test`),
//!   which includes this module by path and replays every committed input
//!   under `fuzz/corpus/<target>/` through them, so CI guards the
//!   invariants without a fuzzer.
//!
//! Only the standard library and crates both of those already depend on
//! (shed-core, shed-axum, http, tower, tokio) are used here.

mod attempt;
mod classify;
mod date;
mod deadline;
mod input;
mod load;
mod pushback;
mod reference;

pub use attempt::{amz_sdk_request, retry_count};
pub use classify::classify;
pub use deadline::{grpc_timeout, timeout_ms};
pub use load::load_report;
pub use pushback::{grpc_retry_pushback_ms, retry_after, retry_after_ms};

/// A check: panics when the input breaks an invariant.
pub type Check = fn(&[u8]);

/// Every target: its name (the fuzz target's and its corpus directory's)
/// and its check.
pub const TARGETS: [(&str, Check); 9] = [
    ("grpc_timeout", grpc_timeout),
    ("timeout_ms", timeout_ms),
    ("retry_count", retry_count),
    ("amz_sdk_request", amz_sdk_request),
    ("retry_after", retry_after),
    ("retry_after_ms", retry_after_ms),
    ("grpc_retry_pushback_ms", grpc_retry_pushback_ms),
    ("classify", classify),
    ("load_report", load_report),
];
