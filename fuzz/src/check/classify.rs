//! Classification as a whole, through a real [`ShedLayer`]: fuzzed header
//! names (from the wire set, repeats included) and values, and a fuzzed
//! layer configuration.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Request, Response};
use http_body_util::Empty;
use shed_axum::{Admitted, ShedLayer};
use shed_core::wire::{
    self, AMZ_SDK_REQUEST_HEADER, ATTEMPT_HEADER, CONNECT_TIMEOUT_MS_HEADER,
    ENVOY_ATTEMPT_COUNT_HEADER, ENVOY_EXPECTED_RQ_TIMEOUT_MS_HEADER,
    GRPC_PREVIOUS_RPC_ATTEMPTS_HEADER, GRPC_TIMEOUT_HEADER, STAINLESS_RETRY_COUNT_HEADER,
};
use shed_core::{Class, Clock, ManualClock, Shedder};
use tower::{Layer, ServiceExt};

use super::input::Input;

/// The caller-class header the fuzzed layer reads.
const CLASS_HEADER: &str = "x-shed-class";

/// The names a fuzzed header may have: the wire set, the class header,
/// `content-type` (gRPC callers are answered differently), one name in
/// capitals (the same header) and one shed ignores.
const NAMES: [&str; 13] = [
    GRPC_TIMEOUT_HEADER,
    CONNECT_TIMEOUT_MS_HEADER,
    ENVOY_EXPECTED_RQ_TIMEOUT_MS_HEADER,
    ATTEMPT_HEADER,
    GRPC_PREVIOUS_RPC_ATTEMPTS_HEADER,
    ENVOY_ATTEMPT_COUNT_HEADER,
    AMZ_SDK_REQUEST_HEADER,
    STAINLESS_RETRY_COUNT_HEADER,
    CLASS_HEADER,
    "content-type",
    "Grpc-Timeout",
    "SHED-ATTEMPT",
    "x-unrelated",
];

/// How the fuzzed layer is configured.
#[derive(Debug)]
struct Setup {
    class: Class,
    trust_caller: bool,
    default_deadline: Option<Duration>,
    max_deadline: Duration,
}

impl Setup {
    fn read(input: &mut Input<'_>) -> Setup {
        let flags = input.u8();
        let default_deadline = Duration::from_nanos(input.magnitude());
        let max_deadline = match flags & 16 {
            0 => Duration::from_nanos(input.magnitude()),
            _ => Duration::MAX,
        };
        Setup {
            class: Class::ALL[usize::from(flags & 3)],
            trust_caller: flags & 4 != 0,
            default_deadline: (flags & 8 != 0).then_some(default_deadline),
            max_deadline,
        }
    }

    fn layer(&self, shedder: Shedder) -> ShedLayer {
        let layer = ShedLayer::new(shedder)
            .class(self.class)
            .caller_class_header(HeaderName::from_static(CLASS_HEADER))
            .trust_caller(self.trust_caller)
            .max_deadline(self.max_deadline);
        match self.default_deadline {
            Some(deadline) => layer.default_deadline(deadline),
            None => layer,
        }
    }
}

/// The one value of `name`, if it appears exactly once.
fn single<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a [u8]> {
    let mut values = headers.get_all(name).iter();
    let first = values.next()?;
    values.next().is_none().then(|| first.as_bytes())
}

