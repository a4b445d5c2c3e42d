//! The controller: queue sojourn time in, admission level out. Overloaded
//! intervals raise the level by a small share of the work; healthy ones give
//! it back in growing steps; whoever crosses the interval boundary updates it.

mod common;

use std::collections::VecDeque;
use std::time::Duration;

use common::{build, ms, queued, ready};
use shed_core::{
    Admission, Arrival, Class, Cohort, Level, ManualClock, Permit, Rank, RejectReason, Shedder,
    ShedderBuilder, Waiter,
};

const BATCH: Rank = Rank::original(Class::Batch);

fn batch() -> Arrival {
    // The last cohort: the small share shed from batch never reaches it.
    Arrival::new(Class::Batch).with_cohort(Cohort::MAX)
}

/// One slot, twenty batch requests queued at 0 ms behind a critical one being
/// served, each served for 10 ms: every batch request that gets a slot has
/// waited at least 10 ms, twice the default target (and twice the natural
/// wait of half a slot time). No batch request ever finds a free slot, so
/// batch has a standing queue from the start.
struct StandingQueue {
    shedder: Shedder,
    clock: ManualClock,
    held: Option<Permit>,
    waiting: VecDeque<Waiter>,
}

impl StandingQueue {
    fn new(builder: ShedderBuilder) -> StandingQueue {
        let (shedder, clock) = build(builder.limit(1).queue_capacity(64));
        let held = Some(shedder.try_admit(&Arrival::new(Class::Critical)).unwrap());
        let waiting = (0..20).map(|_| queued(shedder.admit(&batch()))).collect();
        StandingQueue {
            shedder,
            clock,
            held,
            waiting,
        }
    }

    /// After 10 ms the request being served finishes and the next one starts.
    fn serve_one(&mut self) {
        self.clock.advance(ms(10));
        drop(self.held.take());
        let mut next = self.waiting.pop_front().expect("a waiter");
        self.held = Some(ready(&mut next).unwrap());
    }

    /// Serves for one whole 100 ms interval; the last completion closes it.
    fn serve_one_interval(&mut self) {
        for _ in 0..10 {
            self.serve_one();
        }
    }

    /// Everyone leaves: waiters cancel, the request being served finishes.
    fn clear(&mut self) {
        self.waiting.clear();
        drop(self.held.take());
    }

    /// Some request or completion happens now.
    fn any_event(&self) {
        drop(self.shedder.try_admit(&Arrival::new(Class::Critical)));
    }
}

#[test]
fn a_standing_queue_raises_the_level_into_the_overloaded_rank_by_a_small_share() {
    let mut queue = StandingQueue::new(Shedder::builder());
    assert_eq!(queue.shedder.level(), Level::NONE);
    queue.serve_one_interval();
    let (rank, cohorts) = queue.shedder.level().boundary();
    assert_eq!(rank, BATCH, "only batch came in, so only batch is cut into");
    assert!(
        cohorts > 0 && cohorts <= 16,
        "{cohorts} of 128 batch cohorts shed at once"
    );
}

#[test]
fn a_target_raised_on_a_running_engine_tolerates_the_queue_it_names() {
    let mut queue = StandingQueue::new(Shedder::builder());
    queue.shedder.set_target_sojourn(ms(50)).unwrap();
    queue.serve_one_interval(); // every wait 10 ms or more, none above 50 ms
    assert_eq!(queue.shedder.level(), Level::NONE);
}

#[test]
fn short_waits_below_the_target_do_not_raise_the_level() {
    let (shedder, clock) = build(Shedder::builder().limit(1));
    let mut held = shedder.try_admit(&batch()).unwrap();
    for _ in 0..100 {
        // Always somebody waiting, but never for more than 4 ms.
        let mut next = queued(shedder.admit(&batch()));
        clock.advance(ms(4));
        drop(held);
        held = ready(&mut next).unwrap();
    }
    assert_eq!(shedder.level(), Level::NONE);
    assert_eq!(shedder.stats().recent_sojourn, Some(ms(4)));
}

