//! How long a request may wait at the door: its class's maximum, its
//! deadline, what callers are seen to wait (callers often advertise the
//! whole operation's deadline while each attempt gives up much sooner, and a
//! request kept waiting past its caller's patience is served to nobody), and
//! while the controller sheds, no longer than a few completions' gaps (and
//! one gap per slot the service sustains): a sustained overload needs no
//! long queue, and every wait adds to everyone's latency.

mod common;

use std::collections::VecDeque;
use std::time::Duration;

use common::{build, ms, queued, rejected};
use shed_core::{
    Admission, Arrival, Class, Clock, Cohort, ManualClock, Permit, RejectReason, Shedder,
};

/// One slot, busy; callers of interactive requests are seen to hang up
/// after 250 ms: sixteen of them queued and gave up, across an interval.
/// Returns the busy permit.
fn callers_that_give_up_at_250_ms(shedder: &Shedder, clock: &ManualClock) -> Permit {
    let busy = shedder.try_admit(&Arrival::new(Class::Critical)).unwrap();
    interactive_callers_hang_up_after_250_ms(shedder, clock, ms(1));
    busy
}

/// Sixteen interactive requests queue and their callers hang up after
/// 250 ms; the interval closes `later`, on the next event. (Sixteen at once
/// are not yet a surge where one slot drains ten a second: the door keeps
/// them all.)
fn interactive_callers_hang_up_after_250_ms(
    shedder: &Shedder,
    clock: &ManualClock,
    later: Duration,
) {
    let waiting: Vec<_> = (0..16)
        .map(|_| queued(shedder.admit(&Arrival::new(Class::Interactive))))
        .collect();
    clock.advance(ms(250));
    drop(waiting);
    clock.advance(later);
    drop(shedder.try_admit(&Arrival::new(Class::Batch)));
}

#[test]
fn without_hang_ups_a_waiter_may_wait_its_class_maximum() {
    let (shedder, clock) = build(Shedder::builder().limit(1));
    let _busy = shedder.try_admit(&Arrival::new(Class::Critical)).unwrap();
    let waiter = queued(shedder.admit(&Arrival::new(Class::Interactive)));
    assert_eq!(waiter.expires_at(), clock.now() + ms(500));
}

#[test]
fn a_waiter_leaves_the_queue_once_callers_like_it_are_seen_to_hang_up() {
    let (shedder, clock) = build(Shedder::builder().limit(1));
    let _busy = callers_that_give_up_at_250_ms(&shedder, &clock);
    // Advertising a whole second does not buy more than callers wait.
    let arrival = Arrival::new(Class::Interactive)
        .with_cohort(Cohort::MAX)
        .with_timeout(Duration::from_secs(1));
    let waiter = queued(shedder.admit(&arrival));
    let waits = waiter.expires_at() - clock.now();
    // The 250 ms hang-ups fall in the histogram bucket [229 ms, 262 ms).
    assert!(waits <= ms(262), "{waits:?}: at most the patience seen");
    assert!(waits >= ms(229), "{waits:?}: about the patience seen");
}

#[test]
fn patience_is_judged_per_class() {
    let (shedder, clock) = build(Shedder::builder().limit(1));
    let _busy = callers_that_give_up_at_250_ms(&shedder, &clock);
    let critical = queued(shedder.admit(&Arrival::new(Class::Critical)));
    assert_eq!(critical.expires_at(), clock.now() + Duration::from_secs(1));
}

#[test]
fn a_queue_longer_than_callers_wait_refuses_for_overload_with_a_retry_after() {
    let (shedder, clock) = build(Shedder::builder().limit(1));
    // A 100 ms service time, learnt over an interval.
    let served = shedder.try_admit(&Arrival::new(Class::Critical)).unwrap();
    clock.advance(ms(100));
    drop(served);
    let _busy = callers_that_give_up_at_250_ms(&shedder, &clock);
    // Callers wait about 230 ms, and the work's 95th percentile is 100 ms:
    // a request may wait 130 ms. The first waits 100 ms (one slot time);
    // the next would wait 200 ms.
    // (The last cohort: the wave of hang-ups raised the level a little.)
    let interactive = Arrival::new(Class::Interactive).with_cohort(Cohort::MAX);
    let _ahead = queued(shedder.admit(&interactive));
    let refused = rejected(shedder.admit(&interactive));
    assert_eq!(refused.reason(), RejectReason::QueueFull);
    assert!(refused.retry_after().is_some());
}

#[test]
fn while_the_controller_sheds_a_request_waits_no_longer_than_the_service_takes() {
    let (shedder, clock) = build(Shedder::builder().limit(1));
    let (held, batch) = one_slot_with_a_standing_batch_queue(&shedder, &clock);
    // Nothing waits now: the first batch request may wait one slot time
    // (10 ms, the mean service time); the second would wait two.
    let _first = queued(shedder.admit(&batch));
    let refused = rejected(shedder.admit(&batch));
    assert_eq!(refused.reason(), RejectReason::QueueFull);
    assert!(refused.retry_after().is_some());
    drop(held);
}

