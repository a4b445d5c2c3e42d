//! The controller: queue delay in, admission level out.
//!
//! The overload signal is the *sojourn time* of requests in the wait queues, as
//! in CoDel, judged per rank (as CoDel judges per flow): if even the shortest
//! wait of some rank's queue in an interval exceeded the target, that rank has
//! a standing queue and the service admits more than it can serve, whatever
//! its CPU says. Judging the ranks together would hide a standing queue of
//! batch work behind the short waits of critical requests, which jump ahead
//! of it. A rank judged needs enough waits for its shortest to mean
//! something; a rank with few carries its waits into the next interval. And
//! a standing queue is overload only while the load offered surely exceeds
//! what the service drains ([`OfferedLoad`]): below that, the queue is a
//! burst being worked off, and at 90% load such bursts last longer than an
//! interval. The response is DAGOR's: raise the admission level over (rank,
//! cohort) positions by just enough to shed a share of the work that came in
//! the last interval, least important positions first; when an interval is
//! healthy, give positions back in steps that double while health lasts.
//!
//! There is no background task. Every door decision and completion checks
//! whether the interval has ended; the one thread whose compare-and-swap
//! claims the interval boundary does the update, and nobody else does until
//! it has finished and set the next boundary.
//!
//! # Memory ordering
//!
//! All fields are independent atomics read and written `Relaxed`: the level
//! is a heuristic, and a decision made on a level one update old is as good as
//! one made a moment later. The interval boundary is claimed with `AcqRel`
//! and reopened with `Release`, so each updater sees what the previous one
//! wrote, and the counters of the interval it closes.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use crate::sync;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::config::Config;
use crate::offered_load::{self, OfferedLoad, RankLoads};
use crate::service_time::ServiceTimes;
use crate::{Cohort, Level, Rank};

const NO_SAMPLE: u64 = u64::MAX;
/// The share of an interval's arrivals hanging up that is a wave of them.
const HANG_UP_WAVE: f64 = 0.05;
/// Fewest hang-ups in an interval that make a wave.
const HANG_UPS_AT_LEAST: u64 = 3;
/// The interval boundary while one thread updates the controller.
const UPDATING: u64 = u64::MAX;
/// How many times the recovery step may double while health lasts.
const MAX_RECOVERY_DOUBLINGS: u32 = 4;
/// Idle intervals after which the level is reset to admit everything.
const IDLE_INTERVALS_TO_RESET: u64 = 16;

/// The controller's state: the level and the current interval's measurements.
#[derive(Debug)]
pub(crate) struct Controller {
    level: sync::AtomicU32,
    next_update: sync::AtomicU64,
    last_update: AtomicU64,
    min_sojourn: [AtomicU64; Rank::COUNT],
    recent_sojourn: AtomicU64,
    /// Requests passing the level per second.
    offered: OfferedLoad,
    /// Whether they outpaced the drain rate when the last interval closed.
    outpaced: AtomicBool,
    /// Requests arriving per second, the ones the level refused included.
    arriving: OfferedLoad,
    /// Permits whose work completed, per second: what the service drains
    /// now (a slowdown shows at once, where the drain rate follows the
    /// mean service time).
    completing: OfferedLoad,
    /// [`Tallies::refused_by_level`] as the last interval's close read it.
    refused_by_level_seen: AtomicU64,
    /// [`Tallies::completed`] as the last interval's close read it.
    completed_seen: AtomicU64,
    /// How many times its shortest an overload's queue should be (`f64`
    /// bits; see [`Controller::overload_stretch`]).
    overload_stretch: AtomicU64,
    /// Requests passing the level per second, per rank.
    rank_loads: RankLoads,
    /// The least important rank drained with room to spare (see
    /// [`Controller::protects`]).
    protected_from: AtomicU32,
    passed: [AtomicU64; Rank::COUNT],
    /// Per rank, the requests that left the queue after waiting.
    waits: [AtomicU64; Rank::COUNT],
    /// Per rank, what is carried over until it has passed enough requests.
    carried: [Carried; Rank::COUNT],
    service: ServiceTimes,
    healthy_streak: AtomicU32,
    cohort_period: AtomicU64,
    /// Whether the last interval's service times went unmeasured (see
    /// [`Controller::mean_service`]).
    unmeasured: AtomicBool,
}

