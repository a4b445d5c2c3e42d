//! Probes: the limit cut for a round or more, and what the rounds under
//! the cut say of the knee and the baseline (see the module doc's
//! "Probes").

use super::{
    about_as_long, clean_hold, floor_above, littles_rate, Cause, Cut, Estimator, IntervalSamples,
    Phase, Probe, Streak, Throughput, CONSISTENT, FIRST_REFRESH, SLOW_START_MAX,
};

/// A probe's throughput at or above this share of the throughput before it
/// means the cut cost nothing: the knee lies no higher. Below the knee the
/// share is the probe's limit over the knee. A false "held" only costs one
/// more cut, which lands below the knee; a false "fell" sets the knee too
/// high. The throughput of a round of 64 to 128 permits varies by 9 to 13%,
/// and a ratio of two by about half again: 0.75 keeps false "fell" rare.
const THROUGHPUT_HELD: f64 = 0.75;
/// A held probe's throughput at or above this share of the one before is
/// the same saturated throughput measured again, and is pooled with it.
/// Between [`THROUGHPUT_HELD`] and this the probe may stand just below the
/// knee (a cut to three quarters of it reads 0.75): pooling that rate would
/// lower the throughput the next cut is held against, and with it the knee
/// (a half cut from 12 on a knee of 8, pooled, read a knee of 5.6).
const THROUGHPUT_CLEARLY_HELD: f64 = 0.9;
/// A probe round whose throughput held, but not clearly (between
/// [`THROUGHPUT_HELD`] and [`THROUGHPUT_CLEARLY_HELD`]), with hold times
/// not flat (no clean baseline yet, or the service slowed down), is
/// ambiguous: a probe at three quarters of the knee reads 0.75, and so does
/// one above the knee whose round happened to be slow. Cut again (by a
/// third, see [`DEEPER_CUT`]), it costs a round below the knee (after a
/// slowdown in the lab, from 6 on a knee of 8 to 4, half the throughput;
/// to 3 when the cut halved). So it is measured again at the same
/// limit, costing a quarter of the throughput for a round, and the two
/// rounds pooled (twice the permits: their ratio's spread shrinks by about
/// 1/√2) are held at this share: below it the probe stood below the knee
/// (a false "fell" reads the knee less than a fifth above the probe's
/// limit, 1 / 0.85, bounded by the ceiling), at or above it the cut goes
/// on.
pub(super) const HELD_TWICE: f64 = 0.85;
/// Hold times below this share of the baseline mean the service got faster.
const FASTER: f64 = 0.75;
/// A probe round whose throughput rose to this share of the throughput
/// before it or more, under a cut and with hold times under [`FASTER`] times
/// the baseline, read a service that got faster during the probe, not the knee
/// (see [`Estimator::faster_than_before`]). Below the knee a cut lowers
/// throughput, at or above it throughput stays where it was. A round of
/// short jobs reads both (by Little's law, shorter hold times at the same
/// concurrency are more throughput), so it takes two such rounds in a row.
pub(super) const SPED_UP: f64 = 1.15;
/// A half cut's probe whose round held the throughput cuts the limit in
/// force again by this much (a third), not by half: the cut landed above
/// the knee, mostly not far above it (the limits a probe halves, after a
/// back-off or hold times that inflated, lie within about twice the knee,
/// unless the knee itself fell), or just below it with a round that read
/// "held" by chance (a cut to 7 on a knee of 8 reads 0.875 of the
/// throughput, within one round's spread of [`THROUGHPUT_CLEARLY_HELD`]).
/// Halved again, that round ran deep below the knee: in a traced trial of
/// the lab's capacity drop, 7 to 3 for 1.4 s at three eighths of the
/// throughput. A third lands at 5, which still reads the knee clearly (5
/// of 8 reads 0.625, below [`THROUGHPUT_HELD`]); a knee lower still costs
/// one round more above it, where a round costs latency, not throughput
/// (but see [`HALVES_AT_MOST`]). Probe divisors are a quarter, a half or a
/// refresh's third, so after a half cut or a third the next cut is this
/// third.
const DEEPER_CUT: f64 = 1.5;

