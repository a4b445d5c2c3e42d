//! The shared state behind a [`Shedder`](crate::Shedder) and the steps of a
//! request's journey through it: judge at the door, take a slot or wait,
//! leave the queue, give the slot back.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::arrival::{CohortSource, DeadlineSource};
use crate::config::{nanos, Config, LimitConfig};
use crate::controller::{Controller, Sustained, Tallies};
use crate::instruments::Gauges;
use crate::limit::estimator::{IntervalSamples, SETTLED_SHARE};
use crate::limit::{Ending, Estimator, Sampler};
use crate::mode::Mode;
use crate::offered_load::OVERLOAD_QUEUE;
use crate::patience::Patience;
use crate::permit::{Given, Held};
use crate::queue::{CellState, Entry, QueueGuard, QueueKey, WaitQueues};
use crate::rehearsal::{Rehearsed, RehearsedQueue};
use crate::retry_after::{self, Inputs};
use crate::shedding_log::{SheddingLog, Snapshot};
use crate::slots::{Slots, TakeOrWait};
use crate::stats::{Counters, Outcome};
use crate::sync::Mutex;
use crate::waiter::Waiter;
use crate::wake_list::WakeList;
use crate::{
    random, Admission, Arrival, Class, Clock, Cohort, Level, Permit, Rank, RejectReason, Rejection,
    RetryAfter, Stats,
};

/// How many times the overload wait a waiter of a rank exposed to an
/// overload may wait before it is refused: more important arrivals pass it
/// in the queue, and its predicted wait was only a prediction.
const OVERLOAD_WAIT_SLACK: u64 = 2;

/// The order the door serves its waiters in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ServeOrder {
    /// The most important rank first (FIFO within a rank).
    Importance,
    /// The request that has waited longest first.
    Arrival,
}

/// Everything a shedder shares between its clones, permits and waiters.
#[derive(Debug)]
pub(crate) struct Engine {
    config: Config,
    epoch: Instant,
    slots: Slots,
    controller: Controller,
    /// The adaptive limit's algorithm, run by whoever closes an interval;
    /// `None` for a fixed limit. Lock order: this, then the queue lock.
    estimator: Option<parking_lot::Mutex<Estimator>>,
    /// What the adaptive limit learns from (unused for a fixed limit).
    sampler: Sampler,
    /// Whether the adaptive limit moved to a new epoch whose hold times
    /// have not yet replaced the old limit's in the service-time means
    /// (see [`Engine::restart_service_times_once_settled`]). Read and
    /// written only under the estimator's lock, so `Relaxed` will do.
    stale_service_times: AtomicBool,
    /// How long callers are seen to wait before they hang up.
    patience: Patience,
    queues: Mutex<WaitQueues>,
    /// Queue lengths per rank, written under the queue lock, read without it.
    queue_lens: [AtomicU32; Rank::COUNT],
    /// The limit the service is held to sustain: the limit in force, or
    /// during an adaptive limit's probe the one it cut from. Waits are
    /// predicted with it, since a probe's cut lasts only a round.
    sustained_limit: AtomicU32,
    /// During an adaptive limit's probe, the gap between completions at the
    /// throughput it measured before its cut (nanoseconds; 0 otherwise): the
    /// drain and the slot time are held to it (see
    /// [`Controller::sustained_drain`](crate::controller::Controller::sustained_drain)
    /// and [`Controller::sustained_slot_time`](crate::controller::Controller::sustained_slot_time)).
    sustained_gap: AtomicU64,
    counters: Counters,
    /// Warns when shedding starts and stops.
    shedding_log: SheddingLog,
    /// In shadow mode, the requests that would be waiting (see [`Mode`]).
    /// Never held with another lock.
    rehearsal: parking_lot::Mutex<RehearsedQueue>,
    /// Entries of the rehearsed queue per rank, written under its lock.
    rehearsed_lens: [AtomicU32; Rank::COUNT],
    /// Whether shadow mode ever served a request: until then the rehearsed
    /// queue and the overdrafts are left unread (one load on the hot paths).
    shadowed: AtomicBool,
    /// Shadow permits taken beyond the limit and not yet returned.
    overdrafts: AtomicU32,
    /// One more than the last time an overdraft was taken or returned
    /// (0: never). See [`Engine::overdrawn_since`].
    last_overdraft: AtomicU64,
}

/// The door's judgement of an arrival, before any slot is taken.
enum Door {
    /// Refused at the door, for this reason, at this cohort.
    Refuse(RejectReason, Cohort),
    /// Let through the door: it takes a slot or waits.
    Pass(Pass),
}

/// An arrival the door let through.
struct Pass {
    deadline: Option<u64>,
    /// Its cohort, if the level needed it drawn.
    cohort: Option<Cohort>,
    /// The level it was judged at.
    level: Level,
    /// A slot looked free.
    free: bool,
    /// `None` when a slot looked free or it may not wait.
    wait: Option<JudgedWait>,
}

/// The bounds of the wait the door let an arrival face, in nanoseconds.
struct JudgedWait {
    /// The overload wait, if its rank is exposed to one ([`Engine::exposed_wait`]).
    overload: Option<u64>,
}

impl Engine {
    pub(crate) fn new(config: Config) -> Engine {
        let estimator = match config.limit {
            LimitConfig::Fixed(_) => None,
            LimitConfig::Adaptive(settings) => {
                Some(parking_lot::Mutex::new(Estimator::new(settings)))
            }
        };
        Engine {
            epoch: config.clock.now(),
            slots: Slots::new(config.limit.initial()),
            controller: Controller::new(&config),
            estimator,
            sampler: Sampler::default(),
            stale_service_times: AtomicBool::new(false),
            patience: Patience::new(),
            queues: Mutex::new(WaitQueues::new()),
            queue_lens: Default::default(),
            sustained_limit: AtomicU32::new(config.limit.initial()),
            sustained_gap: AtomicU64::new(0),
            counters: Counters::default(),
            shedding_log: SheddingLog::new(),
            rehearsal: parking_lot::Mutex::new(RehearsedQueue::default()),
            rehearsed_lens: Default::default(),
            shadowed: AtomicBool::new(false),
            overdrafts: AtomicU32::new(0),
            last_overdraft: AtomicU64::new(0),
            config,
        }
    }

    /// Now, in nanoseconds since the engine was built: one clock read.
    pub(crate) fn now(&self) -> u64 {
        self.since_epoch(self.config.clock.now())
    }

