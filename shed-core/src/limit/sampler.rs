//! What the adaptive limit learns from: lock-free counters that permits and
//! the door add to, drained into [`IntervalSamples`] where an interval closes.
//!
//! # Memory ordering
//!
//! `Relaxed` throughout: a sample counted in the next interval instead of
//! this one changes nothing that matters, and the epoch only tells samples
//! of the current limit from older ones (one admitted a moment before a new
//! epoch is counted as old, or as new, either way a fair sample).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::estimator::IntervalSamples;
use crate::controller::Closed;

/// Hold times are clamped to this (an hour) before they are summed, so no
/// interval's sum can overflow.
const MAX_HOLD: u64 = 3_600_000_000_000;

/// How a permit's slot came back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ending {
    /// The work finished (successfully or not): a full sample.
    Completed,
    /// The caller gave up first (hung up, was cancelled): a censored sample,
    /// whose work may go on downstream.
    Abandoned,
    /// The deadline passed and the host cut the work off: censored too.
    DeadlineCut,
}

/// The adaptive limit's counters for the current interval.
#[derive(Debug, Default)]
pub(crate) struct Sampler {
    epoch: AtomicU32,
    blocked: AtomicU64,
    released: AtomicU64,
    released_censored: AtomicU64,
    handed_off: AtomicU64,
    completed: AtomicU64,
    completed_hold: AtomicU64,
    censored: AtomicU64,
    censored_hold: AtomicU64,
}

impl Sampler {
    /// The epoch a permit admitted now belongs to.
    pub(crate) fn epoch(&self) -> u32 {
        self.epoch.load(Ordering::Relaxed)
    }

    /// Starts a new epoch: permits admitted before it no longer count as
    /// samples of the limit in force. Where an interval closes, whose
    /// samples were just taken.
    pub(crate) fn new_epoch(&self) {
        self.epoch.fetch_add(1, Ordering::Relaxed);
    }

    /// Starts a new epoch partway through an interval (an operator set the
    /// limit): the interval's samples so far, of permits admitted under the
    /// old limit, are dropped, or they would count as the new epoch's.
    /// Permits given back are still counted as released.
    pub(crate) fn new_epoch_now(&self) {
        self.new_epoch();
        for counter in [
            &self.completed,
            &self.completed_hold,
            &self.censored,
            &self.censored_hold,
        ] {
            counter.store(0, Ordering::Relaxed);
        }
    }

    /// An arrival found every slot taken.
    pub(crate) fn record_blocked(&self) {
        self.blocked.fetch_add(1, Ordering::Relaxed);
    }

    /// A released slot went straight to a waiting request.
    pub(crate) fn record_handed_off(&self) {
        self.handed_off.fetch_add(1, Ordering::Relaxed);
    }

    /// A permit admitted in `epoch` came back after `hold` nanoseconds.
    /// Three relaxed additions for a completed permit of the current epoch:
    /// the samples and their hold time are the completed and censored ones
    /// summed where the interval closes.
    pub(crate) fn record(&self, epoch: u32, hold: u64, ending: Ending) {
        self.released.fetch_add(1, Ordering::Relaxed);
        if ending != Ending::Completed {
            self.released_censored.fetch_add(1, Ordering::Relaxed);
        }
        if epoch != self.epoch() {
            return;
        }
        let hold = hold.min(MAX_HOLD);
        let (count, sum) = match ending {
            Ending::Completed => (&self.completed, &self.completed_hold),
            Ending::Abandoned | Ending::DeadlineCut => (&self.censored, &self.censored_hold),
        };
        count.fetch_add(1, Ordering::Relaxed);
        sum.fetch_add(hold, Ordering::Relaxed);
    }

    /// Takes the interval's counts, which start again from zero, with what
    /// the controller found when it closed.
    pub(crate) fn take(&self, closed: Closed) -> IntervalSamples {
        let take = |counter: &AtomicU64| counter.swap(0, Ordering::Relaxed);
        let (completed, completed_hold) = (take(&self.completed), take(&self.completed_hold));
        let (censored, censored_hold) = (take(&self.censored), take(&self.censored_hold));
        IntervalSamples {
            elapsed: closed.elapsed,
            overloaded: closed.overloaded,
            shedding: closed.shedding,
            outrun: closed.outrun,
            blocked: take(&self.blocked),
            released: take(&self.released),
            released_censored: take(&self.released_censored),
            handed_off: take(&self.handed_off),
            samples: completed + censored,
            hold: completed_hold.saturating_add(censored_hold),
            completed,
            completed_hold,
            censored,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interval(elapsed: u64) -> Closed {
        Closed {
            elapsed,
            overloaded: false,
            shedding: false,
            outrun: false,
        }
    }

    #[test]
    fn a_new_epoch_partway_through_an_interval_drops_its_samples_so_far() {
        let sampler = Sampler::default();
        sampler.record(0, 10, Ending::Completed);
        sampler.record(0, 30, Ending::Abandoned);
        sampler.new_epoch_now();
        sampler.record(1, 20, Ending::Completed);
        let samples = sampler.take(interval(100));
        assert_eq!(samples.released, 3);
        assert_eq!((samples.samples, samples.hold), (1, 20));
        assert_eq!((samples.completed, samples.censored), (1, 0));
    }

    #[test]
    fn samples_of_an_older_epoch_count_only_as_released() {
        let sampler = Sampler::default();
        sampler.new_epoch();
        sampler.record(0, 10, Ending::Completed);
        sampler.record(1, 30, Ending::Abandoned);
        sampler.record(1, 20, Ending::Completed);
        let samples = sampler.take(interval(100));
        assert_eq!(samples.released, 3);
        assert_eq!((samples.samples, samples.hold), (2, 50));
        assert_eq!((samples.completed, samples.completed_hold), (1, 20));
        assert_eq!(samples.censored, 1);
        assert_eq!(
            sampler.take(interval(100)).released,
            0,
            "taking resets the counts"
        );
    }

    #[test]
    fn hold_times_beyond_an_hour_are_clamped_so_sums_cannot_overflow() {
        let sampler = Sampler::default();
        for _ in 0..1_000 {
            sampler.record(0, u64::MAX, Ending::Completed);
        }
        assert_eq!(sampler.take(interval(1)).hold, 1_000 * MAX_HOLD);
    }
}
