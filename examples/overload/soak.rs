//! `soak` (not in the default set): a long run at 4x against a server in
//! its own process, watching for leaks.
//!
//! The server is `overload serve` in a child process; the load comes from
//! the lab's process: mixed classes at 4x the calibrated capacity, callers
//! that retry and honour `Retry-After`, and a tenth of them hanging up
//! during their first attempt. Every second (more often in a soak shorter
//! than 30 s) the lab reads the server
//! process's resident memory (`VmRSS` in `/proc/PID/status`), its open file
//! descriptors (`/proc/PID/fd`), and its in-flight requests and queue
//! lengths (`/stats`: the shed engine's, and the worker pool's).
//!
//! Goals (per policy): the mean resident memory and descriptor count of the
//! last tenth of the run (the last minute of the default 10) within 5% of
//! the second tenth's (the second minute); in flight and queues back to 0
//! within 10 s after the load stops; no panic in the server's stderr.

use std::{
    fmt::Write as _,
    fs,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use crate::{
    goal::Goals,
    load::Phase,
    metrics::Summary,
    plot::{self, Panel, Series},
    policy::Policy,
    process,
    report::{num, pct, Table},
    scenarios::{figures, Calibrations, Lab, Scenario, ScenarioRun, Setup, MIX},
    server::{ServerConfig, ServerSample},
    target::{Placement, Target},
    trial::{self, Trial, TrialSpec},
};

/// The offered load, as a multiple of capacity.
const LOAD: f64 = 4.0;

/// The share of callers who hang up.
const HANGUP_SHARE: f64 = 0.1;

/// How long in flight and queues may take to drain after the load.
const SETTLE: Duration = Duration::from_secs(10);

/// One reading of the server process.
#[derive(Clone, Copy, Debug)]
struct Reading {
    /// Seconds from the start of the load.
    t: f64,
    /// Resident memory, KiB.
    rss_kib: u64,
    /// Open file descriptors.
    fds: u64,
    /// Requests in flight: the shed engine's, else the busy workers.
    in_flight: u64,
    /// Requests waiting: the shed engine's queues plus the worker pool's.
    queued: u64,
}

fn reading(t: f64, pid: u32, s: &ServerSample) -> Option<Reading> {
    let (rss_kib, fds) = process::resources(pid)?;
    let engine = s.engine.unwrap_or_default();
    Some(Reading {
        t,
        rss_kib,
        fds,
        in_flight: s.engine.map_or(s.busy as u64, |e| u64::from(e.in_flight)),
        queued: u64::from(engine.queue_len) + s.queued as u64,
    })
}

/// How often the server process is read: every second, or more often in a
/// short soak, so each window of a tenth holds a few readings.
fn reading_interval(soak: Duration) -> Duration {
    (soak / 30).clamp(Duration::from_millis(100), Duration::from_secs(1))
}

/// Mean of `f` over the readings in `[from, to)` seconds.
fn mean(readings: &[Reading], from: f64, to: f64, f: impl Fn(&Reading) -> u64) -> f64 {
    let values: Vec<f64> = readings
        .iter()
        .filter(|r| from <= r.t && r.t < to)
        .map(|r| f(r) as f64)
        .collect();
    if values.is_empty() {
        f64::NAN
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

/// Runs the soak for each of `policies`.
pub async fn run(
    lab: &Lab,
    policies: &[Policy],
    calibrations: &mut Calibrations,
) -> Result<ScenarioRun, String> {
    let service = lab.downstream();
    let setup = Setup {
        placement: Placement::Child {
            launcher: lab.launcher.clone(),
            cpu: None,
            threads: 0,
        },
        notes: Vec::new(),
        pinned: None,
    };
    let cal = calibrations.get(lab, service, &setup).await?;
    let spec = TrialSpec {
        label: format!("{LOAD}x"),
        phases: vec![Phase {
            duration: lab.soak,
            rates: MIX.map(|share| share * LOAD * cal.capacity()),
            slowdown_pct: 100,
        }],
        client: crate::client::ClientConfig {
            hangup_share: HANGUP_SHARE,
            ..lab.client()
        },
        seed: 700,
    };
    let d = lab.soak.as_secs_f64();
    let (second, last) = ((d / 10.0, d / 5.0), (d * 0.9, d));
    let mut figures_table = Table::new(
        format!(
            "soak: {service}, in its own process; mixed classes at {LOAD}x the calibrated capacity {:.0} req/s \
             for {d:.0} s, {:.0}% of callers hanging up, retries; `true` = {}; \
             windows: second [{:.0} s, {:.0} s) and last [{:.0} s, {:.0} s)",
            cal.capacity(),
            HANGUP_SHARE * 100.0,
            cal.true_concurrency(),
            second.0,
            second.1,
            last.0,
            last.1
        ),
        &[
            "policy", "offered/s (target)", "goodput/s", "success", "attempts/req", "failed attempts",
            "RSS MiB second/last", "fds second/last", "in flight, queued after", "settled in", "panic",
        ],
    );
    let mut goals = Goals::default();
    let mut trials = Vec::new();
    let mut csv = String::from("policy,t_s,rss_kib,fds,in_flight,queued\n");
    let mut rss_series = Vec::new();
    let mut fd_series = Vec::new();
    for &policy in policies {
        let config = ServerConfig {
            policy: policy.resolve(cal.true_concurrency()),
            service,
            seed: spec.seed,
            load_feedback: false,
        };
        eprintln!("[soak] {policy} running {d:.0} s of load ...");
        let target = Target::start(&config, &setup.placement).await?;
        let pid = target
            .pid()
            .ok_or("the soak's server must run in its own process")?;
        let control = target.control();
        let epoch = Instant::now();
        let readings = Arc::new(Mutex::new(Vec::new()));
        let every = reading_interval(lab.soak);
        let watcher = tokio::spawn({
            let (control, readings) = (control.clone(), Arc::clone(&readings));
            async move {
                for i in 0u32.. {
                    tokio::time::sleep_until((epoch + every * i).into()).await;
                    let t = epoch.elapsed().as_secs_f64();
                    if let Ok(s) = control.sample().await {
                        let r = reading(t, pid, &s);
                        readings.lock().unwrap_or_else(|e| e.into_inner()).extend(r);
                    }
                }
            }
        });
        let driven = trial::drive(&target, policy, spec.clone(), lab.bucket()).await;
        // After the load and its drain: wait for in flight and queues to empty.
        let settle_start = Instant::now();
        let mut settled = None;
        let mut after = None;
        while settle_start.elapsed() < SETTLE {
            if let Ok(s) = control.sample().await {
                let r = reading(epoch.elapsed().as_secs_f64(), pid, &s);
                after = r.map(|r| (r.in_flight, r.queued));
                if after == Some((0, 0)) && s.busy == 0 {
                    settled = Some(settle_start.elapsed());
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        watcher.abort();
        let exit = target.stop().await;
        let mut t: Trial = driven?;
        t.child = exit;
        let readings: Vec<Reading> =
            std::mem::take(&mut *readings.lock().unwrap_or_else(|e| e.into_inner()));

        let w = figures::whole(&t.spec);
        let s = Summary::of(&t.records, w, None);
        let rss = |(a, b): (f64, f64)| mean(&readings, a, b, |r| r.rss_kib);
        let fds = |(a, b): (f64, f64)| mean(&readings, a, b, |r| r.fds);
        let panicked = t.child.as_ref().is_some_and(|e| e.panicked());
        figures_table.row(vec![
            policy.to_string(),
            figures::offered(&t, &s, w),
            num(s.goodput, 0),
            pct(s.success_ratio(), 1),
            num(s.amplification(), 2),
            s.failures_label(),
            format!("{:.1}/{:.1}", rss(second) / 1024.0, rss(last) / 1024.0),
            format!("{:.1}/{:.1}", fds(second), fds(last)),
            after.map_or("-".into(), |(f, q)| format!("{f}, {q}")),
            settled.map_or("not within 10 s".into(), |d| {
                format!("{:.1} s", d.as_secs_f64())
            }),
            if panicked { "YES" } else { "no" }.into(),
        ]);
        // The trend, a tenth of the run at a time: a leak climbs, a warm-up
        // levels off, open connections come and go.
        let tenths: Vec<(f64, f64)> = (0..10)
            .map(|i| (d * f64::from(i) / 10.0, d * f64::from(i + 1) / 10.0))
            .collect();
        let trend = |f: &dyn Fn((f64, f64)) -> f64, scale: f64| {
            tenths
                .iter()
                .map(|&w| format!("{:.1}", f(w) / scale))
                .collect::<Vec<_>>()
                .join(" ")
        };
        figures_table.note(format!(
            "{policy}: mean RSS MiB per tenth of the run: {}",
            trend(&rss, 1024.0)
        ));
        figures_table.note(format!(
            "{policy}: mean open descriptors per tenth of the run: {}",
            trend(&fds, 1.0)
        ));
        let p = policy.to_string();
        for (what, f) in [
            ("resident memory", &rss as &dyn Fn(_) -> f64),
            ("open descriptors", &fds),
        ] {
            let (a, b) = (f(second), f(last));
            goals.compare(
                "last vs second",
                &p,
                &format!("mean {what} of the last window within 5% of the second's"),
                Some((b / a - 1.0).abs()),
                Ok((format!("5% (second {a:.0}, last {b:.0})"), 0.05)),
                true,
                |x| pct(x, 1),
            );
        }
        goals.compare(
            "after the load",
            &p,
            "in flight and queues back to 0",
            Some(settled.map_or(f64::MAX, |d| d.as_secs_f64())),
            Ok((
                format!("within {} s", SETTLE.as_secs()),
                SETTLE.as_secs_f64(),
            )),
            true,
            |x| format!("{x:.1} s"),
        );
        if settled.is_none() {
            if let Some(g) = goals.0.last_mut() {
                g.measured = after.map_or("no /stats".into(), |(f, q)| {
                    format!("in flight {f}, queued {q}")
                });
            }
        }
        goals.compare(
            "whole run",
            &p,
            "no panic in the server's stderr",
            Some(if panicked { 1.0 } else { 0.0 }),
            Ok(("none".into(), 0.0)),
            true,
            |x| {
                if x > 0.0 {
                    "panicked".into()
                } else {
                    "none".into()
                }
            },
        );
        for r in &readings {
            let _ = writeln!(
                csv,
                "{policy},{:.2},{},{},{},{}",
                r.t, r.rss_kib, r.fds, r.in_flight, r.queued
            );
        }
        rss_series.push(Series {
            name: format!("{policy} RSS MiB"),
            points: readings
                .iter()
                .map(|r| (r.t, r.rss_kib as f64 / 1024.0))
                .collect(),
        });
        fd_series.push(Series {
            name: format!("{policy} open fds"),
            points: readings.iter().map(|r| (r.t, r.fds as f64)).collect(),
        });
        trials.push(t);
    }
    figures::generator_check(&mut figures_table, &trials);
    figures::child_check(&mut figures_table, &trials);
    let (passed, judged) = goals.passed();
    let goals_table = goals.table(format!(
        "soak goals: {passed} of {judged} judged goals PASS"
    ));

    let out = &lab.out_dir;
    fs::create_dir_all(out).map_err(|e| e.to_string())?;
    let files = vec![
        out.join("soak_summary.csv"),
        out.join("soak_goals.csv"),
        out.join("soak_resources.csv"),
        out.join("soak_resources.svg"),
    ];
    figures_table
        .write_csv(&files[0])
        .map_err(|e| e.to_string())?;
    goals_table
        .write_csv(&files[1])
        .map_err(|e| e.to_string())?;
    fs::write(&files[2], csv).map_err(|e| e.to_string())?;
    plot::panels(
        &files[3],
        "seconds",
        vec![
            Panel {
                title: "soak: the server's resident memory".into(),
                y_label: "MiB".into(),
                series: rss_series,
            },
            Panel {
                title: "soak: the server's open file descriptors".into(),
                y_label: "descriptors".into(),
                series: fd_series,
            },
        ],
    )
    .map_err(|e| e.to_string())?;
    Ok(ScenarioRun {
        scenario: Scenario::Soak,
        trials,
        tables: vec![figures_table, goals_table],
        goals,
        files,
    })
}
