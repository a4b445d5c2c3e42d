//! Engine states shared by the criterion suites and the callgrind guard.
//!
//! Every state is reached through shed-core's public API only; the routers
//! measured whole are in [`router`].
#![allow(dead_code)] // each bench target uses a different subset

pub mod router;

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use shed_core::{
    Admission, Arrival, Class, Clock, Cohort, Level, ManualClock, Permit, RejectReason, Shedder,
    Waiter,
};

/// A clock that pays for a real OS clock read (as [`shed_core::MonotonicClock`]
/// does) but reports a manually driven time, so a state reached by advancing
/// time (an admission level above zero) stays put while it is measured,
/// without under-charging the clock read production makes.
#[derive(Clone, Debug)]
pub struct ChargedManualClock(pub ManualClock);

impl Clock for ChargedManualClock {
    fn now(&self) -> Instant {
        std::hint::black_box(Instant::now());
        self.0.now()
    }
}

/// A clock that pays for a real OS clock read, as production does, but
/// reports a time that moves 500 us per read: an engine admitting and
/// releasing one request after another closes a 100 ms controller interval
/// every 100 requests, so the interval close (and an adaptive limit's
/// estimator) is part of what is measured, deterministically.
#[derive(Clone, Debug, Default)]
pub struct TickingClock(pub ManualClock);

impl Clock for TickingClock {
    fn now(&self) -> Instant {
        std::hint::black_box(Instant::now());
        self.0.advance(Duration::from_micros(500));
        self.0.now()
    }
}

/// An idle engine on a [`TickingClock`]: with `Some(limit)` a fixed limit,
/// with `None` the default adaptive one.
pub fn ticking(limit: Option<usize>) -> Shedder {
    let builder = Shedder::builder().clock(TickingClock::default());
    match limit {
        Some(limit) => builder.limit(limit),
        None => builder,
    }
    .build()
    .expect("valid config")
}

/// Polls `future` once and returns its output; panics if it is not ready.
/// Every path measured here completes without waiting, and this proves it.
pub fn ready<F: Future>(future: F, cx: &mut Context<'_>) -> F::Output {
    match pin!(future).poll(cx) {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("the measured path was expected to complete without waiting"),
    }
}

/// The arrival refused by the raised level: a background retry, which ranks
/// first in the shed order.
pub fn shed_arrival() -> Arrival {
    Arrival::new(Class::Background)
        .with_attempt(2)
        .with_cohort(Cohort::MIN)
}

/// An engine whose admission level is above zero, reached the way production
/// reaches it: both slots of limit 2 held by critical requests, sixteen
/// batch requests queued and sixty more refused for a full queue (more
/// offered in the interval than two slots drain); after 20 ms both holders
/// finish and hand their slots to the first batch waiters, which finish 1 ms
/// after each grant, until eight batch waiters have been granted after waits
/// of 20 to 23 ms: over the 5 ms target, and enough waits for the batch rank
/// to be judged. Then the 100 ms interval ends and the controller raises the
/// level. (The holders are of another rank than the waiters, so
/// the batch rank's only samples are its queue waits.)
///
/// Returns the engine, and what must stay alive for the state to hold.
pub fn overloaded() -> (Shedder, Overload) {
    let clock = ManualClock::new();
    let shedder = Shedder::builder()
        .limit(2)
        .queue_capacity(16)
        .clock(ChargedManualClock(clock.clone()))
        .build()
        .expect("valid config");
    let mut held: Vec<Permit> = (0..2)
        .map(|_| match shedder.admit(&Arrival::new(Class::Critical)) {
            Admission::Admitted(permit) => permit,
            other => panic!("an idle engine admits, got {other:?}"),
        })
        .collect();
    let batch = Arrival::new(Class::Batch);
    let mut waiters: Vec<Waiter> = (0..16)
        .map(|_| match shedder.admit(&batch) {
            Admission::Queued(waiter) => waiter,
            other => panic!("a busy engine queues, got {other:?}"),
        })
        .collect();
    for _ in 0..60 {
        match shedder.admit(&batch) {
            Admission::Rejected(rejection) => {
                assert_eq!(rejection.reason(), RejectReason::QueueFull)
            }
            other => panic!("a full queue refuses, got {other:?}"),
        }
    }
    let mut cx = Context::from_waker(Waker::noop());
    clock.advance(Duration::from_millis(20));
    for _ in 0..4 {
        held.clear(); // both slots come back and go to the next two waiters
        for _ in 0..2 {
            match pin!(waiters.remove(0)).poll(&mut cx) {
                Poll::Ready(Ok(permit)) => held.push(permit),
                other => panic!("the first waiter is granted a slot, got {other:?}"),
            }
        }
        clock.advance(Duration::from_millis(1));
    }
    // The interval ends; the next door decision closes it and raises the level.
    clock.advance(Duration::from_millis(100));
    match shedder.admit(&shed_arrival()) {
        Admission::Rejected(rejection) => assert_eq!(rejection.reason(), RejectReason::Shed),
        other => panic!("the raised level sheds a background retry, got {other:?}"),
    }
    assert!(shedder.level() > Level::NONE);
    // Both slots stay held and the rest stay queued: the engine remains
    // saturated with a queue, as under real overload.
    (
        shedder,
        Overload {
            _held: held,
            _waiters: waiters,
        },
    )
}

/// The slot and the queue that keep an engine overloaded while it is measured.
pub struct Overload {
    _held: Vec<Permit>,
    _waiters: Vec<Waiter>,
}

/// An engine with the production clock and room to spare.
pub fn idle(limit: usize) -> Shedder {
    Shedder::builder()
        .limit(limit)
        .build()
        .expect("valid config")
}

/// An arrival whose deadline passed before it arrived.
pub fn late_arrival(shedder: &Shedder) -> Arrival {
    Arrival::new(Class::Interactive).with_deadline(shedder.now())
}

/// One admit and release on the fast path.
#[inline]
pub fn admit_release(shedder: &Shedder, arrival: &Arrival) {
    match shedder.admit(arrival) {
        Admission::Admitted(permit) => drop(std::hint::black_box(permit)),
        other => panic!("the fast path admits, got {other:?}"),
    }
}

/// One refusal.
#[inline]
pub fn refuse(shedder: &Shedder, arrival: &Arrival) {
    match shedder.admit(arrival) {
        Admission::Rejected(rejection) => {
            std::hint::black_box(rejection);
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}
