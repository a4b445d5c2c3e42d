//! What handlers can extract, what happens when the layer is missing, how a
//! deadline propagates to outgoing calls, and the operators' stats handler.

mod common;

use std::time::{Duration, Instant};

use axum::routing::get;
use axum::Router;
use common::{get as get_request, get_with, hold_slot, json, shedder, text};
use http::{HeaderMap, StatusCode};
use shed_axum::{Admitted, Deadline, DeadlineRejection, ShedLayer};
use shed_core::{Class, Rank, Shedder};
use tower::ServiceExt;

async fn admitted(admitted: Admitted) -> String {
    format!(
        "{} {} retry={} deadline={}",
        admitted.class,
        admitted.attempt,
        admitted.is_retry(),
        admitted.deadline.is_some()
    )
}

async fn maybe_admitted(admitted: Option<Admitted>) -> String {
    match admitted {
        Some(admitted) => format!("admitted as {}", admitted.class),
        None => "no shed layer".to_owned(),
    }
}

async fn deadline(deadline: Deadline) -> String {
    format!("has passed: {}", deadline.has_passed())
}

async fn maybe_deadline(deadline: Option<Deadline>) -> String {
    match deadline {
        Some(_) => "a deadline".to_owned(),
        None => "no deadline".to_owned(),
    }
}

async fn deadline_or_why_not(deadline: Result<Deadline, DeadlineRejection>) -> String {
    match deadline {
        Ok(_) => "a deadline".to_owned(),
        Err(DeadlineRejection::MissingShedLayer(_)) => "no shed layer".to_owned(),
        Err(DeadlineRejection::MissingDeadline(_)) => "no deadline".to_owned(),
        Err(other) => format!("unexpected: {other}"),
    }
}

fn routes() -> Router {
    Router::new()
        .route("/admitted", get(admitted))
        .route("/maybe-admitted", get(maybe_admitted))
        .route("/deadline", get(deadline))
        .route("/maybe-deadline", get(maybe_deadline))
        .route("/deadline-or-why-not", get(deadline_or_why_not))
}

fn shed_app() -> Router {
    routes().layer(ShedLayer::new(shedder(8)).class(Class::Batch))
}

async fn answer(app: Router, request: http::Request<axum::body::Body>) -> (StatusCode, String) {
    let response = app.oneshot(request).await.unwrap();
    (response.status(), text(response).await)
}

#[tokio::test(start_paused = true)]
async fn admitted_hands_the_handler_its_class_attempt_and_deadline() {
    let request = get_with(
        "/admitted",
        &[("shed-attempt", "2"), ("grpc-timeout", "1S")],
    );
    assert_eq!(
        answer(shed_app(), request).await,
        (
            StatusCode::OK,
            "batch 2 retry=true deadline=true".to_owned()
        )
    );
}

#[tokio::test(start_paused = true)]
async fn admitted_reports_the_time_spent_queued() {
    let shedder = shedder(1);
    let busy = hold_slot(&shedder);
    let app = Router::new()
        .route(
            "/",
            get(|admitted: Admitted| async move { format!("{:?}", admitted.queued) }),
        )
        .layer(ShedLayer::new(shedder.clone()));
    let waiting = tokio::spawn(app.oneshot(get_request("/")));
    assert!(common::settle(|| shedder.stats().queue_len() == 1).await);
    tokio::time::advance(Duration::from_millis(75)).await;
    drop(busy);

    let response = waiting.await.unwrap().unwrap();
    assert_eq!(text(response).await, "75ms");
}

#[tokio::test(start_paused = true)]
async fn optional_admitted_is_some_behind_the_layer() {
    assert_eq!(
        answer(shed_app(), get_request("/maybe-admitted")).await,
        (StatusCode::OK, "admitted as batch".to_owned())
    );
}

#[tokio::test(start_paused = true)]
async fn optional_admitted_is_none_without_the_layer() {
    assert_eq!(
        answer(routes(), get_request("/maybe-admitted")).await,
        (StatusCode::OK, "no shed layer".to_owned())
    );
}

#[tokio::test(start_paused = true)]
async fn admitted_without_the_layer_is_a_500_naming_the_missing_layer() {
    let (status, body) = answer(routes(), get_request("/admitted")).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(body.contains("no ShedLayer runs in front of it"), "{body}");
}

#[tokio::test(start_paused = true)]
async fn deadline_without_the_layer_is_a_500_naming_the_missing_layer() {
    let (status, body) = answer(routes(), get_request("/deadline")).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(body.contains("ShedLayer"), "{body}");
}

#[tokio::test(start_paused = true)]
async fn deadline_is_extracted_when_the_request_has_one() {
    let request = get_with("/deadline", &[("connect-timeout-ms", "60000")]);
    assert_eq!(
        answer(shed_app(), request).await,
        (StatusCode::OK, "has passed: false".to_owned())
    );
}

#[tokio::test(start_paused = true)]
async fn a_required_deadline_on_a_request_without_one_is_a_500_that_says_so() {
    let (status, body) = answer(shed_app(), get_request("/deadline")).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(body.contains("Option<Deadline>"), "{body}");
}

