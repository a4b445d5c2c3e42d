//! `unknown-capacity` (and `cpu-bound`, which runs the same steps and goals
//! on another service): what a user who does not know the service's
//! concurrency gets.
//!
//! Policies: `shed` with no limit given, shed and tower pinned at a guess
//! of 64 (8x the true concurrency of the default service, and shed 0.1's
//! default), and both pinned at the true concurrency the calibration found,
//! the references. Steps: mixed classes at 2x and 4x, and interactive at
//! 0.4x beside batch at 3x.
//!
//! Goals, at 2x and 4x: `shed` reaches the goodput of `shed@true` less 2
//! points and of `tower@true` less 3 points (points of capacity), wastes at
//! most 2% of the work, and keeps the p99 of its successes within a factor
//! (1.5 here, 3 on the CPU-bound service) of the service's no-load p99; at
//! 0.4x + 3x its interactive success is at least 99.5%. Every `shed@N`
//! reaches `tower@N` less 3 points.

use std::path::Path;

use super::{figures, Ctx, Lab, Report, Scenario, MIX};
use crate::{
    class::Class,
    goal::{Goals, Reference},
    load::Phase,
    metrics::Summary,
    plot::{self, Panel},
    policy::{Limit, Policy},
    report::{num, pct, Table},
    trial::{Trial, TrialSpec},
};

/// The label of the step with interactive beside batch.
const MIXED_STEP: &str = "0.4x+3x";

/// Trials: 2x and 4x mixed, and interactive 0.4x beside batch 3x.
pub fn specs(lab: &Lab, capacity: f64) -> Vec<TrialSpec> {
    let spec = |label: &str, rates: [f64; 4], seed| TrialSpec {
        label: label.into(),
        phases: vec![Phase {
            duration: lab.warm_up() + lab.measured(),
            rates,
            slowdown_pct: 100,
        }],
        client: lab.client(),
        seed,
    };
    let mixed = |m: f64| MIX.map(|share| share * m * capacity);
    let mut beside = [0.0; 4];
    beside[Class::Interactive.index()] = 0.4 * capacity;
    beside[Class::Batch.index()] = 3.0 * capacity;
    let mut specs = vec![spec("2x", mixed(2.0), 500)];
    if !lab.quick {
        specs.push(spec("4x", mixed(4.0), 501));
        specs.push(spec(MIXED_STEP, beside, 502));
    }
    specs
}

