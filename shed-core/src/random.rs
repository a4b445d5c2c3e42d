//! A per-thread xorshift generator for jitter and cohort spreading.
//!
//! Not cryptographic; it only has to be cheap, lock-free and well spread.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

static SEED: AtomicU64 = AtomicU64::new(0x2545_F491_4F6C_DD1D);

thread_local! {
    static STATE: Cell<u64> = Cell::new(seed());
}

fn seed() -> u64 {
    // Each thread takes a distinct odd seed; xorshift never leaves a non-zero state.
    SEED.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed) | 1
}

/// The next pseudo-random `u64` of this thread.
pub(crate) fn next_u64() -> u64 {
    STATE.with(|state| {
        let mut x = state.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        state.set(x);
        x
    })
}
