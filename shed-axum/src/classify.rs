//! Reading a request's class, attempt, deadline and cohort key from its head.
//!
//! The defaults follow the wire conventions of gRPC, Envoy, Connect, the AWS
//! SDKs and the Stainless SDKs, plus shed's own client:
//!
//! | what | headers (all optional) | rule |
//! |---|---|---|
//! | deadline | `grpc-timeout`, `connect-timeout-ms`, `x-envoy-expected-rq-timeout-ms` | the shortest valid one, clamped to the layer's maximum |
//! | attempt | `shed-attempt: N`, `grpc-previous-rpc-attempts: N` (= attempt N+1), `x-envoy-attempt-count: N`, `amz-sdk-request: attempt=N`, `x-stainless-retry-count: N` (= attempt N+1) | the highest valid one |
//! | class | the layer's class, its classifier, an opt-in caller header | a caller may only lower its class unless trusted |
//! | protocol | `content-type: application/grpc*` (the first one) | gRPC callers are answered in gRPC's terms |
//!
//! Malformed, repeated, or overflowing values are ignored as if absent.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderName, HeaderValue};
use shed_core::wire::{
    self, AMZ_SDK_REQUEST_HEADER, ATTEMPT_HEADER, CONNECT_TIMEOUT_MS_HEADER,
    ENVOY_ATTEMPT_COUNT_HEADER, ENVOY_EXPECTED_RQ_TIMEOUT_MS_HEADER,
    GRPC_PREVIOUS_RPC_ATTEMPTS_HEADER, GRPC_TIMEOUT_HEADER, STAINLESS_RETRY_COUNT_HEADER,
};
use shed_core::{Arrival, Class, Rank};

use crate::hook::{ClassifyRequest, MakeCohortKey, RequestHead};

/// How a layer classifies requests; built through [`ShedLayer`](crate::ShedLayer).
#[derive(Clone)]
pub(crate) struct ClassifyRules {
    pub(crate) class: Class,
    pub(crate) class_hook: Option<Arc<dyn ClassifyRequest>>,
    pub(crate) caller_class_header: Option<HeaderName>,
    pub(crate) trust_caller: bool,
    pub(crate) cohort_key_hook: Option<Arc<dyn MakeCohortKey>>,
    pub(crate) default_deadline: Option<Duration>,
    pub(crate) max_deadline: Duration,
}

impl Default for ClassifyRules {
    fn default() -> Self {
        ClassifyRules {
            class: Class::Interactive,
            class_hook: None,
            caller_class_header: None,
            trust_caller: false,
            cohort_key_hook: None,
            default_deadline: None,
            max_deadline: Duration::from_secs(60),
        }
    }
}

impl fmt::Debug for ClassifyRules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClassifyRules")
            .field("class", &self.class)
            .field("class_hook", &self.class_hook.is_some())
            .field("caller_class_header", &self.caller_class_header)
            .field("trust_caller", &self.trust_caller)
            .field("cohort_key_hook", &self.cohort_key_hook.is_some())
            .field("default_deadline", &self.default_deadline)
            .field("max_deadline", &self.max_deadline)
            .finish()
    }
}

impl ClassifyRules {
    /// What the head of a request says about it.
    pub(crate) fn classify(&self, head: &RequestHead<'_>) -> Classification {
        let found = WireHeaders::scan(head.headers, self.caller_class_header.as_ref());
        Classification {
            class: self.class(head, &found),
            attempt: found.attempt(),
            timeout: found
                .deadline()
                .or(self.default_deadline)
                .map(|timeout| timeout.min(self.max_deadline)),
            cohort_key: self
                .cohort_key_hook
                .as_ref()
                .and_then(|hook| hook.make_cohort_key(head)),
            grpc: found.content_type.is_some_and(is_grpc_type),
        }
    }

