//! Load feedback on a shed server's answers: `shed-load` on every answer
//! when the layer gives it (served and refused, HTTP head and gRPC
//! trailers), and on none when it does not.

mod common;

use std::time::Duration;

use axum::body::Body;
use axum::routing::{get, post};
use axum::Router;
use common::{full_shedder, get_with, grpc, shedder};
use http::{HeaderMap, Response, StatusCode};
use http_body_util::BodyExt;
use shed_axum::ShedLayer;
use shed_core::wire::{self, LoadReport, LOAD_HEADER};
use shed_core::{Level, Shedder};
use tower::ServiceExt;

fn app(layer: ShedLayer) -> Router {
    Router::new()
        .route("/", get(|| async { "served" }))
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(3_600)).await;
                "too late"
            }),
        )
        .route("/pkg.Service/Method", post(|| async { grpc_answer() }))
        .route("/healthz", get(|| async { "ok" }))
        .layer(layer)
}

/// One empty gRPC message, then trailers with `grpc-status: 0`.
fn grpc_answer() -> Response<Body> {
    let message = http_body_util::Full::new(bytes::Bytes::from_static(&[0, 0, 0, 0, 0]));
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
    let body = message.with_trailers(async { Some(Ok(trailers)) });
    Response::builder()
        .header("content-type", "application/grpc")
        .body(Body::new(body))
        .unwrap()
}

fn report(headers: &HeaderMap) -> Option<LoadReport> {
    let value = headers.get(LOAD_HEADER)?;
    Some(wire::load_report(value.as_bytes()).expect("a well-formed shed-load"))
}

fn feedback_layer(shedder: Shedder) -> ShedLayer {
    ShedLayer::new(shedder).load_feedback(true)
}

#[tokio::test(start_paused = true)]
async fn a_served_answer_carries_the_replicas_load() {
    let shedder = shedder(8);
    let response = app(feedback_layer(shedder))
        .oneshot(get_with("/", &[]))
        .await
        .unwrap();

    assert_eq!(response.status(), StatusCode::OK);
    // Read as the head left: the request still held its slot.
    let expected = LoadReport {
        level: Level::NONE,
        in_flight: 1,
        limit: 8,
        queued: 0,
    };
    assert_eq!(report(response.headers()), Some(expected));
}

#[tokio::test(start_paused = true)]
async fn a_refusal_carries_the_replicas_load() {
    let (shedder, _busy) = full_shedder();
    let response = app(feedback_layer(shedder))
        .oneshot(get_with("/", &[]))
        .await
        .unwrap();

    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    let read = report(response.headers()).expect("shed-load on the refusal");
    assert_eq!((read.in_flight, read.limit), (1, 1));
}

#[tokio::test(start_paused = true)]
async fn without_load_feedback_no_answer_carries_the_header() {
    let served = app(ShedLayer::new(shedder(8)))
        .oneshot(get_with("/", &[]))
        .await
        .unwrap();
    let (full, _busy) = full_shedder();
    let refused = app(ShedLayer::new(full))
        .oneshot(get_with("/", &[]))
        .await
        .unwrap();

    assert_eq!(served.status(), StatusCode::OK);
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(!served.headers().contains_key(LOAD_HEADER));
    assert!(!refused.headers().contains_key(LOAD_HEADER));
}

#[tokio::test(start_paused = true)]
async fn load_feedback_off_again_gives_no_header() {
    let layer = feedback_layer(shedder(8)).load_feedback(false);
    let response = app(layer).oneshot(get_with("/", &[])).await.unwrap();
    assert!(!response.headers().contains_key(LOAD_HEADER));
}

#[tokio::test(start_paused = true)]
async fn an_answer_cut_at_its_deadline_carries_the_replicas_load() {
    let response = app(feedback_layer(shedder(8)))
        .oneshot(get_with("/slow", &[("grpc-timeout", "100m")]))
        .await
        .unwrap();

    assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);
    assert!(report(response.headers()).is_some());
}

#[tokio::test(start_paused = true)]
async fn a_bypassed_answer_carries_the_replicas_load_too() {
    let layer = feedback_layer(shedder(8))
        .bypass(|head: &shed_axum::RequestHead<'_>| head.uri.path() == "/healthz");
    let response = app(layer).oneshot(get_with("/healthz", &[])).await.unwrap();
    let read = report(response.headers()).expect("shed-load on the health check");
    assert_eq!(read.in_flight, 0, "a bypassed request holds no slot");
}

#[tokio::test(start_paused = true)]
async fn a_grpc_refusal_carries_the_load_in_its_trailers_only_head() {
    let (shedder, _busy) = full_shedder();
    let response = app(feedback_layer(shedder))
        .oneshot(grpc("/pkg.Service/Method", &[]))
        .await
        .unwrap();

    assert_eq!(response.headers()["grpc-status"], "8");
    assert!(report(response.headers()).is_some());
}

#[tokio::test(start_paused = true)]
async fn a_served_grpc_call_carries_the_load_in_its_trailers() {
    let response = app(feedback_layer(shedder(8)))
        .oneshot(grpc("/pkg.Service/Method", &[]))
        .await
        .unwrap();

    assert!(
        !response.headers().contains_key(LOAD_HEADER),
        "the head of a call that answers is its initial metadata"
    );
    let body = response.into_body().collect().await.unwrap();
    let trailers = body.trailers().expect("trailers");
    assert_eq!(trailers["grpc-status"], "0");
    let read = report(trailers).expect("shed-load in the trailers");
    assert_eq!((read.in_flight, read.limit), (1, 8));
}

#[tokio::test(start_paused = true)]
async fn a_served_grpc_call_without_feedback_has_untouched_trailers() {
    let response = app(ShedLayer::new(shedder(8)))
        .oneshot(grpc("/pkg.Service/Method", &[]))
        .await
        .unwrap();
    let body = response.into_body().collect().await.unwrap();
    let trailers = body.trailers().expect("trailers");
    assert!(!trailers.contains_key(LOAD_HEADER));
}
