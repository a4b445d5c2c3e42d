//! The `axum::Router` setups measured whole, shared by the criterion suite
//! (`benches/middleware.rs`) and the callgrind guard (`benches/guard.rs`), so
//! both measure the very same routers.
//!
//! Every router is finished with `with_state(())`, as `axum::serve` does.
//! Every call completes on its first poll (asserted by [`super::ready`]),
//! inside a tokio runtime context so timers can be created.

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
use http::header::RETRY_AFTER;
use http::{HeaderValue, Request, StatusCode};
use http_body_util::BodyExt;
use shed::ShedLayer;
use shed_core::Shedder;
use tower::{Service, ServiceBuilder, ServiceExt};
use tower_governor::governor::GovernorConfigBuilder;
use tower_governor::key_extractor::GlobalKeyExtractor;
use tower_governor::GovernorLayer;

use super::ready;

/// 10 ordinary headers of an API request behind a proxy.
pub fn ordinary() -> http::request::Builder {
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
pub fn realistic() -> Request<Body> {
    ordinary()
        .header("grpc-timeout", "250m")
        .header("x-envoy-attempt-count", "2")
        .body(Body::empty())
        .expect("valid request")
}

/// The ordinary request: none of the headers shed reads.
pub fn plain() -> Request<Body> {
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

/// A request that never finishes, kept alive so its slot stays taken.
pub type Pending = Pin<Box<dyn Future<Output = Result<Response, Infallible>>>>;

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
#[inline]
pub fn serve(app: &mut Router, request: Request<Body>, cx: &mut Context<'_>) -> StatusCode {
    ready(ServiceExt::<Request<Body>>::ready(app), cx).expect("router is always ready");
    let response = ready(app.call(request), cx).expect("infallible");
    let status = response.status();
    let body = ready(response.into_body().collect(), cx).expect("body");
    std::hint::black_box(body);
    status
}

/// An engine with one slot and no queue: saturated once that slot is held.
pub fn saturated_shed() -> Shedder {
    Shedder::builder()
        .limit(1)
        .queue_capacity(0)
        .build()
        .expect("valid config")
}

/// A router and what must stay alive for it to keep refusing.
pub struct Refusing {
    pub app: Router,
    _held: Option<Pending>,
}

/// The floor: the bare router whose handler returns a ready-made 429.
pub fn reject_floor() -> Refusing {
    Refusing {
        app: served(Router::new().route("/", get(floor_handler))),
        _held: None,
    }
}

/// shed with limit 1 held by a pending request and no queue.
pub fn reject_shed(cx: &mut Context<'_>) -> Refusing {
    let mut app = served(
        Router::new()
            .route("/", get(handler))
            .layer(ShedLayer::new(saturated_shed())),
    );
    let held = hold(&mut app, cx);
    Refusing {
        app,
        _held: Some(held),
    }
}

/// shed refusing as [`reject_shed`] does, with load feedback on: each
/// refusal carries `shed-load`.
pub fn reject_shed_feedback(cx: &mut Context<'_>) -> Refusing {
    let mut app = served(
        Router::new()
            .route("/", get(handler))
            .layer(ShedLayer::new(saturated_shed()).load_feedback(true)),
    );
    let held = hold(&mut app, cx);
    Refusing {
        app,
        _held: Some(held),
    }
}

/// tower's pattern from the axum docs: `HandleErrorLayer` + `load_shed` +
/// `concurrency_limit(1)`, its permit held by a pending request.
pub fn reject_tower(cx: &mut Context<'_>) -> Refusing {
    let mut app = served(
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
    let held = hold(&mut app, cx);
    Refusing {
        app,
        _held: Some(held),
    }
}

/// `tower_governor` with its burst of 1 used up (one request per hour).
pub fn reject_governor(cx: &mut Context<'_>) -> Refusing {
    let governor = GovernorConfigBuilder::default()
        .key_extractor(GlobalKeyExtractor)
        .period(Duration::from_secs(3_600))
        .burst_size(1)
        .finish()
        .expect("valid governor config");
    let mut app = served(
        Router::new()
            .route("/", get(handler))
            .layer(GovernorLayer::new(governor)),
    );
    assert_eq!(serve(&mut app, plain(), cx), StatusCode::OK);
    Refusing { app, _held: None }
}

/// The bare router whose handler returns 200 at once.
pub fn admit_bare() -> Router {
    served(Router::new().route("/", get(handler)))
}

/// The same router with shed and room to spare; returns the engine too, so
/// the caller can check every permit came back.
pub fn admit_shed() -> (Router, Shedder) {
    let shedder = Shedder::builder()
        .limit(1024)
        .build()
        .expect("valid config");
    let app = served(
        Router::new()
            .route("/", get(handler))
            .layer(ShedLayer::new(shedder.clone())),
    );
    (app, shedder)
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

/// The current-thread runtime whose context the routers are called in.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}
