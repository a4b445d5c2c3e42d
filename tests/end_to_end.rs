//! End to end through the `shed` facade, over real loopback sockets: a
//! service that calls another propagates its caller's deadline, and a full
//! service answers every caller, served or told when to come back.
//!
//! Real time and real sockets: waits are bounded polls, and only end states
//! and bounds are asserted, never durations.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use shed::{Admitted, Deadline, ShedLayer};
use shed::{Class, Shedder};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

type HttpClient = Client<HttpConnector, Empty<Bytes>>;

fn client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

async fn serve(app: Router) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

async fn fetch(
    client: &HttpClient,
    request: Request<Empty<Bytes>>,
) -> (StatusCode, http::HeaderMap, String) {
    let response = client.request(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, headers, String::from_utf8(body.to_vec()).unwrap())
}

fn get_request(uri: String, headers: &[(&str, &str)]) -> Request<Empty<Bytes>> {
    let mut builder = Request::get(uri);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder.body(Empty::new()).unwrap()
}

/// Bounded polling on real time; returns whether `done` came to hold.
async fn settle(mut done: impl FnMut() -> bool) -> bool {
    for _ in 0..500 {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    done()
}

#[derive(Clone)]
struct Upstream {
    client: HttpClient,
    downstream: SocketAddr,
}

/// Calls the downstream with the caller's remaining deadline and relays its answer.
async fn relay(State(upstream): State<Upstream>, deadline: Deadline) -> String {
    let mut request = get_request(format!("http://{}/", upstream.downstream), &[]);
    deadline.propagate(request.headers_mut());
    let (status, _, body) = fetch(&upstream.client, request).await;
    format!("{} {body}", status.as_u16())
}

/// Answers with the deadline it was given, in milliseconds, or "none".
async fn report_deadline(deadline: Option<Deadline>) -> String {
    deadline.map_or("none".to_owned(), |deadline| {
        deadline.remaining().as_millis().to_string()
    })
}

#[tokio::test]
async fn a_callers_deadline_is_propagated_downstream_and_never_lengthened() {
    let downstream = serve(
        Router::new()
            .route("/", get(report_deadline))
            .layer(ShedLayer::new(Shedder::with_limit(4).unwrap())),
    )
    .await;
    let upstream = serve(
        Router::new()
            .route("/", get(relay))
            .with_state(Upstream {
                client: client(),
                downstream,
            })
            .layer(ShedLayer::new(Shedder::with_limit(4).unwrap())),
    )
    .await;

    let request = get_request(format!("http://{upstream}/"), &[("grpc-timeout", "2S")]);
    let (status, _, body) = fetch(&client(), request).await;

    assert_eq!(status, StatusCode::OK, "{body}");
    let (downstream_status, left) = body.split_once(' ').unwrap();
    assert_eq!(downstream_status, "200");
    let left: u64 = left
        .parse()
        .unwrap_or_else(|_| panic!("a deadline downstream: {body}"));
    assert!(left > 0 && left <= 2_000, "{left} ms");
}

#[tokio::test]
async fn a_downstream_clamps_a_propagated_deadline_to_its_own_maximum() {
    let downstream = serve(Router::new().route("/", get(report_deadline)).layer(
        ShedLayer::new(Shedder::with_limit(4).unwrap()).max_deadline(Duration::from_millis(300)),
    ))
    .await;
    let upstream = serve(
        Router::new()
            .route("/", get(relay))
            .with_state(Upstream {
                client: client(),
                downstream,
            })
            .layer(ShedLayer::new(Shedder::with_limit(4).unwrap())),
    )
    .await;

    let request = get_request(format!("http://{upstream}/"), &[("grpc-timeout", "30S")]);
    let (_, _, body) = fetch(&client(), request).await;

    let left: u64 = body.split_once(' ').unwrap().1.parse().unwrap();
    assert!(left <= 300, "{left} ms");
}

#[tokio::test]
async fn a_full_service_serves_what_it_admitted_and_tells_the_rest_when_to_return() {
    let shedder = Shedder::builder()
        .limit(1)
        .queue_capacity(0)
        .build()
        .unwrap();
    let gate = Arc::new(Semaphore::new(0));
    let held = gate.clone();
    let app = Router::new()
        .route(
            "/work",
            get(move |admitted: Admitted| {
                let gate = held.clone();
                async move {
                    let _ = gate.acquire().await;
                    format!("served as {}", admitted.class)
                }
            }),
        )
        .route_layer(ShedLayer::new(shedder.clone()).class(Class::Batch))
        .route("/stats", get(shed::stats::handler(shedder.clone())));
    let addr = serve(app).await;
    let client = client();

    let first = tokio::spawn({
        let client = client.clone();
        let request = get_request(format!("http://{addr}/work"), &[]);
        async move { fetch(&client, request).await }
    });
    assert!(settle(|| shedder.in_flight() == 1).await);
    for _ in 0..4 {
        let (status, headers, body) =
            fetch(&client, get_request(format!("http://{addr}/work"), &[])).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
        let seconds: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
        assert!(seconds >= 1);
        assert!(body.contains(r#""class":"batch""#), "{body}");
    }
    let (status, _, stats) = fetch(&client, get_request(format!("http://{addr}/stats"), &[])).await;
    assert_eq!(status, StatusCode::OK);
    assert!(stats.contains(r#""in_flight":1"#), "{stats}");

    gate.close();
    let (status, _, body) = first.await.unwrap();
    assert_eq!((status, body.as_str()), (StatusCode::OK, "served as batch"));
    assert!(settle(|| shedder.in_flight() == 0).await);
    assert_eq!(shedder.stats().class(Class::Batch).queue_full, 4);
}
