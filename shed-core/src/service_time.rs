//! How long requests hold their slots: smoothed means and a 95th percentile.
//!
//! Each completion adds its service time to the interval's sum and to a
//! log-scale histogram (four buckets per doubling, see
//! [`Histogram`]), and keeps the longest. When the controller closes an
//! interval it folds the interval's mean and 95th percentile (read from the
//! histogram, never above the longest time seen) into moving averages.
//!
//! Two means, for two uses. The *recent* mean (a moving average of interval
//! means, a quarter of the way each interval) follows a change within a few
//! intervals: it gives the slot time behind predicted waits and Retry-After.
//! The *steady* mean weighs every completion of the last two seconds or so
//! alike (and starts over when an adaptive limit moves to a new epoch, see
//! [`ServiceTimes::restart_from`]): it gives the drain rate (`limit /
//! mean`) that the controller compares the offered load with, where a
//! recent mean of thirty-odd
//! exponential samples an interval, off by a sixth from one interval to the
//! next, would call a 90% load overload every few seconds. The 95th
//! percentile is how much time a request that had to wait should still have
//! when it gets a slot: with less, it is likely to finish after its caller
//! has given up, and the slot is wasted.
//!
//! # Memory ordering
//!
//! `Relaxed` throughout: a completion counted in the next interval instead of
//! this one changes nothing that matters.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::histogram::Histogram;

/// The share of completions at or below the percentile kept (the 95th).
const QUANTILE: f64 = 0.95;
/// The share of the steady mean's weight kept at each interval: a memory of
/// about twenty intervals (two seconds at the default 100 ms), enough for
/// the mean of a 90% load on 8 slots of 20 ms (about 700 completions) to
/// read within 4% of itself, yet a service three times slower moves it by
/// half within two intervals.
const STEADY_DECAY: f64 = 0.95;

/// The share of the settled mean's weight kept at each interval: a memory
/// of about two hundred intervals (twenty seconds at the default 100 ms).
/// A shadow engine whose service is overdrawn predicts with it (see
/// `shed_core::Mode`): at half of 8 slots of 20 ms the steady mean stands on
/// some 400 completions and reads up to an eighth off, the settled one on
/// some 4,000.
const SETTLED_DECAY: f64 = 0.995;

/// Service times of the current interval, and their smoothed summaries.
#[derive(Debug)]
pub(crate) struct ServiceTimes {
    completions: AtomicU64,
    total_nanos: AtomicU64,
    total_overflowed: AtomicBool,
    max_nanos: AtomicU64,
    histogram: Histogram,
    mean: AtomicU64,
    p95: AtomicU64,
    /// The steady mean's decayed sum of service times and decayed count
    /// (`f64` bits); only the thread closing an interval writes them.
    steady_total: AtomicU64,
    steady_count: AtomicU64,
    /// The settled mean's decayed sum and count (`f64` bits), as the
    /// steady mean's.
    settled_total: AtomicU64,
    settled_count: AtomicU64,
}

impl ServiceTimes {
    pub(crate) fn new() -> ServiceTimes {
        ServiceTimes {
            completions: AtomicU64::new(0),
            total_nanos: AtomicU64::new(0),
            total_overflowed: AtomicBool::new(false),
            max_nanos: AtomicU64::new(0),
            histogram: Histogram::new(),
            mean: AtomicU64::new(0),
            p95: AtomicU64::new(0),
            steady_total: AtomicU64::new(0),
            steady_count: AtomicU64::new(0),
            settled_total: AtomicU64::new(0),
            settled_count: AtomicU64::new(0),
        }
    }

