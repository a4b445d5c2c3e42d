//! The client throttle against scripted replicas: it refuses locally the
//! ranks a replica says it sheds and sends the others, throttles a replica
//! that refuses without saying anything, forgets within two seconds of
//! injected time, keeps one state per replica, and spends no retry budget.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use shed_axum::client::{LocalReason, RefusedLocally, ShedRetryLayer, ShedThrottleLayer};
use shed_axum::RequestHead;
use shed_core::retry::Retrier;
use shed_core::{Class, ManualClock};
use tower::{service_fn, Service, ServiceBuilder, ServiceExt};

/// Every rank but interactive and critical originals shed.
const SHEDS_BELOW_INTERACTIVE: &str = "ranks=6, cohorts=0, in-flight=64, limit=64, queued=20";
/// Nothing shed.
const SHEDS_NOTHING: &str = "ranks=0, cohorts=0, in-flight=3, limit=64, queued=0";

/// How a scripted replica answers.
#[derive(Clone, Copy)]
struct Script {
    status: u16,
    load: Option<&'static str>,
}

const SERVES: Script = Script {
    status: 200,
    load: None,
};

/// Replicas by authority, each answering as its script says, counting
/// what reaches it.
#[derive(Clone, Default)]
struct Replicas {
    scripts: Arc<Mutex<HashMap<String, Script>>>,
    received: Arc<Mutex<Vec<Received>>>,
}

/// A request that reached a replica: its authority and `shed-attempt`.
type Received = (String, Option<String>);

impl Replicas {
    fn set(&self, authority: &str, script: Script) {
        self.scripts
            .lock()
            .unwrap()
            .insert(authority.to_owned(), script);
    }

    /// How many requests reached `authority`.
    fn received(&self, authority: &str) -> usize {
        let received = self.received.lock().unwrap();
        received.iter().filter(|(at, _)| at == authority).count()
    }

    /// The attempt numbers requests arrived with, in order.
    fn attempts(&self) -> Vec<Option<String>> {
        let received = self.received.lock().unwrap();
        received
            .iter()
            .map(|(_, attempt)| attempt.clone())
            .collect()
    }

    fn answer(&self, request: &Request<String>) -> Response<String> {
        let authority = request.uri().authority().unwrap().to_string();
        let attempt = request
            .headers()
            .get("shed-attempt")
            .map(|value| value.to_str().unwrap().to_owned());
        self.received
            .lock()
            .unwrap()
            .push((authority.clone(), attempt));
        let script = self.scripts.lock().unwrap().get(&authority).copied();
        let script = script.unwrap_or(SERVES);
        let mut response = Response::builder().status(script.status);
        if script.status == 429 {
            response = response.header("retry-after", "3");
        }
        if let Some(load) = script.load {
            response = response.header("shed-load", load);
        }
        response.body(String::new()).unwrap()
    }

    fn service(
        &self,
    ) -> impl Service<
        Request<String>,
        Response = Response<String>,
        Error = Infallible,
        Future = impl Send,
    > + Clone {
        let replicas = self.clone();
        service_fn(move |request: Request<String>| {
            let answer = replicas.answer(&request);
            async move { Ok::<_, Infallible>(answer) }
        })
    }
}

/// A throttle on a manual clock, with every draw 0.5.
fn throttle(clock: &ManualClock) -> ShedThrottleLayer {
    ShedThrottleLayer::new().clock(clock.clone()).random(|| 0.5)
}

fn request(authority: &str, class: Class) -> Request<String> {
    let mut request = Request::get(format!("http://{authority}/q"))
        .body(String::new())
        .unwrap();
    request.extensions_mut().insert(class);
    request
}

/// Sends `request` through `throttle` to `replicas`, returning the status.
async fn status(
    throttle: &ShedThrottleLayer,
    replicas: &Replicas,
    request: Request<String>,
) -> StatusCode {
    let client = ServiceBuilder::new()
        .layer(throttle.clone())
        .service(replicas.service());
    client.oneshot(request).await.unwrap().status()
}

#[tokio::test]
async fn the_ranks_a_replica_sheds_are_refused_locally() {
    let clock = ManualClock::new();
    let throttle = throttle(&clock);
    let replicas = Replicas::default();
    replicas.set(
        "a:80",
        Script {
            status: 200,
            load: Some(SHEDS_BELOW_INTERACTIVE),
        },
    );

    assert_eq!(
        status(&throttle, &replicas, request("a:80", Class::Interactive)).await,
        200
    );
    for class in [Class::Batch, Class::Background] {
        let refused = status(&throttle, &replicas, request("a:80", class)).await;
        assert_eq!(refused, StatusCode::TOO_MANY_REQUESTS, "{class}");
    }
    assert_eq!(replicas.received("a:80"), 1);
    assert_eq!(throttle.stats().refused_shed, 2);
}

