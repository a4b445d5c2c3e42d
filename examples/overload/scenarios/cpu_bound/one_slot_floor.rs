//! The least p99 of successes that any admission policy can reach on a
//! service of one slot while it serves every request of the most important
//! class, first.
//!
//! On one core no door does better than one slot: a second request shares
//! the core, and each takes about twice as long. At one slot a critical
//! request (shed last, served first) waits for the request in service,
//! which it cannot preempt, and for the critical requests that arrived
//! before it. While a lower class keeps the slot busy (in an overload it
//! always does), that wait depends only on the critical arrivals and the
//! slot time, whatever the door does with the rest. If critical requests
//! are a share `s` of the successes, the p99 of all successes is at least
//! the critical requests' `1 - 0.01 / s` quantile.
//!
//! The floor is computed by simulation: Poisson arrivals, a constant slot
//! time, each success's own latency without queueing added to its wait.

use crate::draw::unit_exponential;

/// What the floor is computed from.
#[derive(Clone, Copy, Debug)]
pub struct OneSlot {
    /// Critical requests per second.
    pub critical_rate: f64,
    /// Requests per second the slot finishes (the calibrated capacity).
    pub capacity: f64,
    /// A request's latency when nothing waits (the calibration's no-load
    /// p50), ms.
    pub own_ms: f64,
}

/// Critical arrivals simulated.
const ARRIVALS: usize = 200_000;

impl OneSlot {
    /// The critical requests' share of the successes: all of them are
    /// served, and the slot finishes `capacity` a second.
    pub fn critical_share(&self) -> f64 {
        (self.critical_rate / self.capacity).min(1.0)
    }

    /// The least p99 of all successes, ms: the critical requests' latency
    /// at the `1 - 0.01 / share` quantile (none if they are under a
    /// hundredth of the successes, when the floor says nothing).
    pub fn p99_floor_ms(&self, seed: u64) -> Option<f64> {
        let share = self.critical_share();
        // (A rate of zero or less is a share of zero or less.)
        if share <= 0.01 || self.capacity <= 0.0 {
            return None;
        }
        let mut latencies = self.critical_latencies_ms(seed);
        latencies.sort_by(f64::total_cmp);
        let quantile = 1.0 - 0.01 / share;
        let at = ((quantile * latencies.len() as f64).ceil() as usize).clamp(1, latencies.len());
        Some(latencies[at - 1])
    }

    /// Each critical request's latency, ms, in arrival order.
    ///
    /// Time is in ms. `free_at` is when the request in service finishes;
    /// when no critical request waits, a lower-class one takes the slot at
    /// once, so the slot's boundaries run on from `free_at` every slot
    /// time until a critical request arrives.
    fn critical_latencies_ms(&self, seed: u64) -> Vec<f64> {
        let mut rng = fastrand::Rng::with_seed(seed);
        let slot = 1e3 / self.capacity;
        let mean_gap = 1e3 / self.critical_rate;
        let mut arrival = 0.0;
        let mut free_at = 0.0_f64;
        let mut latencies = Vec::with_capacity(ARRIVALS);
        for _ in 0..ARRIVALS {
            arrival += mean_gap * unit_exponential(rng.f64());
            let start = if free_at >= arrival {
                free_at
            } else {
                free_at + ((arrival - free_at) / slot).ceil() * slot
            };
            free_at = start + slot;
            latencies.push(start - arrival + self.own_ms);
        }
        latencies
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One slot of 10 ms kept busy, critical requests at 40 a second.
    const AT_4X: OneSlot = OneSlot {
        critical_rate: 40.0,
        capacity: 100.0,
        own_ms: 10.0,
    };

    #[test]
    fn the_mean_wait_is_the_priority_queues_residual_over_the_idle_share() {
        // Non-preemptive priority with the slot always busy: the mean wait
        // of the top class is the mean residual of the request in service
        // (half a slot, 5 ms) over one less its own load (0.4): 8.33 ms.
        let latencies = AT_4X.critical_latencies_ms(7);
        let mean_wait =
            latencies.iter().map(|l| l - AT_4X.own_ms).sum::<f64>() / latencies.len() as f64;
        assert!((mean_wait - 5.0 / 0.6).abs() < 0.15, "{mean_wait}");
    }

    #[test]
    fn at_4x_the_floor_is_the_critical_requests_97_5th_percentile() {
        // Critical requests are 0.4 of the successes: 2.5% of them over the
        // floor is 1% of all.
        assert_eq!(AT_4X.critical_share(), 0.4);
        let floor = AT_4X.p99_floor_ms(7).expect("a floor");
        let mut latencies = AT_4X.critical_latencies_ms(7);
        latencies.sort_by(f64::total_cmp);
        let over = latencies.iter().filter(|l| **l > floor).count();
        let share_over = over as f64 / latencies.len() as f64;
        assert!((0.024..=0.025).contains(&share_over), "{share_over}");
    }

    #[test]
    fn a_class_under_a_hundredth_of_the_successes_sets_no_floor() {
        let few = OneSlot {
            critical_rate: 1.0,
            ..AT_4X
        };
        assert_eq!(few.p99_floor_ms(7), None);
    }
}
