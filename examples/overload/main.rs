//! The overload lab: a real axum service with finite capacity on loopback,
//! calibrated, then driven by open-loop load with retrying clients under
//! several admission policies side by side.
//!
//! ```text
//! cargo run --release --example overload -- [SCENARIO...|all] [--quick] [--policies P,P,...]
//!     [--workers K] [--service-ms MS] [--service-dist exp|constant] [--soak-secs S] [--out DIR]
//! cargo run --release --example overload -- serve [--addr ADDR] [--policy P] [--service downstream|cpu]
//!     [--workers K] [--service-ms MS] [--service-dist exp|constant] [--cpu-work-ms MS] [--cpu-iterations N]
//!     [--threads N] [--seed S] [--quick] [--exit-with-stdin]
//! ```
//!
//! `serve` with a policy naming `true` calibrates its service first (shorter
//! with `--quick`); `--threads 1` runs it on a one-thread runtime (0, the
//! default: one per CPU); `--exit-with-stdin` ends it when its stdin closes
//! (how the lab's child servers never outlive the lab). A shed engine's
//! settings change while it serves: `PUT /admin/shed/limit_bounds/4/64`,
//! `.../target_sojourn_ms/20`, `.../max_wait_ms/batch/300`, `.../limit/12`,
//! `.../retry_after_cap_s/5` (see `tuning.rs`).
//!
//! Policies: `none`, `tower@N`, `shed` (engine defaults), `shed@N`, with `N`
//! a number or `true` (the true concurrency the calibration finds).
//! Scenarios: `steady`, `isolation`, `deadline`, `metastable`,
//! `unknown-capacity`, `cpu-bound`, `capacity-drop` (the default set), and
//! `soak` (only when named). Tables go to stdout, progress to stderr, CSV
//! and SVG files to `results/`. Every figure is measured from the run's own
//! records.
//!
//! `cargo test` runs a `--quick` pass of every default scenario and a short
//! soak (the tests at the bottom of this file; `test = true` in Cargo.toml).

#![forbid(unsafe_code)]

mod admin;
mod calibrate;
mod class;
mod client;
mod cpu;
mod downstream;
mod draw;
mod drive;
mod exposition;
mod goal;
mod grpc;
mod haproxy;
mod load;
mod metrics;
mod plot;
mod policy;
mod process;
mod report;
mod request_deadline;
mod scenarios;
mod server;
mod soak;
mod target;
mod trial;
mod tuning;
mod work;

use std::{
    net::SocketAddr,
    path::PathBuf,
    process::ExitCode,
    time::{Duration, Instant},
};

use downstream::{Distribution, ServiceTime};
use policy::{Policy, ServerPolicy};
use process::Launcher;
use scenarios::{Calibrations, Lab, Scenario};
use server::{Server, ServerConfig, ServiceSpec};

/// Default K.
const WORKERS: usize = 8;
/// Default mean service time of the worker pool.
const SERVICE_MS: u64 = 20;
/// Default length of the soak.
const SOAK_SECS: f64 = 600.0;

const USAGE: &str = "usage:
  overload [SCENARIO...|all] [--quick] [--policies P,P,...] [--workers K] [--service-ms MS]
           [--service-dist exp|constant] [--soak-secs S] [--out DIR]
  overload serve [--addr ADDR] [--policy P] [--service downstream|cpu] [--workers K]
           [--service-ms MS] [--service-dist exp|constant] [--cpu-work-ms MS]
           [--cpu-iterations N] [--threads N] [--seed S] [--quick] [--exit-with-stdin]
           [--load-feedback]
policies: none, tower@N, shed, shed@N, shadow, shadow@N (N a number, or `true`: the calibrated
          true concurrency; shadow: the shed engine in shadow mode)
