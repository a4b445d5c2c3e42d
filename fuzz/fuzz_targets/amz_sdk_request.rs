//! `amz-sdk-request: attempt=N; max=M`.
//! The invariants are `shed_fuzz::check::amz_sdk_request`'s.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shed_fuzz::check::amz_sdk_request(data));
