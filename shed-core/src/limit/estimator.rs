//! The adaptive limit's algorithm: a deterministic function of what the
//! engine measured, interval by interval, with no clock and no atomics of
//! its own (the engine feeds it [`IntervalSamples`] where an interval closes).
//!
//! # The idea: find the knee with Little's law
//!
//! A service runs some number of requests truly in parallel (its workers,
//! cores, connections): its *knee* `K`. Below the knee more concurrency
//! buys throughput and hold times stay flat; above it throughput stays flat
//! and hold times grow, because the excess waits inside the service, out of
//! the shedder's sight. With `X` the rate at which permits come back and `B`
//! the hold time when nothing waits inside (the *baseline*), Little's law
//! puts the knee at
//!
//! ```text
//! K = X_saturated * B
//! ```
//!
//! and the limit is kept just above it: `L = max(K, D * B * (1 + e))`, where
//! `D` is the smoothed delivery rate while the limit binds and `e` a headroom
//! between `e_lo` and `e_hi` that grows while hold times stay flat (room to
//! grow) and shrinks while they inflate with throughput at its peak (as brpc's
//! explore ratio does).
//!
//! # Learning the baseline without trusting a stale one
//!
//! A baseline measured above the knee is inflated, and one measured before
//! the service slowed down is too low; both are the anchors' known failure
//! modes (a drifting or poisoned `rtt_noload`). So the baseline is only
//! learned where it is known to be clean:
//!
//! - in *slow start*, doubling the limit from a small initial value while
//!   hold times stay flat;
//! - by a *probe*: halve the limit and measure the permits admitted after
//!   the cut (an epoch, so older work draining does not count). While
//!   throughput holds at half the concurrency, the knee is lower still:
//!   halve again. Once throughput falls, the probe stands below the knee:
//!   its hold time is the clean baseline, and `K = X_before * B`.
//!
//! Probes run when hold times inflate well past the baseline for two rounds
//! (a queue inside, or a service that got slower: the probe tells which),
//! when callers abandon permits (censored samples), when hold times fall well
//! below the baseline (a faster service), and every `refresh` rounds. A
//! service that got three times slower but still runs `K` requests at once
//! keeps its limit: the probe finds throughput falling at `K / 2` and the knee
//! `X * B` where both were measured after the change. The limit never drops
//! below the knee the last probe measured, except by a new probe; so a noisy
//! baseline cannot walk the limit down.
//!
//! # Rounds
//!
//! Decisions are taken per *round*: enough released permits to be worth a
//! decision (64, or fewer in slow start), spanning at least two mean hold
//! times. A round that has not filled within `max_round` gives up without a
//! decision, so a quiet service keeps its limit. A round only counts while
//! the limit *binds* (some arrival found every slot taken): a limit nobody
//! reaches says nothing about the service.

use std::time::Duration;

/// What the engine measured over one controller interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct IntervalSamples {
    /// Length of the interval, in nanoseconds.
    pub(crate) elapsed: u64,
    /// Arrivals that found no free slot (the limit was binding).
    pub(crate) blocked: u64,
    /// Permits given back, whenever they were admitted.
    pub(crate) released: u64,
    /// Permits given back that were admitted in the current epoch.
    pub(crate) samples: u64,
    /// Their total hold time, nanoseconds.
    pub(crate) hold: u64,
    /// Of those, the ones that completed (not cut at a deadline nor
    /// abandoned by their caller).
    pub(crate) completed: u64,
    /// The completed ones' total hold time, nanoseconds.
    pub(crate) completed_hold: u64,
    /// Of those, the censored ones: cut at a deadline or abandoned.
    pub(crate) censored: u64,
}

impl IntervalSamples {
    fn add(&mut self, other: &IntervalSamples) {
        self.elapsed = self.elapsed.saturating_add(other.elapsed);
        self.blocked = self.blocked.saturating_add(other.blocked);
        self.released = self.released.saturating_add(other.released);
        self.samples = self.samples.saturating_add(other.samples);
        self.hold = self.hold.saturating_add(other.hold);
        self.completed = self.completed.saturating_add(other.completed);
        self.completed_hold = self.completed_hold.saturating_add(other.completed_hold);
        self.censored = self.censored.saturating_add(other.censored);
    }
}

