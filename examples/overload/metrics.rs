//! Figures computed from the records: summaries over a window and time series.
//!
//! Summaries attribute each logical request to the window in which it started,
//! so every request counts once. Time series bucket successes by the time they
//! completed, which is what a dashboard of goodput would show.

use std::{collections::BTreeMap, time::Duration};

use crate::{
    class::Class,
    client::{AttemptResult, LogicalRecord},
    work::ClassStats,
};

/// A span of run time, from the run's epoch.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    /// Inclusive start.
    pub start: Duration,
    /// Exclusive end.
    pub end: Duration,
}

impl Window {
    /// Length in seconds.
    pub fn secs(&self) -> f64 {
        (self.end.saturating_sub(self.start)).as_secs_f64()
    }

    fn contains(&self, t: Duration) -> bool {
        self.start <= t && t < self.end
    }
}

/// The figures of one class (or all) over one window.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// Logical requests started in the window.
    pub logical: u64,
    /// Of those, answered with success within their deadline.
    pub successes: u64,
    /// Attempts they made.
    pub attempts: u64,
    /// Attempts the server turned away (429, 503, 504).
    pub shed_attempts: u64,
    /// Tries the client's throttle refused before sending (not attempts:
    /// nothing was sent).
    pub local_refusals: u64,
    /// Logical requests started per second.
    pub offered_rate: f64,
    /// Successes per second (goodput).
    pub goodput: f64,
    /// Latency of successes, 50th percentile, in ms.
    pub p50_ms: f64,
    /// Latency of successes, 99th percentile, in ms.
    pub p99_ms: f64,
    /// Failed attempts by reason (status code, `timeout`, `io`).
    pub failures: BTreeMap<String, u64>,
}

impl Summary {
    /// Summarizes the records of `class` (all when `None`) started in `window`.
    pub fn of(records: &[LogicalRecord], window: Window, class: Option<Class>) -> Summary {
        let mut s = Summary::default();
        let mut latencies = Vec::new();
        for r in records
            .iter()
            .filter(|r| window.contains(r.start) && selected(class, r.class))
        {
            s.logical += 1;
            let local = r
                .attempts
                .iter()
                .filter(|a| a.result == AttemptResult::RefusedLocally)
                .count() as u64;
            s.local_refusals += local;
            s.attempts += r.attempts.len() as u64 - local;
            if r.success {
                s.successes += 1;
                latencies.push(r.latency().as_secs_f64() * 1e3);
            }
            for a in &r.attempts {
                s.shed_attempts += u64::from(a.result.is_shed());
                if let Some(reason) = a.result.reason() {
                    *s.failures.entry(reason).or_default() += 1;
                }
            }
        }
        let secs = window.secs().max(f64::EPSILON);
        s.offered_rate = s.logical as f64 / secs;
        s.goodput = s.successes as f64 / secs;
        latencies.sort_by(f64::total_cmp);
        s.p50_ms = percentile(&latencies, 0.50);
        s.p99_ms = percentile(&latencies, 0.99);
        s
    }

    /// Attempts per logical request.
    pub fn amplification(&self) -> f64 {
        ratio(self.attempts, self.logical)
    }

    /// Successes per logical request.
    pub fn success_ratio(&self) -> f64 {
        ratio(self.successes, self.logical)
    }

    /// Share of tries (attempts and local refusals) the client's throttle
    /// refused.
    pub fn local_ratio(&self) -> f64 {
        ratio(self.local_refusals, self.attempts + self.local_refusals)
    }

    /// Share of attempts the server turned away.
    pub fn shed_ratio(&self) -> f64 {
        ratio(self.shed_attempts, self.attempts)
    }

    /// Failures as `reason:count` pairs, or `-`.
    pub fn failures_label(&self) -> String {
        if self.failures.is_empty() {
            return "-".into();
        }
        let parts: Vec<String> = self
            .failures
            .iter()
            .map(|(r, n)| format!("{r}:{n}"))
            .collect();
        parts.join(" ")
    }
}

/// Share of the server's work spent on callers that had already given up.
pub fn wasted_ratio(stats: &ClassStats) -> f64 {
    ratio(stats.wasted_us, stats.work_us)
}

/// The share of worker time spent after the request's deadline had passed.
pub fn past_deadline_ratio(stats: &ClassStats) -> f64 {
    ratio(stats.past_deadline_us, stats.work_us)
}

/// Whether `class` passes the filter (`None` selects all).
fn selected(filter: Option<Class>, class: Class) -> bool {
    filter.is_none_or(|want| want == class)
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        f64::NAN
    } else {
        a as f64 / b as f64
    }
}

/// The generator's send lag behind the Poisson schedule, in ms: (p99, max).
pub fn send_lag_ms<'a>(records: impl IntoIterator<Item = &'a LogicalRecord>) -> (f64, f64) {
    let mut lags: Vec<f64> = records
        .into_iter()
        .map(|r| r.lag.as_secs_f64() * 1e3)
        .collect();
    lags.sort_by(f64::total_cmp);
    (
        percentile(&lags, 0.99),
        lags.last().copied().unwrap_or(f64::NAN),
    )
}

/// Nearest-rank percentile of sorted values; NaN when empty.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// One bucket of a time series; rates are per second.
#[derive(Clone, Copy, Debug, Default)]
pub struct Bucket {
    /// Bucket start, seconds from the epoch.
    pub t: f64,
    /// Logical requests started.
    pub offered: f64,
    /// Attempts sent.
    pub attempts: f64,
    /// Successes completed.
    pub goodput: f64,
    /// Attempts turned away by the server.
    pub shed: f64,
    /// Attempts that timed out at the client.
    pub timeouts: f64,
}

/// Buckets of `width` over `[0, horizon)` for `class` (all when `None`).
pub fn time_series(
    records: &[LogicalRecord],
    width: Duration,
    horizon: Duration,
    class: Option<Class>,
) -> Vec<Bucket> {
    let n = (horizon.as_secs_f64() / width.as_secs_f64()).ceil() as usize;
    let w = width.as_secs_f64();
    let mut buckets: Vec<Bucket> = (0..n)
        .map(|i| Bucket {
            t: i as f64 * w,
            ..Bucket::default()
        })
        .collect();
    let slot = |t: Duration| {
        let i = (t.as_secs_f64() / w) as usize;
        (i < n).then_some(i)
    };
    for r in records.iter().filter(|r| selected(class, r.class)) {
        if let Some(i) = slot(r.start) {
            buckets[i].offered += 1.0 / w;
        }
        if r.success {
            if let Some(i) = slot(r.end) {
                buckets[i].goodput += 1.0 / w;
            }
        }
        for a in &r.attempts {
            if let Some(i) = slot(a.sent) {
                let b = &mut buckets[i];
                b.attempts += 1.0 / w;
                if a.result.is_shed() {
                    b.shed += 1.0 / w;
                }
                if a.result == crate::client::AttemptResult::Timeout {
                    b.timeouts += 1.0 / w;
                }
            }
        }
    }
    buckets
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 50.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert!(percentile(&[], 0.5).is_nan());
    }
}
