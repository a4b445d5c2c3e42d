//! Shadow mode: every request judged as enforcing mode judges it, every one
//! served, and what enforcing mode would have done counted honestly.
//!
//! The honesty test runs the same arrivals through two engines in front of
//! the same kind of service (the lab's: eight workers that finish what they
//! start, 20 ms exponential, as a connection pool does; mixed classes with a
//! 1 s deadline; callers that hang up after 250 ms and do not retry): one
//! enforcing, one in shadow mode, whose service is overloaded by everything
//! it serves. The share of arrivals shadow mode says it would refuse must be
//! within 5 points of the share enforcing mode does refuse.

mod common;

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use common::{admitted, build, ms, queued, rejected};
use shed_core::{
    AdaptiveLimit, Admission, Arrival, Class, Cohort, ManualClock, Mode, Permit, RejectReason,
    Shedder, ShedderBuilder, Waiter,
};

fn batch() -> Arrival {
    Arrival::new(Class::Batch)
}

/// Serves twenty requests one at a time, 10 ms each: the engine learns its
/// service time (until then nothing is predicted to wait, and a would-be
/// waiter leaves the rehearsed queue at once).
fn teach_service_time(shedder: &Shedder, clock: &ManualClock) {
    for _ in 0..20 {
        let permit = admitted(shedder.admit(&batch()));
        clock.advance(ms(10));
        drop(permit);
    }
}

#[test]
fn every_request_is_served_and_what_enforcing_would_do_is_counted() {
    let [enforcing, shadow] = [Mode::Enforcing, Mode::Shadow].map(|mode| {
        let (shedder, clock) = build(Shedder::builder().limit(1).queue_capacity(1).mode(mode));
        teach_service_time(&shedder, &clock);
        shedder
    });

    let _first = admitted(enforcing.admit(&batch()));
    let _second = queued(enforcing.admit(&batch()));
    let third = rejected(enforcing.admit(&batch()));
    assert_eq!(third.reason(), RejectReason::QueueFull);

    let served: Vec<Permit> = (0..3).map(|_| admitted(shadow.admit(&batch()))).collect();
    assert!(served.iter().all(|permit| permit.mode() == Mode::Shadow));
    assert_eq!(shadow.in_flight(), 3, "every request served holds a slot");
    assert_eq!(shadow.stats().queue_len(), 1, "one would be waiting");

    let (enforced, rehearsed) = (
        *enforcing.stats().class(Class::Batch),
        *shadow.stats().class(Class::Batch),
    );
    assert_eq!(rehearsed.would.queued, enforced.queued);
    assert_eq!(rehearsed.would.queue_full, enforced.queue_full);
    assert_eq!(rehearsed.would.rejected(), enforced.rejected());
    assert_eq!(
        (rehearsed.admitted - 20, rehearsed.rejected()),
        (3, 0),
        "twenty taught the service time"
    );
    assert_eq!(
        enforced.would.rejected(),
        0,
        "enforcing counts nothing as would"
    );
}

#[test]
fn the_level_would_shed_and_the_deadline_would_refuse_as_in_enforcing_mode() {
    let (shadow, clock) = build(Shedder::builder().limit(1).mode(Mode::Shadow));
    let _busy = admitted(shadow.admit(&batch()));
    // A deadline already gone: refused at the door, enforcing or not.
    let late = batch().with_deadline(shadow.now());
    let _served = admitted(shadow.admit(&late));
    clock.advance(ms(1));
    let stats = shadow.stats();
    assert_eq!(stats.class(Class::Batch).would.shed_by_deadline, 1);
    assert_eq!(stats.class(Class::Batch).admitted, 2);
}

#[test]
fn a_would_be_waiter_leaves_the_rehearsed_queue_when_a_slot_would_have_freed_for_it() {
    let (shadow, clock) = build(Shedder::builder().limit(1).mode(Mode::Shadow));
    teach_service_time(&shadow, &clock);
    let _busy = admitted(shadow.admit(&batch()));
    let _would_wait = admitted(shadow.admit(&batch()));
    assert_eq!(shadow.stats().queue_len(), 1);
    clock.advance(ms(9));
    let _later = admitted(shadow.admit(&batch()));
    assert_eq!(
        shadow.stats().queued.iter().sum::<u32>(),
        2,
        "9 ms: no slot has freed yet (one frees each 10 ms)"
    );
    clock.advance(ms(30));
    let _after = admitted(shadow.admit(&batch()));
    let stats = shadow.stats();
    assert_eq!(
        stats.class(Class::Batch).would.rejected(),
        0,
        "both would have been served"
    );
    assert_eq!(
        stats.queue_len(),
        0,
        "both left, one slot time apart, and a freed slot took the last arrival at once"
    );
}

