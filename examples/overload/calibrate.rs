//! Measuring the service before the trials: its capacity, its true
//! concurrency and its no-load latency, closed-loop, against the
//! unprotected server.
//!
//! Nominal figures are not trusted: `tokio::time::sleep` overshoots, so 8
//! workers of 20 ms serve about 379 requests/s, not 400, and a CPU-bound
//! service has no nominal figure at all. So `c` callers each send one
//! request after another (closed loop: a new request as soon as the last
//! is answered), for `c` = 1, 2, 4, ... up to a few times the service's
//! apparent parallelism, and the lab reads:
//!
//! - the **capacity**: the throughput of a longer step at the sweep's
//!   highest concurrency (the peak, measured with more requests);
//! - the **true concurrency**: how many requests the service runs at once,
//!   by Little's law: the capacity times the time a request takes alone,
//!   that is the capacity over the `c` = 1 step's throughput, rounded to
//!   the nearest whole ([`true_concurrency`]); the concurrency beyond
//!   which requests only wait;
//! - the **no-load p99**: the 99th percentile latency of requests sent one
//!   at a time (the `c` = 1 step), as a caller sees it, HTTP included.
//!
//! Every step restarts the service-time draws from one seed, so the steps
//! meet the same service times and differ only by concurrency (common random
//! numbers); the comparison with the peak is then not blurred by the draws.
//! Only the `c` = 1 step and the capacity step decide; the steps between
//! are printed to show where throughput goes flat. The sweep runs twice (in
//! full runs) and each of those concurrencies keeps its best pass, so a
//! step that another process on the machine slowed does not distort that
//! picture; each step also reports how busy the service was (its work per
//! second over its parallelism), which shows such a step.

use std::{
    fmt,
    net::SocketAddr,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, OnceLock,
    },
    time::{Duration, Instant},
};

use bytes::Bytes;
use http::{Request, StatusCode, Uri};
use http_body_util::{BodyExt, Empty};
use hyper_util::{
    client::legacy::{connect::HttpConnector, Client},
    rt::TokioExecutor,
};

use crate::{class::Class, metrics, target::Control};

/// Longest a calibration request may take before it counts as failed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A step goes on past its length until it has counted this many
/// completions (only a quick run on a slow machine needs it)...
const MIN_COMPLETIONS: u64 = 20;

/// ... but not beyond this many times its length.
const MAX_STRETCH: u32 = 10;

/// How long each part of a calibration lasts.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// Highest concurrency of the sweep.
    pub max_concurrency: usize,
    /// Length of the `c` = 1 step. The no-load p99 needs many requests:
    /// the draws restart from one seed, so it is the same order statistic
    /// of the same draws in every run, and of 500 it is the fifth or sixth
    /// largest, which for the lab's 20 ms service lie 12 ms apart (499
    /// requests read 90.7 ms, 503 read 78.4 ms; the distribution's p99 is
    /// 92 ms). Over 30 s, about 1,300 requests, it is the thirteenth
    /// largest, and read 91.5 and 91.6 ms in this change's runs.
    pub no_load: Duration,
    /// Length of every other sweep step.
    pub step: Duration,
    /// Passes over the sweep's steps above one caller; each keeps its best
    /// throughput, so a pass that another process on the machine slowed
    /// does not distort the printed curve.
    pub passes: usize,
    /// The service's apparent parallelism (workers, or cores), to express
    /// its work per second as a share of it.
    pub parallelism: usize,
    /// Length of the capacity step.
    pub capacity_step: Duration,
    /// Seed of the service-time draws, restarted at every step.
    pub seed: u64,
}