impl Controller {
    pub(crate) fn new(config: &Config) -> Controller {
        Controller {
            level: sync::AtomicU32::new(0),
            next_update: sync::AtomicU64::new(config.interval),
            last_update: AtomicU64::new(0),
            min_sojourn: [const { AtomicU64::new(NO_SAMPLE) }; Rank::COUNT],
            recent_sojourn: AtomicU64::new(NO_SAMPLE),
            offered: OfferedLoad::new(),
            outpaced: AtomicBool::new(false),
            arriving: OfferedLoad::new(),
            completing: OfferedLoad::new(),
            refused_by_level_seen: AtomicU64::new(0),
            completed_seen: AtomicU64::new(0),
            overload_stretch: AtomicU64::new(1.0f64.to_bits()),
            rank_loads: RankLoads::new(),
            protected_from: AtomicU32::new(Rank::COUNT as u32),
            passed: Default::default(),
            waits: Default::default(),
            carried: Default::default(),
            service: ServiceTimes::new(),
            healthy_streak: AtomicU32::new(0),
            unmeasured: AtomicBool::new(false),
            cohort_period: AtomicU64::new(current_hour()),
        }
    }

    /// The current admission level.
    pub(crate) fn level(&self) -> Level {
        Level::new(self.level.load(Ordering::Relaxed) as u16)
    }

    /// The level as the next request at `now` would find it, for readers
    /// (stats, metrics) that must not show an idle service as shedding:
    /// after [`IDLE_INTERVALS_TO_RESET`] intervals without an event, the
    /// next close resets the level (see [`update`](Controller::update)),
    /// so a reading in that silence reports the reset without making it.
    pub(crate) fn level_at(&self, now: u64, config: &Config) -> Level {
        let silence = now.saturating_sub(self.last_update.load(Ordering::Relaxed));
        if is_idle(silence, config) {
            Level::NONE
        } else {
            self.level()
        }
    }

    /// The period that caller keys are hashed with: the wall-clock hour,
    /// refreshed each interval, so a fleet agrees on it.
    pub(crate) fn cohort_period(&self) -> u64 {
        self.cohort_period.load(Ordering::Relaxed)
    }

