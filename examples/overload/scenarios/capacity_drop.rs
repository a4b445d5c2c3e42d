//! `capacity-drop`: mixed classes at 0.8x of full capacity; after 10 s the
//! service time triples for 15 s (the workers stay, so the right limit stays
//! the same while the load is 2.4x the reduced capacity), then it is
//! restored for 15 s.
//!
//! The reduced capacity is measured, like the full one: a closed-loop step
//! at the calibration's highest concurrency with the slowdown on, before
//! the trials. Goals for `shed`: mean goodput over [drop + 2 s, restore) at
//! least 90% of the reduced capacity; after the restore, goodput back to at
//! least 90% of the offered load within 3 s (the first time from which the
//! goodput over the next 2 s reaches it, as `metastable` measures
//! recovery). The plot shows the shed engines' limit below the goodput.

use std::{path::Path, time::Duration};

use super::{figures, Ctx, Lab, Report, Setup, MIX};
use crate::{
    calibrate::{self, Plan, Step},
    goal::Goals,
    load::Phase,
    metrics::{Summary, Window},
    plot::{self, Panel},
    policy::{Policy, ServerPolicy},
    report::{num, pct, Table},
    server::ServerConfig,
    target::Target,
    trial::{Trial, TrialSpec},
};

/// The service-time multiplier during the drop, in percent.
const SLOWDOWN_PCT: u64 = 300;

/// The offered load, as a multiple of full capacity.
const LOAD: f64 = 0.8;

/// How long the reduced capacity is measured.
pub fn reduced_step(lab: &Lab) -> Duration {
    lab.secs(8.0, 0.3)
}

/// Before, during and after the drop.
pub fn specs(lab: &Lab, capacity: f64) -> Vec<TrialSpec> {
    let phase = |duration, slowdown_pct| Phase {
        duration,
        rates: MIX.map(|share| share * LOAD * capacity),
        slowdown_pct,
    };
    vec![TrialSpec {
        label: "0.8x".into(),
        phases: vec![
            phase(lab.secs(10.0, 0.5), 100),
            phase(lab.secs(15.0, 1.0), SLOWDOWN_PCT),
            phase(lab.secs(15.0, 1.0), 100),
        ],
        client: lab.client(),
        seed: 600,
    }]
}

/// Measures the capacity left during the drop (printed to stdout).
pub async fn measure_reduced(ctx: &Ctx<'_>, setup: &Setup) -> Result<Step, String> {
    let plan = Plan::for_parallelism(ctx.service.parallelism(), ctx.lab.quick);
    let config = ServerConfig {
        policy: ServerPolicy::None,
        service: ctx.service,
        seed: plan.seed,
        load_feedback: false,
    };
    let target = Target::start(&config, &setup.placement).await?;
    let step = calibrate::peak_at_slowdown(
        target.addr(),
        &target.control(),
        plan.max_concurrency,
        reduced_step(ctx.lab),
        SLOWDOWN_PCT,
        plan.seed,
        plan.parallelism,
    )
    .await;
    target.stop().await;
    let step = step?;
    println!(
        "capacity-drop: capacity at {}% service time {:.1} req/s (closed loop at concurrency {}, \
         {} completions; a third of the calibrated capacity would be {:.1})\n",
        SLOWDOWN_PCT,
        step.throughput,
        step.concurrency,
        step.completions,
        ctx.capacity() * 100.0 / SLOWDOWN_PCT as f64
    );
    Ok(step)
}

