//! A permit is returned exactly once, whatever happens to the request:
//! completion, panic, cancellation while waiting, or a waiter dropped after a
//! slot was handed to it but before it was polled.

mod common;

use std::future::{Future, IntoFuture};
use std::panic::{catch_unwind, AssertUnwindSafe};

use common::{admitted, assert_pending, build, ms, poll_once, queued, ready, CountingWaker};
use shed_core::{Arrival, Class, Shedder};
use std::pin::Pin;
use std::task::{Context, Poll};

fn one_slot() -> Shedder {
    build(Shedder::builder().limit(1).queue_capacity(64)).0
}

#[test]
fn dropping_a_permit_returns_its_slot() {
    let shedder = one_slot();
    let permit = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
    assert_eq!(shedder.in_flight(), 1);
    drop(permit);
    assert_eq!(shedder.in_flight(), 0);
    assert!(shedder.try_admit(&Arrival::new(Class::Batch)).is_ok());
}

#[test]
fn a_permit_is_returned_when_the_work_panics() {
    let shedder = one_slot();
    let permit = shedder
        .try_admit(&Arrival::new(Class::Interactive))
        .unwrap();
    let outcome = catch_unwind(AssertUnwindSafe(move || {
        let _held = permit;
        panic!("the handler failed");
    }));
    assert!(outcome.is_err());
    assert_eq!(shedder.in_flight(), 0);
    assert!(shedder.try_admit(&Arrival::new(Class::Interactive)).is_ok());
}

#[test]
fn a_permit_released_during_a_panic_still_hands_its_slot_to_a_waiter() {
    let shedder = one_slot();
    let permit = shedder
        .try_admit(&Arrival::new(Class::Interactive))
        .unwrap();
    let mut waiter = queued(shedder.admit(&Arrival::new(Class::Batch)));
    assert_pending(&mut waiter);
    let _ = catch_unwind(AssertUnwindSafe(move || {
        let _held = permit;
        panic!("the handler failed");
    }));
    let permit = ready(&mut waiter).expect("the slot went to the waiter");
    assert_eq!(shedder.in_flight(), 1);
    drop(permit);
    assert_eq!(shedder.in_flight(), 0);
}

#[test]
fn cancelling_a_waiting_future_leaves_the_queue_and_consumes_no_slot() {
    let shedder = one_slot();
    let permit = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
    let mut waiter = queued(shedder.admit(&Arrival::new(Class::Batch)));
    assert_pending(&mut waiter);
    assert_eq!(shedder.stats().queue_len(), 1);
    drop(waiter);
    assert_eq!(shedder.stats().queue_len(), 0);
    drop(permit);
    assert_eq!(shedder.in_flight(), 0);
    // Nothing of the cancelled request lingers: the next one takes the slot at once.
    assert!(shedder
        .try_admit(&Arrival::new(Class::Background).with_attempt(3))
        .is_ok());
}

#[test]
fn cancelling_an_awaited_admission_leaves_the_queue() {
    let shedder = one_slot();
    let permit = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
    let mut admit = shedder.admit(&Arrival::new(Class::Batch)).into_future();
    assert!(poll_once(&mut admit).is_pending());
    drop(admit);
    assert_eq!(shedder.stats().queue_len(), 0);
    drop(permit);
    assert_eq!(shedder.in_flight(), 0);
}

#[test]
fn cancelling_a_waiter_that_was_never_polled_leaves_the_queue() {
    let shedder = one_slot();
    let permit = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
    drop(queued(shedder.admit(&Arrival::new(Class::Critical))));
    assert_eq!(shedder.stats().queue_len(), 0);
    drop(permit);
    assert_eq!(shedder.in_flight(), 0);
}

