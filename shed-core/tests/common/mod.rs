//! Shared helpers for the specification tests: polling futures by hand, and a
//! deterministic simulation of a service on a [`ManualClock`].
//!
//! Nothing here sleeps or measures real time: every test drives the clock.
#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use shed_core::{
    Admission, Arrival, Class, Clock, ManualClock, Permit, Rank, Rejection, Shedder,
    ShedderBuilder, Waiter,
};

/// Thirty requests at once, turned away (`try_admit` never waits): on a
/// slot known to drain about 100 a second, a surge, so the door is in an
/// overload until the interval ends.
pub fn surge(shedder: &Shedder) {
    for _ in 0..30 {
        assert!(shedder.try_admit(&Arrival::new(Class::Critical)).is_err());
    }
}

/// `n` milliseconds.
pub const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
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
    Pin::new(future).poll(&mut Context::from_waker(Waker::noop()))
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
pub fn build(builder: ShedderBuilder) -> (Shedder, ManualClock) {
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
/// fixed service time of simulated time, or on [`Sim::one_core`] for its
/// work shared with every other request in service; waiting requests are
/// polled when their waker fires or when their time in the queue runs out
/// (as a host with a timer would).
pub struct Sim {
    pub clock: ManualClock,
    pub shedder: Shedder,
    service: Duration,
    /// Whether requests in service share one core (processor sharing).
    one_core: bool,
    /// Per request in service: the service time it still needs.
    serving: Vec<(Duration, Permit)>,
    parked: Vec<Parked>,
    /// Requests served after waiting in the queue.
    pub served_after_waiting: u64,
    /// Requests refused after waiting in the queue.
    pub refused_in_queue: Vec<Rejection>,
}

impl Sim {
    pub fn new(builder: ShedderBuilder, service: Duration) -> Sim {
        let (shedder, clock) = build(builder);
        Sim {
            clock,
            shedder,
            service,
            one_core: false,
            serving: Vec::new(),
            parked: Vec::new(),
            served_after_waiting: 0,
            refused_in_queue: Vec::new(),
        }
    }

    /// A service of one core: each request needs `work` of it, and the
    /// requests in service share it equally, so that `n` of them at once
    /// each take `n` times as long (CPU-bound handlers that yield).
    pub fn one_core(builder: ShedderBuilder, work: Duration) -> Sim {
        Sim {
            one_core: true,
            ..Sim::new(builder, work)
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
        // On one core the requests in service share the time (advance in
        // steps short against the work for the sharing to hold).
        let served = if self.one_core && !self.serving.is_empty() {
            by / self.serving.len() as u32
        } else {
            by
        };
        for (left, _) in &mut self.serving {
            *left = left.saturating_sub(served);
        }
        self.serving.retain(|(left, _)| !left.is_zero());
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
                            self.serving.push((self.service, permit));
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
                self.serving.push((self.service, permit));
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

/// A barrier for a fixed number of threads that any of them can break.
///
/// A thread that panics while holding a [`guard`](Rendezvous::guard) breaks
/// it, and every thread waiting at it, or arriving later, is let go with
/// [`Broken`]: one failing thread fails the test instead of leaving the
/// others waiting forever at the next barrier (as `std::sync::Barrier` would).
/// Passing it orders everything each thread did before it before everything
/// every thread does after it.
pub struct Rendezvous {
    parties: usize,
    state: Mutex<RendezvousState>,
    all_here: Condvar,
}

struct RendezvousState {
    arrived: usize,
    generation: u64,
    broken: bool,
}

/// Another thread failed: the rendezvous was broken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Broken;

impl Rendezvous {
    pub fn new(parties: usize) -> Rendezvous {
        Rendezvous {
            parties,
            state: Mutex::new(RendezvousState {
                arrived: 0,
                generation: 0,
                broken: false,
            }),
            all_here: Condvar::new(),
        }
    }

    /// Waits until every party has arrived.
    ///
    /// # Errors
    ///
    /// [`Broken`] when another party broke the rendezvous.
    pub fn wait(&self) -> Result<(), Broken> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.broken {
            return Err(Broken);
        }
        state.arrived += 1;
        if state.arrived == self.parties {
            state.arrived = 0;
            state.generation += 1;
            self.all_here.notify_all();
            return Ok(());
        }
        let generation = state.generation;
        while state.generation == generation && !state.broken {
            state = self
                .all_here
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        if state.generation == generation {
            Err(Broken)
        } else {
            Ok(())
        }
    }

    /// Lets every waiting and later party go with [`Broken`].
    pub fn break_it(&self) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .broken = true;
        self.all_here.notify_all();
    }

    /// Breaks the rendezvous if the current thread panics while the guard lives.
    pub fn guard(&self) -> BreakOnPanic<'_> {
        BreakOnPanic(self)
    }
}

/// Breaks its [`Rendezvous`] when dropped during a panic.
pub struct BreakOnPanic<'a>(&'a Rendezvous);

impl Drop for BreakOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.break_it();
        }
    }
}