/// The algorithm's settings, validated by the builder.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Settings {
    pub(crate) initial: u32,
    pub(crate) min: u32,
    pub(crate) max: u32,
    /// Released permits a round needs before it decides.
    pub(crate) round_samples: u32,
    /// A round that has not filled by then decides nothing (nanoseconds).
    pub(crate) max_round: u64,
    /// Hold-time inflation over the baseline that calls for a probe.
    pub(crate) inflation: f64,
    /// Share of censored permits in a round that calls for a probe.
    pub(crate) censored_share: f64,
    /// Headroom over the knee: its low and high bounds.
    pub(crate) headroom: (f64, f64),
    /// Rounds between probes that refresh the baseline unprompted.
    pub(crate) refresh_rounds: u32,
}

/// Slow start runs from initial limits up to this, which lie below the knee
/// of nearly every service; a larger initial limit is probed down first,
/// since a baseline measured above the knee would be inflated.
const SLOW_START_MAX: u32 = 8;
/// Fewest released permits a slow-start round decides on: slow start only
/// asks whether hold times stayed flat, and two inflated rounds in a row are
/// needed to leave it.
const SLOW_START_SAMPLES: u64 = 8;
/// Fewest released permits any other round decides on (at small limits,
/// where the full count would take seconds to gather).
const ROUND_SAMPLES_AT_LEAST: u64 = 16;
/// Fewest released permits whose hold times are judged (inflated, faster).
const RELIABLE_SAMPLES: u64 = 32;
/// How much the smoothed delivery rate moves towards each round's rate.
const DELIVERY_WEIGHT: f64 = 0.1;
/// How much the headroom moves per round, between its bounds.
const HEADROOM_STEP: f64 = 0.02;
/// A probe's throughput at or above this share of the throughput before it
/// means the cut cost nothing: the knee lies lower still. A probe cuts to at
/// most half, so the share falls to at most about 0.5 when the probe stands
/// below the knee; over a probe round of 128 permits throughput varies by
/// about 9%, so 0.75 tells the two apart (a false "held" only costs one more
/// cut; a false "fell" would set the knee too high).
const THROUGHPUT_HELD: f64 = 0.75;
/// Hold times below this share of the baseline mean the service got faster.
const FASTER: f64 = 0.75;
/// Two baselines (or knees) within this ratio of each other are averaged;
/// further apart, the newer replaces the older.
const CONSISTENT: (f64, f64) = (0.7, 1.4);
/// A new epoch is settled once its own permits make up this share of all
/// released ones in an interval: the permits admitted under the old limit
/// have drained, and by then the new epoch's early (short) completions are
/// balanced by its long ones.
const SETTLED_SHARE: f64 = 0.9;
/// The same in slow start.
const SETTLED_SHARE_SLOW_START: f64 = 0.75;
/// How far a refresh probe moves the knee and the baseline towards what it
/// measured: one probe's measurement varies by a tenth or more.
const REFRESH_WEIGHT: f64 = 0.25;
/// A probe with a clean baseline cuts the limit to this share of the knee
/// Little's law suggests, so that it lands below the knee.
const PROBE_BELOW: f64 = 0.5;
/// Rounds of inflation in a row that call for a probe.
const HOT_ROUNDS: u32 = 2;

/// Where the algorithm stands.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    /// Doubling from a small initial limit while hold times stay flat.
    SlowStart,
    /// Tracking the knee.
    Steady,
    /// The limit was halved; `before` is the delivery rate it was cut from.
    Probing { before: f64, cause: Cause },
}

/// Why a probe runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cause {
    /// Something changed: hold times inflated or fell, or no clean baseline
    /// was measured yet. The probe's answer replaces what was believed.
    Evidence,
    /// The periodic check, with nothing amiss: a knee much lower than the
    /// one believed is more likely noise than news, so it is averaged in.
    Refresh,
}

/// A change the engine must make after an interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Change {
    /// The new limit.
    pub(crate) limit: u32,
    /// Whether permits admitted from now on start a new epoch (the old
    /// epoch's samples no longer describe the limit in force).
    pub(crate) new_epoch: bool,
}

/// What the algorithm currently believes, for stats.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Beliefs {
    pub(crate) baseline: Option<Duration>,
    pub(crate) knee: Option<f64>,
    pub(crate) delivery_rate: Option<f64>,
    pub(crate) headroom: f64,
    pub(crate) phase: &'static str,
    pub(crate) probes: u64,
}

