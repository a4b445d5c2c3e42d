//! A client throttle's answer to a request it refuses locally: what the
//! server would have answered, marked as local.

use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderName, HeaderValue, Response, StatusCode};
use shed_core::wire::GRPC_RETRY_PUSHBACK_MS_HEADER;
use shed_core::Class;

use crate::body::ShedBody;

const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");
const GRPC_MESSAGE: HeaderName = HeaderName::from_static("grpc-message");
const GRPC_PUSHBACK: HeaderName = HeaderName::from_static(GRPC_RETRY_PUSHBACK_MS_HEADER);

/// Why a client throttle refused a request without sending it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LocalReason {
    /// The replica's load reports (`shed-load`) say it sheds the request's
    /// rank (DAGOR).
    Shed,
    /// The replica said nothing of its load and refused too many recent
    /// requests (SRE adaptive throttling).
    Throttled,
}

impl LocalReason {
    /// A stable `snake_case` label, as the problem body's `reason`.
    ///
    /// ```
    /// assert_eq!(shed_axum::client::LocalReason::Shed.as_str(), "shed_locally");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            LocalReason::Shed => "shed_locally",
            LocalReason::Throttled => "throttled_locally",
        }
    }

    fn description(self) -> &'static str {
        match self {
            LocalReason::Shed => {
                "refused before sending: the replica is shedding this kind of request"
            }
            LocalReason::Throttled => {
                "refused before sending: the replica refused most recent requests"
            }
        }
    }
}

impl fmt::Display for LocalReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The mark of an answer a client throttle made up instead of sending the
/// request: in the response's extensions.
///
/// [`ShedRetryLayer`](crate::client::ShedRetryLayer) stops at such an
/// answer without asking its retrier, so a local refusal spends no retry
/// budget.
///
/// ```
/// use shed_axum::client::{LocalReason, RefusedLocally};
/// # let response = http::Response::new(());
/// if let Some(refused) = response.extensions().get::<RefusedLocally>() {
///     println!("not sent ({}); try again in {:?}", refused.reason(), refused.retry_after());
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RefusedLocally {
    reason: LocalReason,
    retry_after: Duration,
}

impl RefusedLocally {
    /// Why the request was not sent.
    pub fn reason(&self) -> LocalReason {
        self.reason
    }

    /// How long the answer asks the caller to wait (`Retry-After`, or
    /// `grpc-retry-pushback-ms`).
    pub fn retry_after(&self) -> Duration {
        self.retry_after
    }
}

/// The answer to a request refused locally: for HTTP, `429` with
/// `Retry-After` in whole seconds and a problem body; for gRPC,
/// trailers-only `RESOURCE_EXHAUSTED` with `grpc-retry-pushback-ms`.
pub(super) fn refusal<B>(
    reason: LocalReason,
    retry_after: Duration,
    class: Class,
    attempt: u32,
    grpc: bool,
) -> Response<ShedBody<B>> {
    let mut response = if grpc {
        grpc_refusal(reason, retry_after)
    } else {
        http_refusal(reason, retry_after, class, attempt)
    };
    response.extensions_mut().insert(RefusedLocally {
        reason,
        retry_after,
    });
    response
}

fn http_refusal<B>(
    reason: LocalReason,
    retry_after: Duration,
    class: Class,
    attempt: u32,
) -> Response<ShedBody<B>> {
    let body = format!(
        r#"{{"type":"urn:shed:overloaded","title":"Too Many Requests","status":429,"detail":"{detail}","reason":"{reason}","class":"{class}","attempt":{attempt},"retry_after_ms":{millis}}}"#,
        detail = reason.description(),
        millis = retry_after.as_millis(),
    );
    let mut response = Response::new(ShedBody::full(Bytes::from(body)));
    *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    headers.insert(RETRY_AFTER, HeaderValue::from(retry_after.as_secs().max(1)));
    response
}

fn grpc_refusal<B>(reason: LocalReason, retry_after: Duration) -> Response<ShedBody<B>> {
    let mut response = Response::new(ShedBody::full(Bytes::new()));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    headers.insert(GRPC_STATUS, HeaderValue::from_static("8"));
    headers.insert(GRPC_MESSAGE, HeaderValue::from_static(reason.description()));
    headers.insert(
        GRPC_PUSHBACK,
        HeaderValue::from(u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX)),
    );
    response
}
