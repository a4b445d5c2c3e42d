//! `shed-load`, the load feedback on a shed server's answers.
//! The invariants are `shed_fuzz::check::load_report`'s.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shed_fuzz::check::load_report(data));