#[tokio::test]
async fn the_ranks_a_replica_admits_are_sent() {
    let clock = ManualClock::new();
    let throttle = throttle(&clock);
    let replicas = Replicas::default();
    replicas.set(
        "a:80",
        Script {
            status: 200,
            load: Some(SHEDS_BELOW_INTERACTIVE),
        },
    );

    for class in [Class::Interactive, Class::Critical, Class::Interactive] {
        assert_eq!(
            status(&throttle, &replicas, request("a:80", class)).await,
            200
        );
    }
    assert_eq!(replicas.received("a:80"), 3);
    assert_eq!(throttle.stats().refused_shed, 0);
}

#[tokio::test]
async fn a_retry_is_shed_before_the_original_of_its_class() {
    let clock = ManualClock::new();
    let throttle = throttle(&clock);
    let replicas = Replicas::default();
    replicas.set(
        "a:80",
        Script {
            status: 200,
            load: Some(SHEDS_BELOW_INTERACTIVE),
        },
    );
    assert_eq!(
        status(&throttle, &replicas, request("a:80", Class::Critical)).await,
        200
    );

    let mut retry = request("a:80", Class::Critical);
    retry
        .headers_mut()
        .insert("grpc-previous-rpc-attempts", HeaderValue::from_static("1"));
    assert_eq!(status(&throttle, &replicas, retry).await, 429);
    let mut retry = request("a:80", Class::Critical);
    retry
        .headers_mut()
        .insert("shed-attempt", HeaderValue::from_static("2"));
    assert_eq!(status(&throttle, &replicas, retry).await, 429);
    assert_eq!(replicas.received("a:80"), 1);
}

#[tokio::test]
async fn the_classifier_classes_requests_without_a_class_extension() {
    let clock = ManualClock::new();
    let throttle = throttle(&clock).classifier(|head: &RequestHead<'_>| {
        head.uri
            .path()
            .starts_with("/reports/")
            .then_some(Class::Batch)
    });
    let replicas = Replicas::default();
    replicas.set(
        "a:80",
        Script {
            status: 200,
            load: Some(SHEDS_BELOW_INTERACTIVE),
        },
    );
    let plain = |path: &str| {
        Request::get(format!("http://a:80{path}"))
            .body(String::new())
            .unwrap()
    };

    assert_eq!(status(&throttle, &replicas, plain("/search")).await, 200);
    assert_eq!(
        status(&throttle, &replicas, plain("/reports/daily")).await,
        429
    );
}

#[tokio::test]
async fn a_local_refusal_is_answered_as_the_server_would_and_marked() {
    let clock = ManualClock::new();
    let throttle = throttle(&clock);
    let replicas = Replicas::default();
    replicas.set(
        "a:80",
        Script {
            status: 429,
            load: Some(SHEDS_BELOW_INTERACTIVE),
        },
    );
    let client = ServiceBuilder::new()
        .layer(throttle.clone())
        .service(replicas.service());
    let first = client
        .clone()
        .oneshot(request("a:80", Class::Interactive))
        .await
        .unwrap();
    assert!(first.extensions().get::<RefusedLocally>().is_none());

    let refused = client.oneshot(request("a:80", Class::Batch)).await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    // The replica asked interactive originals to wait 3 s; batch has no
    // pushback of its own yet: the floor of a second.
    assert_eq!(refused.headers()["retry-after"], "1");
    assert_eq!(
        refused.headers()["content-type"],
        "application/problem+json"
    );
    let mark = *refused.extensions().get::<RefusedLocally>().unwrap();
    assert_eq!(mark.reason(), LocalReason::Shed);
    assert_eq!(mark.retry_after(), Duration::from_secs(1));
    let body = refused.into_body().collect().await.unwrap().to_bytes();
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["reason"], "shed_locally");
    assert_eq!(body["class"], "batch");
    assert_eq!(body["status"], 429);
}