#[test]
fn the_level_changes_only_when_a_request_or_completion_crosses_the_interval_boundary() {
    let mut queue = StandingQueue::new(Shedder::builder());
    for _ in 0..9 {
        queue.serve_one();
    }
    queue.clock.advance(ms(10)); // the interval is over, but nothing happened yet
    assert_eq!(queue.shedder.level(), Level::NONE);
    assert_eq!(queue.shedder.stats().level, Level::NONE);
    queue.any_event();
    assert!(queue.shedder.level() > Level::NONE);
}

#[test]
fn completions_can_close_an_interval_early() {
    // Eight waits are the fewest a rank is judged on.
    let mut queue = StandingQueue::new(Shedder::builder().interval_completions(8));
    for _ in 0..7 {
        queue.serve_one();
    }
    assert_eq!(queue.shedder.level(), Level::NONE);
    queue.serve_one(); // the eighth completion, at 80 ms of a 100 ms interval
    assert!(queue.shedder.level() > Level::NONE);
}

#[test]
fn an_overloaded_interval_with_no_new_arrivals_keeps_the_level() {
    let mut queue = StandingQueue::new(Shedder::builder());
    queue.serve_one_interval();
    let raised = queue.shedder.level();
    // The queue still drains what it holds: still overloaded, nothing new to shed.
    queue.serve_one_interval();
    assert_eq!(queue.shedder.level(), raised);
}

#[test]
fn healthy_intervals_lower_the_level_in_growing_steps() {
    let mut queue = StandingQueue::new(Shedder::builder().recovery_step(8));
    queue.serve_one_interval();
    queue.clear();
    // The waiters that gave up are a wave of hang-ups: that interval holds
    // the level (see below); the healthy ones after it lower it.
    queue.clock.advance(ms(100));
    queue.any_event();
    let mut levels = vec![queue.shedder.level().get()];
    for _ in 0..3 {
        queue.clock.advance(ms(100));
        queue.any_event();
        levels.push(queue.shedder.level().get());
    }
    let steps: Vec<u16> = levels.windows(2).map(|w| w[0] - w[1]).collect();
    assert_eq!(steps, [8, 16, 32], "levels {levels:?}");
}

#[test]
fn a_long_idle_period_resets_the_level() {
    let mut queue = StandingQueue::new(Shedder::builder());
    queue.serve_one_interval();
    queue.clear();
    assert!(queue.shedder.level() > Level::NONE);
    queue.clock.advance(ms(1_600)); // sixteen intervals without a single event
    queue.any_event();
    assert_eq!(queue.shedder.level(), Level::NONE);
}

#[test]
fn an_idle_service_reads_as_not_shedding_before_any_request_arrives() {
    let mut queue = StandingQueue::new(Shedder::builder());
    queue.serve_one_interval(); // the last completion closes the interval
    queue.clear();
    let raised = queue.shedder.level();
    assert!(raised > Level::NONE);
    queue.clock.advance(ms(1_590)); // not yet sixteen intervals since the close
    assert_eq!(queue.shedder.level(), raised);
    assert_eq!(queue.shedder.stats().level, raised);
    queue.clock.advance(ms(10));
    assert_eq!(queue.shedder.level(), Level::NONE);
    assert_eq!(queue.shedder.stats().level, Level::NONE);
    // The reading made no change: the next request finds what it said.
    let first_back = queue.shedder.admit(&batch());
    assert!(matches!(first_back, Admission::Admitted(_)));
    assert_eq!(queue.shedder.level(), Level::NONE);
}

#[test]
fn a_long_idle_period_resets_the_level_even_when_it_followed_an_overloaded_interval() {
    let mut queue = StandingQueue::new(Shedder::builder());
    queue.serve_one_interval();
    queue.serve_one(); // the new interval already saw a long wait...
    queue.clear(); // ...then the traffic stopped
    assert!(queue.shedder.level() > Level::NONE);
    queue.clock.advance(ms(10_000));
    queue.any_event();
    assert_eq!(queue.shedder.level(), Level::NONE);
    let first_back = queue
        .shedder
        .admit(&Arrival::new(Class::Background).with_attempt(2));
    assert!(matches!(first_back, Admission::Admitted(_)));
}