    fn since_epoch(&self, instant: Instant) -> u64 {
        nanos(instant.saturating_duration_since(self.epoch))
    }

    /// The instant `at` nanoseconds after the engine was built, or the
    /// latest instant the platform can represent on the way there.
    pub(crate) fn instant(&self, at: u64) -> Instant {
        let mut after = Duration::from_nanos(at);
        loop {
            if let Some(instant) = self.epoch.checked_add(after) {
                return instant;
            }
            after /= 2;
        }
    }

    /// The clock the engine reads.
    pub(crate) fn clock(&self) -> &dyn Clock {
        &*self.config.clock
    }

    /// The concurrency limit in force.
    pub(crate) fn limit(&self) -> u32 {
        self.slots.limit()
    }

    /// Requests holding a slot now.
    pub(crate) fn in_flight(&self) -> u32 {
        self.slots.in_flight()
    }

    /// The admission level as the next request would find it (an idle
    /// service reads as not shedding: see [`Controller::level_at`]).
    pub(crate) fn level(&self) -> Level {
        self.controller.level_at(self.now(), &self.config)
    }

    /// Requests waiting in `rank`'s queue now, read without the queue lock;
    /// in shadow mode, those that would be waiting.
    pub(crate) fn queue_len(&self, rank: Rank) -> u32 {
        let waiting = self.queue_lens[rank.index()].load(Ordering::Relaxed);
        if self.shadowed() {
            waiting + self.rehearsed_lens[rank.index()].load(Ordering::Relaxed)
        } else {
            waiting
        }
    }

    /// Whether shadow mode ever served a request (see the field).
    fn shadowed(&self) -> bool {
        self.shadowed.load(Ordering::Relaxed)
    }

    /// A snapshot of limits, queues, level and counters; with an adaptive
    /// limit it takes the estimator's lock.
    pub(crate) fn stats(&self) -> Stats {
        let limit = self.slots.limit();
        let (limit_bounds, adaptive) = match &self.estimator {
            Some(estimator) => {
                let estimator = estimator.lock();
                (estimator.bounds(), Some(estimator.beliefs().into()))
            }
            // A pinned limit is its own bounds, as `set_limit` last left it.
            None => ((limit, limit), None),
        };
        let stats = Stats {
            limit,
            limit_bounds,
            adaptive,
            in_flight: self.slots.in_flight(),
            queued: Rank::ALL.map(|rank| self.queue_len(rank)),
            level: self.level(),
            recent_sojourn: self.controller.recent_sojourn(),
            drain_rate: self.controller.drain_rate(limit),
            classes: Class::ALL.map(|class| self.counters.class(class)),
            bypassed: self.counters.bypassed(),
            mode: self.config.live.mode(),
        };
        self.counters.publish(|| Gauges::of(&stats));
        stats
    }

    /// What the metrics' gauges report now, at admission level `level`.
    fn gauges(&self, level: Level) -> Gauges {
        Gauges {
            limit: self.slots.limit(),
            in_flight: self.slots.in_flight(),
            queued: Rank::ALL.map(|rank| self.queue_len(rank)),
            level,
        }
    }

    /// Counts a request let through unjudged; nothing else sees it.
    pub(crate) fn count_bypassed(&self) {
        self.counters.count_bypassed();
    }

    /// The limit the service is held to sustain (see the field).
    fn sustained_limit(&self) -> u32 {
        self.sustained_limit.load(Ordering::Relaxed)
    }

    /// What the service is held to sustain (see the fields).
    fn sustained(&self) -> Sustained {
        let gap = self.sustained_gap.load(Ordering::Relaxed);
        Sustained {
            limit: self.sustained_limit(),
            gap: (gap > 0).then_some(gap),
        }
    }

    /// The whole door: judge, then take a slot, wait, or refuse. In shadow
    /// mode, judge and record, then serve.
    pub(crate) fn admit(self: &Arc<Self>, arrival: &Arrival, may_wait: bool) -> Admission {
        if self.config.live.mode() == Mode::Shadow {
            return Admission::Admitted(self.rehearse(arrival, may_wait));
        }
        let now = self.now();
        self.tick(now, false);
        let rank = arrival.rank();
        // A request that may not wait is served now or refused for overload.
        let may_wait = may_wait && self.config.queue_capacity > 0;
        let pass = match self.judge(arrival, now, may_wait, |rank| self.slots.looks_free(rank)) {
            Door::Refuse(reason, cohort) => return self.refuse(reason, rank, cohort),
            Door::Pass(pass) => pass,
        };
        let cohort = || pass.cohort.unwrap_or_else(|| self.cohort_of(arrival));
        if pass.free && self.slots.try_take(rank) {
            self.controller.record_no_wait(rank);
            return Admission::Admitted(self.permit(rank, now, pass.deadline));
        }
        if self.estimator.is_some() {
            self.sampler.record_blocked();
        }
        // Refusals decided at the door take no lock: a full queue is read
        // from its lock-free length (and checked again under the lock).
        if !may_wait || self.queue_len(rank) as usize >= self.config.queue_capacity {
            return self.refuse(RejectReason::QueueFull, rank, cohort());
        }
        // A slot that looked free was taken first: judged now.
        let overload_wait = match pass.wait {
            Some(wait) => wait.overload,
            None => self.exposed_wait(rank, self.in_overload(pass.level, now)),
        };
        let longest_wait = overload_wait.map(|wait| wait.saturating_mul(OVERLOAD_WAIT_SLACK));
        self.enqueue(rank, cohort(), now, pass.deadline, longest_wait)
    }

