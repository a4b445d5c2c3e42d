//! The shedder never turns away work when there is no overload: below (and
//! at) capacity, every request is admitted at once, nothing waits, and the
//! level stays at NONE, interval after interval.

mod common;

use common::{arrival_at, ms, Door, Sim};
use shed_core::{Class, Level, Rank, Shedder};

fn assert_nothing_queued_or_refused(sim: &Sim) {
    let stats = sim.shedder.stats();
    for class in Class::ALL {
        let counts = stats.class(class);
        assert_eq!(counts.queued, 0, "{class}: {counts:?}");
        assert_eq!(counts.rejected(), 0, "{class}: {counts:?}");
    }
    assert_eq!(stats.level, Level::NONE);
    assert!(
        stats.recent_sojourn.unwrap_or_default().is_zero(),
        "something waited: {:?}",
        stats.recent_sojourn
    );
    assert_eq!(stats.queue_len(), 0);
}

#[test]
fn below_capacity_nothing_is_ever_queued_or_refused() {
    // Limit 8, 5 ms of service, one request per ms: 5 in flight at most.
    let mut sim = Sim::new(Shedder::builder().limit(8), ms(5));
    for at in 0..10_000u64 {
        sim.advance(ms(1));
        let rank = Rank::ALL[(at % 8) as usize];
        let mut arrival = arrival_at(rank);
        if at % 2 == 0 {
            arrival = arrival.with_deadline(sim.instant() + ms(100));
        }
        assert_eq!(sim.arrive(arrival), Door::Admitted, "at {at} ms");
        assert_eq!(sim.shedder.level(), Level::NONE, "at {at} ms");
    }
    sim.drain();
    assert_nothing_queued_or_refused(&sim);
    assert_eq!(
        sim.shedder
            .stats()
            .classes
            .iter()
            .map(|c| c.admitted)
            .sum::<u64>(),
        10_000
    );
    assert_eq!(sim.shedder.in_flight(), 0);
}

#[test]
fn at_exactly_capacity_nothing_waits() {
    // Limit 4, 4 ms of service, one request per ms: every slot busy, none short.
    let mut sim = Sim::new(Shedder::builder().limit(4), ms(4));
    for at in 0..5_000u64 {
        sim.advance(ms(1));
        assert_eq!(
            sim.arrive(arrival_at(Rank::ALL[(at % 8) as usize])),
            Door::Admitted
        );
    }
    assert_eq!(sim.shedder.in_flight(), 4);
    sim.drain();
    assert_nothing_queued_or_refused(&sim);
}

#[test]
fn bursts_that_fit_the_limit_are_admitted_without_waiting() {
    let mut sim = Sim::new(Shedder::builder().limit(16), ms(30));
    for at in 0..5_000u64 {
        sim.advance(ms(1));
        if at % 50 == 0 {
            for rank in Rank::ALL.iter().chain(Rank::ALL.iter()) {
                assert_eq!(sim.arrive(arrival_at(*rank)), Door::Admitted);
            }
        }
    }
    sim.drain();
    assert_nothing_queued_or_refused(&sim);
}
