//! Issue 6's closing loop: a client retrying through `ShedRetryLayer` against
//! a shed-axum server that is shedding. Its retries carry `shed-attempt`, the
//! server ranks them below originals, and the client waits at least the
//! Retry-After it was given. In process, on paused tokio time: exact.

mod common;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::routing::get;
use axum::Router;
use common::{full_shedder, get as get_request, hold_slot, text};
use http::{Request, Response};
use shed_axum::client::ShedRetryLayer;
use shed_axum::{Admitted, ShedLayer, TokioClock};
use shed_core::retry::Retrier;
use shed_core::{Class, Rank, Shedder};
use tokio::time::Instant;
use tower::{service_fn, Layer, ServiceExt};

/// One physical attempt as it crossed the wire.
#[derive(Clone, Debug)]
struct Attempt {
    sent_at: Duration,
    attempt: String,
    grpc_timeout: Option<String>,
    status: u16,
    retry_after: Option<u64>,
    reason: Option<String>,
}

/// The client's transport: hands each request to the server's router and
/// logs what was sent and answered.
#[derive(Clone)]
struct Wire {
    app: Router,
    start: Instant,
    log: Arc<Mutex<Vec<Attempt>>>,
}

impl Wire {
    fn new(app: Router) -> Wire {
        Wire {
            app,
            start: Instant::now(),
            log: Arc::default(),
        }
    }

    async fn send(self, request: Request<String>) -> Response<String> {
        let sent_at = self.start.elapsed();
        let header = |name: &str| {
            request
                .headers()
                .get(name)
                .map(|value| value.to_str().unwrap().to_owned())
        };
        let attempt = header("shed-attempt").expect("every attempt is marked");
        let grpc_timeout = header("grpc-timeout");
        let response = self.app.oneshot(request.map(Body::from)).await.unwrap();
        let (parts, body) = response.into_parts();
        let body = text(Response::new(body)).await;
        let retry_after = parts
            .headers
            .get("retry-after")
            .map(|value| value.to_str().unwrap().parse().unwrap());
        let reason = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|problem| problem["reason"].as_str().map(str::to_owned));
        self.log.lock().unwrap().push(Attempt {
            sent_at,
            attempt,
            grpc_timeout,
            status: parts.status.as_u16(),
            retry_after,
            reason,
        });
        Response::from_parts(parts, body)
    }

    fn log(&self) -> Vec<Attempt> {
        self.log.lock().unwrap().clone()
    }
}

fn retrier(deadline: Duration) -> Retrier {
    Retrier::builder()
        .deadline(deadline)
        .jitter(|| 0.5)
        .build()
        .unwrap()
}

async fn call(wire: &Wire, retrier: Retrier) -> Response<String> {
    let transport = {
        let wire = wire.clone();
        service_fn(move |request: Request<String>| {
            let wire = wire.clone();
            async move { Ok::<_, Infallible>(wire.send(request).await) }
        })
    };
    ShedRetryLayer::new(retrier)
        .layer(transport)
        .oneshot(Request::get("/").body(String::new()).unwrap())
        .await
        .unwrap()
}

/// Every retry was sent at least the Retry-After of the refusal before it.
fn assert_pushback_honoured(log: &[Attempt]) {
    for pair in log.windows(2) {
        let told = Duration::from_secs(pair[0].retry_after.expect("refusals carry Retry-After"));
        let waited = pair[1].sent_at - pair[0].sent_at;
        assert!(waited >= told, "waited {waited:?}, told {told:?}: {log:#?}");
    }
}