scenarios: steady, isolation, deadline, metastable, unknown-capacity, cpu-bound, capacity-drop,
           shadow, grpc (the default set, also `all`), soak, fleet (only when named; fleet runs
           HAProxy, installing Debian's package when missing, and `overload drive` client processes)
  overload drive --target ADDR --rates R,R,R,R --secs S [--seed N] [--start-at-ms UNIX_MS]
           (one client process of the fleet: prints one line per request)
the server answers GET /{critical,interactive,batch,background} over HTTP/1.1 and HTTP/2, and the
unary gRPC methods lab.v1.Lab/{Critical,Interactive,Batch,Background} (Empty -> StringValue)";

/// What the command line asked for.
enum Command {
    Lab {
        scenarios: Vec<Scenario>,
        lab: Lab,
    },
    /// One client process of the fleet scenario.
    Drive(drive::DriveSpec),
    Serve {
        addr: SocketAddr,
        policy: Policy,
        service: ServiceSpec,
        /// Runtime worker threads: 1 a current-thread runtime, 0 one per CPU.
        threads: usize,
        seed: u64,
        exit_with_stdin: bool,
        quick: bool,
        /// A shed policy states its load on every answer.
        load_feedback: bool,
    },
}

fn number<T: std::str::FromStr>(flag: &str, v: String) -> Result<T, String>
where
    T::Err: std::fmt::Display,
{
    v.parse().map_err(|e| format!("{flag}: {e}"))
}

fn parse(args: &[String], launcher: Launcher) -> Result<Command, String> {
    if args.first().is_some_and(|a| a == "drive") {
        return drive::DriveSpec::parse(&args[1..]).map(Command::Drive);
    }
    let mut positional = Vec::new();
    let mut quick = false;
    let mut policies = None;
    let mut policy = Policy::None;
    let mut workers = WORKERS;
    let mut service_us = SERVICE_MS * 1000;
    let mut distribution = Distribution::Exponential;
    let mut cpu_service = false;
    let mut cpu_work_us = 10_000u64;
    let mut cpu_iterations = None;
    let mut threads = 0usize;
    let mut seed = 1u64;
    let mut exit_with_stdin = false;
    let mut load_feedback = false;
    let mut soak_secs = SOAK_SECS;
    let mut addr: SocketAddr = ([127, 0, 0, 1], 3000).into();
    let mut out = PathBuf::from("results");
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match arg.as_str() {
            "--quick" => quick = true,
            "--policies" => policies = Some(policy::parse_list(&value(arg)?)?),
            "--policy" => policy = value(arg)?.parse()?,
            "--workers" => workers = number(arg, value(arg)?)?,
            "--service-ms" => service_us = number::<u64>(arg, value(arg)?)?.saturating_mul(1000),
            "--service-us" => service_us = number(arg, value(arg)?)?,
            "--service-dist" => {
                distribution = match value(arg)?.as_str() {
                    "exp" => Distribution::Exponential,
                    "constant" => Distribution::Constant,
                    other => {
                        return Err(format!("--service-dist: {other:?} is not exp or constant"))
                    }
                }
            }
            "--service" => {
                cpu_service = match value(arg)?.as_str() {
                    "downstream" => false,
                    "cpu" => true,
                    other => return Err(format!("--service: {other:?} is not downstream or cpu")),
                }
            }
            "--cpu-work-ms" => cpu_work_us = number::<u64>(arg, value(arg)?)?.saturating_mul(1000),
            "--cpu-work-us" => cpu_work_us = number(arg, value(arg)?)?,
            "--cpu-iterations" => cpu_iterations = Some(number::<u64>(arg, value(arg)?)?),
            "--threads" => threads = number(arg, value(arg)?)?,
            "--seed" => seed = number(arg, value(arg)?)?,
            "--exit-with-stdin" => exit_with_stdin = true,
            "--load-feedback" => load_feedback = true,
            "--soak-secs" => soak_secs = number(arg, value(arg)?)?,
            "--addr" => addr = number(arg, value(arg)?)?,
            "--out" => out = value(arg)?.into(),
            "-h" | "--help" => return Err(USAGE.into()),
            flag if flag.starts_with('-') => return Err(format!("unknown flag {flag}\n{USAGE}")),
            word => positional.push(word.to_owned()),
        }
    }
    if workers == 0 || service_us == 0 || cpu_work_us == 0 || cpu_iterations == Some(0) {
        return Err(
            "--workers, --service-ms, --cpu-work-ms and --cpu-iterations must be positive".into(),
        );
    }
    if !(soak_secs.is_finite() && soak_secs >= 1.0) {
        return Err("--soak-secs must be at least 1".into());
    }
    let time = ServiceTime {
        mean: Duration::from_micros(service_us),
        distribution,
    };
    if positional.first().is_some_and(|p| p == "serve") {
        if positional.len() > 1 {
            return Err(format!("serve takes no other word\n{USAGE}"));
        }
        let service = if cpu_service {
            ServiceSpec::Cpu {
                work: Duration::from_micros(cpu_work_us),
                iterations: cpu_iterations,
            }
        } else {
            ServiceSpec::Downstream { workers, time }
        };
        return Ok(Command::Serve {
            addr,
            policy,
            service,
            threads,
            seed,
            exit_with_stdin,
            quick,
            load_feedback,
        });
    }
    let scenarios = if positional.is_empty() || positional == ["all"] {
        Scenario::DEFAULT.to_vec()
    } else {
        positional
            .iter()
            .map(|n| n.parse())
            .collect::<Result<_, _>>()?
    };
    Ok(Command::Lab {
        scenarios,
        lab: Lab {
            workers,
            service: time,
            quick,
            policies,
            out_dir: out,
            launcher,
            soak: Duration::from_secs_f64(soak_secs),
        },
    })
}

