//! The workload of the instruction-count regression guard (`.ci/instructions`).
//!
//! `guard OP N` builds the engine state for `OP`, then performs `OP` `N` times.
//! The guard runs it under callgrind twice with different `N` and divides the
//! difference in instructions by the difference in `N`: setup, process start
//! and exit cancel out, leaving the exact instructions of one operation.
//!
//! Operations (the hot paths the design promises stay lock- and
//! allocation-free):
//! - `reject_by_level`: a request refused by a raised admission level;
//! - `reject_by_deadline`: a request whose deadline has already passed;
//! - `admit_release`: the admit fast path and the release of its permit;
//! - `admit_release_fixed_ticking` / `admit_release_adaptive`: the same on a
//!   clock that moves 500 us per read, so a controller interval closes every
//!   100 requests and its cost is spread over them, with a fixed limit and
//!   with the default adaptive one (the difference is what adapting costs).
//!
//! And, for comparison only (`.ci/instructions --compare`; not budgeted), one
//! whole request through a real `axum::Router`, exactly as
//! `benches/middleware.rs` measures it (the same routers, from
//! `benches/common/router.rs`: `ready` + `call` with a prepared 10-header
//! request, response body consumed, every call complete on its first poll):
//! - `router_reject_floor`: the bare router whose handler returns a 429;
//! - `router_reject_shed`: shed refusing (limit 1 held, no queue);
//! - `router_reject_shed_feedback`: the same with load feedback on;
//! - `router_reject_tower`: tower's `HandleErrorLayer` + `load_shed` +
//!   `concurrency_limit(1)` refusing;
//! - `router_reject_governor`: `tower_governor` refusing (burst used up);
//! - `router_admit_bare` / `router_admit_shed`: a request served without and
//!   with shed.
//!
//! Requests are built in batches of 16 before they are served, as the
//! criterion suite does; only [`measured_request`] is to be counted (the
//! guard runs these under callgrind with `--toggle-collect` on it), so
//! building the requests is left out as it is from criterion's timings.
//!
//! Without arguments (as `cargo test` and `cargo bench` run it) it performs
//! each operation a few times and exits: a smoke test that keeps it compiling.

use std::hint::black_box;
use std::task::{Context, Waker};

use axum::body::Body;
use axum::Router;
use http::{Request, StatusCode};
use shed_core::{Arrival, Class};

#[path = "common/mod.rs"]
mod common;
use common::router;

const OPS: [&str; 12] = [
    "reject_by_level",
    "reject_by_deadline",
    "admit_release",
    "admit_release_fixed_ticking",
    "admit_release_adaptive",
    "router_reject_floor",
    "router_reject_shed",
    "router_reject_shed_feedback",
    "router_reject_tower",
    "router_reject_governor",
    "router_admit_bare",
    "router_admit_shed",
];

/// Requests prepared ahead of serving, as criterion's `BatchSize`.
const BATCH: usize = 16;

/// One whole request through `app`: the only function counted for the
/// router operations (`.ci/instructions` passes `--toggle-collect` on its
/// name), so keep it out of line and keep its name.
#[inline(never)]
fn measured_request(app: &mut Router, request: Request<Body>, cx: &mut Context<'_>) -> StatusCode {
    router::serve(app, request, cx)
}

/// Serves `n` prepared requests through `app`, each expected to end in `status`.
fn serve_n(app: &mut Router, status: StatusCode, n: u64, cx: &mut Context<'_>) {
    let mut batch: Vec<Request<Body>> = Vec::with_capacity(BATCH);
    let mut left = n;
    while left > 0 {
        let size = left.min(BATCH as u64);
        batch.extend((0..size).map(|_| router::plain()));
        for request in batch.drain(..) {
            assert_eq!(measured_request(app, black_box(request), cx), status);
        }
        left -= size;
    }
}

/// Runs a router operation inside a tokio runtime context, as the criterion
/// suite does.
fn run_router(op: &str, n: u64) {
    let runtime = router::runtime();
    let _context = runtime.enter();
    let mut cx = Context::from_waker(Waker::noop());
    let refuse = StatusCode::TOO_MANY_REQUESTS;
    match op {
        "router_reject_floor" => serve_n(&mut router::reject_floor().app, refuse, n, &mut cx),
        "router_reject_shed" => serve_n(&mut router::reject_shed(&mut cx).app, refuse, n, &mut cx),
        "router_reject_shed_feedback" => serve_n(
            &mut router::reject_shed_feedback(&mut cx).app,
            refuse,
            n,
            &mut cx,
        ),
        "router_reject_tower" => {
            serve_n(&mut router::reject_tower(&mut cx).app, refuse, n, &mut cx)
        }
        "router_reject_governor" => serve_n(
            &mut router::reject_governor(&mut cx).app,
            refuse,
            n,
            &mut cx,
        ),
        "router_admit_bare" => serve_n(&mut router::admit_bare(), StatusCode::OK, n, &mut cx),
        "router_admit_shed" => {
            let (mut app, shedder) = router::admit_shed();
            serve_n(&mut app, StatusCode::OK, n, &mut cx);
            assert_eq!(shedder.in_flight(), 0, "every permit came back");
        }
        _ => unreachable!("run passes only router operations"),
    }
}

fn run(op: &str, n: u64) {
    match op {
        "reject_by_level" => {
            let (shedder, _overload) = common::overloaded();
            let arrival = common::shed_arrival();
            for _ in 0..n {
                common::refuse(&shedder, black_box(&arrival));
            }
        }
        "reject_by_deadline" => {
            let shedder = common::idle(64);
            let arrival = common::late_arrival(&shedder);
            for _ in 0..n {
                common::refuse(&shedder, black_box(&arrival));
            }
        }
        "admit_release" => {
            let shedder = common::idle(64);
            let arrival = Arrival::new(Class::Interactive);
            for _ in 0..n {
                common::admit_release(&shedder, black_box(&arrival));
            }
        }
        "admit_release_fixed_ticking" | "admit_release_adaptive" => {
            let limit = (op == "admit_release_fixed_ticking").then_some(64);
            let shedder = common::ticking(limit);
            let arrival = Arrival::new(Class::Interactive);
            for _ in 0..n {
                common::admit_release(&shedder, black_box(&arrival));
            }
        }
        router_op if router_op.starts_with("router_") && OPS.contains(&router_op) => {
            run_router(router_op, n)
        }
        other => {
            eprintln!("unknown operation {other:?}; expected one of {OPS:?}");
            std::process::exit(2);
        }
    }
}

/// With `--features metrics`, `SHED_GUARD_RECORDER=prometheus` installs a
/// real exporter's recorder before any engine is built, so the counts show
/// what the feature costs with an exporter as well as without one.
fn install_recorder() {
    #[cfg(feature = "metrics")]
    if std::env::var("SHED_GUARD_RECORDER").as_deref() == Ok("prometheus") {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        metrics::set_global_recorder(recorder).expect("the first recorder");
    }
}

fn main() {
    install_recorder();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [op, n] if !op.starts_with('-') => {
            let n = n.parse().unwrap_or_else(|_| {
                eprintln!("N must be a whole number, got {n:?}");
                std::process::exit(2);
            });
            run(op, n);
        }
        _ => {
            for op in OPS {
                run(op, 10);
            }
            println!("guard: smoke run of {} operations passed", OPS.len());
        }
    }
}