    /// A request of `rank` passed the level check: the work the next step of
    /// the level would act on.
    pub(crate) fn record_passed_level(&self, rank: Rank) {
        self.passed[rank.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// How many times longer than its shortest an overload's queue should
    /// be, given how far the arrivals (the ones the level refuses included)
    /// outran the completions when the last interval closed: 1 at 1.7
    /// times or more, more as they come closer, where a short queue
    /// refuses work the service would finish
    /// ([`offered_load::overload_stretch`]).
    pub(crate) fn overload_stretch(&self) -> f64 {
        f64::from_bits(self.overload_stretch.load(Ordering::Relaxed))
    }

    /// A request of `rank` took a slot without waiting: its rank's queue was
    /// empty, so it has no standing queue this interval. One relaxed load on
    /// the fast path; a store only once per rank and interval.
    pub(crate) fn record_no_wait(&self, rank: Rank) {
        let min = &self.min_sojourn[rank.index()];
        if min.load(Ordering::Relaxed) != 0 {
            min.store(0, Ordering::Relaxed);
        }
    }

    /// A request of `rank` left the queue after waiting `sojourn`
    /// nanoseconds.
    pub(crate) fn record_sojourn(&self, rank: Rank, sojourn: u64) {
        self.min_sojourn[rank.index()].fetch_min(sojourn, Ordering::Relaxed);
        self.waits[rank.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// A request finished after holding its slot `service` nanoseconds; may
    /// close the interval early. Returns whether the caller should update.
    pub(crate) fn record_completion(&self, service: u64, config: &Config) -> bool {
        self.service.record(service) == u64::from(config.interval_completions)
    }

    /// Whether the load passing the level outpaced what the service drains
    /// when the last interval closed: an overload, whether or not a
    /// standing queue has been judged yet (a slow service's ranks take
    /// several intervals to gather the waits a verdict needs, while its
    /// queue grows).
    pub(crate) fn outpaced(&self) -> bool {
        self.outpaced.load(Ordering::Relaxed)
    }

    /// Whether the service drains `rank`, with every more important rank,
    /// with room to spare (their load under four fifths of the drain rate
    /// when the last interval closed). Served first in an overload, such a
    /// rank's queue is a burst of its own: it is not cut to the overload's
    /// short queue, which on a service of one slot is one waiter.
    /// Measured: commit 265f2b7 (cpu-bound lab, interactive at 0.4x beside a batch spike).
    pub(crate) fn protects(&self, rank: Rank) -> bool {
        rank.index() >= self.protected_from.load(Ordering::Relaxed) as usize
    }

    /// The worst standing queue of the last interval (the largest of the
    /// ranks' shortest waits), if anything waited.
    pub(crate) fn recent_sojourn(&self) -> Option<Duration> {
        match self.recent_sojourn.load(Ordering::Relaxed) {
            NO_SAMPLE => None,
            nanos => Some(Duration::from_nanos(nanos)),
        }
    }

    /// The mean time a request holds its slot, in nanoseconds, once known:
    /// the recent mean, or while the service is not measured (a shadow
    /// engine's overdrawn service) the settled one.
    pub(crate) fn mean_service(&self) -> Option<u64> {
        if self.unmeasured.load(Ordering::Relaxed) {
            self.service.settled_mean()
        } else {
            self.service.mean()
        }
    }

    /// An adaptive limit moved to a new epoch, and `completions` permits of it
    /// held their slots `total` nanoseconds in all: the mean service times
    /// behind the drain rate and the slot time start over from them (see
    /// [`ServiceTimes::restart_from`]).
    pub(crate) fn restart_service_times(&self, total: u64, completions: u64) {
        self.service.restart_from(total, completions);
    }

    /// The 95th percentile of the time a request holds its slot, once known.
    pub(crate) fn p95_service(&self) -> Option<u64> {
        self.service.p95()
    }

    /// When the current interval began, in nanoseconds since the epoch.
    pub(crate) fn interval_began(&self) -> u64 {
        self.last_update.load(Ordering::Relaxed)
    }

    /// The slot time: the mean gap between completions with every one of
    /// `limit` slots busy, in nanoseconds, once a service time is known. The
    /// one measure behind the predicted wait, the overload wait, Retry-After
    /// and the overload target's floor: the predicted wait below an
    /// overload, Retry-After and the floor through
    /// [`Controller::sustained_slot_time`]; the overload wait, the predicted
    /// wait in an overload and shadow mode's replay at the limit in force.
    pub(crate) fn slot_time(&self, limit: u32) -> Option<u64> {
        self.mean_service()
            .map(|mean| (mean / u64::from(limit.max(1))).max(1))
    }

    /// Completions per second the service is held to sustain, once a
    /// service time is known: the drain rate of `sustained.limit`, and no
    /// more than the throughput an adaptive limit's probe measured before
    /// its cut ([`Sustained::rate`]). The overload verdict compares the
    /// offered load with it, and the door judges surges and which ranks it
    /// drains with room to spare by it.
    ///
    /// A probe's cut shortens the hold times of a service whose work takes
    /// longer the more of it runs at once (one core; any service above its
    /// knee), and the limit it cut from over those hold times reads a drain
    /// the service never had: in the lab's CPU-bound step at 2x, 7 slots
    /// over the 40-46 ms a cut to 2 or 3 held its permits read 150-175
    /// requests a second from a core that finishes 97. Judged against that,
    /// the load passing the level never outpaced the service, the level
    /// relaxed through the probe, and the door's queue grew to 26 requests
    /// at 2 slots: a p99 of 228 ms in that step, in the full run of e0a3ffa
    /// (the test `a_probe_holds_the_drain_to_the_throughput_before_its_cut`).
    pub(crate) fn sustained_drain(&self, sustained: Sustained) -> Option<f64> {
        let drain = self.drain_rate(sustained.limit)?;
        Some(sustained.rate().map_or(drain, |rate| drain.min(rate)))
    }

    /// The slot time at the pace the service is held to sustain, once a
    /// service time is known: `sustained.limit`'s slot time, and no shorter
    /// than the gap between completions at the throughput an adaptive
    /// limit's probe measured before its cut ([`Sustained::gap`]), as
    /// [`Controller::sustained_drain`] is no faster. The predicted wait below
    /// an overload, Retry-After and the overload target's floor count in it.
    ///
    /// A probe's cut shortens the hold times the mean service time follows,
    /// and the sustained limit over them reads a pace the service never
    /// had: in a traced run of the lab's CPU-bound step at 2x, 7 slots over
    /// the 41 ms a cut to 4 held its permits read a completion every 5.9 ms,
    /// where the core, held to the 97 a second it finished before the cut,
    /// gave one every 10.3 ms. (In nanoseconds, so the reject path stays in
    /// integers.)
    pub(crate) fn sustained_slot_time(&self, sustained: Sustained) -> Option<u64> {
        let slot_time = self.slot_time(sustained.limit)?;
        Some(sustained.gap.map_or(slot_time, |gap| slot_time.max(gap)))
    }

    /// Completions per second with every one of `limit` slots busy, once a
    /// service time is known: from the steady mean. The stats report it,
    /// and the overload verdict compares the offered load with it through
    /// [`Controller::sustained_drain`].
    pub(crate) fn drain_rate(&self, limit: u32) -> Option<f64> {
        let mean = if self.unmeasured.load(Ordering::Relaxed) {
            self.service.settled_mean()
        } else {
            self.service.steady_mean()
        };
        mean.map(|mean| f64::from(limit.max(1)) * 1e9 / mean as f64)
    }

    /// Whether the requests that passed the level since the current
    /// interval began surely outnumber what `drain` requests per second
    /// finish meanwhile, and `allowance` more: a surge the interval's close
    /// has not judged yet.
    pub(crate) fn surging(&self, now: u64, drain: f64, allowance: u32) -> bool {
        let began = self.last_update.load(Ordering::Relaxed);
        let arrivals = (self.passed.iter())
            .map(|count| count.load(Ordering::Relaxed))
            .sum();
        offered_load::surges(arrivals, now.saturating_sub(began), drain, allowance)
    }

    /// Claims the interval boundary if the interval is due (or `force`d by
    /// completions) and this thread wins the compare-and-swap on it; the
    /// caller then closes the interval, [`update`](Controller::update)
    /// included, while it holds the claim.
    ///
    /// The winner swaps the boundary for [`UPDATING`] until the claim is
    /// dropped, so exactly one thread closes an interval at a time: a forced
    /// close that races a due one finds the boundary taken and leaves the
    /// work to it.
    pub(crate) fn claim(&self, now: u64, force: bool, config: &Config) -> Option<Claim<'_>> {
        let due = self.next_update.load(Ordering::Acquire);
        if due == UPDATING || (now < due && !force) {
            return None;
        }
        self.next_update
            .compare_exchange(due, UPDATING, Ordering::AcqRel, Ordering::Relaxed)
            .ok()?;
        Some(Claim {
            boundary: &self.next_update,
            next: now.saturating_add(config.interval).min(UPDATING - 1),
        })
    }

    /// Whether an interval may be due: the one relaxed load every decision
    /// and completion pays, kept inline so the rest stays out of line.
    #[inline]
    pub(crate) fn may_be_due(&self, now: u64, force: bool) -> bool {
        force || now >= self.next_update.load(Ordering::Relaxed)
    }

    /// The standing queue of an interval: the largest of the shortest waits
    /// of the ranks still admitted (`NO_SAMPLE` if no rank is judged).
    ///
    /// A rank the level sheds whole is being emptied anyway; its waits say
    /// nothing about the ranks above it, and counting them would cut into
    /// the next rank for nothing. A rank one of whose requests took a slot
    /// without waiting has no standing queue. Otherwise, a rank whose waits
    /// number fewer than [`RANK_SAMPLES_AT_LEAST`] carries its shortest wait
    /// and their count into the next interval instead of being judged.
    fn standing_queue(
        &self,
        mins: &[u64; Rank::COUNT],
        waits: &[u64; Rank::COUNT],
        first_admitted: Rank,
    ) -> u64 {
        let mut worst = NO_SAMPLE;
        for rank in 0..Rank::COUNT {
            let carried = &self.carried[rank];
            if rank < first_admitted.index() {
                carried.reset();
                continue;
            }
            let (min, count) = carried.add(mins[rank], waits[rank]);
            if min != 0 && count < RANK_SAMPLES_AT_LEAST {
                continue;
            }
            carried.reset();
            if min != NO_SAMPLE {
                worst = if worst == NO_SAMPLE {
                    min
                } else {
                    worst.max(min)
                };
            }
        }
        worst
    }

    /// Closes the interval: judges its queue delays and moves the level.
    /// Returns the interval's length and whether it was overloaded. Call it
    /// holding a [`Claim`].
    ///
    /// An interval is overloaded when some admitted rank kept a standing
    /// queue (its shortest wait above the target), or when callers hung up
    /// in a wave (`tallies.hang_ups`, at least [`HANG_UP_WAVE`] of the requests that
    /// passed the level, and at least [`HANG_UPS_AT_LEAST`]): their work was
    /// admitted for nobody, whatever the queue looked like.
    ///
    /// `sustained` is what the service is held to sustain, which gives the
    /// drain rate ([`Controller::sustained_drain`]): under an adaptive
    /// limit, a probe's brief cut is left out,
    /// or every probe at 90% load would read as overload and shed (as
    /// Envoy's minimum-RTT probes did: envoyproxy/envoy PR 9007).
    /// `measured`: whether the interval's completions were measured (see
    /// `Engine::overdrawn_since`).
    pub(crate) fn update(
        &self,
        _claim: &Claim<'_>,
        now: u64,
        sustained: Sustained,
        tallies: Tallies,
        measured: bool,
        config: &Config,
    ) -> Closed {
        let elapsed = now.saturating_sub(self.last_update.swap(now, Ordering::Relaxed));
        // Idleness wins: after so long without a single event, any sojourn
        // measured or carried is from before the silence and says nothing
        // about now.
        let idle = is_idle(elapsed, config);
        if idle {
            self.carried.iter().for_each(Carried::reset);
        }
        let (first_admitted, _) = self.level().boundary();
        let mins = self
            .min_sojourn
            .each_ref()
            .map(|min| min.swap(NO_SAMPLE, Ordering::Relaxed));
        let waits = self
            .waits
            .each_ref()
            .map(|count| count.swap(0, Ordering::Relaxed));
        let passed = self
            .passed
            .each_ref()
            .map(|count| count.swap(0, Ordering::Relaxed));
        let min_sojourn = self.standing_queue(&mins, &waits, first_admitted);
        self.recent_sojourn.store(min_sojourn, Ordering::Relaxed);
        // An interval whose service times were not measured (a shadow
        // engine's overdrawn service) leaves the service times as they were.
        if measured {
            self.service.close_interval();
        }
        self.unmeasured.store(!measured, Ordering::Relaxed);
        self.cohort_period.store(current_hour(), Ordering::Relaxed);

        let level = self.level();
        // Half a slot time (the mean gap between completions with every slot
        // busy) is about what any request waits for the next slot to free;
        // a shorter wait is no sign of a standing queue, so the target is
        // never below it (this matters for slow services with few slots).
        let natural_wait = self
            .sustained_slot_time(sustained)
            .map_or(0, |slot_time| slot_time / 2);
        let target = config.live.target_sojourn().max(natural_wait);
        let standing_queue = min_sojourn != NO_SAMPLE && min_sojourn > target;
        let arrivals: u64 = passed.iter().sum();
        let hang_ups = tallies.hang_ups;
        let hang_up_wave =
            hang_ups >= HANG_UPS_AT_LEAST && hang_ups as f64 >= HANG_UP_WAVE * arrivals as f64;
        // A queue that stands while the service keeps up with the offered
        // load is a burst being worked off; shedding it refuses work an
        // unprotected server would serve.
        self.offered.close_interval(arrivals, elapsed);
        let drain = self.sustained_drain(sustained);
        let since_seen = |seen: &AtomicU64, total: u64| {
            total.saturating_sub(seen.swap(total, Ordering::Relaxed))
        };
        let refused_by_level = since_seen(&self.refused_by_level_seen, tallies.refused_by_level);
        let completed = since_seen(&self.completed_seen, tallies.completed);
        self.arriving
            .close_interval(arrivals.saturating_add(refused_by_level), elapsed);
        self.completing.close_interval(completed, elapsed);
        let stretch = offered_load::overload_stretch(self.arriving.ratio_to(&self.completing));
        self.overload_stretch
            .store(stretch.to_bits(), Ordering::Relaxed);
        let outpaces = drain.map(|drain| {
            let completions = self.service.steady_count();
            self.offered.outpaces(drain, completions, config.interval)
        });
        // The door's sign needs a drain rate; the level's verdict, with none
        // known yet, takes a standing queue at its word.
        self.outpaced
            .store(outpaces == Some(true) && !idle, Ordering::Relaxed);
        let outpaced = outpaces.unwrap_or(true);
        self.rank_loads.close_interval(&passed, elapsed);
        let protected_from = self.rank_loads.protected_from(drain);
        self.protected_from
            .store(protected_from as u32, Ordering::Relaxed);
        let overloaded = (standing_queue && outpaced) || hang_up_wave;
        let next = if idle {
            Level::NONE
        } else if overloaded {
            self.healthy_streak.store(0, Ordering::Relaxed);
            shed_more(level, &passed, config.shed_share)
        } else {
            let streak = self.healthy_streak.fetch_add(1, Ordering::Relaxed);
            let step = config.recovery_step << streak.min(MAX_RECOVERY_DOUBLINGS);
            Level::new(level.get().saturating_sub(step))
        };
        self.level.store(u32::from(next.get()), Ordering::Relaxed);
        Closed {
            elapsed,
            overloaded: overloaded && !idle,
            shedding: level != Level::NONE,
            outrun: !idle && self.arriving.clearly_outruns(&self.completing),
        }
    }
}

/// What the service is held to sustain while an interval closes or the
/// door judges a surge.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Sustained {
    /// The limit in force, or during an adaptive limit's probe the one it
    /// cut from (a probe's cuts last a round or a few).
    pub(crate) limit: u32,
    /// During an adaptive limit's probe, the mean gap between completions
    /// (nanoseconds) at the throughput its rounds are held against: what the
    /// service finished before its cut, the load holding it full.
    pub(crate) gap: Option<u64>,
}

impl Sustained {
    /// The throughput a probe's rounds are held against, in permits
    /// finished per second ([`Sustained::gap`]).
    pub(crate) fn rate(&self) -> Option<f64> {
        self.gap.map(|gap| 1e9 / gap.max(1) as f64)
    }

    /// The gap between completions at `rate` permits finished per second,
    /// in nanoseconds, rounded up (so that [`Sustained::rate`] is no more
    /// than `rate`); `None` for no rate (zero, negative or not a number).
    pub(crate) fn gap_of(rate: f64) -> Option<u64> {
        (rate > 0.0).then(|| (1e9 / rate).ceil().max(1.0) as u64)
    }
}

/// What the engine counted, read where an interval closes: the interval's
/// hang-ups, and two running totals whose differences the controller takes.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Tallies {
    /// Callers seen to hang up in the interval.
    pub(crate) hang_ups: u64,
    /// Requests the level refused (or would have, in shadow mode); one
    /// the level refuses as it queues, having passed it at the door, counts
    /// twice (a race, and rare).
    pub(crate) refused_by_level: u64,
    /// Permits whose work completed (not cut at a deadline, nor given
    /// back by a caller that hung up).
    pub(crate) completed: u64,
}

/// Whether `silence` nanoseconds without an event is long enough that no
/// measurement from before it says anything about now.
fn is_idle(silence: u64, config: &Config) -> bool {
    silence >= config.interval.saturating_mul(IDLE_INTERVALS_TO_RESET)
}

/// What closing an interval found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Closed {
    /// The interval's length, nanoseconds.
    pub(crate) elapsed: u64,
    /// Whether the level rose for overload: a standing queue while the load
    /// offered outpaced the drain rate, or a wave of hang-ups.
    pub(crate) overloaded: bool,
    /// Whether the level in force during the interval shed some rank: the
    /// load that passed the door was less than the load offered.
    pub(crate) shedding: bool,
    /// Whether the arrivals, the ones the level refused included, have
    /// outrun the completions by a quarter or more on averages of about two
    /// seconds (see [`CLEAR_OUTRUN`](offered_load::CLEAR_OUTRUN)):
    /// an overload clearly beyond the service's capacity.
    pub(crate) outrun: bool,
}