/// At this many slots or fewer a deeper cut halves instead (see
/// [`DEEPER_CUT`]): the limit runs whole slots, and a third of 4 runs 3, a
/// cut of a quarter; a third of 3 runs 2 and of 2 runs 1, where halving
/// runs the same. Each slot the descent stops at above the knee costs a
/// round of latency: on one core (a knee of 1) thirds went 7, 4, 3, 2, 1,
/// each round 68-71 permits at 94-98 a second (0.82-0.83 s with the
/// epoch's settling), and the limit reached 1 slot 3.8 s after slow start
/// backed off (its knee was read 0.8 s later), in a traced trial of the
/// lab's CPU-bound step at 2x (`RUST_LOG=shed_core=debug overload
/// cpu-bound --policies shed`, 0b00277 at a minimum of 1). Halving goes
/// 7, 4, 2, 1, a round sooner. A knee of 3 under a cut to 4 that held is
/// then read at 2, a round at two thirds of the throughput where a third
/// would have stopped at the knee.
pub(super) const HALVES_AT_MOST: u32 = 4;

/// A probe whose throughput held with hold times at most this share over
/// the clean baseline stands at the knee: nothing waits inside, and the
/// concurrency it measured is all the service runs at once (at 1.2 times the
/// knee, hold times are 1.2 times the baseline).
const AT_THE_KNEE: f64 = 1.1;

/// A probe's cut that clearly held the throughput while its permits were
/// held for less than this share of the clean baseline doubts the
/// baseline. At the same throughput, by Little's law, the cut's
/// concurrency fell with its hold times: the baseline may have been
/// measured with work queued inside, and the knee read with it lie too
/// high. (A service that got faster finishes more under the cut: see
/// [`Estimator::faster_than_before`].)
///
/// Slow start's exit probe reads such a belief when the plateau it is held
/// against read high and its own round low: on one worker of 10 ms
/// (exponential) in the estimator's model, 85 a second at 8 slots against
/// 115 at 16 and 32 read a knee of 10.8 and a baseline of 93 ms, nine
/// service times. Once believed, it confirmed itself: a refresh's cut a
/// third below the limit, near the slots the baseline was read at, held
/// hold times "flat" against it, and the limit stood above 2 for more than
/// half of the next two minutes at 10 of the model's 123 seeds (13 with
/// 20 ms work). With this doubt (and a refresh's cut a whole slot below a
/// knee of a few slots, see `Estimator::refresh_divisor`), at 1 (5).
///
/// A doubting probe reads no hold time as flat: it cuts on while the
/// throughput holds, and its unfed rounds are measured again, as a
/// descent's are. A knee it then reads well below the one believed (under
/// [`CONSISTENT`]'s lower bound) replaces the knee and the baseline
/// believed; any other is taken in as the probe's cause takes a reading
/// (a round of short holds at a cut just below the knee doubts a sound
/// belief now and then, and costs one cut more).
pub(super) const QUEUE_IN_BASELINE: f64 = 0.85;

/// A probe whose permits were held up to this much longer than those of the
/// rounds it is held against found no slower service, only a knee at or
/// above the limit those rounds had (see [`Estimator::probe_measured`]);
/// longer, the service slowed down. One round's mean hold time varies by a
/// tenth or more.
const NO_SLOWER: f64 = 1.3;

