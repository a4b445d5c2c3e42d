//! The client throttle against a real shed server over loopback: it reads
//! the server's load feedback, falls back on adaptive throttling when the
//! server gives none, and traces what it refuses.

mod common;

use std::net::SocketAddr;

use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use common::{full_shedder, Lines};
use http::{Request, StatusCode};
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use shed_axum::client::ShedThrottleLayer;
use shed_axum::ShedLayer;
use shed_core::ManualClock;
use tokio::net::TcpListener;
use tower::{ServiceBuilder, ServiceExt};

/// Serves `app` on an ephemeral loopback port until the test's runtime ends.
async fn serve(app: Router) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// Sends `n` GETs to `addr` through `throttle` over a real socket; returns
/// how many were answered by the server (not refused locally).
async fn send(throttle: &ShedThrottleLayer, addr: SocketAddr, n: usize) -> usize {
    let client = ServiceBuilder::new()
        .layer(throttle.clone())
        .service(Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>());
    let mut reached = 0;
    for _ in 0..n {
        let request = Request::get(format!("http://{addr}/"))
            .body(Empty::new())
            .unwrap();
        let response = client.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        if response
            .extensions()
            .get::<shed_axum::client::RefusedLocally>()
            .is_none()
        {
            reached += 1;
        }
    }
    reached
}

fn throttle() -> ShedThrottleLayer {
    ShedThrottleLayer::new()
        .clock(ManualClock::new())
        .random(|| 0.5)
}

#[tokio::test]
async fn a_server_that_reports_its_load_is_judged_by_its_reports() {
    // Refusing for a full queue, shedding no rank: the reports say so.
    let (shedder, _busy) = full_shedder();
    let app = Router::new()
        .route("/", get(|| async { "served" }))
        .layer(ShedLayer::new(shedder).load_feedback(true));
    let addr = serve(app).await;
    let throttle = throttle();

    assert_eq!(send(&throttle, addr, 10).await, 10);
    assert_eq!(throttle.stats().refused_throttled, 0);
}

#[tokio::test]
async fn a_server_that_says_nothing_is_throttled_when_it_refuses() {
    let (shedder, _busy) = full_shedder();
    let app = Router::new()
        .route("/", get(|| async { "served" }))
        .layer(ShedLayer::new(shedder));
    let addr = serve(app).await;
    let throttle = throttle();

    assert_eq!(send(&throttle, addr, 10).await, 2);
    assert_eq!(throttle.stats().refused_throttled, 8);
}

#[tokio::test(flavor = "current_thread")]
async fn a_local_refusal_is_traced() {
    let (lines, _default) = Lines::capture(tracing::Level::DEBUG);
    let (shedder, _busy) = full_shedder();
    let app = Router::new()
        .route("/", get(|| async { "served" }))
        .layer(ShedLayer::new(shedder));
    let addr = serve(app).await;

    send(&throttle(), addr, 3).await;

    let logged = lines.text();
    let line = logged
        .lines()
        .find(|line| line.contains("refused locally"))
        .unwrap_or_else(|| panic!("no local refusal traced in {logged}"));
    assert!(line.contains(&format!("authority=\"{addr}\"")), "{line}");
    assert!(line.contains("reason=\"throttled_locally\""), "{line}");
    assert!(line.contains("class=\"interactive\""), "{line}");
}
