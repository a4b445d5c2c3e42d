//! The retry counts: `shed-attempt`, `grpc-previous-rpc-attempts`, `x-envoy-attempt-count`, `x-stainless-retry-count`.
//! The invariants are `shed_fuzz::check::retry_count`'s.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shed_fuzz::check::retry_count(data));
