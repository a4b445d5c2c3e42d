//! Refreshes: when a probe only to learn may run, and the raised round
//! that comes before a refresh's probe (see the module doc's "Probes").

use super::probe::HALVES_AT_MOST;
use super::{
    clean_hold, to_limit, Cause, Estimator, IntervalSamples, Phase, Pooled, Probe, Raise,
    Throughput, FIRST_REFRESH,
};

/// A refresh raises the limit (or the knee, if higher) by this much for a
/// round before its probe (by a whole slot at least, every
/// `refresh_rounds` rounds: see [`Estimator::raise_for_refresh`]): a knee
/// read up to a fifth low still lies below the raised limit, so the
/// throughput measured there is the saturated one, and one read lower is
/// raised by this much at least. The round costs some latency (a third
/// more hold time, for a knee read right), not throughput.
const RAISE: f64 = 1.25;

/// A raised round whose throughput grew by at least this share of the
/// raise (in slots) over what the limit in force delivered shows that limit
/// below the knee. A raise from 7 to 9 on a knee of 8 grows throughput by
/// 14%, half the raise. A raised round of 128 permits and the 256 or more
/// it is held against vary by about a tenth together, so a round that
/// reads a tenth more (a third of the raise there) goes on for as long
/// again before it is believed. From 1 slot to 2 the round must read 35%
/// more, from 2 to 3 about a sixth (17.5%) more, with 64 and 96 permits
/// at the default `round_samples` (see `Estimator::samples_needed`).
const RAISE_GREW: f64 = 0.35;

/// The least limit a raised round looks above for a knee read low on the
/// refresh schedule (see [`Estimator::can_compare`]); below it, only every
/// `refresh_rounds` rounds, a slot more.
const MIN_RAISED_FROM: f64 = 3.0;

/// Fewest released permits of the limit in force a raised round is held
/// against: fewer, and the comparison is left to the probe.
const RAISED_AGAINST: u64 = 256;

/// A raise of at least this ratio (from 1 slot to 2, or 2 to 3) may end its
/// round early (see [`Estimator::raise_bought_nothing`]): the hold times
/// it doubles or half again stand clear of the noise of a few permits.
const TELLING_RAISE: f64 = 1.5;

/// A raised round whose permits were held at least this share of the raise
/// longer than the limit in force held them bought no throughput (see
/// [`Estimator::raise_bought_nothing`]).
const HELD_THE_RAISE_LONGER: f64 = 0.9;

/// Fewest completed permits a raised round ends early on.
const TOLD_EARLY_AFTER: u64 = 16;

/// A refresh's probe cuts the limit by this much (a third): the knee is
/// known, so the cut need not go far below it to read it (a probe that
/// holds throughput with flat hold times stands at or below the knee, and
/// reads it as well as one that halves), and a shallower cut costs less
/// throughput per permit measured.
pub(super) const REFRESH_DIVISOR: f64 = 1.5;

impl Estimator {
    /// Whether a probe only for learning (slow start's exit, a refresh's)
    /// is overdue: `refresh_rounds` rounds under load since the last probe
    /// (or since the start: fed ones; in steady state, also unfed ones in
    /// which the level shed), so that it runs even where the load never
    /// clearly outruns the service (see the `outrun` gate in
    /// [`Estimator::learning_probe_may_run`]).
    fn probe_overdue(&self) -> bool {
        self.rounds_since_probe >= self.settings.refresh_rounds
    }

    /// Whether a probe only for learning (a refresh's) may run: the load
    /// holds the service full in an overload (`saturated`), and clearly
    /// outruns it (`outrun`: arrivals a quarter over completions on
    /// two-second averages), or the probe is overdue.
    pub(super) fn learning_probe_may_run(&self, saturated: bool, round: &IntervalSamples) -> bool {
        saturated && (round.outrun || self.probe_overdue())
    }