/// Lets paused time move in 1 ms steps until `done` holds, a bounded number of times.
async fn advance_until(mut done: impl FnMut() -> bool) -> bool {
    for _ in 0..20_000 {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    done()
}

#[tokio::test(start_paused = true)]
async fn a_refused_call_is_retried_with_the_marker_after_the_retry_after_it_was_given() {
    let (shedder, busy) = full_shedder();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        drop(busy);
    });
    let app = Router::new()
        .route(
            "/",
            get(|admitted: Admitted| async move { format!("attempt {}", admitted.attempt) }),
        )
        .layer(ShedLayer::new(shedder.clone()));
    let wire = Wire::new(app);

    let response = call(&wire, retrier(Duration::from_secs(10))).await;

    assert_eq!(response.status(), 200);
    assert_eq!(response.body(), "attempt 2");
    let log = wire.log();
    assert_eq!(log.len(), 2, "{log:#?}");
    assert_eq!((log[0].attempt.as_str(), log[0].status), ("1", 429));
    assert_eq!(log[0].reason.as_deref(), Some("queue_full"));
    assert!(log[0].retry_after.unwrap() >= 1);
    assert_eq!((log[1].attempt.as_str(), log[1].status), ("2", 200));
    assert_pushback_honoured(&log);
    // The retry forwards what is left of the operation's deadline, which the server reads.
    let first = log[0].grpc_timeout.clone().unwrap();
    let second = log[1].grpc_timeout.clone().unwrap();
    let read = |value: &str| shed_core::wire::grpc_timeout(value.as_bytes()).unwrap();
    assert!(read(&second) < read(&first), "{first} then {second}");
    assert_eq!(shedder.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_pushback_longer_than_the_deadline_ends_the_call_with_the_refusal() {
    let (shedder, _busy) = full_shedder();
    let app = Router::new()
        .route("/", get(|| async { "served" }))
        .layer(ShedLayer::new(shedder));
    let wire = Wire::new(app);

    // Retry-After is at least 1 s; a 600 ms operation cannot wait for it.
    let response = call(&wire, retrier(Duration::from_millis(600))).await;

    assert_eq!(response.status(), 429);
    let log = wire.log();
    assert_eq!(log.len(), 1, "{log:#?}");
    assert_eq!(log[0].attempt, "1");
}

/// Below overload the longest waiting request is served first, retry or
/// not: the client's retry, queued before a later original, gets the slot,
/// and the original runs out of its maximum wait behind the 1 s handler.
/// (In an overload the original would go first: see shed-core's queueing
/// tests.)
#[tokio::test(start_paused = true)]
async fn below_overload_the_clients_retry_that_waited_longer_is_served_before_a_later_original() {
    // The controller is kept out of it: with a handful of requests, one
    // overloaded interval would shed whole ranks at the door (see
    // shed-core's shed order tests).
    let shedder = Shedder::builder()
        .limit(1)
        .max_wait(Class::Interactive, Duration::from_millis(300))
        .interval(Duration::from_secs(10))
        .target_sojourn(Duration::from_secs(9))
        .clock(TokioClock)
        .build()
        .unwrap();
    let busy = hold_slot(&shedder);
    let served = Arc::new(Mutex::new(Vec::new()));
    let record = served.clone();
    let app = Router::new()
        .route(
            "/",
            get(move |admitted: Admitted| {
                let record = record.clone();
                async move {
                    record.lock().unwrap().push(admitted.attempt);
                    // Long enough to outlast any waiter's maximum wait.
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    "served"
                }
            }),
        )
        .layer(ShedLayer::new(shedder.clone()));
    let wire = Wire::new(app.clone());

    let client = {
        let wire = wire.clone();
        tokio::spawn(async move { call(&wire, retrier(Duration::from_secs(30))).await })
    };
    // The original waits its 300 ms, is refused, and the client's retry comes back and waits.
    let retry_rank = Rank::retry(Class::Interactive);
    assert!(
        advance_until(|| shedder.queue_len(retry_rank) == 1).await,
        "{:#?} {:?}",
        wire.log(),
        shedder.stats()
    );
    // Now an original arrives behind it.
    let original = tokio::spawn(app.oneshot(get_request("/")));
    let original_rank = Rank::original(Class::Interactive);
    assert!(advance_until(|| shedder.queue_len(original_rank) == 1).await);

    drop(busy);
    let response = client.await.unwrap();
    assert_eq!(response.status(), 200, "the retry is served");
    let original = original.await.unwrap().unwrap();
    assert_eq!(original.status(), 429, "the later original waited too long");

    let log = wire.log();
    assert_eq!(log.len(), 2, "{log:#?}");
    assert_eq!((log[0].attempt.as_str(), log[0].status), ("1", 429));
    assert_eq!(log[0].reason.as_deref(), Some("queue_timeout"));
    assert_eq!((log[1].attempt.as_str(), log[1].status), ("2", 200));
    assert_pushback_honoured(&log);
    assert_eq!(
        *served.lock().unwrap(),
        vec![2],
        "only the retry was served"
    );
    assert_eq!(shedder.in_flight(), 0);
}
