//! The shared state behind a [`Shedder`](crate::Shedder) and the steps of a
//! request's journey through it: judge at the door, take a slot or wait,
//! leave the queue, give the slot back.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::arrival::{CohortSource, DeadlineSource};
use crate::config::{nanos, Config, LimitConfig};
use crate::controller::Controller;
use crate::instruments::Gauges;
use crate::limit::{Ending, Estimator, Sampler};
use crate::patience::Patience;
use crate::queue::{CellState, Entry, QueueGuard, QueueKey, WaitQueues};
use crate::retry_after::{self, Inputs};
use crate::shedding_log::{SheddingLog, Snapshot};
use crate::slots::{Slots, TakeOrWait};
use crate::stats::{Counters, Outcome};
use crate::sync::Mutex;
use crate::waiter::Waiter;
use crate::wake_list::WakeList;
use crate::{
    random, Admission, Arrival, Class, Clock, Cohort, Level, Permit, Rank, RejectReason, Rejection,
    Stats,
};

/// Waiters enough to keep every slot busy in a sustained overload; see
/// [`Engine::overload_wait`].
const OVERLOAD_QUEUE: u32 = 8;

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
    /// How long callers are seen to wait before they hang up.
    patience: Patience,
    queues: Mutex<WaitQueues>,
    /// Queue lengths per rank, written under the queue lock, read without it.
    queue_lens: [AtomicU32; Rank::COUNT],
    /// The limit the service is held to sustain: the limit in force, or
    /// during an adaptive limit's probe the one it cut from. Waits are
    /// predicted with it, since a probe's cut lasts only a round.
    sustained_limit: AtomicU32,
    counters: Counters,
    /// Warns when shedding starts and stops.
    shedding_log: SheddingLog,
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
            patience: Patience::new(),
            queues: Mutex::new(WaitQueues::new()),
            queue_lens: Default::default(),
            sustained_limit: AtomicU32::new(config.limit.initial()),
            counters: Counters::default(),
            shedding_log: SheddingLog::new(),
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

    /// Requests waiting in `rank`'s queue now, read without the queue lock.
    pub(crate) fn queue_len(&self, rank: Rank) -> u32 {
        self.queue_lens[rank.index()].load(Ordering::Relaxed)
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

    /// The whole door: judge, then take a slot, wait, or refuse.
    pub(crate) fn admit(self: &Arc<Self>, arrival: &Arrival, may_wait: bool) -> Admission {
        let now = self.now();
        self.tick(now, false);
        let rank = arrival.rank();
        let deadline = self.deadline_of(arrival, now);
        if deadline.is_some_and(|deadline| deadline <= now) {
            return self.refuse(RejectReason::DeadlinePassed, rank, Cohort::MAX);
        }
        // Nothing is shed at the lowest level: the fast path then needs no
        // cohort, and the slower ones draw it when they need it.
        let level = self.controller.level();
        let early_cohort = (level != Level::NONE).then(|| self.cohort_of(arrival));
        if let Some(cohort) = early_cohort.filter(|cohort| level.sheds(rank, *cohort)) {
            return self.refuse(RejectReason::Shed, rank, cohort);
        }
        self.controller.record_passed_level(rank);
        let cohort = || early_cohort.unwrap_or_else(|| self.cohort_of(arrival));

        // A request that may not wait is served now or refused for overload:
        // its deadline only has to leave room for the work itself.
        let may_wait = may_wait && self.config.queue_capacity > 0;
        let free = self.slots.looks_free(rank);
        // The overload wait of an arrival exposed to one, once judged (see
        // `exposed_wait`): it also bounds how long it waits if it queues.
        let judged_wait = if free || !may_wait {
            if deadline.is_some_and(|deadline| deadline - now < self.config.min_useful_window) {
                return self.refuse(RejectReason::DeadlineUnmeetable, rank, cohort());
            }
            None
        } else {
            // It would wait: the wait it faces must fit what its deadline
            // leaves (else it is refused without Retry-After, the caller's
            // time being gone) and what callers are seen to wait (else it is
            // refused for overload: the queue is longer than anyone waits).
            let overload = self.in_overload(level, now);
            let wait = self.predicted_wait(rank, overload);
            let window = self.useful_window_when_waiting();
            if deadline.is_some_and(|deadline| deadline - now < wait.saturating_add(window)) {
                return self.refuse(RejectReason::DeadlineUnmeetable, rank, cohort());
            }
            let overload_wait = self.exposed_wait(rank, overload);
            let budget = [self.patience_budget(rank.class()), overload_wait];
            if budget.into_iter().flatten().any(|budget| budget < wait) {
                return self.refuse(RejectReason::QueueFull, rank, cohort());
            }
            Some(overload_wait)
        };
        if free && self.slots.try_take(rank) {
            self.controller.record_no_wait(rank);
            return Admission::Admitted(self.permit(rank, now, deadline));
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
        let overload_wait =
            judged_wait.unwrap_or_else(|| self.exposed_wait(rank, self.in_overload(level, now)));
        let longest_wait = overload_wait.map(|wait| wait.saturating_mul(OVERLOAD_WAIT_SLACK));
        self.enqueue(rank, cohort(), now, deadline, longest_wait)
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
        let class = rank.class();
        let max_wait = [self.patience_budget(class), longest_wait]
            .into_iter()
            .flatten()
            .fold(self.config.live.max_wait(class), u64::min);
        let max_wait_ends = now.saturating_add(max_wait);
        let last_useful =
            deadline.map(|deadline| deadline.saturating_sub(self.useful_window_when_waiting()));
        let (expires_at, expiry) = match last_useful {
            Some(last_useful) if last_useful < max_wait_ends => {
                (last_useful, RejectReason::DeadlineExpiredInQueue)
            }
            _ => (max_wait_ends, RejectReason::QueueTimeout),
        };
        let (key, cell) = locked.queues.push(rank, cohort, now, expires_at, expiry);
        self.set_queue_len(&locked.queues, rank);
        Waiter::new(Arc::clone(self), cell, key, rank, deadline)
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
        let retry_after = reason.is_overload().then(|| {
            retry_after::compute(Inputs {
                rank,
                queue_ahead: self.queue_ahead(rank),
                slot_time: self.controller.slot_time(self.sustained_limit()),
                distance_below_level: self.controller.level().distance_below(rank, cohort),
                recovery_step: self.config.recovery_step,
                interval: self.config.interval,
                cap: self.config.live.retry_after_cap(),
                jitter: self.config.retry_after_jitter,
                sample: random::next_u64() >> 48,
            })
        });
        Rejection::new(reason, rank, retry_after)
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
        Rank::ALL[rank.index()..]
            .iter()
            .map(|rank| self.queue_len(*rank))
            .sum()
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

    /// Whether more requests are arriving than the sustained limit drains
    /// and the overload's queue holds.
    fn surging(&self, now: u64) -> bool {
        let drain = self.controller.drain_rate(self.sustained_limit());
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
    fn overload_wait(&self) -> Option<u64> {
        let waiters = OVERLOAD_QUEUE.min(self.sustained_limit());
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
    /// Below overload the slots drain at the limit the service is held to
    /// sustain (an adaptive limit's probe cuts it for a round, and the queue
    /// that builds meanwhile drains once the round ends). In an overload,
    /// the wait is what the limit in force gives now: a request admitted to
    /// wait behind a probe's cut would wait twice as long as the overload's
    /// short queue is meant to let it.
    fn predicted_wait(&self, rank: Rank, overload: bool) -> u64 {
        let limit = if overload {
            self.slots.limit()
        } else {
            self.sustained_limit()
        };
        let ahead = match self.serve_order(overload) {
            ServeOrder::Importance => self.queue_ahead(rank),
            ServeOrder::Arrival => self.queue_ahead(Rank::ALL[0]),
        };
        self.controller.slot_time(limit).map_or(0, |slot_time| {
            (u64::from(ahead) + 1).saturating_mul(slot_time)
        })
    }

    /// A permit's slot comes back: it was taken at `started_at`, in `epoch`,
    /// after waiting `queued` nanoseconds.
    pub(crate) fn complete(
        &self,
        rank: Rank,
        started_at: u64,
        queued: u64,
        epoch: u32,
        ending: Ending,
    ) {
        let now = self.now();
        if ending == Ending::Abandoned {
            let age = now.saturating_sub(started_at).saturating_add(queued);
            self.patience.record(rank.class(), age);
        }
        let outcome = match ending {
            Ending::Completed => Outcome::Completed,
            Ending::Abandoned => Outcome::Abandoned,
            Ending::DeadlineCut => Outcome::CutAtDeadline,
        };
        self.counters.count(rank.class(), outcome);
        let hold = now.saturating_sub(started_at);
        self.counters.record_times(rank.class(), queued, hold);
        let force = self.controller.record_completion(hold, &self.config);
        if self.estimator.is_some() {
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
        let hang_ups = self.patience.close_interval();
        // Nobody else takes the estimator's lock but stats and `set_limit`.
        let mut estimator = self.estimator.as_ref().map(|estimator| estimator.lock());
        let closed =
            self.controller
                .update(&claim, now, self.sustained_limit(), hang_ups, &self.config);
        self.shedding_log
            .observe(now, self.controller.level(), || Snapshot {
                limit: self.slots.limit(),
                queue_delay: self.controller.recent_sojourn(),
            });
        self.counters
            .publish(|| self.gauges(self.controller.level()));
        if let Some(estimator) = &mut estimator {
            if estimator.on_interval(self.sampler.take(closed)) {
                self.sampler.new_epoch();
            }
            self.follow(estimator, now);
        }
    }

    /// Returns a slot: lock-free unless somebody waits, then hands it over.
    pub(crate) fn give_back(&self, now: u64) {
        if self.slots.try_give_back() {
            return;
        }
        // Judged before the lock: the surge check reads a dozen atomics.
        let level = self.controller.level();
        let order = self.serve_order(self.in_overload(level, now));
        let mut locked = self.lock();
        self.drain_shed(&mut locked, level);
        let handed_off =
            !self.slots.over_limit() && self.grant_next(&mut locked, level, order, now);
        if !handed_off {
            self.slots.give_back_locked(&locked.queues);
        }
        locked.unlock();
        if handed_off && self.estimator.is_some() {
            self.sampler.record_handed_off();
        }
    }

    /// Hands a held slot to the next live waiter in `order` (see
    /// [`Engine::serve_order`]), refusing expired ones on the way. Returns
    /// `false` when nobody was left to take it.
    fn grant_next(
        &self,
        locked: &mut Locked<'_>,
        level: Level,
        order: ServeOrder,
        now: u64,
    ) -> bool {
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
            if self.refuse_if_out_of_time(locked, taken.rank, &taken.entry, now) {
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
                self.follow(&estimator, now);
            }
            None => {
                self.sustained_limit.store(limit, Ordering::Relaxed);
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
        if estimator.limit() != self.slots.limit() {
            self.apply_limit(estimator.limit(), now);
        }
    }

    /// Changes the concurrency limit; a raised limit is handed to waiters at once.
    fn apply_limit(&self, limit: u32, now: u64) {
        self.slots.set_limit(limit);
        let level = self.controller.level();
        let order = self.serve_order(self.in_overload(level, now));
        let mut locked = self.lock();
        // As in `give_back`: a waiter the level now sheds is refused, not served.
        self.drain_shed(&mut locked, level);
        while self.slots.take_below_limit(&locked.queues) {
            if !self.grant_next(&mut locked, level, order, now) {
                self.slots.give_back_locked(&locked.queues);
                break;
            }
        }
        locked.unlock();
    }

    /// Refuses a request leaving the queue at `now` instead of serving it,
    /// when its time ran out: its expiry passed, or it waited longer than
    /// callers of its class are now seen to wait with the work still to do.
    /// Its expiry was set when it queued, maybe before any caller was seen
    /// to hang up (as a spike begins); served now, it would likely be
    /// abandoned half-way, its work going on for nobody while its slot lets
    /// another in. Its expiry then reads as the moment its patience ran out.
    /// Returns whether it was refused.
    fn refuse_if_out_of_time(
        &self,
        locked: &mut Locked<'_>,
        rank: Rank,
        entry: &Entry,
        now: u64,
    ) -> bool {
        let sojourn = now.saturating_sub(entry.enqueued_at);
        let patience_ends = self
            .patience_budget(rank.class())
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