#[tokio::test]
async fn a_local_refusal_asks_for_the_pushback_the_replica_gave_its_rank() {
    let clock = ManualClock::new();
    let throttle = throttle(&clock);
    let replicas = Replicas::default();
    // Refuses with `Retry-After: 3`, and sheds all but critical originals.
    replicas.set(
        "a:80",
        Script {
            status: 429,
            load: Some("ranks=7, cohorts=0, in-flight=64, limit=64, queued=20"),
        },
    );
    let client = ServiceBuilder::new()
        .layer(throttle.clone())
        .service(replicas.service());
    let first = client
        .clone()
        .oneshot(request("a:80", Class::Interactive))
        .await
        .unwrap();
    assert_eq!(first.headers()["retry-after"], "3");

    let refused = client
        .oneshot(request("a:80", Class::Interactive))
        .await
        .unwrap();
    assert!(refused.extensions().get::<RefusedLocally>().is_some());
    assert_eq!(refused.headers()["retry-after"], "3");
}

#[tokio::test]
async fn a_replica_that_refuses_without_a_word_is_throttled() {
    let clock = ManualClock::new();
    let throttle = throttle(&clock);
    let replicas = Replicas::default();
    replicas.set(
        "a:80",
        Script {
            status: 503,
            load: None,
        },
    );

    for _ in 0..10 {
        status(&throttle, &replicas, request("a:80", Class::Interactive)).await;
    }
    // With every draw 0.5: the first goes (nothing counted), the second
    // too (1/2 is not below 1/2), then 2/3, 3/4...: all refused here.
    assert_eq!(replicas.received("a:80"), 2);
    assert_eq!(throttle.stats().refused_throttled, 8);
    assert_eq!(throttle.stats().refused_shed, 0);
}

#[tokio::test]
async fn a_replica_that_accepts_is_never_throttled() {
    let clock = ManualClock::new();
    let throttle = throttle(&clock).random(|| 0.0);
    let replicas = Replicas::default();
    for _ in 0..50 {
        assert_eq!(
            status(&throttle, &replicas, request("a:80", Class::Batch)).await,
            200
        );
    }
    assert_eq!(throttle.stats().refused_throttled, 0);
}

#[tokio::test]
async fn a_replica_that_stops_shedding_gets_traffic_back_within_two_seconds() {
    let clock = ManualClock::new();
    let throttle = throttle(&clock);
    let replicas = Replicas::default();
    replicas.set(
        "a:80",
        Script {
            status: 200,
            load: Some(SHEDS_BELOW_INTERACTIVE),
        },
    );
    status(&throttle, &replicas, request("a:80", Class::Interactive)).await;
    // The replica recovers; this client sends it no interactive work, so
    // no answer tells it so.
    replicas.set(
        "a:80",
        Script {
            status: 200,
            load: Some(SHEDS_NOTHING),
        },
    );
    assert_eq!(
        status(&throttle, &replicas, request("a:80", Class::Batch)).await,
        429
    );

    clock.advance(Duration::from_secs(2));
    assert_eq!(
        status(&throttle, &replicas, request("a:80", Class::Batch)).await,
        200
    );
    assert_eq!(replicas.received("a:80"), 2);
}

#[tokio::test]
async fn a_throttled_replica_that_recovers_gets_traffic_back_within_two_seconds() {
    let clock = ManualClock::new();
    let throttle = throttle(&clock);
    let replicas = Replicas::default();
    replicas.set(
        "a:80",
        Script {
            status: 503,
            load: None,
        },
    );
    for _ in 0..10 {
        status(&throttle, &replicas, request("a:80", Class::Interactive)).await;
    }
    replicas.set("a:80", SERVES);
    assert_eq!(
        status(&throttle, &replicas, request("a:80", Class::Interactive)).await,
        429
    );

    clock.advance(Duration::from_secs(2));
    assert_eq!(
        status(&throttle, &replicas, request("a:80", Class::Interactive)).await,
        200
    );
}

#[tokio::test]
async fn each_replica_has_its_own_state() {
    let clock = ManualClock::new();
    let throttle = throttle(&clock);
    let replicas = Replicas::default();
    replicas.set(
        "a:80",
        Script {
            status: 200,
            load: Some(SHEDS_BELOW_INTERACTIVE),
        },
    );
    replicas.set(
        "b:80",
        Script {
            status: 200,
            load: Some(SHEDS_NOTHING),
        },
    );
    status(&throttle, &replicas, request("a:80", Class::Interactive)).await;
    status(&throttle, &replicas, request("b:80", Class::Interactive)).await;

    assert_eq!(
        status(&throttle, &replicas, request("a:80", Class::Batch)).await,
        429
    );
    assert_eq!(
        status(&throttle, &replicas, request("b:80", Class::Batch)).await,
        200
    );
}

