//! `deadline`: mixed classes at 2x with a 150 ms deadline per request.
//!
//! Goal for `shed`: at most 5% of the server's work goes on after the
//! request's deadline has passed (work past deadline).

use std::{path::Path, time::Duration};

use super::{figures, Ctx, Lab, Report, MIX};
use crate::{
    client::ClientConfig,
    goal::Goals,
    load::Phase,
    metrics::{self, Summary},
    plot,
    policy::Policy,
    report::{num, pct, Table},
    trial::{Trial, TrialSpec},
};

/// One trial at 2x with tight deadlines.
pub fn specs(lab: &Lab, capacity: f64) -> Vec<TrialSpec> {
    vec![TrialSpec {
        label: "2x".into(),
        phases: vec![Phase {
            duration: lab.warm_up() + lab.measured(),
            rates: MIX.map(|share| share * 2.0 * capacity),
            slowdown_pct: 100,
        }],
        client: ClientConfig {
            deadline: Duration::from_millis(150),
            attempt_timeout: Duration::from_millis(150),
            ..lab.client()
        },
        seed: 300,
    }]
}

/// Figures after the warm-up, and the goal of `shed`.
pub fn report(ctx: &Ctx<'_>, trials: &[Trial]) -> Report {
    let cap = ctx.capacity();
    let mut table = Table::new(
        format!(
            "deadline: mixed classes at 2x with a 150 ms deadline per request; {}; {}; \
             wasted work counts the whole of every job that finished late or whose caller had gone",
            ctx.service,
            ctx.true_note()
        ),
        &[
            "policy",
            "offered/s (target)",
            "goodput/s",
            "of cap",
            "success",
            "attempts/req",
            "p99 ms",
            "failed attempts",
            "late jobs",
            "wasted work",
            "work past deadline",
            "mean limit",
        ],
    );
    let mut goals = Goals::default();
    for t in trials {
        let w = figures::after(&t.spec, ctx.lab.warm_up());
        let s = Summary::of(&t.records, w, None);
        let work = figures::work_in(t, w);
        let past = metrics::past_deadline_ratio(&work);
        table.row(vec![
            t.policy.to_string(),
            figures::offered(t, &s, w),
            num(s.goodput, 0),
            pct(s.goodput / cap, 0),
            pct(s.success_ratio(), 1),
            num(s.amplification(), 2),
            num(s.p99_ms, 0),
            s.failures_label(),
            format!("{}/{}", work.late, work.completed),
            pct(metrics::wasted_ratio(&work), 1),
            pct(past, 1),
            figures::limit_cell(t, w),
        ]);
        if t.policy == Policy::Shed(None) {
            goals.compare(
                &t.spec.label,
                "shed",
                "work past deadline <= 5%",
                Some(past),
                Ok(("5%".into(), 0.05)),
                true,
                |x| pct(x, 1),
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
    plot::line_chart(
        path,
        "deadline: goodput at 2x with 150 ms deadlines",
        "seconds",
        "req/s",
        figures::goodput_over_time(trials, None, ctx.lab.bucket(), None),
    )
}