    /// A refresh: first raise the limit for a round, so that the throughput
    /// the probe is held against is the service's saturated one. Held
    /// against what the limit in force delivers, as it once was, a refresh
    /// from a limit below the knee read the knee as that limit, and a knee
    /// read low stayed low (7 for 8 at 1x load, a sustained overload).
    ///
    /// Once the limit has bound for `refresh_rounds` steady rounds since a
    /// raise last looked a whole slot higher, the raise is a whole slot at
    /// least. A quarter over 1 or 2 slots rounds back to the limit in
    /// force, and there nothing else looks higher: a slot's hold times and
    /// delivery read the same whether or not the service could run a
    /// second, and the delivery rule's headroom (a fifth at most) rounds
    /// back too. A service of one worker that gained a second (a container
    /// given a second core) kept a limit of 1, half its capacity: in the
    /// estimator's model, for the 90 s measured, in 86 of the 102 seeds
    /// whose limit stood at 1 then. From 5 slots up every raise looks a
    /// slot higher or more, so this changes nothing there (at 3 or 4 a
    /// quarter can round back, as from 2.7 to 3.4). The cadence is the
    /// slowest refresh's, not every refresh's: on a service of one slot
    /// the raise holds every permit twice as long, and in the lab's
    /// CPU-bound step at 2x, where refreshes come every few seconds, a
    /// whole slot at each (rounds of 64 permits, none ended early) took
    /// the p99 from 32 ms to 63-127 ms in three trials.
    pub(super) fn raise_for_refresh(&mut self, probe_after: bool) -> bool {
        let from = self.limit;
        let mut raised = from.max(self.knee.unwrap_or(from)) * RAISE;
        if self.a_slot_more_due() {
            raised = raised.max(f64::from(self.limit()) + 1.0);
        }
        tracing::debug!(from, raised, "adaptive limit: a refresh raises the limit");
        self.rounds_since_raise = 0;
        self.recheck_raise = false;
        self.phase = Phase::Raising(Raise {
            from,
            at_limit: self.at_limit,
            probe_after,
            extended: false,
            remeasured: false,
        });
        self.limit = raised.min(f64::from(self.settings.max));
        self.restart_round();
        true
    }