#[tokio::test]
async fn behind_a_proxy_mixed_reports_shed_the_share_the_replicas_shed() {
    let clock = ManualClock::new();
    let draws = Arc::new(Mutex::new(0u32));
    // Draws spread evenly over [0, 1).
    let throttle = throttle(&clock).random(move || {
        let mut n = draws.lock().unwrap();
        *n += 1;
        f64::from(*n % 100) / 100.0
    });
    // Behind one address, answers alternate between a replica that sheds
    // batch work and one that sheds nothing.
    let answered = Arc::new(Mutex::new(0usize));
    let proxy = service_fn(move |_request: Request<String>| {
        let mut n = answered.lock().unwrap();
        *n += 1;
        let load = [SHEDS_BELOW_INTERACTIVE, SHEDS_NOTHING][*n % 2];
        let answer = Response::builder()
            .header("shed-load", load)
            .body(String::new());
        async move { Ok::<_, Infallible>(answer.unwrap()) }
    });
    let client = ServiceBuilder::new().layer(throttle.clone()).service(proxy);
    for _ in 0..40 {
        let request = request("proxy:80", Class::Interactive);
        client.clone().oneshot(request).await.unwrap();
    }

    let mut refused = 0;
    for _ in 0..100 {
        let request = request("proxy:80", Class::Batch);
        let answer = client.clone().oneshot(request).await.unwrap();
        if answer.status() == StatusCode::TOO_MANY_REQUESTS {
            refused += 1;
        }
    }
    assert!((25..=75).contains(&refused), "{refused} of 100 refused");
}

/// A client as recommended: the retry layer outside, the throttle inside.
fn retrying_client(
    retrier: &Retrier,
    throttle: &ShedThrottleLayer,
    replicas: &Replicas,
) -> impl Service<
    Request<String>,
    Response = Response<shed_axum::ShedBody<String>>,
    Error = Infallible,
> + Clone {
    ServiceBuilder::new()
        .layer(ShedRetryLayer::new(retrier.clone()))
        .layer(throttle.clone())
        .service(replicas.service())
}

#[tokio::test(start_paused = true)]
async fn an_original_refused_locally_neither_spends_nor_earns_retry_budget() {
    let clock = ManualClock::new();
    let throttle = throttle(&clock);
    let replicas = Replicas::default();
    replicas.set(
        "a:80",
        Script {
            status: 200,
            load: Some(SHEDS_BELOW_INTERACTIVE),
        },
    );
    let retrier = Retrier::builder().build().unwrap();
    let client = retrying_client(&retrier, &throttle, &replicas);
    client
        .clone()
        .oneshot(request("a:80", Class::Interactive))
        .await
        .unwrap();
    let balance = retrier.budget().balance_tenths();

    let refused = client.oneshot(request("a:80", Class::Batch)).await.unwrap();
    assert!(refused.extensions().get::<RefusedLocally>().is_some());
    assert_eq!(retrier.stats().retries(), 0);
    assert_eq!(retrier.stats().total_denials(), 0);
    assert_eq!(
        retrier.budget().balance_tenths(),
        balance,
        "nothing spent, and no tenth earned for an original never sent"
    );
    assert_eq!(replicas.received("a:80"), 1);
}

#[tokio::test(start_paused = true)]
async fn a_retry_the_replica_sheds_is_refused_before_any_budget_is_spent() {
    let clock = ManualClock::new();
    let throttle = throttle(&clock);
    let replicas = Replicas::default();
    replicas.set(
        "a:80",
        Script {
            status: 429,
            load: Some(SHEDS_BELOW_INTERACTIVE),
        },
    );
    let retrier = Retrier::builder().build().unwrap();
    let client = retrying_client(&retrier, &throttle, &replicas);

    let answer = client
        .oneshot(request("a:80", Class::Interactive))
        .await
        .unwrap();
    assert_eq!(answer.status(), 429, "the replica's own refusal");
    assert!(answer.extensions().get::<RefusedLocally>().is_none());
    assert_eq!(replicas.attempts(), [Some("1".to_owned())]);
    assert_eq!(throttle.stats().refused_shed, 1, "the retry, refused here");
    assert_eq!(retrier.stats().retries(), 0);
    assert_eq!(
        retrier.budget().balance_tenths(),
        21,
        "20 + 1 earned, nothing spent"
    );
}

