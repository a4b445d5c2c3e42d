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
//! its limit that the controller found overloaded: below 1x a burst meets
//! the first gate now and then, and the exit's quarter cut, below the knee,
//! refuses what the service would serve; at or a little above 1x the
//! controller finds the load outpacing the service again and again, and
//! slow start's limit (one doubling past the knee, more for a knee below
//! the initial limit) holds the excess inside it.
//!
//! - Throughput held, hold times flat: the probe stands at the knee, and
//!   `K = X * hold` there.
//! - Throughput held, hold times still inflated: work queued inside; cut
//!   again, by a third after a half cut (a cut just below the knee reads
//!   "held" now and then, and halved again it would run far below it).
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
//!
//! One probe's knee is off by a tenth or more, and now and then by a third
//! (a patch of short jobs reads the knee and the baseline low together), so
//! the belief is the mean of the last five readings less the highest and
//! the lowest, and a reading that disagrees with it calls for another soon.
//! While the belief rests on one reading, the limit keeps a margin above
//! it (see [`ONE_READING_MARGIN`]): one reading is more often low than high,
//! and below the knee a slot costs throughput, above it a little latency.
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
//! for a round, which costs some latency and no throughput, so that the
//! throughput its probe is held against is measured above the knee even
//! when the limit in force lies below it: held against what that limit
//! delivers, a refresh read the knee as the limit itself, and a knee read
//! low stayed low. (A raised round that delivered less than the limit in
//! force measured the same saturated throughput, read low: it is pooled
//! with the rounds at that limit.) Its probe then cuts a third below where
//! the limit stood (the knee is roughly known: a shallow cut reads it as
//! well and costs less), its answer is taken in, and the limit goes back
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
//! measured, except by a new probe; so a noisy baseline cannot walk the
//! limit down.
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

use std::time::Duration;

mod measures;
mod readings;

