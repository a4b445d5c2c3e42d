//! `isolation`: interactive traffic at 40% of capacity while batch spikes
//! from 0.2x to 12x.
//!
//! The service runs at twice the lab's service time (40 ms by default): at
//! 20 ms the 12x spike (4,500 batch requests/s, and up to three attempts
//! each) is more than the load generator can offer on two cores beside an
//! unprotected server; a run at 20 ms showed it falling behind its schedule
//! by 800 ms under `none`. At 40 ms it keeps up (the table's last notes
//! check it on every run).
//!
//! Goal for `shed`: interactive success >= 99.5% over the spike while more
//! than half of all attempts are shed.

use std::path::Path;

use super::{figures, Ctx, Lab, Report};
use crate::{
    class::Class,
    downstream::ServiceTime,
    goal::Goals,
    load::Phase,
    metrics::Summary,
    plot,
    policy::Policy,
    report::{num, pct, Table},
    server::ServiceSpec,
    trial::{Trial, TrialSpec},
};

/// The lab's workers at twice its service time; see the module docs.
pub fn service(lab: &Lab) -> ServiceSpec {
    ServiceSpec::Downstream {
        workers: lab.workers,
        time: ServiceTime {
            mean: lab.service.mean * 2,
            ..lab.service
        },
    }
}

/// Before, during and after the spike.
pub fn specs(lab: &Lab, capacity: f64) -> Vec<TrialSpec> {
    let rates = |batch: f64| {
        let mut r = [0.0; 4];
        r[Class::Interactive.index()] = 0.4 * capacity;
        r[Class::Batch.index()] = batch * capacity;
        r
    };
    let phase = |duration, batch| Phase {
        duration,
        rates: rates(batch),
        slowdown_pct: 100,
    };
    vec![TrialSpec {
        label: "12x".into(),
        phases: vec![
            phase(lab.secs(3.0, 0.5), 0.2),
            phase(lab.measured(), 12.0),
            phase(lab.secs(3.0, 0.5), 0.2),
        ],
        client: lab.client(),
        seed: 200,
    }]
}

/// Figures over the spike, and the goal of `shed`.
pub fn report(ctx: &Ctx<'_>, trials: &[Trial]) -> Report {
    let mut table = Table::new(
        format!(
            "isolation: interactive at 40% of capacity, batch spiking from 0.2x to 12x; {}; {}; figures over the {:.1} s spike",
            ctx.service,
            ctx.true_note(),
            ctx.lab.measured().as_secs_f64()
        ),
        &[
            "policy", "offered/s (target)", "interactive success", "interactive p99 ms", "interactive goodput/s",
            "batch goodput/s", "shed attempts", "attempts/req", "failed attempts", "wasted work", "mean limit",
        ],
    );
    let mut goals = Goals::default();
    for t in trials {
        let w = figures::phase(&t.spec, 1);
        let all = Summary::of(&t.records, w, None);
        let inter = Summary::of(&t.records, w, Some(Class::Interactive));
        let batch = Summary::of(&t.records, w, Some(Class::Batch));
        table.row(vec![
            t.policy.to_string(),
            figures::offered(t, &all, w),
            pct(inter.success_ratio(), 2),
            num(inter.p99_ms, 0),
            num(inter.goodput, 0),
            num(batch.goodput, 0),
            pct(all.shed_ratio(), 1),
            num(all.amplification(), 2),
            all.failures_label(),
            pct(figures::wasted_in(t, w), 1),
            figures::limit_cell(t, w),
        ]);
        table.note(format!(
            "{}: interactive failed attempts over the spike: {}",
            t.policy,
            inter.failures_label()
        ));
        if t.policy == Policy::Shed(None) {
            goals.compare(
                &t.spec.label,
                "shed",
                "interactive success >= 99.5%",
                Some(inter.success_ratio()),
                Ok(("99.5%".into(), 0.995)),
                false,
                |x| pct(x, 2),
            );
            goals.compare(
                &t.spec.label,
                "shed",
                "more than half of all attempts shed",
                Some(all.shed_ratio()),
                Ok(("50%, exclusive".into(), 0.5 + 1e-9)),
                false,
                |x| pct(x, 1),
            );
        }
    }
    Report {
        figures: table,
        goals,
    }
}

/// Interactive goodput over time.
pub fn plot(
    ctx: &Ctx<'_>,
    trials: &[Trial],
    path: &Path,
) -> Result<(), Box<dyn std::error::Error>> {
    let spike = figures::phase_secs(trials, 1);
    plot::line_chart(
        path,
        &format!(
            "isolation: interactive goodput; batch at 12x from {:.0} s to {:.0} s",
            spike.0, spike.1
        ),
        "seconds",
        "interactive req/s",
        figures::goodput_over_time(trials, None, ctx.lab.bucket(), Some(Class::Interactive)),
    )
}