#[test]
fn while_the_controller_sheds_a_waiter_of_the_shed_rank_is_refused_after_two_slot_times() {
    let (shedder, clock) = build(Shedder::builder().limit(1));
    let (held, batch) = one_slot_with_a_standing_batch_queue(&shedder, &clock);
    // Critical requests arrive behind it and are served first: its wait
    // was predicted at one slot time (10 ms), and it may wait two.
    let queued_at = clock.now();
    let mut waiter = queued(shedder.admit(&batch));
    assert_eq!(waiter.expires_at(), queued_at + ms(20));
    let _ahead = queued(shedder.admit(&Arrival::new(Class::Critical)));
    clock.advance(ms(20));
    let refused = common::ready(&mut waiter).expect_err("refused, not served");
    assert_eq!(refused.reason(), RejectReason::QueueTimeout);
    drop(held);
}

#[test]
fn while_the_controller_sheds_a_rank_drained_with_room_to_spare_keeps_its_queue() {
    let (shedder, clock) = build(Shedder::builder().limit(1));
    let (held, _batch) = one_slot_with_a_standing_batch_queue(&shedder, &clock);
    // Critical requests came at one an interval, a tenth of what the slot
    // drains: served first, they wait for each other only, and a few of
    // them at once are a burst of their own, not the overload's share.
    let critical = Arrival::new(Class::Critical);
    let queued_at = clock.now();
    let waiters: Vec<_> = (0..3).map(|_| queued(shedder.admit(&critical))).collect();
    for waiter in &waiters {
        assert_eq!(waiter.expires_at(), queued_at + Duration::from_secs(1));
    }
    drop((waiters, held));
}

#[test]
fn before_the_level_has_judged_an_overload_the_door_keeps_its_short_queue() {
    let (shedder, clock) = one_slot_of_10_ms();
    // Then forty batch requests in an interval, four times what the slot
    // drains; none of them waits, so no rank has a standing queue to judge
    // and the level stays where it is.
    let _busy = shedder.try_admit(&Arrival::new(Class::Critical)).unwrap();
    let batch = Arrival::new(Class::Batch).with_cohort(Cohort::MAX);
    for _ in 0..40 {
        assert!(shedder.try_admit(&batch).is_err());
    }
    clock.advance(ms(100));
    assert!(shedder.try_admit(&batch).is_err(), "the interval closes");
    assert_eq!(shedder.level(), shed_core::Level::NONE);
    // The load outpaced the slot: the first batch request may wait one slot
    // time, the second would wait two.
    let _first = queued(shedder.admit(&batch));
    let refused = rejected(shedder.admit(&batch));
    assert_eq!(refused.reason(), RejectReason::QueueFull);
}

/// One slot, 10 ms each, held by a critical request, with twenty batch
/// requests in a standing queue for a whole interval: the controller raises
/// the level. Returns the permit in service and the batch arrival.
fn one_slot_with_a_standing_batch_queue(
    shedder: &Shedder,
    clock: &ManualClock,
) -> (Permit, Arrival) {
    let mut held = shedder.try_admit(&Arrival::new(Class::Critical)).unwrap();
    let batch = Arrival::new(Class::Batch).with_cohort(Cohort::MAX);
    let mut waiting: std::collections::VecDeque<_> =
        (0..20).map(|_| queued(shedder.admit(&batch))).collect();
    for _ in 0..10 {
        clock.advance(ms(10));
        drop(held);
        let mut next = waiting.pop_front().unwrap();
        held = common::ready(&mut next).unwrap();
    }
    assert!(shedder.level() > shed_core::Level::NONE);
    (held, batch)
}

#[test]
fn a_waiter_queued_before_any_hang_up_is_refused_once_it_outwaited_its_callers() {
    let (shedder, clock) = build(Shedder::builder().limit(1));
    let busy = shedder.try_admit(&Arrival::new(Class::Critical)).unwrap();
    // It queues while nobody has hung up yet: its class's maximum, 500 ms.
    let queued_at = clock.now();
    // The last cohort of its rank: the wave of hang-ups below raises the
    // level, which must not shed it first (a drawn cohort could be shed).
    let interactive = Arrival::new(Class::Interactive).with_cohort(Cohort::MAX);
    let mut early = queued(shedder.admit(&interactive));
    assert_eq!(early.expires_at(), queued_at + ms(500));
    // Then callers like it are seen to give up after 250 ms.
    interactive_callers_hang_up_after_250_ms(&shedder, &clock, ms(50));
    // The slot comes back 300 ms after it queued: served now, its caller
    // would likely hang up half-way. It is refused, and its expiry reads
    // as when its patience ran out (the 250 ms hang-ups fall in the
    // histogram bucket [229 ms, 262 ms)).
    drop(busy);
    let refused = common::ready(&mut early).expect_err("refused, not served");
    assert_eq!(refused.reason(), RejectReason::QueueTimeout);
    let waited = early.expires_at() - queued_at;
    assert!((ms(229)..=ms(262)).contains(&waited), "{waited:?}");
    assert!(early.expires_at() <= clock.now());
    assert_eq!(shedder.in_flight(), 0, "the slot is not lost");
}

