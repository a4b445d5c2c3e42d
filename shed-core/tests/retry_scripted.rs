//! The client retry model against a scripted transport and a manual clock.
//!
//! Each test is one behaviour, with the defaults (3 attempts, 1,500 ms
//! deadline, 50 ms reserve, 20 ms minimum window, backoff 100 ms..800 ms,
//! budget 2 retries to start and 4 at most) and jitter fixed at 0.5.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use shed_core::retry::{
    AttemptOutcome, Decision, Operation, Pushback, Reason, Replay, Retrier, RetryBudget,
};

/// One scripted attempt: how long the transport takes, and what it answers.
#[derive(Clone)]
struct Step {
    latency: Duration,
    outcome: AttemptOutcome,
    headers: Vec<(&'static str, &'static str)>,
}

fn answer(latency_ms: u64, status: u16) -> Step {
    Step {
        latency: Duration::from_millis(latency_ms),
        outcome: AttemptOutcome::Status(status),
        headers: Vec::new(),
    }
}

impl Step {
    fn with_header(mut self, name: &'static str, value: &'static str) -> Self {
        self.headers.push((name, value));
        self
    }
}

/// What the caller saw at the end of one operation.
#[derive(Debug, PartialEq, Eq)]
struct Run {
    attempts: u32,
    finished_at: Duration,
    outcome: AttemptOutcome,
    reason: Reason,
}

/// The wall clock at the original's send time (2026-01-01T00:00:00Z).
fn wall_clock_at_start() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_767_225_600)
}

fn retrier_with(budget: Arc<RetryBudget>) -> Retrier {
    Retrier::builder()
        .budget(budget)
        .jitter(|| 0.5)
        .build()
        .unwrap()
}

fn retrier() -> Retrier {
    retrier_with(Arc::new(RetryBudget::default()))
}

/// Runs one operation against `script` on a manual clock starting at zero:
/// each attempt advances the clock by its latency, each retry by its delay.
fn simulate(retrier: &Retrier, mut op: Operation, script: impl IntoIterator<Item = Step>) -> Run {
    let mut now = Duration::ZERO;
    let mut attempts = 1;
    for step in script {
        now += step.latency;
        let lookup = |name: &str| {
            step.headers
                .iter()
                .find(|(header, _)| header.eq_ignore_ascii_case(name))
                .map(|(_, value)| value.as_bytes())
        };
        let pushback = Pushback::from_headers(lookup, wall_clock_at_start() + now);
        match retrier.decide(&mut op, step.outcome, pushback, now) {
            Decision::Retry { attempt, delay } => {
                attempts += 1;
                assert_eq!(attempt, attempts, "attempts are numbered in order");
                now += delay;
            }
            Decision::Stop(reason) => {
                return Run {
                    attempts,
                    finished_at: now,
                    outcome: step.outcome,
                    reason,
                }
            }
        }
    }
    panic!("the script ran out before the operation ended");
}

#[test]
fn backoff_then_pushback_floor_succeeds_on_the_third_attempt_at_1140_ms() {
    let retrier = retrier();
    let run = simulate(
        &retrier,
        retrier.begin(Replay::Safe),
        [
            answer(40, 503),
            answer(30, 429).with_header("Retry-After", "1"),
            answer(20, 200),
        ],
    );
    // 40 ms, jitter 50 ms, 30 ms, pushback 1 s (beats jitter 100 ms), 20 ms.
    assert_eq!(
        run,
        Run {
            attempts: 3,
            finished_at: Duration::from_millis(1_140),
            outcome: AttemptOutcome::Status(200),
            reason: Reason::Succeeded,
        }
    );
}

#[test]
fn pushback_longer_than_the_deadline_ends_the_operation_at_once() {
    let retrier = retrier();
    let op = retrier
        .begin(Replay::Safe)
        .with_deadline(Duration::from_millis(1_000));
    let run = simulate(
        &retrier,
        op,
        [
            answer(10, 429).with_header("Retry-After", "2"),
            answer(10, 200),
        ],
    );
    assert_eq!(run.attempts, 1);
    assert_eq!(run.reason, Reason::Deadline);
    assert_eq!(run.finished_at, Duration::from_millis(10), "no waiting");
    assert_eq!(retrier.budget().balance_tenths(), 21, "no credit taken");
}

#[test]
fn a_400_is_not_retried() {
    let retrier = retrier();
    let run = simulate(
        &retrier,
        retrier.begin(Replay::Safe),
        [answer(5, 400), answer(5, 200)],
    );
    assert_eq!((run.attempts, run.reason), (1, Reason::TerminalStatus));
}

#[test]
fn a_503_on_an_operation_not_declared_safe_is_not_retried() {
    let retrier = retrier();
    let run = simulate(
        &retrier,
        retrier.begin(Replay::Unsafe),
        [answer(5, 503), answer(5, 200)],
    );
    assert_eq!((run.attempts, run.reason), (1, Reason::UnsafeOperation));
}

