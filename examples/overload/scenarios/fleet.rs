//! `fleet` (not in the default set): three replicas of the lab server, each
//! in its own process, behind HAProxy (`balance leastconn`), called by three
//! client processes (`overload drive`) through the proxy; one replica's
//! service time triples partway through.
//!
//! Each replica is the lab's worker pool with [`REPLICA_WORKERS`] workers,
//! calibrated once (in the lab's process); the fleet's capacity is three
//! times that. The load is the steady mix at [`LOAD`]x the fleet's capacity,
//! split evenly over the client processes, constant over three phases:
//! normal, replica 2 degraded (service time x3), restored.
//!
//! What it shows: the fleet's goodput and interactive success, attempts per
//! request, refusals, and where the requests went: each replica's share of
//! the requests that reached it (served or refused) and of the work it
//! finished, per phase. Fast refusals can make a degraded replica look idle
//! to a least-connections balancer (it holds few connections because it
//! answers quickly); the shares say whether that happens.

use std::{
    fs,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use tokio::io::{AsyncBufReadExt, BufReader};

use crate::{
    class::Class,
    client::LogicalRecord,
    drive::{self, DriveSpec},
    goal::Goals,
    haproxy::{self, Haproxy},
    load::Phase,
    metrics::{Summary, Window},
    plot::{self, Series},
    policy::Policy,
    report::{num, pct, Table},
    scenarios::{Calibrations, Lab, Scenario, ScenarioRun, Setup, MIX},
    server::{ServerConfig, ServerSample, ServiceSpec},
    target::{Control, Placement, Target},
    trial::{Trial, TrialSpec},
};

/// Replicas behind the proxy.
const REPLICAS: usize = 3;

/// Workers per replica: three replicas of 2 workers hold about 290 requests
/// a second, which two cores can offer, proxy and serve at 1.5x.
const REPLICA_WORKERS: usize = 2;

/// Client processes.
const CLIENTS: usize = 3;

/// The offered load, in multiples of the fleet's capacity.
const LOAD: f64 = 1.5;

/// The replica that degrades, and by how much (service time in percent).
const DEGRADED: usize = 2;
const DEGRADED_PCT: u64 = 300;

/// One arm of the comparison: what the replicas run.
#[derive(Clone, Copy, Debug)]
struct Arm {
    name: &'static str,
    policy: Policy,
    /// The replicas state their load (`shed-load`) and the clients go
    /// through shed's client throttle.
    client_throttle: bool,
}

const ARMS: [Arm; 3] = [
    Arm {
        name: "none",
        policy: Policy::None,
        client_throttle: false,
    },
    Arm {
        name: "shed on servers",
        policy: Policy::Shed(None),
        client_throttle: false,
    },
    Arm {
        name: "shed on servers and clients",
        policy: Policy::Shed(None),
        client_throttle: true,
    },
];

/// The service of each replica.
pub fn service(lab: &Lab) -> ServiceSpec {
    ServiceSpec::Downstream {
        workers: REPLICA_WORKERS,
        time: lab.service,
    }
}

/// Arms and seconds of load (with starts and drains) a run takes.
pub fn planned(lab: &Lab) -> (usize, Duration) {
    let load: Duration = phases(lab).iter().sum();
    let per_arm = load + lab.client().deadline + Duration::from_secs(3);
    (ARMS.len(), per_arm * ARMS.len() as u32)
}

/// The three phases: normal, degraded, restored (seconds).
fn phases(lab: &Lab) -> [Duration; 3] {
    [lab.secs(10.0, 1.5), lab.secs(12.0, 1.5), lab.secs(8.0, 1.5)]
}

/// One replica's counters over time, from its `/stats`: (seconds from the
/// start of the load, sample).
struct ReplicaSamples(Vec<(f64, ServerSample)>);

/// Every replica's samples as they are taken.
type Sampled = Arc<Mutex<Vec<Vec<(f64, ServerSample)>>>>;

impl ReplicaSamples {
    /// The last sample at or before `t` seconds (the first, if none is).
    fn at(&self, t: f64) -> Option<&ServerSample> {
        self.0
            .iter()
            .take_while(|(at, _)| *at <= t)
            .last()
            .or(self.0.first())
            .map(|(_, s)| s)
    }

    /// Requests that reached the replica in `[from, to)`: handed to its
    /// workers, or refused by its shed engine.
    fn reached(&self, from: f64, to: f64) -> f64 {
        let count =
            |s: &ServerSample| s.total().submitted + s.engine.map_or(0, |e| e.refusals.total());
        match (self.at(from), self.at(to)) {
            (Some(a), Some(b)) => count(b).saturating_sub(count(a)) as f64,
            _ => 0.0,
        }
    }

    /// Jobs the replica finished in `[from, to)`.
    fn finished(&self, from: f64, to: f64) -> f64 {
        match (self.at(from), self.at(to)) {
            (Some(a), Some(b)) => b.total().completed.saturating_sub(a.total().completed) as f64,
            _ => 0.0,
        }
    }
}

/// What one arm measured.
struct ArmRun {
    records: Vec<LogicalRecord>,
    replicas: Vec<ReplicaSamples>,
    panicked: Option<String>,
}

/// Runs the fleet for each arm and writes its table and plot.
pub async fn run(lab: &Lab, calibrations: &mut Calibrations) -> Result<ScenarioRun, String> {
    fs::create_dir_all(&lab.out_dir).map_err(|e| e.to_string())?;
    let proxy_version = haproxy::ensure_installed()?;
    let service = service(lab);
    let cal = calibrations.get(lab, service, &Setup::local()).await?;
    let capacity = cal.capacity() * REPLICAS as f64;
    let [normal, degraded, restored] = phases(lab);
    let total = normal + degraded + restored;
    let rates = MIX.map(|share| share * LOAD * capacity);
    let client = lab.client();
    let placement = Placement::Child {
        launcher: lab.launcher.clone(),
        cpu: None,
        threads: 1,
    };

    let mut runs = Vec::new();
    for (i, arm) in ARMS.iter().enumerate() {
        eprintln!(
            "[fleet] {:<16} running {:.0} s of load through HAProxy ...",
            arm.name,
            total.as_secs_f64()
        );
        let began = Instant::now();
        let run = run_arm(
            lab,
            *arm,
            service,
            &placement,
            rates,
            total,
            normal,
            degraded,
            900 + i as u64,
        )
        .await?;
        eprintln!(
            "[fleet] {:<16} done in {:.1} s",
            arm.name,
            began.elapsed().as_secs_f64()
        );
        runs.push(run);
    }

    let (n, d) = (normal.as_secs_f64(), degraded.as_secs_f64());
    let windows = [
        ("before", 1.0_f64.min(n / 2.0), n),
        ("degraded", n + 2.0_f64.min(d / 2.0), n + d),
        (
            "after",
            n + d + 1.0_f64.min(restored.as_secs_f64() / 2.0),
            total.as_secs_f64(),
        ),
    ];
    let mut table = Table::new(
        format!(
            "fleet: {REPLICAS} replicas ({service}, each its own process) behind {proxy_version} \
             (balance leastconn), {CLIENTS} client processes; mixed classes at {LOAD}x the fleet's \
             capacity {capacity:.0} req/s (3 x {:.0}, one replica calibrated); replica {DEGRADED} at \
             {DEGRADED_PCT}% service time for [{n:.0} s, {:.0} s)",
            cal.capacity(),
            n + d
        ),
        &[
            "policy", "offered/s", "goodput/s", "of cap", "success", "interactive", "attempts/req",
            "refused locally", "refused by a server", "p99 ms", "failed attempts",
            "r2 share reached before/degraded/after", "r2 share finished before/degraded/after",
        ],
    );
    let mut plot_series = Vec::new();
    let mut trials = Vec::new();
    for (arm, run) in ARMS.iter().zip(runs) {
        if let Some(stderr) = &run.panicked {
            return Err(format!("fleet {}: a replica panicked:\n{stderr}", arm.name));
        }
        let w = Window {
            start: Duration::from_secs_f64(windows[0].1),
            end: total,
        };
        let s = Summary::of(&run.records, w, None);
        let interactive = Summary::of(&run.records, w, Some(Class::Interactive));
        let share = |f: &dyn Fn(&ReplicaSamples, f64, f64) -> f64| {
            windows
                .iter()
                .map(|&(_, from, to)| {
                    let all: f64 = run.replicas.iter().map(|r| f(r, from, to)).sum();
                    pct(f(&run.replicas[DEGRADED], from, to) / all, 0)
                })
                .collect::<Vec<_>>()
                .join(" / ")
        };
        table.row(vec![
            arm.name.to_owned(),
            num(s.offered_rate, 0),
            num(s.goodput, 0),
            pct(s.goodput / capacity, 0),
            pct(s.success_ratio(), 1),
            pct(interactive.success_ratio(), 1),
            num(s.amplification(), 2),
            pct(s.local_ratio(), 1),
            pct(s.shed_ratio(), 1),
            num(s.p99_ms, 0),
            s.failures_label(),
            share(&ReplicaSamples::reached),
            share(&ReplicaSamples::finished),
        ]);
        for (r, replica) in run.replicas.iter().enumerate() {
            plot_series.push(Series {
                name: format!("{}: replica {r} finished/s", arm.name),
                points: replica
                    .0
                    .windows(2)
                    .map(|p| {
                        let dt = (p[1].0 - p[0].0).max(1e-3);
                        let done = p[1]
                            .1
                            .total()
                            .completed
                            .saturating_sub(p[0].1.total().completed);
                        (p[1].0, done as f64 / dt)
                    })
                    .collect(),
            });
        }
        let samples = run
            .replicas
            .into_iter()
            .nth(DEGRADED)
            .map_or(Vec::new(), |r| r.0);
        let server = samples.last().map(|(_, s)| *s).unwrap_or_default();
        trials.push(Trial {
            policy: arm.policy,
            spec: TrialSpec {
                label: arm.name.to_owned(),
                phases: vec![Phase {
                    duration: total,
                    rates,
                    slowdown_pct: 100,
                }],
                client,
                seed: 900,
            },
            records: run.records,
            samples,
            server,
            child: None,
        });
    }
    table.note(format!(
        "shares are of the requests that reached any replica (handed to its workers or refused by its engine) and of the work finished, over [{:.1} s, {:.1} s), [{:.1} s, {:.1} s) and [{:.1} s, {:.1} s); an even spread is 33%",
        windows[0].1, windows[0].2, windows[1].1, windows[1].2, windows[2].1, windows[2].2
    ));

    let mut files = Vec::new();
    let summary: PathBuf = lab.out_dir.join("fleet_summary.csv");
    table.write_csv(&summary).map_err(|e| e.to_string())?;
    files.push(summary);
    let svg = lab.out_dir.join("fleet_replicas.svg");
    plot::line_chart(
        &svg,
        "fleet: work finished per replica over time",
        "seconds",
        "finished/s",
        plot_series,
    )
    .map_err(|e| e.to_string())?;
    files.push(svg);
    let goals = Goals::default();
    let goals_table = goals.table("fleet: reported, not judged");
    Ok(ScenarioRun {
        scenario: Scenario::Fleet,
        trials,
        tables: vec![table, goals_table],
        goals,
        files,
    })
}

/// One arm: replicas, proxy, client processes, the degradation, samples.
#[allow(clippy::too_many_arguments)]
async fn run_arm(
    lab: &Lab,
    arm: Arm,
    service: ServiceSpec,
    placement: &Placement,
    rates: [f64; 4],
    total: Duration,
    normal: Duration,
    degraded: Duration,
    seed: u64,
) -> Result<ArmRun, String> {
    let mut replicas = Vec::new();
    for r in 0..REPLICAS {
        let config = ServerConfig {
            policy: arm.policy.resolve(0),
            service,
            seed: seed * 10 + r as u64,
            load_feedback: arm.client_throttle,
        };
        replicas.push(Target::start(&config, placement).await?);
    }
    let addrs: Vec<_> = replicas.iter().map(Target::addr).collect();
    let proxy = Haproxy::start(&addrs, &lab.out_dir).await?;

    // Everyone starts together, a moment from now (processes take a while).
    let start_at_ms = drive::unix_ms() + 1_500;
    let mut clients = Vec::new();
    for c in 0..CLIENTS {
        let spec = DriveSpec {
            target: proxy.addr,
            rates: rates.map(|r| r / CLIENTS as f64),
            duration: total,
            seed: seed * 100 + c as u64,
            start_at_ms,
            throttle: arm.client_throttle,
        };
        clients.push(spawn_client(lab, &spec)?);
    }
    let epoch_wait = start_at_ms.saturating_sub(drive::unix_ms());
    tokio::time::sleep(Duration::from_millis(epoch_wait)).await;
    let epoch = Instant::now();

    let controls: Vec<Control> = replicas.iter().map(Target::control).collect();
    let samples: Sampled = Arc::new(Mutex::new(vec![Vec::new(); REPLICAS]));
    let sampler = tokio::spawn({
        let (controls, samples) = (controls.clone(), Arc::clone(&samples));
        let every = lab.bucket();
        async move {
            for i in 0u32.. {
                tokio::time::sleep_until((epoch + every * i).into()).await;
                let t = epoch.elapsed().as_secs_f64();
                for (r, control) in controls.iter().enumerate() {
                    if let Ok(s) = control.sample().await {
                        samples.lock().unwrap_or_else(|e| e.into_inner())[r].push((t, s));
                    }
                }
            }
        }
    });
    let degrade = controls[DEGRADED].clone();
    let knob = tokio::spawn(async move {
        tokio::time::sleep_until((epoch + normal).into()).await;
        degrade.set_slowdown_pct(DEGRADED_PCT).await?;
        tokio::time::sleep_until((epoch + normal + degraded).into()).await;
        degrade.set_slowdown_pct(100).await
    });

    let mut records = Vec::new();
    for client in clients {
        records.extend(client.await.map_err(|e| e.to_string())??);
    }
    records.sort_by_key(|r| r.start);
    let knob = knob.await.map_err(|e| e.to_string())?;
    // The last reading, after the drain.
    tokio::time::sleep(lab.bucket()).await;
    sampler.abort();
    proxy.stop().await;
    let mut panicked = None;
    for replica in replicas {
        if let Some(exit) = replica.stop().await {
            if exit.panicked() {
                panicked = Some(exit.stderr);
            }
        }
    }
    knob.map_err(|e| format!("the slowdown knob: {e}"))?;
    let samples = std::mem::take(&mut *samples.lock().unwrap_or_else(|e| e.into_inner()));
    Ok(ArmRun {
        records,
        replicas: samples.into_iter().map(ReplicaSamples).collect(),
        panicked,
    })
}

/// Starts one client process and collects its records when it ends.
fn spawn_client(
    lab: &Lab,
    spec: &DriveSpec,
) -> Result<tokio::task::JoinHandle<Result<Vec<LogicalRecord>, String>>, String> {
    let mut command = lab.launcher.command(&spec.args(), None);
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true);
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot start a client process: {e}"))?;
    let stdout = child.stdout.take().ok_or("no stdout pipe")?;
    let limit = spec.duration + Duration::from_secs(30);
    Ok(tokio::spawn(async move {
        let mut records = Vec::new();
        let mut lines = BufReader::new(stdout).lines();
        let read = tokio::time::timeout(limit, async {
            while let Ok(Some(line)) = lines.next_line().await {
                records.extend(drive::parse_line(&line));
            }
        })
        .await;
        let _ = child.kill().await;
        match read {
            Ok(()) => Ok(records),
            Err(_) => Err(format!("a client process ran past {limit:?}")),
        }
    }))
}
