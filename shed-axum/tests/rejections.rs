//! What a refused caller receives: status, headers and body of each kind of
//! refusal, for HTTP and for gRPC callers, and the hook that replaces them.

mod common;

use std::time::Duration;

use axum::routing::{get, post};
use axum::Router;
use bytes::Bytes;
use common::{full_shedder, get_with, grpc, json, retry_after_secs, shedder, text};
use http::{Response, StatusCode};
use http_body_util::BodyExt;
use shed_axum::{GrpcOverloadStatus, RequestHead, ShedLayer};
use shed_core::{RejectReason, Rejection};
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
        .route("/pkg.Service/Method", post(|| async { "served" }))
        .route(
            "/pkg.Service/Slow",
            post(|| async {
                tokio::time::sleep(Duration::from_secs(3_600)).await;
                "too late"
            }),
        )
        .layer(layer)
}

fn grpc_header<B>(response: &Response<B>, name: &str) -> Option<String> {
    response
        .headers()
        .get(name)
        .map(|value| value.to_str().unwrap().to_owned())
}

#[tokio::test(start_paused = true)]
async fn overload_is_answered_429_with_retry_after_in_whole_seconds() {
    let (shedder, _busy) = full_shedder();
    let response = app(ShedLayer::new(shedder))
        .oneshot(get_with("/", &[]))
        .await
        .unwrap();

    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(retry_after_secs(&response) >= 1);
    assert_eq!(
        response.headers()["content-type"],
        "application/problem+json"
    );
}

#[tokio::test(start_paused = true)]
async fn overload_body_is_problem_json_with_reason_class_attempt_and_delay() {
    let (shedder, _busy) = full_shedder();
    let response = app(ShedLayer::new(shedder))
        .oneshot(get_with("/", &[]))
        .await
        .unwrap();
    let seconds = retry_after_secs(&response);
    let body = json(response).await;

    assert_eq!(body["type"], "urn:shed:overloaded");
    assert_eq!(body["title"], "Too Many Requests");
    assert_eq!(body["status"], 429);
    assert_eq!(body["detail"], RejectReason::QueueFull.description());
    assert_eq!(body["reason"], "queue_full");
    assert_eq!(body["class"], "interactive");
    assert_eq!(body["attempt"], 1);
    let millis = body["retry_after_ms"].as_u64().unwrap();
    assert!(millis >= 1);
    // The header is the same delay rounded up to whole seconds.
    assert_eq!(millis.div_ceil(1_000).max(1), seconds);
}

#[tokio::test(start_paused = true)]
async fn the_problem_body_reports_the_callers_attempt() {
    let (shedder, _busy) = full_shedder();
    let response = app(ShedLayer::new(shedder))
        .oneshot(get_with("/", &[("shed-attempt", "3")]))
        .await
        .unwrap();

    assert_eq!(json(response).await["attempt"], 3);
}

#[tokio::test(start_paused = true)]
async fn overload_status_can_be_configured_to_503() {
    let (shedder, _busy) = full_shedder();
    let layer = ShedLayer::new(shedder).overload_status(StatusCode::SERVICE_UNAVAILABLE);
    let response = app(layer).oneshot(get_with("/", &[])).await.unwrap();

    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(retry_after_secs(&response) >= 1);
    let body = json(response).await;
    assert_eq!(body["status"], 503);
    assert_eq!(body["title"], "Service Unavailable");
}

#[tokio::test(start_paused = true)]
async fn a_deadline_already_passed_is_answered_504_without_retry_after() {
    let response = app(ShedLayer::new(shedder(4)))
        .oneshot(get_with("/", &[("grpc-timeout", "0m")]))
        .await
        .unwrap();

    assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);
    assert!(response.headers().get("retry-after").is_none());
    assert_eq!(
        response.headers()["content-type"],
        "application/problem+json"
    );
    let body = json(response).await;
    assert_eq!(body["type"], "urn:shed:deadline");
    assert_eq!(body["status"], 504);
    assert_eq!(body["reason"], "deadline_passed");
    assert!(body.get("retry_after_ms").is_none());
}

#[tokio::test(start_paused = true)]
async fn a_deadline_too_close_to_be_useful_is_answered_504() {
    // 2 ms left is below the engine's 5 ms minimum useful window.
    let response = app(ShedLayer::new(shedder(4)))
        .oneshot(get_with("/", &[("connect-timeout-ms", "2")]))
        .await
        .unwrap();

    assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);
    assert!(response.headers().get("retry-after").is_none());
    assert_eq!(json(response).await["reason"], "deadline_unmeetable");
}

#[tokio::test(start_paused = true)]
async fn a_deadline_passing_while_served_is_answered_504_without_retry_after() {
    let response = app(ShedLayer::new(shedder(4)))
        .oneshot(get_with("/slow", &[("grpc-timeout", "100m")]))
        .await
        .unwrap();

    assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);
    assert!(response.headers().get("retry-after").is_none());
    let body = json(response).await;
    assert_eq!(body["reason"], "deadline_exceeded");
    assert!(body.get("retry_after_ms").is_none());
}