/// Runs `scenarios` one after the other, printing each table when done.
async fn run_lab(
    lab: &Lab,
    scenarios: &[Scenario],
) -> Result<Vec<scenarios::ScenarioRun>, Box<dyn std::error::Error>> {
    let began = Instant::now();
    let (trials, secs) = scenarios::planned_secs(lab, scenarios);
    eprintln!(
        "plan: {} scenario(s), {trials} trials, about {:.1} min of load and calibration",
        scenarios.len(),
        secs / 60.0
    );
    let mut calibrations = Calibrations::default();
    let mut runs = Vec::new();
    for &s in scenarios {
        let run = scenarios::run(lab, s, &mut calibrations).await?;
        for table in &run.tables {
            println!("{table}");
        }
        eprintln!("[{}] {} trials", run.scenario, run.trials.len());
        for file in &run.files {
            eprintln!("[{s}] wrote {}", file.display());
        }
        runs.push(run);
    }
    println!(
        "summary ({:.1} min in all):",
        began.elapsed().as_secs_f64() / 60.0
    );
    for run in &runs {
        let (passed, judged) = run.goals.passed();
        println!(
            "  {:<16} {passed} of {judged} judged goals PASS",
            run.scenario
        );
    }
    Ok(runs)
}

/// `overload serve`: calibrates first when the policy names `true`, then
/// serves until stopped (or until stdin closes, with `--exit-with-stdin`).
async fn serve(
    addr: SocketAddr,
    policy: Policy,
    config: ServerConfig,
    exit_with_stdin: bool,
    quick: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    if exit_with_stdin {
        tokio::spawn(async {
            use tokio::io::AsyncReadExt;
            let mut stdin = tokio::io::stdin();
            let mut buf = [0u8; 64];
            while matches!(stdin.read(&mut buf).await, Ok(n) if n > 0) {}
            std::process::exit(0);
        });
    }
    exposition::install()?;
    let resolved = if policy.needs_true_concurrency() {
        let plan = calibrate::Plan::for_parallelism(config.service.parallelism(), quick);
        let probe = Server::start(
            &ServerConfig {
                policy: ServerPolicy::None,
                seed: plan.seed,
                ..config
            },
            ([127, 0, 0, 1], 0).into(),
        )
        .await?;
        let control = target::Control::Local(probe.control.clone());
        let cal = calibrate::run(probe.addr, &control, &plan, &config.service.to_string()).await;
        probe.stop().await;
        let cal = cal?;
        eprintln!("{cal}");
        policy.resolve(cal.true_concurrency())
    } else {
        policy.resolve(0)
    };
    let server = Server::start(
        &ServerConfig {
            policy: resolved,
            ..config
        },
        addr,
    )
    .await?;
    println!("listening on http://{}", server.addr);
    eprintln!(
        "policy {policy} ({resolved}), {}; GET /stats, GET /metrics (--features metrics), PUT /admin/slowdown/{{percent}}, PUT /admin/seed/{{seed}}, PUT /admin/shed/...",
        config.service
    );
    server.wait().await?;
    Ok(())
}

