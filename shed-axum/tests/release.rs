//! A permit is returned exactly once, whatever happens to the request:
//! deadline cancellation, panic, an outer timeout, a caller giving up, and
//! the end of a streaming body (or, when configured, the response head).

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use common::{
    endless_handler, get as get_request, get_with, hold_slot, json, settle, shedder, ChannelBody,
};
use http::StatusCode;
use http_body_util::BodyExt;
use shed_axum::{ReleaseOn, ShedLayer};
use shed_core::{Class, Rank};
use tokio::sync::mpsc;
use tower::ServiceExt;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::timeout::TimeoutLayer;

async fn panics() -> &'static str {
    panic!("handler bug")
}

#[tokio::test(start_paused = true)]
async fn deadline_expiry_drops_the_handler_and_answers_504() {
    let shedder = shedder(4);
    let dropped = Arc::new(AtomicBool::new(false));
    let app = Router::new()
        .route("/", endless_handler(dropped.clone()))
        .layer(ShedLayer::new(shedder.clone()));

    let start = tokio::time::Instant::now();
    let response = app
        .oneshot(get_with("/", &[("grpc-timeout", "250m")]))
        .await
        .unwrap();

    assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);
    assert!(dropped.load(Ordering::SeqCst), "the handler was cancelled");
    assert_eq!(shedder.in_flight(), 0);
    assert_eq!(start.elapsed(), Duration::from_millis(250));
}

