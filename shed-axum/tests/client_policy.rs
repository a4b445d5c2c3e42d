//! `ShedRetryLayer` and its tower retry policy, against a scripted service on tokio's
//! paused clock: no real waiting, and every instant is exact.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use shed_axum::client::ShedRetryLayer;
use shed_core::retry::{Reason, Replay, Retrier};
use tokio::time::Instant;
use tower::{service_fn, BoxError, Layer, ServiceExt};

/// What the scripted server saw of one attempt.
#[derive(Debug, Clone)]
struct Seen {
    at: Duration,
    headers: HeaderMap,
}

/// A server answering from `script` in order (then 200s), recording what it
/// saw and when, relative to `start`.
#[derive(Clone)]
struct Scripted {
    start: Instant,
    script: Arc<Mutex<VecDeque<Response<String>>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Scripted {
    fn new(script: impl IntoIterator<Item = Response<String>>) -> Self {
        Self {
            start: Instant::now(),
            script: Arc::new(Mutex::new(script.into_iter().collect())),
            seen: Arc::default(),
        }
    }

    fn answer(&self, req: &Request<String>) -> Response<String> {
        self.seen.lock().unwrap().push(Seen {
            at: self.start.elapsed(),
            headers: req.headers().clone(),
        });
        self.script
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| response(200, &[]))
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn response(status: u16, headers: &[(&'static str, &'static str)]) -> Response<String> {
    let mut builder = Response::builder().status(StatusCode::from_u16(status).unwrap());
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder.body(String::new()).unwrap()
}

fn retrier() -> Retrier {
    Retrier::builder().jitter(|| 0.5).build().unwrap()
}

async fn call(retrier: Retrier, server: &Scripted, req: Request<String>) -> Response<String> {
    let server = server.clone();
    let transport = service_fn(move |req: Request<String>| {
        let answer = server.answer(&req);
        async move { Ok::<_, Infallible>(answer) }
    });
    ShedRetryLayer::new(retrier)
        .layer(transport)
        .oneshot(req)
        .await
        .unwrap()
}

fn get() -> Request<String> {
    Request::get("/").body(String::new()).unwrap()
}

#[tokio::test(start_paused = true)]
async fn retries_are_marked_carry_the_remaining_deadline_and_wait_out_the_pushback() {
    let server = Scripted::new([response(503, &[("retry-after", "1")])]);
    let response = call(retrier(), &server, get()).await;
    assert_eq!(response.status(), 200);

    let seen = server.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].headers["shed-attempt"], "1");
    assert_eq!(seen[0].headers["grpc-timeout"], "1450000u");
    assert_eq!(seen[1].headers["shed-attempt"], "2");
    // Sent at 1,000 ms: 1,500 ms deadline less 50 ms reserve less 1,000 ms.
    assert_eq!(seen[1].headers["grpc-timeout"], "450000u");
    assert!(seen[1].at - seen[0].at >= Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn an_inbound_attempt_number_and_a_longer_deadline_are_replaced_by_this_clients() {
    // A proxy copying its caller's headers onto its own call.
    let mut proxied = get();
    let headers = proxied.headers_mut();
    headers.insert("shed-attempt", HeaderValue::from_static("3"));
    headers.insert("grpc-timeout", HeaderValue::from_static("30S"));
    let server = Scripted::new([]);
    assert_eq!(call(retrier(), &server, proxied).await.status(), 200);

    let seen = server.seen();
    assert_eq!(seen[0].headers["shed-attempt"], "1");
    assert_eq!(seen[0].headers["grpc-timeout"], "1450000u");
}

#[tokio::test(start_paused = true)]
async fn a_shorter_inbound_deadline_is_kept_and_ends_the_operation() {
    // A caller's own deadline (tonic's `Request::set_timeout` writes one):
    // 400 ms, shorter than the retrier's 1.5 s.
    let call_with = |pushback: &'static str| {
        let mut req = get();
        req.headers_mut()
            .insert("grpc-timeout", HeaderValue::from_static("400m"));
        let server = Scripted::new([response(503, &[("retry-after-ms", pushback)])]);
        (req, server)
    };

    // A retry that fits: each attempt forwards what is left of the 400 ms,
    // less the 50 ms reserve.
    let (req, server) = call_with("100");
    assert_eq!(call(retrier(), &server, req).await.status(), 200);
    let seen = server.seen();
    assert_eq!(seen[0].headers["grpc-timeout"], "350000u");
    assert_eq!(seen[1].at, Duration::from_millis(100));
    assert_eq!(seen[1].headers["grpc-timeout"], "250000u");

    // A pushback past the caller's deadline ends the operation, as it
    // would past the retrier's own.
    let retrier = retrier();
    let (req, server) = call_with("500");
    assert_eq!(call(retrier.clone(), &server, req).await.status(), 503);
    assert_eq!(server.seen().len(), 1);
    assert_eq!(retrier.stats().denials(Reason::Deadline), 1);
}

#[tokio::test(start_paused = true)]
async fn without_pushback_the_retry_waits_the_jittered_backoff() {
    let server = Scripted::new([response(503, &[]), response(429, &[])]);
    let response = call(retrier(), &server, get()).await;
    assert_eq!(response.status(), 200);

    let seen = server.seen();
    let attempts: Vec<_> = seen
        .iter()
        .map(|s| s.headers["shed-attempt"].clone())
        .collect();
    assert_eq!(attempts, ["1", "2", "3"]);
    assert!(seen[1].at >= Duration::from_millis(50));
    assert!(seen[2].at >= Duration::from_millis(50 + 100));
    assert_eq!(seen[2].headers["grpc-timeout"], "1300000u");
}

#[tokio::test(start_paused = true)]
async fn a_post_is_not_retried_unless_declared_safe() {
    let retrier = retrier();
    let server = Scripted::new([response(503, &[])]);
    let post = Request::post("/").body(String::new()).unwrap();
    assert_eq!(call(retrier.clone(), &server, post).await.status(), 503);
    assert_eq!(server.seen().len(), 1);
    assert_eq!(retrier.stats().denials(Reason::UnsafeOperation), 1);

    let server = Scripted::new([response(503, &[])]);
    let mut declared = Request::post("/").body(String::new()).unwrap();
    declared.extensions_mut().insert(Replay::Safe);
    assert_eq!(call(retrier, &server, declared).await.status(), 200);
    assert_eq!(server.seen().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn the_last_attempts_failure_is_counted_as_a_denial() {
    let retrier = retrier();
    let server = Scripted::new(std::iter::repeat_with(|| response(503, &[])).take(3));
    assert_eq!(call(retrier.clone(), &server, get()).await.status(), 503);
    assert_eq!(server.seen().len(), 3);
    assert_eq!(retrier.stats().denials(Reason::AttemptCap), 1);
}

#[tokio::test(start_paused = true)]
async fn a_400_is_returned_without_a_retry() {
    let server = Scripted::new([response(400, &[])]);
    assert_eq!(call(retrier(), &server, get()).await.status(), 400);
    assert_eq!(server.seen().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_pushback_past_the_deadline_returns_the_rejection_at_once() {
    let server = Scripted::new([response(429, &[("retry-after", "2")])]);
    let started = Instant::now();
    assert_eq!(call(retrier(), &server, get()).await.status(), 429);
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(server.seen().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn every_request_through_one_layer_draws_on_one_budget() {
    let retrier = retrier();
    let server = Scripted::new(std::iter::repeat_with(|| response(503, &[])).take(1_000));
    let layer = ShedRetryLayer::new(retrier.clone());
    for _ in 0..100 {
        let server = server.clone();
        let transport = service_fn(move |req: Request<String>| {
            let answer = server.answer(&req);
            async move { Ok::<_, Infallible>(answer) }
        });
        let response = layer.layer(transport).oneshot(get()).await.unwrap();
        assert_eq!(response.status(), 503);
    }
    assert_eq!(server.seen().len(), 112);
    assert_eq!(retrier.stats().originals(), 100);
    assert_eq!(retrier.stats().retries(), 12);
}

#[tokio::test(start_paused = true)]
async fn connect_errors_are_retried_once_classified() {
    let attempts = Arc::new(Mutex::new(0u32));
    let counted = Arc::clone(&attempts);
    let transport = service_fn(move |_req: Request<String>| {
        let mut attempts = counted.lock().unwrap();
        *attempts += 1;
        let result: Result<Response<String>, BoxError> = if *attempts == 1 {
            Err(std::io::Error::from(std::io::ErrorKind::ConnectionRefused).into())
        } else {
            Ok(response(200, &[]))
        };
        async move { result }
    });
    let response = ShedRetryLayer::new(retrier())
        .classify_errors(|err: &BoxError| shed_axum::client::is_connection_refused(err.as_ref()))
        .layer(transport)
        .oneshot(
            Request::builder()
                .method(Method::GET)
                .body(String::new())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(*attempts.lock().unwrap(), 2);
}