/// Parses `args`, builds the runtime the command needs and runs it; the
/// process exit code.
fn cli(args: &[String], launcher: Launcher) -> u8 {
    let command = match parse(args, launcher) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return 2;
        }
    };
    let threads = match &command {
        Command::Serve { threads, .. } => *threads,
        Command::Lab { .. } => 0,
        // A client process of a fleet: one thread, as several share 2 cores.
        Command::Drive(_) => 1,
    };
    let runtime = match threads {
        1 => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        0 => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build(),
        n => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(n)
            .enable_all()
            .build(),
    };
    let runtime = match runtime {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot build the runtime: {e}");
            return 1;
        }
    };
    let result = runtime.block_on(async {
        match command {
            Command::Serve {
                addr,
                policy,
                service,
                seed,
                exit_with_stdin,
                quick,
                load_feedback,
                ..
            } => {
                let config = ServerConfig {
                    policy: ServerPolicy::None,
                    service,
                    seed,
                    load_feedback,
                };
                serve(addr, policy, config, exit_with_stdin, quick).await
            }
            Command::Lab { scenarios, lab } => run_lab(&lab, &scenarios).await.map(drop),
            Command::Drive(spec) => {
                drive::run(spec, client::ClientConfig::standard()).await;
                Ok(())
            }
        }
    });
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}