    /// The raised round of a refresh ended.
    ///
    /// If the limit in force was the knee's floor and the raised round
    /// delivered clearly more than it did (twice: a round that reads more
    /// goes on for as long again), that limit stood below the knee: its
    /// hold times were a clean baseline, the knee lies at least as far
    /// above it as throughput grew: that reading joins the others, and the
    /// limit goes to the floor of the knee now believed. (A knee
    /// and a baseline read low together by one probe, 6.7 for 8 and 15 ms
    /// for 20 at 1x load, held the limit at 7 until the next probe, tens of
    /// seconds on; found this way, the fix costs no throughput.)
    ///
    /// Otherwise, probe from where the limit stood, held against the
    /// throughput measured at the raised limit (pooled with the limit's
    /// own rounds if it delivered less than they did), if the load holds
    /// the service full. Whether or not the raised limit was kept full, its
    /// throughput is no less than the saturated one at the limit in force:
    /// when the raised limit drained the door's queue, its throughput is
    /// all the load asks, and the knee the probe reads is the concurrency
    /// that carries it. If the load fell away altogether, the probe's own
    /// round is not kept full, and is dropped.
    ///
    /// A round not `fed` while the level shed drained the door's queue and
    /// measured what the level let in, which the limit in force had set
    /// (the level sheds what that limit cannot drain): held against that
    /// limit's own rounds it reads no growth, and a knee read low stays
    /// low. At 1x in the lab, 7.5 slots for 8 delivered 330/s with 15% of
    /// attempts refused, the raised round at 9 read 333/s (growth 1.01),
    /// and the refresh's probe held against it read 6.1. The level relaxes
    /// once the raised limit drains what arrives (the controller's recovery
    /// steps lift half the ranks' 512 cohorts in 0.8 s), so such a round is
    /// measured again, once, and if it still measured the level no probe is
    /// held against it (in the lab, at 1x, one such round, 334/s from a
    /// service of 382/s, had a refresh's probe at 6 read 7.1 for 8 and
    /// build a queue that the level shed against for 2.3 s): the limit goes
    /// back, and a raised round comes again soon.
    pub(super) fn raised(&mut self, raise: Raise, round: &IntervalSamples, fed: bool) -> bool {
        // (Hold times that grew with the raise say the slots were busy, fed
        // or not.)
        let level_capped = !fed && round.shedding && !self.raise_bought_nothing(round);
        if level_capped && !raise.remeasured {
            tracing::debug!(
                from = raise.from,
                raised = self.limit,
                handed_off = round.handed_off,
                released = round.released,
                "adaptive limit: a raised round drained the door's queue while the level shed"
            );
            self.phase = Phase::Raising(Raise {
                remeasured: true,
                ..raise
            });
            return false;
        }
        let Raise {
            from,
            at_limit,
            extended,
            ..
        } = raise;
        let probe_after = raise.probe_after && !level_capped;
        let raised = self.limit;
        let (from_slots, raised_slots) = (at_limit.mean_limit(), f64::from(self.limit()));
        if !level_capped && raised_slots > f64::from(to_limit(from, &self.settings)) {
            // A slot higher was looked at, and not only the level measured.
            self.rounds_since_a_slot_more = 0;
        }
        let before = Throughput::of(&at_limit.rounds).rate();
        let growth = Throughput::of(round).rate() / before.max(f64::MIN_POSITIVE);
        let compared = self.comparable(&at_limit);
        let grew = compared
            && raised_slots > from_slots
            && growth >= 1.0 + RAISE_GREW * (raised_slots / from_slots - 1.0);
        tracing::debug!(
            from = from_slots,
            raised = raised_slots,
            growth,
            compared,
            grew,
            level_capped,
            "adaptive limit: a raised round ended"
        );
        if grew && !extended {
            // Make sure: a round of 128 permits at the knee now and then
            // reads a tenth more than the limit's own delivery by chance;
            // one of twice as many, far less often.
            self.phase = Phase::Raising(Raise {
                probe_after,
                extended: true,
                remeasured: true,
                ..raise
            });
            self.round = *round;
            return false;
        }
        self.phase = Phase::Steady;
        if grew {
            let knee = (from_slots * growth).min(raised_slots);
            if raised_slots >= TELLING_RAISE * from_slots {
                // Twice in a row, a raise of half again or more delivered a
                // third of it more, or much more: no chance reading. (From
                // 1 slot to 2 on two workers, 1.93 times as much: among
                // four readings of 1 it is dropped as the highest, and the
                // next such raise comes `refresh_rounds` rounds later.)
                self.knees.clear();
            }
            let hold =
                clean_hold(&at_limit.rounds).expect("comparable asks for a completed permit");
            let believed = self.believe(Cause::Refresh, knee, hold);
            self.refresh_after = FIRST_REFRESH.min(self.settings.refresh_rounds);
            self.delivery = Some(Throughput::of(round).rate());
            // The reading is one of five, as a probe's is: a raised round
            // that read more by chance (one in twenty, from a floor a slot
            // above the knee) kept the raised limit, a third over the knee,
            // until the next probe.
            self.limit = self.knee_floor(believed).max(from);
            self.restart_round();
            return true;
        }
        self.limit = from;
        if level_capped {
            // Measured again and still what the level let in: no growth,
            // but no evidence of none either. A raised round asks again
            // soon (see `recheck_raise`), not at the next refresh, which at
            // 1x load, where few rounds are fed, can lie a minute away: in a
            // full lab run of 00e4e24 the one raised round of the 1x trial,
            // at 15.5 s while the level shed, went back from 9 to 7, and the
            // limit stood a slot below the knee of 8 to the end, refusing
            // 12.9% of attempts. That run was not traced, so whether the
            // level alone capped that round was not seen.
            self.recheck_raise = true;
        }
        if !probe_after || round.none_completed() {
            // (A raised round that finished nothing is no throughput to
            // hold a probe against.)
            self.restart_round();
            return true;
        }
        // A raised round that delivered less than the limit in force
        // measured the same saturated throughput as the rounds at that
        // limit, and read it low: held against it alone, the probe read
        // the knee as low (at 4x in the lab, three raised rounds of 0.77 to
        // 0.92 of the limit's delivery, then knees of 5.9-6.7 for 8). Pooled
        // with those rounds, a slow patch weighs as little as its permits.
        let saturated = if growth < 1.0 && at_limit.rounds.released > 0 {
            Throughput::of(&at_limit.rounds).pooled(Throughput::of(round))
        } else {
            Throughput::of(round)
        };
        let probe = Probe {
            before: saturated,
            ceiling: raised,
            cause: Cause::Refresh,
            divisor: self.refresh_divisor(),
            doubts_the_baseline: false,
        };
        self.cut_for_probe(probe)
    }

