//! The concurrency limit: one atomic word of slots in use and ranks waiting.
//!
//! The word packs the number of requests in flight (low 32 bits) with a mask
//! of the ranks whose wait queues are non-empty (bits 32..40). Packing both in
//! one word lets the fast paths decide with one compare-and-swap:
//!
//! - a request takes a slot only while the limit is not reached *and* no rank
//!   at or above its own has waiters;
//! - a completion gives its slot back only while no rank has waiters; when one
//!   has, the completion hands the slot to a waiter under the queue lock.
//!
//! Waiter bits are set and cleared only under the queue lock (the methods
//! that do so take its guard, [`QueueGuard`]), and setting one is a
//! compare-and-swap against a full word. So a completion either sees the bit
//! (and hands off), or its decrement happens first and the would-be waiter
//! sees the free slot and takes it: no wake-up is lost.
//!
//! # Memory ordering
//!
//! Every read-modify-write is `AcqRel` and loads are `Acquire`: a slot handed
//! from one request to the next orders the first request's effects before the
//! second's. The limit is read `Relaxed`: a stale limit only delays a change by
//! one decision.

use std::sync::atomic::Ordering;

use crate::queue::QueueGuard;
use crate::sync::{AtomicU32, AtomicU64};
use crate::Rank;

const WAITER_SHIFT: u32 = 32;

/// Slots in use and ranks waiting, packed in one word.
#[derive(Debug)]
pub(crate) struct Slots {
    word: AtomicU64,
    limit: AtomicU32,
}

/// What a request under the queue lock should do.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TakeOrWait {
    /// It took a slot.
    Took,
    /// Its rank is now marked as waiting; it must join the queue.
    Wait,
}

fn in_flight(word: u64) -> u32 {
    word as u32
}

fn waiter_mask(word: u64) -> u8 {
    (word >> WAITER_SHIFT) as u8
}

fn waiter_bit(rank: Rank) -> u64 {
    1 << (WAITER_SHIFT + rank.index() as u32)
}

/// Whether a request of `rank` may take a slot straight away.
fn may_take(word: u64, rank: Rank, limit: u32) -> bool {
    in_flight(word) < limit && waiter_mask(word) >> rank.index() == 0
}

impl Slots {
    pub(crate) fn new(limit: u32) -> Slots {
        Slots {
            word: AtomicU64::new(0),
            limit: AtomicU32::new(limit),
        }
    }

    pub(crate) fn limit(&self) -> u32 {
        self.limit.load(Ordering::Relaxed)
    }

    pub(crate) fn set_limit(&self, limit: u32) {
        self.limit.store(limit, Ordering::Relaxed);
    }

    pub(crate) fn in_flight(&self) -> u32 {
        in_flight(self.word.load(Ordering::Acquire))
    }

    /// Whether a request of `rank` would take a slot now (a hint; may race).
    pub(crate) fn looks_free(&self, rank: Rank) -> bool {
        may_take(self.word.load(Ordering::Acquire), rank, self.limit())
    }

    /// The lock-free fast path: takes a slot if one is free and nobody at or
    /// above `rank` waits.
    pub(crate) fn try_take(&self, rank: Rank) -> bool {
        let limit = self.limit();
        self.take_while(|word| may_take(word, rank, limit))
    }

    /// Adds one slot in use, by compare-and-swap, for as long as `allowed` holds.
    fn take_while(&self, allowed: impl Fn(u64) -> bool) -> bool {
        let mut word = self.word.load(Ordering::Acquire);
        while allowed(word) {
            match self.word.compare_exchange_weak(
                word,
                word + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(actual) => word = actual,
            }
        }
        false
    }

    /// The lock-free release: gives the slot back unless somebody waits.
    /// Returns `false` when the caller must hand the slot off under the queue lock.
    pub(crate) fn try_give_back(&self) -> bool {
        let mut word = self.word.load(Ordering::Acquire);
        while waiter_mask(word) == 0 {
            debug_assert!(in_flight(word) > 0, "released a slot nobody held");
            match self.word.compare_exchange_weak(
                word,
                word - 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(actual) => word = actual,
            }
        }
        false
    }