#[test]
fn the_attempt_cap_stops_the_third_failure() {
    let retrier = retrier();
    let run = simulate(
        &retrier,
        retrier.begin(Replay::Safe),
        std::iter::repeat(answer(1, 503)),
    );
    assert_eq!((run.attempts, run.reason), (3, Reason::AttemptCap));
}

#[test]
fn a_negative_grpc_pushback_refuses_the_retry() {
    let retrier = retrier();
    let run = simulate(
        &retrier,
        retrier.begin(Replay::Safe),
        [
            answer(5, 503).with_header("grpc-retry-pushback-ms", "-1"),
            answer(5, 200),
        ],
    );
    assert_eq!((run.attempts, run.reason), (1, Reason::ServerRefused));
}

#[test]
fn an_overflowing_retry_after_refuses_instead_of_retrying_at_once() {
    let retrier = retrier();
    let run = simulate(
        &retrier,
        retrier.begin(Replay::Safe),
        [
            answer(5, 503).with_header("Retry-After", "999999999999999999999"),
            answer(5, 200),
        ],
    );
    assert_eq!((run.attempts, run.reason), (1, Reason::ServerRefused));
}

#[test]
fn a_connect_error_is_retried() {
    let retrier = retrier();
    let refused = Step {
        latency: Duration::from_millis(1),
        outcome: AttemptOutcome::ConnectError,
        headers: Vec::new(),
    };
    let run = simulate(
        &retrier,
        retrier.begin(Replay::Safe),
        [refused, answer(10, 200)],
    );
    assert_eq!((run.attempts, run.reason), (2, Reason::Succeeded));
    assert_eq!(run.finished_at, Duration::from_millis(1 + 50 + 10));
}

#[test]
fn a_retry_that_would_start_inside_the_minimum_window_is_not_sent() {
    let retrier = retrier();
    // A 503 at 1,360 ms: a 50 ms backoff starts at 1,410 ms, leaving 40 ms
    // before 1,450 ms (deadline less reserve): enough. At 1,390 ms it is not.
    let in_time = simulate(
        &retrier,
        retrier.begin(Replay::Safe),
        [answer(1_360, 503), answer(1, 200)],
    );
    assert_eq!(in_time.reason, Reason::Succeeded);
    let too_late = simulate(
        &retrier,
        retrier.begin(Replay::Safe),
        [answer(1_390, 503), answer(1, 200)],
    );
    assert_eq!((too_late.attempts, too_late.reason), (1, Reason::Deadline));
}

/// Runs 100 operations one after another against a complete outage (every
/// attempt a 1 ms 503) and returns the physical attempts made.
fn outage(budget_for_each_operation: impl Fn() -> Arc<RetryBudget>) -> u32 {
    (0..100)
        .map(|_| {
            let retrier = retrier_with(budget_for_each_operation());
            simulate(
                &retrier,
                retrier.begin(Replay::Safe),
                std::iter::repeat(answer(1, 503)),
            )
            .attempts
        })
        .sum()
}

#[test]
fn a_shared_budget_holds_a_complete_outage_to_112_attempts_for_100_operations() {
    let shared = Arc::new(RetryBudget::default());
    let attempts = outage(|| Arc::clone(&shared));
    assert_eq!(attempts, 112, "100 originals + 2 initial + floor(100 / 10)");
}

#[test]
fn per_operation_budgets_would_allow_300_attempts_in_the_same_outage() {
    let attempts = outage(|| Arc::new(RetryBudget::default()));
    assert_eq!(attempts, 300);
}

#[test]
fn counters_report_originals_retries_and_denials_by_reason() {
    let retrier = retrier();
    for _ in 0..100 {
        simulate(
            &retrier,
            retrier.begin(Replay::Safe),
            std::iter::repeat(answer(1, 503)),
        );
    }
    let stats = retrier.stats();
    assert_eq!(stats.originals(), 100);
    assert_eq!(stats.retries(), 12);
    assert_eq!(
        stats.denials(Reason::AttemptCap),
        1,
        "only the first operation"
    );
    assert_eq!(stats.denials(Reason::RetryBudget), 99);
    assert_eq!(stats.total_denials(), 100);
}

#[test]
fn successes_are_not_denials() {
    let retrier = retrier();
    simulate(&retrier, retrier.begin(Replay::Safe), [answer(1, 200)]);
    assert_eq!(retrier.stats().total_denials(), 0);
    assert_eq!(retrier.stats().denials(Reason::Succeeded), 0);
}

#[test]
fn a_granted_retry_is_counted_as_a_retry_and_not_as_a_denial() {
    let retrier = retrier();
    let mut op = retrier.begin(Replay::Safe);
    let decision = retrier.decide(
        &mut op,
        AttemptOutcome::Status(503),
        Pushback::Absent,
        Duration::ZERO,
    );
    assert!(matches!(decision, Decision::Retry { attempt: 2, .. }));
    assert_eq!(retrier.stats().retries(), 1);
    assert_eq!(retrier.stats().total_denials(), 0);
}
