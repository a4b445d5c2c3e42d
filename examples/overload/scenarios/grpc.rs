//! `grpc`: the steady mix at 2x capacity, called over gRPC by tonic clients
//! and, as the reference, over HTTP by the lab's HTTP clients: the same
//! open-loop load, deadlines, attempts and backoff; gRPC callers mark
//! retries with `grpc-previous-rpc-attempts` and wait at least the server's
//! `grpc-retry-pushback-ms`, as HTTP callers mark `shed-attempt` and wait
//! `Retry-After`.
//!
//! Goals for `shed` (at its defaults) over gRPC: goodput at least 90% of
//! capacity (steady's goal at 2x), and no more than 3 points of capacity
//! below its own goodput over HTTP in the same run.

use std::path::Path;

use super::{figures, Ctx, Report, MIX};
use crate::{
    class::Class,
    client::{ClientConfig, Protocol},
    goal::Goals,
    load::Phase,
    metrics::Summary,
    plot,
    policy::Policy,
    report::{num, pct, Table},
    trial::{Trial, TrialSpec},
};

/// The load, in multiples of capacity.
const LOAD: f64 = 2.0;

/// The label of the trial at [`LOAD`] over `protocol`.
fn label(protocol: Protocol) -> String {
    format!("{LOAD}x {}", protocol.name())
}

/// One trial per protocol at the same load and seed.
pub fn specs(lab: &super::Lab, capacity: f64) -> Vec<TrialSpec> {
    [Protocol::Grpc, Protocol::Http]
        .into_iter()
        .map(|protocol| TrialSpec {
            label: label(protocol),
            phases: vec![Phase {
                duration: lab.warm_up() + lab.measured(),
                rates: MIX.map(|share| share * LOAD * capacity),
                slowdown_pct: 100,
            }],
            client: ClientConfig {
                protocol,
                ..lab.client()
            },
            seed: 800,
        })
        .collect()
}

/// The figures per protocol and policy, and the goals of `shed` over gRPC.
pub fn report(ctx: &Ctx<'_>, trials: &[Trial]) -> Report {
    let cap = ctx.capacity();
    let lab = ctx.lab;
    let mut table = Table::new(
        format!(
            "grpc: mixed classes at {LOAD}x, tonic clients (gRPC over HTTP/2) and HTTP/1.1 clients; {}; {}; figures over {:.1} s after a {:.1} s warm-up",
            ctx.service,
            ctx.true_note(),
            lab.measured().as_secs_f64(),
            lab.warm_up().as_secs_f64()
        ),
        &[
            "calls", "policy", "offered/s (target)", "goodput/s", "of cap", "success",
            "critical", "interactive", "batch", "background", "attempts/req", "refused",
            "p50 ms", "p99 ms", "failed attempts", "wasted work",
        ],
    );
    for t in trials {
        let w = figures::after(&t.spec, lab.warm_up());
        let s = Summary::of(&t.records, w, None);
        let mut row = vec![
            t.spec.client.protocol.name().to_owned(),
            t.policy.to_string(),
            figures::offered(t, &s, w),
            num(s.goodput, 0),
            pct(s.goodput / cap, 0),
            pct(s.success_ratio(), 1),
        ];
        row.extend(
            Class::ALL.map(|class| pct(Summary::of(&t.records, w, Some(class)).success_ratio(), 1)),
        );
        row.extend([
            num(s.amplification(), 2),
            pct(s.shed_ratio(), 2),
            num(s.p50_ms, 0),
            num(s.p99_ms, 0),
            s.failures_label(),
            pct(figures::wasted_in(t, w), 1),
        ]);
        table.row(row);
    }
    let goodput = |protocol: Protocol| {
        figures::find(trials, Policy::Shed(None), &label(protocol))
            .map(|t| Summary::of(&t.records, figures::after(&t.spec, lab.warm_up()), None).goodput)
    };
    let grpc = goodput(Protocol::Grpc);
    let step = format!("{LOAD}x");
    let mut goals = Goals::default();
    goals.compare(
        &step,
        "shed over gRPC",
        "goodput >= 90% of capacity",
        grpc,
        Ok((format!("90% of calibrated capacity {cap:.0}/s"), 0.9 * cap)),
        false,
        |x| format!("{x:.0}/s"),
    );
    goals.compare(
        &step,
        "shed over gRPC",
        "goodput >= shed over HTTP - 3 points of capacity",
        grpc,
        goodput(Protocol::Http)
            .map(|http| {
                (
                    format!("shed over HTTP {http:.0}/s - 3 points"),
                    http - 0.03 * cap,
                )
            })
            .ok_or_else(|| "shed over HTTP not run".to_owned()),
        false,
        |x| format!("{x:.0}/s"),
    );
    Report {
        figures: table,
        goals,
    }
}

/// Goodput over time of the gRPC trials, per policy, with the offered load.
pub fn plot(
    ctx: &Ctx<'_>,
    trials: &[Trial],
    path: &Path,
) -> Result<(), Box<dyn std::error::Error>> {
    let series =
        figures::goodput_over_time(trials, Some(&label(Protocol::Grpc)), ctx.lab.bucket(), None);
    plot::line_chart(
        path,
        &format!("grpc: goodput over time at {LOAD}x, tonic clients"),
        "seconds",
        "req/s",
        series,
    )
}