/// Figures per policy, and the goals of `shed`.
pub fn report(ctx: &Ctx<'_>, trials: &[Trial], reduced: Option<Step>) -> Report {
    let reduced_cap = reduced.map_or(f64::NAN, |s| s.throughput);
    let mut table = Table::new(
        format!(
            "capacity-drop: mixed classes at {LOAD}x of full capacity; service time x{} during the drop; {}; {}; \
             reduced capacity {reduced_cap:.0} req/s (measured); drop window = [drop + 2 s, restore); \
             recovery = first time after the restore from which the goodput over the next 2 s is >= 90% of the offered load",
            SLOWDOWN_PCT / 100,
            ctx.service,
            ctx.true_note()
        ),
        &[
            "policy", "offered/s (target)", "pre goodput/s", "drop goodput/s", "of reduced cap", "drop refused",
            "after goodput/s", "recovery", "mean limit pre/drop/after", "drop wasted work",
        ],
    );
    let mut goals = Goals::default();
    let window = Duration::from_secs(2);
    for t in trials {
        let pre = figures::phase(&t.spec, 0);
        let drop = figures::phase(&t.spec, 1);
        let post = figures::phase(&t.spec, 2);
        let settled_pre = Window {
            start: pre.start + Duration::from_secs(2).min((pre.end - pre.start) / 2),
            ..pre
        };
        let drop_window = Window {
            start: drop.start + Duration::from_secs(2).min((drop.end - drop.start) / 2),
            ..drop
        };
        let all = Summary::of(&t.records, figures::whole(&t.spec), None);
        let offered_target = t.spec.target_rate(post.start, post.end, None);
        let span = |w: Window| w.end - w.start;
        let pre_goodput = figures::goodput_between(t, settled_pre.start, span(settled_pre));
        let drop_goodput = figures::goodput_between(t, drop_window.start, span(drop_window));
        let after_goodput = figures::goodput_between(t, post.start, span(post));
        let recovery = figures::recovery(t, post.start, post.end, window, 0.9 * offered_target);
        let limits = [settled_pre, drop_window, post]
            .map(|w| figures::mean_limit(t, w).map_or("-".into(), |l| format!("{l:.1}")));
        table.row(vec![
            t.policy.to_string(),
            figures::offered(t, &all, figures::whole(&t.spec)),
            num(pre_goodput, 0),
            num(drop_goodput, 0),
            pct(drop_goodput / reduced_cap, 0),
            pct(Summary::of(&t.records, drop_window, None).shed_ratio(), 1),
            num(after_goodput, 0),
            figures::recovery_cell(recovery),
            limits.join("/"),
            pct(figures::wasted_in(t, drop_window), 1),
        ]);
        if t.policy == Policy::Shed(None) {
            goals.compare(
                "drop",
                "shed",
                "mean goodput over [drop + 2 s, restore) >= 90% of reduced capacity",
                Some(drop_goodput),
                reduced
                    .map(|s| {
                        (
                            format!("90% of measured reduced capacity {:.0}/s", s.throughput),
                            0.9 * s.throughput,
                        )
                    })
                    .ok_or_else(|| "reduced capacity not measured".into()),
                false,
                |x| format!("{x:.0}/s"),
            );
            goals.recovery(
                "restore",
                "goodput back to >= 90% of the offered load within 3 s",
                recovery,
                format!("3 s (90% of offered {offered_target:.0}/s over 2 s)"),
                3.0,
            );
        }
    }
    Report {
        figures: table,
        goals,
    }
}

/// Goodput over time above the shed engines' limits.
pub fn plot(
    ctx: &Ctx<'_>,
    trials: &[Trial],
    path: &Path,
) -> Result<(), Box<dyn std::error::Error>> {
    let drop = figures::phase_secs(trials, 1);
    plot::panels(
        path,
        "seconds",
        vec![
            Panel {
                title: format!(
                    "capacity-drop: goodput; service time x3 from {:.0} s to {:.0} s",
                    drop.0, drop.1
                ),
                y_label: "req/s".into(),
                series: figures::goodput_over_time(trials, None, ctx.lab.bucket(), None),
            },
            Panel {
                title: "capacity-drop: the shed engine's concurrency limit".into(),
                y_label: "limit".into(),
                series: figures::limit_over_time(trials, None),
            },
        ],
    )
}
