//! Computing Retry-After from what the engine measures.
//!
//! The delay is the time the queue ahead of the request needs to drain, plus
//! the time the controller needs to bring the admission level back down to the
//! request's rank and cohort, weighted so that less important ranks (and every
//! retry, which ranks below every original) are told to wait longer:
//!
//! ```text
//! drain    = (queue ahead + 1) / drain rate           (at least one interval)
//! recovery = ceil(distance below level / recovery step) * interval
//! weight   = 1 + (7 - rank) / 4                       (critical 1 ... background retry 2.75)
//! delay    = min(cap, (drain + recovery) * weight * (1 + jitter * u)),  u uniform in [0, 1)
//! ```
//!
//! The header carries whole seconds, rounded up, at least 1
//! ([`RetryAfter::as_secs`](crate::RetryAfter::as_secs)).

use std::time::Duration;

use crate::{Rank, RetryAfter};

/// Everything the delay is computed from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Inputs {
    pub(crate) rank: Rank,
    pub(crate) queue_ahead: u32,
    pub(crate) drain_rate: Option<f64>,
    pub(crate) distance_below_level: u16,
    pub(crate) recovery_step: u16,
    pub(crate) interval: Duration,
    pub(crate) cap: Duration,
    pub(crate) jitter: f64,
    /// A sample uniform in `[0, 1)`.
    pub(crate) unit: f64,
}

pub(crate) fn compute(inputs: Inputs) -> RetryAfter {
    let interval = inputs.interval.as_secs_f64();
    let drain = match inputs.drain_rate {
        Some(rate) if rate > 0.0 => (f64::from(inputs.queue_ahead) + 1.0) / rate,
        _ => interval,
    }
    .max(interval);
    let intervals_to_recover =
        f64::from(inputs.distance_below_level) / f64::from(inputs.recovery_step.max(1));
    let recovery = intervals_to_recover.ceil() * interval;
    let weight = 1.0 + (Rank::COUNT - 1 - inputs.rank.index()) as f64 / 4.0;
    let seconds = (drain + recovery) * weight * (1.0 + inputs.jitter * inputs.unit);
    let cap = inputs.cap.as_secs_f64();
    RetryAfter::new(Duration::from_secs_f64(seconds.clamp(0.0, cap)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Class;

    fn inputs(rank: Rank) -> Inputs {
        Inputs {
            rank,
            queue_ahead: 100,
            drain_rate: Some(1_000.0),
            distance_below_level: 0,
            recovery_step: 8,
            interval: Duration::from_millis(100),
            cap: Duration::from_secs(30),
            jitter: 0.0,
            unit: 0.0,
        }
    }

    #[test]
    fn a_critical_original_waits_for_the_queue_to_drain() {
        let after = compute(inputs(Rank::new(Class::Critical, false)));
        assert_eq!(after.exact(), Duration::from_millis(101));
        assert_eq!(after.as_secs(), 1);
    }

    #[test]
    fn distance_below_the_level_adds_recovery_intervals() {
        let mut far = inputs(Rank::new(Class::Critical, false));
        far.distance_below_level = 80; // ten recovery steps
        assert_eq!(compute(far).exact(), Duration::from_millis(1_101));
    }

    #[test]
    fn unknown_drain_rate_waits_one_interval() {
        let mut unknown = inputs(Rank::new(Class::Critical, false));
        unknown.drain_rate = None;
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
        jittered.jitter = 0.25;
        jittered.unit = 0.999_999;
        let stretched = compute(jittered).exact();
        assert!(stretched > plain && stretched <= plain.mul_f64(1.25));
    }
}