impl Plan {
    /// The plan for a service of apparent parallelism `parallelism`: a sweep
    /// up to 4x it (at least 8), with full or quick durations.
    pub fn for_parallelism(parallelism: usize, quick: bool) -> Plan {
        let secs = |full: f64, q: f64| Duration::from_secs_f64(if quick { q } else { full });
        Plan {
            max_concurrency: (4 * parallelism).max(8),
            no_load: secs(30.0, 0.3),
            step: secs(2.0, 0.2),
            passes: if quick { 1 } else { 2 },
            parallelism: parallelism.max(1),
            capacity_step: secs(15.0, 0.3),
            seed: 0x5EED,
        }
    }

    /// How many steps the sweep has before any bisection.
    pub fn sweep_len(&self) -> usize {
        self.sweep().len()
    }

    /// The concurrencies of the sweep: powers of two, then the maximum.
    fn sweep(&self) -> Vec<usize> {
        let mut cs: Vec<usize> = std::iter::successors(Some(1usize), |c| c.checked_mul(2))
            .take_while(|&c| c < self.max_concurrency)
            .collect();
        cs.push(self.max_concurrency.max(1));
        cs
    }
}

/// One closed-loop step.
#[derive(Clone, Copy, Debug)]
pub struct Step {
    /// Callers sending one request after another.
    pub concurrency: usize,
    /// Seconds over which completions were counted (after a warm-up of a tenth).
    pub secs: f64,
    /// Successful requests completed in those seconds.
    pub completions: u64,
    /// Completions per second.
    pub throughput: f64,
    /// Latency of the step's successful requests, 50th percentile, ms.
    pub p50_ms: f64,
    /// Latency of the step's successful requests, 99th percentile, ms.
    pub p99_ms: f64,
    /// Successful requests whose latency the percentiles are of.
    pub samples: usize,
    /// Requests that failed or timed out.
    pub failures: u64,
    /// The service's work per second of the step over its parallelism
    /// (1.0: every worker, or the core, busy with requests all the time).
    pub busy: f64,
}

/// What a calibration found. Everything the lab reads from it is derived
/// from two steps: the one at `c` = 1 and the capacity step.
#[derive(Clone, Debug)]
pub struct Calibration {
    /// What was calibrated, for the printout.
    service: String,
    /// The `c` = 1 step: requests one at a time.
    one_at_a_time: Step,
    /// The rest of the sweep, in the order run (printed, not read).
    sweep: Vec<Step>,
    /// The longer step at the highest concurrency.
    capacity_step: Step,
    /// Passes over the sweep.
    passes: usize,
}

impl Calibration {
    /// Requests per second the service completes at most (the capacity step).
    pub fn capacity(&self) -> f64 {
        self.capacity_step.throughput
    }

    /// How many requests the service runs at once ([`true_concurrency`]).
    pub fn true_concurrency(&self) -> usize {
        true_concurrency(self.capacity(), self.one_at_a_time.throughput)
    }

    /// p99 latency of requests one at a time, ms.
    pub fn no_load_p99_ms(&self) -> f64 {
        self.one_at_a_time.p99_ms
    }

    /// p50 latency of requests one at a time, ms.
    pub fn no_load_p50_ms(&self) -> f64 {
        self.one_at_a_time.p50_ms
    }
}

impl fmt::Display for Calibration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "calibration of {} (closed loop, unprotected server):",
            self.service
        )?;
        writeln!(
            f,
            "  {:>11}  {:>6}  {:>11}  {:>10}  {:>6}  {:>6}  {:>8}  {:>5}",
            "concurrency", "secs", "completions", "req/s", "p50 ms", "p99 ms", "failures", "busy"
        )?;
        let row = |f: &mut fmt::Formatter<'_>, s: &Step, note: &str| {
            writeln!(
                f,
                "  {:>11}  {:>6.1}  {:>11}  {:>10.1}  {:>6.1}  {:>6.1}  {:>8}  {:>4.0}%{note}",
                s.concurrency,
                s.secs,
                s.completions,
                s.throughput,
                s.p50_ms,
                s.p99_ms,
                s.failures,
                s.busy * 100.0
            )
        };
        for s in std::iter::once(&self.one_at_a_time).chain(&self.sweep) {
            row(f, s, "")?;
        }
        row(f, &self.capacity_step, "  (capacity step)")?;
        writeln!(
            f,
            "  (each step but the c = 1 and capacity steps is the best of {} pass(es); busy = the service's \
             work per second over its parallelism)",
            self.passes
        )?;
        let one = &self.one_at_a_time;
        write!(
            f,
            "  capacity {:.1} req/s (+-{:.1}% at 2 sigma of its {} completions); true concurrency {} \
             (the capacity over {:.1}/s one at a time = {:.2}, rounded); no-load p99 {:.1} ms, \
             p50 {:.1} ms ({} requests one at a time)",
            self.capacity(),
            200.0 / (self.capacity_step.completions.max(1) as f64).sqrt(),
            self.capacity_step.completions,
            self.true_concurrency(),
            one.throughput,
            concurrency(self.capacity(), one.throughput),
            one.p99_ms,
            one.p50_ms,
            one.samples,
        )
    }
}