    /// The door's judgement, the same in both modes; `looks_free` says
    /// whether a slot looks free to a rank.
    #[inline(always)]
    fn judge(
        &self,
        arrival: &Arrival,
        now: u64,
        may_wait: bool,
        looks_free: impl Fn(Rank) -> bool,
    ) -> Door {
        let rank = arrival.rank();
        let deadline = self.deadline_of(arrival, now);
        if deadline.is_some_and(|deadline| deadline <= now) {
            return Door::Refuse(RejectReason::DeadlinePassed, Cohort::MAX);
        }
        // Nothing is shed at the lowest level: the fast path then needs no
        // cohort, and the slower ones draw it when they need it.
        let level = self.controller.level();
        let early_cohort = (level != Level::NONE).then(|| self.cohort_of(arrival));
        if let Some(cohort) = early_cohort.filter(|cohort| level.sheds(rank, *cohort)) {
            return Door::Refuse(RejectReason::Shed, cohort);
        }
        self.controller.record_passed_level(rank);
        let cohort = || early_cohort.unwrap_or_else(|| self.cohort_of(arrival));

        let free = looks_free(rank);
        let wait = if free || !may_wait {
            // Served now or not at all: its deadline only has to leave room
            // for the work itself.
            if deadline.is_some_and(|deadline| deadline - now < self.config.min_useful_window) {
                return Door::Refuse(RejectReason::DeadlineUnmeetable, cohort());
            }
            None
        } else {
            // It would wait: the wait it faces must fit what its deadline
            // leaves (else it is refused without Retry-After, the caller's
            // time being gone) and what callers are seen to wait (else it is
            // refused for overload: the queue is longer than anyone waits).
            let overload = self.in_overload(level, now);
            let predicted = self.predicted_wait(rank, overload);
            let window = self.useful_window_when_waiting();
            if deadline.is_some_and(|deadline| deadline - now < predicted.saturating_add(window)) {
                return Door::Refuse(RejectReason::DeadlineUnmeetable, cohort());
            }
            let overload_wait = self.exposed_wait(rank, overload);
            let budget = [self.patience_budget(rank.class()), overload_wait];
            if budget
                .into_iter()
                .flatten()
                .any(|budget| budget < predicted)
            {
                return Door::Refuse(RejectReason::QueueFull, cohort());
            }
            Some(JudgedWait {
                overload: overload_wait,
            })
        };
        Door::Pass(Pass {
            deadline,
            cohort: early_cohort,
            level,
            free,
            wait,
        })
    }

    /// Shadow mode's door: judges as [`Engine::admit`] does, records what it
    /// would have done, and serves the request at once (see [`Mode`]).
    #[cold]
    #[inline(never)]
    fn rehearse(self: &Arc<Self>, arrival: &Arrival, may_wait: bool) -> Permit {
        if !self.shadowed() {
            self.shadowed.store(true, Ordering::Relaxed);
        }
        let now = self.now();
        self.tick(now, false);
        let (next_slot, slot_time) = self.settle_rehearsal(now);
        let rank = arrival.rank();
        let may_wait = may_wait && self.config.queue_capacity > 0;
        // Free: a slot is free in the service, or one would have freed in
        // the door enforcing mode would have kept (once its pace is known);
        // and nobody as important would be waiting.
        let replayed_free = slot_time > 0 && next_slot <= now;
        let looks_free = |rank: Rank| {
            (self.slots.looks_free(rank) || replayed_free)
                && Rank::ALL[rank.index()..]
                    .iter()
                    .all(|rank| self.rehearsed_lens[rank.index()].load(Ordering::Relaxed) == 0)
        };
        let deadline = match self.judge(arrival, now, may_wait, looks_free) {
            Door::Refuse(reason, cohort) => {
                self.would_refuse(reason, rank, cohort);
                self.deadline_of(arrival, now)
            }
            Door::Pass(pass) => {
                let cohort = pass.cohort.unwrap_or_else(|| self.cohort_of(arrival));
                match pass.wait {
                    _ if pass.free => {
                        self.controller.record_no_wait(rank);
                        self.rehearsal.lock().take_slot(next_slot.min(now));
                    }
                    Some(wait) if (self.queue_len(rank) as usize) < self.config.queue_capacity => {
                        self.rehearse_wait(rank, cohort, now, pass.deadline, wait);
                    }
                    _ => self.would_refuse(RejectReason::QueueFull, rank, cohort),
                }
                pass.deadline
            }
        };
        let overdrawn = self.overdrafts.load(Ordering::Relaxed) > 0;
        let given = if self.slots.take_beyond_limit() {
            self.overdrafts.fetch_add(1, Ordering::Relaxed);
            self.last_overdraft
                .fetch_max(now.saturating_add(1), Ordering::Relaxed);
            Given::ShadowOverdraft
        } else if overdrawn {
            Given::ShadowOverdrawn
        } else {
            Given::Shadow
        };
        self.counters.count(rank.class(), Outcome::Admitted);
        Permit::new(Arc::clone(self), rank, now, 0, deadline).in_shadow(given)
    }

    /// Stands in for a request the door let wait (with `wait`'s bounds):
    /// an entry in the rehearsed queue that leaves as the waiter would have.
    fn rehearse_wait(
        &self,
        rank: Rank,
        cohort: Cohort,
        now: u64,
        deadline: Option<u64>,
        wait: JudgedWait,
    ) {
        let longest_wait = wait
            .overload
            .map(|wait| wait.saturating_mul(OVERLOAD_WAIT_SLACK));
        let (expires_at, expiry) = self.expiry(rank.class(), now, deadline, longest_wait);
        let mut rehearsal = self.rehearsal.lock();
        rehearsal.push(Rehearsed {
            rank,
            cohort,
            enqueued_at: now,
            expires_at,
            expiry,
        });
        self.set_rehearsed_len(&rehearsal, rank);
        drop(rehearsal);
        self.counters.count_would(rank.class(), Outcome::Queued);
    }

    /// Replays the door enforcing mode would have kept up to `now`: the
    /// rehearsed queue's entries leave as their waiters would have, served
    /// (their waits feed the controller), refused at their expiry, or shed
    /// by the level. Returns when its next slot frees, and the slot time.
    fn settle_rehearsal(&self, now: u64) -> (u64, u64) {
        let level = self.controller.level();
        let limit = self.slots.limit();
        let slot_time = self.controller.slot_time(limit).unwrap_or(0);
        let by_importance =
            self.serve_order(self.in_overload(level, now)) == ServeOrder::Importance;
        let mut refused = Vec::new();
        let mut rehearsal = self.rehearsal.lock();
        rehearsal.drain_shed(level, |entry| {
            refused.push((RejectReason::ShedWhileQueued, entry));
        });
        rehearsal.replay(now, slot_time, by_importance, |departure| {
            self.controller
                .record_sojourn(departure.entry.rank, departure.sojourn());
            if let Some(reason) = departure.refused {
                refused.push((reason, departure.entry));
            }
        });
        for rank in Rank::ALL {
            self.set_rehearsed_len(&rehearsal, rank);
        }
        let next_slot = rehearsal.next_slot(now, slot_time, limit);
        drop(rehearsal);
        for (reason, entry) in refused {
            self.would_refuse(reason, entry.rank, entry.cohort);
        }
        (next_slot, slot_time)
    }

