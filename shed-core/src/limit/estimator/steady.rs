//! Steady: the limit tracks the knee between probes (see the module
//! doc's "The idea" and "Probes").

use super::{Estimator, IntervalSamples, FIRST_REFRESH};

/// How much the headroom moves per round, between its bounds.
const HEADROOM_STEP: f64 = 0.02;

impl Estimator {
    /// A steady round kept the service full with clean hold times: the
    /// headroom follows hold times and throughput, a refresh comes when one
    /// is due, and the delivery rule sets the limit (`finished_rate`: what
    /// the round finished a second; `hold`: its mean hold time; `baseline`:
    /// the one believed; `delivery`: the smoothed delivery rate, this round's
    /// included; `saturated`: the load has held the service full in an
    /// overload).
    pub(super) fn steady_round(
        &mut self,
        round: &IntervalSamples,
        finished_rate: f64,
        hold: f64,
        baseline: f64,
        delivery: f64,
        saturated: bool,
    ) -> bool {
        let (low, high) = self.settings.headroom;
        // brpc's explore ratio: more headroom while hold times are flat (room
        // to grow) or throughput sits below its peak, less while hold times
        // inflate at peak throughput; it rises faster than it falls, so that
        // more capacity is found within seconds.
        self.headroom = if hold <= baseline * (1.0 + low) {
            (self.headroom + 2.0 * HEADROOM_STEP).min(high)
        } else if finished_rate <= delivery / (1.0 + low) {
            (self.headroom + HEADROOM_STEP).min(high)
        } else {
            (self.headroom - HEADROOM_STEP).max(low)
        };
        self.at_limit.add(round, self.limit());
        self.rounds_since_raise = self.rounds_since_raise.saturating_add(1);
        if let Some(knee) = self.last_knee.take() {
            // Clean again after backing off: the knee believed is back
            // before anything reads it (a refresh's raised round is
            // compared only against a knee), its floor holds the limit up
            // again (below, by the delivery rule), and a limit the
            // back-offs cut below the knee goes straight back to it.
            // (Brought back only in that last case, a knee above which a
            // back-off had left the limit stayed forgotten until the next
            // probe: the test
            // clean_rounds_after_a_back_off_above_the_knee_restore_the_knee.)
            self.knee = Some(knee);
            if self.limit < knee {
                self.limit = knee;
                self.restart_round();
                return true;
            }
        }
        if self.recheck_raise
            && self.rounds_since_raise >= FIRST_REFRESH
            && self.can_compare(&self.at_limit)
        {
            // A probe lowered the knee, or a raised round measured only the
            // admission level. One reading in a patch of short jobs reads
            // the knee and the baseline low together, and while the
            // readings are few it moves the belief (a knee of 7.9 read 5.7
            // held the limit at 7 for 8 s of a 2x overload, until the next
            // refresh); a raised round the level capped told nothing either
            // way. The raised round costs no throughput.
            self.recheck_raise = false;
            return self.raise_for_refresh(false);
        }
        if self.rounds_since_probe >= self.refresh_after {
            // The first refresh comes soon, measuring the knee again (see
            // knee_found); then they space out fourfold to
            // `refresh_rounds`: after two probes that agree the knee is
            // known to a few percent, and each refresh's probe cuts the
            // throughput by a third for a round. It waits until the load
            // holds the service full and clearly outruns it (`outrun`:
            // arrivals a quarter over completions on two-second averages).
            // Near 1x a burst holds the service full and outpaces the drain
            // now and then, and the cut builds a queue that a service at
            // its capacity never works off: the door refuses it (in twelve
            // trials of the lab's 1x step before this gate, the nine with
            // a refresh probe served 351-359/s, the three without 360-361,
            // for a capacity of 383/s), and the probe, held against the
            // load's own rate, reads the knee low (8.00 to 7.08 in a full
            // run). Overdue by `refresh_rounds` it runs all the same: a
            // raised round finds a knee read low, only a probe one read
            // high. The raised round costs no throughput and goes on its
            // own as often as refreshes would.
            if self.learning_probe_may_run(saturated, round) {
                self.refresh_after = self
                    .refresh_after
                    .saturating_mul(4)
                    .min(self.settings.refresh_rounds);
                return self.raise_for_refresh(true);
            }
            if self.rounds_since_raise >= self.refresh_after && self.can_compare(&self.at_limit) {
                return self.raise_for_refresh(false);
            }
        }
        let target = delivery * baseline / 1e9 * (1.0 + self.headroom);
        self.limit = target.max(self.knee.map_or(0.0, |knee| self.knee_floor(knee)));
        false
    }
}