/// A limit set far above what the service runs at once: 64 slots whose
/// requests each hold theirs for 160 ms (the work queues inside the
/// service), so completions come 2.5 ms apart. Four batch requests wait;
/// then for `ticks` completions, each of the oldest permit hands its slot
/// to a waiter and a new batch request queues, and `also` is called with
/// the shedder and the tick's number for whatever else arrives. Then,
/// the controller shedding and the waiting queue let go, how many batch
/// requests the door lets wait before it refuses one for a full queue
/// (with a Retry-After).
fn overload_queue_of_64_slots_of_160_ms(
    ticks: usize,
    mut also: impl FnMut(&Shedder, usize),
) -> usize {
    let (shedder, clock) = build(Shedder::builder().limit(64));
    let gap = Duration::from_micros(2_500);
    let mut held: VecDeque<Permit> = (0..64)
        .map(|_| {
            clock.advance(gap);
            shedder.try_admit(&Arrival::new(Class::Critical)).unwrap()
        })
        .collect();
    let batch = Arrival::new(Class::Batch).with_cohort(Cohort::MAX);
    let mut waiting: VecDeque<_> = (0..4).map(|_| queued(shedder.admit(&batch))).collect();
    for tick in 0..ticks {
        clock.advance(gap);
        drop(held.pop_front());
        let mut next = waiting.pop_front().unwrap();
        held.push_back(common::ready(&mut next).unwrap());
        waiting.push_back(queued(shedder.admit(&batch)));
        also(&shedder, tick);
    }
    assert!(shedder.level() > shed_core::Level::NONE);
    drop(waiting);
    let mut let_in = Vec::new();
    loop {
        match shedder.admit(&batch) {
            Admission::Queued(waiter) => let_in.push(waiter),
            Admission::Rejected(refused) => {
                assert_eq!(refused.reason(), RejectReason::QueueFull);
                assert!(refused.retry_after().is_some());
                return let_in.len();
            }
            Admission::Admitted(_) => panic!("no slot is free"),
        }
    }
}

/// Under twice as many batch requests as completions, while the controller
/// sheds, the door keeps only the eight waiters that bridge the gaps
/// between completions (8 x 2.5 ms = 20 ms), not a queue as long as the
/// service's own 160 ms.
#[test]
fn under_a_limit_far_above_the_service_a_shedding_door_keeps_eight_waiters() {
    let batch = Arrival::new(Class::Batch).with_cohort(Cohort::MAX);
    let let_in = overload_queue_of_64_slots_of_160_ms(200, |shedder, _| {
        assert!(shedder.try_admit(&batch).is_err());
    });
    assert_eq!(let_in, 8);
}

/// The same service offered a third more than it drains, the third in
/// background requests: an overload still (the load outpaces the drain,
/// the level sheds them), but a queue of eight would refuse what the
/// service could finish (a load near the drain rate stands its queue full
/// often). The queue is stretched to `ln 64 / ln(4/3)` = 14.5 waiters (14
/// with the door's rounding).
#[test]
fn a_third_over_the_drain_rate_a_shedding_door_keeps_fourteen_waiters() {
    let background = Arrival::new(Class::Background);
    // For 10 s (the slow averages of arrivals and completions settle),
    // four requests for every three completions: a batch request waits for
    // each completion, and every third completion a background request
    // finds no slot or is shed.
    let let_in = overload_queue_of_64_slots_of_160_ms(4_000, |shedder, tick| {
        if tick % 3 == 0 {
            assert!(shedder.try_admit(&background).is_err());
        }
    });
    assert_eq!(let_in, 14);
}

/// The same service offered four times what it drains, three parts of it
/// background requests that the level sheds: the load that passes the
/// level comes close to the drain rate, but the overload is four times it,
/// and its queue stays eight waiters long (counting only what passes, it
/// would stretch, and every waiter would wait for nothing but latency).
#[test]
fn at_four_times_the_drain_rate_a_door_whose_level_sheds_most_keeps_eight_waiters() {
    let background = Arrival::new(Class::Background);
    let mut shed_by_level = 0;
    let let_in = overload_queue_of_64_slots_of_160_ms(2_000, |shedder, _| {
        for _ in 0..3 {
            let refused = shedder.try_admit(&background).unwrap_err();
            shed_by_level += usize::from(refused.reason() == RejectReason::Shed);
        }
    });
    assert!(
        shed_by_level > 3_000,
        "the level shed {shed_by_level} of 6,000"
    );
    assert_eq!(let_in, 8);
}

