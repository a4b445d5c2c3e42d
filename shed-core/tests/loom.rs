//! A loom model of the slot word and the hand-off protocol: the real engine,
//! compiled with `--cfg loom` so its slot word, controller boundary, queue
//! lock and waiter cells are loom's, explored over every interleaving up to
//! a preemption bound.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p shed-core --test loom --release --target-dir target/loom
//! ```
//!
//! `.ci/run` runs it with `LOOM_MAX_PREEMPTIONS=3` (the bound loom's own
//! docs recommend as enough to find most bugs; every test here finishes
//! within seconds at it).
#![cfg(loom)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use loom::thread;
use shed_core::{
    Admission, Arrival, Class, Cohort, Level, ManualClock, Permit, Rejection, Shedder, Waiter,
};

/// Explores `scenario` over every interleaving up to the preemption bound
/// (`LOOM_MAX_PREEMPTIONS`, default 3).
fn model(scenario: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(3);
    }
    // The interval fixtures run a few dozen door decisions on one thread
    // before any other starts, each a handful of atomic operations: more
    // branch points in one execution than loom's default of 1,000 allows.
    builder.max_branches = 10_000;
    builder.check(scenario);
}

fn shedder(limit: usize) -> (Shedder, ManualClock) {
    let clock = ManualClock::new();
    let shedder = Shedder::builder()
        .limit(limit)
        .queue_capacity(4)
        .clock(clock.clone())
        .build()
        .unwrap();
    (shedder, clock)
}

fn batch() -> Arrival {
    Arrival::new(Class::Batch)
}

/// Admits, waiting for a slot if need be.
fn admit(shedder: &Shedder, arrival: Arrival) -> Result<Permit, Rejection> {
    match shedder.admit(&arrival) {
        Admission::Admitted(permit) => Ok(permit),
        Admission::Queued(waiter) => loom::future::block_on(waiter),
        Admission::Rejected(rejection) => Err(rejection),
    }
}

fn queued(admission: Admission) -> Waiter {
    match admission {
        Admission::Queued(waiter) => waiter,
        other => panic!("expected to wait, got {other:?}"),
    }
}

/// Catches: deciding to wait on a stale slot word, and storing the waker
/// outside the locked state check (both lose the wake-up: loom reports the
/// waiting thread as deadlocked).
#[test]
fn a_request_arriving_as_the_last_slot_frees_is_served_and_never_stranded() {
    model(|| {
        let (shedder, _clock) = shedder(1);
        let held = shedder.try_admit(&batch()).unwrap();
        let arriving = {
            let shedder = shedder.clone();
            thread::spawn(move || {
                let permit = admit(&shedder, batch()).expect("a slot, at once or handed over");
                assert_eq!(shedder.in_flight(), 1);
                drop(permit);
            })
        };
        drop(held);
        arriving.join().unwrap();
        assert_eq!(shedder.in_flight(), 0);
        assert_eq!(shedder.stats().queue_len(), 0);
    });
}

/// Catches: a waiter that gives up while its slot is being handed to it and
/// ignores that the hand-off won (the slot is lost, in flight stays 1).
#[test]
fn a_waiter_that_gives_up_as_a_slot_is_handed_to_it_loses_no_slot() {
    model(|| {
        let (shedder, _clock) = shedder(1);
        let held = shedder.try_admit(&batch()).unwrap();
        let waiter = queued(shedder.admit(&batch()));
        let releasing = thread::spawn(move || drop(held));
        drop(waiter);
        releasing.join().unwrap();
        assert_eq!(shedder.in_flight(), 0);
        assert_eq!(shedder.stats().queue_len(), 0);
        assert!(
            shedder.try_admit(&batch()).is_ok(),
            "the slot is free again"
        );
    });
}

/// Two releases, one waiter: the waiter gets exactly one slot and the other
/// goes back to the pool, whatever the order.
#[test]
fn two_releases_racing_one_waiter_hand_over_exactly_one_slot() {
    model(|| {
        let (shedder, _clock) = shedder(2);
        let first = shedder.try_admit(&batch()).unwrap();
        let second = shedder.try_admit(&batch()).unwrap();
        let waiter = queued(shedder.admit(&batch()));
        let releasing = thread::spawn(move || drop(first));
        drop(second);
        releasing.join().unwrap();
        let permit = loom::future::block_on(waiter).expect("a slot");
        assert_eq!(shedder.in_flight(), 1);
        drop(permit);
        assert_eq!(shedder.in_flight(), 0);
    });
}

