//! The load offered to the service, and whether it outpaces what the
//! service drains.
//!
//! A standing queue is overload only while more arrives than the service
//! can finish; below that it is a burst being worked off (at 90% load on 8
//! slots such bursts last about a second, the M/M/8 relaxation time, far
//! longer than a controller interval). Both rates are estimates, so the
//! offered rate must exceed the drain rate by more than [`CONFIDENCE`]
//! standard errors of their ratio, on one of two time scales:
//!
//! - a *slow* average (about two seconds) sees a small sustained excess: at
//!   34 arrivals an interval (a 90% load on 8 slots of 20 ms) it needs about
//!   9% more than the drain rate, at 1,000 an interval about 2%;
//! - a *fast* one (about two intervals) sees a jump at once: it needs about
//!   a fifth more at 34 arrivals an interval, and a load that leaps to twice
//!   the capacity is overload within two intervals.
//!
//! Before an interval closes, [`surges`] judges the part of it gone by: a
//! load that leaps to four times the drain rate shows within about 50 ms
//! (on one slot of 10 ms), where waiting for the close would let a queue
//! as long as callers' patience build first.
//!
//! How far the arrivals, the ones the level refuses included, outrun the
//! completions also says how long an overload's queue should be
//! ([`overload_stretch`]): near 1x a short one refuses work the service
//! would finish.
//!
//! The error of the offered rate is that of Poisson arrivals over each
//! average's memory; the drain rate's is that of the steady mean service
//! time over the completions it stands on, with an exponential's spread (as
//! wide as the mean).
//!
//! # Memory ordering
//!
//! `Relaxed` throughout: only the thread closing a controller interval
//! writes, and nobody else reads.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::Rank;

/// Standard errors by which the offered rate must exceed the drain rate.
const CONFIDENCE: f64 = 2.0;
/// How much the slow average moves towards each interval's rate: about two
/// seconds of memory at 100 ms intervals.
const SLOW_WEIGHT: f64 = 0.05;
/// How much the fast average moves towards each interval's rate.
const FAST_WEIGHT: f64 = 0.5;

/// Standard errors by which a partial interval's arrivals must exceed what
/// was drained meanwhile: more than [`CONFIDENCE`], since the count is
/// judged again at every arrival that would wait.
const SURGE_CONFIDENCE: f64 = 2.5;

/// Whether `arrivals` in the `elapsed` nanoseconds since an interval began
/// surely outnumber what `drain` requests per second finish in that time,
/// counted as at least `allowance` (the waiters an overload's queue keeps
/// anyway, so that a burst of simultaneous arrivals, a caller's fan-out,
/// is no surge):
/// by more than [`SURGE_CONFIDENCE`] standard errors of a Poisson count
/// (with an allowance of 8, at least 20 arrivals). Simulated with Poisson
/// arrivals and judged at each: at nine tenths of the drain rate of 8 slots
/// of 20 ms, about one interval of 100 ms in 500 shows a surge at some
/// point; four times the drain of one slot of 10 ms shows within 48 ms
/// half the time and 64 ms nine times in ten, and twelve times the drain
/// of 8 slots of 20 ms within 4 ms.
pub(crate) fn surges(arrivals: u64, elapsed: u64, drain: f64, allowance: u32) -> bool {
    let drained = (drain * elapsed as f64 / 1e9).max(f64::from(allowance));
    let arrivals = arrivals as f64;
    arrivals - drained >= SURGE_CONFIDENCE * arrivals.sqrt()
}

/// Waiters enough to keep every slot busy in a sustained overload, the
/// shortest an overload's queue is; see `Engine::overload_wait`.
pub(crate) const OVERLOAD_QUEUE: u32 = 8;

/// The most an overload's queue is stretched by ([`overload_stretch`]).
const MAX_OVERLOAD_STRETCH: f64 = 8.0;

/// By how many times the arrivals (the ones the level refused included)
/// must outrun the completions, on the slow averages (about two seconds of
/// memory), for an overload to count as clearly beyond the service
/// ([`OfferedLoad::clearly_outruns`]). At about 1x load the arrivals
/// outrun the completions by what the door refuses: 1.06 to 1.10 times
/// with 6% to 9% refused, as in the lab with the limit at the knee; 1.14
/// times (8/7) with the limit a slot below a knee of 8; in an overload of
/// twice the capacity, twice. An adaptive limit's refresh probe waits for
/// it, and slow start's exit probe for it or for a few rounds found
/// overloaded (see `limit::estimator`). The averages are not a duration: a
/// burst tall enough (three intervals at four times the completions, at
/// 1x) lifts the slow one past it for about a second and a half.
pub(crate) const CLEAR_OUTRUN: f64 = 1.25;