/// The adaptive limit's state.
#[derive(Clone, Debug)]
pub(crate) struct Estimator {
    settings: Settings,
    limit: f64,
    phase: Phase,
    /// Clean no-queue hold time, nanoseconds, once measured.
    baseline: Option<f64>,
    /// Whether the baseline was measured where nothing waited inside.
    clean: bool,
    /// Smoothed delivery rate while the limit binds, permits per second.
    delivery: Option<f64>,
    /// The knee the last probe measured: the limit does not go below it.
    knee: Option<f64>,
    /// The knee before backing off from censored rounds, to return to.
    last_knee: Option<f64>,
    headroom: f64,
    round: IntervalSamples,
    /// Whether the current epoch's samples are still skipped (see
    /// [`SETTLED_SHARE`]).
    settling: bool,
    hot_rounds: u32,
    rounds_since_probe: u32,
    probes: u64,
    /// Completed hold time and count over the slow-start rounds.
    slow_start_pool: (u64, u64),
}

impl Estimator {
    pub(crate) fn new(settings: Settings) -> Estimator {
        let phase = if settings.initial <= SLOW_START_MAX {
            Phase::SlowStart
        } else {
            Phase::Steady
        };
        Estimator {
            limit: f64::from(settings.initial),
            phase,
            baseline: None,
            clean: false,
            delivery: None,
            knee: None,
            last_knee: None,
            headroom: settings.headroom.1,
            round: IntervalSamples::default(),
            // The engine starts empty: its first completions are short ones.
            settling: true,
            hot_rounds: 0,
            rounds_since_probe: 0,
            probes: 0,
            slow_start_pool: (0, 0),
            settings,
        }
    }

    /// The limit in force: the estimate rounded, within the bounds.
    pub(crate) fn limit(&self) -> u32 {
        to_limit(self.limit, &self.settings)
    }

    /// An operator set the limit: adaptation goes on from there.
    pub(crate) fn set_limit(&mut self, limit: u32) {
        self.limit = f64::from(limit.clamp(self.settings.min, self.settings.max));
        self.knee = None;
        if matches!(self.phase, Phase::Probing { .. }) {
            self.phase = Phase::Steady;
        }
        self.restart_round();
    }

    /// What the algorithm believes, for stats.
    pub(crate) fn beliefs(&self) -> Beliefs {
        Beliefs {
            baseline: self.baseline.map(|b| Duration::from_nanos(b as u64)),
            knee: self.knee,
            delivery_rate: self.delivery,
            headroom: self.headroom,
            phase: match self.phase {
                Phase::SlowStart => "slow start",
                Phase::Steady => "steady",
                Phase::Probing { .. } => "probing",
            },
            probes: self.probes,
        }
    }

    /// Takes one interval's samples; returns the change to make, if any.
    pub(crate) fn on_interval(&mut self, interval: IntervalSamples) -> Option<Change> {
        if self.settling {
            // Skip until the old limit's permits have drained.
            // Slow start only asks whether hold times inflated: a rougher
            // settling will do there.
            let share = match self.phase {
                Phase::SlowStart => SETTLED_SHARE_SLOW_START,
                _ => SETTLED_SHARE,
            };
            let own = interval.samples as f64;
            self.settling = !(interval.released > 0 && own >= share * interval.released as f64);
            if self.settling {
                return None;
            }
        }
        self.round.add(&interval);
        let round = self.round;
        let needed = self.samples_needed();
        let mean_hold = mean(round.hold, round.samples);
        let filled = round.samples >= needed && (round.elapsed as f64) >= 2.0 * mean_hold;
        if !filled {
            if round.elapsed >= self.settings.max_round {
                // Too quiet to judge: decide nothing, keep the limit.
                self.round = IntervalSamples::default();
            }
            return None;
        }
        self.round = IntervalSamples::default();
        let before = self.limit();
        let new_epoch = self.decide(&round);
        let after = self.limit();
        (new_epoch || after != before).then_some(Change {
            limit: after,
            new_epoch,
        })
    }

    /// Released permits the round needs: the full count once the limit is
    /// large enough to fill it quickly; at small limits (slow start, or a
    /// probe near the floor) fewer, so that finding a small knee does not
    /// take seconds.
    fn samples_needed(&self) -> u64 {
        let full = u64::from(self.settings.round_samples);
        let limit = u64::from(self.limit());
        match self.phase {
            Phase::SlowStart => (4 * limit).clamp(SLOW_START_SAMPLES, full),
            Phase::Steady => (8 * limit).clamp(ROUND_SAMPLES_AT_LEAST, full),
            // A probe's round sets the baseline and the knee for a long
            // while: twice the full count, fewer only at tiny limits.
            Phase::Probing { .. } => (16 * limit).clamp(full, 2 * full),
        }
    }