pub(crate) use measures::IntervalSamples;
use measures::{mean, Pooled, Signal, Streak, Throughput};
use readings::Readings;

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
const ONE_READING_MARGIN: f64 = 0.12;
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
/// How much the headroom moves per round, between its bounds.
const HEADROOM_STEP: f64 = 0.02;
/// Rounds from the first knee found to the first refresh probe.
const FIRST_REFRESH: u32 = 8;
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
const HELD_TWICE: f64 = 0.85;
/// A probe whose throughput held with hold times at most this share over
/// the clean baseline stands at the knee: nothing waits inside, and the
/// concurrency it measured is all the service runs at once (at 1.2 times the
/// knee, hold times are 1.2 times the baseline).
const AT_THE_KNEE: f64 = 1.1;
/// Hold times below this share of the baseline mean the service got faster.
const FASTER: f64 = 0.75;
/// A probe round whose throughput rose to this share of the throughput
/// before it or more, under a cut and with hold times under [`FASTER`] times
/// the baseline, read a service that got faster during the probe, not the knee
/// (see [`Estimator::faster_than_before`]). Below the knee a cut lowers
/// throughput, at or above it throughput stays where it was. A round of
/// short jobs reads both (by Little's law, shorter hold times at the same
/// concurrency are more throughput), so it takes two such rounds in a row.
const SPED_UP: f64 = 1.15;
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
const SETTLED_SHARE: f64 = 0.9;
/// The same in slow start.
const SETTLED_SHARE_SLOW_START: f64 = 0.75;
/// The share of released permits handed straight to a waiter above which a
/// round counts as fed: the service was kept full. At 90% of a service's
/// capacity about 60% are, under overload nearly all.
const FED_SHARE: f64 = 0.9;
/// In slow start, a fed round whose throughput grew by less than this over
/// the last one (at half the limit) has passed the knee.
const SLOW_START_GROWTH: f64 = 1.25;
/// A refresh's probe cuts the limit by this much (a third): the knee is
/// known, so the cut need not go far below it to read it (a probe that
/// holds throughput with flat hold times stands at or below the knee, and
/// reads it as well as one that halves), and a shallower cut costs less
/// throughput per permit measured.
const REFRESH_DIVISOR: f64 = 1.5;
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
/// (on one core, 7, 4, 3, 2 where halving went 7, 4, 2). Probe divisors
/// are a quarter, a half or a refresh's third, so after a half cut or a
/// third the next cut is this third.
const DEEPER_CUT: f64 = 1.5;
/// A probe whose permits were held up to this much longer than those of the
/// rounds it is held against found no slower service, only a knee at or
/// above the limit those rounds had (see [`Estimator::probe_measured`]);
/// longer, the service slowed down. One round's mean hold time varies by a
/// tenth or more.
const NO_SLOWER: f64 = 1.3;
/// A refresh raises the limit (or the knee, if higher) by this much for a
/// round before its probe: a knee read up to a fifth low still lies below
/// the raised limit, so the throughput measured there is the saturated one,
/// and one read lower is raised by this much at least. The round costs some
/// latency (a third more hold time, for a knee read right), not throughput.
const RAISE: f64 = 1.25;
/// A raised round whose throughput grew by at least this share of the
/// raise (in slots) over what the limit in force delivered shows that limit
/// below the knee. A raise from 7 to 9 on a knee of 8 grows throughput by
/// 14%, half the raise. A raised round of 128 permits and the 256 or more
/// it is held against vary by about a tenth together, so a round that
/// reads a tenth more (a third of the raise there) goes on for as long
/// again before it is believed.
const RAISE_GREW: f64 = 0.35;
/// The least limit a raised round looks above for a knee read low (see
/// [`Estimator::can_compare`]).
const MIN_RAISED_FROM: f64 = 3.0;
/// Fewest released permits of the limit in force a raised round is held
/// against: fewer, and the comparison is left to the probe.
const RAISED_AGAINST: u64 = 256;
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
/// `Estimator::decide`).
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
    /// The limit was cut from `from`, for `probe`; `cut_from` is the limit
    /// this cut came down from: `from` for a probe's first cut, the last
    /// cut whose round held the throughput deeper in a descent.
    /// `first_round`: a round at this cut that held only barely, to be
    /// pooled with the next (see [`HELD_TWICE`]): its throughput and clean
    /// hold time. `starved`: a round at this cut was not fed in an
    /// overload, and is being measured again (a descent's only, not a
    /// refresh's). `sped_up`: the last round at this cut read a faster
    /// service, and is being measured again (see [`SPED_UP`]).
    /// `hold_above`: deeper in a descent, the clean hold time of the round
    /// at `cut_from` that held the throughput.
    Probing {
        probe: Probe,
        from: f64,
        cut_from: f64,
        first_round: Option<(Throughput, f64)>,
        starved: bool,
        sped_up: bool,
        hold_above: Option<f64>,
    },
    /// A refresh first raises the limit for a round, so that the
    /// throughput its probe is held against is measured above the knee even
    /// when the limit in force lies below it.
    Raising(Raise),
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
    /// The knee the last probe measured: the limit does not go below it.
    knee: Option<f64>,
    /// The knee before backing off from censored rounds, to return to.
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
    /// Once slow start's throughput stopped growing: its fed rounds since,
    /// pooled (the limit stays where it is until the probe).
    plateau: Option<Throughput>,
    /// Fed steady rounds since the last raised round.
    rounds_since_raise: u32,
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
            plateau: None,
            at_limit: Pooled::default(),
            rounds_since_raise: 0,
            recheck_raise: false,
            settings,
        }
    }

    /// The limit in force: the estimate rounded, within the bounds.
    pub(crate) fn limit(&self) -> u32 {
        to_limit(self.limit, &self.settings)
    }

    /// The limit the service is held to sustain: the one in force, or
    /// during a probe the one it cut from (the cut lasts a round, and the
    /// queue it builds is the probe's doing, not overload).
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
            Phase::Probing { probe, .. } => Some(probe.before.rate()).filter(|rate| *rate > 0.0),
            _ => None,
        }
    }

    /// The estimate behind [`sustained_limit`](Estimator::sustained_limit):
    /// during a probe, the one it cut from.
    fn sustained_estimate(&self) -> f64 {
        match self.phase {
            Phase::Probing { from, .. } => from,
            _ => self.limit,
        }
    }

    /// An operator set the limit: adaptation goes on from there.
    pub(crate) fn set_limit(&mut self, limit: u32) {
        self.limit = f64::from(limit.clamp(self.settings.min, self.settings.max));
        self.knee = None;
        self.knees.clear();
        self.recheck_raise = false;
        if matches!(self.phase, Phase::Probing { .. } | Phase::Raising { .. }) {
            self.phase = Phase::Steady;
        }
        self.restart_round();
    }

    /// Moves the limit's bounds (an operator's hand): a limit outside them
    /// is brought inside at once, and the algorithm goes on within them.
    pub(crate) fn set_bounds(&mut self, min: u32, max: u32) {
        self.settings.min = min;
        self.settings.max = max;
        self.limit = self.limit.clamp(f64::from(min), f64::from(max));
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
                Phase::Probing { .. } | Phase::Raising { .. } => "probing",
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
            let own = interval.samples as f64;
            self.settling = !(interval.released > 0 && own >= share * interval.released as f64);
            if self.settling {
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
        let filled = round.samples >= needed && (round.elapsed as f64) >= 2.0 * mean_hold;
        if !filled {
            if round.elapsed >= self.settings.max_round {
                // Too quiet to judge: decide nothing, keep the limit (and
                // what overload the round saw).
                self.round = IntervalSamples {
                    overloaded: round.overloaded,
                    outrun: round.outrun,
                    ..IntervalSamples::default()
                };
            }
            return false;
        }
        self.round = IntervalSamples::default();
        self.decide(&round)
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
            Phase::Probing { .. } => (16 * limit).clamp(full, 2 * full),
            Phase::Raising(Raise { extended, .. }) => {
                if extended {
                    4 * full
                } else {
                    2 * full
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
        if let Phase::Probing {
            probe,
            from,
            cut_from,
            first_round,
            starved,
            sped_up,
            hold_above,
        } = self.phase
        {
            if !fed {
                tracing::debug!(
                    limit = self.limit,
                    from,
                    overloaded = round.overloaded,
                    handed_off = round.handed_off,
                    released = round.released,
                    clean_hold_ms = clean_hold(round).map(|hold| hold / 1e6),
                    "adaptive limit: a probe round was not fed"
                );
                // Unfed for want of callers willing to wait, the round still
                // measured how long the service holds its permits: deeper in
                // a descent, that may say the cut above held on a queue that
                // was not there, and measuring it again would only keep the
                // limit at a few slots for seconds more. (A refresh's probe
                // learns no baseline on its own: see `believe`.)
                if let (Some(above), Some(hold)) = (hold_above, clean_hold(round)) {
                    if round.overloaded
                        && probe.cause == Cause::Evidence
                        && about_as_long(above, hold)
                    {
                        return self.no_queue_where_it_held(hold, from);
                    }
                }
                if round.overloaded && !starved && probe.cause == Cause::Evidence {
                    // The door's refusals, not a lack of callers, emptied
                    // its queue: a cut builds a queue at the door, and the
                    // controller sheds against it (in the lab's CPU-bound
                    // 2x step, 61 of 70 slots released at 4 found a
                    // waiter). The load is there: measure again, once.
                    // Abandoned, that probe went back to 16 on a service
                    // of 2 slots, the next one halved where slow start's
                    // quarters, and the knee was found seconds later (a
                    // p99 of 238 ms, against 70 ms). A refresh's probe is
                    // abandoned at once: it goes back to the limit the
                    // knee believed set, and a second round a third below
                    // it cost a capacity drop 1.0 s at 6 of 8 slots.
                    if let Phase::Probing { starved, .. } = &mut self.phase {
                        *starved = true;
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
                return self.abandon_probe(cut_from);
            }
            // The round began once the older permits had drained, and the
            // service was kept full: every release counts its throughput.
            let Some(hold) = clean_hold(round) else {
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
            if let Phase::Probing { sped_up, .. } = &mut self.phase {
                *sped_up = faster;
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
            return self.probe_measured(probe, measured, hold, first_round.is_some());
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
        }
        if round.blocked == 0 {
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
                self.plateau = Some(stopped_at);
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
        if let Some(knee) = self.last_knee.filter(|knee| self.limit < *knee) {
            // Clean again after backing off: straight back to the knee.
            self.limit = knee;
            self.knee = Some(knee);
            self.restart_round();
            return true;
        }
        let target = delivery * baseline / 1e9 * (1.0 + self.headroom);
        self.limit = target.max(self.knee.map_or(0.0, |knee| self.knee_floor(knee)));
        false
    }

    /// Whether a probe only for learning (slow start's exit, a refresh's)
    /// is overdue: `refresh_rounds` rounds under load since the last probe
    /// (or since the start: fed ones; in steady state, also unfed ones in
    /// which the level shed), so that it runs even where the load never
    /// clearly outruns the service (see the `outrun` gates in
    /// [`Estimator::decide`]).
    fn probe_overdue(&self) -> bool {
        self.rounds_since_probe >= self.settings.refresh_rounds
    }

    /// Whether a probe only for learning (a refresh's) may run: the load
    /// holds the service full in an overload (`saturated`), and clearly
    /// outruns it (`outrun`: arrivals a quarter over completions on
    /// two-second averages), or the probe is overdue.
    fn learning_probe_may_run(&self, saturated: bool, round: &IntervalSamples) -> bool {
        saturated && (round.outrun || self.probe_overdue())
    }

    /// Whether the probe that ends slow start (or follows it, while no
    /// clean baseline was measured) may run: as a refresh's may
    /// ([`Estimator::learning_probe_may_run`]), or with the service held
    /// full in an overload once the controller found [`OVERLOADED_ROUNDS`]
    /// rounds at this limit overloaded. Below 1x load a burst holds the
    /// service full in an overload now and then, and the exit's quarter
    /// cut, below the knee, refuses what the service would serve; at or a
    /// little above 1x the controller finds the load outpacing the service
    /// again and again.
    fn exit_may_probe(&self, saturated: bool, round: &IntervalSamples) -> bool {
        self.learning_probe_may_run(saturated, round)
            || (saturated && self.overloaded_rounds >= OVERLOADED_ROUNDS)
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
    fn slow_start_plateau(&self, round: &IntervalSamples) -> Option<Throughput> {
        match self.plateau {
            Some(plateau) => Some(plateau.pooled(Throughput::of(round))),
            None if !self.slow_start_grew(round) => Some(Throughput::of(round)),
            None => None,
        }
    }

    /// A slow-start round whose callers hung up on held permits: the
    /// quarter-cut probe that ends slow start, if its throughput stopped
    /// growing and the load is seen to hold (or, in the first round after a
    /// doubling, to outpace) the service; else a back-off.
    fn slow_start_censored(
        &mut self,
        round: &IntervalSamples,
        censored: f64,
        saturated: bool,
        first_since_doubling: bool,
    ) -> bool {
        // A round that finished nothing is no throughput to hold a probe
        // against: the plateau before it is, if there is one.
        let stopped_at = if round.none_completed() {
            self.plateau
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

    /// Slow start: twice the limit, measured once its epoch settles.
    fn double(&mut self) -> bool {
        self.limit *= 2.0;
        self.overloaded_rounds = 0;
        self.just_doubled = true;
        self.restart_round();
        true
    }

    /// Ends a probe that could not be judged, at the limit it cut from.
    fn abandon_probe(&mut self, from: f64) -> bool {
        self.phase = Phase::Steady;
        self.limit = from;
        self.restart_round();
        true
    }

    /// A descent's deeper cut went unfed in an overload (the door
    /// refuses callers who will not wait for the work, and at a few slots of
    /// a slow service its queue runs dry now and then), but its permits
    /// were held about as long as at the cut above it, whose round held the
    /// throughput (no more than [`NO_QUEUE_INSIDE`] times as long): nothing
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
    fn start_probe(&mut self, before: Throughput, cause: Cause) -> bool {
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
        };
        self.cut_for_probe(probe)
    }

    /// A refresh: first raise the limit for a round, so that the throughput
    /// the probe is held against is the service's saturated one. Held
    /// against what the limit in force delivers, as it once was, a refresh
    /// from a limit below the knee read the knee as that limit, and a knee
    /// read low stayed low (7 for 8 at 1x load, a sustained overload).
    fn raise_for_refresh(&mut self, probe_after: bool) -> bool {
        let from = self.limit;
        let raised = from.max(self.knee.unwrap_or(from)) * RAISE;
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
    fn raised(&mut self, raise: Raise, round: &IntervalSamples, fed: bool) -> bool {
        let level_capped = !fed && round.shedding;
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
        let before = Throughput::of(&at_limit.rounds).rate();
        let growth = Throughput::of(round).rate() / before.max(f64::MIN_POSITIVE);
        let compared = self.can_compare(&at_limit);
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
            let hold =
                clean_hold(&at_limit.rounds).expect("can_compare asks for a completed permit");
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
            divisor: REFRESH_DIVISOR,
        };
        self.cut_for_probe(probe)
    }

    /// Whether a raised round can be held against `at_limit` to tell
    /// whether the limit stood below the knee. Only a limit the knee's
    /// floor held up is in question: one the delivery rule set above the
    /// floor explores upwards by itself while hold times stay flat (and
    /// above the knee, a raised round that read more by chance would only
    /// push the limit further up). Against too few permits it tells
    /// nothing, and at the smallest limits the raise costs too much: from
    /// 1 to 2 slots on one core doubles every hold time for the round, to
    /// look for a second slot that the knee's floor would have given if
    /// the knee were read above 1.15.
    fn can_compare(&self, at_limit: &Pooled) -> bool {
        let from = at_limit.mean_limit();
        let at_floor = self.knee.is_some_and(|knee| {
            let floor = to_limit(self.knee_floor(knee), &self.settings);
            from < f64::from(floor) + 0.5
        });
        at_floor
            && from >= MIN_RAISED_FROM
            && at_limit.rounds.released >= RAISED_AGAINST
            && !at_limit.rounds.none_completed()
    }

    /// How much a new probe's cuts divide the limit by: a half, or a
    /// quarter while no clean baseline was ever measured and the limit
    /// likely lies at twice the knee or more: when slow start ends (its
    /// throughput stopped doubling with the limit), also when it ended by
    /// backing off after that (in a lab run, not traced, hang-ups cut 16 to
    /// 15 on a CPU-bound service of one slot, and halving probes took the
    /// limit 15, 7, 4, 2, reaching 2 1.5 s into the measured window: p99
    /// 167 ms; whether its throughput had stopped growing was not seen),
    /// and while the limit descends from a large initial one, which skips
    /// slow start. A back-off out of slow start before its throughput
    /// stopped growing leaves a limit within twice the knee, where a
    /// quarter cut (7 to 2 at a batch spike's start) serves less than the
    /// interactive traffic beside the batch.
    fn probe_divisor(&self) -> f64 {
        let far_above = self.phase == Phase::SlowStart
            || (self.plateau.is_some() && self.phase == Phase::Steady)
            || self.settings.initial > SLOW_START_MAX;
        if !self.clean && far_above {
            4.0
        } else {
            2.0
        }
    }

    /// Cuts the limit to a `divisor`-th of itself, and (re)starts probing.
    fn cut_for_probe(&mut self, probe: Probe) -> bool {
        let from = self.sustained_estimate();
        tracing::debug!(
            limit = self.limit,
            divisor = probe.divisor,
            before = probe.before.rate(),
            cause = ?probe.cause,
            "adaptive limit: a probe cuts the limit"
        );
        self.phase = Phase::Probing {
            probe,
            from,
            cut_from: self.limit,
            first_round: None,
            starved: false,
            sped_up: false,
            hold_above: None,
        };
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
    fn reads_faster(&self, round: &IntervalSamples, baseline: f64) -> bool {
        let few_given_up =
            round.censored as f64 <= self.settings.censored_share * round.samples as f64;
        few_given_up && clean_hold(round).is_some_and(|clean| clean < FASTER * baseline)
    }

    /// A probe round ended (pooled with the one before it at the same cut,
    /// if `measured_twice`): throughput held (cut again, or first measure
    /// again) or fell (the knee).
    fn probe_measured(
        &mut self,
        probe: Probe,
        measured: Throughput,
        hold: f64,
        measured_twice: bool,
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
        // saturated throughput again: pool it.
        let saturated = if clearly_held {
            before.pooled(measured)
        } else {
            before
        };
        let flat = self
            .baseline
            .filter(|_| self.clean)
            .is_some_and(|baseline| hold <= AT_THE_KNEE * baseline);
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
            if let Phase::Probing { first_round, .. } = &mut self.phase {
                *first_round = Some((measured, hold));
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
            // half cut (or a refresh's third): by a third (see DEEPER_CUT).
            // A cut guided by the baseline would go far too low when the
            // baseline is stale because the service slowed down. The cut
            // divides the limit the round measured, the one in force (a
            // probe cut to 6.58 runs 7 slots; a third of 6.58 would land at
            // 4).
            self.limit = f64::from(self.limit());
            let divisor = if probe.divisor > 2.0 {
                probe.divisor.min(self.probe_divisor())
            } else {
                DEEPER_CUT
            };
            let cut = self.cut_for_probe(Probe {
                before: saturated,
                divisor,
                ..probe
            });
            if let Phase::Probing { hold_above, .. } = &mut self.phase {
                *hold_above = Some(hold);
            }
            return cut;
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
            return self.knee_found(cause, reading.min(ceiling), hold, before.rate());
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

    /// A probe measured the knee and the clean baseline: steady from here.
    fn knee_found(&mut self, cause: Cause, knee: f64, hold: f64, before: f64) -> bool {
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
            (Cause::Refresh, Phase::Probing { from, .. }, Some(old)) => {
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
    fn believe(&mut self, cause: Cause, knee: f64, hold: f64) -> f64 {
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
    fn believe_baseline(&mut self, cause: Cause, hold: f64) -> bool {
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

    /// The least limit for a knee believed: [`floor_above`] it with the low
    /// headroom, and [`ONE_READING_MARGIN`] more (within the headroom's
    /// range) while the belief rests on one reading.
    fn knee_floor(&self, knee: f64) -> f64 {
        let (low, high) = self.settings.headroom;
        let margin = if self.knees.len() > 1 {
            0.0
        } else {
            ONE_READING_MARGIN.min(high - low)
        };
        floor_above(knee, low + margin)
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
