//! Extreme but accepted values never overflow: every sum and product of
//! times saturates, the clock never runs backwards, and settings too large
//! to mean anything are refused at build time with what to set instead.

mod common;

use std::time::Duration;

use common::{build, ms, queued};
use shed_core::{Admission, Arrival, Class, Clock, ManualClock, RejectReason, Shedder};

/// About 292 years: half of what the engine's nanosecond clock can count.
const CENTURIES: Duration = Duration::from_nanos(u64::MAX / 2);

#[test]
fn a_minimum_useful_window_beyond_an_hour_is_refused() {
    for window in [Duration::from_secs(3_601), Duration::MAX] {
        let error = Shedder::builder()
            .min_useful_window(window)
            .build()
            .unwrap_err();
        assert_eq!(error.setting(), "min_useful_window");
        assert!(error.to_string().contains("set it"), "{error}");
    }
}

#[test]
fn a_maximum_wait_beyond_an_hour_is_refused() {
    let error = Shedder::builder()
        .max_wait(Class::Batch, Duration::MAX)
        .build()
        .unwrap_err();
    assert_eq!(error.setting(), "max_wait");
    assert!(error.to_string().contains("batch"), "{error}");
}

#[test]
fn the_longest_accepted_window_and_wait_never_overflow_at_the_door() {
    let hour = Duration::from_secs(3_600);
    let (shedder, clock) = build(
        Shedder::builder()
            .limit(1)
            .min_useful_window(hour)
            .max_wait(Class::Interactive, hour),
    );
    // Teach the engine a service time, so waiting requests need a predicted
    // wait plus the window.
    let served = shedder.try_admit(&Arrival::new(Class::Critical)).unwrap();
    clock.advance(ms(100));
    drop(served);
    let _held = shedder.try_admit(&Arrival::new(Class::Critical)).unwrap();

    let forever = Arrival::new(Class::Interactive).with_timeout(Duration::MAX);
    let mut waiting = queued(shedder.admit(&forever));
    assert!(waiting.expires_at() > clock.now());
    assert!(common::poll_once(&mut waiting).is_pending());
    let soon = Arrival::new(Class::Interactive).with_timeout(Duration::from_secs(60));
    let Admission::Rejected(refused) = shedder.admit(&soon) else {
        panic!("a minute is less than the hour-long window");
    };
    assert_eq!(refused.reason(), RejectReason::DeadlineUnmeetable);
}

#[test]
fn a_deadline_centuries_away_waits_no_longer_than_its_class_allows() {
    let (shedder, clock) = build(Shedder::builder().limit(1));
    let _held = shedder.try_admit(&Arrival::new(Class::Critical)).unwrap();
    let far = Arrival::new(Class::Batch).with_deadline(clock.now() + CENTURIES);
    let waiting = queued(shedder.admit(&far));
    assert_eq!(waiting.expires_at(), clock.now() + Duration::from_secs(1));
}

#[test]
fn a_manual_clock_advanced_past_its_range_stops_instead_of_running_backwards() {
    let clock = ManualClock::new();
    clock.advance(Duration::MAX);
    let far = clock.now();
    clock.advance(Duration::from_secs(1));
    assert!(clock.now() >= far);
    assert_eq!(clock.elapsed(), Duration::from_nanos(u64::MAX));
}

#[test]
fn service_times_of_centuries_do_not_overflow_the_measured_averages() {
    // About 196 years each: three of them sum to more than 64 bits of
    // nanoseconds, and three times their average does not fit either.
    const LONG: Duration = Duration::from_nanos(6_200_000_000_000_000_000);
    let (shedder, clock) = build(Shedder::builder().limit(8));
    let tick = || drop(shedder.try_admit(&Arrival::new(Class::Batch)));
    let held: Vec<_> = (0..3)
        .map(|_| shedder.try_admit(&Arrival::new(Class::Batch)).unwrap())
        .collect();
    clock.advance(LONG);
    tick(); // closes the interval the permits were taken in
    drop(held); // three completions in the next interval
    clock.advance(ms(100));
    tick();
    let slow = |rate: Option<f64>| rate.is_some_and(|rate| rate > 0.0 && rate < 1e-8);
    let rate = shedder.stats().drain_rate;
    assert!(slow(rate), "the sum wrapped: {rate:?}");

    let another = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
    clock.advance(LONG);
    drop(another);
    clock.advance(ms(100));
    tick();
    let rate = shedder.stats().drain_rate;
    assert!(slow(rate), "the moving average wrapped: {rate:?}");
}
