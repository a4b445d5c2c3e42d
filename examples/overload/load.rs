//! The open-loop load generator: Poisson arrivals per class at a rate that
//! changes by phase, each arrival a new logical request in its own task.
//!
//! Open loop means arrivals do not wait for answers: a slow server gets the
//! same offered load as a fast one, as with real users. If the generator
//! itself falls behind it sends the late arrivals at once, and the report
//! compares the achieved offered rate with the target so that shows.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use tokio::task::JoinSet;

use crate::{
    class::Class,
    client::{LabClient, LogicalRecord},
    draw::unit_exponential,
};

/// A stretch of a scenario: arrival rates per class and the server's
/// slowdown, held for `duration`.
#[derive(Clone, Copy, Debug)]
pub struct Phase {
    /// How long the phase lasts.
    pub duration: Duration,
    /// Arrivals per second, indexed by [`Class::index`].
    pub rates: [f64; 4],
    /// Service-time multiplier in percent (100 = full capacity).
    pub slowdown_pct: u64,
}

impl Phase {
    /// Logical requests per second over all classes.
    pub fn total_rate(&self) -> f64 {
        self.rates.iter().sum()
    }
}

/// Generates the arrivals of one class over `phases`, starting at `epoch`,
/// and returns the records of all its logical requests. After the last phase
/// it waits up to `drain` for calls still running and drops the rest.
pub async fn generate(
    client: LabClient,
    class: Class,
    phases: Arc<[Phase]>,
    epoch: Instant,
    drain: Duration,
    seed: u64,
) -> Vec<LogicalRecord> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut calls = JoinSet::new();
    let mut records = Vec::new();
    let mut phase_start = epoch;
    for phase in phases.iter() {
        let phase_end = phase_start + phase.duration;
        let rate = phase.rates[class.index()];
        if rate > 0.0 {
            let mut next = phase_start;
            loop {
                // Exponential gaps make a Poisson process; a new phase starts a
                // fresh draw, which the memoryless property allows.
                next += Duration::from_secs_f64(unit_exponential(rng.f64()) / rate);
                if next >= phase_end {
                    break;
                }
                tokio::time::sleep_until(next.into()).await;
                let (client, due) = (client.clone(), next);
                calls.spawn(async move { client.call(class, epoch, due).await });
                while let Some(done) = calls.try_join_next() {
                    records.extend(done.ok());
                }
            }
        }
        tokio::time::sleep_until(phase_end.into()).await;
        phase_start = phase_end;
    }
    let _ = tokio::time::timeout(drain, async {
        while let Some(done) = calls.join_next().await {
            records.extend(done.ok());
        }
    })
    .await;
    calls.abort_all();
    records
}