impl Estimator {
    /// A round at a probe's cut ended (`fed`: nearly every released slot
    /// went straight to a waiter; `completed_hold`: the mean hold time of
    /// the permits that finished, if any did): measure again, judge the
    /// cut, or end the probe where it cannot be judged.
    pub(super) fn cut_round(
        &mut self,
        cut: Cut,
        round: &IntervalSamples,
        fed: bool,
        completed_hold: Option<f64>,
    ) -> bool {
        let Cut {
            probe,
            from,
            cut_from,
            first_round,
            starved,
            sped_up,
            hold_above,
        } = cut;
        let clean = clean_hold(round);
        if !fed {
            tracing::debug!(
                limit = self.limit,
                from,
                overloaded = round.overloaded,
                handed_off = round.handed_off,
                released = round.released,
                clean_hold_ms = clean.map(|hold| hold / 1e6),
                "adaptive limit: a probe round was not fed"
            );
            // Unfed for want of callers willing to wait, the round still
            // measured how long the service holds its permits: deeper in
            // a descent, that may say the cut above held on a queue that
            // was not there, and measuring it again would only keep the
            // limit at a few slots for seconds more. (A refresh's probe,
            // doubting or not, learns no baseline on its own: see
            // `believe`.)
            if let (Some(above), Some(hold)) = (hold_above, clean) {
                if round.overloaded && probe.cause == Cause::Evidence && about_as_long(above, hold)
                {
                    return self.no_queue_where_it_held(hold, from);
                }
            }
            // (An unfed round that finished nothing held nothing either.)
            if clean.is_none() || !held_though_unfed(probe, round) {
                return self.not_fed(round, probe, starved, cut_from);
            }
            // Its throughput held all the same: it is measured as a fed
            // round is.
        }
        // The round began once the older permits had drained, and the
        // service was kept full (or its throughput held all the same):
        // every release counts its throughput.
        let Some(hold) = clean else {
            // Every permit of the round was given up on: it tells no
            // knee and no baseline (read as the baseline, the hang-ups'
            // 1 ms took a limit of 8 to its floor: the test
            // a_probe_round_that_finished_nothing_reads_no_knee_and_no_baseline).
            // The probe ends where it stands, not back where it cut
            // from: in a stall, that would undo the cut, and the next
            // rounds, finishing nothing too, back off from here.
            tracing::debug!(
                samples = round.samples,
                censored = round.censored,
                "adaptive limit: a probe round finished nothing"
            );
            return self.abandon_probe(self.limit);
        };
        let measured = Throughput::of(round);
        tracing::debug!(
            samples = round.samples,
            censored = round.censored,
            completed_hold_ms = completed_hold.map(|hold| hold / 1e6),
            clean_hold_ms = hold / 1e6,
            "adaptive limit: a probe round's hold times"
        );
        let faster = self.faster_than_before(probe.before, round);
        if faster {
            tracing::debug!(
                rate = measured.rate(),
                before = probe.before.rate(),
                hold_ms = hold / 1e6,
                in_a_row = sped_up,
                "adaptive limit: a probe round read a faster service"
            );
        }
        if faster && sped_up {
            // Twice in a row: the service got faster during the probe.
            // Back to where the probe cut from, but no higher than the
            // knee's floor: there hold times stand below the baseline
            // and call for a probe of their own (the `Faster` signal),
            // which measures the knee and a new baseline. Higher (the
            // headroom's top, or where an inflated round's probe began),
            // they can lie between the `Faster` and the `Inflated`
            // thresholds, and the delivery rule, held to the old
            // baseline, would raise the limit over the knee (the test
            // a_speed_up_at_a_refresh_probe_from_the_headrooms_top_...).
            // The low headroom alone: with one reading's margin the
            // floor lies near the headroom's top (10 for a knee of 8.3).
            let low = self.settings.headroom.0;
            let back_to = self
                .knee
                .map_or(from, |knee| from.min(floor_above(knee, low)));
            return self.abandon_probe(back_to);
        }
        if let Phase::Probing(in_force) = &mut self.phase {
            in_force.sped_up = faster;
        }
        if faster {
            // Measured again: one such round is as likely a patch of
            // short jobs (on a knee of 8 in the estimator's model, a
            // refresh's round at 8 read 1.19 times the throughput before
            // it with hold times of 0.73 of the baseline, and thrown
            // away it left a knee read at 10.6 uncorrected).
            return false;
        }
        let (measured, hold) = match first_round {
            Some((first, first_hold)) => (first.pooled(measured), (first_hold + hold) / 2.0),
            None => (measured, hold),
        };
        self.probe_measured(probe, measured, hold, first_round.is_some(), fed)
    }

