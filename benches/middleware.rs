//! The middleware, measured side by side, each group in one run so the report
//! can state ratios:
//!
//! - `classify`: the `Shed` service called directly (no router) on a
//!   saturated engine, for a realistic request (10 ordinary headers plus
//!   `grpc-timeout` and a retry marker) and for one with none of the headers
//!   shed reads, next to the engine's refusal alone on the same engine. The
//!   call is classification + decision + the 429 answer; the difference to
//!   `engine_only` is what the head adds (classification, the deadline's
//!   clock read, and building the answer). Classification itself is internal
//!   to shed-axum, so it is measured through this public surface.
//! - `reject`: a whole request refused through a real `axum::Router`
//!   (`ready` + `call` with a prepared request, response body consumed):
//!   `floor` (no middleware; the handler returns a 429 with Retry-After),
//!   `shed` (limit 1 held by a pending request, no queue), `tower`
//!   (`HandleErrorLayer` + `load_shed` + `concurrency_limit(1)`, its permit
//!   held by a pending request) and `tower_governor` (burst of 1 used up).
//! - `admit`: a request served through the same router with shed and without:
//!   the overhead a healthy service pays.
//!
//! The routers are built in `benches/common/router.rs`, shared with the
//! callgrind guard (`benches/guard.rs`). Every router is finished with
//! `with_state(())`, as `axum::serve` does. Every call completes on its first
//! poll (this is asserted), inside a tokio runtime context so timers can be
//! created; requests are built outside the timed section. Run:
//! `cargo bench --bench middleware`.

use std::convert::Infallible;
use std::task::{Context, Waker};

use axum::body::Body;
use axum::response::Response;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use http::{Request, StatusCode};
use shed::ShedLayer;
use shed_core::{Admission, Arrival, Class};
use tower::{Layer, Service};

#[path = "common/mod.rs"]
mod common;
use common::ready;
use common::router::{self, plain, realistic, runtime, saturated_shed, serve};

/// Requests are prepared in small batches, so each is still in cache when it
/// is served (as a request a server just parsed is) and the allocator is not
/// left to consolidate thousands of freed requests inside the timed section.
const BATCH: BatchSize = BatchSize::NumIterations(16);

fn classify(c: &mut Criterion) {
    let runtime = runtime();
    let _context = runtime.enter();
    let mut cx = Context::from_waker(Waker::noop());

    let shedder = saturated_shed();
    let _held = shedder
        .try_admit(&Arrival::new(Class::Critical))
        .expect("idle engine admits");
    let inner = tower::service_fn(|_: Request<Body>| async {
        Ok::<_, Infallible>(Response::new(Body::empty()))
    });
    let mut shed = ShedLayer::new(shedder.clone()).layer(inner);
    let mut call = |request: Request<Body>, cx: &mut Context<'_>| {
        let response = ready(shed.call(request), cx).expect("infallible");
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        response
    };

    let mut group = c.benchmark_group("classify");
    group.bench_function("engine_only", |b| {
        let arrival = Arrival::new(Class::Interactive);
        b.iter(|| match shedder.admit(std::hint::black_box(&arrival)) {
            Admission::Rejected(rejection) => rejection,
            other => panic!("expected a refusal, got {other:?}"),
        })
    });
    group.bench_function("shed_call_realistic", |b| {
        b.iter_batched(realistic, |request| call(request, &mut cx), BATCH)
    });
    group.bench_function("shed_call_no_shed_headers", |b| {
        b.iter_batched(plain, |request| call(request, &mut cx), BATCH)
    });
    group.finish();
}

fn reject(c: &mut Criterion) {
    let runtime = runtime();
    let _context = runtime.enter();
    let mut cx = Context::from_waker(Waker::noop());

    let mut floor = router::reject_floor();
    let mut shed = router::reject_shed(&mut cx);
    let mut tower = router::reject_tower(&mut cx);
    let mut governed = router::reject_governor(&mut cx);

    let mut group = c.benchmark_group("reject");
    for (name, refusing) in [
        ("floor", &mut floor),
        ("shed", &mut shed),
        ("tower", &mut tower),
        ("tower_governor", &mut governed),
    ] {
        let app = &mut refusing.app;
        assert_eq!(
            serve(app, plain(), &mut cx),
            StatusCode::TOO_MANY_REQUESTS,
            "{name} must refuse"
        );
        group.bench_function(name, |b| {
            b.iter_batched(plain, |request| serve(app, request, &mut cx), BATCH)
        });
    }
    group.finish();
}

fn admit(c: &mut Criterion) {
    let runtime = runtime();
    let _context = runtime.enter();
    let mut cx = Context::from_waker(Waker::noop());

    let mut bare = router::admit_bare();
    let (mut shed, shedder) = router::admit_shed();

    let mut group = c.benchmark_group("admit");
    for (name, app) in [("bare", &mut bare), ("shed", &mut shed)] {
        assert_eq!(
            serve(app, plain(), &mut cx),
            StatusCode::OK,
            "{name} must serve"
        );
        group.bench_function(name, |b| {
            b.iter_batched(plain, |request| serve(app, request, &mut cx), BATCH)
        });
    }
    group.finish();
    assert_eq!(shedder.in_flight(), 0, "every permit came back");
}

criterion_group!(benches, classify, reject, admit);
criterion_main!(benches);