/// Figures per step and policy, and the goals of `shed` and `shed@N`;
/// `p99_factor` bounds the p99 of successes against the no-load p99.
pub fn report(ctx: &Ctx<'_>, trials: &[Trial], scenario: Scenario, p99_factor: f64) -> Report {
    let cap = ctx.capacity();
    let lab = ctx.lab;
    let mut table = Table::new(
        format!(
            "{scenario}: {}; {}; figures over {:.1} s after a {:.1} s warm-up; \
             `true` = {} (calibrated); goodput in points of capacity",
            ctx.service,
            ctx.true_note(),
            lab.measured().as_secs_f64(),
            lab.warm_up().as_secs_f64(),
            ctx.cal.true_concurrency(),
        ),
        &[
            "step",
            "policy",
            "offered/s (target)",
            "goodput/s",
            "of cap",
            "success",
            "interactive success",
            "attempts/req",
            "refused",
            "p50 ms",
            "p99 ms",
            "p99 ms crit/inter/batch/bg",
            "failed attempts",
            "wasted work",
            "mean limit",
        ],
    );
    let window = |t: &Trial| figures::after(&t.spec, lab.warm_up());
    for t in trials {
        let w = window(t);
        let s = Summary::of(&t.records, w, None);
        let by_class = Class::ALL.map(|class| Summary::of(&t.records, w, Some(class)));
        let inter = &by_class[Class::Interactive.index()];
        table.row(vec![
            t.spec.label.clone(),
            t.policy.to_string(),
            figures::offered(t, &s, w),
            num(s.goodput, 0),
            pct(s.goodput / cap, 1),
            pct(s.success_ratio(), 1),
            pct(inter.success_ratio(), 2),
            num(s.amplification(), 2),
            pct(s.shed_ratio(), 1),
            num(s.p50_ms, 0),
            num(s.p99_ms, 0),
            p99_by_class(&by_class),
            s.failures_label(),
            pct(figures::wasted_in(t, w), 1),
            figures::limit_cell(t, w),
        ]);
    }

    // Goodput of `policy` at `step`, in percent of capacity.
    let goodput_pct = |policy: Policy, step: &str| {
        figures::find(trials, policy, step)
            .map(|t| 100.0 * Summary::of(&t.records, window(t), None).goodput / cap)
    };
    let less = |policy: Policy, step: &str, points: f64| -> Reference {
        goodput_pct(policy, step)
            .map(|g| (format!("{policy} {g:.1}% - {points} pts"), g - points))
            .ok_or_else(|| format!("{policy} not run"))
    };
    let mut goals = Goals::default();
    let shed = Policy::Shed(None);
    for step in ["2x", "4x"] {
        let Some(t) = figures::find(trials, shed, step) else {
            continue;
        };
        let w = window(t);
        let s = Summary::of(&t.records, w, None);
        let g = Some(100.0 * s.goodput / cap);
        for (reference, points) in [
            (Policy::Shed(Some(Limit::True)), 2.0),
            (Policy::Tower(Limit::True), 3.0),
        ] {
            goals.compare(
                step,
                "shed",
                &format!("goodput >= {reference} less {points} points"),
                g,
                less(reference, step, points),
                false,
                figures::points,
            );
        }
        goals.compare(
            step,
            "shed",
            "wasted work <= 2%",
            Some(figures::wasted_in(t, w)),
            Ok(("2%".into(), 0.02)),
            true,
            |x| pct(x, 1),
        );
        // No success has no p99, and cannot meet a latency goal.
        let p99 = if s.successes == 0 { f64::MAX } else { s.p99_ms };
        goals.compare(
            step,
            "shed",
            &format!("p99 of successes <= {p99_factor}x no-load p99"),
            Some(p99),
            Ok((
                format!(
                    "{p99_factor} x no-load p99 {:.1} ms (calibration)",
                    ctx.cal.no_load_p99_ms()
                ),
                p99_factor * ctx.cal.no_load_p99_ms(),
            )),
            true,
            |x| format!("{x:.1} ms"),
        );
        if s.successes == 0 {
            if let Some(g) = goals.0.last_mut() {
                g.measured = "no success".into();
            }
        }
    }
    if let Some(t) = figures::find(trials, shed, MIXED_STEP) {
        let inter = Summary::of(&t.records, window(t), Some(Class::Interactive));
        goals.compare(
            MIXED_STEP,
            "shed",
            "interactive success >= 99.5%",
            Some(inter.success_ratio()),
            Ok(("99.5%".into(), 0.995)),
            false,
            |x| pct(x, 2),
        );
    }
    for policy in figures::policies(trials) {
        let Policy::Shed(Some(Limit::Fixed(n))) = policy else {
            continue;
        };
        for step in ["2x", "4x"] {
            if let Some(g) = goodput_pct(policy, step) {
                let tower = Policy::Tower(Limit::Fixed(n));
                goals.compare(
                    step,
                    &policy.to_string(),
                    &format!("goodput >= {tower} less 3 points"),
                    Some(g),
                    less(tower, step, 3.0),
                    false,
                    figures::points,
                );
            }
        }
    }
    Report {
        figures: table,
        goals,
    }
}

/// The p99 of successes of each class (`by_class`, in [`Class::ALL`]'s
/// order, most important first; `-` for a class with none), as
/// `critical / interactive / batch / background`.
///
/// The overall p99 of a step mixes classes the door treats apart: in an
/// overload the ranks being shed wait briefly or are refused, while the
/// ones the service drains with room to spare (critical traffic, shed
/// last) may wait as long as their callers do, behind each other. At one
/// slot on one core, a critical request waits for the request in service
/// and for the critical ones before it: at the 4x step critical traffic
/// alone is 0.4x of the core's capacity (`docs/lab/HISTORY.md`, "which
/// requests make the tail"). This column shows which class a p99 comes
/// from.
fn p99_by_class(by_class: &[Summary; Class::ALL.len()]) -> String {
    by_class.each_ref().map(|s| num(s.p99_ms, 0)).join(" / ")
}

/// Goodput over time at the highest mixed step, above the shed engines'
/// limits over the same time.
pub fn plot(
    ctx: &Ctx<'_>,
    trials: &[Trial],
    scenario: Scenario,
    path: &Path,
) -> Result<(), Box<dyn std::error::Error>> {
    let step = if figures::policies(trials)
        .iter()
        .any(|&p| figures::find(trials, p, "4x").is_some())
    {
        "4x"
    } else {
        "2x"
    };
    plot::panels(
        path,
        "seconds",
        vec![
            Panel {
                title: format!("{scenario}: goodput at {step}"),
                y_label: "req/s".into(),
                series: figures::goodput_over_time(trials, Some(step), ctx.lab.bucket(), None),
            },
            Panel {
                title: format!("{scenario}: the shed engine's concurrency limit at {step}"),
                y_label: "limit".into(),
                series: figures::limit_over_time(trials, Some(step)),
            },
        ],
    )
}
