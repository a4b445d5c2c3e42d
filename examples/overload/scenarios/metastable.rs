//! `metastable`: mixed classes at 70% of capacity; the service time doubles
//! for 10 s (the trigger), then returns to normal.
//!
//! Without protection, timeouts and retries keep the queue full of work
//! nobody waits for, and the service stays collapsed after the trigger (a
//! metastable failure). Recovery is the first time after the trigger from
//! which the goodput over the next 2 s is at least 90% of the level before
//! it. Goal for `shed`: recovery within 2 s.

use std::{path::Path, time::Duration};

use super::{figures, Ctx, Lab, Report, MIX};
use crate::{
    goal::Goals,
    load::Phase,
    metrics::{Summary, Window},
    plot,
    policy::Policy,
    report::{num, pct, Table},
    trial::{Trial, TrialSpec},
};

/// Before, during and after the trigger.
pub fn specs(lab: &Lab, capacity: f64) -> Vec<TrialSpec> {
    let phase = |duration, slowdown_pct| Phase {
        duration,
        rates: MIX.map(|share| share * 0.7 * capacity),
        slowdown_pct,
    };
    vec![TrialSpec {
        label: "0.7x".into(),
        phases: vec![
            phase(lab.secs(10.0, 0.5), 100),
            phase(lab.secs(10.0, 0.5), 200),
            phase(lab.secs(20.0, 1.0), 100),
        ],
        client: lab.client(),
        seed: 400,
    }]
}

/// Jobs waiting for a worker at the last sample taken by `at`.
fn queued_at(t: &Trial, at: Duration) -> String {
    t.samples
        .iter()
        .take_while(|(when, _)| *when <= at.as_secs_f64())
        .last()
        .map_or("-".into(), |(_, s)| s.queued.to_string())
}

/// Goodput before, during and after the trigger, recovery, and the goal.
pub fn report(ctx: &Ctx<'_>, trials: &[Trial]) -> Report {
    let mut table = Table::new(
        format!(
            "metastable: mixed classes at 70% of capacity, service time doubled during the trigger; {}; {}; \
             recovery = first time after the trigger from which the goodput over the next 2 s is >= 90% of the pre-trigger level",
            ctx.service,
            ctx.true_note()
        ),
        &[
            "policy", "offered/s (target)", "pre goodput/s", "trigger goodput/s", "after goodput/s", "end goodput/s",
            "after attempts/req", "recovery", "collapsed at end", "queue: trigger end/end", "wasted work",
        ],
    );
    let mut goals = Goals::default();
    let window = Duration::from_secs(2);
    for t in trials {
        let pre = figures::phase(&t.spec, 0);
        let trig = figures::phase(&t.spec, 1);
        let post = figures::phase(&t.spec, 2);
        let warm = Window {
            start: pre.start + (pre.end - pre.start) / 5,
            ..pre
        };
        let all = Summary::of(&t.records, figures::whole(&t.spec), None);
        let pre_level = figures::goodput_between(t, warm.start, warm.end - warm.start);
        let during = figures::goodput_between(t, trig.start, trig.end - trig.start);
        let after = Summary::of(&t.records, post, None);
        let tail = (post.end - post.start).min(Duration::from_secs(5));
        let end_level = figures::goodput_between(t, post.end - tail, tail);
        let recovery = figures::recovery(t, post.start, post.end, window, 0.9 * pre_level);
        table.row(vec![
            t.policy.to_string(),
            figures::offered(t, &all, figures::whole(&t.spec)),
            num(pre_level, 0),
            num(during, 0),
            num(after.goodput, 0),
            num(end_level, 0),
            num(after.amplification(), 2),
            figures::recovery_cell(recovery),
            if end_level < 0.5 * pre_level {
                "yes"
            } else {
                "no"
            }
            .into(),
            format!("{}/{}", queued_at(t, trig.end), queued_at(t, post.end)),
            pct(figures::wasted_in(t, figures::whole(&t.spec)), 1),
        ]);
        if t.policy == Policy::Shed(None) {
            goals.recovery(
                &t.spec.label,
                "recovery after the trigger <= 2 s",
                recovery,
                format!("2 s (90% of its pre-trigger {pre_level:.0}/s)"),
                2.0,
            );
        }
    }
    Report {
        figures: table,
        goals,
    }
}

/// Goodput over time.
pub fn plot(
    ctx: &Ctx<'_>,
    trials: &[Trial],
    path: &Path,
) -> Result<(), Box<dyn std::error::Error>> {
    let trig = figures::phase_secs(trials, 1);
    plot::line_chart(
        path,
        &format!(
            "metastable: goodput; capacity halved from {:.0} s to {:.0} s",
            trig.0, trig.1
        ),
        "seconds",
        "req/s",
        figures::goodput_over_time(trials, None, ctx.lab.bucket(), None),
    )
}