#[test]
fn switching_modes_takes_effect_for_the_next_request_and_loses_no_slot() {
    let (shedder, _clock) = build(Shedder::builder().limit(2));
    let enforced: Vec<Permit> = (0..2).map(|_| admitted(shedder.admit(&batch()))).collect();
    let waiting = queued(shedder.admit(&batch()));

    shedder.set_mode(Mode::Shadow);
    assert_eq!(shedder.stats().mode, Mode::Shadow);
    let shadowed: Vec<Permit> = (0..3).map(|_| admitted(shedder.admit(&batch()))).collect();
    assert_eq!(shedder.in_flight(), 5);

    shedder.set_mode(Mode::Enforcing);
    assert_eq!(
        shedder.stats().queue_len(),
        1,
        "the rehearsed entries are gone, the real waiter is not"
    );
    let refused = shedder.try_admit(&batch());
    assert!(refused.is_err(), "held to the limit again");

    drop(shadowed);
    drop(enforced);
    let mut waiting = waiting;
    let permit = common::ready(&mut waiting).expect("the waiter was served");
    assert_eq!(shedder.in_flight(), 1);
    drop(permit);
    assert_eq!(shedder.in_flight(), 0, "every slot came back");
}

/// Twenty rounds of sixty-four requests at once, each held 200 ms: beyond
/// a limit of 8, ten times as long as the service takes within it (what an
/// overdrawn service measures).
fn flood(shedder: &Shedder, clock: &ManualClock) {
    for _ in 0..20 {
        let flood: Vec<Permit> = (0..64).map(|_| admitted(shedder.admit(&batch()))).collect();
        clock.advance(ms(200));
        drop(flood);
    }
}

#[test]
fn a_flood_served_beyond_the_limit_teaches_the_adaptive_limit_nothing() {
    let (shadow, clock) = build(
        Shedder::builder()
            .adaptive_limit(AdaptiveLimit::new().initial(8))
            .mode(Mode::Shadow),
    );
    let before = shadow.stats();
    flood(&shadow, &clock);
    let after = shadow.stats();
    assert_eq!(after.limit, before.limit);
    assert_eq!(after.adaptive, before.adaptive);
    assert_eq!(after.drain_rate, before.drain_rate);
    assert_eq!(after.in_flight, 0);
}

/// The contrast: within the limit the service's time is learnt. (The
/// adaptive limit learns only from rounds in which its limit bound, and a
/// flood that fits within it is none, in either mode.)
#[test]
fn the_same_flood_served_within_the_limit_is_learnt() {
    let (shadow, clock) = build(
        Shedder::builder()
            .adaptive_limit(AdaptiveLimit::new().initial(64))
            .mode(Mode::Shadow),
    );
    let before = shadow.stats();
    flood(&shadow, &clock);
    let after = shadow.stats();
    assert_eq!(before.drain_rate, None);
    let drain = after.drain_rate.expect("the service time was learnt");
    // 64 slots of 200 ms.
    assert!((drain - 320.0).abs() < 1.0, "{drain}");
    assert_eq!(after.adaptive, before.adaptive);
}

#[test]
fn a_deadline_passed_while_served_is_counted_as_a_cut_enforcing_would_make() {
    let (shadow, clock) = build(Shedder::builder().limit(4).mode(Mode::Shadow));
    let permit = admitted(shadow.admit(&batch().with_timeout(ms(100))));
    clock.advance(ms(150));
    drop(permit);
    let on_time = admitted(shadow.admit(&batch().with_timeout(ms(100))));
    clock.advance(ms(50));
    drop(on_time);
    assert_eq!(shadow.stats().class(Class::Batch).would.cut_at_deadline, 1);
}

// The honesty test: the same arrivals, enforcing and in shadow.

/// Simulated milliseconds between steps.
const STEP: Duration = Duration::from_millis(1);
/// How long callers wait before they hang up.
const PATIENCE: Duration = Duration::from_millis(250);

struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// A caller's request, as the door left it.
enum Held {
    Serving(Permit),
    Waiting(Waiter, Arc<Flag>),
    /// Answered, hung up, or refused.
    Done,
}