/// A rank's shortest wait and count of waits, carried over intervals until
/// there are enough to judge. Only the thread holding the [`Claim`] touches
/// it.
#[derive(Debug)]
struct Carried {
    min: AtomicU64,
    waits: AtomicU64,
}

impl Default for Carried {
    fn default() -> Carried {
        Carried {
            min: AtomicU64::new(NO_SAMPLE),
            waits: AtomicU64::new(0),
        }
    }
}

impl Carried {
    /// Adds an interval's shortest wait and count; returns the totals.
    fn add(&self, min: u64, waits: u64) -> (u64, u64) {
        let min = self.min.load(Ordering::Relaxed).min(min);
        let waits = self.waits.load(Ordering::Relaxed).saturating_add(waits);
        self.min.store(min, Ordering::Relaxed);
        self.waits.store(waits, Ordering::Relaxed);
        (min, waits)
    }

    fn reset(&self) {
        self.min.store(NO_SAMPLE, Ordering::Relaxed);
        self.waits.store(0, Ordering::Relaxed);
    }
}

/// The right to close the current interval; dropping it sets the next
/// interval boundary (even if the closing unwinds).
pub(crate) struct Claim<'a> {
    boundary: &'a sync::AtomicU64,
    next: u64,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        // Release: the next updater sees everything this one wrote.
        self.boundary.store(self.next, Ordering::Release);
    }
}

