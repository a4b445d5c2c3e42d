//! The four scenarios, each run for every policy, and their tables, CSV
//! files and plots.

use std::{
    fmt, fs,
    path::PathBuf,
    str::FromStr,
    time::{Duration, Instant},
};

use crate::{
    class::Class,
    client::ClientConfig,
    load::Phase,
    metrics::{self, Summary, Window},
    plot::{self, Series},
    report::{self, num, pct, verdict, Table},
    server::{Policy, ServerConfig, ServiceTime},
    trial::{self, Trial, TrialSpec},
};

/// Shares of the offered load per class (critical, interactive, batch,
/// background) in mixed scenarios.
const MIX: [f64; 4] = [0.1, 0.5, 0.3, 0.1];

/// Everything a lab run is configured with.
#[derive(Clone, Debug)]
pub struct Lab {
    /// K: downstream workers and the policies' concurrency limit.
    pub workers: usize,
    /// The downstream's service time.
    pub service: ServiceTime,
    /// Short smoke durations instead of the full ones.
    pub quick: bool,
    /// The policies to compare.
    pub policies: Vec<Policy>,
    /// Where CSV and SVG files go.
    pub out_dir: PathBuf,
}

impl Lab {
    /// Nominal capacity in requests per second (K / mean service time).
    pub fn capacity(&self) -> f64 {
        self.server(Policy::None).capacity()
    }

    fn server(&self, policy: Policy) -> ServerConfig {
        ServerConfig {
            policy,
            workers: self.workers,
            service: self.service,
        }
    }

    /// `full` normally, `quick` in quick mode.
    fn secs(&self, full: f64, quick: f64) -> Duration {
        Duration::from_secs_f64(if self.quick { quick } else { full })
    }

    /// Width of time-series buckets.
    fn bucket(&self) -> Duration {
        Duration::from_millis(500)
    }

    /// Callers with a 1 s deadline, 250 ms attempts, up to 3 attempts; they
    /// honour Retry-After only under shed, the one policy that computes it.
    fn client(&self, policy: Policy) -> ClientConfig {
        ClientConfig {
            deadline: Duration::from_millis(1000),
            attempt_timeout: Duration::from_millis(250),
            max_attempts: 3,
            backoff_base: Duration::from_millis(25),
            backoff_cap: Duration::from_millis(250),
            honour_retry_after: policy == Policy::Shed,
        }
    }

    /// Per-class rates for `multiple` times capacity split by [`MIX`].
    fn mixed(&self, multiple: f64) -> [f64; 4] {
        MIX.map(|share| share * multiple * self.capacity())
    }
}

/// A scenario of the lab.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// Offered load swept from 0.5x to 4x capacity.
    Steady,
    /// Interactive at 40% steady while batch spikes to 12x.
    Isolation,
    /// Tight deadlines at 2x.
    Deadline,
    /// 70% load, capacity halved for a while, then restored.
    Metastable,
}

impl Scenario {
    /// All scenarios, in run order.
    pub const ALL: [Scenario; 4] = [
        Scenario::Steady,
        Scenario::Isolation,
        Scenario::Deadline,
        Scenario::Metastable,
    ];

    /// The name used on the command line and in file names.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Steady => "steady",
            Scenario::Isolation => "isolation",
            Scenario::Deadline => "deadline",
            Scenario::Metastable => "metastable",
        }
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

impl FromStr for Scenario {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Scenario::ALL
            .into_iter()
            .find(|x| x.name() == s)
            .ok_or_else(|| format!("unknown scenario {s:?} (expected steady, isolation, deadline, metastable or all)"))
    }
}

/// What one scenario produced.
pub struct ScenarioRun {
    /// Which scenario.
    pub scenario: Scenario,
    /// Every trial that ran, all policies and steps.
    pub trials: Vec<Trial>,
    /// The table for stdout.
    pub table: Table,
    /// Files written under the results folder.
    pub files: Vec<PathBuf>,
}

