//! Deadlines: refused at the door when already passed or unmeetable, dropped
//! from the queue when they come too close while waiting; answered without
//! Retry-After (the caller's time is gone), unlike overload.

mod common;

use std::time::Duration;

use common::{admitted, build, ms, poll_once, queued, ready, rejected};
use shed_core::{Arrival, Class, Clock, ManualClock, Permit, RejectReason, Shedder, Waiter};

fn in_ms(clock: &ManualClock, millis: u64) -> std::time::Instant {
    clock.now() + ms(millis)
}

/// A shedder with one slot that has served one 10 ms request and closed a
/// controller interval, so it knows its drain rate: 100 requests per second.
/// The returned permit holds the slot.
fn knowing_its_drain_rate() -> (Shedder, ManualClock, Permit) {
    let (shedder, clock) = build(Shedder::builder().limit(1).queue_capacity(64));
    let served = shedder.try_admit(&Arrival::new(Class::Critical)).unwrap();
    clock.advance(ms(10));
    drop(served);
    clock.advance(ms(90)); // the end of the first 100 ms interval
    let held = shedder.try_admit(&Arrival::new(Class::Critical)).unwrap();
    assert_eq!(shedder.stats().drain_rate, Some(100.0));
    (shedder, clock, held)
}

fn queue(shedder: &Shedder, arrival: Arrival, count: usize) -> Vec<Waiter> {
    (0..count)
        .map(|_| queued(shedder.admit(&arrival)))
        .collect()
}

#[test]
fn a_request_that_may_not_wait_is_refused_for_overload_not_for_its_deadline() {
    let (shedder, clock, _held) = knowing_its_drain_rate();
    // 50 ms left is less than the predicted wait plus the service time
    // (10 + 10 ms would fit, but nine are queued ahead: 110 ms), yet it is no
    // deadline problem: try_admit never waits, so the request is refused
    // because the service is full, with a Retry-After.
    let _ahead = queue(&shedder, Arrival::new(Class::Interactive), 9);
    let hurried = Arrival::new(Class::Interactive).with_deadline(in_ms(&clock, 50));
    let refused = shedder.try_admit(&hurried).unwrap_err();
    assert_eq!(refused.reason(), RejectReason::QueueFull);
    assert!(refused.retry_after().is_some());
}

#[test]
fn with_waiting_disabled_a_deadline_is_judged_against_the_minimum_useful_window_only() {
    let (shedder, clock) = build(Shedder::builder().limit(1).queue_capacity(0));
    let served = shedder.try_admit(&Arrival::new(Class::Critical)).unwrap();
    clock.advance(ms(100)); // a 100 ms service time, learnt at the interval's end
    drop(served);
    let _held = shedder.try_admit(&Arrival::new(Class::Critical)).unwrap();
    let refused =
        rejected(shedder.admit(&Arrival::new(Class::Interactive).with_deadline(in_ms(&clock, 50))));
    assert_eq!(refused.reason(), RejectReason::QueueFull);
    assert!(refused.retry_after().is_some());
    let too_short = Arrival::new(Class::Interactive).with_deadline(in_ms(&clock, 4));
    let refused = rejected(shedder.admit(&too_short));
    assert_eq!(refused.reason(), RejectReason::DeadlineUnmeetable);
}

#[test]
fn a_request_whose_deadline_has_passed_is_refused_at_the_door_without_retry_after() {
    let (shedder, clock) = build(Shedder::builder().limit(8));
    let deadline = clock.now();
    clock.advance(ms(1));
    let refused = rejected(shedder.admit(&Arrival::new(Class::Critical).with_deadline(deadline)));
    assert_eq!(refused.reason(), RejectReason::DeadlinePassed);
    assert_eq!(refused.retry_after(), None);
    assert_eq!(shedder.in_flight(), 0);
    assert_eq!(shedder.stats().class(Class::Critical).shed_by_deadline, 1);
}

#[test]
fn a_deadline_due_exactly_now_has_passed() {
    let (shedder, clock) = build(Shedder::builder().limit(8));
    let refused = rejected(shedder.admit(&Arrival::new(Class::Batch).with_deadline(clock.now())));
    assert_eq!(refused.reason(), RejectReason::DeadlinePassed);
}