    fn class(&self, head: &RequestHead<'_>, found: &WireHeaders<'_>) -> Class {
        let assigned = self
            .class_hook
            .as_ref()
            .and_then(|hook| hook.classify(head))
            .unwrap_or(self.class);
        let claimed = found
            .caller_class
            .get()
            .and_then(|value| value.to_str().ok())
            .and_then(|name| Class::from_name(name.trim()));
        match claimed {
            Some(claimed) if self.trust_caller => claimed,
            Some(claimed) => claimed.min(assigned),
            None => assigned,
        }
    }
}

/// Whether a request's `content-type` says its caller speaks gRPC.
pub(crate) fn is_grpc_request(headers: &HeaderMap) -> bool {
    headers.get(CONTENT_TYPE).is_some_and(is_grpc_type)
}

/// Whether a request's (first) `content-type` says its caller speaks gRPC
/// (`application/grpc`, `+proto`, `+json`...).
pub(crate) fn is_grpc_type(value: &HeaderValue) -> bool {
    value.as_bytes().starts_with(b"application/grpc")
}

/// What the head of a request says about it: everything the door, the
/// handler's [`Admitted`](crate::Admitted) and the answers to a refusal need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Classification {
    class: Class,
    /// 1 for an original.
    attempt: u32,
    /// How long its caller will wait, from now; `None` for no deadline.
    timeout: Option<Duration>,
    cohort_key: Option<u64>,
    /// Whether the caller speaks gRPC, and so is answered in gRPC's terms.
    grpc: bool,
}

impl Classification {
    /// The request as the engine judges it. The timeout stays relative: the
    /// engine turns it into a deadline with the clock read it makes anyway.
    pub(crate) fn arrival(&self) -> Arrival {
        let mut arrival = Arrival::new(self.class).with_attempt(self.attempt);
        if let Some(timeout) = self.timeout {
            arrival = arrival.with_timeout(timeout);
        }
        if let Some(key) = self.cohort_key {
            arrival = arrival.with_cohort_key(key);
        }
        arrival
    }

    pub(crate) fn class(&self) -> Class {
        self.class
    }

    pub(crate) fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The rank the request is judged at.
    pub(crate) fn rank(&self) -> Rank {
        Rank::of(self.class, self.attempt)
    }

    pub(crate) fn is_grpc(&self) -> bool {
        self.grpc
    }
}

/// The value of one header that must appear at most once: a repeated header
/// is ambiguous, so it counts as absent.
#[derive(Clone, Copy, Debug, Default)]
enum Single<'a> {
    #[default]
    Absent,
    Once(&'a HeaderValue),
    Repeated,
}

impl<'a> Single<'a> {
    fn put(&mut self, value: &'a HeaderValue) {
        *self = match self {
            Single::Absent => Single::Once(value),
            _ => Single::Repeated,
        };
    }

    fn get(&self) -> Option<&'a HeaderValue> {
        match self {
            Single::Once(value) => Some(value),
            _ => None,
        }
    }

    fn bytes(&self) -> Option<&'a [u8]> {
        self.get().map(HeaderValue::as_bytes)
    }
}

/// The headers shed reads, found in one pass over the request head: one
/// walk costs less than eight hash lookups for a head of ordinary size.
#[derive(Debug, Default)]
struct WireHeaders<'a> {
    grpc_timeout: Single<'a>,
    connect_timeout_ms: Single<'a>,
    envoy_timeout_ms: Single<'a>,
    shed_attempt: Single<'a>,
    grpc_previous_attempts: Single<'a>,
    envoy_attempt_count: Single<'a>,
    amz_sdk_request: Single<'a>,
    stainless_retry_count: Single<'a>,
    caller_class: Single<'a>,
    /// The first `content-type`, as `HeaderMap::get` returns it: found in
    /// this walk rather than by another lookup.
    content_type: Option<&'a HeaderValue>,
}

