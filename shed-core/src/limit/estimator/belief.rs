//! What a probe's readings do to the knee and the baseline believed (see
//! the module doc's "Probes").

use super::{consistent, floor_above, littles_rate, Cause, Cut, Estimator, Phase, FIRST_REFRESH};

/// Headroom the knee's floor keeps over the low bound (and no higher than
/// the high one) while the knee believed rests on one probe's reading. One
/// reading is off by a tenth or more, and more often low than high: the
/// throughput it is held against is the load's when the load only just
/// holds the service full, and a service whose work slows as more of it
/// runs at once (the lab's sleeps) holds permits for less at the probe's
/// cut than at the knee. In the lab's steady 1x scenario slow start's exit
/// probe read 6.57 to 7.67 for a knee of 8 in the eight full runs before
/// this margin, and where it read below 7.08 the limit stood a slot low (an
/// eighth of the throughput) until the next reading, 2 s later. Below the
/// knee a slot costs throughput; above it, a little latency.
pub(super) const ONE_READING_MARGIN: f64 = 0.12;

impl Estimator {
    /// A probe measured the knee and the clean baseline: steady from here.
    pub(super) fn knee_found(&mut self, cause: Cause, knee: f64, hold: f64, before: f64) -> bool {
        let old_knee = self.knee;
        let new_knee = self.believe(cause, knee, hold);
        self.recheck_raise = old_knee.is_some_and(|old| new_knee < old);
        // The saturated throughput that goes with them (Little's law): the
        // one measured before the probe may have straddled a slowdown.
        let baseline = self.baseline.unwrap_or(hold);
        self.delivery = Some(littles_rate(new_knee, baseline).unwrap_or(before));
        tracing::debug!(
            knee,
            hold_ms = hold / 1e6,
            believed = new_knee,
            baseline_ms = baseline / 1e6,
            ?cause,
            "adaptive limit: a probe measured the knee"
        );
        let floor = self.knee_floor(new_knee);
        self.limit = match (cause, self.phase, old_knee) {
            // A refresh only refines the knee: the limit goes back to where
            // it stood, moved as much as the knee moved.
            (Cause::Refresh, Phase::Probing(Cut { from, .. }), Some(old)) => {
                (from * new_knee / old).max(floor)
            }
            _ => {
                self.headroom = self.settings.headroom.0;
                floor
            }
        };
        self.phase = Phase::Steady;
        self.restart_round();
        true
    }

    /// Takes a knee and a clean baseline measured by a probe (or a raised
    /// round) into what is believed; returns the knee now believed.
    pub(super) fn believe(&mut self, cause: Cause, knee: f64, hold: f64) -> f64 {
        let old_knee = self.knee;
        // One probe's knee is off by a sixth or more, and now and then by a
        // third (its throughput held against rounds that happened to be
        // slow): the belief is the mean of the last five, less the highest
        // and the lowest, so one reading far off is dropped. A reading that
        // does not agree with the belief gets a second opinion soon: if the
        // service did change, the next ones agree with it, and the belief
        // follows.
        self.knees.push(knee);
        let new_knee = self.knees.trimmed_mean().unwrap_or(knee);
        self.knee = Some(new_knee);
        let knee_agrees = old_knee.is_some_and(|old| consistent(old, knee));
        let baseline_agrees = self.believe_baseline(cause, hold);
        if !knee_agrees || !baseline_agrees {
            self.refresh_after = FIRST_REFRESH.min(self.settings.refresh_rounds);
        }
        self.last_knee = None;
        new_knee
    }

    /// Takes a clean baseline measured by a probe into what is believed;
    /// returns whether it agreed with the clean one believed before. The
    /// baseline is judged on its own: a service three times slower keeps its
    /// knee, not its hold times. One that changed that much, measured after
    /// evidence of a change, replaces what was believed.
    pub(super) fn believe_baseline(&mut self, cause: Cause, hold: f64) -> bool {
        let baseline = self.baseline.filter(|_| self.clean);
        let agrees = baseline.is_some_and(|baseline| consistent(baseline, hold));
        if baseline.is_none() || (!agrees && cause == Cause::Evidence) {
            self.baselines.restart(hold);
        } else {
            self.baselines.push(hold);
        }
        self.baseline = Some(self.baselines.trimmed_mean().unwrap_or(hold));
        self.clean = true;
        agrees
    }

    /// A probe that doubted the baseline (a cut held the throughput in hold
    /// times well under it, see
    /// [`QUEUE_IN_BASELINE`](super::probe::QUEUE_IN_BASELINE)) read a knee
    /// well below the one believed: the knee and the baseline believed
    /// were read with work queued inside. Both are forgotten, so that the
    /// probe's reading starts them afresh: the knee's readings are cleared,
    /// and a baseline no longer clean is restarted by the next one taken in
    /// ([`Estimator::believe_baseline`]). Averaged in, a knee read at 10.8
    /// on one worker kept the limit above 2 for minutes.
    pub(super) fn forget_a_belief_with_a_queue(&mut self) {
        tracing::debug!(
            believed = self.knee.or(self.last_knee),
            baseline_ms = self.baseline.map(|baseline| baseline / 1e6),
            "adaptive limit: the knee and the baseline believed held a queue"
        );
        self.knees.clear();
        self.clean = false;
    }

    /// The least limit for a knee believed: [`floor_above`] it with the low
    /// headroom, and [`ONE_READING_MARGIN`] more (within the headroom's
    /// range) while the belief rests on one reading.
    pub(super) fn knee_floor(&self, knee: f64) -> f64 {
        let (low, high) = self.settings.headroom;
        let margin = if self.knees.len() > 1 {
            0.0
        } else {
            ONE_READING_MARGIN.min(high - low)
        };
        floor_above(knee, low + margin)
    }
}
