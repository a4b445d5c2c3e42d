//! The crate's one pseudo-random generator, SplitMix64: a state that
//! advances by a fixed odd step, each value the state scrambled by a
//! bijection on `u64`. Not cryptographic; cheap, lock-free and well spread.
//!
//! The engine draws from a per-thread state ([`next_u64`]: Retry-After
//! jitter, the cohorts of requests without a caller key), so the reject
//! path touches nothing shared. A retry client draws from a [`SplitMix64`]
//! of its own, which a test can seed. The scrambling alone, [`mix`], also
//! places a caller key in its cohort: a hash, not a draw.

use std::cell::Cell;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::LazyLock;

/// The step the state advances by: 2^64 divided by the golden ratio, odd.
pub(crate) const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's value for `state`: the state one step on, scrambled. A
/// bijection on `u64` in which every input bit flips about half the output
/// bits, so it serves as a hash too.
pub(crate) const fn mix(state: u64) -> u64 {
    let mut z = state.wrapping_add(GAMMA);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A small, lock-free `SplitMix64` generator: good enough spread for jitter,
/// not for anything secret.
///
/// Each call advances one shared atomic counter (`Relaxed` is enough: only
/// that counter is involved), so threads drawing at once still get distinct
/// values.
///
/// ```
/// use shed_core::retry::{Jitter, SplitMix64};
///
/// let a = SplitMix64::new(1);
/// let b = SplitMix64::new(1);
/// assert_eq!(a.unit(), b.unit()); // same seed, same sequence
/// ```
#[derive(Debug)]
pub struct SplitMix64 {
    state: AtomicU64,
}

impl SplitMix64 {
    /// A generator with a fixed seed, for reproducible runs.
    ///
    /// ```
    /// use shed_core::retry::{Jitter, SplitMix64};
    ///
    /// assert!(SplitMix64::new(42).unit() < 1.0);
    /// ```
    #[must_use]
    pub const fn new(seed: u64) -> Self {
        Self {
            state: AtomicU64::new(seed),
        }
    }

    /// A generator seeded from the process's random hash keys, so clients in
    /// different processes do not jitter in step.
    ///
    /// ```
    /// use shed_core::retry::{Jitter, SplitMix64};
    ///
    /// assert!(SplitMix64::from_entropy().unit() < 1.0);
    /// ```
    #[must_use]
    pub fn from_entropy() -> Self {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u64(GAMMA);
        Self::new(hasher.finish())
    }

    /// The next raw 64-bit value.
    ///
    /// ```
    /// use shed_core::retry::SplitMix64;
    ///
    /// let generator = SplitMix64::new(0);
    /// assert_ne!(generator.next_u64(), generator.next_u64());
    /// ```
    pub fn next_u64(&self) -> u64 {
        mix(self.state.fetch_add(GAMMA, Ordering::Relaxed))
    }
}

impl Default for SplitMix64 {
    fn default() -> Self {
        Self::from_entropy()
    }
}

/// Where each thread's state starts: a value of this generator, so no two
/// threads draw the same sequence, seeded from the process's random hash
/// keys, so no two processes do (servers of a fleet refused at once must
/// not hand out the same Retry-After jitter).
static THREAD_SEEDS: LazyLock<SplitMix64> = LazyLock::new(SplitMix64::from_entropy);

thread_local! {
    static THREAD_STATE: Cell<u64> = Cell::new(THREAD_SEEDS.next_u64());
}

/// The next value of this thread's generator: the same steps as
/// [`SplitMix64::next_u64`], on a state no other thread touches.
pub(crate) fn next_u64() -> u64 {
    THREAD_STATE.with(|state| {
        let current = state.get();
        state.set(current.wrapping_add(GAMMA));
        mix(current)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_draws_the_sequence_of_a_generator_seeded_where_it_started() {
        let seed = THREAD_STATE.with(Cell::get);
        let same = SplitMix64::new(seed);
        for _ in 0..3 {
            assert_eq!(next_u64(), same.next_u64());
        }
    }

    #[test]
    fn two_threads_draw_different_sequences() {
        let here: Vec<u64> = (0..4).map(|_| next_u64()).collect();
        let there = std::thread::spawn(|| (0..4).map(|_| next_u64()).collect::<Vec<u64>>())
            .join()
            .unwrap();
        assert_ne!(here, there);
    }
}
