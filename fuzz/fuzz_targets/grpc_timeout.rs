//! `grpc-timeout`: read, and written then read back.
//! The invariants are `shed_fuzz::check::grpc_timeout`'s.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shed_fuzz::check::grpc_timeout(data));
