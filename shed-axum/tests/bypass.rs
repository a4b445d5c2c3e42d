//! Requests the layer lets through unjudged (health checks, metrics
//! scrapes): never shed, never queued, taking no slot, unseen by the
//! controller and the adaptive limit, and only counted.

mod common;

use std::time::Duration;

use axum::routing::get;
use axum::Router;
use common::{full_shedder, get as get_request, text};
use http::StatusCode;
use shed_axum::{RequestHead, ShedLayer, TokioClock};
use shed_core::{Class, Shedder, Stats};
use tower::ServiceExt;

fn probes_bypass(shedder: &Shedder) -> ShedLayer {
    ShedLayer::new(shedder.clone()).bypass(|head: &RequestHead<'_>| head.uri.path() == "/healthz")
}

fn app(layer: ShedLayer) -> Router {
    Router::new()
        .route("/search", get(|| async { "results" }))
        .route("/healthz", get(|| async { "ok" }))
        .layer(layer)
}

fn adaptive_shedder() -> Shedder {
    Shedder::builder().clock(TokioClock).build().unwrap()
}

/// Sends `count` health checks, one a millisecond: cheap requests that
/// answer at once, as a load balancer's are.
async fn health_check_flood(app: &Router, count: usize) {
    for _ in 0..count {
        let response = app.clone().oneshot(get_request("/healthz")).await.unwrap();
        assert_eq!(text(response).await, "ok");
        tokio::time::advance(Duration::from_millis(1)).await;
    }
}

/// Everything the engine has learned or counted, but the bypass counter.
fn judged(mut stats: Stats) -> Stats {
    stats.bypassed = 0;
    stats
}

#[tokio::test(start_paused = true)]
async fn a_bypassed_request_is_served_while_the_service_refuses_the_rest() {
    let (shedder, _busy) = full_shedder();
    let app = app(probes_bypass(&shedder));

    let search = app.clone().oneshot(get_request("/search")).await.unwrap();
    assert_eq!(search.status(), StatusCode::TOO_MANY_REQUESTS);
    let health = app.oneshot(get_request("/healthz")).await.unwrap();
    assert_eq!(health.status(), StatusCode::OK);

    let stats = shedder.stats();
    assert_eq!(stats.bypassed, 1);
    assert_eq!(stats.in_flight, 1, "only the request holding the slot");
    assert_eq!(stats.class(Class::Interactive).rejected(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_flood_of_bypassed_requests_moves_neither_the_limit_nor_the_level() {
    let shedder = adaptive_shedder();
    let before = shedder.stats();

    health_check_flood(&app(probes_bypass(&shedder)), 5_000).await;

    let after = shedder.stats();
    assert_eq!(after.bypassed, 5_000);
    assert_eq!(judged(after), judged(before));
}

/// The contrast that makes the test above mean something: the same flood,
/// judged, is counted. The adaptive limit learns nothing from it even so:
/// the limit never bound, and hold times of health checks alone are no
/// baseline (taken as one, 0.5 ms ones made the next load look inflated
/// and probed in the estimator's model).
#[tokio::test(start_paused = true)]
async fn the_same_flood_judged_is_counted_but_teaches_the_limit_nothing() {
    let shedder = adaptive_shedder();
    let before = shedder.stats();

    health_check_flood(&app(ShedLayer::new(shedder.clone())), 5_000).await;

    let after = shedder.stats();
    assert_eq!(after.bypassed, 0);
    assert_eq!(after.class(Class::Interactive).completed, 5_000);
    assert!(before.adaptive.is_some(), "the limit adapts");
    assert_eq!(after.limit, before.limit);
    assert_eq!(after.adaptive, before.adaptive);
}
