//! Slow start: doubling from a small initial limit, and how it ends (see
//! the module doc's "Slow start").

use super::{
    Cause, Estimator, IntervalSamples, Phase, Throughput, OVERLOADED_ROUNDS, RELIABLE_SAMPLES,
};

/// What slow start's exit probe is held against once its throughput stopped
/// growing (see [`Estimator::slow_start_plateau`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Plateau {
    /// The fed rounds since throughput stopped growing, pooled.
    pub(super) throughput: Throughput,
    /// It was read with no lull since the last doubling (see
    /// `Estimator::lull_since_doubling`): the growth test compared the
    /// limit with its half under the same load.
    pub(super) in_a_row: bool,
}

/// In slow start, a fed round whose throughput grew by less than this over
/// the last one (at half the limit) has passed the knee.
const SLOW_START_GROWTH: f64 = 1.25;

impl Estimator {
    /// Whether the probe that ends slow start (or follows it, while no
    /// clean baseline was measured) may run: as a refresh's may
    /// ([`Estimator::learning_probe_may_run`]), or with the service held
    /// full in an overload once the controller found [`OVERLOADED_ROUNDS`]
    /// rounds at this limit overloaded. Below 1x load a burst holds the
    /// service full in an overload now and then, and the exit's quarter
    /// cut, below the knee, refuses what the service would serve; at or a
    /// little above 1x the controller finds the load outpacing the service
    /// again and again.
    ///
    /// Or in an overload the level sheds in, with arrivals clearly
    /// outrunning completions (`outrun`, on two-second averages: a burst
    /// below 1x rarely does), in a round that kept the service fed (every
    /// round asked is), whether or not the door's queue ran dry now and
    /// then: the level's refusals thin it, and on a small limit a round of
    /// some 60 permits is held full only if at most one slot finds nobody
    /// waiting.
    /// In the lab's CPU-bound step at 2x, slow start backed off from 8
    /// slots on one core, the rounds after it found no waiter for 1 to 17
    /// of their 57-62 released slots (at most 4 in the ones fed), and
    /// the half second held full came 4.4 s later, with 7 requests sharing
    /// the core meanwhile (a traced trial of a build whose minimum was 1;
    /// with this gate the probe ran 1.3 s after the back-off). The test
    /// `after_slow_start_backs_off_in_an_overload_the_level_thins_the_probe_runs_in_the_second_round`.
    pub(super) fn exit_may_probe(&self, saturated: bool, round: &IntervalSamples) -> bool {
        self.learning_probe_may_run(saturated, round)
            || (saturated && self.overloaded_rounds >= OVERLOADED_ROUNDS)
            || (round.outrun && round.shedding)
    }

    /// Whether a slow-start round's throughput grew with the limit: it
    /// finished at least [`SLOW_START_GROWTH`] times what the last counted
    /// round did at half the limit. Rates of fewer permits are too noisy to
    /// compare: at tiny limits, and from the first counted round, slow
    /// start doubles blindly.
    fn slow_start_grew(&self, round: &IntervalSamples) -> bool {
        let finished_rate = Throughput::of(round).rate();
        round.released < RELIABLE_SAMPLES
            || self
                .slow_start_rate
                .is_none_or(|last| finished_rate >= SLOW_START_GROWTH * last)
    }

    /// What slow start's exit probe is held against, once its throughput
    /// stopped growing: the rounds since it stopped (the plateau) pooled
    /// with this one, or this one if it is the first not to grow. `None`
    /// while throughput grows with the limit.
    pub(super) fn slow_start_plateau(&self, round: &IntervalSamples) -> Option<Throughput> {
        match self.plateau {
            Some(plateau) => Some(plateau.throughput.pooled(Throughput::of(round))),
            None if !self.slow_start_grew(round) => Some(Throughput::of(round)),
            None => None,
        }
    }

    /// A slow-start round whose callers hung up on held permits: the
    /// quarter-cut probe that ends slow start, if its throughput stopped
    /// growing and the load is seen to hold (or, in the first round after a
    /// doubling, to outpace) the service; else a back-off.
    pub(super) fn slow_start_censored(
        &mut self,
        round: &IntervalSamples,
        censored: f64,
        saturated: bool,
        first_since_doubling: bool,
    ) -> bool {
        // A round that finished nothing is no throughput to hold a probe
        // against: the plateau before it is, if there is one.
        let stopped_at = if round.none_completed() {
            self.plateau.map(|plateau| plateau.throughput)
        } else {
            self.slow_start_plateau(round)
        };
        let may_probe = saturated || (round.overloaded && first_since_doubling);
        if let Some(stopped_at) = stopped_at.filter(|_| may_probe) {
            // Slow start doubled past the knee, maybe far past it (its
            // first counted round doubles blindly: 8 to 16 on a
            // service of 2 slots, where permits are held 8 times as
            // long and callers hang up). Backed off by half the
            // censored share, it took two rounds (2 s) to reach 13
            // there, and halving probes from 13 found the knee 6 s into
            // the lab's 4x step. The probe that ends slow start cuts to
            // a quarter at once, as it does without censoring. Callers
            // hanging up on held permits, throughput that stopped
            // growing and the controller's overload in this round are
            // evidence enough: the half second of rounds that hand
            // nearly every slot to a waiter, which tells a burst from
            // an overload where nothing else does, was not there in
            // the first second of the lab's 4x step (92% handed off,
            // the level's refusals thinning the door's queue), and the
            // back-offs went on for 3 s more. Only in the first round
            // after a doubling, though: its growth test compares two
            // rounds in a row. Slow start that sat at 16 below the
            // knee's load (0.8x) compares a slowdown's first round with
            // a round at 8 from seconds before; a probe held against
            // that round (a transition's, read at 89/s and at 152/s for
            // a service of 136) read the knee at 5.7 and at 9.7 for 8.
            return self.start_probe(stopped_at, Cause::Evidence);
        }
        // Why it backed off rather than probed.
        tracing::debug!(
            stopped = stopped_at.is_some(),
            saturated,
            overloaded = round.overloaded,
            handed_off = round.handed_off,
            released = round.released,
            "adaptive limit: a censored slow-start round"
        );
        self.back_off(censored)
    }

    /// The plateau that `throughput` (what the rounds since it stopped
    /// growing finished, pooled) makes: read in a row if the first of those
    /// rounds came with no lull since the last doubling.
    pub(super) fn plateau_at(&self, throughput: Throughput) -> Plateau {
        let in_a_row = self
            .plateau
            .map_or(!self.lull_since_doubling, |plateau| plateau.in_a_row);
        Plateau {
            throughput,
            in_a_row,
        }
    }

    /// In slow start, the load let up (see `lull_since_doubling`).
    pub(super) fn note_a_lull(&mut self) {
        if self.phase == Phase::SlowStart {
            self.lull_since_doubling = true;
        }
    }

    /// Slow start: twice the limit, measured once its epoch settles.
    pub(super) fn double(&mut self) -> bool {
        self.limit *= 2.0;
        self.overloaded_rounds = 0;
        self.just_doubled = true;
        self.lull_since_doubling = false;
        self.restart_round();
        true
    }
}
