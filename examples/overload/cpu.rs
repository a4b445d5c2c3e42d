//! The CPU-bound service of the `cpu-bound` scenario: each request burns a
//! fixed amount of computation (about 10 ms of CPU) in 1 ms slices, yielding
//! to the runtime between slices. There is no worker pool: the handlers
//! share the server's CPU, so concurrency beyond what the core can run only
//! makes every request slower.
//!
//! The work is constant (a fixed number of loop iterations per slice, the
//! number that takes 1 ms of CPU), not a wall-clock spin, so a slice takes
//! longer when the core is shared. The lab measures that number once per
//! run and gives it to every server process it starts, so that every
//! policy's trials, and the calibration, serve the same work (see
//! [`iterations_per_slice`]).
//! Work is accounted per slice as the CPU time the thread spent in it
//! (`CLOCK_THREAD_CPUTIME_ID`), so time another process holds the core is
//! not counted. A request dropped between slices (its caller hung up, or
//! shed cut it at its deadline) stops burning; the CPU it had used is wasted
//! work, as is that of a request that ends after its deadline.

use std::{
    hint::black_box,
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use crate::{
    class::Class,
    work::{self, JobEnd, WorkCounters},
};

/// Iterations of the loop timed to learn its speed.
const PROBE_ITERATIONS: u64 = 200_000;

/// Probes of the loop's speed; the fastest is taken.
const PROBES: usize = 31;

/// CPU time the calling thread has used.
fn thread_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

/// A fixed amount of CPU work per request, in slices; see the module docs.
pub struct CpuService {
    slices: u32,
    iterations_per_slice: u64,
    slowdown_pct: AtomicU64,
    running: AtomicUsize,
    counters: WorkCounters,
}

impl CpuService {
    /// A service burning about `work` of CPU per request in `slice`s of
    /// `iterations` loop iterations each (measured here if not given: see
    /// [`iterations_per_slice`], about 35 ms of CPU).
    pub fn new(work: Duration, slice: Duration, iterations: Option<u64>) -> Arc<Self> {
        let slice = slice.max(MIN_SLICE);
        let slices = (work.as_secs_f64() / slice.as_secs_f64()).round().max(1.0) as u32;
        Arc::new(CpuService {
            slices,
            iterations_per_slice: iterations
                .unwrap_or_else(|| iterations_per_slice(slice))
                .max(1),
            slowdown_pct: AtomicU64::new(100),
            running: AtomicUsize::new(0),
            counters: WorkCounters::default(),
        })
    }

    /// Multiplies the work of every request that starts from now on by
    /// `percent`/100.
    pub fn set_slowdown_pct(&self, percent: u64) {
        self.slowdown_pct.store(percent.max(1), Ordering::Relaxed);
    }

    /// The current slowdown, in percent.
    pub fn slowdown_pct(&self) -> u64 {
        self.slowdown_pct.load(Ordering::Relaxed)
    }

    /// Requests burning CPU now (between or in slices).
    pub fn running(&self) -> usize {
        self.running.load(Ordering::Relaxed)
    }

    /// The work counters.
    pub fn counters(&self) -> &WorkCounters {
        &self.counters
    }

    /// Serves one request: burns its slices, yielding between them.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future stops the work at the next yield; the work done
    /// so far is accounted (as wasted) when it is dropped.
    pub async fn call(&self, class: Class, deadline: Option<Instant>) {
        self.counters.submitted(class);
        self.running.fetch_add(1, Ordering::Relaxed);
        let mut job = Job {
            service: self,
            class,
            deadline,
            end: JobEnd::default(),
        };
        let slices = (u64::from(self.slices) * self.slowdown_pct() / 100).max(1);
        for i in 0..slices {
            if i > 0 {
                tokio::task::yield_now().await;
            }
            let (started, cpu) = (Instant::now(), thread_cpu());
            burn(self.iterations_per_slice);
            let spent = thread_cpu().saturating_sub(cpu);
            job.end.work += spent;
            // The slice's CPU, placed from its start, past the deadline.
            job.end.past_deadline += work::past_deadline(started, started + spent, deadline);
        }
        job.end.completed = true;
    }
}

/// The shortest slice.
const MIN_SLICE: Duration = Duration::from_micros(10);

/// The loop iterations that take `slice` of CPU on this machine: from the
/// fastest of [`PROBES`] probes (about 35 ms of CPU in all on the lab's
/// machine, which runs 176,000 to 188,000 iterations a millisecond).
///
/// The fastest, not the median: a probe reads slow only when the core was
/// taken from it, and on a virtual machine the time its host runs someone
/// else still counts as the thread's CPU time. Measured by each server
/// process, as it once was, the count followed what the host did at that
/// moment: in one run of the lab, one trial's server served 194 requests a
/// second where the calibration's served 91 (`shed@true` at 0.4x+3x, run
/// of ccf7eb4).
pub fn iterations_per_slice(slice: Duration) -> u64 {
    let slice = slice.max(MIN_SLICE);
    // One to warm up, then the fastest.
    burn(PROBE_ITERATIONS);
    let fastest = (0..PROBES)
        .map(|_| {
            let t = thread_cpu();
            burn(PROBE_ITERATIONS);
            thread_cpu().saturating_sub(t)
        })
        .min()
        .unwrap_or(Duration::ZERO)
        .max(Duration::from_nanos(1));
    let per_second = PROBE_ITERATIONS as f64 / fastest.as_secs_f64();
    (per_second * slice.as_secs_f64()).max(1.0) as u64
}

/// One request's work, accounted when it ends or is dropped.
struct Job<'a> {
    service: &'a CpuService,
    class: Class,
    deadline: Option<Instant>,
    end: JobEnd,
}

impl Drop for Job<'_> {
    fn drop(&mut self) {
        let now = Instant::now();
        self.end.late = self.end.completed && self.deadline.is_some_and(|d| now > d);
        self.service.counters.ended(self.class, self.end);
        self.service.running.fetch_sub(1, Ordering::Relaxed);
    }
}

/// `iterations` rounds of xorshift, kept from being optimized away.
fn burn(iterations: u64) -> u64 {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..iterations {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x = black_box(x);
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_request_burns_its_slices_and_is_accounted_once() {
        let service = CpuService::new(Duration::from_millis(3), Duration::from_millis(1), None);
        service.call(Class::Interactive, None).await;
        let s = service.counters().snapshot()[Class::Interactive.index()];
        assert_eq!((s.submitted, s.completed, s.cancelled), (1, 1, 0));
        assert!(s.work_us > 0);
        assert_eq!(s.wasted_us, 0);
        assert_eq!(service.running(), 0);
    }

    #[tokio::test]
    async fn a_dropped_request_stops_and_its_work_is_wasted() {
        let service = CpuService::new(Duration::from_millis(50), Duration::from_millis(1), None);
        {
            let call = std::pin::pin!(service.call(Class::Batch, None));
            // One poll burns the first slice, then the future yields.
            assert!(futures_poll_once(call).await);
        }
        let s = service.counters().snapshot()[Class::Batch.index()];
        assert_eq!((s.completed, s.cancelled), (0, 1));
        assert_eq!(s.wasted_us, s.work_us);
        assert!(s.work_us > 0);
        assert_eq!(service.running(), 0);
    }

    /// Polls `f` once; true when it was still pending.
    async fn futures_poll_once(mut f: std::pin::Pin<&mut impl std::future::Future>) -> bool {
        std::future::poll_fn(|cx| std::task::Poll::Ready(f.as_mut().poll(cx).is_pending())).await
    }
}
