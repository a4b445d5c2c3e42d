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
//! Every router is finished with `with_state(())`, as `axum::serve` does.
//! Every call completes on its first poll (this is asserted), inside a tokio
//! runtime context so timers can be created; requests are built outside the
//! timed section. Run: `cargo bench --bench middleware`.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::Context;
use std::time::Duration;

use axum::body::Body;
use axum::error_handling::HandleErrorLayer;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{BoxError, Router};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use http::header::RETRY_AFTER;
use http::{HeaderValue, Request, StatusCode};
use http_body_util::BodyExt;
use shed::axum::ShedLayer;
use shed_core::{Admission, Arrival, Class, Shedder};
use tower::{Layer, Service, ServiceBuilder, ServiceExt};
use tower_governor::governor::GovernorConfigBuilder;
use tower_governor::key_extractor::GlobalKeyExtractor;
use tower_governor::GovernorLayer;

#[path = "common/mod.rs"]
mod common;
use common::ready;

/// 10 ordinary headers of an API request behind a proxy.
fn ordinary() -> http::request::Builder {
    Request::get("/")
        .header("host", "api.example.com")
        .header("user-agent", "example-sdk/2.31.0 (linux; x86_64)")
        .header("accept", "application/json")
        .header("accept-encoding", "gzip, deflate, br")
        .header("accept-language", "en-GB,en;q=0.9")
        .header("content-type", "application/json")
        .header(
            "authorization",
            "Bearer eyJhbGciOiJIUzI1NiJ9.e30.ZRrHA1JJJW8",
        )
        .header("x-request-id", "9f1c2a7e-54b1-4e7d-a0c6-3f0f5d2b8c11")
        .header(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )
        .header("cookie", "session=7d3f0a9c; theme=dark")
}

/// The ordinary request plus a deadline and a retry marker.
fn realistic() -> Request<Body> {
    ordinary()
        .header("grpc-timeout", "250m")
        .header("x-envoy-attempt-count", "2")
        .body(Body::empty())
        .expect("valid request")
}

/// The ordinary request: none of the headers shed reads.
fn plain() -> Request<Body> {
    ordinary().body(Body::empty()).expect("valid request")
}

/// The request that occupies the only slot and never finishes.
fn holder() -> Request<Body> {
    Request::get("/")
        .header("x-hold", "1")
        .body(Body::empty())
        .expect("valid request")
}

/// Serves at once, unless asked to hold its slot forever.
async fn handler(request: Request<Body>) -> StatusCode {
    if request.headers().contains_key("x-hold") {
        std::future::pending::<()>().await;
    }
    StatusCode::OK
}

/// The floor: what answering 429 costs with no middleware at all.
async fn floor_handler() -> Response {
    (
        StatusCode::TOO_MANY_REQUESTS,
        [(RETRY_AFTER, HeaderValue::from_static("1"))],
    )
        .into_response()
}

/// Requests are prepared in small batches, so each is still in cache when it
/// is served (as a request a server just parsed is) and the allocator is not
/// left to consolidate thousands of freed requests inside the timed section.
const BATCH: BatchSize = BatchSize::NumIterations(16);

type Pending = Pin<Box<dyn Future<Output = Result<Response, Infallible>>>>;

/// Sends the holder through `app` and keeps its never-ending future.
fn hold(app: &mut Router, cx: &mut Context<'_>) -> Pending {
    ready(ServiceExt::<Request<Body>>::ready(app), cx).expect("router is always ready");
    let mut future: Pending = Box::pin(app.call(holder()));
    assert!(
        future.as_mut().poll(cx).is_pending(),
        "the holder must hold"
    );
    future
}

/// One whole request: ready, call, response, body consumed. Returns the status.
fn serve(app: &mut Router, request: Request<Body>, cx: &mut Context<'_>) -> StatusCode {
    ready(ServiceExt::<Request<Body>>::ready(app), cx).expect("router is always ready");
    let response = ready(app.call(request), cx).expect("infallible");
    let status = response.status();
    let body = ready(response.into_body().collect(), cx).expect("body");
    std::hint::black_box(body);
    status
}

fn saturated_shed() -> Shedder {
    Shedder::builder()
        .limit(1)
        .queue_capacity(0)
        .build()
        .expect("valid config")
}

fn classify(c: &mut Criterion) {
    let runtime = runtime();
    let _context = runtime.enter();
    let waker = common::noop_waker();
    let mut cx = Context::from_waker(&waker);

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
    let waker = common::noop_waker();
    let mut cx = Context::from_waker(&waker);

    let mut floor = served(Router::new().route("/", get(floor_handler)));

    let mut shed = served(
        Router::new()
            .route("/", get(handler))
            .layer(ShedLayer::new(saturated_shed())),
    );
    let _shed_holder = hold(&mut shed, &mut cx);

    let mut tower = served(
        Router::new().route("/", get(handler)).layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(|_: BoxError| async {
                    (
                        StatusCode::TOO_MANY_REQUESTS,
                        [(RETRY_AFTER, HeaderValue::from_static("1"))],
                    )
                }))
                .load_shed()
                .concurrency_limit(1),
        ),
    );
    let _tower_holder = hold(&mut tower, &mut cx);

    let governor = GovernorConfigBuilder::default()
        .key_extractor(GlobalKeyExtractor)
        .period(Duration::from_secs(3_600))
        .burst_size(1)
        .finish()
        .expect("valid governor config");
    let mut governed = served(
        Router::new()
            .route("/", get(handler))
            .layer(GovernorLayer::new(governor)),
    );
    assert_eq!(serve(&mut governed, plain(), &mut cx), StatusCode::OK);

    let mut group = c.benchmark_group("reject");
    for (name, app) in [
        ("floor", &mut floor),
        ("shed", &mut shed),
        ("tower", &mut tower),
        ("tower_governor", &mut governed),
    ] {
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
    let waker = common::noop_waker();
    let mut cx = Context::from_waker(&waker);

    let mut bare = served(Router::new().route("/", get(handler)));
    let shedder = Shedder::builder()
        .limit(1024)
        .build()
        .expect("valid config");
    let mut shed = served(
        Router::new()
            .route("/", get(handler))
            .layer(ShedLayer::new(shedder.clone())),
    );

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

/// Finishes a router the way `axum::serve` does (`into_make_service` calls
/// `with_state(())`): handlers become routes and layers are applied once.
/// Called directly without it, axum 0.8 rebuilds each handler's route, and
/// re-runs `Layer::layer`, on every request: that inflates every figure and
/// gives tower's `ConcurrencyLimit` a fresh semaphore per request, so it
/// would never refuse.
fn served(router: Router) -> Router {
    router.with_state(())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

criterion_group!(benches, classify, reject, admit);
criterion_main!(benches);