/// The odds of an overload's queue standing full that its length allows
/// ([`overload_stretch`]).
const FULL_QUEUE_ODDS: f64 = 1.0 / 64.0;

/// How many times longer than its shortest ([`OVERLOAD_QUEUE`] waiters) an
/// overload's queue should be when arrivals outrun completions by `ratio`
/// (see [`OfferedLoad::ratio_to`]): from 1, at 1.7 times or more, to
/// [`MAX_OVERLOAD_STRETCH`], at 1.06 times or less (or no ratio at all).
///
/// Arrivals that outrun completions by a ratio `r` force refusals of
/// `1 - 1/r` of them whatever the queue; a queue of `q` waiters refuses
/// more, by about `r^-q` (a birth-death queue's chance of standing full),
/// which stays under 1/64 with `q = ln 64 / ln r` waiters: 8 at 1.7x, 10 at
/// 1.5x, 23 at 1.2x, 44 at 1.1x. Near 1x that is most of the refusals: on
/// 8 slots at exactly the drain rate, 8 waiters refuse 8.2% of arrivals and
/// 64 refuse 1.5% (M/M/8/K); at 1.1x 13.3% and 9.2% (of 44), against the
/// 9.1% the excess forces. Well above 1x a longer queue changes nothing
/// but the wait.
///
/// Completions, not the drain rate the mean service time gives: when the
/// service slows down, completions fall at once, where that mean lags and
/// would read the overload as a mild one (and a probe's cut, which lowers
/// them for a round, shortens the queue, not the other way round).
pub(crate) fn overload_stretch(ratio: f64) -> f64 {
    if ratio.is_nan() || ratio <= 1.0 {
        return MAX_OVERLOAD_STRETCH;
    }
    let waiters = (1.0 / FULL_QUEUE_ODDS).ln() / ratio.ln();
    (waiters / f64::from(OVERLOAD_QUEUE)).clamp(1.0, MAX_OVERLOAD_STRETCH)
}

/// A rate of events, on two time scales: requests passing the level per
/// second (the offered load), and, for an overload queue's length,
/// arrivals and completions ([`OfferedLoad::ratio_to`]).
#[derive(Debug)]
pub(crate) struct OfferedLoad {
    slow: Average,
    fast: Average,
}

impl OfferedLoad {
    pub(crate) const fn new() -> OfferedLoad {
        OfferedLoad {
            slow: Average::new(SLOW_WEIGHT),
            fast: Average::new(FAST_WEIGHT),
        }
    }

    /// Folds an interval of `elapsed` nanoseconds that passed `arrivals`
    /// requests into both averages.
    pub(crate) fn close_interval(&self, arrivals: u64, elapsed: u64) {
        if elapsed == 0 {
            return;
        }
        let rate = arrivals as f64 * 1e9 / elapsed as f64;
        self.slow.fold(rate);
        self.fast.fold(rate);
    }

    /// How many times `other`'s rate this one is: the higher of the ratio of
    /// the slow averages (a small sustained difference, without the fast
    /// ones' noise) and that of the fast ones (a jump of either, at once).
    /// Infinite where `other` is zero, `NaN` where both are.
    pub(crate) fn ratio_to(&self, other: &OfferedLoad) -> f64 {
        let slow = self.slow.get() / other.slow.get();
        let fast = self.fast.get() / other.fast.get();
        if slow.is_nan() || fast.is_nan() {
            return f64::NAN;
        }
        slow.max(fast)
    }

    /// Whether this rate has outrun `other`'s by [`CLEAR_OUTRUN`] times
    /// or more on the slow averages (about two seconds of memory): an
    /// overload clearly beyond the service, not a load at about its
    /// capacity, nor most bursts. Where `other` is zero, any rate outruns
    /// it.
    pub(crate) fn clearly_outruns(&self, other: &OfferedLoad) -> bool {
        let rate = self.slow.get();
        rate > 0.0 && rate >= CLEAR_OUTRUN * other.slow.get()
    }

    /// Whether the offered load surely exceeds `drain` requests per second,
    /// a rate measured over `completions` completions, with intervals of
    /// `interval` nanoseconds.
    pub(crate) fn outpaces(&self, drain: f64, completions: f64, interval: u64) -> bool {
        [&self.slow, &self.fast]
            .into_iter()
            .any(|average| average.outpaces(drain, completions, interval))
    }
}

/// How much each rank's average moves towards its interval's rate: about
/// half a second of memory at 100 ms intervals; for Poisson arrivals of 4
/// an interval (0.4x of one 10 ms slot) its standard deviation is a sixth
/// of their mean (the variance of one interval's count times w / (2 - w)).
const RANK_WEIGHT: f64 = 0.2;

