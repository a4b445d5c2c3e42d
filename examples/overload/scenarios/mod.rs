//! The scenarios of the lab: what each runs, against which policies, and
//! how it is judged (one module per scenario).
//!
//! Every scenario follows the same rules. The service is calibrated first
//! (`calibrate.rs`; once per service and placement in a run, printed), and
//! load multiples are of the measured capacity. Every policy runs the same
//! load (same seeds, same service-time draws) with the same clients, which
//! honour `Retry-After` whenever a server sends one. Steady figures are
//! taken over at least 20 s after a warm-up. Goals are judged from the
//! run's own records, against references measured in the same run
//! (`shed@true`, `tower@true`) or against the calibration.

mod capacity_drop;
mod cpu_bound;
mod deadline;
pub mod figures;
mod fleet;
mod grpc;
mod isolation;
mod metastable;
mod shadow;
mod steady;
mod unknown_capacity;

use std::{fmt, fs, path::PathBuf, str::FromStr, time::Duration, time::Instant};

use crate::{
    calibrate::{self, Calibration, Plan},
    client::ClientConfig,
    downstream::ServiceTime,
    goal::Goals,
    metrics::Summary,
    policy::{Policy, ServerPolicy},
    process::{Launcher, PinnedSelf},
    report::{self, Table},
    server::{ServerConfig, ServiceSpec},
    soak,
    target::{Placement, Target},
    trial::{self, Trial, TrialSpec},
};

/// Shares of the offered load per class (critical, interactive, batch,
/// background) in mixed scenarios.
pub const MIX: [f64; 4] = [0.1, 0.5, 0.3, 0.1];

/// Everything a lab run is configured with.
#[derive(Clone, Debug)]
pub struct Lab {
    /// The default service: K workers and their service time.
    pub workers: usize,
    /// The default service time.
    pub service: ServiceTime,
    /// Short smoke durations instead of the full ones.
    pub quick: bool,
    /// The policies to compare; `None`: each scenario's own set.
    pub policies: Option<Vec<Policy>>,
    /// Where CSV and SVG files go.
    pub out_dir: PathBuf,
    /// How to start the lab's binary as a child server.
    pub launcher: Launcher,
    /// Length of the soak's load.
    pub soak: Duration,
}

impl Lab {
    /// `full` normally, `quick` in quick mode.
    pub fn secs(&self, full: f64, quick: f64) -> Duration {
        Duration::from_secs_f64(if self.quick { quick } else { full })
    }

    /// Width of time-series buckets.
    pub fn bucket(&self) -> Duration {
        Duration::from_millis(500)
    }

    /// The warm-up before a steady window.
    pub fn warm_up(&self) -> Duration {
        self.secs(4.0, 0.5)
    }

    /// The length of a steady window.
    pub fn measured(&self) -> Duration {
        self.secs(20.0, 1.0)
    }

    /// The default service: K workers of the lab's service time.
    pub fn downstream(&self) -> ServiceSpec {
        ServiceSpec::Downstream {
            workers: self.workers,
            time: self.service,
        }
    }

    /// Callers with a 1 s deadline, 250 ms attempts, up to 3 attempts.
    pub fn client(&self) -> ClientConfig {
        ClientConfig::standard()
    }
}

/// A scenario of the lab.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// Mixed classes, offered load swept from 0.9x to 4x capacity.
    Steady,
    /// Interactive at 40% steady while batch spikes to 12x.
    Isolation,
    /// Tight deadlines at 2x.
    Deadline,
    /// 70% load, capacity halved for a while, then restored.
    Metastable,
    /// shed with no limit given against guessed and true limits.
    UnknownCapacity,
    /// The same on a CPU-bound server pinned to one core.
    CpuBound,
    /// Service time tripled for 15 s under 0.8x load, then restored.
    CapacityDrop,
    /// Shadow mode's would-be refusals against enforcing mode's, at 1.5x and 2x.
    Shadow,
    /// The steady mix at 2x over gRPC (tonic clients) beside HTTP.
    Grpc,
    /// Ten minutes at 4x against a server in its own process (not default).
    Soak,
    /// Three replicas behind HAProxy, three client processes, one replica
    /// degraded (not default).
    Fleet,
}

impl Scenario {
    /// The scenarios run when none is named, in run order (all but the soak).
    pub const DEFAULT: [Scenario; 9] = [
        Scenario::Steady,
        Scenario::Isolation,
        Scenario::Deadline,
        Scenario::Metastable,
        Scenario::UnknownCapacity,
        Scenario::CpuBound,
        Scenario::CapacityDrop,
        Scenario::Shadow,
        Scenario::Grpc,
    ];

