//! A lock-free log-scale histogram of durations: each power of two of
//! microseconds is split into four buckets (`[2^k, 1.25 * 2^k)`,
//! `[1.25 * 2^k, 1.5 * 2^k)`, ...; the first also counts everything shorter,
//! the last everything longer), so a percentile is known within a quarter
//! and interpolated inside its bucket.
//!
//! # Memory ordering
//!
//! `Relaxed` throughout: a time counted in the next interval instead of
//! this one changes nothing that matters.

use std::sync::atomic::{AtomicU64, Ordering};

/// Buckets per power of two.
const PER_OCTAVE: u32 = 4;
/// Buckets: four per power of two of microseconds up to 2^25 (about 34 s),
/// the last one also for longer.
pub(crate) const BUCKETS: usize = 25 * PER_OCTAVE as usize;

/// Durations recorded concurrently.
#[derive(Debug)]
pub(crate) struct Histogram {
    buckets: [AtomicU64; BUCKETS],
}

impl Histogram {
    pub(crate) const fn new() -> Histogram {
        Histogram {
            buckets: [const { AtomicU64::new(0) }; BUCKETS],
        }
    }

    pub(crate) fn record(&self, nanos: u64) {
        self.buckets[bucket_of(nanos)].fetch_add(1, Ordering::Relaxed);
    }

    /// Takes the counts, which start again from zero.
    pub(crate) fn take(&self) -> Counts {
        Counts(
            self.buckets
                .each_ref()
                .map(|bucket| bucket.swap(0, Ordering::Relaxed) as f64),
        )
    }
}

/// A histogram's counts, which may be weighted (decayed) sums.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Counts([f64; BUCKETS]);

impl Default for Counts {
    fn default() -> Self {
        Counts([0.0; BUCKETS])
    }
}

impl Counts {
    pub(crate) fn total(&self) -> f64 {
        self.0.iter().sum()
    }

    /// `self * weight + other`, bucket by bucket.
    pub(crate) fn decayed_plus(&self, weight: f64, other: &Counts) -> Counts {
        let mut out = *self;
        for (bucket, add) in out.0.iter_mut().zip(other.0) {
            *bucket = *bucket * weight + add;
        }
        out
    }

    /// The `q` quantile, in nanoseconds, interpolated linearly inside the
    /// bucket where it falls; 0 when nothing was counted.
    pub(crate) fn quantile(&self, q: f64) -> u64 {
        let rank = q * self.total();
        let mut below = 0.0;
        for (index, count) in self.0.iter().enumerate() {
            if *count > 0.0 && below + count >= rank {
                let (low, width) = bucket_bounds(index);
                let within = ((rank - below) / count).clamp(0.0, 1.0);
                return ((low + within * width) * 1_000.0) as u64;
            }
            below += count;
        }
        0
    }
}

fn bucket_of(nanos: u64) -> usize {
    // In quarters of a microsecond, so that even the first octave splits in four.
    let quarters = (nanos / 250).max(PER_OCTAVE.into());
    let octave = quarters.ilog2(); // at least 2
    let sub = (quarters >> (octave - 2)) & 3;
    (((octave - 2) * PER_OCTAVE) as usize + sub as usize).min(BUCKETS - 1)
}

/// A bucket's lower bound and width, in microseconds.
fn bucket_bounds(index: usize) -> (f64, f64) {
    let octave = (index / PER_OCTAVE as usize) as i32;
    let sub = (index % PER_OCTAVE as usize) as f64;
    let base = 2f64.powi(octave);
    let width = base / f64::from(PER_OCTAVE);
    (base + sub * width, width)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_quantile_lies_in_the_bucket_where_it_falls() {
        let histogram = Histogram::new();
        for _ in 0..90 {
            histogram.record(MS); // [512 us, 1024 us)
        }
        for _ in 0..10 {
            histogram.record(100 * MS); // [65.5 ms, 131 ms)
        }
        let counts = histogram.take();
        // 1 ms = 1,000 us lies in [896 us, 1,024 us); 100 ms in [98.3 ms, 114.7 ms).
        assert!((896_000..=1_024_000).contains(&counts.quantile(0.5)));
        assert!((98_304_000..=114_688_000).contains(&counts.quantile(0.95)));
        assert_eq!(histogram.take().total(), 0.0, "taking resets");
    }

    #[test]
    fn each_bucket_holds_the_times_between_its_bounds() {
        for micros in [1u64, 2, 3, 5, 7, 100, 1_000, 12_345, 1 << 20] {
            let index = bucket_of(micros * 1_000);
            let (low, width) = bucket_bounds(index);
            let micros = micros as f64;
            assert!(
                low <= micros && micros < low + width,
                "{micros} in [{low}, {})",
                low + width
            );
        }
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn decayed_counts_weigh_the_old_less() {
        let old = Histogram::new();
        old.record(MS);
        let new = Histogram::new();
        new.record(100 * MS);
        let mixed = old.take().decayed_plus(0.5, &new.take());
        assert_eq!(mixed.total(), 1.5);
    }
}