/// Never more in flight than the limit, whoever races for the last slot.
#[test]
fn racing_arrivals_never_hold_more_slots_than_the_limit() {
    model(|| {
        let (shedder, _clock) = shedder(1);
        let holders = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let (shedder, holders) = (shedder.clone(), Arc::clone(&holders));
                thread::spawn(move || {
                    if let Ok(permit) = shedder.try_admit(&batch()) {
                        assert_eq!(holders.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                        holders.fetch_sub(1, Ordering::SeqCst);
                        drop(permit);
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(shedder.in_flight(), 0);
    });
}

/// The documented happens-before of a slot passed on without waiting: what
/// the releasing holder wrote (`Relaxed`), the next holder reads. Catches:
/// weakening the slot word's orderings to `Relaxed`.
#[test]
fn the_next_holder_of_a_free_slot_sees_what_the_last_holder_wrote() {
    model(|| {
        let (shedder, _clock) = shedder(1);
        let payload = Arc::new(loom::sync::atomic::AtomicUsize::new(0));
        let held = shedder.try_admit(&batch()).unwrap();
        let next = {
            let (shedder, payload) = (shedder.clone(), Arc::clone(&payload));
            thread::spawn(move || loop {
                if let Ok(_permit) = shedder.try_admit(&batch()) {
                    assert_eq!(payload.load(Ordering::Relaxed), 1, "a stale read");
                    return;
                }
                thread::yield_now();
            })
        };
        payload.store(1, Ordering::Relaxed);
        drop(held);
        next.join().unwrap();
    });
}

/// The same for a slot handed to a waiter under the queue lock.
#[test]
fn a_waiter_handed_a_slot_sees_what_the_last_holder_wrote() {
    model(|| {
        let (shedder, _clock) = shedder(1);
        let payload = Arc::new(loom::sync::atomic::AtomicUsize::new(0));
        let held = shedder.try_admit(&batch()).unwrap();
        let waiter = queued(shedder.admit(&batch()));
        let next = {
            let payload = Arc::clone(&payload);
            thread::spawn(move || {
                let _permit = loom::future::block_on(waiter).expect("the slot");
                assert_eq!(payload.load(Ordering::Relaxed), 1, "a stale read");
            })
        };
        payload.store(1, Ordering::Relaxed);
        drop(held);
        next.join().unwrap();
    });
}

/// Raising the limit while a holder releases: every waiter is served once,
/// nothing is over-counted.
#[test]
fn raising_the_limit_while_a_holder_releases_loses_and_invents_no_slot() {
    model(|| {
        let (shedder, _clock) = shedder(1);
        let held = shedder.try_admit(&batch()).unwrap();
        let first = queued(shedder.admit(&batch()));
        let second = queued(shedder.admit(&batch()));
        let raising = {
            let shedder = shedder.clone();
            thread::spawn(move || shedder.set_limit(2).unwrap())
        };
        drop(held);
        raising.join().unwrap();
        let a = loom::future::block_on(first).expect("a slot");
        let b = loom::future::block_on(second).expect("a slot");
        assert_eq!(shedder.in_flight(), 2);
        drop((a, b));
        assert_eq!(shedder.in_flight(), 0);
    });
}

/// An interval whose batch queue stood 10 ms over the 5 ms target eight
/// times (enough waits for the rank to be judged) while the load offered
/// (33 requests) surely outran the one slot's drain rate (10 an interval;
/// at so few samples "surely" takes 1.7 times as many), due to close at
/// 100 ms: returns the shedder at 100 ms with nothing closed yet.
fn overloaded_interval() -> Shedder {
    let (shedder, clock) = shedder(1);
    let mut held = shedder.try_admit(&Arrival::new(Class::Critical)).unwrap();
    for _ in 0..8 {
        let waiting = queued(shedder.admit(&batch().with_cohort(Cohort::MAX)));
        for _ in 0..3 {
            assert!(shedder.try_admit(&batch()).is_err(), "the slot is taken");
        }
        clock.advance(Duration::from_millis(10));
        drop(held);
        held = loom::future::block_on(waiting).unwrap();
    }
    drop(held);
    clock.advance(Duration::from_millis(20));
    shedder
}

/// The level one update of [`overloaded_interval`] gives.
fn level_after_one_update() -> Level {
    let shedder = overloaded_interval();
    drop(shedder.try_admit(&Arrival::new(Class::Critical)));
    let level = shedder.level();
    assert!(level > Level::NONE, "the interval was overloaded");
    level
}

/// Two requests cross the interval boundary at once: exactly one of them
/// closes the interval, so the overload verdict stands. Catches: claiming
/// the boundary with a plain store (two updates; the second finds the
/// interval's measurements taken, judges it healthy and lowers the level).
#[test]
fn two_requests_crossing_the_interval_boundary_close_it_once() {
    model(|| {
        let expected = level_after_one_update();
        let shedder = overloaded_interval();
        let other = {
            let shedder = shedder.clone();
            thread::spawn(move || drop(shedder.try_admit(&Arrival::new(Class::Critical))))
        };
        drop(shedder.try_admit(&Arrival::new(Class::Critical)));
        other.join().unwrap();
        assert_eq!(shedder.level(), expected, "an overload verdict was erased");
    });
}