#[test]
fn a_request_at_a_shed_rank_is_refused_at_the_door_with_a_retry_after() {
    let mut queue = StandingQueue::new(Shedder::builder());
    queue.serve_one_interval();
    let arrival = Arrival::new(Class::Background);
    let Admission::Rejected(refused) = queue.shedder.admit(&arrival) else {
        panic!("background is below the level");
    };
    assert_eq!(refused.reason(), RejectReason::Shed);
    assert!(refused.retry_after().is_some());
    assert_eq!(queue.shedder.stats().class(Class::Background).shed, 1);
    // Critical originals above the level still get in line.
    let critical = queue.shedder.admit(&Arrival::new(Class::Critical));
    assert!(matches!(critical, Admission::Queued(_)));
}

#[test]
fn waiters_at_a_rank_the_level_now_sheds_are_dropped_with_shed_while_queued() {
    let mut queue = StandingQueue::new(Shedder::builder());
    let mut background = queued(queue.shedder.admit(&Arrival::new(Class::Background)));
    queue.serve_one_interval();
    assert!(queue.shedder.level().sheds(background.rank(), Cohort::MAX));
    queue.serve_one(); // the next hand-off clears shed ranks from the queues
    let refused = ready(&mut background).unwrap_err();
    assert_eq!(refused.reason(), RejectReason::ShedWhileQueued);
    assert!(refused.retry_after().is_some());
    let stats = queue.shedder.stats();
    assert_eq!(stats.queued[background.rank().index()], 0);
    assert_eq!(stats.class(Class::Background).dropped_from_queue, 1);
}

#[test]
fn raising_the_limit_does_not_serve_a_waiter_whose_rank_is_now_shed() {
    let mut queue = StandingQueue::new(Shedder::builder());
    let mut background = queued(queue.shedder.admit(&Arrival::new(Class::Background)));
    queue.serve_one_interval();
    assert!(queue.shedder.level().sheds(background.rank(), Cohort::MAX));
    queue.waiting.clear(); // the batch waiters give up; only the shed one is left
    queue.shedder.set_limit(2).unwrap();
    let refused = ready(&mut background).unwrap_err();
    assert_eq!(refused.reason(), RejectReason::ShedWhileQueued);
    assert_eq!(queue.shedder.in_flight(), 1);
}

#[test]
fn stats_report_the_recent_sojourn_and_the_drain_rate() {
    let mut queue = StandingQueue::new(Shedder::builder());
    assert_eq!(queue.shedder.stats().recent_sojourn, None);
    assert_eq!(queue.shedder.stats().drain_rate, None);
    queue.serve_one_interval();
    let stats = queue.shedder.stats();
    // The shortest wait was the first waiter's 10 ms; one slot, 10 ms each.
    assert_eq!(stats.recent_sojourn, Some(ms(10)));
    assert_eq!(stats.drain_rate, Some(100.0));
    assert_eq!(stats.level, queue.shedder.level());
}

#[test]
fn a_wave_of_callers_hanging_up_raises_the_level_like_a_standing_queue() {
    // Two slots, each request served at once (no standing queue), but a
    // tenth of the batch callers hang up while served: their work was
    // admitted for nobody.
    let (shedder, clock) = build(Shedder::builder().limit(2));
    for round in 0..10 {
        let permit = shedder.try_admit(&batch()).unwrap();
        clock.advance(ms(10));
        if round == 0 {
            permit.abandon();
        } else {
            drop(permit);
        }
    }
    assert_eq!(shedder.level(), Level::NONE);
    clock.advance(ms(1));
    drop(shedder.try_admit(&Arrival::new(Class::Critical)));
    // One hang-up in eleven arrivals is under the 3 a wave needs.
    assert_eq!(shedder.level(), Level::NONE);

    for round in 0..40 {
        let permit = shedder.try_admit(&batch()).unwrap();
        clock.advance(ms(2));
        if round % 10 == 0 {
            permit.abandon();
        } else {
            drop(permit);
        }
    }
    clock.advance(ms(20));
    drop(shedder.try_admit(&Arrival::new(Class::Critical)));
    let (rank, _) = shedder.level().boundary();
    assert_eq!(
        rank, BATCH,
        "4 of 40 batch callers hung up: batch is cut into"
    );
}

