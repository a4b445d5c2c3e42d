//! `shadow`: is shadow mode an honest prediction of enforcing mode?
//!
//! Mixed classes at 1.5x and 2x of the calibrated capacity, with callers
//! that do not retry (one attempt each, so that the arrivals are the same
//! whatever the server answers: every attempt is a first attempt). `shed`
//! enforces; `shadow` is the same engine in shadow mode, serving every
//! request (so its service is overloaded) and counting what it would have
//! refused. Goal: at each load, the share of attempts shadow mode says it
//! would have refused is within 5 points of the share enforcing mode
//! refused, both counted by the engine over the same window.
//!
//! Each trial begins with 10 s at half the capacity, as a shadow deployment
//! has seen its service's ordinary traffic before an overload comes: a
//! shadow engine learns the service's speed only while the service runs
//! within the limit (see `shed::Mode`). A third trial, not judged, starts
//! cold at 2x, to show what it predicts without that.

use std::{path::Path, time::Duration};

use super::{figures, Ctx, Lab, Report, MIX};
use crate::{
    client::ClientConfig,
    goal::Goals,
    load::Phase,
    metrics::{Summary, Window},
    plot::{self, Series},
    policy::Policy,
    report::{num, pct, Table},
    server::{EngineSample, Refusals},
    trial::{Trial, TrialSpec},
};

/// The judged loads, as multiples of the capacity.
const LOADS: [(&str, f64); 2] = [("1.5x", 1.5), ("2x", 2.0)];

/// The trial that starts cold, not judged.
const COLD: &str = "2x cold";

/// The ordinary traffic before the overload.
fn lead_in(lab: &Lab) -> Duration {
    lab.secs(10.0, 1.0)
}

/// One trial per load after a lead-in at half the capacity, and one cold
/// at 2x; callers send one attempt.
pub fn specs(lab: &Lab, capacity: f64) -> Vec<TrialSpec> {
    let phase = |duration, load: f64| Phase {
        duration,
        rates: MIX.map(|share| share * load * capacity),
        slowdown_pct: 100,
    };
    let overload = lab.warm_up() + lab.measured();
    let client = ClientConfig {
        max_attempts: 1,
        ..lab.client()
    };
    let mut specs: Vec<TrialSpec> = LOADS
        .iter()
        .enumerate()
        .map(|(i, &(label, load))| TrialSpec {
            label: label.into(),
            phases: vec![phase(lead_in(lab), 0.5), phase(overload, load)],
            client,
            seed: 800 + i as u64,
        })
        .collect();
    specs.push(TrialSpec {
        label: COLD.into(),
        phases: vec![phase(overload, 2.0)],
        client,
        seed: 810,
    });
    specs
}

/// The measured window: after the lead-in (if any) and the warm-up.
fn window(ctx: &Ctx<'_>, t: &Trial) -> Window {
    let lead_in = if t.spec.phases.len() > 1 {
        t.spec.phases[0].duration
    } else {
        Duration::ZERO
    };
    figures::after(&t.spec, lead_in + ctx.lab.warm_up())
}

/// The engine's refusals over `w`: made (enforcing) and would-be (shadow).
fn refusals_in(t: &Trial, w: Window) -> Option<(u64, u64)> {
    let at = |secs: f64| -> Option<EngineSample> {
        t.samples
            .iter()
            .take_while(|(when, _)| *when <= secs)
            .last()
            .and_then(|(_, s)| s.engine)
    };
    let start = at(w.start.as_secs_f64())?;
    let end = if w.end >= t.spec.duration() {
        t.server.engine?
    } else {
        at(w.end.as_secs_f64())?
    };
    let grown = |end: Refusals, start: Refusals| end.total().saturating_sub(start.total());
    Some((
        grown(end.refusals, start.refusals),
        grown(end.would, start.would),
    ))
}

