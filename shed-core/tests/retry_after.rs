//! Retry-After is computed, not constant: less important ranks and retries
//! are told to wait longer at the same engine state; the value is whole
//! seconds, at least 1, capped, and its jitter stays within its fraction.

mod common;

use std::time::Duration;

use common::{build, ms, queued, ready};
use shed_core::{
    Arrival, Class, Cohort, ManualClock, Permit, Rank, RejectReason, RetryAfter, Shedder,
    ShedderBuilder,
};

/// One slot, held, and no queue: every arrival is refused with QueueFull at
/// the same engine state. A long interval makes the delays several seconds.
fn full(builder: ShedderBuilder) -> (Shedder, ManualClock, Permit) {
    let (shedder, clock) = build(
        builder
            .limit(1)
            .queue_capacity(0)
            .interval(Duration::from_secs(4)),
    );
    let held = shedder
        .try_admit(&Arrival::new(Class::Critical).with_cohort(Cohort::MAX))
        .unwrap();
    (shedder, clock, held)
}

fn retry_after(shedder: &Shedder, arrival: Arrival) -> RetryAfter {
    let refused = shedder.try_admit(&arrival).unwrap_err();
    assert!(refused.reason().is_overload());
    refused
        .retry_after()
        .expect("overload carries a Retry-After")
}

fn at(rank: Rank) -> Arrival {
    common::arrival_at(rank).with_cohort(Cohort::MAX)
}

#[test]
fn lower_ranks_are_told_to_wait_longer_in_the_shed_order() {
    let (shedder, _clock, _held) = full(Shedder::builder().retry_after_jitter(0.0));
    let delays: Vec<RetryAfter> = Rank::ALL
        .iter()
        .map(|rank| retry_after(&shedder, at(*rank)))
        .collect();
    for (pair, ranks) in delays.windows(2).zip(Rank::ALL.windows(2)) {
        assert!(
            pair[0] > pair[1],
            "{} was told {:?}, no longer than {} ({:?})",
            ranks[0],
            pair[0].exact(),
            ranks[1],
            pair[1].exact()
        );
        assert!(pair[0].as_secs() > pair[1].as_secs());
    }
}

#[test]
fn less_important_classes_are_told_to_wait_longer() {
    let (shedder, _clock, _held) = full(Shedder::builder().retry_after_jitter(0.0));
    for attempt in [1, 2] {
        for pair in Class::ALL.windows(2) {
            let (less, more) = (Rank::of(pair[0], attempt), Rank::of(pair[1], attempt));
            assert!(retry_after(&shedder, at(less)) > retry_after(&shedder, at(more)));
        }
    }
}

#[test]
fn a_retry_is_told_to_wait_longer_than_any_original() {
    let (shedder, _clock, _held) = full(Shedder::builder().retry_after_jitter(0.0));
    let shortest_retry = Class::ALL
        .iter()
        .map(|class| retry_after(&shedder, at(Rank::retry(*class))))
        .min()
        .unwrap();
    let longest_original = Class::ALL
        .iter()
        .map(|class| retry_after(&shedder, at(Rank::original(*class))))
        .max()
        .unwrap();
    assert!(shortest_retry > longest_original);
}

#[test]
fn a_longer_queue_ahead_means_a_longer_wait() {
    let (shedder, clock) = build(
        Shedder::builder()
            .limit(1)
            .queue_capacity(64)
            .interval(ms(10))
            .retry_after_jitter(0.0),
    );
    // Learn the drain rate: 10 ms per request on one slot.
    let served = shedder.try_admit(&Arrival::new(Class::Critical)).unwrap();
    clock.advance(ms(10));
    drop(served);
    let _held = shedder.try_admit(&Arrival::new(Class::Critical)).unwrap();
    assert_eq!(shedder.stats().drain_rate, Some(100.0));

    let empty_queue = retry_after(&shedder, Arrival::new(Class::Batch));
    // (Twelve at once: not yet a surge the door would refuse.)
    let _ahead: Vec<_> = (0..12)
        .map(|_| queued(shedder.admit(&Arrival::new(Class::Batch))))
        .collect();
    let long_queue = retry_after(&shedder, Arrival::new(Class::Batch));
    assert!(
        long_queue > empty_queue,
        "{long_queue:?} vs {empty_queue:?}"
    );
    // Waiters of a less important rank are not ahead of a critical request.
    let critical = retry_after(&shedder, Arrival::new(Class::Critical));
    assert!(critical < long_queue);
}

