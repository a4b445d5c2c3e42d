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
//! and the limit is kept just above it: `L = max(K * (1 + e_lo), D * B * (1 + e))`,
//! where `D` is the smoothed delivery rate while the service is kept full and
//! `e` a headroom between `e_lo` and `e_hi` that grows while hold times stay
//! flat (room to grow) and shrinks while they inflate with throughput at its
//! peak (as brpc's explore ratio does). Below the knee `D * B` is the limit
//! itself, so the second term grows it by `e` per round until hold times
//! inflate; above the knee it is `K`.
//!
//! # Only rounds that kept the service full
//!
//! Throughput says something about the service only while arrivals keep it
//! full: a round counts when the limit bound and nearly every released slot
//! went straight to a waiting request (*fed*). Below that, throughput is the
//! arrival rate, and the limit is left alone (a quiet service keeps its
//! limit; nothing drifts for lack of load). Hold times say nothing either
//! while the limit does not bind: they are those of whatever few requests
//! came, at a quiet hour mostly cheap ones such as health checks, and a
//! baseline taken from them would make the next load look inflated.
//!
//! # Slow start
//!
//! From a small initial limit, the limit doubles each round while the
//! throughput of fed rounds doubles with it, and leaves when it grows by
//! less than a quarter (past the knee, as BBR's startup ends once bandwidth
//! stops growing) or when hold times inflate. At tiny limits, where rounds
//! are too small to compare, it doubles blindly. Once throughput stopped
//! growing, the limit stays where it is until the probe, and the rounds
//! meanwhile are pooled into the throughput the probe is held against
//! (compared again and again with the round before, one would read a
//! quarter more by chance). Its hold times are no clean baseline: a short
//! round leaves out the permits still held when it ends, the longest ones.
//!
//! Throughput is what the service *finished*: permits released, less the
//! censored ones (see below), which come back early, sometimes in waves,
//! while their work goes on.
//!
//! # Probes: the baseline and the knee, measured where they are clean
//!
//! A baseline measured above the knee is inflated, and one measured before
//! the service slowed down is too low; both are the anchors' known failure
//! modes (a drifting or poisoned `rtt_noload`). So the baseline and the knee
//! are only learned by a *probe*: cut the limit (by half; by a quarter when
//! slow start ends or a large initial limit is first probed) and measure the
//! permits admitted after the cut (an epoch, so older work draining does not
//! count). A probe only for learning (leaving slow start, a refresh) waits
//! until rounds in a row that handed nearly every released slot straight to
//! a waiter have lasted half a second, and the controller found the load
//! outpacing the service in one of them: at 90% load a burst fills rounds
//! too (the door's queue of 8 slots at 90% load takes about a second to
//! relax), and a cut then refuses work an unprotected server would serve.
//! A refresh's probe also waits for the load to clearly outrun the service
//! (arrivals a quarter over completions on two-second averages, `outrun`),
//! or for `refresh_rounds` rounds under load since the last probe: at about
//! 1x load its cut builds a queue that a service at its capacity never
//! works off. Slow start's exit waits for the same, or for a few rounds at
//! its limit that the controller found overloaded, or for a round kept
//! nearly full while the level sheds and arrivals clearly outrun the
//! service (the level's refusals thin the door's queue, which then runs
//! dry for a slot now and then, on a small limit often enough that half
//! a second of rounds held full is long in coming): below 1x a burst meets
//! the first gate now and then, and the exit's quarter cut, below the knee,
//! refuses what the service would serve; at or a little above 1x the
//! controller finds the load outpacing the service again and again, and
//! slow start's limit (one doubling past the knee, more for a knee below
//! the initial limit) holds the excess inside it.
//!
//! - Throughput held, hold times flat: the probe stands at the knee, and
//!   `K = X * hold` there. Unless the throughput held clearly and hold
//!   times read well under the baseline: at the same throughput the cut's
//!   concurrency fell with its hold times, so
//!   the baseline was measured with work queued inside (slow start's exit
//!   probe reads one when the rounds it compares are off by chance in
//!   opposite directions). Such a probe doubts the baseline and cuts on
//!   while the throughput holds; a knee it reads well below the one
//!   believed then replaces the knee and the baseline.
//! - Throughput held, hold times still inflated: work queued inside; cut
//!   again, by a third after a half cut (a cut just below the knee reads
//!   "held" now and then, and halved again it would run far below it), by
//!   half at 4 slots or fewer (in whole slots a third of 4 is a quarter).
//!   The throughput measured is the saturated one, pooled with the one
//!   before. Held only barely (a probe at three quarters of the knee
//!   reads the same), where hold times cannot tell (no clean baseline yet,
//!   or the service slowed down): measured again at the same limit first,
//!   and judged on both rounds; a second cut would cost a round deep below
//!   the knee.
//! - Throughput fell: the probe stands below the knee, its hold time is the
//!   clean baseline, and `K = L_probe * X_before / X_probe`, no higher than
//!   the limit `X_before` was measured at (the *ceiling*). The same reading
//!   holds for a probe that held throughput with flat hold times: it stands
//!   at or just below the knee.
//! - By Little's law that reading is `X_before` times the probe's hold time,
//!   and the ceiling `X_before` times the hold time before it: a reading
//!   far above the ceiling means the service slowed down during the probe,
//!   and one just above it means both stood below the knee, which lies at
//!   the ceiling or higher: that replaces the belief, and the next refresh
//!   comes soon to look further.
//! - A deeper cut whose round goes unfed in an overload (at a few slots of
//!   a slow service the door, refusing callers who will not wait for the
//!   work, lets its queue run dry now and then) still measures hold times.
//!   About as long as at the cut above, they say nothing queued inside
//!   there: that cut held the throughput on a queue that was not there,
//!   against one read low (while the service slowed, with callers hanging
//!   up on work that went on). They are the clean baseline, and the limit
//!   goes back to the knee believed (with none, to where the probe began).
//!   Longer, and with the throughput before held clearly all the same, the
//!   round is read as a fed one: a slot released with nobody waiting stays
//!   empty until the next arrival, so an unfed round reads no more than the
//!   cut delivers. Otherwise it is measured again, once, then the probe is
//!   abandoned.
//!
//! One probe's knee is off by a tenth or more, and now and then by a third
//! (a patch of short jobs reads the knee and the baseline low together), so
//! the belief is the mean of the last five readings less the highest and
//! the lowest, and a reading that disagrees with it calls for another soon.
//! While the belief rests on one reading, the limit keeps a margin above
//! it (see [`ONE_READING_MARGIN`](belief::ONE_READING_MARGIN)): one
//! reading is more often low than high, and below the knee a slot costs
//! throughput, above it a little latency.
//! Baseline and knee are judged apart: a service three times slower keeps
//! its knee, and its new baseline, found after evidence of a change,
//! replaces the old readings at once.
//!
//! Probes run when hold times inflate well past the baseline for two rounds
//! (a queue inside, or a service that got slower: the probe tells which),
//! when they fall well below it for two rounds (a faster service), and as a
//! *refresh*: soon after the first knee is found, then at intervals that
//! grow fourfold up to `refresh_rounds`, each refining the knee. A refresh
//! first *raises* the limit by a quarter (or to a quarter over the knee)
//! for a round (by a whole slot at least, every `refresh_rounds` rounds),
//! which costs some latency and no throughput, so that the throughput its
//! probe is held against is measured above the knee even when the limit in
//! force lies below it: held against what that limit delivers, a refresh
//! read the knee as the limit itself, and a knee read low stayed low. (A
//! raised round that delivered less than the limit in force measured the
//! same saturated throughput, read low: it is pooled with the rounds at
//! that limit.) Its probe then cuts a third below where the limit stood
//! (the knee is roughly known: a shallow cut reads it as well and costs
//! less; at a few slots, where a third rounds back to the knee, a whole
//! slot below the knee), its answer is taken in, and the limit goes back
//! where it stood, moved as much as the knee moved. The probe runs only
//! in an overload clearly beyond the service (arrivals a quarter over
//! completions on two-second averages, besides the service held full),
//! or once a refresh is `refresh_rounds` overdue: near 1x load, a cut
//! builds a queue that a service at its capacity never works off, and the
//! door refuses it.
//!
//! The raised round also tells, by itself, whether a limit the knee's
//! floor holds up stands below the knee: if it delivers clearly more than
//! that limit did, the knee and the baseline were read low: what it read
//! joins the readings, and the limit goes to the floor of the knee now
//! believed. That needs no probe, so it runs on the refresh schedule
//! even when the load does not hold the service full (at 1x load, where a
//! knee read a slot low costs an eighth of the throughput), and soon,
//! without a probe after it, after any probe that lowered the knee believed
//! (while the readings are few, one read low moves the belief) and after a
//! raised round that measured only what the admission level let in (see
//! below).
//!
//! Near 1x load a limit below the knee makes its own evidence: the
//! admission level sheds what the limit cannot drain, so the door admits
//! what the limit delivers, and a raised round that drains the door's queue
//! while the level still sheds measures the level, not the load. So while a
//! raised round lasts the raised limit is the one the service is held to
//! sustain (the controller drains the door at its rate), such a round is
//! measured again, once (the level relaxes once the raised limit drains
//! what arrives), and no probe is held against one that measured the level
//! twice.
//!
//! A service that got three times slower but still runs `K` requests at
//! once keeps its limit: the probe finds throughput falling at `K / 2` and
//! the knee where it was. The limit never drops below the knee the probes
//! measured, except by a new probe or a back-off for censored permits; so
//! a noisy baseline cannot walk the limit down.
//!
//! A service that got faster *during* a probe reads by the same law as a
//! knee that much lower: throughput rises under the cut while hold times
//! fall below the baseline. Two such rounds in a row end the probe where it
//! began, no higher than the knee's floor, where the faster hold times call
//! for a probe of their own; one alone is measured again (a patch of short
//! jobs reads both, too).
//!
//! # Censored permits
//!
//! Permits cut at a deadline or abandoned by their caller are lower bounds
//! whose work may go on downstream: a round where more than
//! `censored_share` of them were censored, held on average at least half the
//! baseline, cuts the limit by half that share (as AIMD cuts on drops) and
//! forgets the knee floor until rounds are clean. In slow start, once its
//! throughput stopped growing, the limit has passed the knee, maybe far (the
//! first counted round doubles blindly): such a round ends slow start with
//! its quarter-cut probe instead, once the load holds the service full, or
//! at once if it is the first round after a doubling and the controller
//! found the load outpacing the service in it (the hang-ups are evidence
//! enough that this is no burst). Censored permits held for less were cut short
//! by callers who spent their patience at the door, not by the service, and
//! the door answers for those (it learns how long callers wait); unless the
//! round finished nothing at all, which is congestion whatever the hold
//! times: a service slower than its callers' patience, its baseline measured
//! slow, hangs them all up at a fraction of it (the test
//! after_an_overload_that_pinned_it_to_the_floor_it_recovers_within_20_intervals).
//!
//! Their hold times are never read as the service's speed: a probe's
//! baseline is the time held per permit finished (the hang-ups' time
//! counted, without a completion); a faster service is judged only in rounds
//! where few permits were given up on; and a round that finished nothing
//! measures neither knee nor baseline, nor is a probe held against it.
//!
//! The work of a censored permit may go on after its slot came back, so the
//! round right after a back-off runs beside that orphaned work and finishes
//! less than the service can: it is no probe's reference (the probe that
//! learns the first clean baseline after backing off waits a round more).
//!
//! # Rounds
//!
//! Decisions are taken per *round*: enough released permits to be worth a
//! decision (64, or fewer at small limits), spanning at least two mean hold
//! times. A round that has not filled within `max_round` gives up without a
//! decision, so a quiet service keeps its limit.
//!
//! # Where each part lives
//!
//! This module holds the state, the round's bookkeeping, and in `decide`
//! what every round that is neither probing nor raising goes through:
//! censored permits (a back-off), fed rounds, the inflated and faster
//! signals, slow start's growth test. The rest is each phase's own:
//! `slow_start` (its exit and back-off), `steady` (the delivery rule, the
//! headroom, when a refresh is due), `refresh` (when a probe only to learn
//! may run, and the raised round), `probe` (cuts, and what their rounds
//! read) and `belief` (what a reading does to the knee and the baseline
//! believed). `measures` and `readings` are what they read.

