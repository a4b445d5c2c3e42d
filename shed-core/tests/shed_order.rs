//! The shed order, driven through the real controller: under sustained
//! overload, ranks are shed strictly in the order of [`Rank::ALL`], and
//! critical originals last.

mod common;

use common::{arrival_at, ms, Door, Sim};
use shed_core::{Class, Cohort, Level, Rank, RejectReason, Shedder};

const SIMULATED_MS: u64 = 12_000;

/// What one millisecond of overload looked like.
struct Millisecond {
    at: u64,
    level: Level,
    /// Which ranks' arrival was refused by the level this millisecond.
    shed: [bool; Rank::COUNT],
    critical_top_cohort_admitted: bool,
}

/// Limit 4, 10 ms of service each (0.4 requests per ms), and one arrival of
/// every rank every simulated millisecond (8 per ms): twenty times capacity.
/// Cohorts are spread with `with_cohort` so each rank cycles through all 128.
fn sustained_overload() -> Vec<Millisecond> {
    let mut sim = Sim::new(Shedder::builder().limit(4), ms(10));
    let mut history = Vec::new();
    for at in 0..SIMULATED_MS {
        sim.advance(ms(1));
        let mut shed = [false; Rank::COUNT];
        for rank in Rank::ALL {
            let cohort = (at * 5 + rank.index() as u64 * 16) % 128;
            let arrival = arrival_at(rank).with_cohort(Cohort::new(cohort as u8).unwrap());
            if let Door::Rejected(rejection) = sim.arrive(arrival) {
                shed[rank.index()] = rejection.reason() == RejectReason::Shed;
            }
        }
        // Probe the last cohort of critical originals now and then (probing
        // every millisecond would be load of its own that nothing may shed).
        let critical_top_cohort_admitted = at % 25 != 0 || {
            let top = arrival_at(Rank::ALL[7]).with_cohort(Cohort::MAX);
            !matches!(
                sim.arrive(top),
                Door::Rejected(rejection) if rejection.reason() == RejectReason::Shed
            )
        };
        history.push(Millisecond {
            at,
            level: sim.shedder.level(),
            shed,
            critical_top_cohort_admitted,
        });
    }
    history
}

fn first_shed(history: &[Millisecond]) -> [Option<u64>; Rank::COUNT] {
    let mut first = [None; Rank::COUNT];
    for ms in history {
        for rank in Rank::ALL {
            if ms.shed[rank.index()] && first[rank.index()].is_none() {
                first[rank.index()] = Some(ms.at);
            }
        }
    }
    first
}

#[test]
fn under_sustained_overload_every_rank_is_eventually_shed_by_level() {
    let first = first_shed(&sustained_overload());
    for rank in Rank::ALL {
        assert!(
            first[rank.index()].is_some(),
            "{rank} was never shed by level (first sheds: {first:?})"
        );
    }
}

#[test]
fn ranks_start_being_shed_in_the_shed_order() {
    let first = first_shed(&sustained_overload());
    for pair in Rank::ALL.windows(2) {
        let (earlier, later) = (pair[0], pair[1]);
        assert!(
            first[earlier.index()] <= first[later.index()],
            "{later} was shed (at {:?} ms) before {earlier} (at {:?} ms)",
            first[later.index()],
            first[earlier.index()]
        );
    }
}

#[test]
fn no_rank_is_shed_while_a_less_important_rank_still_has_admitted_cohorts() {
    for ms in sustained_overload() {
        for rank in Rank::ALL.into_iter().filter(|rank| ms.shed[rank.index()]) {
            for less in &Rank::ALL[..rank.index()] {
                assert!(
                    ms.shed[less.index()],
                    "at {} ms {rank} was shed but {less} was not",
                    ms.at
                );
                assert!(
                    ms.level.sheds(*less, Cohort::MAX),
                    "at {} ms {rank} was shed while {less} kept cohorts ({})",
                    ms.at,
                    ms.level
                );
            }
        }
    }
}

#[test]
fn critical_originals_are_shed_last_and_never_whole() {
    let history = sustained_overload();
    let first = first_shed(&history);
    let critical = Rank::original(Class::Critical);
    let critical_at = first[critical.index()].expect("critical originals were shed");
    for rank in &Rank::ALL[..critical.index()] {
        assert!(
            first[rank.index()].unwrap() < critical_at,
            "{rank} was first shed no earlier than critical originals"
        );
    }
    for ms in &history {
        assert!(
            ms.critical_top_cohort_admitted,
            "at {} ms the last cohort of critical originals was shed ({})",
            ms.at, ms.level
        );
    }
}
