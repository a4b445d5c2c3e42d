//! How a request's head is read: deadline, attempt and class from headers,
//! valid, malformed and hostile, observed through the `Admitted` facts the
//! middleware hands the handler; and the trust rule for caller headers.

mod common;

use std::time::Duration;

use axum::body::Body;
use axum::routing::get;
use axum::Router;
use common::{shedder, text};
use http::{HeaderName, HeaderValue, Request};
use shed_axum::{Admitted, RequestHead, ShedLayer};
use shed_core::Class;
use tower::ServiceExt;

/// What the handler saw: class, attempt, and the deadline as a timeout in
/// milliseconds from arrival (tokio time is paused, so no time passes).
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    class: Class,
    attempt: u32,
    timeout_ms: Option<u128>,
}

async fn echo(admitted: Admitted) -> String {
    let now = tokio::time::Instant::now().into_std();
    let timeout = admitted
        .deadline
        .map(|deadline| deadline.saturating_duration_since(now).as_millis());
    format!("{} {} {timeout:?}", admitted.class, admitted.attempt)
}

fn app(layer: ShedLayer) -> Router {
    Router::new().route("/", get(echo)).layer(layer)
}

/// Sends `headers` (raw bytes, repeats appended) and returns what the handler saw.
async fn seen(layer: &ShedLayer, headers: &[(&'static str, &[u8])]) -> Seen {
    let mut request = Request::get("/").body(Body::empty()).unwrap();
    for (name, value) in headers {
        request.headers_mut().append(
            HeaderName::from_static(name),
            HeaderValue::from_bytes(value).unwrap(),
        );
    }
    let response = app(layer.clone()).oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200, "{headers:?}");
    let body = text(response).await;
    let mut words = body.split(' ');
    let class = Class::from_name(words.next().unwrap()).unwrap();
    let attempt = words.next().unwrap().parse().unwrap();
    let timeout_ms = match words.next().unwrap() {
        "None" => None,
        some => Some(
            some.trim_start_matches("Some(")
                .trim_end_matches(')')
                .parse()
                .unwrap(),
        ),
    };
    Seen {
        class,
        attempt,
        timeout_ms,
    }
}

/// A row of a table: a label, the headers sent (repeats appended), the expected reading.
type Case<'a, T> = (&'a str, Headers<'a>, T);
type Headers<'a> = &'a [(&'static str, &'a [u8])];

fn layer() -> ShedLayer {
    ShedLayer::new(shedder(64)).max_deadline(Duration::from_secs(60))
}

#[tokio::test(start_paused = true)]
async fn deadline_headers_yield_the_shortest_valid_timeout_and_ignore_malformed_ones() {
    let layer = layer();
    let cases: &[Case<Option<u128>>] = &[
        ("no header", &[], None),
        ("grpc millis", &[("grpc-timeout", b"250m")], Some(250)),
        ("grpc seconds", &[("grpc-timeout", b"2S")], Some(2_000)),
        ("grpc micros", &[("grpc-timeout", b"500000u")], Some(500)),
        ("grpc nanos", &[("grpc-timeout", b"99999999n")], Some(99)),
        ("grpc minutes", &[("grpc-timeout", b"1M")], Some(60_000)),
        (
            "grpc hours, clamped",
            &[("grpc-timeout", b"1H")],
            Some(60_000),
        ),
        (
            "grpc 8 digits of hours, clamped",
            &[("grpc-timeout", b"99999999H")],
            Some(60_000),
        ),
        ("connect", &[("connect-timeout-ms", b"800")], Some(800)),
        (
            "envoy",
            &[("x-envoy-expected-rq-timeout-ms", b"300")],
            Some(300),
        ),
        (
            "the shortest of all three",
            &[
                ("grpc-timeout", b"900m"),
                ("connect-timeout-ms", b"700"),
                ("x-envoy-expected-rq-timeout-ms", b"800"),
            ],
            Some(700),
        ),
        ("grpc empty", &[("grpc-timeout", b"")], None),
        ("grpc unit only", &[("grpc-timeout", b"m")], None),
        ("grpc no unit", &[("grpc-timeout", b"100")], None),
        ("grpc bad unit", &[("grpc-timeout", b"100x")], None),
        ("grpc two-letter unit", &[("grpc-timeout", b"100ms")], None),
        ("grpc nine digits", &[("grpc-timeout", b"123456789m")], None),
        ("grpc negative", &[("grpc-timeout", b"-5m")], None),
        ("grpc plus sign", &[("grpc-timeout", b"+5m")], None),
        ("grpc inner space", &[("grpc-timeout", b"5 m")], None),
        ("grpc non-ASCII", &[("grpc-timeout", b"5\xffm")], None),
        (
            "grpc overflowing digits",
            &[("grpc-timeout", b"99999999999999999999999S")],
            None,
        ),
        ("connect negative", &[("connect-timeout-ms", b"-1")], None),
        ("connect fraction", &[("connect-timeout-ms", b"1.5")], None),
        ("connect exponent", &[("connect-timeout-ms", b"1e3")], None),
        (
            "connect eleven digits",
            &[("connect-timeout-ms", b"12345678901")],
            None,
        ),
        (
            "connect overflow",
            &[("connect-timeout-ms", b"99999999999999999999999")],
            None,
        ),
        (
            "connect non-ASCII",
            &[("connect-timeout-ms", "５００".as_bytes())],
            None,
        ),
        (
            "duplicate grpc-timeout",
            &[("grpc-timeout", b"1S"), ("grpc-timeout", b"2S")],
            None,
        ),
        (
            "a malformed header does not hide a valid one",
            &[("grpc-timeout", b"garbage"), ("connect-timeout-ms", b"400")],
            Some(400),
        ),
        (
            "a duplicate header does not hide a valid one",
            &[
                ("connect-timeout-ms", b"100"),
                ("connect-timeout-ms", b"200"),
                ("x-envoy-expected-rq-timeout-ms", b"600"),
            ],
            Some(600),
        ),
    ];
    for (label, headers, expected) in cases {
        let seen = seen(&layer, headers).await;
        assert_eq!(seen.timeout_ms, *expected, "{label}");
        assert_eq!(seen.class, Class::Interactive, "{label}");
        assert_eq!(seen.attempt, 1, "{label}");
    }
}

#[tokio::test(start_paused = true)]
async fn retry_markers_yield_the_highest_valid_attempt_and_ignore_malformed_ones() {
    let layer = layer();
    let cases: &[Case<u32>] = &[
        ("no marker", &[], 1),
        ("shed original", &[("shed-attempt", b"1")], 1),
        ("shed retry", &[("shed-attempt", b"2")], 2),
        (
            "shed zero counts as an original",
            &[("shed-attempt", b"0")],
            1,
        ),
        (
            "shed nine digits",
            &[("shed-attempt", b"999999999")],
            999_999_999,
        ),
        (
            "grpc previous attempts",
            &[("grpc-previous-rpc-attempts", b"1")],
            2,
        ),
        (
            "grpc no previous attempts",
            &[("grpc-previous-rpc-attempts", b"0")],
            1,
        ),
        ("envoy first", &[("x-envoy-attempt-count", b"1")], 1),
        ("envoy third", &[("x-envoy-attempt-count", b"3")], 3),
        ("amz retry", &[("amz-sdk-request", b"attempt=2; max=3")], 2),
        (
            "amz original",
            &[("amz-sdk-request", b"attempt=1; max=3")],
            1,
        ),
        (
            "stainless retry count",
            &[("x-stainless-retry-count", b"2")],
            3,
        ),
        ("stainless none", &[("x-stainless-retry-count", b"0")], 1),
        (
            "the highest marker wins",
            &[("shed-attempt", b"2"), ("x-envoy-attempt-count", b"4")],
            4,
        ),
        ("shed empty", &[("shed-attempt", b"")], 1),
        ("shed word", &[("shed-attempt", b"two")], 1),
        ("shed negative", &[("shed-attempt", b"-2")], 1),
        ("shed ten digits", &[("shed-attempt", b"1234567890")], 1),
        ("shed u32 overflow", &[("shed-attempt", b"4294967296")], 1),
        (
            "shed huge",
            &[("shed-attempt", b"99999999999999999999999")],
            1,
        ),
        ("shed non-ASCII", &[("shed-attempt", b"2\xe9")], 1),
        ("shed padded", &[("shed-attempt", b" 2")], 1),
        (
            "duplicate shed-attempt",
            &[("shed-attempt", b"2"), ("shed-attempt", b"3")],
            1,
        ),
        ("amz word", &[("amz-sdk-request", b"attempt=two")], 1),
        (
            "amz repeated pair",
            &[("amz-sdk-request", b"attempt=1; attempt=9")],
            1,
        ),
        ("amz no attempt", &[("amz-sdk-request", b"max=3")], 1),
        ("envoy negative", &[("x-envoy-attempt-count", b"-3")], 1),
        (
            "a malformed marker does not hide a valid one",
            &[("shed-attempt", b"x"), ("grpc-previous-rpc-attempts", b"2")],
            3,
        ),
    ];
    for (label, headers, expected) in cases {
        let seen = seen(&layer, headers).await;
        assert_eq!(seen.attempt, *expected, "{label}");
        assert_eq!(seen.timeout_ms, None, "{label}");
    }
}

#[tokio::test(start_paused = true)]
async fn the_caller_class_header_is_read_strictly() {
    let layer = layer().caller_class_header(HeaderName::from_static("x-shed-class"));
    let cases: &[Case<Class>] = &[
        ("no header keeps the layer's class", &[], Class::Interactive),
        ("lower: batch", &[("x-shed-class", b"batch")], Class::Batch),
        (
            "any case",
            &[("x-shed-class", b"BACKGROUND")],
            Class::Background,
        ),
        ("padded", &[("x-shed-class", b" batch ")], Class::Batch),
        (
            "unknown name",
            &[("x-shed-class", b"urgent")],
            Class::Interactive,
        ),
        ("empty", &[("x-shed-class", b"")], Class::Interactive),
        (
            "non-ASCII",
            &[("x-shed-class", b"b\xe4tch")],
            Class::Interactive,
        ),
        (
            "duplicate",
            &[("x-shed-class", b"batch"), ("x-shed-class", b"background")],
            Class::Interactive,
        ),
    ];
    for (label, headers, expected) in cases {
        assert_eq!(seen(&layer, headers).await.class, *expected, "{label}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_caller_class_header_lowers_the_class() {
    let layer = layer()
        .class(Class::Critical)
        .caller_class_header(HeaderName::from_static("x-shed-class"));
    let seen = seen(&layer, &[("x-shed-class", b"background")]).await;
    assert_eq!(seen.class, Class::Background);
}

#[tokio::test(start_paused = true)]
async fn an_untrusted_caller_class_header_cannot_raise_the_class() {
    let layer = layer()
        .class(Class::Batch)
        .caller_class_header(HeaderName::from_static("x-shed-class"));
    let seen = seen(&layer, &[("x-shed-class", b"critical")]).await;
    assert_eq!(seen.class, Class::Batch);
}

#[tokio::test(start_paused = true)]
async fn a_trusted_caller_class_header_can_raise_the_class() {
    let layer = layer()
        .class(Class::Batch)
        .caller_class_header(HeaderName::from_static("x-shed-class"))
        .trust_caller(true);
    let seen = seen(&layer, &[("x-shed-class", b"critical")]).await;
    assert_eq!(seen.class, Class::Critical);
}

#[tokio::test(start_paused = true)]
async fn the_caller_cannot_raise_above_the_class_a_classifier_chose() {
    let layer = layer()
        .class(Class::Critical)
        .classifier(|head: &RequestHead<'_>| {
            head.uri.path().starts_with('/').then_some(Class::Batch)
        })
        .caller_class_header(HeaderName::from_static("x-shed-class"));
    assert_eq!(seen(&layer, &[]).await.class, Class::Batch);
    assert_eq!(
        seen(&layer, &[("x-shed-class", b"critical")]).await.class,
        Class::Batch
    );
    assert_eq!(
        seen(&layer, &[("x-shed-class", b"background")]).await.class,
        Class::Background
    );
}

#[tokio::test(start_paused = true)]
async fn without_a_configured_class_header_callers_cannot_choose_a_class() {
    let layer = layer().class(Class::Batch);
    let seen = seen(&layer, &[("x-shed-class", b"background")]).await;
    assert_eq!(seen.class, Class::Batch);
}

#[tokio::test(start_paused = true)]
async fn a_deadline_header_shortens_the_default_deadline() {
    let layer = layer().default_deadline(Duration::from_secs(2));
    assert_eq!(seen(&layer, &[]).await.timeout_ms, Some(2_000));
    let seen = seen(&layer, &[("grpc-timeout", b"300m")]).await;
    assert_eq!(seen.timeout_ms, Some(300));
}

#[tokio::test(start_paused = true)]
async fn a_deadline_header_cannot_lengthen_the_deadline_beyond_the_maximum() {
    let layer = layer()
        .default_deadline(Duration::from_millis(500))
        .max_deadline(Duration::from_secs(1));
    for value in [&b"30S"[..], b"2H", b"99999999H"] {
        let seen = seen(&layer, &[("grpc-timeout", value)]).await;
        assert_eq!(seen.timeout_ms, Some(1_000), "{value:?}");
    }
    let seen = seen(&layer, &[("connect-timeout-ms", b"9999999999")]).await;
    assert_eq!(seen.timeout_ms, Some(1_000));
}

#[tokio::test(start_paused = true)]
async fn a_default_deadline_longer_than_the_maximum_is_clamped_too() {
    let layer = layer()
        .default_deadline(Duration::from_secs(120))
        .max_deadline(Duration::from_secs(10));
    assert_eq!(seen(&layer, &[]).await.timeout_ms, Some(10_000));
}

#[tokio::test(start_paused = true)]
async fn a_retry_is_ranked_below_every_original() {
    let layer = layer().class(Class::Critical);
    let seen = seen(&layer, &[("shed-attempt", b"2")]).await;
    assert_eq!(seen.class, Class::Critical);
    assert_eq!(seen.attempt, 2);
    assert!(
        shed_core::Rank::of(seen.class, seen.attempt)
            < shed_core::Rank::original(Class::Background)
    );
}
