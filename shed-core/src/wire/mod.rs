//! The wire: the header names shed reads and writes, their strict parsers,
//! and the `grpc-timeout` writer, shared by the server half (shed-axum's
//! layer), the client half (its retry policy) and anything else that speaks
//! to shed.
//!
//! ```
//! use std::time::Duration;
//! use shed_core::wire::{self, format_grpc_timeout, GRPC_TIMEOUT_HEADER};
//!
//! // A client forwards what is left of its deadline...
//! let value = format_grpc_timeout(Duration::from_millis(1_450));
//! assert_eq!((GRPC_TIMEOUT_HEADER, value.as_str()), ("grpc-timeout", "1450000u"));
//! // ...and the server reads it back, never longer than was sent.
//! assert_eq!(wire::grpc_timeout(value.as_ref()), Some(Duration::from_millis(1_450)));
//! // Malformed values are absent, never zero.
//! assert_eq!(wire::grpc_timeout(b"1450 ms"), None);
//! ```
//!
//! | header | parser | result |
//! |---|---|---|
//! | `grpc-timeout` | [`grpc_timeout`] (writer: [`format_grpc_timeout`]) | a deadline |
//! | `connect-timeout-ms`, `x-envoy-expected-rq-timeout-ms` | [`timeout_ms`] | a deadline |
//! | `shed-attempt`, `grpc-previous-rpc-attempts`, `x-envoy-attempt-count`, `x-stainless-retry-count` | [`count`] | a number |
//! | `amz-sdk-request` | [`amz_sdk_attempt`] | an attempt number |
//! | `Retry-After` | [`retry_after`] | a [`Delay`] |
//! | `retry-after-ms`, `grpc-retry-pushback-ms` | [`delay_ms`] | a [`Delay`] |
//! | `shed-load` | [`load_report`] (writer: [`format_load_report`]) | a [`LoadReport`] |
//!
//! # Strictness
//!
//! Every parser takes the raw bytes of one header value and returns `None`
//! for anything it does not fully understand: empty values, stray
//! characters, signs, too many digits, bad units, non-ASCII. A malformed
//! header is to be treated as absent (or, where a protocol says so, as a
//! refusal), never as an error answer, and never as a zero that would mean
//! "retry now" or "no time left". A value too large to count is refused
//! (deadline parsers) or kept apart as [`Delay::TooLong`] (delay hints),
//! never wrapped around.
//!
//! No parser panics or allocates, whatever the bytes; each is exercised by a
//! fuzz target (`fuzz/` at the repository root) whose invariants a normal
//! `cargo test` replays over the committed corpus.

mod attempt;
mod deadline;
mod delay;
mod load;
mod names;
mod number;

pub use attempt::{amz_sdk_attempt, count};
pub use deadline::{format_grpc_timeout, grpc_timeout, timeout_ms, GrpcTimeout};
pub use delay::{delay_ms, retry_after, Delay};
pub use load::{format_load_report, load_report, LoadReport, LoadReportText};
pub use names::{
    AMZ_SDK_REQUEST_HEADER, ATTEMPT_HEADER, CONNECT_TIMEOUT_MS_HEADER, ENVOY_ATTEMPT_COUNT_HEADER,
    ENVOY_EXPECTED_RQ_TIMEOUT_MS_HEADER, GRPC_PREVIOUS_RPC_ATTEMPTS_HEADER,
    GRPC_RETRY_PUSHBACK_MS_HEADER, GRPC_TIMEOUT_HEADER, LOAD_HEADER, RETRY_AFTER_HEADER,
    RETRY_AFTER_MS_HEADER, STAINLESS_RETRY_COUNT_HEADER,
};
