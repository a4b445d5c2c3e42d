//! `connect-timeout-ms` and `x-envoy-expected-rq-timeout-ms`.
//! The invariants are `shed_fuzz::check::timeout_ms`'s.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shed_fuzz::check::timeout_ms(data));
