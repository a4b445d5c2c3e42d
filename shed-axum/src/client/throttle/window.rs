//! The adaptive throttle's sliding window of requests and accepts.

use std::time::{Duration, Instant};

/// How many buckets a window is cut into: it slides a tenth at a time.
const BUCKETS: usize = 10;

/// Requests and accepts over the last `width * 10`, in ten buckets; a
/// bucket older than the window is emptied when its slot comes round.
#[derive(Debug)]
pub(super) struct Window {
    origin: Instant,
    bucket_width: Duration,
    buckets: [Bucket; BUCKETS],
}

#[derive(Clone, Copy, Debug, Default)]
struct Bucket {
    /// Which period since the origin the counts belong to.
    period: u64,
    requests: u64,
    accepts: u64,
}

impl Window {
    /// A window of `length`, starting at `origin`.
    pub(super) fn new(length: Duration, origin: Instant) -> Window {
        Window {
            origin,
            bucket_width: (length / BUCKETS as u32).max(Duration::from_nanos(1)),
            buckets: [Bucket::default(); BUCKETS],
        }
    }

    /// SRE's adaptive throttling: the chance of refusing the next request
    /// locally, `max(0, (requests - k * accepts) / (requests + 1))`.
    pub(super) fn refusal_chance(&self, now: Instant, k: f64) -> f64 {
        let (requests, accepts) = self.totals(now);
        let (requests, accepts) = (requests as f64, accepts as f64);
        ((requests - k * accepts) / (requests + 1.0)).max(0.0)
    }

    pub(super) fn count_request(&mut self, now: Instant) {
        self.bucket(now).requests += 1;
    }

    pub(super) fn count_accept(&mut self, now: Instant) {
        self.bucket(now).accepts += 1;
    }

    fn period(&self, now: Instant) -> u64 {
        let since = now.saturating_duration_since(self.origin).as_nanos();
        u64::try_from(since / self.bucket_width.as_nanos()).unwrap_or(u64::MAX)
    }

    fn bucket(&mut self, now: Instant) -> &mut Bucket {
        let period = self.period(now);
        let bucket = &mut self.buckets[(period % BUCKETS as u64) as usize];
        if bucket.period != period {
            *bucket = Bucket {
                period,
                ..Bucket::default()
            };
        }
        bucket
    }

    /// Requests and accepts of the buckets still inside the window.
    fn totals(&self, now: Instant) -> (u64, u64) {
        let period = self.period(now);
        self.buckets
            .iter()
            .filter(|bucket| period - bucket.period.min(period) < BUCKETS as u64)
            .fold((0, 0), |(requests, accepts), bucket| {
                (requests + bucket.requests, accepts + bucket.accepts)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn nothing_counted_refuses_nothing() {
        let start = Instant::now();
        assert_eq!(Window::new(SECOND, start).refusal_chance(start, 2.0), 0.0);
    }

    #[test]
    fn refusals_alone_raise_the_chance_towards_one() {
        let start = Instant::now();
        let mut window = Window::new(SECOND, start);
        for _ in 0..9 {
            window.count_request(start);
        }
        assert_eq!(window.refusal_chance(start, 2.0), 0.9);
    }

    #[test]
    fn half_accepted_with_k_two_refuses_nothing() {
        let start = Instant::now();
        let mut window = Window::new(SECOND, start);
        for _ in 0..10 {
            window.count_request(start);
        }
        for _ in 0..5 {
            window.count_accept(start);
        }
        assert_eq!(window.refusal_chance(start, 2.0), 0.0);
        assert!(window.refusal_chance(start, 1.0) > 0.0);
    }

    #[test]
    fn counts_older_than_the_window_are_forgotten() {
        let start = Instant::now();
        let mut window = Window::new(SECOND, start);
        window.count_request(start);
        assert!(window.refusal_chance(start + SECOND - Duration::from_millis(100), 2.0) > 0.0);
        assert_eq!(window.refusal_chance(start + SECOND, 2.0), 0.0);
    }

    #[test]
    fn a_slot_come_round_again_starts_empty() {
        let start = Instant::now();
        let mut window = Window::new(SECOND, start);
        window.count_request(start);
        let later = start + 3 * SECOND;
        window.count_request(later);
        assert_eq!(window.refusal_chance(later, 2.0), 0.5);
    }
}
