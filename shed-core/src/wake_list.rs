//! Wakers collected under the queue lock and woken after it is released.
//!
//! A waker is foreign code: it may panic, or call straight back into the
//! shedder (release a permit, admit a request, drop its own waiter). Called
//! under the queue lock, the first would leave the queues half updated and
//! the second would deadlock, since the lock is not re-entrant. So the engine
//! only *collects* wakers while it holds the lock, as tokio's semaphore does,
//! and wakes them once the lock is let go.
//!
//! Waking never stops half way: a waker that panics does not keep the ones
//! after it from being woken, and its panic is passed on afterwards, unless
//! the thread is already unwinding (a second panic would abort the process).

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::task::Waker;

/// How many wakers fit without allocating: a hand-off wakes one, a change of
/// the level or of the limit a few; only a mass refusal spills to the heap.
const INLINE: usize = 8;

/// Wakers waiting to be woken, in the order they were added.
#[derive(Debug, Default)]
pub(crate) struct WakeList {
    inline: [Option<Waker>; INLINE],
    len: usize,
    spilled: Vec<Waker>,
}

impl WakeList {
    pub(crate) fn new() -> WakeList {
        WakeList::default()
    }

    /// Adds a waker to wake later.
    pub(crate) fn push(&mut self, waker: Waker) {
        if self.len < INLINE {
            self.inline[self.len] = Some(waker);
            self.len += 1;
        } else {
            self.spilled.push(waker);
        }
    }

    /// Wakes every waker collected, then passes on the first panic of one,
    /// if any (unless the thread is already unwinding).
    pub(crate) fn wake_all(mut self) {
        if let Some(payload) = self.wake_each() {
            if !std::thread::panicking() {
                resume_unwind(payload);
            }
        }
    }

    /// Wakes every waker, catching their panics; returns the first one.
    fn wake_each(&mut self) -> Option<Box<dyn std::any::Any + Send>> {
        let mut first_panic = None;
        let inline = self.inline[..self.len].iter_mut().filter_map(Option::take);
        for waker in inline.chain(self.spilled.drain(..)) {
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| waker.wake())) {
                first_panic.get_or_insert(payload);
            }
        }
        self.len = 0;
        first_panic
    }
}

impl Extend<Waker> for WakeList {
    fn extend<I: IntoIterator<Item = Waker>>(&mut self, wakers: I) {
        for waker in wakers {
            self.push(waker);
        }
    }
}

impl Drop for WakeList {
    /// Wakes whatever was not woken yet (the engine panicked between
    /// collecting and waking): a lost wake-up would strand a waiter holding
    /// a slot. Panics of wakers are swallowed here.
    fn drop(&mut self) {
        drop(self.wake_each());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    struct Panics;

    impl Wake for Panics {
        fn wake(self: Arc<Self>) {
            panic!("waker failed");
        }
    }

    #[test]
    fn wakes_every_waker_beyond_the_inline_ones() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let mut list = WakeList::new();
        for _ in 0..INLINE * 3 {
            list.push(Waker::from(Arc::clone(&count)));
        }
        list.wake_all();
        assert_eq!(count.0.load(Ordering::SeqCst), INLINE * 3);
    }

    #[test]
    fn a_panicking_waker_does_not_stop_the_others_and_its_panic_is_passed_on() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let mut list = WakeList::new();
        list.push(Waker::from(Arc::clone(&count)));
        list.push(Waker::from(Arc::new(Panics)));
        list.push(Waker::from(Arc::clone(&count)));
        let outcome = catch_unwind(AssertUnwindSafe(|| list.wake_all()));
        assert!(outcome.is_err());
        assert_eq!(count.0.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn dropping_an_unwoken_list_wakes_its_wakers() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let mut list = WakeList::new();
        list.push(Waker::from(Arc::clone(&count)));
        drop(list);
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
    }
}
