//! `grpc-retry-pushback-ms` (gRFC A6).
//! The invariants are `shed_fuzz::check::grpc_retry_pushback_ms`'s.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shed_fuzz::check::grpc_retry_pushback_ms(data));