#[tokio::test(start_paused = true)]
async fn a_grpc_caller_refused_for_overload_gets_trailers_only_resource_exhausted() {
    let (shedder, _busy) = full_shedder();
    let response = app(ShedLayer::new(shedder))
        .oneshot(grpc("/pkg.Service/Method", &[]))
        .await
        .unwrap();

    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "application/grpc");
    assert_eq!(grpc_header(&response, "grpc-status").unwrap(), "8");
    assert!(grpc_header(&response, "grpc-message").is_some());
    let pushback: u64 = grpc_header(&response, "grpc-retry-pushback-ms")
        .unwrap()
        .parse()
        .unwrap();
    assert!(pushback >= 1);
    assert!(response.headers().get("retry-after").is_none());
    // Trailers-only: the status is in the head, and the body is empty.
    let body = response.into_body().collect().await.unwrap();
    assert!(body.trailers().is_none());
    assert_eq!(body.to_bytes(), Bytes::new());
}

#[tokio::test(start_paused = true)]
async fn grpc_overload_status_can_be_configured_to_unavailable() {
    let (shedder, _busy) = full_shedder();
    let layer = ShedLayer::new(shedder).grpc_overload_status(GrpcOverloadStatus::Unavailable);
    let response = app(layer)
        .oneshot(grpc("/pkg.Service/Method", &[]))
        .await
        .unwrap();

    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(grpc_header(&response, "grpc-status").unwrap(), "14");
    assert!(grpc_header(&response, "grpc-retry-pushback-ms").is_some());
}

#[tokio::test(start_paused = true)]
async fn every_grpc_content_type_counts_as_a_grpc_caller() {
    let (shedder, _busy) = full_shedder();
    let app = app(ShedLayer::new(shedder));
    for content_type in ["application/grpc+proto", "application/grpc+json"] {
        let request = http::Request::post("/pkg.Service/Method")
            .header("content-type", content_type)
            .body(axum::body::Body::empty())
            .unwrap();
        let response = app.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{content_type}");
        assert_eq!(
            grpc_header(&response, "grpc-status").unwrap(),
            "8",
            "{content_type}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_grpc_caller_past_its_deadline_gets_deadline_exceeded() {
    let response = app(ShedLayer::new(shedder(4)))
        .oneshot(grpc("/pkg.Service/Method", &[("grpc-timeout", "0m")]))
        .await
        .unwrap();

    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(grpc_header(&response, "grpc-status").unwrap(), "4");
    assert!(grpc_header(&response, "grpc-retry-pushback-ms").is_none());
}

#[tokio::test(start_paused = true)]
async fn a_grpc_caller_whose_deadline_passes_while_served_gets_deadline_exceeded() {
    let response = app(ShedLayer::new(shedder(4)))
        .oneshot(grpc("/pkg.Service/Slow", &[("grpc-timeout", "100m")]))
        .await
        .unwrap();

    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(grpc_header(&response, "grpc-status").unwrap(), "4");
    assert!(grpc_header(&response, "grpc-retry-pushback-ms").is_none());
}

#[tokio::test(start_paused = true)]
async fn the_rejection_hook_replaces_the_response() {
    let (shedder, _busy) = full_shedder();
    let layer =
        ShedLayer::new(shedder).on_rejection(|rejection: &Rejection, head: &RequestHead<'_>| {
            let body = format!("{} at {}", rejection.reason(), head.uri.path());
            Some(
                Response::builder()
                    .status(StatusCode::IM_A_TEAPOT)
                    .header("x-shed-reason", rejection.reason().as_str())
                    .body(Bytes::from(body))
                    .unwrap(),
            )
        });
    let response = app(layer).oneshot(get_with("/", &[])).await.unwrap();

    assert_eq!(response.status(), StatusCode::IM_A_TEAPOT);
    assert_eq!(response.headers()["x-shed-reason"], "queue_full");
    assert_eq!(text(response).await, "queue_full at /");
}

#[tokio::test(start_paused = true)]
async fn a_rejection_hook_returning_none_keeps_the_default_answer() {
    let (shedder, _busy) = full_shedder();
    let layer = ShedLayer::new(shedder).on_rejection(|_: &Rejection, _: &RequestHead<'_>| None);
    let response = app(layer).oneshot(get_with("/", &[])).await.unwrap();

    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(retry_after_secs(&response) >= 1);
}

#[tokio::test(start_paused = true)]
async fn an_admitted_request_is_served_untouched() {
    let response = app(ShedLayer::new(shedder(4)))
        .oneshot(get_with("/", &[]))
        .await
        .unwrap();

    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers().get("retry-after").is_none());
    assert_eq!(text(response).await, "served");
}
