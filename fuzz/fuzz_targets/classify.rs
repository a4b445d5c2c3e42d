//! Classification as a whole, through a real `ShedLayer`.
//! The invariants are `shed_fuzz::check::classify`'s.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shed_fuzz::check::classify(data));
