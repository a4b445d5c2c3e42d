//! No slot is ever lost: after 100,000 randomized admit, wait, cancel and
//! release operations from several threads, nothing is in flight and every
//! queue is empty, and the whole limit can be taken again.

mod common;

use std::sync::Barrier;
use std::task::Poll;

use common::{build, ms, poll_once};
use shed_core::{
    Admission, Arrival, Class, Clock, Cohort, Level, ManualClock, Permit, Shedder, Waiter,
};

const THREADS: u64 = 4;
const OPERATIONS: u64 = 100_000;
const LIMIT: usize = 4;

/// A seeded xorshift64 generator: the same seed, the same operations.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> XorShift {
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<T>(&mut self, items: &mut Vec<T>) -> Option<T> {
        if items.is_empty() {
            None
        } else {
            let index = self.below(items.len() as u64) as usize;
            Some(items.swap_remove(index))
        }
    }
}

fn random_arrival(rng: &mut XorShift, clock: &ManualClock) -> Arrival {
    let class = Class::ALL[rng.below(4) as usize];
    let mut arrival = Arrival::new(class).with_attempt(1 + rng.below(3) as u32);
    arrival = match rng.below(3) {
        0 => arrival,
        1 => arrival.with_cohort_key(rng.below(1_000)),
        _ => arrival.with_cohort(Cohort::new(rng.below(128) as u8).unwrap()),
    };
    if rng.below(4) == 0 {
        arrival = arrival.with_deadline(clock.now() + ms(rng.below(300)));
    }
    arrival
}

/// One thread's share of the operations. Returns with everything it held
/// released: every permit dropped, every waiter polled to its end or dropped.
fn random_operations(shedder: &Shedder, clock: &ManualClock, seed: u64, change_limit: bool) {
    let mut rng = XorShift::new(seed);
    let mut permits: Vec<Permit> = Vec::new();
    let mut waiters: Vec<Waiter> = Vec::new();
    for _ in 0..OPERATIONS / THREADS {
        match rng.below(100) {
            0..=29 => match shedder.admit(&random_arrival(&mut rng, clock)) {
                Admission::Admitted(permit) => permits.push(permit),
                Admission::Queued(waiter) => waiters.push(waiter),
                Admission::Rejected(_) => {}
            },
            30..=37 => {
                if let Ok(permit) = shedder.try_admit(&random_arrival(&mut rng, clock)) {
                    permits.push(permit);
                }
            }
            38..=57 => {
                if let Some(mut waiter) = rng.pick(&mut waiters) {
                    match poll_once(&mut waiter) {
                        Poll::Pending => waiters.push(waiter),
                        Poll::Ready(Ok(permit)) => permits.push(permit),
                        Poll::Ready(Err(_)) => {}
                    }
                }
            }
            58..=67 => drop(rng.pick(&mut waiters)), // cancel, granted or not
            68..=94 => drop(rng.pick(&mut permits)), // release
            95..=97 => clock.advance(ms(rng.below(5))),
            _ if change_limit => shedder.set_limit(1 + rng.below(8) as usize).unwrap(),
            _ => clock.advance(ms(rng.below(5))),
        }
        if !change_limit {
            assert!(
                shedder.in_flight() <= LIMIT as u32,
                "more in flight than the limit"
            );
        }
    }
    // Finish in a random order too.
    while !permits.is_empty() || !waiters.is_empty() {
        if rng.below(2) == 0 {
            drop(rng.pick(&mut permits));
        } else {
            drop(rng.pick(&mut waiters));
        }
    }
}

fn run(change_limit: bool) -> (Shedder, ManualClock) {
    let (shedder, clock) = build(Shedder::builder().limit(LIMIT).queue_capacity(16));
    let start = Barrier::new(THREADS as usize);
    std::thread::scope(|scope| {
        for thread in 0..THREADS {
            let (shedder, clock, start) = (&shedder, &clock, &start);
            scope.spawn(move || {
                start.wait();
                random_operations(shedder, clock, 0x5EED + thread, change_limit);
            });
        }
    });
    (shedder, clock)
}

/// Nothing held, nothing waiting, and after a quiet spell every slot can be
/// taken again, even by the least important rank (no stale waiter mark).
fn assert_nothing_lost(shedder: &Shedder, clock: &ManualClock) {
    assert_eq!(shedder.in_flight(), 0);
    let stats = shedder.stats();
    assert_eq!(stats.queue_len(), 0, "queues: {:?}", stats.queued);
    clock.advance(ms(10_000));
    let lowest = Arrival::new(Class::Background)
        .with_attempt(2)
        .with_cohort(Cohort::MIN);
    let permits: Vec<Permit> = (0..shedder.limit())
        .map(|_| shedder.try_admit(&lowest).expect("a free slot"))
        .collect();
    assert_eq!(shedder.level(), Level::NONE);
    assert!(
        shedder.try_admit(&lowest).is_err(),
        "more slots than the limit"
    );
    drop(permits);
    assert_eq!(shedder.in_flight(), 0);
}

#[test]
fn no_slot_is_lost_after_100_000_random_operations_from_several_threads() {
    let (shedder, clock) = run(false);
    let stats = shedder.stats();
    let (queued, rejected): (u64, u64) = stats
        .classes
        .iter()
        .fold((0, 0), |(q, r), c| (q + c.queued, r + c.rejected()));
    assert!(
        queued > 300 && rejected > 1_000,
        "the run never got busy: {queued} queued, {rejected} refused"
    );
    assert_nothing_lost(&shedder, &clock);
}

#[test]
fn no_slot_is_lost_while_the_limit_changes_under_load() {
    let (shedder, clock) = run(true);
    shedder.set_limit(LIMIT).unwrap();
    assert_nothing_lost(&shedder, &clock);
}