#[tokio::test(start_paused = true)]
async fn a_retry_the_replica_admits_is_sent_once_and_not_judged_twice() {
    let clock = ManualClock::new();
    let throttle = throttle(&clock);
    let replicas = Replicas::default();
    // Refuses, and says it sheds nothing: the retry goes.
    replicas.set(
        "a:80",
        Script {
            status: 429,
            load: Some(SHEDS_NOTHING),
        },
    );
    let retrier = Retrier::builder()
        .max_attempts(2)
        .deadline(Duration::from_secs(10))
        .build()
        .unwrap();
    let client = retrying_client(&retrier, &throttle, &replicas);

    client
        .oneshot(request("a:80", Class::Interactive))
        .await
        .unwrap();
    assert_eq!(
        replicas.attempts(),
        [Some("1".to_owned()), Some("2".to_owned())]
    );
    assert_eq!(retrier.stats().retries(), 1);
    let stats = throttle.stats();
    assert_eq!(
        (stats.sent, stats.refused_shed, stats.refused_throttled),
        (2, 0, 0)
    );
}

#[tokio::test]
async fn a_report_in_a_grpc_calls_trailers_is_read() {
    let clock = ManualClock::new();
    let throttle = throttle(&clock);
    let replica = service_fn(|_request: Request<String>| async {
        let message = Full::new(Bytes::from_static(&[0, 0, 0, 0, 0]));
        let mut trailers = HeaderMap::new();
        trailers.insert("grpc-status", HeaderValue::from_static("0"));
        trailers.insert(
            "shed-load",
            HeaderValue::from_static(SHEDS_BELOW_INTERACTIVE),
        );
        let body = message.with_trailers(async { Some(Ok::<_, Infallible>(trailers)) });
        let response = Response::builder()
            .header("content-type", "application/grpc")
            .body(body)
            .unwrap();
        Ok::<_, Infallible>(response)
    });
    let client = ServiceBuilder::new()
        .layer(throttle.clone())
        .service(replica);
    let call = |class: Class| {
        let mut call = Request::post("http://a:50051/pkg.Service/Method")
            .header("content-type", "application/grpc")
            .body(String::new())
            .unwrap();
        call.extensions_mut().insert(class);
        call
    };

    let served = client
        .clone()
        .oneshot(call(Class::Interactive))
        .await
        .unwrap();
    assert!(!served.headers().contains_key("grpc-status"));
    let trailers = served.into_body().collect().await.unwrap();
    assert_eq!(trailers.trailers().unwrap()["grpc-status"], "0");

    let refused = client.oneshot(call(Class::Batch)).await.unwrap();
    assert_eq!(refused.status(), 200);
    assert_eq!(refused.headers()["grpc-status"], "8");
    assert_eq!(refused.headers()["grpc-retry-pushback-ms"], "1000");
    assert!(refused.extensions().get::<RefusedLocally>().is_some());
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_a_transport_error_refused_locally_gets_its_credit_back() {
    let clock = ManualClock::new();
    let throttle = throttle(&clock);
    // The first call is answered with a report that every retry is shed;
    // the second fails in transport, and its retry meets the throttle.
    let calls = Arc::new(Mutex::new(0u32));
    let seen = Arc::clone(&calls);
    let replica = service_fn(move |_request: Request<String>| {
        let call = {
            let mut calls = seen.lock().unwrap();
            *calls += 1;
            *calls
        };
        async move {
            if call == 1 {
                let answer = Response::builder()
                    .header("shed-load", SHEDS_BELOW_INTERACTIVE)
                    .body(String::new())
                    .unwrap();
                Ok(answer)
            } else {
                Err(std::io::Error::from(std::io::ErrorKind::ConnectionRefused))
            }
        }
    });
    let retrier = Retrier::builder().jitter(|| 0.0).build().unwrap();
    let client = ServiceBuilder::new()
        .layer(ShedRetryLayer::new(retrier.clone()).classify_errors(|_: &std::io::Error| true))
        .layer(throttle.clone())
        .service(replica);

    let answer = client
        .clone()
        .oneshot(request("a:80", Class::Interactive))
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(retrier.budget().balance_tenths(), 21);

    let refused = client
        .oneshot(request("a:80", Class::Interactive))
        .await
        .unwrap();
    assert!(refused.extensions().get::<RefusedLocally>().is_some());
    assert_eq!(*calls.lock().unwrap(), 2, "the retry was never sent");
    assert_eq!(retrier.stats().retries(), 1, "granted, then refused here");
    assert_eq!(
        retrier.budget().balance_tenths(),
        22,
        "21 + 1 earned by the second original, the retry's 10 given back"
    );
}
