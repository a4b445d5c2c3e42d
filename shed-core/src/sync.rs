//! The synchronisation primitives of the slot and hand-off protocol, swapped
//! for [loom]'s models under `cfg(loom)`, so that the model checker explores
//! the real code (`shed-core/tests/loom.rs`).
//!
//! Only what the protocol's correctness rests on goes through here: the slot
//! word and the limit, the controller's interval claim and level, the queue
//! lock and the waiters' cells. Counters and measurements, which are
//! `Relaxed` statistics, keep the standard atomics.
//!
//! [loom]: https://docs.rs/loom

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU32, AtomicU64};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU32, AtomicU64};

/// A mutex whose `lock` returns the guard directly (no poisoning), backed by
/// `parking_lot`, or by loom's model under `cfg(loom)`.
#[derive(Debug)]
pub(crate) struct Mutex<T> {
    #[cfg(not(loom))]
    inner: parking_lot::Mutex<T>,
    #[cfg(loom)]
    inner: loom::sync::Mutex<T>,
}

#[cfg(not(loom))]
pub(crate) type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;
#[cfg(loom)]
pub(crate) type MutexGuard<'a, T> = loom::sync::MutexGuard<'a, T>;

impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Mutex<T> {
        Mutex {
            #[cfg(not(loom))]
            inner: parking_lot::Mutex::new(value),
            #[cfg(loom)]
            inner: loom::sync::Mutex::new(value),
        }
    }

    #[cfg(not(loom))]
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        self.inner.lock()
    }

    #[cfg(loom)]
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        // A panic while a loom model holds the lock fails the model anyway.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