/// The valid deadline headers, each read alone.
fn deadlines(headers: &HeaderMap) -> Vec<Duration> {
    [
        single(headers, GRPC_TIMEOUT_HEADER).and_then(wire::grpc_timeout),
        single(headers, CONNECT_TIMEOUT_MS_HEADER).and_then(wire::timeout_ms),
        single(headers, ENVOY_EXPECTED_RQ_TIMEOUT_MS_HEADER).and_then(wire::timeout_ms),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The attempt numbers the valid retry markers claim, each read alone.
fn attempts(headers: &HeaderMap) -> Vec<u32> {
    let retries_before = |count: u32| count.saturating_add(1);
    [
        single(headers, ATTEMPT_HEADER).and_then(wire::count),
        single(headers, GRPC_PREVIOUS_RPC_ATTEMPTS_HEADER)
            .and_then(wire::count)
            .map(retries_before),
        single(headers, ENVOY_ATTEMPT_COUNT_HEADER).and_then(wire::count),
        single(headers, AMZ_SDK_REQUEST_HEADER).and_then(wire::amz_sdk_attempt),
        single(headers, STAINLESS_RETRY_COUNT_HEADER)
            .and_then(wire::count)
            .map(retries_before),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The class the caller claims, if its one class header names one.
fn claimed_class(headers: &HeaderMap) -> Option<Class> {
    let value = single(headers, CLASS_HEADER)?;
    let name = std::str::from_utf8(value).ok()?;
    Class::from_name(name.trim_matches([' ', '\t']))
}

/// The deadline as the engine holds it: whole nanoseconds, at most
/// `u64::MAX` of them.
fn as_engine_holds(timeout: Duration) -> Duration {
    Duration::from_nanos(u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX))
}

thread_local! {
    /// One runtime for every input: the layer's futures need tokio's timer.
    static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime");
}

/// A request through a fuzzed [`ShedLayer`] over an idle engine whose
/// clock stands still, so the deadline it admits with is exactly the
/// timeout classification chose.
///
/// - A caller can only shorten its deadline: the admitted deadline is never
///   longer than the layer's maximum, nor than any single valid deadline
///   header; with no valid header it is the layer's default (cut to the
///   maximum), or none.
/// - The deadline is the shortest valid header (or that default), cut to
///   the maximum; malformed and repeated headers count as absent.
/// - Only a zero deadline is refused (at the door, `504` or gRPC
///   `DEADLINE_EXCEEDED`); every other request is served.
/// - An untrusted caller can only lower its class; a trusted one gets the
///   class it names.
/// - The attempt is the highest valid retry marker, at least 1.
pub fn classify(data: &[u8]) {
    let mut input = Input::new(data);
    let setup = Setup::read(&mut input);
    let mut request = Request::get("/").body(()).expect("a plain GET");
    while !input.is_empty() {
        let name = NAMES[usize::from(input.u8()) % NAMES.len()];
        let value = input.chunk();
        // Only what HTTP can carry reaches a layer.
        if let Ok(value) = HeaderValue::from_bytes(value) {
            let name = HeaderName::from_bytes(name.as_bytes()).expect("a wire name");
            request.headers_mut().append(name, value);
        }
    }
    let headers = request.headers().clone();

    let deadlines = deadlines(&headers);
    let expected_timeout = deadlines
        .iter()
        .copied()
        .min()
        .or(setup.default_deadline)
        .map(|timeout| timeout.min(setup.max_deadline));
    let attempts = attempts(&headers);
    let expected_attempt = attempts.iter().copied().max().unwrap_or(1).max(1);
    let expected_class = match claimed_class(&headers) {
        Some(claimed) if setup.trust_caller => claimed,
        Some(claimed) => claimed.min(setup.class),
        None => setup.class,
    };

    let clock = ManualClock::new();
    let shedder = Shedder::builder()
        .limit(4)
        .min_useful_window(Duration::ZERO)
        .clock(clock.clone())
        .build()
        .expect("a valid engine");
    let service =
        setup
            .layer(shedder)
            .layer(tower::service_fn(|request: Request<()>| async move {
                let mut response = Response::new(Empty::<Bytes>::new());
                if let Some(admitted) = request.extensions().get::<Admitted>() {
                    response.extensions_mut().insert(*admitted);
                }
                Ok::<_, Infallible>(response)
            }));
    let response = RUNTIME
        .with(|runtime| runtime.block_on(service.oneshot(request)))
        .unwrap_or_else(|never| match never {});

    let Some(admitted) = response.extensions().get::<Admitted>().copied() else {
        assert_eq!(
            expected_timeout,
            Some(Duration::ZERO),
            "refused without a zero deadline: {setup:?} {headers:?} -> {}",
            response.status()
        );
        let grpc_deadline = response.status() == 200
            && response
                .headers()
                .get("grpc-status")
                .is_some_and(|s| s == "4");
        assert!(
            response.status() == 504 || grpc_deadline,
            "{:?}",
            response.headers()
        );
        return;
    };
    let timeout = admitted
        .deadline
        .map(|at| at.saturating_duration_since(clock.now()));
    let context = format!("{setup:?} {headers:?} -> {admitted:?}, timeout {timeout:?}");

    // The caller can only shorten its deadline.
    if let Some(timeout) = timeout {
        assert!(
            timeout <= setup.max_deadline,
            "longer than the maximum: {context}"
        );
        for header in &deadlines {
            assert!(timeout <= *header, "longer than a header: {context}");
        }
    }
    if deadlines.is_empty() {
        let default = setup
            .default_deadline
            .map(|timeout| as_engine_holds(timeout.min(setup.max_deadline)));
        assert_eq!(timeout, default, "not the default: {context}");
    }
    assert_eq!(
        timeout,
        expected_timeout.map(as_engine_holds),
        "deadline: {context}"
    );
    assert_ne!(expected_timeout, Some(Duration::ZERO), "served: {context}");

    // The caller can only lower its class, unless trusted.
    if !setup.trust_caller {
        assert!(admitted.class <= setup.class, "class raised: {context}");
    }
    assert_eq!(admitted.class, expected_class, "class: {context}");

    assert!(admitted.attempt >= 1, "{context}");
    assert_eq!(admitted.attempt, expected_attempt, "attempt: {context}");
}