    /// The name used on the command line and in file names.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Steady => "steady",
            Scenario::Isolation => "isolation",
            Scenario::Deadline => "deadline",
            Scenario::Metastable => "metastable",
            Scenario::UnknownCapacity => "unknown-capacity",
            Scenario::CpuBound => "cpu-bound",
            Scenario::CapacityDrop => "capacity-drop",
            Scenario::Shadow => "shadow",
            Scenario::Grpc => "grpc",
            Scenario::Soak => "soak",
            Scenario::Fleet => "fleet",
        }
    }

    /// The policies it compares unless `--policies` says otherwise.
    pub fn default_policies(self) -> Vec<Policy> {
        let list = match self {
            Scenario::UnknownCapacity | Scenario::CpuBound => {
                "shed,shed@64,tower@64,shed@true,tower@true"
            }
            Scenario::CapacityDrop => "shed,shed@true,tower@true",
            Scenario::Shadow => "shed,shadow",
            Scenario::Grpc => "none,tower@true,shed",
            Scenario::Soak => "shed",
            Scenario::Fleet => "none,shed",
            _ => "none,tower@true,shed@true,shed",
        };
        crate::policy::parse_list(list).expect("the default policy lists parse")
    }

    /// The service it runs against.
    fn service(self, lab: &Lab) -> ServiceSpec {
        match self {
            Scenario::Isolation => isolation::service(lab),
            Scenario::CpuBound => cpu_bound::SERVICE,
            Scenario::Fleet => fleet::service(lab),
            _ => lab.downstream(),
        }
    }

    /// Its trials (the same for every policy) for a measured `capacity`.
    fn specs(self, lab: &Lab, capacity: f64) -> Vec<TrialSpec> {
        match self {
            Scenario::Steady => steady::specs(lab, capacity),
            Scenario::Isolation => isolation::specs(lab, capacity),
            Scenario::Deadline => deadline::specs(lab, capacity),
            Scenario::Metastable => metastable::specs(lab, capacity),
            Scenario::UnknownCapacity | Scenario::CpuBound => {
                unknown_capacity::specs(lab, capacity)
            }
            Scenario::CapacityDrop => capacity_drop::specs(lab, capacity),
            Scenario::Shadow => shadow::specs(lab, capacity),
            Scenario::Grpc => grpc::specs(lab, capacity),
            Scenario::Soak | Scenario::Fleet => Vec::new(),
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
        Scenario::DEFAULT
            .into_iter()
            .chain([Scenario::Soak, Scenario::Fleet])
            .find(|x| x.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown scenario {s:?} (expected steady, isolation, deadline, metastable, \
                     unknown-capacity, cpu-bound, capacity-drop, shadow, grpc, soak, fleet or all)"
                )
            })
    }
}

/// What one scenario run sees: the lab, its service and its calibration.
pub struct Ctx<'a> {
    /// The lab's configuration.
    pub lab: &'a Lab,
    /// The service the scenario runs against.
    pub service: ServiceSpec,
    /// Its calibration.
    pub cal: &'a Calibration,
    /// The policies compared, in table order.
    pub policies: Vec<Policy>,
}

impl Ctx<'_> {
    /// The calibrated capacity, requests per second.
    pub fn capacity(&self) -> f64 {
        self.cal.capacity()
    }

    /// What `true` stands for in policy names, for table titles.
    pub fn true_note(&self) -> String {
        format!(
            "capacity {:.0} req/s and true concurrency {} (calibrated); no-load p99 {:.1} ms",
            self.cal.capacity(),
            self.cal.true_concurrency(),
            self.cal.no_load_p99_ms()
        )
    }
}

/// Where a scenario's servers run, and what the lab did to get there.
pub struct Setup {
    /// Where the servers run.
    pub placement: Placement,
    /// Lines for the table (pinning, or why there is none).
    pub notes: Vec<String>,
    /// The lab's own pinning, undone when the setup is dropped.
    pub pinned: Option<PinnedSelf>,
}

impl Setup {
    fn local() -> Setup {
        Setup {
            placement: Placement::Local,
            notes: Vec::new(),
            pinned: None,
        }
    }

    /// A key telling calibrations of the same service apart by placement.
    fn key(&self, service: &ServiceSpec) -> String {
        match &self.placement {
            Placement::Local => format!("{service}, in the lab's process"),
            Placement::Child { cpu, threads, .. } => format!(
                "{service}, in its own process ({}{})",
                match threads {
                    0 => "a runtime thread per CPU".to_owned(),
                    1 => "one runtime thread".to_owned(),
                    n => format!("{n} runtime threads"),
                },
                cpu.map_or(String::new(), |c| format!(", pinned to CPU {c}"))
            ),
        }
    }
}

/// The calibrations made so far in this run, so each service and placement
/// is calibrated once.
#[derive(Default)]
pub struct Calibrations(Vec<(String, Calibration)>);