/// The capacity times the time a request takes alone (the inverse of the
/// throughput `one_at_a_time`): by Little's law, how many requests run at
/// once at capacity, before rounding.
fn concurrency(capacity: f64, one_at_a_time: f64) -> f64 {
    capacity / one_at_a_time
}

/// How many requests a service runs at once, from its `capacity` and its
/// throughput to one caller sending one request after another: by Little's
/// law the capacity times the time a request takes alone (the inverse of
/// that throughput), rounded to the nearest whole, at least 1.
///
/// Not the smallest concurrency whose short step reaches a share of the
/// sweep's best: on a service whose throughput is flat from one caller up
/// (one core), that best is the luckiest of many short steps, and a host
/// that moves the service's speed by a tenth within a minute made a
/// one-core service read 6 (the lab's full run of 73fb992: 92.8/s one at
/// a time over 27 s, a best of 97.7/s at 8, a capacity of 91.3/s). The
/// ratio of the two longest steps moves by as much, which rounding absorbs
/// for a small service and costs a large one a fraction of a slot.
pub fn true_concurrency(capacity: f64, one_at_a_time: f64) -> usize {
    let concurrency = concurrency(capacity, one_at_a_time).round();
    if concurrency.is_finite() && concurrency >= 1.0 {
        concurrency as usize
    } else {
        1
    }
}

/// A closed-loop caller of one server.
struct Caller {
    http: Client<HttpConnector, Empty<Bytes>>,
    uri: Uri,
}

impl Caller {
    fn new(addr: SocketAddr) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        Caller {
            http: Client::builder(TokioExecutor::new())
                .pool_max_idle_per_host(256)
                .build(connector),
            uri: format!("http://{addr}{}", Class::Interactive.path())
                .parse()
                .expect("a socket address and a path form a valid URI"),
        }
    }

    /// One request with no deadline; whether it succeeded.
    async fn once(&self) -> bool {
        let request = Request::get(self.uri.clone())
            .body(Empty::new())
            .expect("static parts form a valid request");
        let exchange = async {
            let response = self.http.request(request).await.ok()?;
            let ok = response.status() == StatusCode::OK;
            response.into_body().collect().await.ok()?;
            Some(ok)
        };
        matches!(
            tokio::time::timeout(REQUEST_TIMEOUT, exchange).await,
            Ok(Some(true))
        )
    }
}

