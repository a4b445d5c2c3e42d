//! `steady`: mixed classes at a steady offered load, swept from 0.9x to 4x
//! the calibrated capacity.
//!
//! Goals for `shed` (at its defaults): at 0.9x it refuses (429, 503 or 504)
//! at most 0.5% of attempts, as an unprotected server refuses none; at 1x
//! its goodput is at least 93% of capacity; at 2x and 4x at least 90%.

use std::path::Path;

use super::{figures, Ctx, Report, MIX};
use crate::{
    goal::Goals,
    load::Phase,
    metrics::Summary,
    plot::{self, Series},
    policy::Policy,
    report::{num, pct, Table},
    trial::{Trial, TrialSpec},
};

/// The load multiples of capacity, in order.
const STEPS: [f64; 4] = [0.9, 1.0, 2.0, 4.0];

/// One trial per step: a warm-up and the measured window at one load.
pub fn specs(lab: &super::Lab, capacity: f64) -> Vec<TrialSpec> {
    let steps: &[f64] = if lab.quick { &[2.0] } else { &STEPS };
    steps
        .iter()
        .enumerate()
        .map(|(i, &m)| TrialSpec {
            label: format!("{m}x"),
            phases: vec![Phase {
                duration: lab.warm_up() + lab.measured(),
                rates: MIX.map(|share| share * m * capacity),
                slowdown_pct: 100,
            }],
            client: lab.client(),
            seed: 100 + i as u64,
        })
        .collect()
}

/// The figures per step and policy, and the goals of `shed`.
pub fn report(ctx: &Ctx<'_>, trials: &[Trial]) -> Report {
    let cap = ctx.capacity();
    let lab = ctx.lab;
    let mut table = Table::new(
        format!(
            "steady: mixed classes, offered load swept; {}; {}; figures over {:.1} s after a {:.1} s warm-up",
            ctx.service,
            ctx.true_note(),
            lab.measured().as_secs_f64(),
            lab.warm_up().as_secs_f64()
        ),
        &[
            "load", "policy", "offered/s (target)", "goodput/s", "of cap", "success", "attempts/req",
            "refused", "p50 ms", "p99 ms", "failed attempts", "wasted work", "mean limit",
        ],
    );
    for t in trials {
        let w = figures::after(&t.spec, lab.warm_up());
        let s = Summary::of(&t.records, w, None);
        table.row(vec![
            t.spec.label.clone(),
            t.policy.to_string(),
            figures::offered(t, &s, w),
            num(s.goodput, 0),
            pct(s.goodput / cap, 0),
            pct(s.success_ratio(), 1),
            num(s.amplification(), 2),
            pct(s.shed_ratio(), 2),
            num(s.p50_ms, 0),
            num(s.p99_ms, 0),
            s.failures_label(),
            pct(figures::wasted_in(t, w), 1),
            figures::limit_cell(t, w),
        ]);
    }
    let mut goals = Goals::default();
    let shed = Policy::Shed(None);
    let summary = |p: Policy, label: &str| {
        figures::find(trials, p, label)
            .map(|t| Summary::of(&t.records, figures::after(&t.spec, lab.warm_up()), None))
    };
    for label in ["0.9x", "1x", "2x", "4x"] {
        let Some(s) = summary(shed, label) else {
            continue;
        };
        let capacity_ref = |share: f64| {
            Ok((
                format!("{:.0}% of calibrated capacity {cap:.0}/s", share * 100.0),
                share * cap,
            ))
        };
        match label {
            "0.9x" => {
                let none = summary(Policy::None, label).map_or("none not run".to_owned(), |n| {
                    format!("none refused {}", pct(n.shed_ratio(), 2))
                });
                goals.compare(
                    label,
                    "shed",
                    "refuses (429/503/504) <= 0.5% of attempts",
                    Some(s.shed_ratio()),
                    Ok((format!("0.5% ({none})"), 0.005)),
                    true,
                    |x| pct(x, 2),
                );
            }
            "1x" => goals.compare(
                label,
                "shed",
                "goodput >= 93% of capacity",
                Some(s.goodput),
                capacity_ref(0.93),
                false,
                |x| format!("{x:.0}/s"),
            ),
            _ => goals.compare(
                label,
                "shed",
                "goodput >= 90% of capacity",
                Some(s.goodput),
                capacity_ref(0.90),
                false,
                |x| format!("{x:.0}/s"),
            ),
        }
    }
    Report {
        figures: table,
        goals,
    }
}

/// Goodput against offered load, per policy, with the capacity.
pub fn plot(
    ctx: &Ctx<'_>,
    trials: &[Trial],
    path: &Path,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut series: Vec<Series> = figures::policies(trials)
        .into_iter()
        .map(|p| Series {
            name: p.to_string(),
            points: trials
                .iter()
                .filter(|t| t.policy == p)
                .map(|t| {
                    let w = figures::after(&t.spec, ctx.lab.warm_up());
                    let s = Summary::of(&t.records, w, None);
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
        name: "calibrated capacity".into(),
        points: vec![(0.0, ctx.capacity()), (x_max, ctx.capacity())],
    });
    plot::line_chart(
        path,
        "steady: goodput against offered load",
        "offered req/s",
        "goodput req/s",
        series,
    )
}