#[test]
fn dropping_a_granted_but_unpolled_waiter_hands_the_slot_to_the_next_waiter() {
    let shedder = one_slot();
    let permit = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
    let mut granted = queued(shedder.admit(&Arrival::new(Class::Batch)));
    let mut next = queued(shedder.admit(&Arrival::new(Class::Batch)));
    assert_pending(&mut granted);
    assert_pending(&mut next);

    drop(permit); // the slot is handed to `granted`, which is not polled again
    assert_eq!(shedder.in_flight(), 1);
    assert_pending(&mut next);
    drop(granted);

    let permit = ready(&mut next).expect("the slot went on to the next waiter");
    assert_eq!(shedder.in_flight(), 1);
    assert_eq!(shedder.stats().queue_len(), 0);
    drop(permit);
    assert_eq!(shedder.in_flight(), 0);
}

#[test]
fn dropping_a_granted_but_unpolled_waiter_with_nobody_behind_returns_the_slot_to_the_pool() {
    let shedder = one_slot();
    let permit = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
    let waiter = queued(shedder.admit(&Arrival::new(Class::Batch)));
    drop(permit);
    assert_eq!(shedder.in_flight(), 1, "the slot is held for the waiter");
    drop(waiter);
    assert_eq!(shedder.in_flight(), 0);
    assert!(shedder.try_admit(&Arrival::new(Class::Batch)).is_ok());
}

#[test]
fn a_granted_waiter_keeps_its_slot_even_if_polled_after_its_wait_would_have_ended() {
    let (shedder, clock) = build(Shedder::builder().limit(1).queue_capacity(64));
    let permit = shedder
        .try_admit(&Arrival::new(Class::Interactive))
        .unwrap();
    let mut waiter = queued(shedder.admit(&Arrival::new(Class::Interactive)));
    drop(permit);
    clock.advance(ms(10_000));
    let _served = ready(&mut waiter).expect("the slot stays with the waiter");
    assert_eq!(shedder.in_flight(), 1);
}

#[test]
fn a_released_slot_wakes_the_waiter_it_was_handed_to() {
    let shedder = one_slot();
    let permit = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
    let mut waiter = queued(shedder.admit(&Arrival::new(Class::Batch)));
    let wakes = CountingWaker::new();
    let waker = wakes.waker();
    let polled = Pin::new(&mut waiter).poll(&mut Context::from_waker(&waker));
    assert!(polled.is_pending());
    assert_eq!(wakes.wakes(), 0);
    drop(permit);
    assert_eq!(wakes.wakes(), 1);
    assert!(matches!(poll_once(&mut waiter), Poll::Ready(Ok(_))));
}

#[test]
fn a_permit_records_how_long_its_request_waited() {
    let (shedder, clock) = build(Shedder::builder().limit(1).queue_capacity(64));
    let first = admitted(shedder.admit(&Arrival::new(Class::Batch)));
    assert_eq!(first.queued(), ms(0));
    let mut waiter = queued(shedder.admit(&Arrival::new(Class::Batch)));
    clock.advance(ms(30));
    drop(first);
    let second = ready(&mut waiter).unwrap();
    assert_eq!(second.queued(), ms(30));
    assert_eq!(second.class(), Class::Batch);
}

#[test]
fn every_way_a_request_ends_returns_its_slot_exactly_once() {
    let (shedder, clock) = build(Shedder::builder().limit(2));
    for round in 0..50 {
        let a = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
        let b = shedder.try_admit(&Arrival::new(Class::Critical)).unwrap();
        let mut waiting = queued(shedder.admit(&Arrival::new(Class::Interactive)));
        let unpolled = queued(shedder.admit(&Arrival::new(Class::Background)));
        let expiring = queued(shedder.admit(&Arrival::new(Class::Batch).with_attempt(2)));
        assert_pending(&mut waiting);
        let _ = catch_unwind(AssertUnwindSafe(move || {
            let _held = a;
            panic!("round {round}");
        }));
        let served = ready(&mut waiting).unwrap();
        drop(b); // handed to the background waiter, which is then dropped unpolled
        drop(unpolled);
        clock.advance(ms(2_000));
        drop(expiring);
        drop(served);
        assert_eq!(shedder.in_flight(), 0, "round {round}");
        assert_eq!(shedder.stats().queue_len(), 0, "round {round}");
    }
}