/// An adaptive limit's probe cuts the limit in force (16 to 4 here, a
/// quarter while no clean baseline was measured) for a round, while the
/// limit the service is held to sustain stays 16. The
/// overload's queue is still eight waiters long, counted in the probe's
/// slot times: bounded by one mean service time, it would shrink to four,
/// and the important requests the cut drain still serves would be refused
/// whenever a few of them queued at once.
#[test]
fn a_probe_of_the_adaptive_limit_keeps_the_overload_queue_eight_waiters_long() {
    let adaptive = shed_core::AdaptiveLimit::new().initial(16);
    let mut sim = common::Sim::new(Shedder::builder().adaptive_limit(adaptive), ms(20));
    // Twice the capacity of 16 slots of 20 ms, in batch requests.
    let batch = Arrival::new(Class::Batch).with_cohort(Cohort::MAX);
    let tick = Duration::from_micros(1_250);
    let mut probing = false;
    for _ in 0..4_000 {
        sim.arrive(batch);
        sim.arrive(batch);
        sim.advance(tick);
        let phase = sim.shedder.stats().adaptive.map(|adaptive| adaptive.phase);
        probing = phase == Some("probing")
            && sim.shedder.limit() == 4
            && sim.shedder.level() > shed_core::Level::NONE;
        if probing {
            break;
        }
    }
    assert!(
        probing,
        "the probe's cut under a raised level was never seen"
    );
    // The batch queue holds eight waiters: let the ones from before the
    // overload drain (the probe goes on), top it up to eight, and the next
    // arrival is refused.
    let still_probing = |sim: &common::Sim| {
        let phase = sim.shedder.stats().adaptive.map(|adaptive| adaptive.phase);
        phase == Some("probing") && sim.shedder.limit() == 4
    };
    while sim.waiting() >= 8 {
        sim.advance(Duration::from_micros(100));
        assert!(
            still_probing(&sim),
            "the probe ended while its queue drained"
        );
    }
    let waiting = sim.waiting();
    for _ in waiting..8 {
        assert_eq!(sim.arrive(batch), common::Door::Queued);
    }
    let common::Door::Rejected(ninth) = sim.arrive(batch) else {
        panic!("a ninth waiter was let in");
    };
    assert_eq!(ninth.reason(), RejectReason::QueueFull);
}

#[test]
fn waiters_queued_before_an_overload_are_held_to_its_wait_once_it_is_seen() {
    let (shedder, clock) = one_slot_of_10_ms();
    let busy = shedder.try_admit(&Arrival::new(Class::Critical)).unwrap();
    // It queues before anything is overloaded: nothing bounds its wait but
    // its class's maximum. (The last cohort of its rank: no level sheds it.)
    let batch = Arrival::new(Class::Batch).with_cohort(Cohort::MAX);
    let queued_at = clock.now();
    let mut early = queued(shedder.admit(&batch));
    assert!(early.expires_at() >= queued_at + ms(500));
    // Then a surge: forty batch requests in an interval, four times what
    // the slot drains, and it goes on after the interval closes.
    for _ in 0..40 {
        assert!(shedder.try_admit(&batch).is_err());
    }
    clock.advance(ms(100));
    for _ in 0..20 {
        assert!(shedder.try_admit(&batch).is_err());
    }
    // The slot comes back 100 ms after the early one queued: ten slot
    // times, five times what a waiter queued in the surge may wait (two
    // slot times). It is refused, as that one would be; its expiry reads
    // as when the overload's bound ran out.
    drop(busy);
    let refused = common::ready(&mut early).expect_err("refused, not served");
    assert_eq!(refused.reason(), RejectReason::QueueTimeout);
    assert!(refused.retry_after().is_some());
    assert!(early.expires_at() < clock.now());
    assert_eq!(shedder.in_flight(), 0, "the slot is not lost");
}

/// A shedder with one slot whose 10 ms service time it has learnt over an
/// interval that closed.
fn one_slot_of_10_ms() -> (Shedder, ManualClock) {
    let (shedder, clock) = build(Shedder::builder().limit(1));
    for _ in 0..5 {
        let served = shedder.try_admit(&Arrival::new(Class::Critical)).unwrap();
        clock.advance(ms(10));
        drop(served);
    }
    clock.advance(ms(60));
    drop(shedder.try_admit(&Arrival::new(Class::Critical)));
    (shedder, clock)
}
