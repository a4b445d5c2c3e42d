//! `Retry-After` in delay-seconds and all three HTTP-date forms.
//! The invariants are `shed_fuzz::check::retry_after`'s.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shed_fuzz::check::retry_after(data));