#[test]
fn a_rank_with_few_waits_is_judged_once_it_has_eight() {
    // Every interval, one batch request waits 20 ms for the one slot (held
    // by a critical request that never waits), and twenty more that may not
    // wait are refused (more is offered than the slot drains): a long wait,
    // but the shortest of one says little. The eighth interval's wait makes
    // eight. (Each holds the slot 20 ms: the overload the door sees meanwhile
    // would refuse a wait longer than twice the slot time.)
    let (shedder, clock) = build(Shedder::builder().limit(1).queue_capacity(64));
    let mut levels = Vec::new();
    for _ in 0..8 {
        let held = shedder.try_admit(&Arrival::new(Class::Critical)).unwrap();
        let mut waiter = queued(shedder.admit(&batch()));
        for _ in 0..20 {
            assert!(shedder.try_admit(&batch()).is_err());
        }
        clock.advance(ms(20));
        drop(held);
        let served = ready(&mut waiter).unwrap();
        clock.advance(ms(20));
        drop(served);
        clock.advance(ms(60));
        // The next event closes the interval.
        drop(shedder.try_admit(&Arrival::new(Class::Critical)));
        levels.push(shedder.level());
    }
    assert!(
        levels[..7].iter().all(|level| *level == Level::NONE),
        "{levels:?}"
    );
    assert!(levels[7] > Level::NONE, "{levels:?}");
}

/// One slot, 10 ms of service, one batch request every `gap`: one second of
/// that, then `burst` more at once, then `gap` again for two seconds.
/// Returns the highest level seen after the burst.
fn steady_load_with_a_burst(gap: Duration, burst: usize) -> Level {
    let mut sim = common::Sim::new(Shedder::builder().limit(1).queue_capacity(64), ms(10));
    let mut next = Duration::ZERO;
    let mut highest = Level::NONE;
    while sim.elapsed() < ms(3_000) {
        if sim.elapsed() >= next {
            sim.arrive(batch());
            next += gap;
        }
        if sim.elapsed() == ms(1_000) {
            for _ in 0..burst {
                sim.arrive(batch());
            }
        }
        sim.advance(ms(1));
        if sim.elapsed() > ms(1_000) {
            highest = highest.max(sim.shedder.level());
        }
    }
    highest
}

#[test]
fn a_queue_the_service_is_working_off_is_no_overload() {
    // At 0.9 of the drain rate, a burst of six stands in the queue for about
    // six intervals (each drains one more than arrives), every wait over the
    // 5 ms target: a busy service, not an overloaded one.
    assert_eq!(
        steady_load_with_a_burst(Duration::from_micros(11_100), 6),
        Level::NONE
    );
    // At 1.3 of it the queue grows, and the level rises. (At 100 requests a
    // second the rates are known to within about 17% at two standard
    // errors: an excess smaller than that is not taken for overload.)
    assert!(steady_load_with_a_burst(Duration::from_micros(7_700), 0) > Level::NONE);
}

/// `slots` slots of 10 ms each, one batch request every `1 / rate` second
/// for three seconds. Returns the highest level seen after the first.
fn highest_level_at(slots: usize, rate: u32) -> Level {
    let builder = Shedder::builder().limit(slots).queue_capacity(1_024);
    let mut sim = common::Sim::new(builder, ms(10));
    let gap = Duration::from_secs(1) / rate;
    let mut next = Duration::ZERO;
    let mut highest = Level::NONE;
    while sim.elapsed() < ms(3_000) {
        while sim.elapsed() >= next {
            sim.arrive(batch());
            next += gap;
        }
        sim.advance(ms(1));
        if sim.elapsed() > ms(1_000) {
            highest = highest.max(sim.shedder.level());
        }
    }
    highest
}