#[test]
fn ranks_further_below_the_level_are_told_to_wait_longer() {
    let (shedder, clock) = build(
        Shedder::builder()
            .limit(1)
            .queue_capacity(64)
            .retry_after_jitter(0.0),
    );
    // A standing queue of batch requests (behind a critical one, so no batch
    // request ever finds a free slot) for one interval raises the level past
    // every rank below batch.
    let batch = Arrival::new(Class::Batch).with_cohort(Cohort::MAX);
    let mut held = shedder.try_admit(&Arrival::new(Class::Critical)).unwrap();
    let mut waiting: Vec<_> = (0..20).map(|_| queued(shedder.admit(&batch))).collect();
    for _ in 0..10 {
        clock.advance(ms(10));
        drop(held);
        held = ready(&mut waiting.remove(0)).unwrap();
    }
    let shed = |arrival: Arrival| {
        let refused = shedder.try_admit(&arrival).unwrap_err();
        assert_eq!(refused.reason(), RejectReason::Shed);
        refused.retry_after().unwrap()
    };
    let below_batch = &Rank::ALL[..Rank::original(Class::Batch).index()];
    for pair in below_batch.windows(2) {
        let first = common::arrival_at(pair[0]).with_cohort(Cohort::MIN);
        let second = common::arrival_at(pair[1]).with_cohort(Cohort::MIN);
        assert!(shed(first) > shed(second), "{} vs {}", pair[0], pair[1]);
    }
    let lowest = common::arrival_at(Rank::ALL[0]);
    assert!(shed(lowest.with_cohort(Cohort::MIN)) > shed(lowest.with_cohort(Cohort::MAX)));
    drop(held);
}

#[test]
fn retry_after_is_whole_seconds_rounded_up_and_at_least_one() {
    let (shedder, _clock, _held) = full(Shedder::builder());
    for rank in Rank::ALL {
        for _ in 0..20 {
            let after = retry_after(&shedder, at(rank));
            assert!(after.as_secs() >= 1);
            assert_eq!(after.as_secs(), after.exact().as_secs_f64().ceil() as u64);
            assert_eq!(
                after.as_millis(),
                after.exact().as_nanos().div_ceil(1_000_000) as u64
            );
        }
    }
    // A delay shorter than a second still says one second on the wire.
    let (quick, _clock) = build(Shedder::builder().limit(1).interval(ms(10)));
    let _held = quick.try_admit(&Arrival::new(Class::Critical)).unwrap();
    let after = retry_after(&quick, Arrival::new(Class::Critical));
    assert!(after.exact() < Duration::from_secs(1));
    assert_eq!(after.as_secs(), 1);
}

#[test]
fn retry_after_never_exceeds_the_cap() {
    let cap = Duration::from_secs(5);
    let (shedder, _clock, _held) = full(
        Shedder::builder()
            .retry_after_cap(cap)
            .retry_after_jitter(1.0),
    );
    for rank in Rank::ALL {
        for _ in 0..50 {
            let after = retry_after(&shedder, at(rank));
            assert!(after.exact() <= cap, "{rank}: {:?}", after.exact());
            assert!(after.as_secs() <= cap.as_secs());
        }
    }
    // The least important rank's computed 11 s is cut to the cap exactly.
    assert_eq!(retry_after(&shedder, at(Rank::ALL[0])).exact(), cap);
}

#[test]
fn a_cap_changed_on_a_running_engine_bounds_the_next_refusal() {
    let (shedder, _clock, _held) = full(Shedder::builder().retry_after_jitter(0.0));
    let before = retry_after(&shedder, at(Rank::ALL[0]));
    assert!(
        before.exact() > Duration::from_secs(5),
        "{:?}",
        before.exact()
    );

    shedder.set_retry_after_cap(Duration::from_secs(5)).unwrap();
    assert_eq!(
        retry_after(&shedder, at(Rank::ALL[0])).exact(),
        Duration::from_secs(5)
    );
}

#[test]
fn jitter_stays_within_its_fraction_and_spreads_callers() {
    let (plain, _clock, _held) = full(Shedder::builder().retry_after_jitter(0.0));
    let (jittered, _clock2, _held2) = full(Shedder::builder().retry_after_jitter(0.25));
    for rank in Rank::ALL {
        let base = retry_after(&plain, at(rank)).exact();
        let samples: Vec<Duration> = (0..200)
            .map(|_| retry_after(&jittered, at(rank)).exact())
            .collect();
        for sample in &samples {
            assert!(
                *sample >= base && *sample <= base.mul_f64(1.25),
                "{rank}: {sample:?} outside [{base:?}, {:?}]",
                base.mul_f64(1.25)
            );
        }
        let distinct: std::collections::BTreeSet<_> = samples.iter().collect();
        assert!(
            distinct.len() > 100,
            "{rank}: jitter gave {} values",
            distinct.len()
        );
    }
}

#[test]
fn without_jitter_the_same_state_gives_the_same_answer() {
    let (shedder, _clock, _held) = full(Shedder::builder().retry_after_jitter(0.0));
    let first = retry_after(&shedder, Arrival::new(Class::Batch));
    for _ in 0..20 {
        assert_eq!(retry_after(&shedder, Arrival::new(Class::Batch)), first);
    }
}