impl Calibrations {
    /// The calibration of `service` at `setup`, made now if not yet made.
    /// A new one is printed to stdout.
    pub async fn get(
        &mut self,
        lab: &Lab,
        service: ServiceSpec,
        setup: &Setup,
    ) -> Result<Calibration, String> {
        let key = setup.key(&service);
        if let Some((_, c)) = self.0.iter().find(|(k, _)| *k == key) {
            return Ok(c.clone());
        }
        let plan = Plan::for_parallelism(service.parallelism(), lab.quick);
        let config = ServerConfig {
            policy: ServerPolicy::None,
            service,
            seed: plan.seed,
            load_feedback: false,
        };
        let target = Target::start(&config, &setup.placement).await?;
        eprintln!("[calibrate] {key}");
        let cal = calibrate::run(target.addr(), &target.control(), &plan, &key).await;
        if let Some(exit) = target.stop().await {
            if exit.panicked() {
                return Err(format!("the calibration server panicked:\n{}", exit.stderr));
            }
        }
        let cal = cal?;
        println!("{cal}\n");
        self.0.push((key, cal.clone()));
        Ok(cal)
    }
}

/// What one scenario produced.
pub struct ScenarioRun {
    /// Which scenario.
    pub scenario: Scenario,
    /// Every trial that ran, all policies and steps.
    pub trials: Vec<Trial>,
    /// The tables for stdout: figures, then goals.
    pub tables: Vec<Table>,
    /// The goals, judged.
    pub goals: Goals,
    /// Files written under the results folder.
    pub files: Vec<PathBuf>,
}

/// The report of a scenario: its figures table and its goals.
pub struct Report {
    /// Figures per trial (or step and policy).
    pub figures: Table,
    /// The goals, judged.
    pub goals: Goals,
}

/// Runs the trials of `specs` for every policy of `ctx` against servers
/// placed as `placement` says.
async fn run_trials(
    ctx: &Ctx<'_>,
    scenario: Scenario,
    placement: &Placement,
    specs: &[TrialSpec],
) -> Result<Vec<Trial>, String> {
    let mut trials = Vec::new();
    for &policy in &ctx.policies {
        for spec in specs {
            let began = Instant::now();
            let config = ServerConfig {
                policy: policy.resolve(ctx.cal.true_concurrency()),
                service: ctx.service,
                seed: spec.seed,
                load_feedback: false,
            };
            eprintln!(
                "[{scenario}] {policy:<10} {:<6} running {:.0} s of load ...",
                spec.label,
                spec.duration().as_secs_f64()
            );
            let target = Target::start(&config, placement).await?;
            let t = trial::run(target, policy, spec.clone(), ctx.lab.bucket()).await?;
            let all = Summary::of(&t.records, figures::whole(&t.spec), None);
            eprintln!(
                "[{scenario}] {policy:<10} {:<6} done in {:.1} s: offered {:.0}/s, goodput {:.0}/s",
                t.spec.label,
                began.elapsed().as_secs_f64(),
                all.offered_rate,
                all.goodput
            );
            if let Some(engine) = t.server.engine {
                eprintln!(
                    "[{scenario}] {policy:<10} {:<6} engine refusals over the trial: {}; adaptive-limit probes {}, back-offs {}",
                    t.spec.label, engine.refusals, engine.probes, engine.back_offs
                );
                if engine.would.total() > 0 {
                    eprintln!(
                        "[{scenario}] {policy:<10} {:<6} refusals it would have made: {}",
                        t.spec.label, engine.would
                    );
                }
            }
            trials.push(t);
        }
    }
    Ok(trials)
}