/// Runs `scenario` for every policy of `lab` and writes its files.
pub async fn run(lab: &Lab, scenario: Scenario) -> Result<ScenarioRun, Box<dyn std::error::Error>> {
    fs::create_dir_all(&lab.out_dir)?;
    let specs = specs(lab, scenario);
    let mut trials = Vec::new();
    for &policy in &lab.policies {
        for spec in &specs {
            let mut spec = spec.clone();
            spec.client = ClientConfig {
                honour_retry_after: policy == Policy::Shed,
                ..spec.client
            };
            let began = Instant::now();
            eprintln!(
                "[{scenario}] {policy:<5} {:<6} running {:.0} s of load ...",
                spec.label,
                spec.duration().as_secs_f64()
            );
            match trial::run(lab.server(policy), spec, lab.bucket()).await {
                Ok(t) => {
                    let all = Summary::of(&t.records, whole(&t.spec), None);
                    eprintln!(
                        "[{scenario}] {policy:<5} {:<6} done in {:.1} s: offered {:.0}/s, goodput {:.0}/s",
                        t.spec.label,
                        began.elapsed().as_secs_f64(),
                        all.offered_rate,
                        all.goodput
                    );
                    trials.push(t);
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
    let mut table = match scenario {
        Scenario::Steady => steady_table(lab, &trials),
        Scenario::Isolation => isolation_table(lab, &trials),
        Scenario::Deadline => deadline_table(lab, &trials),
        Scenario::Metastable => metastable_table(lab, &trials),
    };
    generator_check(&mut table, &trials);

    let mut files = Vec::new();
    let summary = lab.out_dir.join(format!("{scenario}_summary.csv"));
    table.write_csv(&summary)?;
    files.push(summary);
    files.extend(report::write_time_series(
        &lab.out_dir,
        scenario.name(),
        &trials,
        lab.bucket(),
    )?);
    files.extend(plots(lab, scenario, &trials)?);
    Ok(ScenarioRun {
        scenario,
        trials,
        table,
        files,
    })
}

/// The trials of one scenario, the same for every policy.
fn specs(lab: &Lab, scenario: Scenario) -> Vec<TrialSpec> {
    let cap = lab.capacity();
    let client = lab.client(Policy::None);
    let phase = |duration: Duration, rates: [f64; 4], slowdown_pct: u64| Phase {
        duration,
        rates,
        slowdown_pct,
    };
    match scenario {
        Scenario::Steady => {
            let steps: &[f64] = if lab.quick {
                &[2.0]
            } else {
                &[0.5, 1.0, 2.0, 4.0]
            };
            steps
                .iter()
                .enumerate()
                .map(|(i, &m)| TrialSpec {
                    label: format!("{m}x"),
                    phases: vec![phase(lab.secs(6.0, 1.0), lab.mixed(m), 100)],
                    client,
                    seed: 100 + i as u64,
                })
                .collect()
        }
        Scenario::Isolation => {
            let rates = |batch: f64| {
                let mut r = [0.0; 4];
                r[Class::Interactive.index()] = 0.4 * cap;
                r[Class::Batch.index()] = batch * cap;
                r
            };
            vec![TrialSpec {
                label: "12x".into(),
                phases: vec![
                    phase(lab.secs(2.0, 0.5), rates(0.2), 100),
                    phase(lab.secs(6.0, 1.0), rates(12.0), 100),
                    phase(lab.secs(2.0, 0.5), rates(0.2), 100),
                ],
                client,
                seed: 200,
            }]
        }
        Scenario::Deadline => vec![TrialSpec {
            label: "2x".into(),
            phases: vec![phase(lab.secs(6.0, 1.0), lab.mixed(2.0), 100)],
            client: ClientConfig {
                deadline: Duration::from_millis(150),
                attempt_timeout: Duration::from_millis(150),
                ..client
            },
            seed: 300,
        }],
        Scenario::Metastable => vec![TrialSpec {
            label: "0.7x".into(),
            phases: vec![
                phase(lab.secs(10.0, 1.0), lab.mixed(0.7), 100),
                phase(lab.secs(10.0, 1.0), lab.mixed(0.7), 200),
                phase(lab.secs(20.0, 2.0), lab.mixed(0.7), 100),
            ],
            client,
            seed: 400,
        }],
    }
}

/// The whole load of a trial.
fn whole(spec: &TrialSpec) -> Window {
    Window {
        start: Duration::ZERO,
        end: spec.duration(),
    }
}

/// The load of a single-phase trial after its warm-up (a sixth of it).
fn settled(spec: &TrialSpec) -> Window {
    let d = spec.duration();
    Window {
        start: d / 6,
        end: d,
    }
}

/// Phase `i` of a trial.
fn phase_window(spec: &TrialSpec, i: usize) -> Window {
    let start = spec.phase_start(i);
    Window {
        start,
        end: start + spec.phases[i].duration,
    }
}

/// "achieved (target)" offered rate over `w`.
fn offered(t: &Trial, s: &Summary, w: Window) -> String {
    format!(
        "{:.0} ({:.0})",
        s.offered_rate,
        t.spec.target_rate(w.start, w.end, None)
    )
}

/// How late the generator sent requests behind their Poisson schedule. It
/// kept up when no send was 100 ms late: then no backlog built up and the
/// offered rate over any 1 s window is off by at most a tenth. (The offered
/// column compares the realized Poisson count with its mean, which also
/// varies by chance.)
fn generator_check(table: &mut Table, trials: &[Trial]) {
    for policy in Policy::ALL {
        let records = trials
            .iter()
            .filter(|t| t.policy == policy)
            .flat_map(|t| &t.records);
        let (p99, max) = metrics::send_lag_ms(records);
        if p99.is_finite() {
            let state = if max < 100.0 {
                "kept up"
            } else {
                "FELL BEHIND"
            };
            table.note(format!(
                "{policy}: generator {state} (no send 100 ms late): send lag behind the arrival schedule \
                 p99 {p99:.1} ms, max {max:.1} ms"
            ));
        }
    }
}

fn steady_table(lab: &Lab, trials: &[Trial]) -> Table {
    let cap = lab.capacity();
    let mut table = Table::new(
        format!(
            "steady: mixed classes, offered load swept; nominal capacity {cap:.0} req/s ({} workers x {} ms mean); \
             figures after a warm-up of 1/6 of each step; goal (for shed): goodput >= 90% of capacity at 2x and 4x",
            lab.workers,
            lab.service.mean.as_millis()
        ),
        &[
            "load", "policy", "offered/s (target)", "goodput/s", "of cap", "success", "attempts/req", "p50 ms", "p99 ms",
            "failed attempts", "wasted work", "goal",
        ],
    );
    for t in trials {
        let w = settled(&t.spec);
        let s = Summary::of(&t.records, w, None);
        let multiple = t.spec.target_rate(w.start, w.end, None) / cap;
        let goal = if multiple >= 1.99 {
            verdict(s.goodput >= 0.9 * cap)
        } else {
            "-".into()
        };
        table.row(vec![
            t.spec.label.clone(),
            t.policy.to_string(),
            offered(t, &s, w),
            num(s.goodput, 0),
            pct(s.goodput / cap, 0),
            pct(s.success_ratio(), 1),
            num(s.amplification(), 2),
            num(s.p50_ms, 0),
            num(s.p99_ms, 0),
            s.failures_label(),
            pct(metrics::wasted_ratio(&t.server.total()), 1),
            goal,
        ]);
    }
    for policy in Policy::ALL {
        let goodputs: Vec<(String, f64)> = trials
            .iter()
            .filter(|t| t.policy == policy)
            .map(|t| {
                (
                    t.spec.label.clone(),
                    Summary::of(&t.records, settled(&t.spec), None).goodput,
                )
            })
            .collect();
        let best = goodputs.iter().map(|(_, g)| *g).fold(f64::NAN, f64::max);
        if let Some((label, last)) = goodputs.last().filter(|_| goodputs.len() > 1) {
            table.note(format!(
                "{policy}: goodput at {label} is {} of its best step ({last:.0}/s vs {best:.0}/s)",
                pct(last / best, 0)
            ));
        }
    }
    table
}

fn isolation_table(lab: &Lab, trials: &[Trial]) -> Table {
    let mut table = Table::new(
        format!(
            "isolation: interactive at 40% of capacity, batch spiking from 0.2x to 12x; figures over the spike; \
             nominal capacity {:.0} req/s; goal (for shed): interactive success >= 99.5% while more than half of all attempts are shed",
            lab.capacity()
        ),
        &[
            "policy", "offered/s (target)", "interactive success", "interactive p99 ms", "interactive goodput/s",
            "batch goodput/s", "shed attempts", "attempts/req", "failed attempts", "wasted work", "goal",
        ],
    );
    for t in trials {
        let w = phase_window(&t.spec, 1);
        let all = Summary::of(&t.records, w, None);
        let inter = Summary::of(&t.records, w, Some(Class::Interactive));
        let batch = Summary::of(&t.records, w, Some(Class::Batch));
        table.row(vec![
            t.policy.to_string(),
            offered(t, &all, w),
            pct(inter.success_ratio(), 2),
            num(inter.p99_ms, 0),
            num(inter.goodput, 0),
            num(batch.goodput, 0),
            pct(all.shed_ratio(), 1),
            num(all.amplification(), 2),
            all.failures_label(),
            pct(metrics::wasted_ratio(&t.server.total()), 1),
            verdict(inter.success_ratio() >= 0.995 && all.shed_ratio() > 0.5),
        ]);
        table.note(format!(
            "{}: interactive failed attempts over the spike: {}",
            t.policy,
            inter.failures_label()
        ));
    }
    table
}

fn deadline_table(lab: &Lab, trials: &[Trial]) -> Table {
    let cap = lab.capacity();
    let mut table = Table::new(
        format!(
            "deadline: mixed classes at 2x with a 150 ms deadline per request; nominal capacity {cap:.0} req/s; \
             goal (for shed): at most 5% of server work goes to requests whose deadline had passed (work past deadline); \
             wasted work counts the whole of every job that finished late or whose caller had gone"
        ),
        &[
            "policy", "offered/s (target)", "goodput/s", "of cap", "success", "attempts/req", "p99 ms", "failed attempts",
            "late jobs", "wasted work", "work past deadline", "goal",
        ],
    );
    for t in trials {
        let w = settled(&t.spec);
        let s = Summary::of(&t.records, w, None);
        let total = t.server.total();
        let wasted = metrics::wasted_ratio(&total);
        let past_deadline = metrics::past_deadline_ratio(&total);
        table.row(vec![
            t.policy.to_string(),
            offered(t, &s, w),
            num(s.goodput, 0),
            pct(s.goodput / cap, 0),
            pct(s.success_ratio(), 1),
            num(s.amplification(), 2),
            num(s.p99_ms, 0),
            s.failures_label(),
            format!("{}/{}", total.late, total.completed),
            pct(wasted, 1),
            pct(past_deadline, 1),
            verdict(past_deadline <= 0.05),
        ]);
    }
    table
}

/// Goodput (by completion) over `[from, from + span)`, per second.
fn goodput_between(t: &Trial, from: Duration, span: Duration) -> f64 {
    let to = from + span;
    let n = t
        .records
        .iter()
        .filter(|r| r.success && from <= r.end && r.end < to)
        .count();
    n as f64 / span.as_secs_f64()
}

/// Jobs waiting for a worker at the last sample taken by `at`.
fn queued_at(t: &Trial, at: Duration) -> String {
    t.samples
        .iter()
        .take_while(|(when, _)| *when <= at.as_secs_f64())
        .last()
        .map_or("-".into(), |(_, s)| s.queued.to_string())
}

fn metastable_table(lab: &Lab, trials: &[Trial]) -> Table {
    let mut table = Table::new(
        format!(
            "metastable: mixed classes at 70% of capacity ({:.0} req/s nominal), service time doubled during the trigger; \
             callers retry (3 attempts, 250 ms attempt timeout, 1 s deadline); recovery = first time after the trigger \
             from which the goodput over the next 2 s is >= 90% of the pre-trigger level; goal (for shed): recovery <= 2 s",
            lab.capacity()
        ),
        &[
            "policy", "offered/s (target)", "pre goodput/s", "trigger goodput/s", "after goodput/s", "end goodput/s",
            "after attempts/req", "recovery", "collapsed at end", "queue: trigger end/end", "wasted work", "goal",
        ],
    );
    let step = Duration::from_millis(100);
    let window = Duration::from_secs(2);
    for t in trials {
        let pre = phase_window(&t.spec, 0);
        let trig = phase_window(&t.spec, 1);
        let post = phase_window(&t.spec, 2);
        let warm = Window {
            start: pre.start + (pre.end - pre.start) / 5,
            ..pre
        };
        let all = Summary::of(&t.records, whole(&t.spec), None);
        let pre_level = goodput_between(t, warm.start, warm.end - warm.start);
        let during = goodput_between(t, trig.start, trig.end - trig.start);
        let after = Summary::of(&t.records, post, None);
        let tail = (post.end - post.start).min(Duration::from_secs(5));
        let end_level = goodput_between(t, post.end - tail, tail);
        let last_start = post.end.saturating_sub(window);
        let recovery = (0..)
            .map(|i| post.start + step * i)
            .take_while(|&at| at <= last_start)
            .find(|&at| goodput_between(t, at, window) >= 0.9 * pre_level)
            .map(|at| at - post.start);
        let collapsed = end_level < 0.5 * pre_level;
        table.row(vec![
            t.policy.to_string(),
            offered(t, &all, whole(&t.spec)),
            num(pre_level, 0),
            num(during, 0),
            num(after.goodput, 0),
            num(end_level, 0),
            num(after.amplification(), 2),
            recovery.map_or("never".into(), |d| format!("{:.1} s", d.as_secs_f64())),
            if collapsed { "yes" } else { "no" }.into(),
            format!("{}/{}", queued_at(t, trig.end), queued_at(t, post.end)),
            pct(metrics::wasted_ratio(&t.server.total()), 1),
            verdict(recovery.is_some_and(|d| d <= Duration::from_secs(2))),
        ]);
    }
    table
}

/// The plots of a scenario.
fn plots(
    lab: &Lab,
    scenario: Scenario,
    trials: &[Trial],
) -> Result<Vec<PathBuf>, Box<dyn std::error::Error>> {
    // Goodput per policy over the load (not the drain), plus the offered
    // load, which is the same for every policy (same seeds).
    let over_time = |class: Option<Class>| -> Vec<Series> {
        let series =
            |t: &Trial| metrics::time_series(&t.records, lab.bucket(), t.spec.duration(), class);
        let mut lines: Vec<Series> = trials
            .iter()
            .map(|t| Series {
                name: format!("{} goodput", t.policy),
                points: series(t).iter().map(|b| (b.t, b.goodput)).collect(),
            })
            .collect();
        if let Some(t) = trials.first() {
            lines.push(Series {
                name: "offered".into(),
                points: series(t).iter().map(|b| (b.t, b.offered)).collect(),
            });
        }
        lines
    };
    let path = lab.out_dir.join(format!("{scenario}_goodput.svg"));
    match scenario {
        Scenario::Steady => {
            let mut series: Vec<Series> = Policy::ALL
                .into_iter()
                .filter(|p| trials.iter().any(|t| t.policy == *p))
                .map(|p| Series {
                    name: p.to_string(),
                    points: trials
                        .iter()
                        .filter(|t| t.policy == p)
                        .map(|t| {
                            let s = Summary::of(&t.records, settled(&t.spec), None);
                            (s.offered_rate, s.goodput)
                        })
                        .collect(),
                })
                .collect();
            let x_max = series
                .iter()
                .flat_map(|s| &s.points)
                .map(|p| p.0)
                .fold(0.0, f64::max);
            series.push(Series {
                name: "nominal capacity".into(),
                points: vec![(0.0, lab.capacity()), (x_max, lab.capacity())],
            });
            plot::line_chart(
                &path,
                "steady: goodput against offered load",
                "offered req/s",
                "goodput req/s",
                &series,
            )?;
        }
        Scenario::Isolation => plot::line_chart(
            &path,
            &format!(
                "isolation: interactive goodput; batch at 12x from {:.0} s to {:.0} s",
                phase_start(trials, 1),
                phase_start(trials, 2),
            ),
            "seconds",
            "interactive req/s",
            &over_time(Some(Class::Interactive)),
        )?,
        Scenario::Deadline => plot::line_chart(
            &path,
            "deadline: goodput at 2x with 150 ms deadlines",
            "seconds",
            "req/s",
            &over_time(None),
        )?,
        Scenario::Metastable => plot::line_chart(
            &path,
            &format!(
                "metastable: goodput; capacity halved from {:.0} s to {:.0} s",
                phase_start(trials, 1),
                phase_start(trials, 2),
            ),
            "seconds",
            "req/s",
            &over_time(None),
        )?,
    }
    Ok(vec![path])
}

/// When phase `phase` of the scenario's trials begins, in seconds (0 without trials).
fn phase_start(trials: &[Trial], phase: usize) -> f64 {
    trials
        .first()
        .map_or(0.0, |t| t.spec.phase_start(phase).as_secs_f64())
}
