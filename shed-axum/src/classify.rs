//! Reading a request's class, attempt, deadline and cohort key from its head.
//!
//! The defaults follow the wire conventions of gRPC, Envoy, Connect, the AWS
//! SDKs and the Stainless SDKs, plus shed's own client:
//!
//! | what | headers (all optional) | rule |
//! |---|---|---|
//! | deadline | `grpc-timeout`, `connect-timeout-ms`, `x-envoy-expected-rq-timeout-ms` | the shortest valid one, clamped to the layer's maximum |
//! | attempt | `shed-attempt: N`, `grpc-previous-rpc-attempts: N` (= attempt N+1), `x-envoy-attempt-count: N`, `amz-sdk-request: attempt=N`, `x-stainless-retry-count: N` (= attempt N+1) | the highest valid one |
//! | class | the layer's class, a classifier closure, an opt-in caller header | a caller may only lower its class unless trusted |
//!
//! Malformed, repeated, or overflowing values are ignored as if absent.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::{Extensions, HeaderMap, HeaderName, Method, Uri};
use shed_core::Class;

use crate::parse;

const GRPC_TIMEOUT: HeaderName = HeaderName::from_static("grpc-timeout");
const CONNECT_TIMEOUT_MS: HeaderName = HeaderName::from_static("connect-timeout-ms");
const ENVOY_TIMEOUT_MS: HeaderName = HeaderName::from_static("x-envoy-expected-rq-timeout-ms");
const SHED_ATTEMPT: HeaderName = HeaderName::from_static(shed_core::wire::ATTEMPT_HEADER);
const GRPC_PREVIOUS_ATTEMPTS: HeaderName = HeaderName::from_static("grpc-previous-rpc-attempts");
const ENVOY_ATTEMPT_COUNT: HeaderName = HeaderName::from_static("x-envoy-attempt-count");
const AMZ_SDK_REQUEST: HeaderName = HeaderName::from_static("amz-sdk-request");
const STAINLESS_RETRY_COUNT: HeaderName = HeaderName::from_static("x-stainless-retry-count");

/// A borrowed view of a request's head, given to classifier closures.
///
/// ```
/// use shed_axum::RequestHead;
/// let request = http::Request::get("/batch/export").body(()).unwrap();
/// let head = RequestHead::of(&request);
/// assert_eq!(head.uri.path(), "/batch/export");
/// ```
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct RequestHead<'a> {
    /// The request method.
    pub method: &'a Method,
    /// The request URI.
    pub uri: &'a Uri,
    /// The request headers.
    pub headers: &'a HeaderMap,
    /// The request extensions (for example axum's `ConnectInfo`).
    pub extensions: &'a Extensions,
}

impl<'a> RequestHead<'a> {
    /// The head of `request`.
    pub fn of<B>(request: &'a http::Request<B>) -> RequestHead<'a> {
        RequestHead {
            method: request.method(),
            uri: request.uri(),
            headers: request.headers(),
            extensions: request.extensions(),
        }
    }
}

/// A closure choosing a class from the request head (`None`: keep the layer's).
pub type ClassFn = Arc<dyn Fn(&RequestHead<'_>) -> Option<Class> + Send + Sync>;
/// A closure choosing a cohort key (user, tenant, API key, peer) from the request head.
pub type CohortKeyFn = Arc<dyn Fn(&RequestHead<'_>) -> Option<u64> + Send + Sync>;

/// How a layer classifies requests; built through [`ShedLayer`](crate::ShedLayer).
#[derive(Clone)]
pub(crate) struct Classifier {
    pub(crate) class: Class,
    pub(crate) class_fn: Option<ClassFn>,
    pub(crate) caller_class_header: Option<HeaderName>,
    pub(crate) trust_caller: bool,
    pub(crate) cohort_key_fn: Option<CohortKeyFn>,
    pub(crate) default_deadline: Option<Duration>,
    pub(crate) max_deadline: Duration,
}

impl Default for Classifier {
    fn default() -> Self {
        Classifier {
            class: Class::Interactive,
            class_fn: None,
            caller_class_header: None,
            trust_caller: false,
            cohort_key_fn: None,
            default_deadline: None,
            max_deadline: Duration::from_secs(60),
        }
    }
}

impl fmt::Debug for Classifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Classifier")
            .field("class", &self.class)
            .field("class_fn", &self.class_fn.is_some())
            .field("caller_class_header", &self.caller_class_header)
            .field("trust_caller", &self.trust_caller)
            .field("cohort_key_fn", &self.cohort_key_fn.is_some())
            .field("default_deadline", &self.default_deadline)
            .field("max_deadline", &self.max_deadline)
            .finish()
    }
}

/// What the head of a request says about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Classification {
    /// The class it is judged at.
    pub class: Class,
    /// Its attempt number, 1 for an original.
    pub attempt: u32,
    /// How long its caller will wait, from now; `None` for no deadline.
    pub timeout: Option<Duration>,
    /// Its cohort key, if the layer has a key closure.
    pub cohort_key: Option<u64>,
}

