//! How a served request ended is told to the engine: work that finished is
//! a full sample for the adaptive limit; a request cut at its deadline or
//! abandoned by its caller (hyper dropping the response future or the body
//! mid-way) is a censored one. Counted per class in the engine's stats.

mod common;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use common::{endless_handler, get as get_request, get_with, shedder};
use http::StatusCode;
use http_body_util::BodyExt;
use shed_axum::{ReleaseOn, ShedLayer};
use shed_core::{Class, ClassStats, Shedder};
use tower::ServiceExt;

fn endings(shedder: &Shedder) -> (u64, u64, u64) {
    let ClassStats {
        completed,
        abandoned,
        cut_at_deadline,
        ..
    } = *shedder.stats().class(Class::Interactive);
    (completed, abandoned, cut_at_deadline)
}

#[tokio::test(start_paused = true)]
async fn a_response_read_to_its_end_is_a_completed_request() {
    let shedder = shedder(2);
    let app = Router::new()
        .route("/", get(|| async { "done" }))
        .layer(ShedLayer::new(shedder.clone()));

    let response = app.oneshot(get_request("/")).await.unwrap();
    response.into_body().collect().await.unwrap();

    assert_eq!(endings(&shedder), (1, 0, 0));
}

#[tokio::test(start_paused = true)]
async fn an_error_answer_is_a_completed_request_too() {
    let shedder = shedder(2);
    let app = Router::new()
        .route(
            "/",
            get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "failed") }),
        )
        .layer(ShedLayer::new(shedder.clone()));

    let response = app.oneshot(get_request("/")).await.unwrap();
    response.into_body().collect().await.unwrap();

    assert_eq!(endings(&shedder), (1, 0, 0));
}

#[tokio::test(start_paused = true)]
async fn an_empty_body_dropped_unread_is_completed_not_abandoned() {
    // hyper does not poll a body that is already over.
    let shedder = shedder(2);
    let app = Router::new()
        .route("/", get(|| async { StatusCode::NO_CONTENT }))
        .layer(ShedLayer::new(shedder.clone()));

    let response = app.oneshot(get_request("/")).await.unwrap();
    assert_eq!(shedder.in_flight(), 0);
    drop(response);

    assert_eq!(endings(&shedder), (1, 0, 0));
}

#[tokio::test(start_paused = true)]
async fn a_handler_cut_at_its_deadline_is_counted_as_cut() {
    let shedder = shedder(2);
    let app = Router::new()
        .route("/", endless_handler(Arc::new(AtomicBool::new(false))))
        .layer(ShedLayer::new(shedder.clone()));

    let response = app
        .oneshot(get_with("/", &[("grpc-timeout", "100m")]))
        .await
        .unwrap();

    assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(endings(&shedder), (0, 0, 1));
}

#[tokio::test(start_paused = true)]
async fn a_caller_hanging_up_while_served_is_counted_as_abandoned() {
    let shedder = shedder(2);
    let app = Router::new()
        .route("/", endless_handler(Arc::new(AtomicBool::new(false))))
        .layer(ShedLayer::new(shedder.clone()));

    let gave_up =
        tokio::time::timeout(Duration::from_millis(100), app.oneshot(get_request("/"))).await;

    assert!(gave_up.is_err());
    assert_eq!(endings(&shedder), (0, 1, 0));
}

#[tokio::test(start_paused = true)]
async fn a_body_dropped_before_its_end_is_counted_as_abandoned() {
    let shedder = shedder(2);
    let app = Router::new()
        .route("/", get(|| async { common::endless_body() }))
        .layer(ShedLayer::new(shedder.clone()));

    let response = app.oneshot(get_request("/")).await.unwrap();
    drop(response);

    assert_eq!(shedder.in_flight(), 0);
    assert_eq!(endings(&shedder), (0, 1, 0));
}

#[tokio::test(start_paused = true)]
async fn with_release_on_headers_the_head_completes_the_request() {
    let shedder = shedder(2);
    let app = Router::new()
        .route("/", get(|| async { common::endless_body() }))
        .layer(ShedLayer::new(shedder.clone()).release_on(ReleaseOn::Headers));

    let response = app.oneshot(get_request("/")).await.unwrap();
    drop(response);

    assert_eq!(endings(&shedder), (1, 0, 0));
}
