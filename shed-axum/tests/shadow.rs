//! The layer in front of a shadow engine: every request reaches the
//! handler untouched (nothing refused, nothing queued, nothing cut at its
//! deadline), and `/stats` says what enforcing mode would have done.

mod common;

use std::time::Duration;

use axum::routing::get;
use axum::Router;
use common::{get as get_request, get_with, hold_slot, json, text};
use http::StatusCode;
use shed_axum::{ShedLayer, TokioClock};
use shed_core::{Class, Mode, Shedder};
use tower::ServiceExt;

fn shadow_shedder() -> Shedder {
    Shedder::builder()
        .limit(1)
        .queue_capacity(0)
        .mode(Mode::Shadow)
        .clock(TokioClock)
        .build()
        .unwrap()
}

fn app(shedder: &Shedder) -> Router {
    Router::new()
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_millis(300)).await;
                "done"
            }),
        )
        .route("/", get(|| async { "ok" }))
        .layer(ShedLayer::new(shedder.clone()))
        .route("/stats", get(shed_axum::stats::handler(shedder.clone())))
}

#[tokio::test(start_paused = true)]
async fn a_request_enforcing_mode_would_refuse_is_served_and_counted() {
    let shedder = shadow_shedder();
    let _busy = hold_slot(&shedder);

    let response = app(&shedder).oneshot(get_request("/")).await.unwrap();

    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers().get("retry-after").is_none());
    let stats = shedder.stats();
    assert_eq!(stats.class(Class::Interactive).would.queue_full, 1);
    assert_eq!(stats.class(Class::Interactive).rejected(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_request_past_its_deadline_is_not_cut_off_and_the_cut_is_counted() {
    let shedder = shadow_shedder();

    let response = app(&shedder)
        .oneshot(get_with("/slow", &[("grpc-timeout", "100m")]))
        .await
        .unwrap();

    assert_eq!(response.status(), StatusCode::OK, "served untouched");
    assert_eq!(text(response).await, "done");
    let interactive = *shedder.stats().class(Class::Interactive);
    assert_eq!(interactive.cut_at_deadline, 0);
    assert_eq!(interactive.would.cut_at_deadline, 1);
}

#[tokio::test(start_paused = true)]
async fn the_stats_say_the_mode_and_what_would_have_been_done() {
    let shedder = shadow_shedder();
    let _busy = hold_slot(&shedder);
    let app = app(&shedder);
    app.clone().oneshot(get_request("/")).await.unwrap();

    let stats = json(app.oneshot(get_request("/stats")).await.unwrap()).await;

    assert_eq!(stats["mode"], "shadow");
    assert_eq!(stats["classes"]["interactive"]["admitted"], 1);
    assert_eq!(stats["classes"]["interactive"]["would"]["queue_full"], 1);
}

#[tokio::test(start_paused = true)]
async fn enforcing_resumes_for_the_next_request() {
    let shedder = shadow_shedder();
    let _busy = hold_slot(&shedder);
    let app = app(&shedder);
    let served = app.clone().oneshot(get_request("/")).await.unwrap();
    assert_eq!(served.status(), StatusCode::OK);
    drop(served);

    shedder.set_mode(Mode::Enforcing);
    let refused = app.oneshot(get_request("/")).await.unwrap();

    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(shedder.in_flight(), 1, "only the held slot");
}