/// The share of the drain rate below which the load of some ranks, counted
/// from the most important down, leaves them room to spare: their queue is
/// a burst of their own being worked off, not a share of an overload.
const PROTECTED_SHARE: f64 = 0.8;

/// Requests passing the level per second, per rank: which ranks the
/// service drains with room to spare, served first as they are.
#[derive(Debug)]
pub(crate) struct RankLoads {
    ranks: [Average; Rank::COUNT],
}

impl RankLoads {
    pub(crate) const fn new() -> RankLoads {
        RankLoads {
            ranks: [const { Average::new(RANK_WEIGHT) }; Rank::COUNT],
        }
    }

    /// Folds an interval of `elapsed` nanoseconds that passed `passed`
    /// requests of each rank.
    pub(crate) fn close_interval(&self, passed: &[u64; Rank::COUNT], elapsed: u64) {
        if elapsed == 0 {
            return;
        }
        for (average, &count) in self.ranks.iter().zip(passed) {
            average.fold(count as f64 * 1e9 / elapsed as f64);
        }
    }

    /// The least important rank whose load, with that of every more
    /// important rank, stays under [`PROTECTED_SHARE`] of `drain` requests
    /// per second, as an index into [`Rank::ALL`] ([`Rank::COUNT`] when
    /// not even the most important does, or the drain is unknown).
    pub(crate) fn protected_from(&self, drain: Option<f64>) -> usize {
        let Some(drain) = drain else {
            return Rank::COUNT;
        };
        let mut load = 0.0;
        for rank in (0..Rank::COUNT).rev() {
            load += self.ranks[rank].get();
            if load >= PROTECTED_SHARE * drain {
                return rank + 1;
            }
        }
        0
    }
}

/// An exponentially weighted moving average of a rate (`f64` bits; zero
/// until the first interval, which sets it).
#[derive(Debug)]
struct Average {
    rate: AtomicU64,
    weight: f64,
}

impl Average {
    const fn new(weight: f64) -> Average {
        Average {
            rate: AtomicU64::new(0),
            weight,
        }
    }

    fn get(&self) -> f64 {
        f64::from_bits(self.rate.load(Ordering::Relaxed))
    }

    fn fold(&self, rate: f64) {
        let previous = self.get();
        let next = if previous == 0.0 {
            rate
        } else {
            previous + self.weight * (rate - previous)
        };
        self.rate.store(next.to_bits(), Ordering::Relaxed);
    }