/// The share of attempts refused (enforcing) or that would have been
/// (shadow), from the engine's counters, over the window after the warm-up.
fn refused_share(ctx: &Ctx<'_>, t: &Trial) -> Option<f64> {
    let w = window(ctx, t);
    let s = Summary::of(&t.records, w, None);
    let (made, would) = refusals_in(t, w)?;
    let refused = match t.policy {
        Policy::Shadow(_) => would,
        _ => made,
    };
    (s.attempts > 0).then(|| refused as f64 / s.attempts as f64)
}

/// Figures after the warm-up, and the goal per load.
pub fn report(ctx: &Ctx<'_>, trials: &[Trial]) -> Report {
    let cap = ctx.capacity();
    let mut table = Table::new(
        format!(
            "shadow: mixed classes, callers that do not retry; {}; {}; refused share: the \
             engine's refusals (shed) or would-be refusals (shadow) over the attempts sent",
            ctx.service,
            ctx.true_note()
        ),
        &[
            "step",
            "policy",
            "offered/s (target)",
            "attempts",
            "refused share (engine)",
            "refused share (clients saw 429/503/504)",
            "goodput/s",
            "of cap",
            "p99 ms",
            "mean limit",
        ],
    );
    for t in trials {
        let w = window(ctx, t);
        let s = Summary::of(&t.records, w, None);
        table.row(vec![
            t.spec.label.clone(),
            t.policy.to_string(),
            figures::offered(t, &s, w),
            s.attempts.to_string(),
            refused_share(ctx, t).map_or("-".into(), |x| pct(x, 1)),
            pct(s.shed_attempts as f64 / s.attempts.max(1) as f64, 1),
            num(s.goodput, 0),
            pct(s.goodput / cap, 0),
            num(s.p99_ms, 0),
            figures::limit_cell(t, w),
        ]);
    }
    let mut goals = Goals::default();
    for (enforcing, shadow) in [
        (Policy::Shed(None), Policy::Shadow(None)),
        (
            Policy::Shed(Some(crate::policy::Limit::True)),
            Policy::Shadow(Some(crate::policy::Limit::True)),
        ),
    ] {
        for (label, _) in LOADS {
            let (Some(e), Some(s)) = (
                figures::find(trials, enforcing, label),
                figures::find(trials, shadow, label),
            ) else {
                continue;
            };
            let (made, would) = (refused_share(ctx, e), refused_share(ctx, s));
            let gap = made
                .zip(would)
                .map(|(made, would)| (would - made).abs() * 100.0);
            let against = match made {
                Some(made) => Ok((format!("{enforcing}'s {} +- 5 points", pct(made, 1)), 5.0)),
                None => Err(format!("{enforcing} has no engine counters")),
            };
            goals.compare(
                label,
                &shadow.to_string(),
                "would-refuse share within 5 points of the refused share",
                gap,
                against,
                true,
                figures::points,
            );
        }
    }
    Report {
        figures: table,
        goals,
    }
}

/// Refusals per second over time: made by `shed`, would-be by `shadow`.
pub fn plot(
    ctx: &Ctx<'_>,
    trials: &[Trial],
    path: &Path,
) -> Result<(), Box<dyn std::error::Error>> {
    let bucket = ctx.lab.bucket().as_secs_f64();
    let series = trials
        .iter()
        .map(|t| {
            let counted = |e: &EngineSample| match t.policy {
                Policy::Shadow(_) => e.would.total(),
                _ => e.refusals.total(),
            };
            let counts: Vec<(f64, u64)> = t
                .samples
                .iter()
                .filter_map(|(at, s)| s.engine.as_ref().map(|e| (*at, counted(e))))
                .collect();
            Series {
                name: format!("{} {}", t.policy, t.spec.label),
                points: counts
                    .windows(2)
                    .map(|pair| {
                        let ((_, before), (at, after)) = (pair[0], pair[1]);
                        (at, after.saturating_sub(before) as f64 / bucket)
                    })
                    .collect(),
            }
        })
        .collect();
    plot::line_chart(
        path,
        "shadow: refusals per second (shed) and would-be refusals (shadow)",
        "seconds",
        "refusals/s",
        series,
    )
}
