//! Gradual shedding: when one rank overloads and only part of its traffic
//! needs shedding, the level stops inside that rank, and a caller key keeps
//! one verdict at a given level.

mod common;

use common::{ms, wall_clock_hour, Door, Sim};
use shed_core::{Arrival, Class, Cohort, Level, Rank, RejectReason, Shedder};

const BATCH: Rank = Rank::original(Class::Batch);
const KEYS: u64 = 512;
const WARM_UP_MS: u64 = 1_000;
const SIMULATED_MS: u64 = 8_000;

/// One batch request at the door: its caller key, the level it met, and
/// whether the level refused it.
struct Verdict {
    at: u64,
    key: u64,
    level: Level,
    shed: bool,
}

/// Batch originals only, one every 2 ms (0.5 per ms) against limit 4 with
/// 10 ms of service (0.4 per ms): a fifth of batch traffic must go.
/// Each request carries one of 512 caller keys.
fn batch_overloaded_by_a_quarter() -> (Vec<Verdict>, Sim) {
    let mut sim = Sim::new(Shedder::builder().limit(4), ms(10));
    let mut verdicts = Vec::new();
    for at in 0..SIMULATED_MS {
        sim.advance(ms(1));
        if at % 2 != 0 {
            continue;
        }
        let key = (at / 2 * 37) % KEYS;
        let door = sim.arrive(Arrival::new(Class::Batch).with_cohort_key(key));
        // The door updates the level first (when an interval ended), then judges.
        let level = sim.shedder.level();
        let shed =
            matches!(door, Door::Rejected(rejection) if rejection.reason() == RejectReason::Shed);
        verdicts.push(Verdict {
            at,
            key,
            level,
            shed,
        });
    }
    (verdicts, sim)
}

/// Runs `scenario` again if the wall-clock hour (which rotates caller keys
/// across cohorts) turned while it ran.
fn within_one_hour<T>(scenario: impl Fn() -> T) -> (T, u64) {
    loop {
        let hour = wall_clock_hour();
        let outcome = scenario();
        if wall_clock_hour() == hour {
            return (outcome, hour);
        }
    }
}

#[test]
fn one_overloaded_rank_is_shed_only_in_part() {
    let (verdicts, sim) = batch_overloaded_by_a_quarter();
    let steady: Vec<&Verdict> = verdicts.iter().filter(|v| v.at >= WARM_UP_MS).collect();
    let shed = steady.iter().filter(|v| v.shed).count();
    assert!(shed > 0, "the overloaded rank was never shed");
    assert!(
        shed < steady.len() / 2,
        "{shed} of {} batch requests were shed to remove a fifth of the load",
        steady.len()
    );
    for verdict in &steady {
        assert!(
            verdict.level < Level::new(Level::position(BATCH, Cohort::new(64).unwrap())),
            "at {} ms the level ({}) reached the upper half of batch's cohorts",
            verdict.at,
            verdict.level
        );
    }
    let stats = sim.shedder.stats();
    assert!(stats.class(Class::Batch).admitted > stats.class(Class::Batch).shed);
}

#[test]
fn while_one_rank_overloads_the_level_boundary_lies_inside_it() {
    let (verdicts, _) = batch_overloaded_by_a_quarter();
    for verdict in verdicts.iter().filter(|v| v.shed) {
        let (rank, cohorts) = verdict.level.boundary();
        assert_eq!(
            rank, BATCH,
            "at {} ms the level was {}",
            verdict.at, verdict.level
        );
        assert!(cohorts > 0 && cohorts < Cohort::COUNT);
    }
}

#[test]
fn a_caller_key_is_consistently_admitted_or_refused_at_a_given_level() {
    let (verdicts, hour) = within_one_hour(|| batch_overloaded_by_a_quarter().0);
    for verdict in &verdicts {
        let cohort = Cohort::from_key(verdict.key, hour);
        assert_eq!(
            verdict.shed,
            verdict.level.sheds(BATCH, cohort),
            "key {} (cohort {}) at level {} ({} ms)",
            verdict.key,
            cohort.get(),
            verdict.level,
            verdict.at
        );
    }
    // The same key is refused at a level only if it is refused at every
    // higher level: its verdicts never interleave.
    for key in 0..KEYS {
        let of_key = || verdicts.iter().filter(|v| v.key == key);
        let highest_admitted = of_key().filter(|v| !v.shed).map(|v| v.level).max();
        let lowest_refused = of_key().filter(|v| v.shed).map(|v| v.level).min();
        if let (Some(admitted), Some(refused)) = (highest_admitted, lowest_refused) {
            assert!(
                admitted < refused,
                "key {key} was admitted at {admitted} but refused at {refused}"
            );
        }
    }
}