impl<'a> WireHeaders<'a> {
    fn scan(headers: &'a HeaderMap, caller_class: Option<&HeaderName>) -> WireHeaders<'a> {
        let mut found = WireHeaders::default();
        for (name, value) in headers {
            if *name == CONTENT_TYPE && found.content_type.is_none() {
                found.content_type = Some(value);
            }
            let slot = match name.as_str() {
                GRPC_TIMEOUT_HEADER => &mut found.grpc_timeout,
                CONNECT_TIMEOUT_MS_HEADER => &mut found.connect_timeout_ms,
                ENVOY_EXPECTED_RQ_TIMEOUT_MS_HEADER => &mut found.envoy_timeout_ms,
                ATTEMPT_HEADER => &mut found.shed_attempt,
                GRPC_PREVIOUS_RPC_ATTEMPTS_HEADER => &mut found.grpc_previous_attempts,
                ENVOY_ATTEMPT_COUNT_HEADER => &mut found.envoy_attempt_count,
                AMZ_SDK_REQUEST_HEADER => &mut found.amz_sdk_request,
                STAINLESS_RETRY_COUNT_HEADER => &mut found.stainless_retry_count,
                _ if caller_class == Some(name) => &mut found.caller_class,
                _ => continue,
            };
            slot.put(value);
        }
        found
    }

    /// The shortest valid deadline among the deadline headers.
    fn deadline(&self) -> Option<Duration> {
        [
            self.grpc_timeout.bytes().and_then(wire::grpc_timeout),
            self.connect_timeout_ms.bytes().and_then(wire::timeout_ms),
            self.envoy_timeout_ms.bytes().and_then(wire::timeout_ms),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// The highest attempt number any retry marker claims; 1 when none does.
    fn attempt(&self) -> u32 {
        let retries_after = |count: u32| count.saturating_add(1);
        [
            self.shed_attempt.bytes().and_then(wire::count),
            self.grpc_previous_attempts
                .bytes()
                .and_then(wire::count)
                .map(retries_after),
            self.envoy_attempt_count.bytes().and_then(wire::count),
            self.amz_sdk_request.bytes().and_then(wire::amz_sdk_attempt),
            self.stainless_retry_count
                .bytes()
                .and_then(wire::count)
                .map(retries_after),
        ]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(1)
        .max(1)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use http::Request;
    use shed_core::{Arrival, Class};

    use super::*;

    fn classified(rules: &ClassifyRules, request: &Request<()>) -> Classification {
        rules.classify(&RequestHead::of(request))
    }

    #[test]
    fn the_arrival_carries_class_attempt_and_timeout() {
        let rules = ClassifyRules {
            class: Class::Batch,
            ..ClassifyRules::default()
        };
        let request = Request::get("/")
            .header("shed-attempt", "3")
            .header("grpc-timeout", "250m")
            .body(())
            .unwrap();
        assert_eq!(
            classified(&rules, &request).arrival(),
            Arrival::new(Class::Batch)
                .with_attempt(3)
                .with_timeout(Duration::from_millis(250))
        );
    }

    #[test]
    fn the_cohort_key_hook_places_the_arrival_by_its_key() {
        let rules = ClassifyRules {
            cohort_key_hook: Some(Arc::new(|head: &RequestHead<'_>| {
                head.headers.get("x-user")?.to_str().ok()?.parse().ok()
            })),
            ..ClassifyRules::default()
        };
        let alice = Request::get("/").header("x-user", "42").body(()).unwrap();
        let anonymous = Request::get("/").body(()).unwrap();

        assert_eq!(
            classified(&rules, &alice).arrival(),
            Arrival::new(Class::Interactive).with_cohort_key(42)
        );
        assert_eq!(
            classified(&rules, &anonymous).arrival(),
            Arrival::new(Class::Interactive)
        );
    }

    #[test]
    fn a_grpc_content_type_marks_the_call_as_grpc() {
        let rules = ClassifyRules::default();
        let grpc = Request::post("/pkg.Service/Method")
            .header("content-type", "application/grpc+proto")
            .body(())
            .unwrap();
        let json = Request::post("/")
            .header("content-type", "application/json")
            .body(())
            .unwrap();
        assert!(classified(&rules, &grpc).is_grpc());
        assert!(!classified(&rules, &json).is_grpc());
    }
}