    /// A probe round that was not fed, and read no throughput held (see
    /// [`held_though_unfed`]): measured again once in an overload, or the
    /// probe is abandoned.
    fn not_fed(
        &mut self,
        round: &IntervalSamples,
        probe: Probe,
        starved: bool,
        cut_from: f64,
    ) -> bool {
        if round.overloaded
            && !starved
            && (probe.cause == Cause::Evidence || probe.doubts_the_baseline)
        {
            // The door's refusals, not a lack of callers, emptied its
            // queue: a cut builds a queue at the door, and the controller
            // sheds against it (in the lab's CPU-bound 2x step, 61 of 70
            // slots released at 4 found a waiter). The load is there:
            // measure again, once. Abandoned, that probe went back to 16 on
            // a service of 2 slots, the next one halved where slow start's
            // quarters, and the knee was found seconds later (a p99 of
            // 238 ms, against 70 ms). A refresh's probe is abandoned at
            // once: it goes back to the limit the knee believed set, and a
            // second round a third below it cost a capacity drop 1.0 s at 6
            // of 8 slots.
            if let Phase::Probing(in_force) = &mut self.phase {
                in_force.starved = true;
            }
            return false;
        }
        // The load fell away during the probe: its throughput says
        // nothing about the service. Back to the limit this cut came
        // down from: where the probe began, or, deeper in a descent,
        // the last cut whose round held the throughput before it (it
        // delivers what the service did). Back where the descent
        // began, a probe at 1 on a service of one slot, starved
        // twice, put the limit back at 16 in the estimator's model.
        self.abandon_probe(cut_from)
    }

    /// Halves the limit to measure what the service does with less.
    ///
    /// Each cut halves the limit (quarters it, in some cases, while no
    /// clean baseline was ever measured, see [`Estimator::probe_divisor`]):
    /// if the service merely got slower, throughput falls at once and the
    /// knee is found in one round. If throughput held, work was queueing
    /// inside, and the next cut divides the limit in force again: by half
    /// after a quarter cut (or by a quarter again while the limit descends
    /// from a large initial one), by a third after a half cut (see
    /// [`DEEPER_CUT`]).
    pub(super) fn start_probe(&mut self, before: Throughput, cause: Cause) -> bool {
        if before.rate() <= 0.0 {
            // Rounds that finished nothing (their permits all given up on)
            // back off before they get here; this guards the settings and
            // counts that let one through: every throughput holds against
            // none, and the knee would read 0.
            return false;
        }
        let probe = Probe {
            before,
            ceiling: self.limit,
            cause,
            divisor: self.probe_divisor(),
            doubts_the_baseline: false,
        };
        self.cut_for_probe(probe)
    }

    /// How much a new probe's cuts divide the limit by: a half, or a
    /// quarter while no clean baseline was ever measured and the limit
    /// likely lies at twice the knee or more: when slow start ends (its
    /// throughput stopped doubling with the limit), also when it ended by
    /// backing off after that, read with no lull (in a lab run, not traced,
    /// hang-ups cut 16 to 15 on a CPU-bound service of one slot, and halving
    /// probes took the limit 15, 7, 4, 2, reaching 2 1.5 s into the measured
    /// window: p99 167 ms; whether its throughput had stopped growing was
    /// not seen),
    /// and while the limit descends from a large initial one, which skips
    /// slow start. A back-off out of slow start before its throughput
    /// stopped growing leaves a limit within twice the knee, where a
    /// quarter cut (7 to 2 at a batch spike's start) serves less than the
    /// interactive traffic beside the batch.
    ///
    /// A back-off after a plateau read across a lull halves too: such a
    /// plateau says nothing of how far past the knee the limit stands.
    /// Slow start that sat at 16 under 0.8x load (the limit did not bind)
    /// compares a threefold slowdown's first fed round with its round at 8
    /// from before the slowdown, and reads a plateau whatever the knee; the
    /// quarter cut after the back-off took 13 to 3 slots for a knee of 8
    /// in a full run of the lab's capacity drop (the cut from its server
    /// CSV, the plateau behind it read from this code, not traced), three
    /// eighths of the throughput. Only a plateau read with no lull since
    /// the last doubling (`lull_since_doubling`) says the doubling itself
    /// bought nothing. Slow start's own exit probe still cuts by a quarter
    /// either way: it waits for the load to hold the service full in an
    /// overload, and in 18 traced trials of that capacity drop hang-ups
    /// ended slow start first, every time.
    fn probe_divisor(&self) -> f64 {
        let far_above = self.phase == Phase::SlowStart
            || (self.plateau.is_some_and(|plateau| plateau.in_a_row)
                && self.phase == Phase::Steady)
            || self.settings.initial > SLOW_START_MAX;
        if !self.clean && far_above {
            4.0
        } else {
            2.0
        }
    }