/// Runs `scenario` on its own thread and returns what it returns, passing on
/// its panic; fails instead of hanging the suite if it has not finished after
/// `limit`. Only a deadlock trips it: `limit` must be far above the
/// scenario's run time on a slow, loaded machine.
pub fn without_deadlock<T: Send + 'static>(
    limit: Duration,
    scenario: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (done, finished) = mpsc::channel();
    let thread = std::thread::spawn(move || {
        let outcome = scenario();
        let _ = done.send(());
        outcome
    });
    match finished.recv_timeout(limit) {
        Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => match thread.join() {
            Ok(outcome) => outcome,
            Err(panic) => std::panic::resume_unwind(panic),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("deadlock: the scenario had not finished after {limit:?}")
        }
    }
}

/// A seeded xorshift64 generator: the same seed, the same operations.
pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> XorShift {
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }

    pub fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }

    pub fn pick<T>(&mut self, items: &mut Vec<T>) -> Option<T> {
        if items.is_empty() {
            None
        } else {
            let index = self.index(items.len());
            Some(items.swap_remove(index))
        }
    }
}

/// Two threads that meet, spinning, before and after each round of a race:
/// their steps then start within a few hundred nanoseconds of each other,
/// where a blocking barrier wakes its waiters microseconds apart.
struct SpinPair {
    arrivals: AtomicU64,
    broken: AtomicBool,
}

/// One thread's place at a [`SpinPair`]: how many times it has met the other.
struct Seat<'a> {
    pair: &'a SpinPair,
    met: u64,
}

/// Spins of a wait at a [`SpinPair`] before it yields.
const SPINS_BEFORE_YIELD: u32 = 1_000;
/// The longest wait, in spins, at the second meeting of
/// [`Seat::meet_at_once`] that still counts as running at once: a few
/// microseconds, against the milliseconds a descheduled thread is away.
const AT_ONCE_SPINS: u32 = 256;

impl SpinPair {
    fn new() -> SpinPair {
        SpinPair {
            arrivals: AtomicU64::new(0),
            broken: AtomicBool::new(false),
        }
    }

    fn seat(&self) -> Seat<'_> {
        Seat { pair: self, met: 0 }
    }
}

impl<'a> Seat<'a> {
    /// Waits until the other thread has arrived as often as this one,
    /// spinning, then yielding (the other thread may need this core).
    /// Returns how many spins it waited, if it never had to yield.
    fn meet(&mut self) -> Result<Option<u32>, Broken> {
        self.met += 1;
        let pair = self.pair;
        pair.arrivals.fetch_add(1, Ordering::AcqRel);
        let mut spins = 0_u32;
        while pair.arrivals.load(Ordering::Acquire) < 2 * self.met {
            if pair.broken.load(Ordering::Acquire) {
                return Err(Broken);
            }
            if spins < SPINS_BEFORE_YIELD {
                std::hint::spin_loop();
                spins += 1;
            } else {
                std::thread::yield_now();
            }
        }
        Ok((spins < SPINS_BEFORE_YIELD).then_some(spins))
    }

    /// Meets twice: once whenever both are ready, then again at once.
    /// Returns whether the second meeting was quick: whether the two threads
    /// were both running as they left it.
    fn meet_at_once(&mut self) -> Result<bool, Broken> {
        self.meet()?;
        Ok(self.meet()?.is_some_and(|spins| spins <= AT_ONCE_SPINS))
    }

    /// Breaks the pair if this thread panics while the guard lives, so that
    /// the other stops waiting.
    fn guard(&self) -> BreakPairOnPanic<'a> {
        BreakPairOnPanic(self.pair)
    }
}

/// Breaks its [`SpinPair`] when dropped during a panic.
struct BreakPairOnPanic<'a>(&'a SpinPair);

impl Drop for BreakPairOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.broken.store(true, Ordering::Release);
        }
    }
}