/// Fewest waits a rank must have had for its shortest to be judged: the
/// shortest of one or two waits is mostly noise (and longer than the
/// shortest of many). A rank with fewer is judged over as many intervals as
/// it takes.
const RANK_SAMPLES_AT_LEAST: u64 = 8;

/// Raises the level past enough positions to shed `share` of the work that
/// passed the level in the last interval.
///
/// Cohorts inside a rank carry equal shares of its traffic, so each cohort
/// still open in rank `r` is worth `passed[r] / live cohorts`. Ranks that
/// saw nothing are passed over whole: shedding them relieves nothing.
pub(crate) fn shed_more(level: Level, passed: &[u64; Rank::COUNT], share: f64) -> Level {
    let total: u64 = passed.iter().sum();
    if total == 0 {
        // Nothing new came in: the queue is draining what it holds.
        return level;
    }
    // A fractional share: with little traffic, each step still moves at
    // least one cohort, but never a whole rank for one request.
    let mut to_shed = share * total as f64;
    let cohorts = u32::from(Cohort::COUNT);
    let mut position = u32::from(level.get());
    while position < u32::from(Level::MAX.get()) && to_shed > 0.0 {
        let rank = (position / cohorts) as usize;
        let live = cohorts - position % cohorts;
        if passed[rank] == 0 {
            position = (rank as u32 + 1) * cohorts;
            continue;
        }
        let per_cohort = passed[rank] as f64 / f64::from(live);
        let needed = (to_shed / per_cohort).ceil().min(f64::from(live));
        position += needed as u32;
        to_shed -= needed * per_cohort;
    }
    Level::new(position.min(u32::from(Level::MAX.get())) as u16)
}

