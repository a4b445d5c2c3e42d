//! The overload lab: a real axum service with finite capacity on loopback,
//! driven by open-loop load with retrying clients, under three admission
//! policies side by side.
//!
//! ```text
//! cargo run --release --example overload -- [SCENARIO|all] [--quick] [--policies none,tower,shed] [--out DIR]
//! cargo run --release --example overload -- serve [--addr ADDR] [--policy none|tower|shed] [--workers K] [--service-ms MS]
//! ```
//!
//! Scenarios: `steady`, `isolation`, `deadline`, `metastable` (see
//! `scenario.rs`). Tables go to stdout, progress to stderr, CSV and SVG files
//! to `results/`. Every figure is measured from the requests the run made.
//!
//! `cargo test` runs the `--quick` version of every scenario for every policy
//! (the test at the bottom of this file; `test = true` in Cargo.toml).

mod class;
mod client;
mod load;
mod metrics;
mod plot;
mod report;
mod scenario;
mod server;
mod trial;

use std::{net::SocketAddr, path::PathBuf, process::ExitCode, time::Duration};

use scenario::{Lab, Scenario};
use server::{Distribution, Policy, Server, ServerConfig, ServiceTime};

/// Default K.
const WORKERS: usize = 8;
/// Default mean service time: with K = 8, a capacity of 200 req/s, so 12x
/// (2,400 req/s plus retries) stays within what the generator can offer on
/// two cores.
const SERVICE_MS: u64 = 40;

const USAGE: &str = "usage:
  overload [SCENARIO|all] [--quick] [--policies none,tower,shed] [--workers K] [--service-ms MS] [--service-dist exp|constant] [--out DIR]
  overload serve [--addr ADDR] [--policy none|tower|shed] [--workers K] [--service-ms MS] [--service-dist exp|constant]
scenarios: steady, isolation, deadline, metastable (default: all)";

/// What the command line asked for.
enum Command {
    Lab {
        scenarios: Vec<Scenario>,
        lab: Lab,
    },
    Serve {
        addr: SocketAddr,
        config: ServerConfig,
    },
}

fn parse(args: &[String]) -> Result<Command, String> {
    let mut positional = Vec::new();
    let mut quick = false;
    let mut policies = Policy::ALL.to_vec();
    let mut policy = Policy::None;
    let mut workers = WORKERS;
    let mut service_ms = SERVICE_MS;
    let mut distribution = Distribution::Exponential;
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
            "--policies" => {
                policies = value(arg)?
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()?
            }
            "--policy" => policy = value(arg)?.parse()?,
            "--workers" => workers = value(arg)?.parse().map_err(|e| format!("--workers: {e}"))?,
            "--service-ms" => {
                service_ms = value(arg)?
                    .parse()
                    .map_err(|e| format!("--service-ms: {e}"))?
            }
            "--service-dist" => {
                distribution = match value(arg)?.as_str() {
                    "exp" => Distribution::Exponential,
                    "constant" => Distribution::Constant,
                    other => {
                        return Err(format!("--service-dist: {other:?} is not exp or constant"))
                    }
                }
            }
            "--addr" => addr = value(arg)?.parse().map_err(|e| format!("--addr: {e}"))?,
            "--out" => out = value(arg)?.into(),
            "-h" | "--help" => return Err(USAGE.into()),
            flag if flag.starts_with('-') => return Err(format!("unknown flag {flag}\n{USAGE}")),
            word => positional.push(word.to_owned()),
        }
    }
    if workers == 0 || service_ms == 0 {
        return Err("--workers and --service-ms must be positive".into());
    }
    let service = ServiceTime {
        mean: Duration::from_millis(service_ms),
        distribution,
    };
    match positional.as_slice() {
        [serve] if serve == "serve" => Ok(Command::Serve {
            addr,
            config: ServerConfig {
                policy,
                workers,
                service,
            },
        }),
        names if names.is_empty() || names == ["all"] => Ok(lab_command(
            Scenario::ALL.to_vec(),
            quick,
            policies,
            workers,
            service,
            out,
        )),
        names => {
            let scenarios = names.iter().map(|n| n.parse()).collect::<Result<_, _>>()?;
            Ok(lab_command(
                scenarios, quick, policies, workers, service, out,
            ))
        }
    }
}

fn lab_command(
    scenarios: Vec<Scenario>,
    quick: bool,
    policies: Vec<Policy>,
    workers: usize,
    service: ServiceTime,
    out_dir: PathBuf,
) -> Command {
    Command::Lab {
        scenarios,
        lab: Lab {
            workers,
            service,
            quick,
            policies,
            out_dir,
        },
    }
}