/// Runs one closed-loop step of `concurrency` callers for `length`.
async fn step(
    caller: &Arc<Caller>,
    control: &Control,
    concurrency: usize,
    length: Duration,
    seed: u64,
    parallelism: usize,
) -> Result<Step, String> {
    control.reseed(seed).await?;
    let work = || async { control.sample().await.map(|s| s.total().work_us) };
    let work_before = work().await?;
    let start = Instant::now();
    let counted_from = start + length / 10;
    let (end, hard_end) = (start + length, start + length * MAX_STRETCH);
    // The step ends at `end`, or later once it has counted MIN_COMPLETIONS
    // (a slow machine in a quick run), but never after `hard_end`.
    let counted = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(OnceLock::new());
    let loops: Vec<_> = (0..concurrency)
        .map(|_| {
            let (caller, counted, stop) =
                (Arc::clone(caller), Arc::clone(&counted), Arc::clone(&stop));
            tokio::spawn(async move {
                let mut done = Vec::new();
                loop {
                    let now = Instant::now();
                    let enough = counted.load(Ordering::Relaxed) >= MIN_COMPLETIONS;
                    if stop.get().is_some() || (now >= end && enough) || now >= hard_end {
                        let _ = stop.set(now);
                        break;
                    }
                    let ok = caller.once().await;
                    let finished = Instant::now();
                    if ok && finished >= counted_from {
                        counted.fetch_add(1, Ordering::Relaxed);
                    }
                    done.push((now, finished, ok));
                }
                done
            })
        })
        .collect();
    let mut loop_results = Vec::with_capacity(loops.len());
    for l in loops {
        loop_results.push(l.await.map_err(|e| e.to_string())?);
    }
    let end = stop.get().copied().unwrap_or(end).max(end);
    let (mut completions, mut failures, mut latencies) = (0u64, 0u64, Vec::new());
    for done in loop_results {
        for (sent, finished, ok) in done {
            if !ok {
                failures += 1;
                continue;
            }
            latencies.push((finished - sent).as_secs_f64() * 1e3);
            if counted_from <= finished && finished < end {
                completions += 1;
            }
        }
    }
    let work_us = work().await?.saturating_sub(work_before);
    let busy = work_us as f64 / 1e6 / start.elapsed().as_secs_f64() / parallelism as f64;
    latencies.sort_by(f64::total_cmp);
    let secs = (end - counted_from).as_secs_f64();
    Ok(Step {
        busy,
        concurrency,
        secs,
        completions,
        throughput: completions as f64 / secs,
        p50_ms: metrics::percentile(&latencies, 0.50),
        p99_ms: metrics::percentile(&latencies, 0.99),
        samples: latencies.len(),
        failures,
    })
}

/// Calibrates the unprotected server at `addr` (`control` is its handle)
/// as the module docs describe, printing progress to stderr.
pub async fn run(
    addr: SocketAddr,
    control: &Control,
    plan: &Plan,
    service: &str,
) -> Result<Calibration, String> {
    let caller = Arc::new(Caller::new(addr));
    let steps = sweep(plan, |c, length| {
        let (caller, control) = (Arc::clone(&caller), control.clone());
        async move {
            let s = step(&caller, &control, c, length, plan.seed, plan.parallelism).await?;
            eprintln!(
                "[calibrate] concurrency {c:>3}: {:.1} req/s, p99 {:.1} ms",
                s.throughput, s.p99_ms
            );
            Ok(s)
        }
    })
    .await?;
    let capacity_step = step(
        &caller,
        control,
        plan.max_concurrency,
        plan.capacity_step,
        plan.seed,
        plan.parallelism,
    )
    .await?;
    if steps
        .iter()
        .chain([&capacity_step])
        .any(|s| s.completions == 0)
    {
        return Err(format!(
            "calibration of {service}: a step completed no request: {steps:?}"
        ));
    }
    let Some((&one_at_a_time, sweep)) = steps.split_first() else {
        return Err(format!("calibration of {service}: the sweep ran no step"));
    };
    Ok(Calibration {
        service: service.to_owned(),
        one_at_a_time,
        sweep: sweep.to_vec(),
        capacity_step,
        passes: plan.passes,
    })
}