use std::time::Duration;

mod belief;
mod measures;
mod probe;
mod readings;
mod refresh;
mod slow_start;
mod steady;

pub(crate) use measures::IntervalSamples;
use measures::{mean, Pooled, Signal, Streak, Throughput};
use readings::Readings;
use slow_start::Plateau;

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
/// A measured knee at most this far above a whole number is taken as that
/// number when rounded up: one probe reads a knee a tenth off, and a
/// one-core service (a knee of 1, read as 0.9 to 1.1) given a second slot
/// runs both requests at half speed, doubling its latency for nothing.
const KNEE_SLACK: f64 = 0.15;
/// How many times a back-off's cut may double while back-offs come in a
/// row (it is capped at half the limit anyway).
const MAX_BACK_OFF_DOUBLINGS: u32 = 4;
/// Fewest released permits a slow-start round decides on: at tiny limits
/// slow start doubles blindly (see [`RELIABLE_SAMPLES`]).
const SLOW_START_SAMPLES: u64 = 8;
/// Fewest released permits any other round decides on (at small limits,
/// where the full count would take seconds to gather).
const ROUND_SAMPLES_AT_LEAST: u64 = 16;
/// Fewest released permits whose hold times are judged (inflated, faster),
/// or whose throughput slow start compares.
const RELIABLE_SAMPLES: u64 = 32;
/// How much the smoothed delivery rate moves towards each round's rate.
const DELIVERY_WEIGHT: f64 = 0.1;
/// Rounds from the first knee found to the first refresh probe.
const FIRST_REFRESH: u32 = 8;
/// A knee (or baseline) reading within this ratio of the belief agrees with
/// it. A baseline that does not, read after evidence of a change, replaces
/// the readings before it (the service changed); any other reading that
/// does not agree is one of the five the belief is taken from, and calls
/// for a second opinion soon.
const CONSISTENT: (f64, f64) = (0.7, 1.4);
/// A new epoch is settled once its own permits make up this share of all
/// released ones in an interval: the permits admitted under the old limit
/// have drained, and by then the new epoch's early (short) completions are
/// balanced by its long ones.
pub(crate) const SETTLED_SHARE: f64 = 0.9;
/// The same in slow start.
const SETTLED_SHARE_SLOW_START: f64 = 0.75;
/// The share of released permits handed straight to a waiter above which a
/// round counts as fed: the service was kept full. At 90% of a service's
/// capacity about 60% are, under overload nearly all.
const FED_SHARE: f64 = 0.9;
/// Rounds in a row with inflated (or fallen) hold times that call for a
/// probe.
const SIGNAL_ROUNDS: u32 = 2;
/// How long rounds in a row with a standing queue at the door (see
/// [`SATURATED_SHARE`]) must last to show that the load holds the service
/// full, not a burst (nanoseconds): a probe whose only reason is to learn
/// (leaving slow start, or the first clean baseline after backing off out
/// of it, a refresh) waits for it; the first from a large initial limit,
/// which may lie far above the knee, does not. A cut below the knee costs
/// throughput; under sustained overload that is a little goodput, but at
/// 90% load a burst fills a round too, and a probe then refuses work an
/// unprotected server would serve (the bursts of refusals Envoy's users
/// reported of its periodic probes). Half a second of them at 90% load is
/// not rare enough (a burst of 8 slots at 90% load takes about a second to
/// relax), so the rounds must also have seen the controller find the load
/// outpacing the service (overload), which at 90% load it rarely does.
/// Rarely is not never: slow start's exit (and the probe after it while no
/// clean baseline was measured) and a refresh's probe also wait for more
/// (see `Estimator::exit_may_probe` and the `outrun` gate in
/// `Estimator::learning_probe_may_run`).
const SATURATED_FOR: u64 = 500_000_000;
/// Rounds at one limit the controller must find overloaded for slow
/// start's exit probe to run without arrivals clearly outrunning
/// completions (see `Estimator::exit_may_probe`). Below 1x a burst that
/// holds the service full makes the controller find the load outpacing it
/// now and then, for a round or two: in a full run of the lab's steady
/// 0.9x step the exit probe ran on one such burst and cut 16 to 4 for a
/// knee of 8, and the door refused 112 requests in the next second, 1.78%
/// of the trial's attempts (the goal allows 0.5%); in four later trials of
/// that step none was (the door refused nothing, slow start held 16 slots
/// throughout).
/// At or a little above 1x, where slow start's limit delivers no more than
/// the load (less, on a service whose work slows as more of it runs),
/// rounds are found overloaded every second or two; waiting there for
/// arrivals to clearly outrun completions kept the lab's 1x step at 16
/// slots, twice the knee, until 13 to 17 s into the trial in four of five
/// trials (5.0 to 5.5 s without it); the five's mean p50 was 56 ms against
/// 40.
const OVERLOADED_ROUNDS: u32 = 4;
/// The share of released permits handed straight to a waiter in each of
/// those rounds: under overload the door's queue never empties, while a
/// burst at 90% load leaves gaps.
const SATURATED_SHARE: f64 = 0.98;