#[tokio::test(start_paused = true)]
async fn a_handler_can_tell_a_missing_layer_from_a_missing_deadline() {
    let without_layer = answer(routes(), get_request("/deadline-or-why-not")).await;
    assert_eq!(without_layer, (StatusCode::OK, "no shed layer".to_owned()));
    let without_deadline = answer(shed_app(), get_request("/deadline-or-why-not")).await;
    assert_eq!(without_deadline, (StatusCode::OK, "no deadline".to_owned()));
}

#[tokio::test(start_paused = true)]
async fn optional_deadline_is_none_when_the_request_has_none() {
    assert_eq!(
        answer(shed_app(), get_request("/maybe-deadline")).await,
        (StatusCode::OK, "no deadline".to_owned())
    );
}

#[tokio::test(start_paused = true)]
async fn optional_deadline_is_some_when_the_request_has_one() {
    let request = get_with("/maybe-deadline", &[("grpc-timeout", "5S")]);
    assert_eq!(
        answer(shed_app(), request).await,
        (StatusCode::OK, "a deadline".to_owned())
    );
}

#[test]
fn propagate_writes_the_remaining_time_as_grpc_timeout_and_milliseconds() {
    let deadline = Deadline::at(Instant::now() + Duration::from_secs(30));
    let mut outgoing = HeaderMap::new();
    deadline.propagate(&mut outgoing);

    let millis: u64 = outgoing["connect-timeout-ms"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(millis <= 30_000 && millis > 0);
    let grpc = outgoing["grpc-timeout"].to_str().unwrap();
    let (amount, unit) = grpc.split_at(grpc.len() - 1);
    assert!(amount.len() <= 8, "{grpc}");
    let per_unit = match unit {
        "u" => 1_000,
        "m" => 1_000_000,
        other => panic!("unexpected unit {other} in {grpc}"),
    };
    let grpc_nanos = amount.parse::<u64>().unwrap() * per_unit;
    assert!(grpc_nanos <= 30_000_000_000);
    // Both forms say the same thing, to the millisecond.
    assert_eq!(grpc_nanos / 1_000_000, millis);
}

#[test]
fn propagate_replaces_stale_deadline_headers() {
    let deadline = Deadline::at(Instant::now() + Duration::from_secs(1));
    let mut outgoing = HeaderMap::new();
    outgoing.insert("grpc-timeout", "1H".parse().unwrap());
    outgoing.insert("connect-timeout-ms", "3600000".parse().unwrap());
    deadline.propagate(&mut outgoing);

    assert_eq!(outgoing.get_all("grpc-timeout").iter().count(), 1);
    assert_ne!(outgoing["grpc-timeout"], "1H");
    let millis: u64 = outgoing["connect-timeout-ms"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(millis <= 1_000);
}

#[test]
fn a_passed_deadline_propagates_as_zero() {
    let deadline = Deadline::at(Instant::now() - Duration::from_millis(5));
    let mut outgoing = HeaderMap::new();
    deadline.propagate(&mut outgoing);

    assert!(deadline.has_passed());
    assert_eq!(outgoing["connect-timeout-ms"], "0");
    assert_eq!(outgoing["grpc-timeout"], "0n");
}

#[tokio::test(start_paused = true)]
async fn the_stats_handler_serves_the_engines_state_as_json() {
    let shedder = Shedder::builder()
        .limit(3)
        .clock(shed_axum::TokioClock)
        .build()
        .unwrap();
    let _busy = hold_slot(&shedder);
    let app = Router::new().route("/stats", get(shed_axum::stats::handler(shedder.clone())));

    let response = app.oneshot(get_request("/stats")).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "application/json");
    let stats = json(response).await;

    assert_eq!(stats["limit"], 3);
    assert_eq!(stats["in_flight"], 1);
    assert_eq!(stats["queue_len"], 0);
    assert!(stats["level"].is_u64());
    assert!(stats["level_text"].is_string());
    assert_eq!(stats["queued"].as_object().unwrap().len(), Rank::COUNT);
    assert!(stats["recent_sojourn_ms"].is_null() || stats["recent_sojourn_ms"].is_f64());
    assert!(stats["drain_rate_per_s"].is_null() || stats["drain_rate_per_s"].is_f64());
    let classes = stats["classes"].as_object().unwrap();
    for class in ["background", "batch", "interactive", "critical"] {
        let counters = classes[class].as_object().unwrap();
        for field in [
            "admitted",
            "queued",
            "shed",
            "shed_by_deadline",
            "queue_full",
            "dropped_from_queue",
            "expired",
        ] {
            assert!(counters[field].is_u64(), "{class}.{field}");
        }
    }
    assert_eq!(classes["critical"]["admitted"], 1);
}

#[tokio::test(start_paused = true)]
async fn the_stats_handler_outside_the_layer_answers_while_everything_else_is_refused() {
    let (shedder, _busy) = common::full_shedder();
    let app = Router::new()
        .route("/work", get(|| async { "work" }))
        .layer(ShedLayer::new(shedder.clone()))
        .route("/stats", get(shed_axum::stats::handler(shedder.clone())));

    let refused = app.clone().oneshot(get_request("/work")).await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let stats = app.oneshot(get_request("/stats")).await.unwrap();
    assert_eq!(stats.status(), StatusCode::OK);
    assert_eq!(json(stats).await["classes"]["interactive"]["queue_full"], 1);
}
