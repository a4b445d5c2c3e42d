//! Waiting for a slot: the longest-waiting request first below overload, the
//! most important first in one (FIFO within a rank either way), bounded
//! queues, and a limit that can change under load.

mod common;

use common::{admitted, assert_pending, build, queued, ready, rejected, surge};
use shed_core::{Admission, Arrival, Class, Permit, Rank, RejectReason, Shedder, Waiter};

/// Polls every waiter once: exactly one must have been handed the slot.
/// Its permit is dropped after the round, handing the slot on. Returns its index.
fn served_next(waiters: &mut [Option<Waiter>]) -> usize {
    let mut served = None;
    for (index, slot) in waiters.iter_mut().enumerate() {
        if let Some(waiter) = slot {
            if let std::task::Poll::Ready(verdict) = common::poll_once(waiter) {
                assert!(served.is_none(), "two waiters got one slot");
                served = Some((index, verdict.expect("served, not refused")));
                *slot = None;
            }
        }
    }
    let (index, permit) = served.expect("a waiter was served");
    drop(permit);
    index
}

#[test]
fn waiters_of_one_rank_are_served_first_in_first_out() {
    let (shedder, _clock) = build(Shedder::builder().limit(1).queue_capacity(64));
    let held = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
    let mut waiters: Vec<Option<Waiter>> = (0..5)
        .map(|_| Some(queued(shedder.admit(&Arrival::new(Class::Batch)))))
        .collect();
    for waiter in waiters.iter_mut().flatten() {
        assert_pending(waiter);
    }
    drop(held);
    // Each served waiter drops its permit at once, handing the slot on.
    let order: Vec<usize> = (0..5).map(|_| served_next(&mut waiters)).collect();
    assert_eq!(order, [0, 1, 2, 3, 4]);
    assert_eq!(shedder.in_flight(), 0);
}

/// One of each rank, arriving least important last, most important in the
/// middle.
const EVERY_RANK_MIXED: [Rank; Rank::COUNT] = [
    Rank::original(Class::Batch),
    Rank::retry(Class::Critical),
    Rank::retry(Class::Background),
    Rank::original(Class::Critical),
    Rank::original(Class::Background),
    Rank::original(Class::Interactive),
    Rank::retry(Class::Interactive),
    Rank::retry(Class::Batch),
];

/// Queues one waiter of each rank behind the held slot of `shedder`.
fn queue_every_rank(shedder: &Shedder) -> Vec<Option<Waiter>> {
    EVERY_RANK_MIXED
        .iter()
        .map(|rank| Some(queued(shedder.admit(&common::arrival_at(*rank)))))
        .collect()
}

#[test]
fn below_overload_the_longest_waiting_is_served_first_across_ranks() {
    let (shedder, clock) = build(Shedder::builder().limit(1).queue_capacity(64));
    let held = busy_slot_of_10_ms(&shedder, &clock);
    let mut waiters = queue_every_rank(&shedder);
    drop(held);
    let served: Vec<_> = (0..EVERY_RANK_MIXED.len())
        .map(|_| EVERY_RANK_MIXED[served_next(&mut waiters)])
        .collect();
    assert_eq!(served, EVERY_RANK_MIXED);
}

#[test]
fn in_an_overload_the_most_important_waiter_is_served_first_across_ranks() {
    let (shedder, clock) = build(Shedder::builder().limit(1).queue_capacity(64));
    let held = busy_slot_of_10_ms(&shedder, &clock);
    let mut waiters = queue_every_rank(&shedder);
    surge(&shedder);
    drop(held);
    let served: Vec<_> = (0..EVERY_RANK_MIXED.len())
        .map(|_| EVERY_RANK_MIXED[served_next(&mut waiters)])
        .collect();
    let mut expected = EVERY_RANK_MIXED.to_vec();
    expected.sort_by(|a, b| b.cmp(a)); // last shed is served first
    assert_eq!(served, expected);
}

#[test]
fn an_arrival_does_not_take_a_freed_slot_from_a_waiter() {
    let (shedder, _clock) = build(Shedder::builder().limit(1).queue_capacity(64));
    let held = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
    let mut waiter = queued(shedder.admit(&Arrival::new(Class::Background)));
    drop(held);
    // Even a critical arrival finds the slot already handed to the waiter.
    let late = shedder.try_admit(&Arrival::new(Class::Critical));
    assert_eq!(late.unwrap_err().reason(), RejectReason::QueueFull);
    let _served = ready(&mut waiter).expect("the waiter kept its slot");
}

#[test]
fn a_full_queue_refuses_with_queue_full_and_a_retry_after() {
    let (shedder, _clock) = build(Shedder::builder().limit(1).queue_capacity(2));
    let _held = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
    let _a = queued(shedder.admit(&Arrival::new(Class::Batch)));
    let _b = queued(shedder.admit(&Arrival::new(Class::Batch)));
    let refused = rejected(shedder.admit(&Arrival::new(Class::Batch)));
    assert_eq!(refused.reason(), RejectReason::QueueFull);
    assert!(refused.retry_after().is_some());
    assert_eq!(shedder.stats().class(Class::Batch).queue_full, 1);
}