/// Permits held at a descent's cut no more than this many times as long as
/// at the deeper cut below it (and the other way round) say that nothing
/// queued inside at the cut (see [`Estimator::no_queue_where_it_held`]).
/// Two rounds of some 64 exponential hold times differ by a tenth or more
/// now and then by chance (in the estimator's model's capacity drop, 67.0
/// ms at 4 slots of 8 against 60.2 at 2); work queued inside at twice the
/// knee holds twice as long, and at a third above it, a third longer.
const NO_QUEUE_INSIDE: f64 = 1.25;

/// Where the algorithm stands.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    /// Doubling from a small initial limit while hold times stay flat.
    SlowStart,
    /// Tracking the knee.
    Steady,
    /// A probe's cut is in force (see [`Cut`]).
    Probing(Cut),
    /// A refresh first raises the limit for a round, so that the
    /// throughput its probe is held against is measured above the knee even
    /// when the limit in force lies below it.
    Raising(Raise),
}

/// A probe's cut under way (see [`Phase::Probing`]).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Cut {
    /// What the probe is held against, and why it runs.
    probe: Probe,
    /// The limit the probe first cut from.
    from: f64,
    /// The limit this cut came down from: `from` for a probe's first cut,
    /// the last cut whose round held the throughput deeper in a descent.
    cut_from: f64,
    /// A round at this cut that held only barely, to be pooled with the
    /// next (see [`HELD_TWICE`](probe::HELD_TWICE)): its throughput and
    /// clean hold time.
    first_round: Option<(Throughput, f64)>,
    /// A round at this cut was not fed in an overload, and is being
    /// measured again (a descent's only, or a probe's that doubts the
    /// baseline; not a refresh's).
    starved: bool,
    /// The last round at this cut read a faster service, and is being
    /// measured again (see [`SPED_UP`](probe::SPED_UP)).
    sped_up: bool,
    /// Deeper in a descent, the clean hold time of the round at `cut_from`
    /// that held the throughput.
    hold_above: Option<f64>,
}