struct Call {
    arrived: Duration,
    held: Held,
}

/// Eight workers that finish every job they start, in arrival order, 20 ms
/// each on average (exponential); callers of the lab's classes that hang up
/// after [`PATIENCE`]; a hang-up gives the permit back as abandoned while
/// the job goes on. Seeded: the same arrivals, classes, cohorts and service
/// times for both engines.
struct Pool {
    clock: ManualClock,
    shedder: Shedder,
    /// Callers still waiting for an answer, by number.
    calls: BTreeMap<usize, Call>,
    next_call: usize,
    jobs: VecDeque<usize>,
    workers: Vec<Option<(Duration, usize)>>,
    /// Arrivals and refusals, counted from [`Pool::measure`].
    attempts: u64,
    refused: u64,
    measuring: bool,
    random: common::XorShift,
}

/// The lab's mix: critical, interactive, batch, background.
const MIX: [(Class, f64); 4] = [
    (Class::Critical, 0.1),
    (Class::Interactive, 0.5),
    (Class::Batch, 0.3),
    (Class::Background, 0.1),
];

impl Pool {
    fn new(builder: ShedderBuilder) -> Pool {
        let (shedder, clock) = build(builder);
        Pool {
            clock,
            shedder,
            calls: BTreeMap::new(),
            next_call: 0,
            jobs: VecDeque::new(),
            workers: vec![None; 8],
            attempts: 0,
            refused: 0,
            measuring: false,
            random: common::XorShift::new(0x5eed),
        }
    }

    fn now(&self) -> Duration {
        self.clock.elapsed()
    }

    fn arrive(&mut self) {
        let index = self.next_call;
        self.next_call += 1;
        let arrival = self.next_arrival();
        let held = match self.shedder.admit(&arrival) {
            Admission::Admitted(permit) => {
                self.jobs.push_back(index);
                Held::Serving(permit)
            }
            Admission::Queued(mut waiter) => {
                let flag = Arc::new(Flag(AtomicBool::new(false)));
                let waker = Waker::from(Arc::clone(&flag));
                let poll = Pin::new(&mut waiter).poll(&mut Context::from_waker(&waker));
                assert!(poll.is_pending());
                Held::Waiting(waiter, flag)
            }
            Admission::Rejected(_) => {
                self.refused += u64::from(self.measuring);
                Held::Done
            }
        };
        self.attempts += u64::from(self.measuring);
        self.calls.insert(
            index,
            Call {
                arrived: self.now(),
                held,
            },
        );
    }

    /// A caller of a class drawn from the mix, with a 1 s deadline.
    fn next_arrival(&mut self) -> Arrival {
        let mut draw = self.random.unit();
        let class = MIX
            .iter()
            .find(|(_, share)| {
                draw -= share;
                draw < 0.0
            })
            .map_or(Class::Background, |(class, _)| *class);
        let cohort = Cohort::new(self.random.below(u64::from(Cohort::COUNT)) as u8);
        Arrival::new(class)
            .with_cohort(cohort.expect("in range"))
            .with_timeout(Duration::from_secs(1))
    }

    /// A service time: exponential, 20 ms on average, at least 1 µs.
    fn service_time(&mut self) -> Duration {
        let secs = -0.020 * (1.0 - self.random.unit()).ln();
        Duration::from_secs_f64(secs).max(Duration::from_micros(1))
    }

    fn step(&mut self, arrivals: u32) {
        self.clock.advance(STEP);
        let now = self.now();
        // Jobs end; their callers, if still there, are answered.
        for worker in &mut self.workers {
            if let Some((ends, index)) = *worker {
                if ends <= now {
                    *worker = None;
                    if let Some(call) = self.calls.get_mut(&index) {
                        call.held = Held::Done;
                    }
                }
            }
        }
        // Callers out of patience hang up; their jobs go on.
        for call in self.calls.values_mut() {
            if now.saturating_sub(call.arrived) >= PATIENCE {
                match std::mem::replace(&mut call.held, Held::Done) {
                    Held::Serving(permit) => permit.abandon(),
                    held => drop(held),
                }
            }
        }
        // Waiters woken or out of time take their verdict.
        for (index, call) in &mut self.calls {
            let Held::Waiting(waiter, flag) = &mut call.held else {
                continue;
            };
            let due =
                flag.0.swap(false, Ordering::SeqCst) || waiter.expires_at() <= self.shedder.now();
            if !due {
                continue;
            }
            let waker = Waker::from(Arc::clone(flag));
            match Pin::new(waiter).poll(&mut Context::from_waker(&waker)) {
                Poll::Pending => {}
                Poll::Ready(Ok(permit)) => {
                    call.held = Held::Serving(permit);
                    self.jobs.push_back(*index);
                }
                Poll::Ready(Err(_)) => {
                    call.held = Held::Done;
                    self.refused += u64::from(self.measuring);
                }
            }
        }
        // Free workers take the oldest jobs.
        for slot in 0..self.workers.len() {
            if self.workers[slot].is_none() {
                if let Some(index) = self.jobs.pop_front() {
                    self.workers[slot] = Some((now + self.service_time(), index));
                }
            }
        }
        for _ in 0..arrivals {
            self.arrive();
        }
        self.calls
            .retain(|_, call| !matches!(call.held, Held::Done));
    }