    fn set_rehearsed_len(&self, rehearsal: &RehearsedQueue, rank: Rank) {
        self.rehearsed_lens[rank.index()].store(rehearsal.len(rank), Ordering::Relaxed);
    }

    /// Counts and traces a refusal shadow mode did not make, with the
    /// Retry-After it would have sent.
    fn would_refuse(&self, reason: RejectReason, rank: Rank, cohort: Cohort) {
        self.counters.count_would(rank.class(), Outcome::of(reason));
        let retry_after = reason.is_overload().then(|| self.retry_after(rank, cohort));
        tracing::debug!(
            target: "shed::shadow",
            class = rank.class().as_str(),
            attempt = if rank.is_retry() { "retry" } else { "original" },
            reason = reason.as_str(),
            retry_after_s = retry_after.map(|after| after.as_secs()),
            "would refuse"
        );
    }

    /// Whether the rehearsed queue holds any entry.
    fn rehearsed(&self) -> bool {
        self.shadowed()
            && self
                .rehearsed_lens
                .iter()
                .any(|len| len.load(Ordering::Relaxed) > 0)
    }

    /// A request shadow mode served ends at `now`: an overdraft is
    /// returned, and had its deadline passed, enforcing would have cut it
    /// off.
    #[cold]
    fn end_shadow_service(&self, held: &Held, now: u64) {
        if held.given == Given::ShadowOverdraft {
            self.overdrafts.fetch_sub(1, Ordering::Relaxed);
            self.last_overdraft
                .fetch_max(now.saturating_add(1), Ordering::Relaxed);
        }
        if held.deadline.is_some_and(|deadline| now > deadline) {
            self.counters
                .count_would(held.rank.class(), Outcome::CutAtDeadline);
        }
    }

    /// Switches between enforcing and shadow mode, for the next request.
    pub(crate) fn set_mode(&self, mode: Mode) {
        self.config.live.set_mode(mode);
        if mode == Mode::Enforcing {
            self.forget_rehearsal();
        }
    }

    /// Drops the rehearsed queue: enforcing resumed, and its requests were
    /// served.
    fn forget_rehearsal(&self) {
        let mut rehearsal = self.rehearsal.lock();
        rehearsal.clear();
        for rank in Rank::ALL {
            self.set_rehearsed_len(&rehearsal, rank);
        }
    }

    /// Whether the service ran more requests than the limit allowed at any
    /// time since `since`: shadow permits taken beyond the limit are held
    /// now, or one was taken or returned since then. What the service
    /// measured meanwhile describes load enforcing mode would have kept
    /// out, so it is not learnt from (see [`Mode`]).
    fn overdrawn_since(&self, since: u64) -> bool {
        self.shadowed()
            && (self.overdrafts.load(Ordering::Relaxed) > 0
                || self.last_overdraft.load(Ordering::Relaxed) > since)
    }