#[test]
fn a_deadline_shorter_than_the_minimum_useful_window_is_refused_even_with_a_free_slot() {
    let (shedder, clock) = build(Shedder::builder().limit(8).min_useful_window(ms(20)));
    let short = Arrival::new(Class::Interactive).with_deadline(in_ms(&clock, 19));
    let refused = rejected(shedder.admit(&short));
    assert_eq!(refused.reason(), RejectReason::DeadlineUnmeetable);
    assert_eq!(refused.retry_after(), None);
    let enough = Arrival::new(Class::Interactive).with_deadline(in_ms(&clock, 20));
    let _permit = admitted(shedder.admit(&enough));
}

#[test]
fn a_deadline_shorter_than_the_predicted_wait_is_refused_once_the_drain_rate_is_known() {
    let (shedder, clock, _held) = knowing_its_drain_rate();
    let _ahead = queue(&shedder, Arrival::new(Class::Interactive), 9);
    // Ten requests (nine ahead, then this one) at 100 per second: 100 ms,
    // plus the 10 ms mean service time (longer than the 5 ms minimum window).
    let too_short = Arrival::new(Class::Interactive).with_deadline(in_ms(&clock, 109));
    let refused = rejected(shedder.admit(&too_short));
    assert_eq!(refused.reason(), RejectReason::DeadlineUnmeetable);
    assert_eq!(refused.retry_after(), None);
    let long_enough = Arrival::new(Class::Interactive).with_deadline(in_ms(&clock, 111));
    let _waiting = queued(shedder.admit(&long_enough));
}

#[test]
fn a_waiter_needs_the_mean_service_time_left_when_it_is_longer_than_the_window() {
    let (shedder, clock, held) = knowing_its_drain_rate();
    // Mean service 10 ms: a waiter with a 40 ms deadline leaves the queue at 30 ms.
    let waiter =
        queued(shedder.admit(&Arrival::new(Class::Batch).with_deadline(in_ms(&clock, 40))));
    assert_eq!(waiter.expires_at(), in_ms(&clock, 30));
    drop(held);
}

#[test]
fn a_free_slot_needs_only_the_minimum_useful_window() {
    let (shedder, clock, held) = knowing_its_drain_rate();
    drop(held);
    // Mean service 10 ms, but nothing waits: 6 ms left is worth a try.
    let _permit =
        admitted(shedder.admit(&Arrival::new(Class::Batch).with_deadline(in_ms(&clock, 6))));
}

#[test]
fn below_overload_the_predicted_wait_counts_every_waiter() {
    let (shedder, clock, _held) = knowing_its_drain_rate();
    let _ahead = queue(&shedder, Arrival::new(Class::Batch), 9);
    // Served in arrival order, a critical request waits for the nine batch
    // requests too: 100 ms, and 10 ms of work, do not fit in 50.
    let critical = Arrival::new(Class::Critical).with_deadline(in_ms(&clock, 50));
    assert_eq!(
        rejected(shedder.admit(&critical)).reason(),
        RejectReason::DeadlineUnmeetable
    );
}

#[test]
fn in_an_overload_the_predicted_wait_counts_only_the_waiters_served_before_the_request() {
    let (shedder, clock, _held) = knowing_its_drain_rate();
    let _ahead = queue(&shedder, Arrival::new(Class::Batch), 9);
    common::surge(&shedder);
    // Batch waiters do not delay a critical request: 10 ms wait + 10 ms service is enough.
    let critical = Arrival::new(Class::Critical).with_deadline(in_ms(&clock, 50));
    let _waiting = queued(shedder.admit(&critical));
    let batch = Arrival::new(Class::Batch).with_deadline(in_ms(&clock, 50));
    assert_eq!(
        rejected(shedder.admit(&batch)).reason(),
        RejectReason::DeadlineUnmeetable
    );
}

#[test]
fn before_the_drain_rate_is_known_a_short_deadline_may_wait() {
    let (shedder, clock) = build(Shedder::builder().limit(1).queue_capacity(64));
    let _held = shedder
        .try_admit(&Arrival::new(Class::Interactive))
        .unwrap();
    let _ahead = queue(&shedder, Arrival::new(Class::Interactive), 9);
    assert_eq!(shedder.stats().drain_rate, None);
    let arrival = Arrival::new(Class::Interactive).with_deadline(in_ms(&clock, 50));
    let _waiting = queued(shedder.admit(&arrival));
}