/// Runs `scenario` for its policies and writes its files.
pub async fn run(
    lab: &Lab,
    scenario: Scenario,
    calibrations: &mut Calibrations,
) -> Result<ScenarioRun, Box<dyn std::error::Error>> {
    fs::create_dir_all(&lab.out_dir)?;
    let policies = lab
        .policies
        .clone()
        .unwrap_or_else(|| scenario.default_policies());
    if scenario == Scenario::Soak {
        return Ok(soak::run(lab, &policies, calibrations).await?);
    }
    if scenario == Scenario::Fleet {
        return Ok(fleet::run(lab, calibrations).await?);
    }
    let (service, setup) = match scenario {
        // Measured after this process is pinned to its own CPU.
        Scenario::CpuBound => {
            let setup = cpu_bound::setup(lab);
            (cpu_bound::measured(), setup)
        }
        _ => (scenario.service(lab), Setup::local()),
    };
    let cal = calibrations.get(lab, service, &setup).await?;
    let ctx = Ctx {
        lab,
        service,
        cal: &cal,
        policies,
    };
    // The capacity the drop leaves is measured too, before the trials.
    let reduced = match scenario {
        Scenario::CapacityDrop => Some(capacity_drop::measure_reduced(&ctx, &setup).await?),
        _ => None,
    };
    let specs = scenario.specs(lab, cal.capacity());
    let trials = run_trials(&ctx, scenario, &setup.placement, &specs).await?;
    drop(setup.pinned);

    let mut report = match scenario {
        Scenario::Steady => steady::report(&ctx, &trials),
        Scenario::Isolation => isolation::report(&ctx, &trials),
        Scenario::Deadline => deadline::report(&ctx, &trials),
        Scenario::Metastable => metastable::report(&ctx, &trials),
        Scenario::UnknownCapacity => unknown_capacity::report(&ctx, &trials, scenario, 1.5),
        Scenario::CpuBound => cpu_bound::report(&ctx, &trials),
        Scenario::CapacityDrop => capacity_drop::report(&ctx, &trials, reduced),
        Scenario::Shadow => shadow::report(&ctx, &trials),
        Scenario::Grpc => grpc::report(&ctx, &trials),
        Scenario::Soak | Scenario::Fleet => unreachable!("returned above"),
    };
    for note in &setup.notes {
        report.figures.note(note.clone());
    }
    figures::generator_check(&mut report.figures, &trials);
    figures::child_check(&mut report.figures, &trials);
    let (passed, judged) = report.goals.passed();
    let goals_table = report.goals.table(format!(
        "{scenario} goals: {passed} of {judged} judged goals PASS"
    ));

    let mut files = Vec::new();
    let summary = lab.out_dir.join(format!("{scenario}_summary.csv"));
    report.figures.write_csv(&summary)?;
    files.push(summary);
    let goals_csv = lab.out_dir.join(format!("{scenario}_goals.csv"));
    goals_table.write_csv(&goals_csv)?;
    files.push(goals_csv);
    files.extend(report::write_time_series(
        &lab.out_dir,
        scenario.name(),
        &trials,
        lab.bucket(),
    )?);
    let plot = lab.out_dir.join(format!("{scenario}_goodput.svg"));
    match scenario {
        Scenario::Steady => steady::plot(&ctx, &trials, &plot)?,
        Scenario::Isolation => isolation::plot(&ctx, &trials, &plot)?,
        Scenario::Deadline => deadline::plot(&ctx, &trials, &plot)?,
        Scenario::Metastable => metastable::plot(&ctx, &trials, &plot)?,
        Scenario::UnknownCapacity | Scenario::CpuBound => {
            unknown_capacity::plot(&ctx, &trials, scenario, &plot)?
        }
        Scenario::CapacityDrop => capacity_drop::plot(&ctx, &trials, &plot)?,
        Scenario::Shadow => shadow::plot(&ctx, &trials, &plot)?,
        Scenario::Grpc => grpc::plot(&ctx, &trials, &plot)?,
        Scenario::Soak | Scenario::Fleet => unreachable!("returned above"),
    }
    files.push(plot);
    Ok(ScenarioRun {
        scenario,
        trials,
        tables: vec![report.figures, goals_table],
        goals: report.goals,
        files,
    })
}

/// Seconds of load, trials and calibration a run of `scenarios` will take,
/// before any measurement (for the plan printed at the start).
pub fn planned_secs(lab: &Lab, scenarios: &[Scenario]) -> (usize, f64) {
    let mut trials = 0;
    let mut secs = 0.0;
    let mut calibrated: Vec<ServiceSpec> = Vec::new();
    for &s in scenarios {
        let policies = lab
            .policies
            .clone()
            .unwrap_or_else(|| s.default_policies())
            .len();
        let service = s.service(lab);
        if s != Scenario::Soak && !calibrated.contains(&service) {
            calibrated.push(service);
            let plan = Plan::for_parallelism(service.parallelism(), lab.quick);
            // The sweep but its first step, per pass.
            let steps = (plan.sweep_len() - 1) * plan.passes;
            secs += plan.no_load.as_secs_f64()
                + plan.step.as_secs_f64() * steps as f64
                + plan.capacity_step.as_secs_f64();
        }
        if s == Scenario::CapacityDrop {
            secs += capacity_drop::reduced_step(lab).as_secs_f64();
        }
        if s == Scenario::Soak {
            trials += policies;
            secs += policies as f64 * (lab.soak.as_secs_f64() + 50.0);
            continue;
        }
        if s == Scenario::Fleet {
            let (arms, load) = fleet::planned(lab);
            trials += arms;
            secs += load.as_secs_f64();
            continue;
        }
        for spec in s.specs(lab, 1.0) {
            trials += policies;
            // The drain after the load: up to the callers' deadline.
            secs += policies as f64 * (spec.duration() + spec.client.deadline).as_secs_f64();
        }
    }
    (trials, secs)
}
