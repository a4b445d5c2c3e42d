//! `retry-after-ms`.
//! The invariants are `shed_fuzz::check::retry_after_ms`'s.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shed_fuzz::check::retry_after_ms(data));