    /// Records one completion; returns how many this interval has seen.
    pub(crate) fn record(&self, nanos: u64) -> u64 {
        let before = self.total_nanos.fetch_add(nanos, Ordering::Relaxed);
        if before.checked_add(nanos).is_none() {
            // The sum wrapped (service times of centuries): remember it, and
            // let the interval's total read as the largest one.
            self.total_overflowed.store(true, Ordering::Relaxed);
        }
        self.max_nanos.fetch_max(nanos, Ordering::Relaxed);
        self.histogram.record(nanos);
        self.completions.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The smoothed mean service time in nanoseconds, once known.
    pub(crate) fn mean(&self) -> Option<u64> {
        known(self.mean.load(Ordering::Relaxed))
    }

    /// The mean over about the last two seconds of completions, each
    /// weighing alike, in nanoseconds, once known.
    pub(crate) fn steady_mean(&self) -> Option<u64> {
        ratio(&self.steady_total, &self.steady_count)
    }

    /// The mean over about the last twenty seconds of completions, each
    /// weighing alike, in nanoseconds, once known.
    pub(crate) fn settled_mean(&self) -> Option<u64> {
        ratio(&self.settled_total, &self.settled_count)
    }

    /// How many completions the steady mean stands on (decayed, so about
    /// twenty intervals' worth at a steady rate).
    pub(crate) fn steady_count(&self) -> f64 {
        f64::from_bits(self.steady_count.load(Ordering::Relaxed))
    }

    /// The smoothed 95th percentile in nanoseconds, once known.
    pub(crate) fn p95(&self) -> Option<u64> {
        known(self.p95.load(Ordering::Relaxed))
    }

    /// An adaptive limit moved to a new epoch, and `completions` permits of it
    /// held their slots `total` nanoseconds in all: the steady and recent
    /// means start over from them. Hold times measured at the old limit no
    /// longer say how fast the service drains at the new one where the work
    /// of one request takes longer the more of it runs at once (one core, or
    /// any service above its knee): the drain rate (`limit / mean`) would
    /// read off by the ratio of the limits, and a memory of two seconds
    /// forgets a large one slowly. In a trial of the lab's CPU-bound step
    /// with a minimum of 1, hold times of 60-130 ms from a slow start to 16
    /// slots on one core left the steady mean reading the core, held to one
    /// slot of 8 ms, as draining 17.8 requests a second where it finished
    /// 125, and it took ten seconds to read right; judged against that, the
    /// load was an overload, and the door refused interactive requests the
    /// core had room for.
    ///
    /// The 95th percentile is left to its moving average, which forgets by
    /// a quarter an interval. A reader between the two stores below sees
    /// the new total over the old count for an instant, as one between the
    /// stores of an interval's fold does (by less there): nothing waits on
    /// one reading of the drain.
    pub(crate) fn restart_from(&self, total: u64, completions: u64) {
        if completions == 0 {
            return;
        }
        let store =
            |weight: &AtomicU64, value: f64| weight.store(value.to_bits(), Ordering::Relaxed);
        store(&self.steady_total, total as f64);
        store(&self.steady_count, completions as f64);
        self.mean
            .store((total / completions).max(1), Ordering::Relaxed);
    }

    /// Closes the interval: folds its mean and percentile into the averages.
    pub(crate) fn close_interval(&self) {
        let completions = self.completions.swap(0, Ordering::Relaxed);
        let total = match self.total_overflowed.swap(false, Ordering::Relaxed) {
            false => self.total_nanos.swap(0, Ordering::Relaxed),
            true => {
                self.total_nanos.store(0, Ordering::Relaxed);
                u64::MAX
            }
        };
        let max = self.max_nanos.swap(0, Ordering::Relaxed);
        let counts = self.histogram.take();
        self.fold_steady(total, completions);
        if completions == 0 {
            return;
        }
        smooth(&self.mean, (total / completions).max(1));
        // Buckets are a factor of two wide: never estimate beyond what was seen.
        smooth(&self.p95, counts.quantile(QUANTILE).min(max).max(1));
    }
}

impl ServiceTimes {
    /// Decays the steady and settled means' weights and adds the interval's.
    fn fold_steady(&self, total: u64, completions: u64) {
        let decayed = |weight: &AtomicU64, decay: f64, add: f64| {
            let kept = f64::from_bits(weight.load(Ordering::Relaxed)) * decay;
            weight.store((kept + add).to_bits(), Ordering::Relaxed);
        };
        decayed(&self.steady_total, STEADY_DECAY, total as f64);
        decayed(&self.steady_count, STEADY_DECAY, completions as f64);
        decayed(&self.settled_total, SETTLED_DECAY, total as f64);
        decayed(&self.settled_count, SETTLED_DECAY, completions as f64);
    }
}

/// A decayed sum over a decayed count (`f64` bits), once there is a count.
fn ratio(total: &AtomicU64, count: &AtomicU64) -> Option<u64> {
    let total = f64::from_bits(total.load(Ordering::Relaxed));
    let count = f64::from_bits(count.load(Ordering::Relaxed));
    // The float-to-integer cast saturates.
    (count > 0.0).then(|| ((total / count) as u64).max(1))
}

fn known(nanos: u64) -> Option<u64> {
    (nanos != 0).then_some(nanos)
}

/// Moves a moving average a quarter of the way to `sample` (or sets it).
fn smooth(average: &AtomicU64, sample: u64) {
    let previous = average.load(Ordering::Relaxed);
    let next = if previous == 0 {
        sample
    } else {
        // In 128 bits: three times a 64-bit average need not fit in 64.
        ((u128::from(previous) * 3 + u128::from(sample)) / 4) as u64
    };
    average.store(next, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn the_mean_is_the_first_interval_mean_then_a_moving_average() {
        let times = ServiceTimes::new();
        times.record(10 * MS);
        times.record(30 * MS);
        times.close_interval();
        assert_eq!(times.mean(), Some(20 * MS));
        times.record(60 * MS);
        times.close_interval();
        assert_eq!(times.mean(), Some(30 * MS));
    }

    #[test]
    fn the_steady_mean_weighs_every_completion_alike_and_forgets_slowly() {
        let times = ServiceTimes::new();
        assert_eq!(times.steady_mean(), None);
        // Nine completions of 10 ms, then one interval with one of 110 ms:
        // the recent mean moves a quarter of the way (to 35 ms), the steady
        // one by the completion's weight, 0.95 * 90 + 110 over 0.95 * 9 + 1.
        for _ in 0..9 {
            times.record(10 * MS);
        }
        times.close_interval();
        assert_eq!(times.steady_mean(), Some(10 * MS));
        times.record(110 * MS);
        times.close_interval();
        assert_eq!(times.mean(), Some(35 * MS));
        let steady = times.steady_mean().unwrap() as f64 / MS as f64;
        assert!((steady - 195.5 / 9.55).abs() < 1e-3, "{steady}");
        // Empty intervals decay both weights alike: the mean stays.
        (0..50).for_each(|_| times.close_interval());
        let kept = times.steady_mean().unwrap() as f64 / MS as f64;
        assert!((kept - steady).abs() < 1e-3, "{kept}");
    }

    #[test]
    fn a_restart_replaces_the_steady_and_recent_means_and_the_steady_one_goes_on_from_it() {
        let times = ServiceTimes::new();
        // Twenty intervals of 128 ms holds (16 slots sharing one core)...
        for _ in 0..20 {
            (0..12).for_each(|_| {
                times.record(128 * MS);
            });
            times.close_interval();
        }
        // ...then twelve permits of one slot, 8 ms each: both means start
        // over from them (nothing, from no permits).
        times.restart_from(0, 0);
        assert_eq!(times.steady_mean(), Some(128 * MS));
        times.restart_from(96 * MS, 12);
        assert_eq!(times.steady_mean(), Some(8 * MS));
        assert_eq!(times.mean(), Some(8 * MS));
        // The next interval is folded in as before: 12 of 10 ms against the
        // restart's 12, which weigh 0.95 now.
        (0..12).for_each(|_| {
            times.record(10 * MS);
        });
        times.close_interval();
        let steady = times.steady_mean().unwrap() as f64 / MS as f64;
        let expected = (0.95 * 96.0 + 120.0) / (0.95 * 12.0 + 12.0);
        assert!((steady - expected).abs() < 1e-3, "{steady}");
    }

    #[test]
    fn the_percentile_lies_in_the_bucket_of_the_ninety_fifth_completion() {
        let times = ServiceTimes::new();
        for _ in 0..95 {
            times.record(MS); // bucket [512 us, 1024 us)
        }
        for _ in 0..5 {
            times.record(100 * MS); // bucket [65.5 ms, 131 ms)
        }
        times.close_interval();
        let p95 = times.p95().unwrap();
        assert!((512_000..=1_024_000).contains(&p95), "{p95}");
    }

    #[test]
    fn equal_times_give_that_time_as_the_percentile() {
        let times = ServiceTimes::new();
        times.record(10 * MS);
        times.close_interval();
        assert_eq!(times.p95(), Some(10 * MS));
    }

    #[test]
    fn a_long_tail_moves_the_percentile_above_the_mean() {
        let times = ServiceTimes::new();
        for i in 0..100u64 {
            times.record(if i % 5 == 0 { 200 * MS } else { 10 * MS });
        }
        times.close_interval();
        assert!(times.p95().unwrap() > times.mean().unwrap());
    }

    #[test]
    fn an_empty_interval_keeps_what_was_known() {
        let times = ServiceTimes::new();
        assert_eq!(times.mean(), None);
        times.record(5 * MS);
        times.close_interval();
        times.close_interval();
        assert_eq!(times.mean(), Some(5 * MS));
    }
}
