//! Wakers run after the engine lets go of its locks: a waker that panics or
//! calls back into the same shedder loses nothing and deadlocks nothing.

mod common;

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use common::{build, queued};
use std::future::IntoFuture;

use shed_core::{Arrival, Class, Shedder, Waiter};

/// Runs `scenario` on its own thread and fails (instead of hanging the suite)
/// if it has not returned after a minute: a deadlock, not a slow machine.
fn without_deadlock(scenario: impl FnOnce() + Send + 'static) {
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        scenario();
        let _ = done.send(());
    });
    match finished.recv_timeout(Duration::from_secs(60)) {
        Ok(()) => {}
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("the scenario panicked"),
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("deadlock: a waker calling back into the shedder never returned")
        }
    }
}

fn shedder(limit: usize) -> Shedder {
    build(Shedder::builder().limit(limit).queue_capacity(64)).0
}

/// Polls `waiter` once with `waker`; it must still be waiting.
fn park(waiter: &mut Waiter, waker: &Waker) {
    let polled = Pin::new(waiter).poll(&mut Context::from_waker(waker));
    assert!(polled.is_pending(), "the waiter should still be queued");
}

struct Panicking;

impl Wake for Panicking {
    fn wake(self: Arc<Self>) {
        panic!("a waker that fails");
    }
}

/// A waker that runs a closure of the test when woken (at most once).
struct CallsBack(Mutex<Option<Box<dyn FnOnce() + Send>>>);

impl CallsBack {
    fn waker(call: impl FnOnce() + Send + 'static) -> Waker {
        Waker::from(Arc::new(CallsBack(Mutex::new(Some(Box::new(call))))))
    }
}

impl Wake for CallsBack {
    fn wake(self: Arc<Self>) {
        let call = self.0.lock().unwrap().take();
        if let Some(call) = call {
            call();
        }
    }
}

#[test]
fn a_waker_that_panics_loses_no_slot() {
    let shedder = shedder(1);
    let permit = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
    let mut waiter = queued(shedder.admit(&Arrival::new(Class::Batch)));
    park(&mut waiter, &Waker::from(Arc::new(Panicking)));

    let released = catch_unwind(AssertUnwindSafe(move || drop(permit)));
    assert!(released.is_err(), "the waker's panic reaches the releaser");

    // The slot went to the waiter; dropping it unpolled gives the slot back.
    drop(waiter);
    assert_eq!(shedder.in_flight(), 0);
    assert_eq!(shedder.stats().queue_len(), 0);
    assert!(shedder.try_admit(&Arrival::new(Class::Batch)).is_ok());
}

#[test]
fn a_waker_that_panics_while_a_panicking_holder_releases_does_not_abort() {
    let shedder = shedder(1);
    let permit = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
    let mut waiter = queued(shedder.admit(&Arrival::new(Class::Batch)));
    park(&mut waiter, &Waker::from(Arc::new(Panicking)));

    // The permit is dropped while its holder unwinds: a second panic there
    // would abort the process.
    let outcome = catch_unwind(AssertUnwindSafe(move || {
        let _held = permit;
        panic!("the handler failed");
    }));
    assert!(outcome.is_err());
    drop(waiter);
    assert_eq!(shedder.in_flight(), 0);
}

#[test]
fn a_waker_that_panics_does_not_stop_the_other_waiters_being_woken() {
    let shedder = build(Shedder::builder().limit(2).queue_capacity(64)).0;
    let first = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
    let second = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
    let mut failing = queued(shedder.admit(&Arrival::new(Class::Batch)));
    let mut healthy = queued(shedder.admit(&Arrival::new(Class::Batch)));
    park(&mut failing, &Waker::from(Arc::new(Panicking)));
    let woken = common::CountingWaker::new();
    park(&mut healthy, &woken.waker());

    // Raising the limit hands both new slots out in one critical section.
    let raised = catch_unwind(AssertUnwindSafe(|| shedder.set_limit(4).unwrap()));
    assert!(raised.is_err());
    assert_eq!(woken.wakes(), 1, "the healthy waiter was woken");
    drop((first, second, failing, healthy));
    assert_eq!(shedder.in_flight(), 0);
    assert_eq!(shedder.stats().queue_len(), 0);
}

#[test]
fn a_waker_that_releases_a_permit_of_the_same_shedder_does_not_deadlock() {
    without_deadlock(|| {
        let shedder = shedder(2);
        let first = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
        let second = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
        let mut waiter = queued(shedder.admit(&Arrival::new(Class::Batch)));
        let mut behind = queued(shedder.admit(&Arrival::new(Class::Batch)));
        park(&mut waiter, &CallsBack::waker(move || drop(second)));
        park(&mut behind, Waker::noop());

        // `first` goes to the waiter, whose waker drops `second`: that slot
        // is handed on to the request behind it, through the queue lock.
        drop(first);
        assert_eq!(shedder.in_flight(), 2, "the two waiters' slots are held");
        assert!(matches!(common::poll_once(&mut behind), Poll::Ready(Ok(_))));
        drop(waiter);
        assert_eq!(shedder.in_flight(), 0);
    });
}