impl Classification {
    /// The rank the request is judged at.
    pub fn rank(&self) -> shed_core::Rank {
        shed_core::Rank::of(self.class, self.attempt)
    }
}

impl Classifier {
    pub(crate) fn classify(&self, head: &RequestHead<'_>) -> Classification {
        Classification {
            class: self.class(head),
            attempt: attempt(head.headers),
            timeout: self.timeout(head.headers),
            cohort_key: self.cohort_key_fn.as_ref().and_then(|key| key(head)),
        }
    }

    fn class(&self, head: &RequestHead<'_>) -> Class {
        let assigned = self
            .class_fn
            .as_ref()
            .and_then(|choose| choose(head))
            .unwrap_or(self.class);
        let claimed = self
            .caller_class_header
            .as_ref()
            .and_then(|name| parse::single(head.headers, name))
            .and_then(|value| value.to_str().ok())
            .and_then(|name| Class::from_name(name.trim()));
        match claimed {
            Some(claimed) if self.trust_caller => claimed,
            Some(claimed) => claimed.min(assigned),
            None => assigned,
        }
    }

    fn timeout(&self, headers: &HeaderMap) -> Option<Duration> {
        deadline(headers)
            .or(self.default_deadline)
            .map(|timeout| timeout.min(self.max_deadline))
    }
}

/// The shortest valid deadline among the deadline headers.
pub(crate) fn deadline(headers: &HeaderMap) -> Option<Duration> {
    let read = |name: &HeaderName| parse::single(headers, name).map(|value| value.as_bytes());
    let grpc = read(&GRPC_TIMEOUT).and_then(parse::grpc_timeout);
    let connect = read(&CONNECT_TIMEOUT_MS).and_then(parse::millis);
    let envoy = read(&ENVOY_TIMEOUT_MS).and_then(parse::millis);
    [grpc, connect, envoy].into_iter().flatten().min()
}

/// The highest attempt number any retry marker claims; 1 when none does.
pub(crate) fn attempt(headers: &HeaderMap) -> u32 {
    let read = |name: &HeaderName| parse::single(headers, name).map(|value| value.as_bytes());
    let retries_after = |count: u32| count.saturating_add(1);
    [
        read(&SHED_ATTEMPT).and_then(parse::count),
        read(&GRPC_PREVIOUS_ATTEMPTS)
            .and_then(parse::count)
            .map(retries_after),
        read(&ENVOY_ATTEMPT_COUNT).and_then(parse::count),
        read(&AMZ_SDK_REQUEST).and_then(parse::amz_sdk_attempt),
        read(&STAINLESS_RETRY_COUNT)
            .and_then(parse::count)
            .map(retries_after),
    ]
    .into_iter()
    .flatten()
    .max()
    .unwrap_or(1)
    .max(1)
}
