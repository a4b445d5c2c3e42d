//! Over real loopback sockets: a refusal as a client sees it, permits that
//! come back when clients hang up mid-request, mid-upload and mid-body, and a
//! raw HTTP/2 gRPC call answered trailers-only.
//!
//! Real time and real sockets: each wait is a bounded number of short polls,
//! and only the end state is asserted, never how long it took.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::routing::{get, post};
use axum::Router;
use common::{endless_handler, full_shedder, settle_real, shedder};
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use shed_axum::ShedLayer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Serves `app` on an ephemeral loopback port until the test's runtime ends.
async fn serve(app: Router) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

fn client() -> Client<hyper_util::client::legacy::connect::HttpConnector, Empty<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http()
}

/// Reads from `stream` until `needle` has been seen (bounded by the bytes a
/// small response can hold).
async fn read_until(stream: &mut TcpStream, needle: &str) -> String {
    let mut seen = Vec::new();
    let mut buffer = [0u8; 1024];
    while !String::from_utf8_lossy(&seen).contains(needle) {
        let read = stream.read(&mut buffer).await.unwrap();
        assert!(read > 0, "connection closed before {needle:?}: {seen:?}");
        seen.extend_from_slice(&buffer[..read]);
        assert!(seen.len() < 64 * 1024);
    }
    String::from_utf8_lossy(&seen).into_owned()
}

#[tokio::test]
async fn over_a_socket_an_overloaded_server_answers_429_with_retry_after() {
    let (shedder, _busy) = full_shedder();
    let app = Router::new()
        .route("/", get(|| async { "served" }))
        .layer(ShedLayer::new(shedder));
    let addr = serve(app).await;

    let uri = format!("http://{addr}/");
    let response = client().get(uri.parse().unwrap()).await.unwrap();

    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    let seconds: u64 = response.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(seconds >= 1);
    assert_eq!(
        response.headers()["content-type"],
        "application/problem+json"
    );
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let problem: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(problem["reason"], "queue_full");
}

#[tokio::test]
async fn over_a_socket_a_served_request_returns_its_slot_when_the_body_is_sent() {
    let shedder = shedder(2);
    let app = Router::new()
        .route("/", get(|| async { "served" }))
        .layer(ShedLayer::new(shedder.clone()));
    let addr = serve(app).await;

    let uri = format!("http://{addr}/");
    let response = client().get(uri.parse().unwrap()).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, "served");

    assert!(settle_real(|| shedder.in_flight() == 0).await);
}

#[tokio::test]
async fn a_client_hanging_up_while_the_handler_runs_cancels_it_and_returns_the_slot() {
    let shedder = shedder(2);
    let dropped = Arc::new(AtomicBool::new(false));
    let app = Router::new()
        .route("/", endless_handler(dropped.clone()))
        .layer(ShedLayer::new(shedder.clone()));
    let addr = serve(app).await;

    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET / HTTP/1.1\r\nhost: localhost\r\n\r\n")
        .await
        .unwrap();
    assert!(settle_real(|| shedder.in_flight() == 1).await);
    drop(stream);

    assert!(settle_real(|| shedder.in_flight() == 0).await);
    assert!(settle_real(|| dropped.load(Ordering::SeqCst)).await);
}

#[tokio::test]
async fn a_client_hanging_up_mid_upload_returns_the_slot() {
    let shedder = shedder(2);
    let app = Router::new()
        .route(
            "/upload",
            post(|body: Bytes| async move { format!("{} bytes", body.len()) }),
        )
        .layer(ShedLayer::new(shedder.clone()));
    let addr = serve(app).await;

    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"POST /upload HTTP/1.1\r\nhost: localhost\r\ncontent-length: 100000\r\n\r\nonly the first bytes")
        .await
        .unwrap();
    assert!(settle_real(|| shedder.in_flight() == 1).await);
    drop(stream);

    assert!(settle_real(|| shedder.in_flight() == 0).await);
}

#[tokio::test]
async fn a_client_hanging_up_mid_response_body_returns_the_slot() {
    let shedder = shedder(2);
    let app = Router::new()
        .route("/stream", get(|| async { common::endless_body() }))
        .layer(ShedLayer::new(shedder.clone()));
    let addr = serve(app).await;

    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET /stream HTTP/1.1\r\nhost: localhost\r\n\r\n")
        .await
        .unwrap();
    let seen = read_until(&mut stream, "first chunk").await;
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
    assert_eq!(shedder.in_flight(), 1, "the body is still streaming");
    drop(stream);

    assert!(settle_real(|| shedder.in_flight() == 0).await);
}

#[tokio::test]
async fn a_raw_http2_grpc_call_to_an_overloaded_server_gets_trailers_only_status_8() {
    let (shedder, _busy) = full_shedder();
    let app = Router::new()
        .route("/pkg.Greeter/SayHello", post(|| async { "served" }))
        .layer(ShedLayer::new(shedder));
    let addr = serve(app).await;

    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(connection);
    let request = Request::post(format!("http://{addr}/pkg.Greeter/SayHello"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("grpc-timeout", "5S")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let response = sender.send_request(request).await.unwrap();

    assert_eq!(response.version(), http::Version::HTTP_2);
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "application/grpc");
    assert_eq!(response.headers()["grpc-status"], "8");
    let pushback: u64 = response.headers()["grpc-retry-pushback-ms"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(pushback >= 1);
    let body = response.into_body().collect().await.unwrap();
    assert!(
        body.trailers().is_none(),
        "trailers-only: the status is in the head"
    );
    assert!(body.to_bytes().is_empty());
}

#[tokio::test]
async fn a_raw_http2_grpc_call_with_a_free_slot_reaches_the_handler() {
    let shedder = shedder(2);
    let app = Router::new()
        .route(
            "/pkg.Greeter/SayHello",
            post(|| async { Body::from("served") }),
        )
        .layer(ShedLayer::new(shedder.clone()));
    let addr = serve(app).await;

    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(connection);
    let request = Request::post(format!("http://{addr}/pkg.Greeter/SayHello"))
        .header("content-type", "application/grpc")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let response = sender.send_request(request).await.unwrap();

    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers().get("grpc-status").is_none());
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, "served");
    assert!(settle_real(|| shedder.in_flight() == 0).await);
}