    /// Takes the queue lock; wakers collected while it is held run when it
    /// is let go ([`Locked::unlock`], or on unwinding).
    fn lock(&self) -> Locked<'_> {
        Locked {
            queues: self.queues.lock(),
            wakers: WakeList::new(),
        }
    }

    /// The slow path of the door, under the queue lock: a waiter waits at
    /// most `longest_wait`, besides its class's and its callers' bounds.
    fn enqueue(
        self: &Arc<Self>,
        rank: Rank,
        cohort: Cohort,
        now: u64,
        deadline: Option<u64>,
        longest_wait: Option<u64>,
    ) -> Admission {
        let mut locked = self.lock();
        // One reading of the level for the whole critical section: the purge
        // and the check must agree, or a request the level sheds could be
        // left queued and served later.
        let level = self.controller.level();
        self.drain_shed(&mut locked, level);
        let verdict = if level.sheds(rank, cohort) {
            Err(RejectReason::Shed)
        } else if self.slots.take_or_wait(rank, &locked.queues) == TakeOrWait::Took {
            Ok(None)
        } else if locked.queues.len(rank) >= self.config.queue_capacity {
            Err(RejectReason::QueueFull)
        } else {
            let waiter = self.push(&mut locked, rank, cohort, now, deadline, longest_wait);
            Ok(Some(waiter))
        };
        locked.unlock();
        match verdict {
            Err(reason) => self.refuse(reason, rank, cohort),
            Ok(None) => {
                self.controller.record_no_wait(rank);
                Admission::Admitted(self.permit(rank, now, deadline))
            }
            Ok(Some(waiter)) => {
                self.counters.count(rank.class(), Outcome::Queued);
                Admission::Queued(waiter)
            }
        }
    }

    /// Joins the back of `rank`'s queue, to wait at most the class's
    /// maximum wait, its callers' patience and `longest_wait`.
    fn push(
        self: &Arc<Self>,
        locked: &mut Locked<'_>,
        rank: Rank,
        cohort: Cohort,
        now: u64,
        deadline: Option<u64>,
        longest_wait: Option<u64>,
    ) -> Waiter {
        let (expires_at, expiry) = self.expiry(rank.class(), now, deadline, longest_wait);
        let (key, cell) = locked.queues.push(rank, cohort, now, expires_at, expiry);
        self.set_queue_len(&locked.queues, rank);
        Waiter::new(Arc::clone(self), cell, key, rank, deadline)
    }

    /// When a request of `class` queued at `now` leaves the queue unserved,
    /// and why: at the class's maximum wait, its callers' patience or
    /// `longest_wait`, or earlier when its deadline would leave too little
    /// time for the work.
    fn expiry(
        &self,
        class: Class,
        now: u64,
        deadline: Option<u64>,
        longest_wait: Option<u64>,
    ) -> (u64, RejectReason) {
        let max_wait = [self.patience_budget(class), longest_wait]
            .into_iter()
            .flatten()
            .fold(self.config.live.max_wait(class), u64::min);
        let max_wait_ends = now.saturating_add(max_wait);
        let last_useful =
            deadline.map(|deadline| deadline.saturating_sub(self.useful_window_when_waiting()));
        match last_useful {
            Some(last_useful) if last_useful < max_wait_ends => {
                (last_useful, RejectReason::DeadlineExpiredInQueue)
            }
            _ => (max_wait_ends, RejectReason::QueueTimeout),
        }
    }

    /// A permit taken without waiting.
    fn permit(self: &Arc<Self>, rank: Rank, now: u64, deadline: Option<u64>) -> Permit {
        self.counters.count(rank.class(), Outcome::Admitted);
        Permit::new(Arc::clone(self), rank, now, 0, deadline)
    }

    /// The epoch a permit admitted now belongs to (0 under a fixed limit).
    pub(crate) fn limit_epoch(&self) -> u32 {
        if self.estimator.is_some() {
            self.sampler.epoch()
        } else {
            0
        }
    }

    fn refuse(&self, reason: RejectReason, rank: Rank, cohort: Cohort) -> Admission {
        Admission::Rejected(self.rejection(reason, rank, cohort))
    }

    /// Counts a refusal and computes its Retry-After. No lock, no allocation.
    fn rejection(&self, reason: RejectReason, rank: Rank, cohort: Cohort) -> Rejection {
        self.counters.count(rank.class(), Outcome::of(reason));
        let retry_after = reason.is_overload().then(|| self.retry_after(rank, cohort));
        Rejection::new(reason, rank, retry_after)
    }

    /// When a request refused for overload now should come back.
    #[inline(never)]
    fn retry_after(&self, rank: Rank, cohort: Cohort) -> RetryAfter {
        retry_after::compute(Inputs {
            rank,
            queue_ahead: self.queue_ahead(rank),
            slot_time: self.controller.sustained_slot_time(self.sustained()),
            distance_below_level: self.controller.level().distance_below(rank, cohort),
            recovery_step: self.config.recovery_step,
            interval: self.config.interval,
            cap: self.config.live.retry_after_cap(),
            jitter: self.config.retry_after_jitter,
            sample: random::next_u64() >> 48,
        })
    }

    /// An arrival's deadline on the engine's clock, `now` being when it is
    /// judged (the start of a deadline given as a timeout).
    fn deadline_of(&self, arrival: &Arrival, now: u64) -> Option<u64> {
        match arrival.deadline_source() {
            DeadlineSource::None => None,
            DeadlineSource::At(at) => Some(self.since_epoch(at)),
            DeadlineSource::After(after) => Some(now.saturating_add(nanos(after))),
        }
    }

    /// An arrival's cohort: drawn, hashed from its caller key with the
    /// current rotation period, or as given.
    fn cohort_of(&self, arrival: &Arrival) -> Cohort {
        match arrival.cohort_source() {
            CohortSource::Spread => Cohort::spread(),
            CohortSource::Key(key) => Cohort::from_key(key, self.controller.cohort_period()),
            CohortSource::Fixed(cohort) => cohort,
        }
    }

    /// Requests served before a new arrival of `rank` in order of
    /// importance: those of its rank and the more important ones. (A
    /// refusal's Retry-After counts these too: refusals for overload come
    /// in one.)
    fn queue_ahead(&self, rank: Rank) -> u32 {
        let ahead = &Rank::ALL[rank.index()..];
        let lens = |lens: &[AtomicU32; Rank::COUNT]| -> u32 {
            ahead
                .iter()
                .map(|rank| lens[rank.index()].load(Ordering::Relaxed))
                .sum()
        };
        if self.shadowed() {
            lens(&self.queue_lens) + lens(&self.rehearsed_lens)
        } else {
            lens(&self.queue_lens)
        }
    }

    /// The least time a request that must wait for a slot needs left when it
    /// gets one: the configured minimum useful window, or the measured 95th
    /// percentile of service time when that is longer. Scarce slots go to
    /// requests likely to finish in time; a slot given to one that finishes
    /// after its caller gave up is wasted.
    fn useful_window_when_waiting(&self) -> u64 {
        let p95_service = self.controller.p95_service().unwrap_or(0);
        self.config.min_useful_window.max(p95_service)
    }

    /// The longest a request of `class` should wait at the door: what its
    /// callers are seen to wait before they hang up, less the 95th percentile
    /// of service time (the work must fit before they leave). `None` while
    /// callers are not seen to hang up.
    fn patience_budget(&self, class: Class) -> Option<u64> {
        let patience = self.patience.of(class)?;
        let service = self.controller.p95_service().unwrap_or(0);
        Some(patience.saturating_sub(service))
    }

    /// Whether the door is in an overload: the level sheds, the load that
    /// passed it outpaced the drain rate when the last interval closed, or
    /// a surge is arriving (more than the slots drain since the interval
    /// began, surely, which the interval's close has not judged yet). In
    /// one, slots go to the most important waiter and the ranks it exposes
    /// wait briefly ([`Engine::exposed_wait`]); below one, every waiter will
    /// be served, slots go to the one that has waited longest, and it may
    /// wait as long as callers do.
    ///
    /// The level alone lags on a slow service: commit 265f2b7 (cpu-bound lab at 2x).
    /// Importance below overload starves the ranks below: commit af17781 (steady lab at 0.9x).
    fn in_overload(&self, level: Level, now: u64) -> bool {
        level != Level::NONE || self.controller.outpaced() || self.surging(now)
    }

    /// The order waiters are served in: by importance in an overload, and
    /// while a probe's cut of the limit builds a queue for a round (it falls
    /// on the least important, as an overload's would); else by arrival.
    fn serve_order(&self, overload: bool) -> ServeOrder {
        let probing = self.slots.limit() < self.sustained_limit();
        if overload || probing {
            ServeOrder::Importance
        } else {
            ServeOrder::Arrival
        }
    }

    /// The overload wait ([`Engine::overload_wait`], once a slot time is
    /// known) if `rank` is exposed to an overload: one is under way and the
    /// service does not drain `rank` and the ranks above it with room to
    /// spare ([`Controller::protects`](crate::controller::Controller::protects)).
    /// An exposed arrival is refused if it would wait longer, and a waiter
    /// that has waited [`OVERLOAD_WAIT_SLACK`] times as long is refused
    /// then: the ranks above it pass it in the queue, and a batch request
    /// behind a stream of interactive ones would wait as long as its caller
    /// does, to be served just before it hangs up.
    /// Measured: commit 265f2b7 (cpu-bound lab, batch waiters served at their callers' patience).
    fn exposed_wait(&self, rank: Rank, overload: bool) -> Option<u64> {
        if overload && !self.controller.protects(rank) {
            self.overload_wait()
        } else {
            None
        }
    }

    /// Whether more requests are arriving than the service is held to drain
    /// ([`Engine::sustained`]) and the overload's queue holds.
    fn surging(&self, now: u64) -> bool {
        let drain = self.controller.sustained_drain(self.sustained());
        drain.is_some_and(|drain| self.controller.surging(now, drain, OVERLOAD_QUEUE))
    }

    /// The longest a request should wait at the door in an overload: it
    /// needs no queue longer than keeps the slots busy between completions,
    /// and every request waiting longer only adds its wait to the latency
    /// of all. With arrivals at least as fast as completions, a queue of
    /// [`OVERLOAD_QUEUE`] waiters runs dry only when that many completions
    /// and one more come before any arrival (odds of 1 in 512 at most, for
    /// Poisson arrivals and exponential service times): so the wait is that
    /// many slot times at the limit in force, and never more than one per
    /// slot of the sustained limit (at least the target sojourn). `None`
    /// while no slot time is known: a number of slot times then says
    /// nothing (and nothing is predicted to wait).
    ///
    /// The second bound keeps a small service's queue within one service
    /// time at the limit it sustains (a limit of 2 keeps 2 waiters, not 8).
    /// It counts the sustained limit's slots, so that an adaptive limit's
    /// probe, which cuts the limit in force for a round, does not cut the
    /// queue with it: the test
    /// `door_waits::a_probe_of_the_adaptive_limit_keeps_the_overload_queue_eight_waiters_long`.
    /// Slot times, not service times: under a limit far above what the
    /// service runs at once, the service time counts the queue inside it.
    /// Measured: commit fdf2989 (unknown-capacity lab, a limit of 64 on 8 workers).
    ///
    /// The queue is also how an adaptive limit sees an overload: it counts
    /// a round as keeping the service full only when nearly every released
    /// slot goes straight to a waiter. With a shortest queue of 2 waiters
    /// the lab's capacity drop wasted less work (callers hang up at 250 ms
    /// on work of 60 ms), but in one of two trials no round counted and the
    /// limit stood at 11 on a knee of 8 for the whole drop
    /// (`docs/lab/HISTORY.md`, "the work wasted is the door's wait").
    ///
    /// Both bounds are stretched while the arrivals (the ones the level
    /// refuses included) outrun the completions by less than 1.7 times
    /// ([`Controller::overload_stretch`]): near 1x a queue of eight stands
    /// full often and refuses work the service would finish (8.2% of
    /// arrivals on 8 slots at exactly the drain rate, 1.5% with 64).
    /// Tests `door_waits::a_third_over_the_drain_rate_a_shedding_door_keeps_fourteen_waiters`
    /// and `offered_load::tests::an_overload_queue_stretches_from_1_at_1_7x_the_completions_to_8_at_1_06x`.
    fn overload_wait(&self) -> Option<u64> {
        let shortest = OVERLOAD_QUEUE.min(self.sustained_limit());
        let waiters = (f64::from(shortest) * self.controller.overload_stretch()).round() as u32;
        self.controller
            .slot_time(self.slots.limit())
            .map(|slot_time| {
                (slot_time.saturating_mul(u64::from(waiters)))
                    .max(self.config.live.target_sojourn())
            })
    }

    /// How long a new arrival of `rank` would wait for a slot, in
    /// nanoseconds; zero while the slot time is unknown. Served by
    /// importance ([`Engine::serve_order`]), it waits for the waiters of its
    /// rank and the more important ones; by arrival, for every waiter.
    ///
    /// Below overload the slots drain at the pace the service is held to
    /// sustain ([`Controller::sustained_slot_time`](crate::controller::Controller::sustained_slot_time):
    /// an adaptive limit's probe cuts the limit for a round, and the queue
    /// that builds meanwhile drains once the round ends). In an overload,
    /// the wait is what the limit in force gives now: a request admitted to
    /// wait behind a probe's cut would wait twice as long as the overload's
    /// short queue is meant to let it.
    fn predicted_wait(&self, rank: Rank, overload: bool) -> u64 {
        let slot_time = if overload {
            self.controller.slot_time(self.slots.limit())
        } else {
            self.controller.sustained_slot_time(self.sustained())
        };
        let ahead = match self.serve_order(overload) {
            ServeOrder::Importance => self.queue_ahead(rank),
            ServeOrder::Arrival => self.queue_ahead(Rank::ALL[0]),
        };
        slot_time.map_or(0, |slot_time| {
            (u64::from(ahead) + 1).saturating_mul(slot_time)
        })
    }

    /// A permit's slot comes back.
    pub(crate) fn complete(&self, held: &Held) {
        let now = self.now();
        let Held {
            rank,
            started_at,
            queued,
            epoch,
            ending,
            ..
        } = *held;
        if held.given != Given::Enforced {
            self.end_shadow_service(held, now);
        }
        // How long callers wait is theirs, whatever the service's load.
        if ending == Ending::Abandoned {
            let age = now.saturating_sub(started_at).saturating_add(queued);
            self.patience.record(rank.class(), age);
        }
        // A shadow permit taken while the service ran beyond the limit holds
        // its slot in a service enforcing mode would not have had; one taken
        // before is measured whole (left out for an overdraft that came
        // later, the longest permits, likelier to meet one, would be left
        // out most: the service would read faster than it is).
        let learnt = match held.given {
            Given::Enforced => !self.overdrawn_since(started_at),
            Given::Shadow => true,
            Given::ShadowOverdrawn | Given::ShadowOverdraft => false,
        };
        let outcome = match ending {
            Ending::Completed => Outcome::Completed,
            Ending::Abandoned => Outcome::Abandoned,
            Ending::DeadlineCut => Outcome::CutAtDeadline,
        };
        self.counters.count(rank.class(), outcome);
        let hold = now.saturating_sub(started_at);
        self.counters.record_times(rank.class(), queued, hold);
        let force = learnt && self.controller.record_completion(hold, &self.config);
        if learnt && self.estimator.is_some() {
            self.sampler.record(epoch, hold, ending);
        }
        self.give_back(now);
        self.tick(now, force);
    }

    /// Closes the controller interval if it is due and this thread claims it:
    /// the level moves, and an adaptive limit takes the interval's samples.
    #[inline]
    fn tick(&self, now: u64, force: bool) {
        if self.controller.may_be_due(now, force) {
            self.close_interval(now, force);
        }
    }

    #[inline(never)]
    fn close_interval(&self, now: u64, force: bool) {
        let Some(claim) = self.controller.claim(now, force, &self.config) else {
            return;
        };
        match self.config.live.mode() {
            Mode::Shadow => {
                self.settle_rehearsal(now);
            }
            // A shadow request that raced a switch to enforcing may have
            // left an entry.
            Mode::Enforcing if self.rehearsed() => self.forget_rehearsal(),
            Mode::Enforcing => {}
        }
        let hang_ups = self.patience.close_interval();
        // An overdrawn service's measurements are not learnt (see `Mode`),
        // nor its callers' hang-ups taken as a sign of overload: enforcing
        // mode would have kept the load that made them out.
        let measured = !self.overdrawn_since(self.controller.interval_began());
        let hang_ups = if measured { hang_ups } else { 0 };
        // Nobody else takes the estimator's lock but stats and `set_limit`.
        let mut estimator = self.estimator.as_ref().map(|estimator| estimator.lock());
        let tallies = Tallies {
            hang_ups,
            refused_by_level: self.counters.tally(Outcome::Shed),
            completed: self.counters.tally(Outcome::Completed),
        };
        let closed = self.controller.update(
            &claim,
            now,
            self.sustained(),
            tallies,
            measured,
            &self.config,
        );
        self.shedding_log
            .observe(now, self.controller.level(), || Snapshot {
                limit: self.slots.limit(),
                queue_delay: self.controller.recent_sojourn(),
            });
        self.counters
            .publish(|| self.gauges(self.controller.level()));
        if let Some(estimator) = &mut estimator {
            let samples = self.sampler.take(closed);
            if !measured {
                return;
            }
            self.restart_service_times_once_settled(&samples);
            if estimator.on_interval(samples) {
                self.sampler.new_epoch();
                self.stale_service_times.store(true, Ordering::Relaxed);
            }
            self.follow(estimator, now);
        }
    }

    /// After the adaptive limit moved to a new epoch (its own moves that
    /// start one, not the delivery rule's small steps), the first interval
    /// whose released permits were nearly all admitted in it gives the
    /// service times the drain rate and the slot time are read from (see
    /// [`Controller::restart_service_times`](crate::controller::Controller::restart_service_times)).
    fn restart_service_times_once_settled(&self, samples: &IntervalSamples) {
        if self.stale_service_times.load(Ordering::Relaxed) && samples.settled(SETTLED_SHARE) {
            self.controller
                .restart_service_times(samples.hold, samples.samples);
            self.stale_service_times.store(false, Ordering::Relaxed);
        }
    }

    /// Returns a slot: lock-free unless somebody waits, then hands it over.
    pub(crate) fn give_back(&self, now: u64) {
        if self.slots.try_give_back() {
            return;
        }
        // Judged before the lock: the surge check reads a dozen atomics.
        let level = self.controller.level();
        let overload = self.in_overload(level, now);
        let mut locked = self.lock();
        self.drain_shed(&mut locked, level);
        let handed_off =
            !self.slots.over_limit() && self.grant_next(&mut locked, level, overload, now);
        if !handed_off {
            self.slots.give_back_locked(&locked.queues);
        }
        locked.unlock();
        if handed_off && self.estimator.is_some() {
            self.sampler.record_handed_off();
        }
    }

    /// Hands a held slot to the next live waiter in the order `overload`
    /// calls for (see [`Engine::serve_order`]), refusing expired ones on the
    /// way. Returns `false` when nobody was left to take it.
    fn grant_next(&self, locked: &mut Locked<'_>, level: Level, overload: bool, now: u64) -> bool {
        let order = self.serve_order(overload);
        let next = |queues: &mut WaitQueues| match order {
            ServeOrder::Importance => queues.pop_most_important(),
            ServeOrder::Arrival => queues.pop_oldest(),
        };
        while let Some(taken) = next(&mut locked.queues) {
            debug_assert!(
                !level.sheds(taken.rank, taken.entry.cohort),
                "the queues were purged at this level before the grant"
            );
            self.after_removal(&locked.queues, taken.rank);
            if self.refuse_if_out_of_time(locked, taken.rank, &taken.entry, overload, now) {
                continue;
            }
            let sojourn = now.saturating_sub(taken.entry.enqueued_at);
            self.controller.record_sojourn(taken.rank, sojourn);
            self.counters.count(taken.rank.class(), Outcome::Admitted);
            locked.settle(&taken.entry, CellState::Granted { at: now, sojourn });
            return true;
        }
        false
    }

    /// An operator changes the limit: an adaptive limit goes on from it.
    pub(crate) fn set_limit(&self, limit: u32) {
        let now = self.now();
        match &self.estimator {
            Some(estimator) => {
                let mut estimator = estimator.lock();
                estimator.set_limit(limit);
                // Permits admitted under the old limit no longer describe
                // the new one, to the estimator or to the drain rate.
                self.sampler.new_epoch_now();
                self.stale_service_times.store(true, Ordering::Relaxed);
                self.follow(&estimator, now);
            }
            None => {
                self.sustained_limit.store(limit, Ordering::Relaxed);
                self.sustained_gap.store(0, Ordering::Relaxed);
                self.apply_limit(limit, now);
            }
        }
    }

    /// Moves an adaptive limit's bounds; `false` when the limit is pinned.
    pub(crate) fn set_limit_bounds(&self, min: u32, max: u32) -> bool {
        let Some(estimator) = &self.estimator else {
            return false;
        };
        let mut estimator = estimator.lock();
        estimator.set_bounds(min, max);
        self.follow(&estimator, self.now());
        true
    }

    /// The engine's settings (some of them may change while it runs).
    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// Puts the adaptive limit's decision in force: its limit, and the one
    /// it holds the service to sustain.
    fn follow(&self, estimator: &Estimator, now: u64) {
        self.sustained_limit
            .store(estimator.sustained_limit(), Ordering::Relaxed);
        let gap = estimator.sustained_rate().and_then(Sustained::gap_of);
        self.sustained_gap
            .store(gap.unwrap_or(0), Ordering::Relaxed);
        if estimator.limit() != self.slots.limit() {
            self.apply_limit(estimator.limit(), now);
        }
    }

    /// Changes the concurrency limit; a raised limit is handed to waiters at once.
    fn apply_limit(&self, limit: u32, now: u64) {
        self.slots.set_limit(limit);
        let level = self.controller.level();
        let overload = self.in_overload(level, now);
        let mut locked = self.lock();
        // As in `give_back`: a waiter the level now sheds is refused, not served.
        self.drain_shed(&mut locked, level);
        while self.slots.take_below_limit(&locked.queues) {
            if !self.grant_next(&mut locked, level, overload, now) {
                self.slots.give_back_locked(&locked.queues);
                break;
            }
        }
        locked.unlock();
    }

    /// The longest a waiter of `rank` may have waited when a slot comes to
    /// it while a surge is arriving ([`Engine::surging`]): what one queued
    /// in the overload may wait, if `rank` is exposed to it. `None`
    /// otherwise: below an overload, during an adaptive limit's probe (its
    /// cut builds a queue for a round, which drains once the round ends),
    /// and once arrivals no longer outrun the slots (the queue left standing
    /// is the level's to judge and shed).
    fn surge_bound(&self, rank: Rank, overload: bool, now: u64) -> Option<u64> {
        let probing = self.slots.limit() < self.sustained_limit();
        let bound = self
            .exposed_wait(rank, overload && !probing)?
            .saturating_mul(OVERLOAD_WAIT_SLACK);
        self.surging(now).then_some(bound)
    }

    /// Refuses a request leaving the queue at `now` instead of serving it,
    /// when its time ran out: its expiry passed, or it waited longer than
    /// callers of its class are now seen to wait with the work still to do.
    /// Its expiry was set when it queued, maybe before any caller was seen
    /// to hang up (as a spike begins); served now, it would likely be
    /// abandoned half-way, its work going on for nobody while its slot lets
    /// another in. Its expiry then reads as the moment its patience ran out.
    ///
    /// The same holds for the overload's bound on waits: a waiter of a rank
    /// `overload` exposes ([`Engine::exposed_wait`]) that queued before the
    /// overload was seen has no such bound in its expiry, and one that has
    /// waited [`OVERLOAD_WAIT_SLACK`] overload waits while a surge is
    /// arriving is refused as a waiter queued then would have been
    /// ([`Engine::surge_bound`]). As a spike begins, those
    /// queued in its first milliseconds were otherwise served after waiting
    /// nearly as long as their callers do, abandoned half-way, and their
    /// work queued inside the service ahead of the ranks above them: the
    /// test `door_waits::waiters_queued_before_an_overload_are_held_to_its_wait_once_it_is_seen`.
    /// Returns whether it was refused.
    fn refuse_if_out_of_time(
        &self,
        locked: &mut Locked<'_>,
        rank: Rank,
        entry: &Entry,
        overload: bool,
        now: u64,
    ) -> bool {
        let sojourn = now.saturating_sub(entry.enqueued_at);
        let patience_ends = [
            self.patience_budget(rank.class()),
            self.surge_bound(rank, overload, now),
        ]
        .into_iter()
        .flatten()
        .min()
        .map(|budget| entry.enqueued_at.saturating_add(budget))
        .filter(|ends| *ends < now);
        let waker = if now >= entry.expires_at {
            self.controller.record_sojourn(rank, sojourn);
            let rejection = self.rejection(entry.expiry, rank, entry.cohort);
            entry.cell.settle(CellState::Rejected(rejection))
        } else if let Some(ends) = patience_ends {
            self.controller.record_sojourn(rank, sojourn);
            let rejection = self.rejection(RejectReason::QueueTimeout, rank, entry.cohort);
            entry.cell.settle_expired_at(ends, rejection)
        } else {
            return false;
        };
        locked.wakers.extend(waker);
        true
    }

    /// Refuses every waiting request that `level` sheds.
    fn drain_shed(&self, locked: &mut Locked<'_>, level: Level) {
        let mut emptied = [false; Rank::COUNT];
        let Locked { queues, wakers } = locked;
        queues.drain_shed(level, |rank, entry| {
            let rejection = self.rejection(RejectReason::ShedWhileQueued, rank, entry.cohort);
            wakers.extend(entry.cell.settle(CellState::Rejected(rejection)));
            emptied[rank.index()] = true;
        });
        for rank in Rank::ALL {
            if emptied[rank.index()] {
                self.after_removal(queues, rank);
            }
        }
    }

    /// Keeps the lock-free view of a rank's queue in step after a removal.
    fn after_removal(&self, queues: &QueueGuard<'_>, rank: Rank) {
        self.set_queue_len(queues, rank);
        if queues.len(rank) == 0 {
            self.slots.clear_waiting(rank, queues);
        }
    }

    fn set_queue_len(&self, queues: &QueueGuard<'_>, rank: Rank) {
        self.queue_lens[rank.index()].store(queues.len(rank) as u32, Ordering::Relaxed);
    }

    /// A waiter whose time ran out takes itself out of the queue.
    ///
    /// `None` when it was no longer queued: a verdict was left in its cell.
    pub(crate) fn expire(&self, rank: Rank, key: QueueKey, now: u64) -> Option<Rejection> {
        let mut locked = self.lock();
        let entry = locked.queues.remove(rank, key);
        if entry.is_some() {
            self.after_removal(&locked.queues, rank);
        }
        locked.unlock();
        let entry = entry?;
        self.controller
            .record_sojourn(rank, now.saturating_sub(entry.enqueued_at));
        Some(self.rejection(entry.expiry, rank, entry.cohort))
    }

    /// A waiter gave up (its future was dropped) while still queued.
    ///
    /// Returns whether it was still in the queue; if not, a verdict was left.
    pub(crate) fn withdraw(&self, rank: Rank, key: QueueKey) -> bool {
        let mut locked = self.lock();
        let removed = locked.queues.remove(rank, key);
        if removed.is_some() {
            self.after_removal(&locked.queues, rank);
        }
        locked.unlock();
        let Some(entry) = removed else {
            return false;
        };
        // Its caller hung up while it waited.
        let age = self.now().saturating_sub(entry.enqueued_at);
        self.patience.record(rank.class(), age);
        true
    }
}

/// The queue lock, held, and the wakers to call once it is released.
///
/// Fields drop in declaration order, so on unwinding too the lock is
/// released before the collected wakers run.
struct Locked<'a> {
    queues: QueueGuard<'a>,
    wakers: WakeList,
}

impl Locked<'_> {
    /// Leaves a verdict in a removed entry's cell; its waiter is woken after
    /// the lock is released.
    fn settle(&mut self, entry: &Entry, verdict: CellState) {
        self.wakers.extend(entry.cell.settle(verdict));
    }

    /// Releases the lock, then wakes the waiters that were given a verdict.
    fn unlock(self) {
        let Locked { queues, wakers } = self;
        drop(queues);
        wakers.wake_all();
    }
}