    /// Whether the average exceeds `drain` by more than [`CONFIDENCE`]
    /// standard errors of their ratio. An average of weight `w` over
    /// Poisson counts of mean `n` an interval has the variance of a count
    /// of `n (2 - w) / w`.
    fn outpaces(&self, drain: f64, completions: f64, interval: u64) -> bool {
        let offered = self.get();
        let per_interval = offered * interval as f64 / 1e9;
        let arrivals = per_interval * (2.0 - self.weight) / self.weight;
        if arrivals <= 0.0 {
            return false;
        }
        let error = match completions > 0.0 {
            true => (1.0 / arrivals + 1.0 / completions).sqrt(),
            false => arrivals.recip().sqrt(),
        };
        offered >= drain * (1.0 + CONFIDENCE * error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERVAL: u64 = 100_000_000;

    fn after(intervals: &[u64]) -> OfferedLoad {
        let load = OfferedLoad::new();
        for &arrivals in intervals {
            load.close_interval(arrivals, INTERVAL);
        }
        load
    }

    #[test]
    fn a_load_steady_at_nine_tenths_of_the_drain_rate_does_not_outpace_it() {
        // 34 an interval, drain 380 a second over 700 completions.
        let load = after(&[34; 50]);
        assert!(!load.outpaces(380.0, 700.0, INTERVAL));
    }

    #[test]
    fn a_small_sustained_excess_outpaces_the_drain_rate_on_the_slow_scale() {
        // 12% over: beyond the slow scale's 9%, within the fast one's 21%.
        let load = after(&[43; 60]);
        assert!(load.outpaces(380.0, 700.0, INTERVAL));
        assert!(!load.fast.outpaces(380.0, 700.0, INTERVAL));
    }

    #[test]
    fn a_jump_to_twice_the_drain_rate_outpaces_it_after_one_interval() {
        let mut intervals = vec![34; 50];
        intervals.push(76);
        let load = after(&intervals);
        assert!(!load.slow.outpaces(380.0, 700.0, INTERVAL));
        assert!(load.outpaces(380.0, 700.0, INTERVAL));
    }

    #[test]
    fn arrivals_clearly_outrun_completions_from_a_quarter_more_on_the_slow_averages() {
        // At 1x: 38 arriving an interval, 35 completing (8% refused).
        let (arriving, completing) = (after(&[38; 60]), after(&[35; 60]));
        assert!(!arriving.clearly_outruns(&completing));
        let completing = after(&[40; 60]);
        assert!(!after(&[49; 60]).clearly_outruns(&completing), "1.225x");
        assert!(after(&[51; 60]).clearly_outruns(&completing), "1.275x");
        // Three intervals at twice the completions lift the slow average
        // by about a seventh: not enough.
        let arriving = after(&[[40; 57].as_slice(), &[80; 3]].concat());
        assert!(!arriving.clearly_outruns(&completing));
        assert!(
            after(&[1]).clearly_outruns(&after(&[0])),
            "nothing completes"
        );
        assert!(!after(&[0]).clearly_outruns(&after(&[0])));
    }

    #[test]
    fn a_burst_of_four_times_the_completions_at_1x_outruns_them_for_a_second_and_a_half() {
        // 38 arriving an interval, 36 completing; then three intervals at
        // 144 arriving.
        let completing = after(&[36; 80]);
        let arriving = after(&[[38; 60].as_slice(), &[144; 3]].concat());
        assert!(arriving.clearly_outruns(&completing));
        let outrun_for = (1..=40)
            .take_while(|_| {
                arriving.close_interval(38, INTERVAL);
                arriving.clearly_outruns(&completing)
            })
            .count();
        assert!((12..=18).contains(&outrun_for), "{outrun_for} intervals");
    }

    #[test]
    fn four_times_the_drain_of_one_10_ms_slot_surges_within_50_ms() {
        // 384 arrivals a second, 96 drained: about 19 in 50 ms, 4.8 drained.
        assert!(surges(20, 50_000_000, 96.0, 8));
        assert!(!surges(9, 10_000_000, 96.0, 8), "too few to tell");
    }

    #[test]
    fn a_burst_of_fifteen_at_once_is_no_surge() {
        assert!(!surges(15, 0, 100.0, 8));
        assert!(surges(25, 0, 100.0, 8));
    }

    #[test]
    fn nine_tenths_of_the_drain_rate_does_not_surge_even_when_counts_run_high() {
        // 8 slots of 20 ms drain 380 a second; at 342 offered, 34 arrive an
        // interval on average, and 3.4 in its first 10 ms. Counts at about
        // three standard deviations above those means:
        assert!(!surges(52, INTERVAL, 380.0, 8));
        assert!(!surges(9, 10_000_000, 380.0, 8));
    }

    #[test]
    fn nothing_offered_never_outpaces() {
        assert!(!OfferedLoad::new().outpaces(0.0, 0.0, INTERVAL));
        assert!(!after(&[0; 3]).outpaces(0.0, 0.0, INTERVAL));
    }

    #[test]
    fn an_overload_queue_stretches_from_1_at_1_7x_the_completions_to_8_at_1_06x() {
        let waiters = |ratio: f64| f64::from(OVERLOAD_QUEUE) * overload_stretch(ratio);
        for ratio in [1.7, 2.0, 4.0, 100.0, f64::INFINITY] {
            assert_eq!(waiters(ratio), 8.0, "at {ratio}x");
        }
        // ln 64 / ln r waiters between.
        assert_eq!(waiters(1.5).round(), 10.0);
        assert_eq!(waiters(1.2).round(), 23.0);
        assert_eq!(waiters(1.1).round(), 44.0);
        for ratio in [1.06, 1.0, 0.5, 0.0, f64::NAN] {
            assert_eq!(waiters(ratio), 64.0, "at {ratio}x");
        }
        // Closer to the completions, never shorter.
        let mut ratio = 2.0;
        while ratio > 1.0 {
            assert!(waiters(ratio - 0.01) >= waiters(ratio), "at {ratio}x");
            ratio -= 0.01;
        }
    }

    #[test]
    fn the_ratio_of_two_loads_is_the_higher_of_the_slow_and_the_fast_ones() {
        // 34 arrivals an interval against 34 completions for 5 s: 1.
        let (arriving, completing) = (after(&[34; 50]), after(&[34; 50]));
        assert_eq!(arriving.ratio_to(&completing), 1.0);
        // Then completions fall to half (a slowdown): the fast ratio shows
        // it at once, 34 / 25.5, where the slow one reads 34 / 33.15.
        completing.close_interval(17, INTERVAL);
        assert!((arriving.ratio_to(&completing) - 34.0 / 25.5).abs() < 1e-9);
        // Nothing completed yet: no ratio, or an endless one.
        assert!(arriving.ratio_to(&OfferedLoad::new()).is_infinite());
        assert!(OfferedLoad::new().ratio_to(&OfferedLoad::new()).is_nan());
    }
}
