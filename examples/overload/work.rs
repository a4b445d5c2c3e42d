//! The server's account of the work it did, per class: how much, and how
//! much of it went to callers who had already gone (wasted work).
//!
//! Both services of the lab (the worker pool of `downstream.rs` and the CPU
//! handlers of `cpu.rs`) report each job here once, when it ends.

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::{Duration, Instant},
};

use crate::class::Class;

/// How one job ended, as its service reports it.
#[derive(Clone, Copy, Debug, Default)]
pub struct JobEnd {
    /// Work it consumed (worker hold time, or CPU time).
    pub work: Duration,
    /// Of that, the part done after the request's deadline had passed.
    pub past_deadline: Duration,
    /// It ran to its end (not cancelled).
    pub completed: bool,
    /// It ended after the request's deadline.
    pub late: bool,
    /// It completed, but its caller had dropped the request.
    pub abandoned: bool,
}

impl JobEnd {
    /// Whether its caller got nothing from it: cancelled, late or abandoned.
    fn wasted(&self) -> bool {
        !self.completed || self.late || self.abandoned
    }
}

/// The part of `[started, ended)` after `deadline`.
pub fn past_deadline(started: Instant, ended: Instant, deadline: Option<Instant>) -> Duration {
    deadline.map_or(Duration::ZERO, |d| {
        ended.saturating_duration_since(started.max(d))
    })
}

#[derive(Default)]
struct ClassCounters {
    submitted: AtomicU64,
    completed: AtomicU64,
    cancelled: AtomicU64,
    work_us: AtomicU64,
    wasted_us: AtomicU64,
    past_deadline_us: AtomicU64,
    late: AtomicU64,
    abandoned: AtomicU64,
}

/// Per-class work counters, updated with relaxed atomics.
#[derive(Default)]
pub struct WorkCounters {
    classes: [ClassCounters; 4],
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl WorkCounters {
    /// A job of `class` was handed to the service.
    pub fn submitted(&self, class: Class) {
        self.classes[class.index()]
            .submitted
            .fetch_add(1, Ordering::Relaxed);
    }

    /// A job of `class` ended as `end` says.
    pub fn ended(&self, class: Class, end: JobEnd) {
        let c = &self.classes[class.index()];
        let add = |counter: &AtomicU64, n: u64| {
            counter.fetch_add(n, Ordering::Relaxed);
        };
        add(
            if end.completed {
                &c.completed
            } else {
                &c.cancelled
            },
            1,
        );
        add(&c.work_us, micros(end.work));
        add(&c.past_deadline_us, micros(end.past_deadline));
        add(&c.late, u64::from(end.late));
        add(&c.abandoned, u64::from(end.abandoned));
        if end.wasted() {
            add(&c.wasted_us, micros(end.work));
        }
    }

    /// Copies the counters (each one atomically, not all together).
    pub fn snapshot(&self) -> [ClassStats; 4] {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut out = [ClassStats::default(); 4];
        for (o, c) in out.iter_mut().zip(&self.classes) {
            *o = ClassStats {
                submitted: load(&c.submitted),
                completed: load(&c.completed),
                cancelled: load(&c.cancelled),
                work_us: load(&c.work_us),
                wasted_us: load(&c.wasted_us),
                past_deadline_us: load(&c.past_deadline_us),
                late: load(&c.late),
                abandoned: load(&c.abandoned),
            };
        }
        out
    }
}

/// A point-in-time copy of one class's work counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassStats {
    /// Jobs handed to the service.
    pub submitted: u64,
    /// Jobs that ran to their end.
    pub completed: u64,
    /// Jobs dropped before their end (their request was dropped).
    pub cancelled: u64,
    /// Work done, in microseconds (measured, not drawn).
    pub work_us: u64,
    /// Work done for callers who got nothing from it: cancelled jobs, jobs
    /// that ended after the request's deadline, or whose caller had gone.
    pub wasted_us: u64,
    /// Work done after the request's deadline had passed.
    pub past_deadline_us: u64,
    /// Completed jobs that ended after their deadline.
    pub late: u64,
    /// Completed jobs whose caller had dropped the request.
    pub abandoned: u64,
}

impl ClassStats {
    /// The sum of two sets of counters.
    pub fn plus(self, o: ClassStats) -> ClassStats {
        ClassStats {
            submitted: self.submitted + o.submitted,
            completed: self.completed + o.completed,
            cancelled: self.cancelled + o.cancelled,
            work_us: self.work_us + o.work_us,
            wasted_us: self.wasted_us + o.wasted_us,
            past_deadline_us: self.past_deadline_us + o.past_deadline_us,
            late: self.late + o.late,
            abandoned: self.abandoned + o.abandoned,
        }
    }

    /// The counters as JSON (times in ms), as served at `/stats`.
    pub fn to_json(self) -> serde_json::Value {
        serde_json::json!({
            "submitted": self.submitted,
            "completed": self.completed,
            "cancelled": self.cancelled,
            "work_us": self.work_us,
            "wasted_work_us": self.wasted_us,
            "work_past_deadline_us": self.past_deadline_us,
            "late": self.late,
            "abandoned": self.abandoned,
        })
    }

    /// Reads what [`Self::to_json`] wrote; missing fields count as 0.
    pub fn from_json(v: &serde_json::Value) -> ClassStats {
        let n = |k: &str| v[k].as_u64().unwrap_or(0);
        ClassStats {
            submitted: n("submitted"),
            completed: n("completed"),
            cancelled: n("cancelled"),
            work_us: n("work_us"),
            wasted_us: n("wasted_work_us"),
            past_deadline_us: n("work_past_deadline_us"),
            late: n("late"),
            abandoned: n("abandoned"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancelled_late_and_abandoned_work_is_wasted() {
        let counters = WorkCounters::default();
        let ms = Duration::from_millis;
        let ok = JobEnd {
            work: ms(10),
            completed: true,
            ..JobEnd::default()
        };
        counters.ended(Class::Batch, ok);
        counters.ended(Class::Batch, JobEnd { late: true, ..ok });
        counters.ended(
            Class::Batch,
            JobEnd {
                abandoned: true,
                ..ok
            },
        );
        counters.ended(
            Class::Batch,
            JobEnd {
                completed: false,
                work: ms(4),
                ..ok
            },
        );
        let s = counters.snapshot()[Class::Batch.index()];
        assert_eq!((s.completed, s.cancelled), (3, 1));
        assert_eq!((s.work_us, s.wasted_us), (34_000, 24_000));
        assert_eq!(ClassStats::from_json(&s.to_json()), s);
    }

    #[test]
    fn only_time_after_the_deadline_counts_as_past_it() {
        let t = Instant::now();
        let ms = Duration::from_millis;
        assert_eq!(past_deadline(t, t + ms(10), Some(t + ms(4))), ms(6));
        assert_eq!(past_deadline(t, t + ms(10), Some(t + ms(20))), ms(0));
        assert_eq!(past_deadline(t + ms(5), t + ms(10), Some(t)), ms(5));
        assert_eq!(past_deadline(t, t + ms(10), None), ms(0));
    }
}
