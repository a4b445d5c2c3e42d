//! Shared helpers for the specification tests: polling futures by hand, and a
//! deterministic simulation of a service on a [`ManualClock`].
//!
//! Nothing here sleeps or measures real time: every test drives the clock.
#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use shed_core::{
    Admission, Arrival, Builder, Class, Clock, ManualClock, Permit, Rank, Rejection, Shedder,
    Waiter,
};

/// `n` milliseconds.
pub const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A waker that does nothing (`Waker::noop` is newer than the crate's MSRV).
pub fn noop_waker() -> Waker {
    struct Noop;
    impl Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }
    Waker::from(Arc::new(Noop))
}

/// A waker that counts its wake-ups.
#[derive(Default)]
pub struct CountingWaker {
    wakes: AtomicUsize,
}

impl CountingWaker {
    pub fn new() -> Arc<CountingWaker> {
        Arc::new(CountingWaker::default())
    }

    pub fn waker(self: &Arc<Self>) -> Waker {
        Waker::from(Arc::clone(self))
    }

    pub fn wakes(&self) -> usize {
        self.wakes.load(Ordering::SeqCst)
    }
}

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::SeqCst);
    }
}

/// Polls a future once with a waker that does nothing.
pub fn poll_once<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
    let waker = noop_waker();
    Pin::new(future).poll(&mut Context::from_waker(&waker))
}

/// Polls a future that must be able to finish now.
#[track_caller]
pub fn ready<F: Future + Unpin>(future: &mut F) -> F::Output {
    match poll_once(future) {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("expected the future to be ready"),
    }
}

/// Asserts that a future cannot finish yet.
#[track_caller]
pub fn assert_pending<F: Future + Unpin>(future: &mut F)
where
    F::Output: std::fmt::Debug,
{
    if let Poll::Ready(output) = poll_once(future) {
        panic!("expected the future to be pending, got {output:?}");
    }
}

/// A shedder on a manual clock, from `builder`.
pub fn build(builder: Builder) -> (Shedder, ManualClock) {
    let clock = ManualClock::new();
    let shedder = builder
        .clock(clock.clone())
        .build()
        .expect("valid settings");
    (shedder, clock)
}

/// The arrival of a request at `rank`: attempt 2 for a retry rank.
pub fn arrival_at(rank: Rank) -> Arrival {
    Arrival::new(rank.class()).with_attempt(if rank.is_retry() { 2 } else { 1 })
}

/// An original request of `class`.
pub fn original(class: Class) -> Rank {
    Rank::new(class, false)
}

/// A retry of `class`.
pub fn retry(class: Class) -> Rank {
    Rank::new(class, true)
}

#[track_caller]
pub fn admitted(admission: Admission) -> Permit {
    match admission {
        Admission::Admitted(permit) => permit,
        other => panic!("expected a permit, got {other:?}"),
    }
}

#[track_caller]
pub fn queued(admission: Admission) -> Waiter {
    match admission {
        Admission::Queued(waiter) => waiter,
        other => panic!("expected to wait, got {other:?}"),
    }
}

#[track_caller]
pub fn rejected(admission: Admission) -> Rejection {
    match admission {
        Admission::Rejected(rejection) => rejection,
        other => panic!("expected a rejection, got {other:?}"),
    }
}

/// The wall-clock hour the engine hashes caller keys with.
pub fn wall_clock_hour() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs() / 3_600)
}

/// What the door said to one arrival in a [`Sim`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Door {
    Admitted,
    Queued,
    Rejected(Rejection),
}

struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

struct Parked {
    waiter: Waiter,
    woken: Arc<Flag>,
}

/// A deterministic service: every admitted request holds its permit for a
/// fixed service time of simulated time; waiting requests are polled when
/// their waker fires or when their time in the queue runs out (as a host with
/// a timer would).
pub struct Sim {
    pub clock: ManualClock,
    pub shedder: Shedder,
    service: Duration,
    serving: Vec<(Duration, Permit)>,
    parked: Vec<Parked>,
    /// Requests served after waiting in the queue.
    pub served_after_waiting: u64,
    /// Requests refused after waiting in the queue.
    pub refused_in_queue: Vec<Rejection>,
}

impl Sim {
    pub fn new(builder: Builder, service: Duration) -> Sim {
        let (shedder, clock) = build(builder);
        Sim {
            clock,
            shedder,
            service,
            serving: Vec::new(),
            parked: Vec::new(),
            served_after_waiting: 0,
            refused_in_queue: Vec::new(),
        }
    }

    /// Simulated time since the start.
    pub fn elapsed(&self) -> Duration {
        self.clock.elapsed()
    }

    pub fn instant(&self) -> Instant {
        self.clock.now()
    }

    /// Moves time forward by `by`: finishes the requests whose service is
    /// over (their slots go to waiters), then lets woken or expired waiters
    /// take their verdict.
    pub fn advance(&mut self, by: Duration) {
        self.clock.advance(by);
        let now = self.elapsed();
        let mut index = 0;
        while index < self.serving.len() {
            if self.serving[index].0 <= now {
                drop(self.serving.swap_remove(index));
            } else {
                index += 1;
            }
        }
        self.poll_parked();
    }

    fn poll_parked(&mut self) {
        let now = self.instant();
        let mut index = 0;
        while index < self.parked.len() {
            let parked = &mut self.parked[index];
            let due =
                parked.woken.0.swap(false, Ordering::SeqCst) || parked.waiter.expires_at() <= now;
            if !due {
                index += 1;
                continue;
            }
            let waker = Waker::from(Arc::clone(&parked.woken));
            match Pin::new(&mut parked.waiter).poll(&mut Context::from_waker(&waker)) {
                Poll::Pending => index += 1,
                Poll::Ready(verdict) => {
                    self.parked.swap_remove(index);
                    match verdict {
                        Ok(permit) => {
                            self.served_after_waiting += 1;
                            self.serving.push((self.elapsed() + self.service, permit));
                        }
                        Err(rejection) => self.refused_in_queue.push(rejection),
                    }
                }
            }
        }
    }

    /// One request arrives at the door now.
    pub fn arrive(&mut self, arrival: Arrival) -> Door {
        match self.shedder.admit(&arrival) {
            Admission::Admitted(permit) => {
                self.serving.push((self.elapsed() + self.service, permit));
                Door::Admitted
            }
            Admission::Queued(mut waiter) => {
                let woken = Arc::new(Flag(AtomicBool::new(false)));
                let waker = Waker::from(Arc::clone(&woken));
                match Pin::new(&mut waiter).poll(&mut Context::from_waker(&waker)) {
                    Poll::Pending => self.parked.push(Parked { waiter, woken }),
                    Poll::Ready(_) => panic!("a request that just queued finished at once"),
                }
                Door::Queued
            }
            Admission::Rejected(rejection) => Door::Rejected(rejection),
        }
    }

    /// Requests holding a slot.
    pub fn in_service(&self) -> usize {
        self.serving.len()
    }

    /// Requests waiting for a verdict.
    pub fn waiting(&self) -> usize {
        self.parked.len()
    }

    /// Runs without arrivals until every request is finished.
    pub fn drain(&mut self) {
        let mut rounds = 0;
        while !self.serving.is_empty() || !self.parked.is_empty() {
            self.advance(ms(1));
            rounds += 1;
            assert!(rounds < 1_000_000, "the simulation does not drain");
        }
    }
}