/// Spins `spins` times, then a random few more.
fn delay(spins: u64, rng: &mut XorShift) {
    for _ in 0..spins + rng.below(8) {
        std::hint::spin_loop();
    }
}

/// Which way a round of a race fell: tells the next round which side to
/// start later, so that the rounds gather where the two orders meet (where
/// the races worth finding are), whatever the machine's speed. Only rounds
/// in which both threads were running at once steer: in the others, the
/// scheduler chose the order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fell {
    /// `here`'s step came first: start it later.
    HereFirst,
    /// `there`'s step came first: start `here` earlier.
    ThereFirst,
    /// Both at once: keep the offset.
    Together,
}

/// How far apart, in spins, the two sides of a race may start. Reaching it
/// starts the search again from no offset.
const MAX_LEAD: i64 = 128;

/// How long a race goes on: until `at_once` rounds ran with both threads
/// running at once, or `at_most` rounds in all (on a machine too busy, or
/// with one core, few rounds are races at all).
#[derive(Clone, Copy, Debug)]
pub struct Rounds {
    /// Rounds with both threads running at once, to run.
    pub at_once: u64,
    /// Rounds to run at most, at once or not.
    pub at_most: u64,
}

/// Races `here` (on this thread) against `there` (on a second thread), for
/// `rounds`. Each round, `setup` builds what both sides share and what each
/// side owns; the sides meet, wait their delays, run, and meet again; then
/// `check` judges the round (numbered from 1) from what both returned, with
/// nothing else running, and says which way it fell, which moves the next
/// round's offset between the sides ([`Fell`]). The offset only decides how
/// often the sides collide, never whether a round passes. Returns how many
/// rounds ran with both threads running at once.
pub fn race<S, H, T, Q, R>(
    rounds: Rounds,
    mut setup: impl FnMut() -> (S, H, T),
    mut here: impl FnMut(&S, H) -> Q,
    there: impl Fn(&S, T) -> R + Sync,
    mut check: impl FnMut(u64, S, Q, R) -> Fell,
) -> u64
where
    S: Clone + Send + Sync,
    T: Send,
    R: Send,
{
    let pair = SpinPair::new();
    let table: Mutex<Option<(S, T, u64)>> = Mutex::new(None);
    let answer: Mutex<Option<(R, bool)>> = Mutex::new(None);
    let over = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let other = scope.spawn(|| -> Result<(), Broken> {
            let mut seat = pair.seat();
            let _guard = seat.guard();
            let mut rng = XorShift::new(0xB0B);
            loop {
                seat.meet()?; // the round is set up, or the race is over
                if over.load(Ordering::Acquire) {
                    return Ok(());
                }
                let (shared, own, spins) = table.lock().unwrap().take().expect("set up");
                let at_once = seat.meet_at_once()?;
                delay(spins, &mut rng);
                let outcome = there(&shared, own);
                *answer.lock().unwrap() = Some((outcome, at_once));
                drop(shared);
                seat.meet()?; // both sides are done
            }
        });
        let mut seat = pair.seat();
        let _guard = seat.guard();
        let mut rng = XorShift::new(0xA11CE);
        // Positive: `here` starts that many spins after `there`.
        let mut lead: i64 = 0;
        let mut at_once_rounds = 0;
        for round in 1.. {
            if at_once_rounds >= rounds.at_once || round > rounds.at_most {
                over.store(true, Ordering::Release);
                let _ = seat.meet();
                break;
            }
            let (shared, own_here, own_there) = setup();
            let there_spins = (-lead).max(0) as u64;
            *table.lock().unwrap() = Some((shared.clone(), own_there, there_spins));
            let Ok(at_once) = seat.meet().and_then(|_| seat.meet_at_once()) else {
                break;
            };
            delay(lead.max(0) as u64, &mut rng);
            let done_here = here(&shared, own_here);
            if seat.meet().is_err() {
                break;
            }
            let (outcome, there_at_once) = answer
                .lock()
                .unwrap()
                .take()
                .expect("the other side answered");
            let fell = check(round, shared, done_here, outcome);
            if at_once && there_at_once {
                at_once_rounds += 1;
                lead += match fell {
                    Fell::HereFirst => 1,
                    Fell::ThereFirst => -1,
                    Fell::Together => 0,
                };
            }
            if lead.abs() > MAX_LEAD {
                lead = 0;
            }
        }
        if let Err(panic) = other.join() {
            std::panic::resume_unwind(panic);
        }
        at_once_rounds
    })
}