fn current_hour() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs() / 3_600)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(pairs: &[(usize, u64)]) -> [u64; Rank::COUNT] {
        let mut passed = [0; Rank::COUNT];
        for (rank, count) in pairs {
            passed[*rank] = *count;
        }
        passed
    }

    const EIGHT: Sustained = Sustained {
        limit: 8,
        gap: None,
    };

    #[test]
    fn a_probe_holds_the_drain_to_the_throughput_before_its_cut() {
        // The lab's CPU-bound step at 2x: a probe cut 7 slots on one core
        // (97 requests a second) to 2 or 3, whose permits were held 40 ms,
        // while 150 a second passed the level and stood in the door's queue.
        // 7 slots over 40 ms read a drain of 175 a second, which 150 never
        // outpace; the probe measured 97 before its cut.
        let config = crate::Shedder::builder().validate().expect("defaults");
        let overloaded_intervals = |rate: Option<f64>| {
            let controller = Controller::new(&config);
            let sustained = Sustained {
                limit: 7,
                gap: rate.and_then(Sustained::gap_of),
            };
            (1..=10u64)
                .filter(|interval| {
                    for _ in 0..15 {
                        controller.record_passed_level(Rank::ALL[5]);
                        controller.record_sojourn(Rank::ALL[5], 20_000_000);
                    }
                    for _ in 0..10 {
                        controller.record_completion(40_000_000, &config);
                    }
                    let now = interval * config.interval;
                    let claim = controller.claim(now, true, &config).expect("a claim");
                    let closed = controller.update(
                        &claim,
                        now,
                        sustained,
                        Tallies::default(),
                        true,
                        &config,
                    );
                    closed.overloaded
                })
                .count()
        };
        assert_eq!(overloaded_intervals(None), 0, "175 a second drains 150");
        assert!(
            overloaded_intervals(Some(97.0)) >= 5,
            "150 a second outpace the 97 the service finished before the cut"
        );
    }

    #[test]
    fn a_probe_holds_the_slot_time_to_the_pace_before_its_cut() {
        // The lab's CPU-bound step at 2x: a probe cut 7 slots on one core
        // (97 requests a second) to 4, whose permits were held 41 ms (40
        // here). Over the sustained 7 slots that reads a completion every
        // 5.7 ms; the core, held to the 97 a second it finished before the
        // cut, gives one every 10.3 ms.
        let config = crate::Shedder::builder().validate().expect("defaults");
        let controller = Controller::new(&config);
        for _ in 0..10 {
            controller.record_completion(40_000_000, &config);
        }
        let claim = controller
            .claim(config.interval, true, &config)
            .expect("a claim");
        controller.update(
            &claim,
            config.interval,
            EIGHT,
            Tallies::default(),
            true,
            &config,
        );
        let at = |rate: Option<f64>| {
            controller.sustained_slot_time(Sustained {
                limit: 7,
                gap: rate.and_then(Sustained::gap_of),
            })
        };
        assert_eq!(at(None), Some(40_000_000 / 7));
        assert_eq!(at(Some(97.0)), Some(10_309_279));
        // Never shorter than the sustained limit's slot time: the drain is
        // the lesser of the two rates.
        assert_eq!(at(Some(1_000.0)), Some(40_000_000 / 7));
        assert_eq!(at(Some(0.0)), Some(40_000_000 / 7), "no rate");
    }

    #[test]
    fn an_interval_closed_says_whether_the_level_shed_during_it() {
        // The adaptive limit reads it: a raised round that drained the
        // door's queue while the level shed measured what the level let in.
        let config = crate::Shedder::builder().validate().expect("defaults");
        let controller = Controller::new(&config);
        let close = |now: u64| {
            let claim = controller.claim(now, true, &config).expect("a claim");
            controller.update(&claim, now, EIGHT, Tallies::default(), true, &config)
        };
        assert!(!close(config.interval).shedding);
        controller.level.store(5 * 128, Ordering::Relaxed);
        let closed = close(2 * config.interval);
        assert!(closed.shedding);
        assert!(!closed.overloaded, "nothing arrived: no standing queue");
    }

    #[test]
    fn an_interval_closed_says_whether_arrivals_clearly_outran_completions() {
        // The adaptive limit's probes to learn wait for it. Two seconds of
        // intervals: 40 completions each, and 43 arrivals (1x, 7% refused
        // by the level), then 52 (1.3x).
        let config = crate::Shedder::builder().validate().expect("defaults");
        let controller = Controller::new(&config);
        let mut tallies = Tallies::default();
        let mut close = |interval: u64, passed: u64, refused: u64| {
            for _ in 0..passed {
                controller.record_passed_level(Rank::ALL[0]);
            }
            tallies.refused_by_level += refused;
            tallies.completed += 40;
            let now = interval * config.interval;
            let claim = controller.claim(now, true, &config).expect("a claim");
            controller.update(&claim, now, EIGHT, tallies, true, &config)
        };
        for interval in 1..=20 {
            assert!(!close(interval, 40, 3).outrun, "interval {interval}");
        }
        let outrun: Vec<bool> = (21..=60)
            .map(|interval| close(interval, 40, 12).outrun)
            .collect();
        // The slow average takes about 3 s to move that far; the fast one
        // would take three intervals.
        let first = outrun.iter().position(|outrun| *outrun);
        assert!(
            first.is_some_and(|first| first >= 10),
            "not at once: {first:?}"
        );
        assert!(outrun[first.unwrap_or(0)..].iter().all(|outrun| *outrun));
    }

    #[test]
    fn sheds_a_share_of_one_rank_gradually() {
        // 1,280 batch originals (rank 5) passed: 10 per cohort. 5% is 64 requests.
        let passed = counts(&[(5, 1_280), (6, 1_280)]);
        let level = shed_more(Level::NONE, &passed, 0.025);
        assert_eq!(level, Level::new(5 * 128 + 7));
    }

    #[test]
    fn a_single_request_sheds_a_few_cohorts_not_its_whole_rank() {
        // 5% of one request is worth 6.4 cohorts of a rank of 1 request.
        let passed = counts(&[(6, 1)]);
        assert_eq!(
            shed_more(Level::NONE, &passed, 0.05),
            Level::new(6 * 128 + 7)
        );
    }

    #[test]
    fn passes_over_ranks_that_admitted_nothing() {
        let passed = counts(&[(6, 128)]);
        let level = shed_more(Level::NONE, &passed, 0.05);
        assert_eq!(level.boundary(), (Rank::ALL[6], 7));
    }

    #[test]
    fn crosses_into_the_next_rank_when_one_is_exhausted() {
        // 10 left in rank 0's last cohort, then rank 1.
        let passed = counts(&[(0, 10), (1, 1_280)]);
        let level = shed_more(Level::new(127), &passed, 0.05);
        assert_eq!(level, Level::new(128 + 6));
    }

    #[test]
    fn never_sheds_the_last_critical_cohort() {
        let passed = counts(&[(7, 1)]);
        assert_eq!(shed_more(Level::new(1_000), &passed, 1.0), Level::MAX);
        assert_eq!(shed_more(Level::MAX, &passed, 1.0), Level::MAX);
    }

    #[test]
    fn with_nothing_arriving_keeps_the_level() {
        let passed = counts(&[]);
        assert_eq!(shed_more(Level::new(300), &passed, 0.05), Level::new(300));
    }
}
