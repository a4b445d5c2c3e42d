//! How long callers are seen to wait before they hang up, per class.
//!
//! Callers often advertise the whole operation's deadline while each attempt
//! gives up much sooner: a `grpc-timeout` of a second from a client whose
//! attempts time out at 250 ms. A request kept waiting at the door for
//! longer than its caller will wait is served to nobody, and under a service
//! whose work is not cancellable that is the road to collapse: each hang-up
//! frees a slot while the work goes on. So the engine watches hang-ups (a
//! waiter dropped while queued, a permit abandoned while served), measured
//! from the request's arrival at the door, and bounds door waits by what it
//! sees callers tolerate.
//!
//! The estimate is a low percentile (the 10th) of recent hang-up ages, so it
//! speaks for the impatient callers; it is known once at least
//! [`MIN_HANG_UPS`] were seen in the recent past (a decayed count), and
//! forgotten as hang-ups stop.
//!
//! # Memory ordering
//!
//! `Relaxed` throughout; the estimate is updated by the one thread closing a
//! controller interval, and read by everyone.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::histogram::{Counts, Histogram};
use crate::Class;

/// Decayed hang-ups needed before their ages are trusted.
const MIN_HANG_UPS: f64 = 8.0;
/// The share of past counts kept at each interval (about a second of memory
/// at the default 100 ms interval).
const DECAY: f64 = 0.9;
/// The percentile of hang-up ages taken as the callers' patience.
const QUANTILE: f64 = 0.1;

/// Hang-up ages, recorded by anyone, summarised where an interval closes.
#[derive(Debug)]
pub(crate) struct Patience {
    interval: [Histogram; Class::COUNT],
    /// Decayed counts per class; only the thread closing an interval locks it.
    recent: Mutex<[Counts; Class::COUNT]>,
    /// The estimate per class, in nanoseconds; 0 while unknown.
    estimate: [AtomicU64; Class::COUNT],
}

impl Patience {
    pub(crate) fn new() -> Patience {
        Patience {
            interval: [const { Histogram::new() }; Class::COUNT],
            recent: Mutex::new([Counts::default(); Class::COUNT]),
            estimate: [const { AtomicU64::new(0) }; Class::COUNT],
        }
    }

    /// A caller of `class` hung up `age` nanoseconds after its request arrived.
    pub(crate) fn record(&self, class: Class, age: u64) {
        self.interval[class.index()].record(age);
    }

    /// How long callers of `class` are seen to wait, once known.
    pub(crate) fn of(&self, class: Class) -> Option<u64> {
        match self.estimate[class.index()].load(Ordering::Relaxed) {
            0 => None,
            nanos => Some(nanos),
        }
    }

    /// Closes an interval: folds its hang-ups into the estimates. Returns
    /// how many hang-ups the interval saw.
    pub(crate) fn close_interval(&self) -> u64 {
        let mut recent = self.recent.lock();
        let mut hang_ups = 0.0;
        for class in Class::ALL {
            let index = class.index();
            let fresh = self.interval[index].take();
            hang_ups += fresh.total();
            recent[index] = recent[index].decayed_plus(DECAY, &fresh);
            let estimate = if recent[index].total() >= MIN_HANG_UPS {
                recent[index].quantile(QUANTILE).max(1)
            } else {
                0
            };
            self.estimate[index].store(estimate, Ordering::Relaxed);
        }
        hang_ups as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_few_hang_ups_are_not_enough_to_judge_patience() {
        let patience = Patience::new();
        for _ in 0..3 {
            patience.record(Class::Interactive, 250 * MS);
        }
        assert_eq!(patience.close_interval(), 3);
        assert_eq!(patience.of(Class::Interactive), None);
    }

    #[test]
    fn callers_that_give_up_at_250_ms_are_seen_to_wait_about_that_long() {
        let patience = Patience::new();
        for _ in 0..20 {
            patience.record(Class::Interactive, 250 * MS);
        }
        patience.close_interval();
        let seen = patience.of(Class::Interactive).expect("enough hang-ups");
        // Within the histogram bucket of 250 ms: [229 ms, 262 ms).
        assert!((229 * MS..=262 * MS).contains(&seen), "{seen}");
        assert_eq!(patience.of(Class::Batch), None, "each class on its own");
    }

    #[test]
    fn patience_is_forgotten_once_callers_stop_hanging_up() {
        let patience = Patience::new();
        for _ in 0..10 {
            patience.record(Class::Batch, 100 * MS);
        }
        patience.close_interval();
        assert!(patience.of(Class::Batch).is_some());
        for _ in 0..5 {
            patience.close_interval();
        }
        assert_eq!(patience.of(Class::Batch), None);
    }
}