    /// Cuts the limit to a `divisor`-th of itself, and (re)starts probing.
    pub(super) fn cut_for_probe(&mut self, probe: Probe) -> bool {
        // Deeper in a descent, where the probe began stays.
        let from = match self.phase {
            Phase::Probing(Cut { from, .. }) => from,
            _ => self.limit,
        };
        tracing::debug!(
            limit = self.limit,
            divisor = probe.divisor,
            before = probe.before.rate(),
            cause = ?probe.cause,
            "adaptive limit: a probe cuts the limit"
        );
        self.phase = Phase::Probing(Cut {
            probe,
            from,
            cut_from: self.limit,
            first_round: None,
            starved: false,
            sped_up: false,
            hold_above: None,
        });
        self.probes += 1;
        // The next probe to learn needs an overload seen after this one.
        self.overload_seen = false;
        self.overloaded_rounds = 0;
        self.limit = (self.limit / probe.divisor).max(f64::from(self.settings.min));
        self.streak = Streak::default();
        self.rounds_since_probe = 0;
        self.restart_round();
        true
    }

    /// Ends a probe that could not be judged, at the limit it cut from.
    fn abandon_probe(&mut self, from: f64) -> bool {
        if let Phase::Probing(Cut { probe, .. }) = self.phase {
            if probe.doubts_the_baseline {
                // The doubt was not settled: the next refresh comes soon
                // to settle it (after `refresh_rounds`, on one worker, the
                // door's queue runs dry under the next cut too).
                self.refresh_after = FIRST_REFRESH.min(self.settings.refresh_rounds);
            }
        }
        self.phase = Phase::Steady;
        self.limit = from;
        self.restart_round();
        true
    }

    /// A descent's deeper cut went unfed in an overload (the door
    /// refuses callers who will not wait for the work, and at a few slots of
    /// a slow service its queue runs dry now and then), but its permits
    /// were held about as long as at the cut above it, whose round held the
    /// throughput (no more than [`NO_QUEUE_INSIDE`](super::NO_QUEUE_INSIDE) times as long): nothing
    /// queued inside there, and the knee lies no lower. That round "held"
    /// against a throughput that read low: one that straddled a slowdown,
    /// whose callers hung up on work that went on. What the probe did
    /// measure is the service's hold time, `hold`: it becomes the clean
    /// baseline, and the limit goes back to the knee believed, or to where
    /// the probe began when none is (there, held to the new baseline, hold
    /// times tell whether work queues inside, and a probe that cuts by half
    /// follows if it does).
    ///
    /// In the estimator's model's capacity drop, a probe from 16 held at 4
    /// (61.8 permits a second in 64.6 ms, against 78.3 read while the
    /// service slowed, for the 133 it delivers at 8), went unfed at 2, and
    /// was abandoned back to 4 with nothing learnt. There hold times read
    /// inflated against the old baseline (or no clean one was measured yet),
    /// and the next probe cut to 2 again, for the rest of the drop: 0.28 to
    /// 0.40 of the slowed capacity served at 5 of its 48 seeds (0.73 to
    /// 0.82 since; no seed served less).
    fn no_queue_where_it_held(&mut self, hold: f64, from: f64) -> bool {
        let knee = self.knee.or(self.last_knee);
        tracing::debug!(
            hold_ms = hold / 1e6,
            ?knee,
            "adaptive limit: an unfed cut's hold times say nothing queued where the probe held"
        );
        self.believe_baseline(Cause::Evidence, hold);
        self.refresh_after = FIRST_REFRESH.min(self.settings.refresh_rounds);
        // The saturated throughput that goes with the knee and the new
        // baseline. With no knee, the delivery rule's rate, measured at the
        // old speed, would read the concurrency the service runs times the
        // slowdown in the first round at `from` whose hold times did not
        // read inflated: it starts again from the next fed round.
        self.delivery = knee
            .zip(self.baseline)
            .and_then(|(knee, baseline)| littles_rate(knee, baseline));
        let back_to = match knee {
            Some(knee) => {
                self.knee = Some(knee);
                self.last_knee = None;
                self.headroom = self.settings.headroom.0;
                self.knee_floor(knee)
            }
            None => from,
        };
        self.abandon_probe(back_to)
    }