/// Runs `scenarios` one after the other, printing each table when done.
async fn run_lab(
    lab: &Lab,
    scenarios: &[Scenario],
) -> Result<Vec<scenario::ScenarioRun>, Box<dyn std::error::Error>> {
    let mut runs = Vec::new();
    for &s in scenarios {
        let run = scenario::run(lab, s).await?;
        println!("{}", run.table);
        eprintln!("[{}] {} trials", run.scenario, run.trials.len());
        for file in &run.files {
            eprintln!("[{s}] wrote {}", file.display());
        }
        runs.push(run);
    }
    Ok(runs)
}

async fn serve(addr: SocketAddr, config: ServerConfig) -> Result<(), Box<dyn std::error::Error>> {
    let server = Server::start(&config, addr).await?;
    println!("listening on http://{}", server.addr);
    eprintln!(
        "policy {}, {} workers x {} ms mean service ({:.0} req/s); GET /stats, PUT /admin/slowdown/{{percent}}",
        config.policy,
        config.workers,
        config.service.mean.as_millis(),
        config.capacity()
    );
    server.wait().await?;
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = match parse(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let result = match command {
        Command::Serve { addr, config } => serve(addr, config).await,
        Command::Lab { scenarios, lab } => run_lab(&lab, &scenarios).await.map(drop),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn serve_flags_parse() {
        let Ok(Command::Serve { addr, config }) = parse(&args(
            "serve --addr 127.0.0.1:9 --policy tower --workers 4 --service-ms 10",
        )) else {
            panic!("serve command expected");
        };
        assert_eq!(addr, "127.0.0.1:9".parse().unwrap());
        assert_eq!((config.policy, config.workers), (Policy::Tower, 4));
        assert_eq!(config.capacity(), 400.0);
    }

    #[test]
    fn no_scenario_and_all_both_run_every_scenario() {
        for line in ["", "all", "all --quick"] {
            let Ok(Command::Lab { scenarios, .. }) = parse(&args(line)) else {
                panic!("{line:?}: lab command expected");
            };
            assert_eq!(scenarios, Scenario::ALL.to_vec(), "{line:?}");
        }
        let Ok(Command::Lab { scenarios, .. }) = parse(&args("steady deadline")) else {
            panic!("lab command expected");
        };
        assert_eq!(scenarios, [Scenario::Steady, Scenario::Deadline]);
    }

    #[test]
    fn unknown_scenario_is_refused() {
        assert!(parse(&args("bogus")).is_err());
        assert!(parse(&args("--policies none,nope")).is_err());
    }

    #[tokio::test]
    async fn the_shed_policy_serves_its_engine_stats_at_stats() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        let config = ServerConfig {
            policy: Policy::Shed,
            workers: 3,
            service: ServiceTime {
                mean: Duration::from_millis(1),
                distribution: Distribution::Constant,
            },
        };
        let server = Server::start(&config, ([127, 0, 0, 1], 0).into())
            .await
            .expect("the shed policy starts");
        let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
        stream
            .write_all(b"GET /stats HTTP/1.1\r\nhost: lab\r\nconnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        let body = answer.split("\r\n\r\n").nth(1).expect("a body");
        let json: serde_json::Value = serde_json::from_str(body).expect("JSON");
        assert_eq!(json["shed"]["limit"], 3);
        assert_eq!(json["shed"]["in_flight"], 0);
        server.stop().await;
    }

    /// The `--quick` lab end to end for every policy: real servers, real
    /// sockets, every scenario, files written. Asserts that it ran and
    /// measured, not that goals pass (a debug build on a busy CI machine is no
    /// place to judge capacity).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn quick_lab_runs_every_scenario_for_every_policy() {
        let out_dir =
            std::env::temp_dir().join(format!("shed-overload-quick-{}", std::process::id()));
        let lab = Lab {
            workers: WORKERS,
            service: ServiceTime {
                mean: Duration::from_millis(SERVICE_MS),
                distribution: Distribution::Exponential,
            },
            quick: true,
            policies: Policy::ALL.to_vec(),
            out_dir: out_dir.clone(),
        };
        let runs = run_lab(&lab, &Scenario::ALL).await.expect("the lab runs");
        assert_eq!(runs.len(), Scenario::ALL.len());
        for run in &runs {
            for policy in Policy::ALL {
                let trials: Vec<_> = run.trials.iter().filter(|t| t.policy == policy).collect();
                assert!(!trials.is_empty(), "{} {policy}: no trial", run.scenario);
                for t in trials {
                    assert!(
                        !t.records.is_empty(),
                        "{} {policy}: no requests",
                        run.scenario
                    );
                    assert!(
                        t.records.iter().any(|r| r.success),
                        "{} {policy}: no success",
                        run.scenario
                    );
                    assert!(
                        t.server.total().completed > 0,
                        "{} {policy}: no server work",
                        run.scenario
                    );
                }
            }
            for file in &run.files {
                let len = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
                assert!(len > 0, "{} is missing or empty", file.display());
            }
        }
        let _ = std::fs::remove_dir_all(out_dir);
    }
}