#[test]
fn an_excess_of_a_tenth_is_overload_at_2000_requests_a_second_but_not_at_100() {
    // A tenth more than the drain rate, with a queue standing all along.
    // At 100 requests a second the two rates are known to within about 17%
    // (two standard errors); a tenth is within their error, and the queue
    // is left to the door's wait bounds.
    assert_eq!(highest_level_at(1, 110), Level::NONE);
    // At 2,000 a second they are known to within about 4%: overload.
    assert!(highest_level_at(20, 2_200) > Level::NONE);
}

/// Keeps a second dispatcher registered for the rest of the process, so a
/// scoped capture cannot miss an event to another test thread: `tracing`
/// caches once per process whether a callsite is wanted, and with a single
/// dispatcher registered it asks only the default of the thread that first
/// reaches the callsite (a test thread with none caches "never"). With two
/// or more registered, it asks every registered dispatcher.
fn keep_two_dispatchers_registered() {
    static PIN: std::sync::OnceLock<tracing::Dispatch> = std::sync::OnceLock::new();
    PIN.get_or_init(|| tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default()));
}

/// Runs `body` with a subscriber that keeps the `warn` lines; returns them.
fn warnings_of(body: impl FnOnce()) -> Vec<String> {
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Lines {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    keep_two_dispatchers_registered();
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::WARN)
        .finish();
    tracing::subscriber::with_default(subscriber, body);
    let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
    text.lines().map(str::to_owned).collect()
}

fn count(lines: &[String], message: &str) -> usize {
    lines.iter().filter(|line| line.contains(message)).count()
}

#[test]
fn the_logs_warn_once_when_shedding_starts_and_once_when_it_stops() {
    let lines = warnings_of(|| {
        let mut queue = StandingQueue::new(Shedder::builder());
        queue.serve_one_interval();
        assert!(queue.shedder.level() > Level::NONE);
        queue.serve_one_interval(); // still shedding: nothing new to say
        queue.clear();
        queue.clock.advance(ms(1_600)); // idle: the next event resets the level
        queue.any_event();
        assert_eq!(queue.shedder.level(), Level::NONE);
    });
    assert_eq!(count(&lines, "shedding started"), 1, "{lines:#?}");
    assert_eq!(count(&lines, "shedding stopped"), 1, "{lines:#?}");
    let started = lines
        .iter()
        .find(|line| line.contains("shedding started"))
        .unwrap();
    for field in ["level=", "limit=1", "queue_delay_ms="] {
        assert!(started.contains(field), "{field} missing from {started}");
    }
}

/// The lab's CPU-bound step at 2x: one core, 10 ms of work per request,
/// interactive and batch requests each at the core's capacity, for 10 s of
/// 1 ms steps. `each_step` runs after every step, given the limit in force
/// if a probe's cut holds it below the one it cut from. (A refresh's raised
/// round also reads "probing", but raises the limit.)
fn cpu_bound_at_2x(
    sim: &mut common::Sim,
    interactive: Arrival,
    mut each_step: impl FnMut(&common::Sim, Option<u32>),
) {
    let tick = Duration::from_millis(1);
    let mut cut_from = sim.shedder.limit();
    for step in 0..10_000u32 {
        if step % 10 == 0 {
            sim.arrive(interactive);
        }
        if step % 10 == 5 {
            sim.arrive(batch());
        }
        sim.advance(tick);
        let adaptive = sim.shedder.stats().adaptive.expect("an adaptive limit");
        let limit = sim.shedder.limit();
        if adaptive.phase != "probing" {
            cut_from = limit;
        }
        each_step(sim, (limit < cut_from).then_some(limit));
    }
}