    /// Whether a probe's round finished at least [`SPED_UP`] times the
    /// throughput it is held against, under the cut, and reads faster than
    /// the clean baseline ([`Estimator::reads_faster`], as for the `Faster`
    /// signal): the service got faster during the probe
    /// (the round straddled the change), not a knee below the cut. Read by
    /// Little's law, the speed-up reads as a knee that much lower: in the
    /// lab's capacity drop a refresh's probe cut from 8 to 5 straddled the
    /// restore, finished 1.21 times the throughput before it with hold times
    /// of 0.6 of the baseline, and read the knee 4.12 (believed 5.90); the
    /// faster service's own probe was then held against what that lowered
    /// limit delivered, which bounds the knee, and the limit stood at 6 of
    /// 8 slots for 7 s.
    fn faster_than_before(&self, before: Throughput, round: &IntervalSamples) -> bool {
        Throughput::of(round).rate() >= SPED_UP * before.rate()
            && self
                .baseline
                .filter(|_| self.clean)
                .is_some_and(|baseline| self.reads_faster(round, baseline))
    }

    /// Whether `round` reads a service faster than `baseline`: its clean
    /// hold time under [`FASTER`] times it, in a round where few permits
    /// were given up on. The ones that finished beside many hang-ups are a
    /// selection (a caller with little patience left waits only for a short
    /// one), and a probe held against the little they finished cut the
    /// limit in half (the test
    /// hang_ups_beside_a_few_short_completions_are_no_faster_service).
    pub(super) fn reads_faster(&self, round: &IntervalSamples, baseline: f64) -> bool {
        let few_given_up =
            round.censored as f64 <= self.settings.censored_share * round.samples as f64;
        few_given_up && clean_hold(round).is_some_and(|clean| clean < FASTER * baseline)
    }

