//! gRPC on the client side: which requests are gRPC calls, how an attempt
//! ended in gRPC's terms, and the retry marker gRPC clients send.

use http::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE};
use http::{Response, StatusCode};
use shed_core::retry::AttemptOutcome;
use shed_core::wire::{self, GRPC_PREVIOUS_RPC_ATTEMPTS_HEADER};

use crate::classify::is_grpc_type;

const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");
const PREVIOUS_ATTEMPTS: HeaderName = HeaderName::from_static(GRPC_PREVIOUS_RPC_ATTEMPTS_HEADER);

/// `UNKNOWN`: what gRPC clients read an unparsable `grpc-status` as.
const UNKNOWN: u32 = 2;

/// Whether a request is a gRPC call: its `content-type` is
/// `application/grpc` or one of its `+proto`, `+json`... forms.
pub(super) fn is_call(headers: &HeaderMap) -> bool {
    headers.get(CONTENT_TYPE).is_some_and(is_grpc_type)
}

/// How a gRPC call's attempt ended, from the response head.
///
/// A `200` carrying `grpc-status` is a trailers-only answer: the call ended
/// with that status before any message, as a refusal does. A `200` without
/// it has begun answering: under gRFC A6 the call is committed (its status
/// follows in the trailers, after the messages) and is not retried, so it
/// counts as the success of its HTTP status. Any other HTTP status is read
/// as such (a proxy's 503, say).
pub(super) fn outcome<B>(response: &Response<B>) -> AttemptOutcome {
    let status = response.status();
    match response.headers().get(GRPC_STATUS) {
        Some(code) if status == StatusCode::OK => {
            AttemptOutcome::GrpcStatus(wire::count(code.as_bytes()).unwrap_or(UNKNOWN))
        }
        _ => AttemptOutcome::Status(status.as_u16()),
    }
}

/// Marks a gRPC call's attempt as gRPC clients do: a retry carries
/// `grpc-previous-rpc-attempts: N - 1`; an original carries none (any it
/// arrived with is removed).
pub(super) fn mark_attempt(headers: &mut HeaderMap, attempt: u32) {
    if attempt > 1 {
        headers.insert(PREVIOUS_ATTEMPTS, HeaderValue::from(attempt - 1));
    } else {
        headers.remove(PREVIOUS_ATTEMPTS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(status: u16, grpc_status: Option<&str>) -> Response<()> {
        let mut builder = Response::builder().status(status);
        if let Some(code) = grpc_status {
            builder = builder.header("grpc-status", HeaderValue::from_str(code).unwrap());
        }
        builder.body(()).unwrap()
    }

    #[test]
    fn grpc_content_types_are_calls() {
        for content_type in [
            "application/grpc",
            "application/grpc+proto",
            "application/grpc+json",
        ] {
            let mut headers = HeaderMap::new();
            headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
            assert!(is_call(&headers), "{content_type}");
        }
        let mut headers = HeaderMap::new();
        assert!(!is_call(&headers));
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        assert!(!is_call(&headers));
    }

    #[test]
    fn a_trailers_only_answer_ends_with_its_grpc_status() {
        let outcome = outcome(&response(200, Some("8")));
        assert_eq!(outcome, AttemptOutcome::GrpcStatus(8));
    }

    #[test]
    fn an_unparsable_grpc_status_is_unknown() {
        for code in ["", "eight", "-8", " 8"] {
            let outcome = outcome(&response(200, Some(code)));
            assert_eq!(outcome, AttemptOutcome::GrpcStatus(UNKNOWN), "{code:?}");
        }
    }

    #[test]
    fn an_answer_without_grpc_status_is_committed() {
        let outcome = outcome(&response(200, None));
        assert!(outcome.is_success(), "{outcome:?}");
    }

    #[test]
    fn a_non_200_answer_is_read_as_its_http_status() {
        assert_eq!(
            outcome(&response(503, Some("14"))),
            AttemptOutcome::Status(503)
        );
    }

    #[test]
    fn a_retry_counts_the_attempts_before_it() {
        let mut headers = HeaderMap::new();
        mark_attempt(&mut headers, 3);
        assert_eq!(headers[GRPC_PREVIOUS_RPC_ATTEMPTS_HEADER], "2");
    }

    #[test]
    fn an_original_carries_no_previous_attempts() {
        let mut headers = HeaderMap::new();
        headers.insert(PREVIOUS_ATTEMPTS, HeaderValue::from_static("4"));
        mark_attempt(&mut headers, 1);
        assert!(!headers.contains_key(GRPC_PREVIOUS_RPC_ATTEMPTS_HEADER));
    }
}
