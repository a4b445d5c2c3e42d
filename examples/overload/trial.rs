//! One trial: a fresh server under one policy, one load shape, the records
//! and the server's state sampled alongside.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use crate::{
    class::Class,
    client::{ClientConfig, LabClient, LogicalRecord},
    load::{self, Phase},
    policy::Policy,
    process::ChildExit,
    server::ServerSample,
    target::{Control, Target},
};

/// What to run: the load shape and how the callers behave.
#[derive(Clone, Debug)]
pub struct TrialSpec {
    /// A label for tables and progress (e.g. the load multiplier).
    pub label: String,
    /// The phases, in order.
    pub phases: Vec<Phase>,
    /// The callers' behaviour.
    pub client: ClientConfig,
    /// Seed of the arrival processes.
    pub seed: u64,
}

impl TrialSpec {
    /// Total length of the load.
    pub fn duration(&self) -> Duration {
        self.phases.iter().map(|p| p.duration).sum()
    }

    /// The target arrival rate per second of `class` (all when `None`)
    /// averaged over `[from, to)`.
    pub fn target_rate(&self, from: Duration, to: Duration, class: Option<Class>) -> f64 {
        let mut start = Duration::ZERO;
        let mut expected = 0.0;
        for phase in &self.phases {
            let end = start + phase.duration;
            let overlap = end.min(to).saturating_sub(start.max(from)).as_secs_f64();
            let rate = match class {
                Some(c) => phase.rates[c.index()],
                None => phase.total_rate(),
            };
            expected += overlap * rate;
            start = end;
        }
        expected / to.saturating_sub(from).as_secs_f64().max(f64::EPSILON)
    }

    /// When phase `i` starts.
    pub fn phase_start(&self, i: usize) -> Duration {
        self.phases[..i].iter().map(|p| p.duration).sum()
    }
}

/// What a trial measured.
pub struct Trial {
    /// The policy under test, as the tables label it.
    pub policy: Policy,
    /// What was run.
    pub spec: TrialSpec,
    /// Every logical request started.
    pub records: Vec<LogicalRecord>,
    /// Server state sampled once per bucket: (seconds from epoch, state).
    pub samples: Vec<(f64, ServerSample)>,
    /// Server counters when the load and its drain were over.
    pub server: ServerSample,
    /// A child server's stderr and exit, when the server ran in its own process.
    pub child: Option<ChildExit>,
}

/// Drives `target` (built for `policy`) with `spec`, then stops it.
pub async fn run(
    target: Target,
    policy: Policy,
    spec: TrialSpec,
    bucket: Duration,
) -> Result<Trial, String> {
    let trial = drive(&target, policy, spec, bucket).await;
    let child = target.stop().await;
    let mut trial = trial?;
    trial.child = child;
    Ok(trial)
}

/// Drives `target` (built for `policy`) with `spec` and leaves it running.
pub async fn drive(
    target: &Target,
    policy: Policy,
    spec: TrialSpec,
    bucket: Duration,
) -> Result<Trial, String> {
    let control = target.control();
    let client = LabClient::new(target.addr(), spec.client);
    let phases: Arc<[Phase]> = spec.phases.clone().into();
    let drain = spec.client.deadline + Duration::from_millis(500);
    let epoch = Instant::now();

    let generators: Vec<_> = Class::ALL
        .into_iter()
        .filter(|c| phases.iter().any(|p| p.rates[c.index()] > 0.0))
        .map(|c| {
            let seed = spec.seed.wrapping_mul(31).wrapping_add(c.index() as u64);
            tokio::spawn(load::generate(
                client.clone(),
                c,
                Arc::clone(&phases),
                epoch,
                drain,
                seed,
            ))
        })
        .collect();
    let knob = tokio::spawn(drive_capacity(control.clone(), Arc::clone(&phases), epoch));
    let samples = Arc::new(Mutex::new(Vec::new()));
    let sampler = tokio::spawn(sample(
        control.clone(),
        epoch,
        bucket,
        spec.duration() + drain,
        Arc::clone(&samples),
    ));

    let mut records = Vec::new();
    for generator in generators {
        records.extend(generator.await.unwrap_or_default());
    }
    records.sort_by_key(|r| r.start);
    let knob = knob.await.unwrap_or_else(|e| Err(e.to_string()));
    sampler.abort();
    let server = control
        .sample()
        .await
        .map_err(|e| format!("final /stats: {e}"))?;
    knob.map_err(|e| format!("setting the slowdown: {e}"))?;
    let samples = std::mem::take(&mut *samples.lock().unwrap_or_else(|e| e.into_inner()));
    Ok(Trial {
        policy,
        spec,
        records,
        samples,
        server,
        child: None,
    })
}

/// Sets the service's slowdown at the start of each phase, and back to
/// normal at the end.
async fn drive_capacity(
    control: Control,
    phases: Arc<[Phase]>,
    epoch: Instant,
) -> Result<(), String> {
    let mut at = epoch;
    let mut current = 100;
    for phase in phases.iter() {
        tokio::time::sleep_until(at.into()).await;
        if phase.slowdown_pct != current {
            control.set_slowdown_pct(phase.slowdown_pct).await?;
            current = phase.slowdown_pct;
        }
        at += phase.duration;
    }
    tokio::time::sleep_until(at.into()).await;
    if current != 100 {
        control.set_slowdown_pct(100).await?;
    }
    Ok(())
}

/// Samples the server once per `every`, for at most `span`; a sample that
/// cannot be read is left out.
async fn sample(
    control: Control,
    epoch: Instant,
    every: Duration,
    span: Duration,
    into: Arc<Mutex<Vec<(f64, ServerSample)>>>,
) {
    let ticks = (span.as_secs_f64() / every.as_secs_f64()).ceil() as u32;
    for i in 0..=ticks {
        tokio::time::sleep_until((epoch + every * i).into()).await;
        if let Ok(s) = control.sample().await {
            let t = epoch.elapsed().as_secs_f64();
            into.lock().unwrap_or_else(|e| e.into_inner()).push((t, s));
        }
    }
}