#[test]
fn a_waker_that_admits_into_the_same_shedder_does_not_deadlock() {
    without_deadlock(|| {
        let shedder = shedder(1);
        let permit = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
        let mut waiter = queued(shedder.admit(&Arrival::new(Class::Batch)));
        let admitted: Arc<Mutex<Option<bool>>> = Arc::default();
        let (inner, seen) = (shedder.clone(), Arc::clone(&admitted));
        park(
            &mut waiter,
            &CallsBack::waker(move || {
                // A critical request would wait: it goes through the queue lock.
                let answer = inner.admit(&Arrival::new(Class::Critical)).into_future();
                let mut answer = std::pin::pin!(answer);
                let polled = answer
                    .as_mut()
                    .poll(&mut Context::from_waker(Waker::noop()));
                *seen.lock().unwrap() = Some(polled.is_pending());
            }),
        );

        drop(permit);
        let waited = admitted.lock().unwrap().take().expect("the waker ran");
        assert!(
            waited,
            "the only slot went to the waiter; the new request waited"
        );
        drop(waiter);
        assert_eq!(shedder.in_flight(), 0);
    });
}

#[test]
fn a_waker_that_drops_its_own_waiter_gives_the_slot_back() {
    without_deadlock(|| {
        let shedder = shedder(1);
        let permit = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
        let slot: Arc<Mutex<Option<Waiter>>> = Arc::default();
        let mut waiter = queued(shedder.admit(&Arrival::new(Class::Batch)));
        let mut behind = queued(shedder.admit(&Arrival::new(Class::Batch)));
        let dropper = Arc::clone(&slot);
        park(
            &mut waiter,
            &CallsBack::waker(move || drop(dropper.lock().unwrap().take())),
        );
        park(&mut behind, Waker::noop());
        *slot.lock().unwrap() = Some(waiter);

        // The waiter is granted the slot, then dropped by its own waker: the
        // slot goes on to the request behind it, through the queue lock.
        drop(permit);
        assert!(slot.lock().unwrap().is_none());
        assert_eq!(shedder.in_flight(), 1);
        assert!(matches!(common::poll_once(&mut behind), Poll::Ready(Ok(_))));
        assert_eq!(shedder.in_flight(), 0);
    });
}

#[test]
fn polling_a_woken_waiter_from_inside_its_waker_takes_the_slot() {
    without_deadlock(|| {
        let shedder = shedder(1);
        let permit = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
        let slot: Arc<Mutex<Option<Waiter>>> = Arc::default();
        let result: Arc<Mutex<Option<bool>>> = Arc::default();
        let mut waiter = queued(shedder.admit(&Arrival::new(Class::Batch)));
        let (poller, seen) = (Arc::clone(&slot), Arc::clone(&result));
        park(
            &mut waiter,
            &CallsBack::waker(move || {
                let mut waiter = poller.lock().unwrap().take().unwrap();
                let polled = Pin::new(&mut waiter).poll(&mut Context::from_waker(Waker::noop()));
                *seen.lock().unwrap() = Some(matches!(polled, Poll::Ready(Ok(_))));
            }),
        );
        *slot.lock().unwrap() = Some(waiter);

        drop(permit);
        assert_eq!(*result.lock().unwrap(), Some(true));
        // The permit the waker took was dropped at the end of the waker.
        assert_eq!(shedder.in_flight(), 0);
    });
}

#[test]
fn a_waker_that_panics_when_its_waiter_is_shed_leaves_the_queues_consistent() {
    let (shedder, clock) = build(Shedder::builder().limit(1).queue_capacity(64));
    // One slot busy and twenty batch requests waiting 10 ms each for it: a
    // standing queue, so the controller sheds the lowest ranks after 100 ms.
    let mut held = Some(shedder.try_admit(&Arrival::new(Class::Critical)).unwrap());
    let batch = Arrival::new(Class::Batch).with_cohort(shed_core::Cohort::MAX);
    let mut waiting: std::collections::VecDeque<Waiter> =
        (0..20).map(|_| queued(shedder.admit(&batch))).collect();
    let mut doomed = queued(shedder.admit(&Arrival::new(Class::Background)));
    park(&mut doomed, &Waker::from(Arc::new(Panicking)));
    let mut serve_one = |waiting: &mut std::collections::VecDeque<Waiter>| {
        clock.advance(Duration::from_millis(10));
        drop(held.take());
        let mut next = waiting.pop_front().expect("a waiter");
        held = Some(common::ready(&mut next).unwrap());
    };
    for _ in 0..10 {
        serve_one(&mut waiting);
    }
    assert!(shedder.level().sheds(doomed.rank(), shed_core::Cohort::MAX));

    // The next hand-off refuses the background waiter; its waker panics.
    let handed_off = catch_unwind(AssertUnwindSafe(|| serve_one(&mut waiting)));
    assert!(handed_off.is_err());
    assert_eq!(shedder.stats().queued[doomed.rank().index()], 0);
    drop(doomed);
    waiting.clear();
    drop(held);
    assert_eq!(shedder.in_flight(), 0);
    assert_eq!(shedder.stats().queue_len(), 0);
}