fn main() -> ExitCode {
    // `RUST_LOG=shed_core=debug` prints the adaptive limit's probes.
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_default_env() {
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .init();
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    match Launcher::this_binary() {
        Ok(launcher) => ExitCode::from(cli(&args, launcher)),
        Err(e) => {
            eprintln!("error: cannot find this program's path: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{policy::Limit, scenarios::figures};

    /// The name of [`child_entry`] in the test harness.
    const CHILD_ENTRY: &str = "tests::child_entry";

    /// One lab test at a time: they share the machine's two cores, and the
    /// CPU-bound scenario pins this whole process.
    static LAB: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn launcher() -> Launcher {
        Launcher::test_harness(CHILD_ENTRY).expect("the test binary has a path")
    }

    /// Not a test: the entry point of the lab's child processes when the
    /// lab runs under `cargo test` (the harness is then the lab's binary).
    /// The child's arguments come in `SHED_OVERLOAD_CHILD_ARGS`; without
    /// them (`cargo test -- --ignored`) there is nothing to run.
    #[test]
    #[ignore = "the entry point of the lab's child processes, run by the lab itself"]
    fn child_entry() {
        if let Some(args) = process::child_args_from_env() {
            std::process::exit(i32::from(cli(&args, launcher())));
        }
    }

    #[test]
    fn serve_flags_parse() {
        let Ok(Command::Serve {
            addr,
            policy,
            service,
            threads,
            ..
        }) = parse(
            &args("serve --addr 127.0.0.1:9 --policy tower@true --workers 4 --service-ms 10 --threads 1"),
            launcher(),
        )
        else {
            panic!("serve command expected");
        };
        assert_eq!(addr, "127.0.0.1:9".parse().unwrap());
        assert_eq!(policy, Policy::Tower(Limit::True));
        assert_eq!(threads, 1);
        let ServiceSpec::Downstream { workers, time } = service else {
            panic!("the worker pool expected");
        };
        assert_eq!((workers, time.mean), (4, Duration::from_millis(10)));
        let Ok(Command::Serve { service, .. }) =
            parse(&args("serve --service cpu --cpu-work-ms 5"), launcher())
        else {
            panic!("serve command expected");
        };
        assert_eq!(
            service,
            ServiceSpec::Cpu {
                work: Duration::from_millis(5),
                iterations: None,
            }
        );
    }

    #[test]
    fn a_service_round_trips_through_the_serve_flags() {
        for service in [
            scenarios_cpu_service(),
            ServiceSpec::Cpu {
                work: Duration::from_millis(10),
                iterations: Some(123_456),
            },
            ServiceSpec::Downstream {
                workers: 3,
                time: ServiceTime {
                    mean: Duration::from_micros(12_345),
                    distribution: Distribution::Constant,
                },
            },
        ] {
            let mut line = vec!["serve".to_owned()];
            line.extend(service.serve_args());
            let Ok(Command::Serve { service: back, .. }) = parse(&line, launcher()) else {
                panic!("serve command expected");
            };
            assert_eq!(back, service);
        }
    }

    fn scenarios_cpu_service() -> ServiceSpec {
        ServiceSpec::Cpu {
            work: Duration::from_millis(10),
            iterations: None,
        }
    }

    #[test]
    fn no_scenario_and_all_both_run_every_default_scenario() {
        for line in ["", "all", "all --quick"] {
            let Ok(Command::Lab { scenarios, lab }) = parse(&args(line), launcher()) else {
                panic!("{line:?}: lab command expected");
            };
            assert_eq!(scenarios, Scenario::DEFAULT.to_vec(), "{line:?}");
            assert!(lab.policies.is_none());
        }
        let Ok(Command::Lab { scenarios, lab }) = parse(
            &args("steady soak --policies shed,tower@true --soak-secs 30"),
            launcher(),
        ) else {
            panic!("lab command expected");
        };
        assert_eq!(scenarios, [Scenario::Steady, Scenario::Soak]);
        assert_eq!(
            lab.policies,
            Some(vec![Policy::Shed(None), Policy::Tower(Limit::True)])
        );
        assert_eq!(lab.soak, Duration::from_secs(30));
    }

    #[test]
    fn bad_command_lines_are_refused() {
        for line in [
            "bogus",
            "--policies none,nope",
            "--policies tower",
            "--workers 0",
            "--soak-secs 0",
            "serve steady",
            "serve --service gpu",
        ] {
            assert!(parse(&args(line), launcher()).is_err(), "{line:?}");
        }
    }

    #[tokio::test]
    async fn the_shed_policy_serves_its_engine_stats_at_stats() {
        let config = ServerConfig {
            load_feedback: false,
            policy: ServerPolicy::Shed(Some(3)),
            service: ServiceSpec::Downstream {
                workers: 3,
                time: ServiceTime {
                    mean: Duration::from_millis(1),
                    distribution: Distribution::Constant,
                },
            },
            seed: 1,
        };
        let server = Server::start(&config, ([127, 0, 0, 1], 0).into())
            .await
            .expect("the shed policy starts");
        let admin = admin::Admin::new(server.addr);
        let json = admin.stats_json().await.expect("/stats answers JSON");
        assert_eq!(json["shed"]["limit"], 3);
        assert_eq!(json["shed"]["in_flight"], 0);
        let sample = admin.sample().await.expect("/stats reads back");
        assert_eq!(sample.engine.map(|e| e.limit), Some(3));
        admin.set_slowdown_pct(300).await.expect("slowdown is set");
        assert_eq!(admin.sample().await.unwrap().slowdown_pct, 300);
        server.stop().await;
    }

    /// Checks what every run must have: trials that measured, goals
    /// tables, files written.
    fn assert_ran(run: &scenarios::ScenarioRun, policies: &[Policy]) {
        for &policy in policies {
            let trials: Vec<_> = run.trials.iter().filter(|t| t.policy == policy).collect();
            assert!(!trials.is_empty(), "{} {policy}: no trial", run.scenario);
            for t in trials {
                let who = format!("{} {policy} {}", run.scenario, t.spec.label);
                assert!(!t.records.is_empty(), "{who}: no requests");
                assert!(t.records.iter().any(|r| r.success), "{who}: no success");
                assert!(t.server.total().completed > 0, "{who}: no server work");
                assert!(!t.samples.is_empty(), "{who}: no server samples");
                if let Some(exit) = &t.child {
                    assert!(
                        !exit.panicked(),
                        "{who}: the server panicked:\n{}",
                        exit.stderr
                    );
                }
            }
        }
        assert_eq!(run.tables.len(), 2, "{}: figures and goals", run.scenario);
        for file in &run.files {
            let len = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
            assert!(len > 0, "{} is missing or empty", file.display());
        }
    }

    fn quick_lab(name: &str) -> Lab {
        Lab {
            workers: WORKERS,
            service: ServiceTime {
                mean: Duration::from_millis(SERVICE_MS),
                distribution: Distribution::Exponential,
            },
            quick: true,
            policies: None,
            out_dir: std::env::temp_dir()
                .join(format!("shed-overload-{name}-{}", std::process::id())),
            launcher: launcher(),
            soak: Duration::from_secs(3),
        }
    }

    /// The `--quick` lab end to end: a calibration per service, every
    /// default scenario with real servers on real sockets (the CPU-bound one
    /// in a child process), files written, and every policy form (`none`,
    /// `tower@N`, `tower@true`, `shed`, `shed@N`, `shed@true`, `shadow`)
    /// somewhere.
    /// Asserts that it ran and measured, not that goals pass (a debug build
    /// on a busy CI machine is no place to judge capacity).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn quick_lab_runs_every_default_scenario() {
        let _one_at_a_time = LAB.lock().await;
        let mut lab = quick_lab("quick");
        let mut calibrations = Calibrations::default();
        // Each scenario with few policies, to stay quick; whether the
        // policies include one its goals are for. (The CPU-bound server runs
        // `shed@true`: at a limit of 64 it can serve nothing in a second; the
        // soak test runs `shed` in a child process.)
        let plan = [
            (Scenario::Steady, "shed", true),
            (Scenario::Isolation, "none", false),
            (Scenario::Deadline, "tower@true,shed", true),
            (Scenario::Metastable, "shed", true),
            (Scenario::UnknownCapacity, "shed@64,tower@64", true),
            (Scenario::CpuBound, "shed@true", false),
            (Scenario::CapacityDrop, "shed@true", false),
            (Scenario::Shadow, "shed,shadow", true),
            (Scenario::Grpc, "tower@true,shed", true),
        ];
        assert_eq!(plan.map(|(s, _, _)| s), Scenario::DEFAULT);
        for (scenario, policies, judged) in plan {
            let policies = policy::parse_list(policies).unwrap();
            lab.policies = Some(policies.clone());
            let run = scenarios::run(&lab, scenario, &mut calibrations)
                .await
                .unwrap_or_else(|e| panic!("{scenario}: {e}"));
            assert_ran(&run, &policies);
            if matches!(scenario, Scenario::CapacityDrop | Scenario::UnknownCapacity) {
                let limits = figures::limit_over_time(&run.trials, None);
                assert!(
                    policies.iter().all(|p| !matches!(p, Policy::Shed(_))) || !limits.is_empty(),
                    "{scenario}: no limit sampled"
                );
            }
            assert_eq!(!run.goals.0.is_empty(), judged, "{scenario}: goals");
        }
        let _ = std::fs::remove_dir_all(&lab.out_dir);
    }

    /// A short soak against a child server: its memory and descriptors are
    /// read, and after the load the server's in flight and queues return to
    /// 0 (the invariant the soak checks) and it did not panic.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_short_soak_reads_the_child_and_sees_it_drain() {
        let _one_at_a_time = LAB.lock().await;
        let lab = quick_lab("soak");
        let policies = [Policy::Shed(None)];
        let run = soak::run(&lab, &policies, &mut Calibrations::default())
            .await
            .expect("the soak runs");
        assert_ran(&run, &policies);
        let goal = |what: &str| {
            run.goals
                .0
                .iter()
                .find(|g| g.goal.contains(what))
                .unwrap_or_else(|| panic!("no goal about {what}"))
        };
        assert_eq!(goal("back to 0").verdict, goal::Verdict::Pass);
        assert_eq!(goal("no panic").verdict, goal::Verdict::Pass);
        // The child's memory and descriptors were read (how many readings
        // fall in each window of a 3 s soak depends on the machine's speed).
        let csv = run
            .files
            .iter()
            .find(|f| f.ends_with("soak_resources.csv"))
            .map(|f| std::fs::read_to_string(f).expect("the resources CSV is readable"))
            .expect("the soak writes its readings");
        let readings: Vec<Vec<u64>> = csv
            .lines()
            .skip(1)
            .map(|l| l.split(',').skip(2).map(|x| x.parse().unwrap()).collect())
            .collect();
        assert!(!readings.is_empty(), "no reading of the child");
        assert!(readings.iter().all(|r| r[0] > 0 && r[1] > 0), "{csv}");
        let _ = std::fs::remove_dir_all(&lab.out_dir);
    }
}