    /// One round's decision; returns whether a new epoch begins.
    fn decide(&mut self, round: &IntervalSamples) -> bool {
        let seconds = round.elapsed as f64 / 1e9;
        let released_rate = round.released as f64 / seconds;
        let hold = mean(round.hold, round.samples);
        let completed_hold = if round.completed > 0 {
            mean(round.completed_hold, round.completed)
        } else {
            hold
        };
        let censored = round.censored as f64 / round.samples as f64;

        if let Phase::Probing { before, cause } = self.phase {
            // The probe's own permits: older work draining says nothing of it.
            let rate = round.samples as f64 / seconds;
            return self.probe_measured(before, cause, rate, completed_hold);
        }

        let baseline = *self.baseline.get_or_insert(completed_hold);
        // Small rounds (slow start at a tiny limit) are too noisy to judge
        // hold times by: a mean of 8 exponential samples is off by a third.
        let reliable = round.samples >= RELIABLE_SAMPLES;
        let faster = reliable && completed_hold < FASTER * baseline;
        if round.blocked == 0 {
            // The limit did not bind: nothing to learn about the knee, but a
            // faster service shows in any round.
            if faster {
                self.baseline = Some((baseline + completed_hold) / 2.0);
            }
            return false;
        }
        let delivery = match self.delivery {
            Some(d) => d + DELIVERY_WEIGHT * (released_rate - d),
            None => released_rate,
        };
        self.delivery = Some(delivery);
        self.rounds_since_probe = self.rounds_since_probe.saturating_add(1);

        if censored > self.settings.censored_share {
            return self.back_off(censored);
        }
        if !self.clean && self.phase != Phase::SlowStart {
            return self.start_probe(released_rate, Cause::Evidence);
        }
        if faster && self.phase == Phase::Steady {
            return self.start_probe(released_rate, Cause::Evidence);
        }
        if reliable && hold > self.settings.inflation * baseline {
            // Slow start doubles: an inflated round there is no noise. In
            // steady state one round may be; two in a row are not.
            self.hot_rounds += 1;
            if self.hot_rounds >= HOT_ROUNDS || self.phase == Phase::SlowStart {
                return self.start_probe(released_rate, Cause::Evidence);
            }
            return false;
        }
        self.hot_rounds = 0;
        if self.phase == Phase::SlowStart {
            // Every slow-start round is below the knee so far: pool them all.
            self.clean = true;
            self.slow_start_pool.0 = self.slow_start_pool.0.saturating_add(round.completed_hold);
            self.slow_start_pool.1 = self.slow_start_pool.1.saturating_add(round.completed);
            self.baseline = Some(mean(self.slow_start_pool.0, self.slow_start_pool.1))
                .filter(|b| *b > 0.0)
                .or(Some(baseline));
            self.limit *= 2.0;
            self.restart_round();
            return true;
        }
        let (low, high) = self.settings.headroom;
        // brpc's explore ratio: more headroom while hold times are flat (room
        // to grow) or throughput sits below its peak, less while hold times
        // inflate at peak throughput; it rises faster than it falls, so that
        // more capacity is found within seconds.
        self.headroom = if hold <= baseline * (1.0 + low) {
            (self.headroom + 2.0 * HEADROOM_STEP).min(high)
        } else if released_rate <= delivery / (1.0 + low) {
            (self.headroom + HEADROOM_STEP).min(high)
        } else {
            (self.headroom - HEADROOM_STEP).max(low)
        };
        if self.rounds_since_probe >= self.settings.refresh_rounds {
            // Nothing changed that the rounds could see: the smoothed
            // delivery rate is the throughput to hold the probe against.
            return self.start_probe(delivery, Cause::Refresh);
        }
        if let Some(knee) = self.last_knee.filter(|knee| self.limit < *knee) {
            // Clean again after backing off: straight back to the knee.
            self.limit = knee;
            self.knee = Some(knee);
            self.restart_round();
            return true;
        }
        let target = delivery * baseline / 1e9 * (1.0 + self.headroom);
        self.limit = target.max(self.knee.unwrap_or(0.0));
        false
    }