/// The sweep of `plan` with `measure(concurrency, length)` as the step:
/// the steps in the order run, the `c` = 1 step first, each later one the
/// best of the plan's passes.
async fn sweep<F, Fut>(plan: &Plan, mut measure: F) -> Result<Vec<Step>, String>
where
    F: FnMut(usize, Duration) -> Fut,
    Fut: std::future::Future<Output = Result<Step, String>>,
{
    let mut steps = Vec::new();
    for c in plan.sweep() {
        let length = if c == 1 { plan.no_load } else { plan.step };
        steps.push(measure(c, length).await?);
    }
    for _ in 1..plan.passes {
        for kept in steps.iter_mut().filter(|s| s.concurrency > 1) {
            let again = measure(kept.concurrency, plan.step).await?;
            if again.throughput > kept.throughput {
                *kept = again;
            }
        }
    }
    Ok(steps)
}

/// The throughput of one closed-loop step of `concurrency` callers for
/// `length` with the service slowed to `slowdown_pct` (the capacity a
/// slowdown leaves). The slowdown is undone afterwards.
pub async fn peak_at_slowdown(
    addr: SocketAddr,
    control: &Control,
    concurrency: usize,
    length: Duration,
    slowdown_pct: u64,
    seed: u64,
    parallelism: usize,
) -> Result<Step, String> {
    let caller = Arc::new(Caller::new(addr));
    control.set_slowdown_pct(slowdown_pct).await?;
    let result = step(&caller, control, concurrency, length, seed, parallelism).await;
    control.set_slowdown_pct(100).await?;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sweep_doubles_up_to_the_maximum() {
        let plan = |max| Plan {
            max_concurrency: max,
            ..Plan::for_parallelism(8, true)
        };
        assert_eq!(plan(32).sweep(), [1, 2, 4, 8, 16, 32]);
        assert_eq!(plan(24).sweep(), [1, 2, 4, 8, 16, 24]);
        assert_eq!(plan(1).sweep(), [1]);
        assert_eq!(Plan::for_parallelism(1, true).max_concurrency, 8);
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn each_concurrency_keeps_its_best_pass() {
        let plan = Plan::for_parallelism(8, false);
        assert_eq!(plan.passes, 2);
        // The second pass at 8 is slowed (by another process, say).
        let mut seen = std::collections::HashMap::new();
        let fake = |c: usize, _| {
            let n = seen.entry(c).or_insert(0);
            *n += 1;
            let slowed = c == 8 && *n == 2;
            let throughput = 47.0 * c.min(8) as f64 * if slowed { 0.5 } else { 1.0 };
            std::future::ready(Ok(Step {
                concurrency: c,
                secs: 1.0,
                completions: throughput as u64,
                throughput,
                p50_ms: 1.0,
                p99_ms: 2.0,
                samples: 1,
                failures: 0,
                busy: 1.0,
            }))
        };
        let steps = block_on(sweep(&plan, fake)).unwrap();
        let order: Vec<usize> = steps.iter().map(|s| s.concurrency).collect();
        assert_eq!(order, [1, 2, 4, 8, 16, 32]);
        let at_8 = steps.iter().find(|s| s.concurrency == 8).unwrap();
        assert_eq!(at_8.throughput, 376.0);
    }

    /// Capacities and one-at-a-time throughputs of the lab's own runs.
    #[test]
    fn the_true_concurrency_is_the_capacity_over_the_throughput_one_at_a_time() {
        // 8 workers x 20 ms and x 40 ms (full run of 73fb992).
        assert_eq!(true_concurrency(380.3, 47.3), 8);
        assert_eq!(true_concurrency(197.9, 25.3), 8);
        // One core, 10 ms of CPU: the same run (its sweep's best short
        // step, 97.7/s at 8, made the old rule read 6) and a targeted run
        // where one caller served less than the capacity step.
        assert_eq!(true_concurrency(91.3, 92.8), 1);
        assert_eq!(true_concurrency(88.7, 84.5), 1);
    }

    #[test]
    fn a_degenerate_calibration_reads_one() {
        assert_eq!(true_concurrency(0.0, 47.3), 1);
        assert_eq!(true_concurrency(380.3, 0.0), 1);
        assert_eq!(true_concurrency(f64::NAN, 1.0), 1);
    }
}