    /// A probe round ended (pooled with the one before it at the same cut,
    /// if `measured_twice`): throughput held (cut again, or first measure
    /// again) or fell (the knee). An unfed round (`fed` false) gets here
    /// only if its throughput held (see [`held_though_unfed`]).
    fn probe_measured(
        &mut self,
        probe: Probe,
        measured: Throughput,
        hold: f64,
        measured_twice: bool,
        fed: bool,
    ) -> bool {
        let Probe {
            before,
            ceiling,
            cause,
            ..
        } = probe;
        let at_floor = self.limit() <= self.settings.min;
        let rate = measured.rate();
        let held_share = if measured_twice {
            HELD_TWICE
        } else {
            THROUGHPUT_HELD
        };
        let held = rate >= held_share * before.rate();
        let clearly_held = rate >= THROUGHPUT_CLEARLY_HELD * before.rate();
        tracing::debug!(
            limit = self.limit(),
            before = before.rate(),
            rate,
            hold_ms = hold / 1e6,
            held,
            ?cause,
            "adaptive limit: a probe round ended"
        );
        // Where throughput clearly held, the probe measured the same
        // saturated throughput again: pool it (unless the door's queue ran
        // dry, when it measured less).
        let saturated = if clearly_held && fed {
            before.pooled(measured)
        } else {
            before
        };
        let clean_baseline = self.baseline.filter(|_| self.clean);
        let newly_doubted = !probe.doubts_the_baseline
            && clearly_held
            && clean_baseline.is_some_and(|baseline| hold < QUEUE_IN_BASELINE * baseline);
        let doubts_the_baseline = probe.doubts_the_baseline || newly_doubted;
        if newly_doubted {
            tracing::debug!(
                limit = self.limit(),
                hold_ms = hold / 1e6,
                baseline_ms = clean_baseline.map(|baseline| baseline / 1e6),
                knee = self.knee,
                "adaptive limit: a cut held the throughput in less than the baseline"
            );
        }
        // Hold times no longer than the baseline say nothing queued inside
        // only if the baseline held no queue itself.
        let flat = !doubts_the_baseline
            && clean_baseline.is_some_and(|baseline| hold <= AT_THE_KNEE * baseline);
        let barely_held = held && !clearly_held;
        // Not a quarter cut, which descends from a limit that may lie far
        // above the knee: a probe there stands above it more often than
        // not, and a second round only delays the descent.
        let near_the_knee = probe.divisor <= 2.0;
        if barely_held && near_the_knee && !flat && !at_floor && !measured_twice {
            // Measure again at this limit before cutting deeper (see
            // HELD_TWICE): the permits in flight belong to this epoch, and
            // the next round starts empty, as every round does.
            tracing::debug!("adaptive limit: a probe measures again");
            if let Phase::Probing(in_force) = &mut self.phase {
                in_force.first_round = Some((measured, hold));
            }
            return false;
        }
        if held && !flat && !at_floor {
            // Throughput held, and work queued inside: the knee lies lower.
            // Cut again. After a quarter cut: by a quarter while the limit
            // descends from a large initial one, otherwise by half. Slow
            // start ends within four times the knee (twice, or one blind
            // doubling more), so its first quarter cut lands near the knee,
            // and a second quarter cut lands far below it: at a batch
            // spike's start in the lab, 32 to 8 to 2, where two slots served
            // less than the interactive traffic beside the batch. After a
            // half cut (or a refresh's third): by a third (see DEEPER_CUT),
            // by half at a few slots (see HALVES_AT_MOST).
            // A cut guided by the baseline would go far too low when the
            // baseline is stale because the service slowed down. The cut
            // divides the limit the round measured, the one in force (a
            // probe cut to 6.58 runs 7 slots; a third of 6.58 would land at
            // 4).
            self.limit = f64::from(self.limit());
            let divisor = if probe.divisor > 2.0 {
                probe.divisor.min(self.probe_divisor())
            } else if self.limit() <= HALVES_AT_MOST {
                2.0
            } else {
                DEEPER_CUT
            };
            let new_epoch = self.cut_for_probe(Probe {
                before: saturated,
                divisor,
                doubts_the_baseline,
                ..probe
            });
            if let Phase::Probing(deeper) = &mut self.phase {
                deeper.hold_above = Some(hold);
            }
            return new_epoch;
        }
        // Little's law at the probe, which stood at or below the knee with
        // the service kept full (throughput fell, or held with nothing
        // waiting inside): the concurrency of the knee is the probe's limit
        // scaled by how much more throughput there was before it. (Read as
        // the probe's own concurrency, a probe that held just below the
        // knee, at three quarters of it, read the knee as its own limit.)
        // The probe's limit is the one in force, a whole number: the
        // estimate it was rounded from (3.5 for a cut from 14 by four, in
        // force as 4) would read the knee an eighth low.
        let probed = f64::from(self.limit());
        let reading = probed * before.rate() / rate;
        // The throughput before was measured at the probe's ceiling (the
        // limit it cut from, or a refresh's raised one), so the knee lies
        // no higher. By Little's law the reading is that throughput times
        // the probe's hold time, and the ceiling the same throughput times
        // the hold time at the ceiling: a reading above the ceiling means
        // the probe's permits were held no shorter. Far longer, the service
        // slowed down during the probe (and would read as a huge knee);
        // about as long, both stood below the knee, which lies at the
        // ceiling or above.
        if reading < ceiling || reading > NO_SLOWER * ceiling {
            let reading = reading.min(ceiling);
            // A queue in the baseline reads the knee high: a reading well
            // below the one believed bears the doubt out (one well above
            // it is one more reading, as any).
            let believed = self.knee.or(self.last_knee);
            if doubts_the_baseline && believed.is_some_and(|knee| reading < CONSISTENT.0 * knee) {
                self.forget_a_belief_with_a_queue();
            }
            return self.knee_found(cause, reading, hold, before.rate());
        }
        // The knee lies at the ceiling or above, maybe well above (a
        // refresh raises the limit by a quarter only): that replaces the
        // belief, a new average starting from it (averaged in, a knee read
        // at 6 for 8 was still 7.5 after 20 s of refreshes), and the next
        // refresh comes soon, to look further.
        self.refresh_after = FIRST_REFRESH.min(self.settings.refresh_rounds);
        self.knees.clear();
        self.knee_found(Cause::Evidence, ceiling, hold, before.rate())
    }
}

/// Whether a probe round that was not fed (more than a tenth of its
/// released slots found nobody waiting at the door) read the throughput
/// before it held all the same, clearly ([`THROUGHPUT_CLEARLY_HELD`]). A
/// slot released with nobody waiting stays empty until the next arrival,
/// so such a round reads no more than the cut delivers: one that held says
/// what a fed round would, that work queued inside and the knee lies lower,
/// and the descent goes on. (One that fell says nothing of the knee: it is
/// measured again, or the probe is abandoned.)
fn held_though_unfed(probe: Probe, round: &IntervalSamples) -> bool {
    Throughput::of(round).rate() >= THROUGHPUT_CLEARLY_HELD * probe.before.rate()
}