/// A refresh's raised round under way (see [`Phase::Raising`]).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Raise {
    /// The limit it rose from, and goes back to.
    from: f64,
    /// What the limit in force delivered before.
    at_limit: Pooled,
    /// Whether the load was seen to hold the service full and clearly
    /// outrun it (or the refresh was long overdue): only then may the
    /// probe follow.
    probe_after: bool,
    /// The round was found to deliver more, and goes on for as long again
    /// to make sure.
    extended: bool,
    /// The round is judged as it is: one that measured only what the
    /// admission level let in was already dropped (see
    /// [`Estimator::raised`]), or this one extends a round that did not.
    remeasured: bool,
}

/// Why a probe runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cause {
    /// Something changed: hold times inflated or fell, or no clean baseline
    /// was measured yet. The probe's answer replaces what was believed.
    Evidence,
    /// The periodic check, with nothing amiss (after a raised round, see
    /// [`Phase::Raising`]): a knee much lower than the one believed is more
    /// likely noise than news, so it is averaged in.
    Refresh,
}

/// What a probe holds its rounds against, and how it cuts.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Probe {
    /// The throughput with the service saturated, pooled over every round
    /// known to be.
    before: Throughput,
    /// The limit `before` was measured at: the knee lies no higher.
    ceiling: f64,
    cause: Cause,
    /// What the next cut divides the limit by.
    divisor: f64,
    /// A cut of this probe held the throughput in hold times well under
    /// the clean baseline: the baseline believed may hold a queue (see
    /// [`QUEUE_IN_BASELINE`](probe::QUEUE_IN_BASELINE)).
    doubts_the_baseline: bool,
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
    pub(crate) back_offs: u64,
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
    /// The knee the last probe measured: the limit does not go below it,
    /// except by a back-off.
    knee: Option<f64>,
    /// The knee before backing off from censored rounds: believed again at
    /// the first clean steady round (the limit goes back to it if below).
    last_knee: Option<f64>,
    headroom: f64,
    round: IntervalSamples,
    /// Whether the current epoch's samples are still skipped (see
    /// [`SETTLED_SHARE`]).
    settling: bool,
    streak: Streak,
    rounds_since_probe: u32,
    /// How long the rounds in a row that handed at least
    /// [`SATURATED_SHARE`] of their releases to waiters lasted, nanoseconds.
    full_for: u64,
    /// Rounds the controller found overloaded since slow start last doubled
    /// the limit or a probe last cut it.
    overloaded_rounds: u32,
    /// Whether one of those rounds, since the last probe began, was
    /// overloaded.
    overload_seen: bool,
    /// Rounds between refresh probes: growing fourfold up to
    /// `refresh_rounds`.
    refresh_after: u32,
    /// The last probes' knees: the belief is their trimmed mean.
    knees: Readings,
    /// The last clean baselines the probes measured: the belief is their
    /// trimmed mean.
    baselines: Readings,
    probes: u64,
    back_offs: u64,
    /// Back-offs in a row: no round between them got as far as judging its
    /// permits clean (rounds in which the limit did not bind, and a
    /// probe's, are passed over). Each cuts twice as deep as the one before.
    back_offs_in_a_row: u32,
    /// Completed hold time and count over the slow-start rounds.
    slow_start_pool: (u64, u64),
    /// The rate of permits finished (not censored) in the last slow-start
    /// round that doubled the limit.
    slow_start_rate: Option<f64>,
    /// Slow start doubled the limit, and no round at it has been judged yet.
    just_doubled: bool,
    /// Since slow start last doubled the limit, the load let up: a round
    /// in which the limit did not bind, one given up unfilled, or an
    /// interval that released nothing. Its growth test then compares a
    /// round with the last one before the lull (see
    /// [`Estimator::probe_divisor`]).
    lull_since_doubling: bool,
    /// Once slow start's throughput stopped growing: its fed rounds since,
    /// pooled (the limit stays where it is until the probe).
    plateau: Option<Plateau>,
    /// Fed steady rounds since the last raised round.
    rounds_since_raise: u32,
    /// Steady rounds the limit bound since the last raised round that
    /// looked a whole slot above the limit in force (see
    /// [`Estimator::raise_for_refresh`]).
    rounds_since_a_slot_more: u32,
    /// A probe lowered the knee believed, or a raised round measured only
    /// what the admission level let in: a raised round, with no probe
    /// after it, looks soon whether the limit stands below the knee.
    recheck_raise: bool,
    /// The fed steady rounds since the limit last changed by a decision
    /// (not by the headroom's steps of a slot), pooled: a refresh's raised
    /// round is held against what they delivered.
    at_limit: Pooled,
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
            streak: Streak::default(),
            rounds_since_probe: 0,
            full_for: 0,
            overloaded_rounds: 0,
            overload_seen: false,
            refresh_after: FIRST_REFRESH.min(settings.refresh_rounds),
            knees: Readings::default(),
            baselines: Readings::default(),
            probes: 0,
            back_offs: 0,
            back_offs_in_a_row: 0,
            slow_start_pool: (0, 0),
            slow_start_rate: None,
            just_doubled: false,
            lull_since_doubling: false,
            plateau: None,
            at_limit: Pooled::default(),
            rounds_since_raise: 0,
            rounds_since_a_slot_more: 0,
            recheck_raise: false,
            settings,
        }
    }

    /// The limit in force: the estimate rounded, within the bounds.
    pub(crate) fn limit(&self) -> u32 {
        to_limit(self.limit, &self.settings)
    }

    /// The limit the service is held to sustain: the one in force, or
    /// during a probe the one its cut came down from (the cut lasts a
    /// round, and the queue it builds is the probe's doing, not overload):
    /// where the probe began, or deeper in a descent the last cut whose
    /// round held the throughput, which delivers what the service did.
    /// The door's overload queue counts its slots. Held to where the
    /// descent began, a one-core service's last round, at 1 slot, let 7
    /// requests wait, 7 slot times of 10 ms (the descent began at 7): in
    /// the full lab run of 2867901 the half-second samples read 6 waiters
    /// at the measured window's start at 2x (8-9 at 4x), and the 2x p99
    /// 41.1 ms against 32 ms for the limit pinned at 1. In three alternated
    /// pairs of `overload cpu-bound --policies shed` after the change, the
    /// samples of that round read 0-3 waiters against 0-10.
    ///
    /// A refresh's raised limit is in force and sustained for its round:
    /// the controller drains the door at its rate. Held at the limit it
    /// rose from, the controller went on shedding what that limit could not
    /// drain, and the raised round measured what the level let in (at 1x in
    /// the lab the level rose from 18 to 610 during a raise from 7 to 9).
    pub(crate) fn sustained_limit(&self) -> u32 {
        to_limit(self.sustained_estimate(), &self.settings)
    }

    /// During a probe, the throughput (permits finished per second) its
    /// rounds are held against, measured before its cut while the load held
    /// the service full: what the service is held to sustain while the cut
    /// lasts. The limit it cut from over the cut's hold times reads more
    /// from a service whose work takes longer the more of it runs (see
    /// `Controller::sustained_drain`).
    pub(crate) fn sustained_rate(&self) -> Option<f64> {
        match self.phase {
            // A throughput is over at least a nanosecond, so finite.
            Phase::Probing(Cut { probe, .. }) => {
                Some(probe.before.rate()).filter(|rate| *rate > 0.0)
            }
            _ => None,
        }
    }

    /// The estimate behind [`sustained_limit`](Estimator::sustained_limit):
    /// during a probe, the one its cut came down from.
    fn sustained_estimate(&self) -> f64 {
        match self.phase {
            Phase::Probing(Cut { cut_from, .. }) => cut_from,
            _ => self.limit,
        }
    }

    /// An operator set the limit: adaptation goes on from there.
    ///
    /// Slow start ends there too: its growth test holds each round against
    /// one at half the limit, and an operator's limit is no doubling of the
    /// last (held against a round at 8, one at 24 read as growth and was
    /// doubled to 48). Nor does a plateau read before say anything of it,
    /// nor a knee believed before, even one a back-off set aside.
    pub(crate) fn set_limit(&mut self, limit: u32) {
        self.limit = f64::from(limit);
        self.keep_within_bounds();
        self.knee = None;
        self.last_knee = None;
        self.knees.clear();
        self.recheck_raise = false;
        self.plateau = None;
        self.phase = Phase::Steady;
        self.restart_round();
    }

    /// Moves the limit's bounds (an operator's hand): a limit outside them
    /// is brought inside at once, and the algorithm goes on within them.
    pub(crate) fn set_bounds(&mut self, min: u32, max: u32) {
        self.settings.min = min;
        self.settings.max = max;
        self.keep_within_bounds();
    }

    /// Brings the limit within its bounds. Every rule that moves it ends
    /// here (see [`Estimator::on_interval`]), so that none needs its own
    /// clamp: the delivery rule's target, for one, is 0 slots on a baseline
    /// of nothing (work that holds a slot for no measurable time), and a
    /// refresh raised from a limit of 0 read its knee as 0 (the test
    /// work_that_holds_its_slot_for_no_measurable_time_keeps_the_limit_within_its_bounds).
    fn keep_within_bounds(&mut self) {
        let (min, max) = (f64::from(self.settings.min), f64::from(self.settings.max));
        self.limit = self.limit.clamp(min, max);
    }

    /// The lowest and highest the limit may be.
    pub(crate) fn bounds(&self) -> (u32, u32) {
        (self.settings.min, self.settings.max)
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
                Phase::Probing(_) | Phase::Raising(_) => "probing",
            },
            probes: self.probes,
            back_offs: self.back_offs,
        }
    }

    /// Takes one interval's samples. Returns whether permits admitted from
    /// now on start a new epoch (the old epoch's samples no longer describe
    /// the limit in force); the limit to apply is [`limit`](Estimator::limit).
    pub(crate) fn on_interval(&mut self, interval: IntervalSamples) -> bool {
        if self.settling {
            // Skip until the old limit's permits have drained.
            // Slow start only asks whether hold times inflated: a rougher
            // settling will do there.
            let share = match self.phase {
                Phase::SlowStart => SETTLED_SHARE_SLOW_START,
                _ => SETTLED_SHARE,
            };
            self.settling = !interval.settled(share);
            if self.settling {
                if interval.released == 0 {
                    self.note_a_lull();
                }
                // Its samples are left out, not its overload: settling
                // follows every cut, which is when an overload shows.
                self.round.overloaded |= interval.overloaded;
                self.round.outrun |= interval.outrun;
                return false;
            }
        }
        self.round.add(&interval);
        let round = self.round;
        let needed = self.samples_needed();
        let mean_hold = mean(round.hold, round.samples);
        let filled = (round.samples >= needed && (round.elapsed as f64) >= 2.0 * mean_hold)
            || self.raise_bought_nothing(&round);
        if !filled {
            if round.elapsed >= self.settings.max_round {
                // Too quiet to judge: decide nothing, keep the limit (and
                // what overload the round saw).
                self.note_a_lull();
                self.round = IntervalSamples {
                    overloaded: round.overloaded,
                    outrun: round.outrun,
                    ..IntervalSamples::default()
                };
            }
            return false;
        }
        self.round = IntervalSamples::default();
        let new_epoch = self.decide(&round);
        self.keep_within_bounds();
        new_epoch
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
            // while: twice the full count, fewer only at tiny limits. A
            // refresh's raised round costs no throughput: twice the count,
            // and twice that once it reads more than the limit in force.
            // Raised to 2 or 3 slots, a full count and half again: from 1
            // slot to 2 on one core every hold time doubles for the round
            // (1.3 s of twice the latency in the lab's CPU-bound step, at
            // 128 permits), and a raise of a whole slot, half again as many
            // or more, shows in fewer permits (see RAISE_GREW).
            Phase::Probing(_) => (16 * limit).clamp(full, 2 * full),
            Phase::Raising(Raise { extended, .. }) => {
                let first = (full * limit / 2).clamp(full, 2 * full);
                if extended {
                    2 * first
                } else {
                    first
                }
            }
        }
    }

    /// One round's decision; returns whether a new epoch begins.
    fn decide(&mut self, round: &IntervalSamples) -> bool {
        // What the service finished: censored permits come back early, some
        // in waves (callers who spent their patience at the door hang up
        // just after their requests start), while their work goes on. Read
        // as throughput they inflated slow start's growth (541/s at 16 on a
        // service of 394/s) and the throughput a probe is held against (229
        // permits a second at the start of a spike, on a service of 198:
        // a knee of 10 for 8).
        let finished_rate = Throughput::of(round).rate();
        let hold = mean(round.hold, round.samples);
        // Hold times of permits that finished. A round in which none did
        // measured no service time: its hang-ups are lower bounds, never
        // fast successes (see `clean_hold`).
        let completed_hold =
            (!round.none_completed()).then(|| mean(round.completed_hold, round.completed));
        let censored = round.censored as f64 / round.samples as f64;

        let fed = round.handed_off as f64 >= FED_SHARE * round.released as f64;
        let first_since_doubling = std::mem::take(&mut self.just_doubled);
        if let Phase::Raising(raise) = self.phase {
            return self.raised(raise, round, fed);
        }
        if let Phase::Probing(cut) = self.phase {
            return self.cut_round(cut, round, fed, completed_hold);
        }

        let full = round.handed_off as f64 >= SATURATED_SHARE * round.released as f64;
        if round.blocked == 0 || !full {
            self.full_for = 0;
            self.overload_seen = false;
        } else {
            self.full_for = self.full_for.saturating_add(round.elapsed);
            self.overload_seen |= round.overloaded;
        }
        let saturated = self.full_for >= SATURATED_FOR && self.overload_seen;
        if round.overloaded {
            self.overloaded_rounds = self.overloaded_rounds.saturating_add(1);
        }
        if self.phase == Phase::Steady {
            // Whether steady rounds are fed, and why not: only fed rounds
            // move the delivery rule and count towards a refresh.
            tracing::debug!(
                limit = self.limit,
                rate = finished_rate,
                released = round.released,
                handed_off = round.handed_off,
                blocked = round.blocked,
                shedding = round.shedding,
                overloaded = round.overloaded,
                fed,
                "adaptive limit: a steady round ended"
            );
            if round.blocked > 0 {
                // The limit bound: the load asked for more than it let in
                // (fed or not, see `raise_for_refresh`).
                self.rounds_since_a_slot_more = self.rounds_since_a_slot_more.saturating_add(1);
            }
        }
        if round.blocked == 0 {
            self.note_a_lull();
            // The limit did not bind: nothing to learn about the knee, nor
            // about the service's speed (the module doc's "Only rounds that
            // kept the service full": Netflix #165's poisoned baseline). A
            // service that really got faster shows it once the limit binds
            // (the `Faster` signal, then a probe). Measured by the test
            // a_minute_of_health_checks_leaves_the_baseline_and_the_next_0_9x_load_unprobed.
            return false;
        }
        let baseline = match (self.baseline, completed_hold) {
            (Some(baseline), _) => baseline,
            (None, Some(completed_hold)) => *self.baseline.insert(completed_hold),
            // Nothing finished: no baseline to take. Such a round backs off
            // (below) whatever it is compared with.
            (None, None) => hold,
        };
        // Small rounds (slow start at a tiny limit) are too noisy to judge
        // hold times by: a mean of 8 exponential samples is off by a third.
        // So is a slow-start baseline pooled from fewer.
        let reliable = round.samples >= RELIABLE_SAMPLES
            && (self.phase != Phase::SlowStart || self.slow_start_pool.1 >= RELIABLE_SAMPLES);
        let faster = reliable && self.reads_faster(round, baseline);
        // Censored permits held on average for less than half the baseline
        // were cut short by their callers' clocks, not by the service: their
        // callers spent their patience waiting at the door (as when a spike
        // begins before the door has learnt how long callers wait). They are
        // no sign that the service runs more than it should; long-held ones
        // are, and so is a round that finished nothing at all, whatever its
        // hold times (see the module doc's "Censored permits").
        let censored_hold = mean(
            round.hold.saturating_sub(round.completed_hold),
            round.censored,
        );
        let congestion = censored_hold >= baseline / 2.0 || round.none_completed();
        if censored > self.settings.censored_share && congestion {
            if self.phase == Phase::SlowStart {
                return self.slow_start_censored(round, censored, saturated, first_since_doubling);
            }
            return self.back_off(censored);
        }
        // Whether this is the first clean round after a back-off (see the
        // probe that learns the first clean baseline, below).
        let after_back_off = std::mem::take(&mut self.back_offs_in_a_row) > 0;
        if !fed {
            // The limit bound at times, but arrivals did not keep the
            // service full: throughput is the arrival rate, and says nothing
            // of the knee. Nothing is learnt or changed, not even in slow
            // start: a limit raised where nobody can tell the knee from the
            // arrival rate only moves the queue inside the service once the
            // load grows. (Bursts wait at the door meanwhile.)
            //
            // Unless the admission level shed meanwhile: then the load did
            // outrun the limit, and the door's queue ran dry because the
            // level refuses what the limit cannot drain. Its throughput
            // measured what the level let in, so it is not pooled, but it is
            // a round at this limit under load, and counts towards the next
            // refresh. Near 1x, where a limit a slot below the knee has the
            // level shed in every round and empty the queue in half of
            // them, counting only fed rounds delayed the raised round that
            // finds such a limit by 4.5 s (a knee read 6.3 for 8 in the lab,
            // 80% of the offered load served meanwhile).
            if round.shedding && self.phase == Phase::Steady {
                self.rounds_since_probe = self.rounds_since_probe.saturating_add(1);
                self.rounds_since_raise = self.rounds_since_raise.saturating_add(1);
            }
            return false;
        }
        let delivery = match self.delivery {
            Some(d) => d + DELIVERY_WEIGHT * (finished_rate - d),
            None => finished_rate,
        };
        self.delivery = Some(delivery);
        self.rounds_since_probe = self.rounds_since_probe.saturating_add(1);

        if self.phase == Phase::SlowStart {
            // Below the knee, twice the limit kept full is twice the
            // throughput; past it, throughput stays flat. This holds however
            // inflated the first rounds' hold times were (a service whose
            // knee lies below the initial limit), as BBR's startup ends
            // once bandwidth stops growing.
            // It compares what the service finished, not what came back: a
            // wave of callers hanging up (the first overload's, before the
            // door has learnt how long they wait) gives back permits faster
            // than any service finishes them, and read as growth it doubled
            // slow start past the knee (541/s at 16 on a service of 394/s).
            // Once throughput stopped growing at this limit, a later round
            // that reads more is noise (rounds of 64 permits vary by a
            // tenth; compared again and again with the round at 8, one
            // reads a quarter more sooner or later, and doubled the limit
            // past the knee at 1x load). Such rounds are pooled instead:
            // the probe is held against all of them.
            let stopped_at = self.slow_start_plateau(round);
            // Every round, the plateau's too: the probe is held against
            // their pooled rate, which counts only finished permits (the
            // ones callers hung up on are what `released_censored` says).
            tracing::debug!(
                limit = self.limit,
                rate = finished_rate,
                last = ?self.slow_start_rate,
                grew = stopped_at.is_none(),
                on_plateau = self.plateau.is_some(),
                lull = self.lull_since_doubling,
                released = round.released,
                released_censored = round.released_censored,
                handed_off = round.handed_off,
                blocked = round.blocked,
                full_for_ms = self.full_for / 1_000_000,
                overload_seen = self.overload_seen,
                "adaptive limit: a slow-start round ended"
            );
            if let Some(stopped_at) = stopped_at {
                // Past the knee: the probe that measures it waits for the
                // exit's evidence (see `exit_may_probe`).
                self.plateau = Some(self.plateau_at(stopped_at));
                if !self.exit_may_probe(saturated, round) {
                    return false;
                }
                return self.start_probe(stopped_at, Cause::Evidence);
            }
            self.slow_start_rate = (round.released >= RELIABLE_SAMPLES).then_some(finished_rate);
        }
        if !self.clean && self.phase != Phase::SlowStart {
            // A large initial limit may lie far above the knee: its probe
            // goes at once. A limit that left slow start by backing off, or
            // whose exit probe was abandoned, waits for the evidence slow
            // start's own exit does: a spike's first second (or a
            // slowdown's) is no time to cut it by a quarter, nor is a burst
            // below 1x load.
            //
            // Nor is the first round after a back-off what the probe is held
            // against: work whose callers hung up goes on in the service
            // without a permit and takes worker time in it, so it finished
            // less than the service can. In the lab's capacity drop, 16 backed
            // off to 13 and the round at 13 finished 114.9/s of a slowed
            // service's 136; the cut to 7 read 111.2/s against it, "clearly
            // held", and a second cut to 3 read the knee 6.47 for 8, the
            // limit a slot short for 5 s.
            let from_slow_start = self.settings.initial <= SLOW_START_MAX;
            if (from_slow_start && !self.exit_may_probe(saturated, round)) || after_back_off {
                return false;
            }
            return self.start_probe(Throughput::of(round), Cause::Evidence);
        }
        // One round may mislead (the first after a new limit reads short,
        // since its longest permits are still held when it ends); two in a
        // row do not. Slow start doubles: an inflated round there is no
        // noise. The probe is held against the streak's throughput (a round
        // that straddles a slowdown reads high; the knee found is bounded
        // by the limit the probe cuts from).
        let signal = if faster && self.phase == Phase::Steady {
            Some(Signal::Faster)
        } else if reliable && hold > self.settings.inflation * baseline {
            Some(Signal::Inflated)
        } else {
            None
        };
        if let Some(signal) = signal {
            let rounds = self.streak.extend(signal, round);
            if rounds >= SIGNAL_ROUNDS || self.phase == Phase::SlowStart {
                return self.start_probe(self.streak.throughput, Cause::Evidence);
            }
            return false;
        }
        self.streak = Streak::default();
        if self.phase == Phase::SlowStart {
            // Every slow-start round is below the knee so far: pool them
            // all. The pool tells a flat round from an inflated one, but it
            // is no clean baseline: a short round's epoch leaves out the
            // permits still held when it ends, the longest ones, so it reads
            // low (by a quarter for exponential hold times). The probe that
            // ends slow start measures the clean one.
            self.slow_start_pool.0 = self.slow_start_pool.0.saturating_add(round.completed_hold);
            self.slow_start_pool.1 = self.slow_start_pool.1.saturating_add(round.completed);
            self.baseline = Some(mean(self.slow_start_pool.0, self.slow_start_pool.1))
                .filter(|b| *b > 0.0)
                .or(self.baseline);
            return self.double();
        }
        self.steady_round(round, finished_rate, hold, baseline, delivery, saturated)
    }

    /// Callers abandon permits (or deadlines cut them): their hold times
    /// are lower bounds and their work may go on downstream, so they are
    /// a congestion signal, never fast successes. Cut the limit by half the
    /// censored share, as AIMD cuts on drops (twice as deep for each
    /// back-off in a row), and forget the knee floor (remembering it for
    /// when rounds are clean again).
    fn back_off(&mut self, censored: f64) -> bool {
        tracing::debug!(
            limit = self.limit,
            censored,
            "adaptive limit: censored permits, backing off"
        );
        if let Some(knee) = self.knee.take() {
            self.last_knee = Some(knee);
        }
        if self.phase == Phase::SlowStart {
            self.phase = Phase::Steady;
        }
        self.headroom = self.settings.headroom.0;
        self.streak = Streak::default();
        self.back_offs += 1;
        // Censoring that outlasts a cut says the limit lies further above
        // the knee than the cut went: from 16 on a service of one slot
        // (hold times of 160 ms where callers give up at 250), cuts of half
        // the censored share took 8 s to reach 12. Each back-off in a row
        // cuts twice as deep, to half the limit at most.
        let depth = f64::from(1u32 << self.back_offs_in_a_row.min(MAX_BACK_OFF_DOUBLINGS));
        self.back_offs_in_a_row = self.back_offs_in_a_row.saturating_add(1);
        let cut = (depth * censored / 2.0).min(0.5);
        self.limit = (self.limit * (1.0 - cut)).max(f64::from(self.settings.min));
        self.restart_round();
        true
    }

    /// Starts a new round for a new limit, once its epoch has settled.
    fn restart_round(&mut self) {
        self.round = IntervalSamples::default();
        self.at_limit = Pooled::default();
        self.settling = true;
    }
}