/// The lab's CPU-bound step at 2x ([`cpu_bound_at_2x`]). Here slow start
/// grows to 16 slots, where each request takes 160 ms, and its exit probe
/// cuts to 4 and then 2, where they take 40 and 20 ms. The probe's rounds
/// are held against the 100 a second the core finished before the cut, and
/// so is the level: judged against 16 slots over the cut's shorter hold
/// times, the load passing the level never outpaced the core, and the
/// door's queue grew (in the lab, to 26 requests at 2 slots). Here at most
/// 10 wait under the cut, 18 when the drain is the cut-from limit's.
#[test]
fn on_one_core_a_probe_keeps_the_level_that_holds_the_door_queue_short() {
    let mut sim = common::Sim::one_core(Shedder::builder(), ms(10));
    let (mut longest_under_a_cut, mut cut_ticks) = (0, 0);
    cpu_bound_at_2x(&mut sim, Arrival::new(Class::Interactive), |sim, cut| {
        if cut.is_some() {
            cut_ticks += 1;
            longest_under_a_cut = longest_under_a_cut.max(sim.waiting());
        }
    });
    assert!(cut_ticks > 500, "{cut_ticks} ms under a probe's cut");
    assert!(
        longest_under_a_cut <= 12,
        "{longest_under_a_cut} requests waited at the door under the cut"
    );
}

/// The same service: while a probe cuts the limit, the core is held to the
/// pace it kept before the cut (about 100 completions a second), and so is
/// the Retry-After a refusal carries. A critical request refused for want
/// of a slot, with nobody ahead of it and the level far from its rank, is
/// told to come back after one slot time, or one controller interval if
/// that is longer: an interval of 8 ms leaves the slot time to speak. Held
/// to the pace, it is 10 ms under every cut; counted in the cut's hold
/// times over the limit it cut from, it read under 8 ms (the interval).
#[test]
fn on_one_core_a_probe_tells_refused_callers_the_pace_before_its_cut() {
    let builder = Shedder::builder().interval(ms(8)).retry_after_jitter(0.0);
    let mut sim = common::Sim::one_core(builder, ms(10));
    // Fixed cohorts: the same run every time.
    let interactive = Arrival::new(Class::Interactive).with_cohort(Cohort::MAX);
    let critical = Arrival::new(Class::Critical).with_cohort(Cohort::MAX);
    let mut told = Vec::new();
    cpu_bound_at_2x(&mut sim, interactive, |sim, cut| {
        let Some(limit) = cut else {
            return;
        };
        if sim.in_service() < limit as usize {
            return;
        }
        // Every slot held: a critical request that will not wait is
        // refused.
        if let Err(refused) = sim.shedder.try_admit(&critical) {
            if refused.reason() == RejectReason::QueueFull {
                let retry_after = refused.retry_after().expect("an overload's refusal");
                told.push(retry_after.exact());
            }
        }
    });
    assert!(told.len() > 100, "{} refusals under a cut", told.len());
    let shortest = told.iter().min().expect("refusals");
    assert!(*shortest >= ms(9), "{shortest:?}");
}

/// The same service ([`cpu_bound_at_2x`]): the door judges an overload
/// against the drain rate, the limit over the mean hold time, and on one
/// core hold times grow with the limit (160 ms at slow start's 16 slots,
/// 20 ms at 2). Once the limit has stood for half a second outside a
/// probe, the drain reads the core's pace of 100 a second within a fifth.
/// With the hold times of earlier limits remembered for their two seconds,
/// it read about a third of it for seconds after slow start.
#[test]
fn on_one_core_the_drain_rate_reads_the_cores_pace_soon_after_the_limit_moves() {
    let mut sim = common::Sim::one_core(Shedder::builder(), ms(10));
    let (mut limit, mut since) = (sim.shedder.limit(), Duration::ZERO);
    let mut readings = Vec::new();
    cpu_bound_at_2x(&mut sim, Arrival::new(Class::Interactive), |sim, _| {
        if sim.shedder.limit() != limit {
            (limit, since) = (sim.shedder.limit(), sim.elapsed());
        }
        let stats = sim.shedder.stats();
        let steady = stats
            .adaptive
            .is_some_and(|adaptive| adaptive.phase == "steady");
        if steady && sim.elapsed() - since >= ms(500) {
            readings.push(stats.drain_rate.expect("a drain rate"));
        }
    });
    assert!(readings.len() > 3_000, "{} steps judged", readings.len());
    let off: Vec<f64> = readings
        .iter()
        .copied()
        .filter(|drain| !(80.0..=120.0).contains(drain))
        .collect();
    assert!(
        off.is_empty(),
        "{} of {} off: {:?}",
        off.len(),
        readings.len(),
        &off[..off.len().min(10)]
    );
}