    /// Runs `seconds` with `per_ms` arrivals every millisecond on average
    /// (Poisson arrivals, as the lab's).
    fn run(&mut self, seconds: u32, per_ms: f64) {
        for _ in 0..seconds * 1_000 {
            let arrivals = self.poisson(per_ms);
            self.step(arrivals);
        }
    }

    /// A Poisson count of mean `mean` (Knuth's product of uniforms).
    fn poisson(&mut self, mean: f64) -> u32 {
        let floor = (-mean).exp();
        let mut product = self.random.unit();
        let mut count = 0;
        while product > floor {
            count += 1;
            product *= self.random.unit();
        }
        count
    }

    fn measure(&mut self) {
        self.measuring = true;
    }

    /// The share of measured arrivals refused (enforcing) or that would
    /// have been refused (shadow: the counters' growth since `from`).
    fn refused_share(&self, would_from: u64) -> f64 {
        let would = self.would_refused() - would_from;
        (self.refused + would) as f64 / self.attempts as f64
    }

    fn would_refused(&self) -> u64 {
        let stats = self.shedder.stats();
        stats
            .classes
            .iter()
            .map(|class| class.would.rejected())
            .sum()
    }
}

/// The pool's capacity: 8 workers / 20 ms = 0.4 requests a millisecond.
const CAPACITY_PER_MS: f64 = 0.4;

/// As the lab's shadow scenario: 10 s at half the capacity (a shadow
/// engine learns its service while it runs within the limit), then 4 s of
/// warm-up and 20 s measured at `load` times the capacity.
fn refused_shares(builder: impl Fn() -> ShedderBuilder, load: f64) -> (f64, f64) {
    let shares = [Mode::Enforcing, Mode::Shadow].map(|mode| {
        let mut pool = Pool::new(builder().mode(mode));
        pool.run(10, CAPACITY_PER_MS / 2.0);
        pool.run(4, CAPACITY_PER_MS * load);
        let would_from = pool.would_refused();
        pool.measure();
        pool.run(20, CAPACITY_PER_MS * load);
        pool.refused_share(would_from)
    });
    (shares[0], shares[1])
}

#[test]
fn at_twice_the_capacity_shadow_predicts_enforcing_refusals_within_five_points_pinned_limit() {
    let (enforcing, shadow) = refused_shares(|| Shedder::builder().limit(8), 2.0);
    eprintln!("{enforcing} {shadow}");
    assert!(
        (enforcing - shadow).abs() <= 0.05,
        "enforcing refused {enforcing:.3}, shadow would have refused {shadow:.3}"
    );
    assert!(enforcing > 0.4, "an overload: {enforcing:.3}");
}

#[test]
fn at_one_and_a_half_times_the_capacity_shadow_predicts_within_five_points_adaptive_limit() {
    let (enforcing, shadow) = refused_shares(Shedder::builder, 1.5);
    assert!(
        (enforcing - shadow).abs() <= 0.05,
        "enforcing refused {enforcing:.3}, shadow would have refused {shadow:.3}"
    );
    assert!(enforcing > 0.25, "an overload: {enforcing:.3}");
}

#[test]
fn at_twice_the_capacity_shadow_predicts_within_five_points_adaptive_limit() {
    let (enforcing, shadow) = refused_shares(Shedder::builder, 2.0);
    assert!(
        (enforcing - shadow).abs() <= 0.05,
        "enforcing refused {enforcing:.3}, shadow would have refused {shadow:.3}"
    );
}