#[test]
fn each_rank_has_its_own_bounded_queue() {
    let (shedder, _clock) = build(Shedder::builder().limit(1).queue_capacity(1));
    let _held = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
    let _batch = queued(shedder.admit(&Arrival::new(Class::Batch)));
    let _critical = queued(shedder.admit(&Arrival::new(Class::Critical)));
    let _batch_retry = queued(shedder.admit(&Arrival::new(Class::Batch).with_attempt(2)));
    let stats = shedder.stats();
    assert_eq!(stats.queued[Rank::original(Class::Batch).index()], 1);
    assert_eq!(stats.queued[Rank::original(Class::Critical).index()], 1);
    assert_eq!(stats.queued[Rank::retry(Class::Batch).index()], 1);
    assert_eq!(stats.queue_len(), 3);
    assert_eq!(shedder.queue_len(Rank::original(Class::Critical)), 1);
}

#[test]
fn a_zero_capacity_queue_refuses_at_once_instead_of_waiting() {
    let (shedder, _clock) = build(Shedder::builder().limit(1).queue_capacity(0));
    let _held = shedder.try_admit(&Arrival::new(Class::Critical)).unwrap();
    let refused = rejected(shedder.admit(&Arrival::new(Class::Critical)));
    assert_eq!(refused.reason(), RejectReason::QueueFull);
    assert_eq!(shedder.stats().queue_len(), 0);
}

#[test]
fn try_admit_refuses_instead_of_queueing() {
    let (shedder, _clock) = build(Shedder::builder().limit(1).queue_capacity(64));
    let _held = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
    let refused = shedder
        .try_admit(&Arrival::new(Class::Critical))
        .unwrap_err();
    assert_eq!(refused.reason(), RejectReason::QueueFull);
    assert_eq!(shedder.stats().queue_len(), 0);
}

#[test]
fn an_admission_can_be_awaited_until_a_slot_frees() {
    use std::future::IntoFuture;
    let (shedder, _clock) = build(Shedder::builder().limit(1).queue_capacity(64));
    let held = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
    let mut admit = shedder.admit(&Arrival::new(Class::Batch)).into_future();
    assert_pending(&mut admit);
    drop(held);
    let permit = ready(&mut admit).unwrap();
    assert_eq!(shedder.in_flight(), 1);
    drop(permit);
    let mut at_once = shedder.admit(&Arrival::new(Class::Batch)).into_future();
    assert!(ready(&mut at_once).is_ok());
}

/// One slot, busy, and a background, an interactive and a critical request
/// queued behind it in that order.
fn three_classes_queued_least_important_first() -> (Shedder, Permit, [Waiter; 3]) {
    let (shedder, clock) = build(Shedder::builder().limit(1).queue_capacity(64));
    let held = busy_slot_of_10_ms(&shedder, &clock);
    let waiters = [Class::Background, Class::Interactive, Class::Critical]
        .map(|class| queued(shedder.admit(&Arrival::new(class))));
    (shedder, held, waiters)
}

#[test]
fn raising_the_limit_in_an_overload_hands_the_new_slots_to_waiters_most_important_first() {
    let (shedder, _held, [mut background, mut interactive, mut critical]) =
        three_classes_queued_least_important_first();
    surge(&shedder);

    shedder.set_limit(3).unwrap();

    assert_eq!(shedder.limit(), 3);
    assert_eq!(shedder.in_flight(), 3);
    let _critical = ready(&mut critical).expect("a new slot");
    let _interactive = ready(&mut interactive).expect("a new slot");
    assert_pending(&mut background);
    assert_eq!(shedder.stats().queue_len(), 1);
}

#[test]
fn raising_the_limit_below_overload_hands_the_new_slots_to_the_longest_waiting() {
    let (shedder, _held, [mut background, mut interactive, mut critical]) =
        three_classes_queued_least_important_first();

    shedder.set_limit(3).unwrap();

    let _background = ready(&mut background).expect("a new slot");
    let _interactive = ready(&mut interactive).expect("a new slot");
    assert_pending(&mut critical);
    assert_eq!(shedder.stats().queue_len(), 1);
}

#[test]
fn raising_the_limit_with_nobody_waiting_frees_slots_for_arrivals() {
    let (shedder, _clock) = build(Shedder::builder().limit(1).queue_capacity(64));
    let _held = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
    shedder.set_limit(2).unwrap();
    assert_eq!(shedder.in_flight(), 1);
    assert!(shedder.try_admit(&Arrival::new(Class::Batch)).is_ok());
}

#[test]
fn lowering_the_limit_lets_the_excess_drain_before_waiters_are_served() {
    let (shedder, _clock) = build(Shedder::builder().limit(3));
    let permits: Vec<_> = (0..3)
        .map(|_| admitted(shedder.admit(&Arrival::new(Class::Batch))))
        .collect();
    shedder.set_limit(1).unwrap();
    let mut waiter = queued(shedder.admit(&Arrival::new(Class::Critical)));
    let mut permits = permits.into_iter();

    drop(permits.next());
    assert_eq!(shedder.in_flight(), 2);
    assert_pending(&mut waiter);
    drop(permits.next());
    assert_eq!(shedder.in_flight(), 1);
    assert_pending(&mut waiter);
    drop(permits.next());
    let _served = ready(&mut waiter).expect("served once the excess drained");
    assert_eq!(shedder.in_flight(), 1);
}