/// The least limit for a measured knee: the knee and the low headroom, and
/// never below the knee rounded up, less [`KNEE_SLACK`]. A small knee
/// rounded to the nearest can fall below it: a knee of 1.2 (one core with a
/// little I/O) kept at a limit of 1 leaves a sixth of the throughput unused,
/// where a limit of 2 costs a little latency.
fn floor_above(knee: f64, headroom: f64) -> f64 {
    (knee * (1.0 + headroom)).max((knee - KNEE_SLACK).ceil())
}

/// Little's law: the permits a second that `concurrency` permits held
/// `hold` nanoseconds each deliver (none for a zero hold time).
fn littles_rate(concurrency: f64, hold: f64) -> Option<f64> {
    (hold > 0.0).then(|| concurrency * 1e9 / hold)
}

/// Whether hold times `a` and `b` differ by no more than [`NO_QUEUE_INSIDE`]
/// times, either way.
fn about_as_long(a: f64, b: f64) -> bool {
    a <= NO_QUEUE_INSIDE * b && b <= NO_QUEUE_INSIDE * a
}

/// Whether a `new` knee (or baseline) reading agrees with the `old` belief
/// (see [`CONSISTENT`]).
fn consistent(old: f64, new: f64) -> bool {
    (CONSISTENT.0..CONSISTENT.1).contains(&(new / old))
}

/// The mean hold time of a round whose permits stood below the knee (a
/// probe's), read as a baseline: the time all its permits were held over
/// the number that finished. Censored permits are the ones their callers
/// gave up on, more often the long ones (a request admitted after a long
/// wait at the door has little patience left for a long service time):
/// left out, as the mean of completed ones leaves them, they read the
/// baseline low: a probe at 2 slots in a 4x overload read 14.9 ms for a
/// service of about 20 from its 67 completed permits, and 18.0 ms counting
/// the 4 its callers gave up on. Counted as time held without a
/// completion, they give the exponential's estimate under censoring.
/// With none completed it is unknown (`None`): nothing finished, and the
/// censored ones' hold times are lower bounds, never fast successes.
fn clean_hold(round: &IntervalSamples) -> Option<f64> {
    (!round.none_completed()).then(|| mean(round.hold, round.completed))
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
