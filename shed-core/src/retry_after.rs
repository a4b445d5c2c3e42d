//! Computing Retry-After from what the engine measures.
//!
//! The delay is the time the queue ahead of the request needs to drain, plus
//! the time the controller needs to bring the admission level back down to the
//! request's rank and cohort, weighted so that less important ranks (and every
//! retry, which ranks below every original) are told to wait longer:
//!
//! ```text
//! drain    = (queue ahead + 1) * slot time                 (at least one interval)
//! recovery = ceil(distance below level / recovery step) * interval
//! weight   = (11 - rank) / 4                               (critical 1 ... background retry 2.75)
//! delay    = min(cap, (drain + recovery) * weight * (1 + jitter * u)),  u uniform in [0, 1)
//! ```
//!
//! The slot time is the mean service time divided by the limit the service
//! is held to sustain: the mean gap between completions with every slot busy
//! (during an adaptive limit's probe, no shorter than the gap at the
//! throughput measured before its cut). Everything is integer
//! nanoseconds (the jitter in 1/65,536ths), so the reject path does no
//! floating-point work. The header carries whole seconds, rounded up, at
//! least 1 ([`RetryAfter::as_secs`](crate::RetryAfter::as_secs)).

use std::time::Duration;

use crate::{Rank, RetryAfter};

/// One, in the 16-bit fixed point used for jitter.
pub(crate) const JITTER_ONE: u64 = 1 << 16;

/// Everything the delay is computed from, in nanoseconds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Inputs {
    pub(crate) rank: Rank,
    pub(crate) queue_ahead: u32,
    /// Mean gap between completions with every slot busy, once measured.
    pub(crate) slot_time: Option<u64>,
    pub(crate) distance_below_level: u16,
    pub(crate) recovery_step: u16,
    pub(crate) interval: u64,
    pub(crate) cap: u64,
    /// The jitter fraction, in 1/65,536ths.
    pub(crate) jitter: u64,
    /// A sample uniform in `[0, 65,536)`.
    pub(crate) sample: u64,
}

pub(crate) fn compute(inputs: Inputs) -> RetryAfter {
    let interval = u128::from(inputs.interval);
    let drain = match inputs.slot_time {
        Some(slot_time) => (u128::from(inputs.queue_ahead) + 1) * u128::from(slot_time),
        None => interval,
    }
    .max(interval);
    let step = u128::from(inputs.recovery_step.max(1));
    let recovery = u128::from(inputs.distance_below_level).div_ceil(step) * interval;
    // In quarters: 11 - rank, critical 4/4 ... background retry 11/4.
    let weight = (Rank::COUNT + 3 - inputs.rank.index()) as u128;
    // Capped before the jitter, so the product below stays far inside 128
    // bits whatever the inputs (the cap is at most a day).
    let weighted = ((drain + recovery) * weight / 4).min(u128::from(inputs.cap));
    let one = u128::from(JITTER_ONE);
    let stretch = one * one + u128::from(inputs.jitter.min(JITTER_ONE)) * u128::from(inputs.sample);
    let delay = weighted * stretch / (one * one);
    let nanos = delay.min(u128::from(inputs.cap)) as u64;
    RetryAfter::new(Duration::from_nanos(nanos))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Class;

    const MS: u64 = 1_000_000;

    fn inputs(rank: Rank) -> Inputs {
        Inputs {
            rank,
            queue_ahead: 100,
            slot_time: Some(MS), // 1,000 completions per second
            distance_below_level: 0,
            recovery_step: 8,
            interval: 100 * MS,
            cap: 30_000 * MS,
            jitter: 0,
            sample: 0,
        }
    }

    #[test]
    fn a_critical_original_waits_for_the_queue_to_drain() {
        let after = compute(inputs(Rank::original(Class::Critical)));
        assert_eq!(after.exact(), Duration::from_millis(101));
        assert_eq!(after.as_secs(), 1);
    }

    #[test]
    fn distance_below_the_level_adds_recovery_intervals() {
        let mut far = inputs(Rank::original(Class::Critical));
        far.distance_below_level = 80; // ten recovery steps
        assert_eq!(compute(far).exact(), Duration::from_millis(1_101));
    }

    #[test]
    fn unknown_drain_rate_waits_one_interval() {
        let mut unknown = inputs(Rank::original(Class::Critical));
        unknown.slot_time = None;
        assert_eq!(compute(unknown).exact(), Duration::from_millis(100));
    }

    #[test]
    fn the_cap_bounds_the_delay() {
        let mut far = inputs(Rank::ALL[0]);
        far.distance_below_level = 1_000;
        assert_eq!(compute(far).exact(), Duration::from_secs(30));
    }

    #[test]
    fn jitter_stretches_by_at_most_its_fraction() {
        let plain = compute(inputs(Rank::ALL[3])).exact();
        let mut jittered = inputs(Rank::ALL[3]);
        jittered.jitter = JITTER_ONE / 4;
        jittered.sample = JITTER_ONE - 1;
        let stretched = compute(jittered).exact();
        assert!(stretched > plain && stretched <= plain.mul_f64(1.25));
    }
}