#[test]
fn an_invalid_new_limit_is_refused_and_the_old_one_kept() {
    let (shedder, _clock) = build(Shedder::builder().limit(4));
    let error = shedder.set_limit(0).unwrap_err();
    assert_eq!(error.setting(), "limit");
    assert_eq!(shedder.limit(), 4);
}

#[test]
fn admitted_and_queued_requests_are_counted_per_class() {
    let (shedder, _clock) = build(Shedder::builder().limit(1).queue_capacity(64));
    let held = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
    let mut waiter = queued(shedder.admit(&Arrival::new(Class::Interactive)));
    drop(held);
    let _served = ready(&mut waiter).unwrap();
    let stats = shedder.stats();
    assert_eq!(stats.class(Class::Batch).admitted, 1);
    assert_eq!(stats.class(Class::Interactive).queued, 1);
    assert_eq!(stats.class(Class::Interactive).admitted, 1);
    assert!(matches!(
        shedder.admit(&Arrival::new(Class::Critical)),
        Admission::Queued(_)
    ));
}

#[test]
fn by_default_each_rank_queues_up_to_1024_requests_whatever_the_limit() {
    // The queue's capacity bounds memory; how long a request may wait is
    // bounded by time (its class's maximum wait, its deadline, what the
    // service is measured to deliver).
    let (shedder, _clock) = build(Shedder::builder().limit(2));
    let _busy: Vec<_> = (0..2)
        .map(|_| shedder.try_admit(&Arrival::new(Class::Critical)).unwrap())
        .collect();
    let _waiting: Vec<_> = (0..1_024)
        .map(|_| queued(shedder.admit(&Arrival::new(Class::Batch))))
        .collect();
    let refused = rejected(shedder.admit(&Arrival::new(Class::Batch)));
    assert_eq!(refused.reason(), RejectReason::QueueFull);
    // Another rank has its own queue of the same size.
    let _other = queued(shedder.admit(&Arrival::new(Class::Interactive)));
}

/// One slot whose work takes 10 ms, learnt over an interval, and held again
/// by a critical request. Returns the holder.
fn busy_slot_of_10_ms(shedder: &Shedder, clock: &shed_core::ManualClock) -> shed_core::Permit {
    let first = shedder.try_admit(&Arrival::new(Class::Critical)).unwrap();
    clock.advance(common::ms(10));
    drop(first);
    clock.advance(common::ms(100)); // the next event closes the interval
    shedder.try_admit(&Arrival::new(Class::Critical)).unwrap()
}

/// An interactive request with `left` to go (it must get the slot 10 ms
/// before, for its work), then `ahead` critical requests, queued behind
/// `held`; 15 ms later the slot comes back.
fn interactive_in_a_hurry_behind_critical(
    shedder: &Shedder,
    clock: &shed_core::ManualClock,
    held: shed_core::Permit,
    left: std::time::Duration,
    ahead: usize,
) -> (Waiter, Vec<Waiter>) {
    let hurried = Arrival::new(Class::Interactive)
        .with_cohort(shed_core::Cohort::MAX)
        .with_timeout(left);
    let hurried = queued(shedder.admit(&hurried));
    let critical = (0..ahead)
        .map(|_| queued(shedder.admit(&Arrival::new(Class::Critical))))
        .collect();
    clock.advance(common::ms(15));
    drop(held);
    (hurried, critical)
}

#[test]
fn once_the_level_sheds_the_order_is_strict_even_for_a_waiter_in_a_hurry() {
    let (shedder, clock) = build(Shedder::builder().limit(1).queue_capacity(64));
    let held = busy_slot_of_10_ms(&shedder, &clock);
    // A wave of callers hanging up while queued: the level rises (and sheds
    // the least important positions, background retries, first). Sixteen
    // at once are not yet a surge the door would refuse.
    let waiting: Vec<_> = (0..16)
        .map(|_| queued(shedder.admit(&Arrival::new(Class::Interactive))))
        .collect();
    clock.advance(common::ms(50));
    drop(waiting);
    clock.advance(common::ms(60)); // the next event closes the interval
    assert!(shedder.try_admit(&Arrival::new(Class::Batch)).is_err());
    let level = shedder.level();
    assert!(level > shed_core::Level::NONE);
    assert!(!level.sheds(Rank::original(Class::Interactive), shed_core::Cohort::MAX));
    // While the level sheds, a request waits no longer than the service
    // takes: one critical request may queue. The interactive one queued
    // first and has 5 ms left to start when the slot comes back, where the
    // critical one ahead of it takes 10: it waits its turn all the same.
    let (mut hurried, mut critical) =
        interactive_in_a_hurry_behind_critical(&shedder, &clock, held, common::ms(30), 1);
    assert_pending(&mut hurried);
    let permit = ready(&mut critical[0]).expect("the most important waiter first");
    drop(permit);
}