    /// How much a refresh's probe divides the limit by: a third
    /// ([`REFRESH_DIVISOR`]), or, from a limit of [`HALVES_AT_MOST`] slots
    /// or fewer, as much as lands the probe a whole slot below the knee
    /// believed (no lower than the minimum). There a third lands within a
    /// slot of the knee (3 to 2 for a knee of 2.9), where a probe reads the
    /// knee believed whatever the knee is, and a knee read high (a slot's
    /// worth of queue in the baseline) was never measured from below again:
    /// on one worker, the limit stood at 2 or 3 for all 1,200 intervals of
    /// the test
    /// `on_one_worker_a_knee_read_at_2_9_is_probed_a_slot_below_and_read_again_within_60_intervals`.
    /// From a larger limit a third already lands more than a slot below
    /// it, and a knee believed far below the limit (the delivery rule
    /// raises the limit while hold times stay flat) is no reason to cut
    /// deeper. It divides by more than 2 only where it lands at the minimum
    /// (with a minimum of 1, from 3 or 4 slots to 1).
    pub(super) fn refresh_divisor(&self) -> f64 {
        if self.limit() > HALVES_AT_MOST {
            return REFRESH_DIVISOR;
        }
        let Some(knee) = self.knee else {
            return REFRESH_DIVISOR;
        };
        let below_the_knee = (knee.floor() - 1.0).max(f64::from(self.settings.min));
        REFRESH_DIVISOR.max(self.limit / below_the_knee)
    }

    /// Whether the raised round so far already shows the raise bought no
    /// throughput, so it ends now: its permits were held about as much
    /// longer than at the limit in force as the raise is large (by Little's
    /// law the throughput is the slots over the hold time, so it did not
    /// grow), over [`TOLD_EARLY_AFTER`] completed permits or more, for a
    /// raise of [`TELLING_RAISE`] or more.
    ///
    /// From 1 slot to 2 on one core every hold time doubles, and 64 permits
    /// there (0.65 s of twice the latency in the lab's CPU-bound step)
    /// only tell what the first 16 did. That also holds for a refresh's
    /// usual raise, a quarter over a knee read at 1.2 or more, which rounds
    /// to 2 slots: 128 permits, before.
    pub(super) fn raise_bought_nothing(&self, round: &IntervalSamples) -> bool {
        let Phase::Raising(raise) = self.phase else {
            return false;
        };
        // The slots the raise is judged from, as `raised` judges them.
        let from_slots = raise.at_limit.mean_limit();
        let ratio = f64::from(self.limit()) / from_slots;
        if raise.extended
            || ratio < TELLING_RAISE
            || round.completed < TOLD_EARLY_AFTER
            || raise.at_limit.rounds.completed < TOLD_EARLY_AFTER
        {
            return false;
        }
        let (Some(held_at_limit), Some(held_raised)) =
            (clean_hold(&raise.at_limit.rounds), clean_hold(round))
        else {
            return false;
        };
        held_raised >= held_at_limit * (1.0 + HELD_THE_RAISE_LONGER * (ratio - 1.0))
    }

    /// Whether a raised round can be held against `at_limit` to tell
    /// whether the limit stood below the knee. Only a limit the knee's
    /// floor held up is in question: one the delivery rule set above the
    /// floor explores upwards by itself while hold times stay flat (and
    /// above the knee, a raised round that read more by chance would only
    /// push the limit further up). Against too few permits it tells
    /// nothing.
    ///
    /// Below [`MIN_RAISED_FROM`] such a raise (with no probe after it)
    /// runs only when a slot more is due (see
    /// [`Estimator::raise_for_refresh`]): it holds every permit of a
    /// one-slot service twice as long. Any raise that did look a slot
    /// higher is compared, at every limit ([`Estimator::raised`]). Left to
    /// the refresh's probe, as it once was at 1 or 2 slots, the comparison
    /// was lost whenever the probe's round went unfed (a refresh's unfed
    /// probe is abandoned at once): in the estimator's model, a raised
    /// round from 1 slot to 2 on two workers read 1.93 times the throughput
    /// at 1, and the limit went back to 1.
    pub(super) fn can_compare(&self, at_limit: &Pooled) -> bool {
        self.comparable(at_limit)
            && (at_limit.mean_limit() >= MIN_RAISED_FROM || self.a_slot_more_due())
    }

    /// Whether `at_limit` is a limit the knee's floor holds up, measured
    /// over enough permits to hold a raised round against.
    fn comparable(&self, at_limit: &Pooled) -> bool {
        let from = at_limit.mean_limit();
        let at_floor = self.knee.is_some_and(|knee| {
            let floor = to_limit(self.knee_floor(knee), &self.settings);
            from < f64::from(floor) + 0.5
        });
        at_floor && at_limit.rounds.released >= RAISED_AGAINST && !at_limit.rounds.none_completed()
    }

    /// Whether a raised round is due to look a whole slot above the limit
    /// in force (see [`Estimator::raise_for_refresh`]).
    fn a_slot_more_due(&self) -> bool {
        self.rounds_since_a_slot_more >= self.settings.refresh_rounds
            && self.limit() < self.settings.max
    }
}