    /// Takes a slot whatever the limit and the waiters (a shadow engine
    /// serves every request). Returns whether it went beyond the limit.
    pub(crate) fn take_beyond_limit(&self) -> bool {
        let previous = self.word.fetch_add(1, Ordering::AcqRel);
        in_flight(previous) >= self.limit()
    }

    /// Takes a slot if `rank` may, else marks `rank` as waiting.
    pub(crate) fn take_or_wait(&self, rank: Rank, _locked: &QueueGuard<'_>) -> TakeOrWait {
        let limit = self.limit();
        let bit = waiter_bit(rank);
        let mut word = self.word.load(Ordering::Acquire);
        loop {
            let next = if may_take(word, rank, limit) {
                word + 1
            } else if word & bit != 0 {
                // Already marked: completions go through the lock we hold.
                return TakeOrWait::Wait;
            } else {
                word | bit
            };
            match self
                .word
                .compare_exchange(word, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) if next == word + 1 => return TakeOrWait::Took,
                Ok(_) => return TakeOrWait::Wait,
                Err(actual) => word = actual,
            }
        }
    }

    /// Takes a slot for a waiter if the limit allows, whoever else waits
    /// (used after raising the limit).
    pub(crate) fn take_below_limit(&self, _locked: &QueueGuard<'_>) -> bool {
        let limit = self.limit();
        self.take_while(|word| in_flight(word) < limit)
    }

    /// The rank's queue became empty.
    pub(crate) fn clear_waiting(&self, rank: Rank, locked: &QueueGuard<'_>) {
        debug_assert_eq!(locked.len(rank), 0, "{rank} still has waiters");
        self.word.fetch_and(!waiter_bit(rank), Ordering::AcqRel);
    }

    /// Gives a slot back, with no waiter to hand it to, or because the limit
    /// was lowered below the slots in use.
    pub(crate) fn give_back_locked(&self, _locked: &QueueGuard<'_>) {
        let previous = self.word.fetch_sub(1, Ordering::AcqRel);
        debug_assert!(in_flight(previous) > 0, "released a slot nobody held");
    }

    /// Whether more slots are in use than the limit allows (after lowering it).
    pub(crate) fn over_limit(&self) -> bool {
        self.in_flight() > self.limit()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::WaitQueues;
    use crate::sync::Mutex;
    use crate::Class;

    const BATCH: Rank = Rank::original(Class::Batch);
    const CRITICAL: Rank = Rank::original(Class::Critical);

    #[test]
    fn takes_up_to_the_limit() {
        let slots = Slots::new(2);
        assert!(slots.try_take(BATCH));
        assert!(slots.try_take(BATCH));
        assert!(!slots.try_take(BATCH));
        assert_eq!(slots.in_flight(), 2);
    }

    #[test]
    fn a_waiting_rank_blocks_its_own_rank_and_those_below_but_not_above() {
        let queues = Mutex::new(WaitQueues::new());
        let slots = Slots::new(1);
        assert!(slots.try_take(BATCH));
        assert_eq!(slots.take_or_wait(BATCH, &queues.lock()), TakeOrWait::Wait);
        slots.set_limit(2);
        assert!(!slots.try_take(BATCH));
        assert!(!slots.try_take(Rank::original(Class::Background)));
        assert!(slots.try_take(CRITICAL));
    }

    #[test]
    fn a_slot_taken_beyond_the_limit_says_so_and_is_given_back_like_any() {
        let slots = Slots::new(1);
        assert!(!slots.take_beyond_limit());
        assert!(slots.take_beyond_limit());
        assert_eq!(slots.in_flight(), 2);
        assert!(slots.over_limit());
        assert!(slots.try_give_back());
        assert!(slots.try_give_back());
        assert_eq!(slots.in_flight(), 0);
    }

    #[test]
    fn giving_back_with_waiters_needs_the_lock() {
        let queues = Mutex::new(WaitQueues::new());
        let slots = Slots::new(1);
        assert!(slots.try_take(CRITICAL));
        assert_eq!(slots.take_or_wait(BATCH, &queues.lock()), TakeOrWait::Wait);
        assert!(!slots.try_give_back());
        slots.clear_waiting(BATCH, &queues.lock());
        assert!(slots.try_give_back());
        assert_eq!(slots.in_flight(), 0);
    }
}