#[test]
fn a_waiter_leaves_the_queue_the_minimum_useful_window_before_its_deadline() {
    let (shedder, clock) = build(Shedder::builder().limit(1).queue_capacity(64));
    let _held = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
    let deadline = in_ms(&clock, 100);
    let waiter = queued(shedder.admit(&Arrival::new(Class::Batch).with_deadline(deadline)));
    assert_eq!(waiter.expires_at(), deadline - ms(5));
    let no_deadline = queued(shedder.admit(&Arrival::new(Class::Batch)));
    assert_eq!(
        no_deadline.expires_at(),
        clock.now() + Duration::from_secs(1)
    );
}

#[test]
fn a_deadline_that_comes_too_close_while_waiting_drops_the_request_without_retry_after() {
    let (shedder, clock) = build(Shedder::builder().limit(1).queue_capacity(64));
    let held = shedder
        .try_admit(&Arrival::new(Class::Interactive))
        .unwrap();
    let arrival = Arrival::new(Class::Interactive).with_deadline(in_ms(&clock, 100));
    let mut waiter = queued(shedder.admit(&arrival));
    clock.advance(ms(94));
    assert!(poll_once(&mut waiter).is_pending());
    clock.advance(ms(1));
    let refused = ready(&mut waiter).unwrap_err();
    assert_eq!(refused.reason(), RejectReason::DeadlineExpiredInQueue);
    assert_eq!(refused.retry_after(), None);
    assert_eq!(shedder.stats().queue_len(), 0);
    assert_eq!(shedder.stats().class(Class::Interactive).expired, 1);
    drop(waiter);
    drop(held);
    assert_eq!(shedder.in_flight(), 0);
}

#[test]
fn a_waiter_past_its_deadline_is_passed_over_when_a_slot_frees() {
    let (shedder, clock) = build(Shedder::builder().limit(1).queue_capacity(64));
    let held = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
    let short = Arrival::new(Class::Critical).with_deadline(in_ms(&clock, 50));
    let mut expired = queued(shedder.admit(&short));
    let mut patient = queued(shedder.admit(&Arrival::new(Class::Batch)));
    clock.advance(ms(60));
    drop(held);
    assert_eq!(
        ready(&mut expired).unwrap_err().reason(),
        RejectReason::DeadlineExpiredInQueue
    );
    let _served = ready(&mut patient).expect("the slot went to the next waiter");
    assert_eq!(shedder.in_flight(), 1);
}

#[test]
fn waiting_longer_than_the_class_allows_drops_the_request_with_a_retry_after() {
    let (shedder, clock) = build(Shedder::builder().limit(1).max_wait(Class::Batch, ms(200)));
    let _held = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
    let mut waiter = queued(shedder.admit(&Arrival::new(Class::Batch)));
    clock.advance(ms(199));
    assert!(poll_once(&mut waiter).is_pending());
    clock.advance(ms(1));
    let refused = ready(&mut waiter).unwrap_err();
    assert_eq!(refused.reason(), RejectReason::QueueTimeout);
    assert!(refused.retry_after().is_some());
    assert_eq!(shedder.stats().class(Class::Batch).dropped_from_queue, 1);
    assert_eq!(shedder.stats().queue_len(), 0);
}

#[test]
fn a_deadline_beyond_the_maximum_wait_times_out_as_overload() {
    let (shedder, clock) = build(Shedder::builder().limit(1).max_wait(Class::Batch, ms(200)));
    let _held = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
    let arrival = Arrival::new(Class::Batch).with_deadline(in_ms(&clock, 10_000));
    let mut waiter = queued(shedder.admit(&arrival));
    clock.advance(ms(200));
    assert_eq!(
        ready(&mut waiter).unwrap_err().reason(),
        RejectReason::QueueTimeout
    );
}

#[test]
fn deadline_reasons_carry_no_retry_after_and_overload_reasons_do() {
    for reason in RejectReason::ALL {
        assert_ne!(reason.is_deadline(), reason.is_overload(), "{reason}");
    }
    let deadline_reasons = [
        RejectReason::DeadlinePassed,
        RejectReason::DeadlineUnmeetable,
        RejectReason::DeadlineExpiredInQueue,
    ];
    let overload_reasons = [
        RejectReason::Shed,
        RejectReason::QueueFull,
        RejectReason::QueueTimeout,
        RejectReason::ShedWhileQueued,
    ];
    assert!(deadline_reasons.iter().all(|reason| reason.is_deadline()));
    assert!(overload_reasons.iter().all(|reason| reason.is_overload()));
}
