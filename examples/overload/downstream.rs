//! The default service under test: a downstream of K workers, like a
//! database connection pool or a thread pool.
//!
//! A request hands a job to the [`Downstream`] and waits for the answer. The
//! job waits for one of K workers (a FIFO [`Semaphore`]) and holds it for a
//! service time drawn from [`ServiceTime`]. The downstream is deliberately not
//! cancellable: once a job is handed over it runs, even when the caller has
//! long given up. Only the front door (the policy) can avoid that work, which
//! is what the lab measures.
//!
//! Service times come from one seeded generator, the k-th job to start taking
//! the k-th draw, so every policy of a trial meets the same service times and
//! the calibration's steps can be compared draw for draw (common random
//! numbers).

use std::{
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use tokio::sync::{oneshot, Semaphore};

use crate::{
    class::Class,
    draw::unit_exponential,
    work::{self, JobEnd, WorkCounters},
};

/// The shape of the service-time distribution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Distribution {
    /// Exponential with the given mean (memoryless; the default).
    Exponential,
    /// Always exactly the mean.
    Constant,
}

/// How long a job holds a worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ServiceTime {
    /// Mean service time at full capacity.
    pub mean: Duration,
    /// Shape of the distribution around the mean.
    pub distribution: Distribution,
}

impl ServiceTime {
    /// Draws one service time from `u`, uniform in [0, 1), stretched by
    /// `slowdown` (1.0 = normal).
    fn sample(&self, u: f64, slowdown: f64) -> Duration {
        let mean = self.mean.as_secs_f64() * slowdown;
        let secs = match self.distribution {
            Distribution::Constant => mean,
            Distribution::Exponential => mean * unit_exponential(u),
        };
        // Cap the tail at 20 means so one draw cannot stall a worker for ever
        // (and map -0.0, from u = 0, to zero).
        if secs > 0.0 {
            Duration::from_secs_f64(secs.min(mean * 20.0))
        } else {
            Duration::ZERO
        }
    }
}

/// The downstream was closed (the server is stopping).
#[derive(Debug)]
pub struct Closed;

/// K workers that run jobs for a drawn service time; see the module docs.
pub struct Downstream {
    workers: Arc<Semaphore>,
    service: ServiceTime,
    draws: Mutex<fastrand::Rng>,
    slowdown_pct: AtomicU64,
    queued: AtomicUsize,
    busy: AtomicUsize,
    counters: WorkCounters,
}

impl Downstream {
    /// A downstream with `workers` workers at normal speed, drawing service
    /// times from `seed`.
    pub fn new(workers: usize, service: ServiceTime, seed: u64) -> Arc<Self> {
        Arc::new(Downstream {
            workers: Arc::new(Semaphore::new(workers)),
            service,
            draws: Mutex::new(fastrand::Rng::with_seed(seed)),
            slowdown_pct: AtomicU64::new(100),
            queued: AtomicUsize::new(0),
            busy: AtomicUsize::new(0),
            counters: WorkCounters::default(),
        })
    }

    /// Stretches every service time that starts from now on by `percent`/100
    /// (200 halves the capacity).
    pub fn set_slowdown_pct(&self, percent: u64) {
        self.slowdown_pct.store(percent.max(1), Ordering::Relaxed);
    }

    /// The current slowdown, in percent.
    pub fn slowdown_pct(&self) -> u64 {
        self.slowdown_pct.load(Ordering::Relaxed)
    }

    /// Restarts the service-time draws from `seed`.
    pub fn reseed(&self, seed: u64) {
        *self.draws.lock().unwrap_or_else(|e| e.into_inner()) = fastrand::Rng::with_seed(seed);
    }

    /// Jobs waiting for a worker, and workers busy.
    pub fn queued_busy(&self) -> (usize, usize) {
        (
            self.queued.load(Ordering::Relaxed),
            self.busy.load(Ordering::Relaxed),
        )
    }

    /// The work counters.
    pub fn counters(&self) -> &WorkCounters {
        &self.counters
    }

    /// Refuses all waiting and future jobs; running ones finish.
    pub fn close(&self) {
        self.workers.close();
    }

    /// Hands a job to the downstream and waits for it. Dropping the returned
    /// future does not cancel the job (see the module docs).
    pub async fn call(
        self: &Arc<Self>,
        class: Class,
        deadline: Option<Instant>,
    ) -> Result<(), Closed> {
        self.counters.submitted(class);
        let (tx, rx) = oneshot::channel();
        let this = Arc::clone(self);
        tokio::spawn(async move {
            let result = this.run(class, deadline, &tx).await;
            let _ = tx.send(result);
        });
        rx.await.unwrap_or(Err(Closed))
    }

    async fn run(
        &self,
        class: Class,
        deadline: Option<Instant>,
        caller: &oneshot::Sender<Result<(), Closed>>,
    ) -> Result<(), Closed> {
        self.queued.fetch_add(1, Ordering::Relaxed);
        let permit = self.workers.acquire().await;
        self.queued.fetch_sub(1, Ordering::Relaxed);
        let _permit = permit.map_err(|_| Closed)?;

        self.busy.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        let slowdown = self.slowdown_pct() as f64 / 100.0;
        let u = self.draws.lock().unwrap_or_else(|e| e.into_inner()).f64();
        tokio::time::sleep(self.service.sample(u, slowdown)).await;
        let finished = Instant::now();
        self.busy.fetch_sub(1, Ordering::Relaxed);

        self.counters.ended(
            class,
            JobEnd {
                work: finished - started,
                past_deadline: work::past_deadline(started, finished, deadline),
                completed: true,
                late: deadline.is_some_and(|d| finished > d),
                abandoned: caller.is_closed(),
            },
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_exponential_around_the_mean_and_capped() {
        let s = ServiceTime {
            mean: Duration::from_millis(20),
            distribution: Distribution::Exponential,
        };
        let mut rng = fastrand::Rng::with_seed(7);
        let n = 20_000;
        let mean = (0..n)
            .map(|_| s.sample(rng.f64(), 1.0).as_secs_f64())
            .sum::<f64>()
            / f64::from(n);
        assert!((mean - 0.020).abs() < 0.001, "mean {mean}");
        assert_eq!(s.sample(1.0 - 1e-12, 1.0), s.sample(1.0 - 1e-15, 1.0));
        assert!(s.sample(1.0 - 1e-12, 1.0) <= Duration::from_millis(400));
        assert_eq!(s.sample(0.0, 3.0), Duration::ZERO);
    }
}