#[tokio::test(start_paused = true)]
async fn the_default_deadline_cancels_handlers_of_callers_that_send_none() {
    let shedder = shedder(4);
    let dropped = Arc::new(AtomicBool::new(false));
    let app = Router::new()
        .route("/", endless_handler(dropped.clone()))
        .layer(ShedLayer::new(shedder.clone()).default_deadline(Duration::from_secs(2)));

    let response = app.oneshot(get_request("/")).await.unwrap();

    assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);
    assert!(dropped.load(Ordering::SeqCst));
    assert_eq!(shedder.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_panicking_handler_behind_catch_panic_returns_its_slot() {
    let shedder = shedder(2);
    let app = Router::new()
        .route("/", get(panics))
        .layer(ShedLayer::new(shedder.clone()))
        .layer(CatchPanicLayer::new());

    let response = app.oneshot(get_request("/")).await.unwrap();

    assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(shedder.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_panicking_handler_inside_catch_panic_returns_its_slot_with_the_body() {
    let shedder = shedder(2);
    let app = Router::new()
        .route("/", get(panics))
        .layer(CatchPanicLayer::new())
        .layer(ShedLayer::new(shedder.clone()));

    let response = app.oneshot(get_request("/")).await.unwrap();
    assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
    response.into_body().collect().await.unwrap();

    assert_eq!(shedder.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_outer_timeout_cancels_the_handler_and_returns_its_slot() {
    let shedder = shedder(2);
    let dropped = Arc::new(AtomicBool::new(false));
    let app = Router::new()
        .route("/", endless_handler(dropped.clone()))
        .layer(ShedLayer::new(shedder.clone()))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            Duration::from_millis(300),
        ));

    let response = app.oneshot(get_request("/")).await.unwrap();

    assert_eq!(response.status(), StatusCode::REQUEST_TIMEOUT);
    assert!(dropped.load(Ordering::SeqCst));
    assert_eq!(shedder.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_caller_giving_up_while_served_returns_the_slot() {
    let shedder = shedder(2);
    let dropped = Arc::new(AtomicBool::new(false));
    let app = Router::new()
        .route("/", endless_handler(dropped.clone()))
        .layer(ShedLayer::new(shedder.clone()));

    let gave_up =
        tokio::time::timeout(Duration::from_millis(100), app.oneshot(get_request("/"))).await;

    assert!(gave_up.is_err());
    assert!(dropped.load(Ordering::SeqCst));
    assert_eq!(shedder.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_caller_giving_up_while_queued_leaves_the_queue_without_taking_a_slot() {
    let shedder = shedder(1);
    let busy = hold_slot(&shedder);
    let app = Router::new()
        .route("/", get(|| async { "served" }))
        .layer(ShedLayer::new(shedder.clone()));

    let gave_up =
        tokio::time::timeout(Duration::from_millis(100), app.oneshot(get_request("/"))).await;

    assert!(gave_up.is_err());
    assert_eq!(shedder.queue_len(Rank::original(Class::Interactive)), 0);
    drop(busy);
    assert_eq!(shedder.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_slot_is_held_until_a_streaming_body_ends() {
    let shedder = shedder(2);
    let (sender, receiver) = mpsc::channel::<Bytes>(1);
    let receiver = Arc::new(std::sync::Mutex::new(Some(receiver)));
    let app = Router::new()
        .route(
            "/stream",
            get(move || {
                let body = ChannelBody(receiver.lock().unwrap().take().unwrap());
                async move { Body::new(body) }
            }),
        )
        .layer(ShedLayer::new(shedder.clone()));

    let response = app.oneshot(get_request("/stream")).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(shedder.in_flight(), 1, "the head is out, the body is not");

    let mut body = response.into_body();
    sender.send(Bytes::from_static(b"chunk")).await.unwrap();
    let frame = body.frame().await.unwrap().unwrap();
    assert_eq!(frame.into_data().unwrap(), "chunk");
    assert_eq!(shedder.in_flight(), 1, "still streaming");

    drop(sender);
    assert!(body.frame().await.is_none());
    assert_eq!(
        shedder.in_flight(),
        0,
        "released at the end, before the body is dropped"
    );
    drop(body);
    assert_eq!(shedder.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_unfinished_body_that_is_dropped_returns_the_slot() {
    let shedder = shedder(2);
    let app = Router::new()
        .route("/stream", get(|| async { common::endless_body() }))
        .layer(ShedLayer::new(shedder.clone()));

    let response = app.oneshot(get_request("/stream")).await.unwrap();
    assert_eq!(shedder.in_flight(), 1);
    drop(response);

    assert_eq!(shedder.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn with_release_on_headers_the_slot_returns_before_the_body_is_read() {
    let shedder = shedder(2);
    let app = Router::new()
        .route("/stream", get(|| async { common::endless_body() }))
        .layer(ShedLayer::new(shedder.clone()).release_on(ReleaseOn::Headers));

    let response = app.oneshot(get_request("/stream")).await.unwrap();

    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(shedder.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_streaming_body_keeps_later_requests_waiting() {
    let shedder = shedder(1);
    let app = Router::new()
        .route("/stream", get(|| async { common::endless_body() }))
        .route("/", get(|| async { "served" }))
        .layer(ShedLayer::new(shedder.clone()));

    let streaming = app.clone().oneshot(get_request("/stream")).await.unwrap();
    let waiting = tokio::spawn(app.clone().oneshot(get_request("/")));
    assert!(settle(|| shedder.queue_len(Rank::original(Class::Interactive)) == 1).await);

    drop(streaming);
    let response = waiting.await.unwrap().unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

#[tokio::test(start_paused = true)]
async fn every_kind_of_ending_leaves_nothing_in_flight_or_queued() {
    let shedder = shedder(1);
    let app = Router::new()
        .route("/ok", get(|| async { "ok" }))
        .route(
            "/err",
            get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "err") }),
        )
        .route("/panic", get(panics))
        .route("/slow", get(std::future::pending::<()>))
        .layer(ShedLayer::new(shedder.clone()))
        .layer(CatchPanicLayer::new());

    for (path, headers, expected) in [
        ("/ok", &[][..], StatusCode::OK),
        ("/err", &[][..], StatusCode::INTERNAL_SERVER_ERROR),
        ("/panic", &[][..], StatusCode::INTERNAL_SERVER_ERROR),
        (
            "/slow",
            &[("grpc-timeout", "50m")][..],
            StatusCode::GATEWAY_TIMEOUT,
        ),
        (
            "/ok",
            &[("grpc-timeout", "0m")][..],
            StatusCode::GATEWAY_TIMEOUT,
        ),
    ] {
        let response = app.clone().oneshot(get_with(path, headers)).await.unwrap();
        assert_eq!(response.status(), expected, "{path}");
        let _ = json_or_text(response).await;
        assert_eq!(shedder.in_flight(), 0, "{path}");
        assert_eq!(shedder.stats().queue_len(), 0, "{path}");
    }
}

async fn json_or_text(response: http::Response<Body>) -> Option<serde_json::Value> {
    let is_json = response
        .headers()
        .get("content-type")
        .is_some_and(|value| value == "application/problem+json");
    if is_json {
        Some(json(response).await)
    } else {
        response.into_body().collect().await.unwrap();
        None
    }
}