    /// Callers abandon permits (or deadlines cut them): their hold times
    /// are lower bounds and their work may go on downstream, so they are
    /// a congestion signal, never fast successes. Cut the limit by half the
    /// censored share, as AIMD cuts on drops, and forget the knee floor
    /// (remembering it for when rounds are clean again).
    fn back_off(&mut self, censored: f64) -> bool {
        if let Some(knee) = self.knee.take() {
            self.last_knee = Some(knee);
        }
        if self.phase == Phase::SlowStart {
            self.phase = Phase::Steady;
        }
        self.headroom = self.settings.headroom.0;
        self.hot_rounds = 0;
        self.limit = (self.limit * (1.0 - censored / 2.0)).max(f64::from(self.settings.min));
        self.restart_round();
        true
    }

    /// Halves the limit to measure what the service does with less.
    ///
    /// The first cut halves the limit (quarters it while no clean baseline
    /// was ever measured): if the service merely got slower, throughput falls
    /// at once and the knee is found in one round. If throughput held, work
    /// was queueing inside, and the next cut goes straight below the knee
    /// Little's law suggests with the clean baseline, `before * baseline`.
    fn start_probe(&mut self, before: f64, cause: Cause) -> bool {
        let divisor = if self.clean { 2.0 } else { 4.0 };
        let target = self.limit / divisor;
        self.cut_for_probe(before, cause, target)
    }

    fn cut_for_probe(&mut self, before: f64, cause: Cause, target: f64) -> bool {
        self.phase = Phase::Probing { before, cause };
        self.probes += 1;
        self.limit = target.max(f64::from(self.settings.min));
        self.hot_rounds = 0;
        self.rounds_since_probe = 0;
        self.restart_round();
        true
    }

    /// A probe round ended: throughput held (halve again) or fell (the knee).
    fn probe_measured(&mut self, before: f64, cause: Cause, rate: f64, hold: f64) -> bool {
        let at_floor = self.limit() <= self.settings.min;
        if rate >= THROUGHPUT_HELD * before && !at_floor {
            let before = before.max(rate);
            let half = self.limit / 2.0;
            let target = match self.baseline.filter(|_| self.clean) {
                Some(baseline) => (PROBE_BELOW * before * baseline / 1e9).min(half),
                None => half / 2.0,
            };
            return self.cut_for_probe(before, cause, target);
        }
        let knee = before * hold / 1e9;
        let (baseline, old_knee) = (self.baseline.filter(|_| self.clean), self.knee);
        match cause {
            Cause::Evidence => {
                self.baseline = Some(consistent(baseline, hold));
                self.knee = Some(consistent(old_knee, knee));
            }
            Cause::Refresh => {
                let blend = |old: f64, new: f64| old + REFRESH_WEIGHT * (new - old);
                self.baseline = Some(baseline.map_or(hold, |b| blend(b, hold)));
                self.knee = Some(old_knee.map_or(knee, |k| blend(k, knee)));
            }
        }
        self.last_knee = None;
        self.clean = true;
        self.delivery = Some(before);
        self.headroom = self.settings.headroom.0;
        self.phase = Phase::Steady;
        let knee = self.knee.unwrap_or(knee);
        self.limit = knee * (1.0 + self.headroom);
        self.restart_round();
        true
    }

    /// Starts a new round for a new limit, once its epoch has settled.
    fn restart_round(&mut self) {
        self.round = IntervalSamples::default();
        self.settling = true;
    }
}

/// `total / count` as a float; zero when nothing was counted.
fn mean(total: u64, count: u64) -> f64 {
    if count == 0 {
        0.0
    } else {
        total as f64 / count as f64
    }
}

/// The average of an old and a new estimate when they agree, else the new one.
fn consistent(old: Option<f64>, new: f64) -> f64 {
    match old {
        Some(old) if (CONSISTENT.0..CONSISTENT.1).contains(&(new / old)) => (old + new) / 2.0,
        _ => new,
    }
}

/// An estimate as a whole limit: rounded to the nearest, within the bounds.
fn to_limit(estimate: f64, settings: &Settings) -> u32 {
    let rounded = if estimate.is_finite() {
        estimate.round().min(f64::from(u32::MAX))
    } else {
        f64::from(settings.max)
    };
    (rounded as u32).clamp(settings.min, settings.max)
}

#[cfg(test)]
mod tests;
