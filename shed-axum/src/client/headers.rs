//! Reading pushback from response headers and writing attempt markers into
//! request headers, with the names and formats of [`shed_core::wire`].

use std::time::{Duration, SystemTime};

use http::header::{HeaderMap, HeaderName, HeaderValue};
use shed_core::retry::Pushback;
use shed_core::wire::{self, ATTEMPT_HEADER};

use super::grpc;
use crate::forward;

const ATTEMPT: HeaderName = HeaderName::from_static(ATTEMPT_HEADER);

/// Every pushback hint in `headers`, with the wall time of receipt.
pub(super) fn pushback(headers: &HeaderMap, received_at: SystemTime) -> Pushback {
    Pushback::from_headers(
        |name| headers.get(name).map(HeaderValue::as_bytes),
        received_at,
    )
}

/// The deadline a request arrived with, in `grpc-timeout` (as tonic's
/// `Request::set_timeout` writes it, or as a proxy copied its caller's);
/// a malformed value is absent.
pub(super) fn caller_deadline(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(&forward::GRPC_TIMEOUT)?;
    wire::grpc_timeout(value.as_bytes())
}

/// The deadline a request's caller gave it, kept for the retry policy, which
/// begins the operation with it (the original's headers are marked before
/// the policy sees the request).
#[derive(Debug, Clone, Copy)]
pub(super) struct CallerDeadline(pub(super) Duration);

/// Marks a request as attempt `attempt` with `forwarded_deadline` left of
/// its deadline, written as `grpc-timeout` in the one wire format
/// ([`shed_core::wire::format_grpc_timeout`]: rounded down, so the server is
/// never promised more time than is left). Both replace whatever the request
/// carried. A gRPC call is also marked as gRPC clients mark it
/// (`grpc-previous-rpc-attempts: N - 1` on a retry, none on an original).
pub(super) fn mark(headers: &mut HeaderMap, attempt: u32, forwarded_deadline: Duration) {
    if grpc::is_call(headers) {
        grpc::mark_attempt(headers, attempt);
    }
    headers.insert(ATTEMPT, HeaderValue::from(attempt));
    headers.insert(
        forward::GRPC_TIMEOUT,
        forward::grpc_timeout(forwarded_deadline),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use shed_core::wire::GRPC_TIMEOUT_HEADER;

    #[test]
    fn marking_sets_the_attempt_and_the_deadline() {
        let mut headers = HeaderMap::new();
        mark(&mut headers, 2, Duration::from_millis(1_360));
        assert_eq!(headers[ATTEMPT_HEADER], "2");
        assert_eq!(headers[GRPC_TIMEOUT_HEADER], "1360000u");
    }

    #[test]
    fn marking_replaces_an_earlier_deadline() {
        let mut headers = HeaderMap::new();
        mark(&mut headers, 1, Duration::from_secs(2));
        mark(&mut headers, 2, Duration::from_millis(500));
        assert_eq!(headers.get_all(GRPC_TIMEOUT_HEADER).iter().count(), 1);
        assert_eq!(headers[GRPC_TIMEOUT_HEADER], "500000u");
    }

    #[test]
    fn marking_a_grpc_retry_counts_its_previous_attempts() {
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/grpc"));
        mark(&mut headers, 3, Duration::from_secs(1));
        assert_eq!(headers[ATTEMPT_HEADER], "3");
        assert_eq!(headers["grpc-previous-rpc-attempts"], "2");
    }

    #[test]
    fn marking_a_plain_http_retry_adds_no_grpc_marker() {
        let mut headers = HeaderMap::new();
        mark(&mut headers, 3, Duration::from_secs(1));
        assert!(!headers.contains_key("grpc-previous-rpc-attempts"));
    }

    #[test]
    fn marking_replaces_an_inbound_attempt_number() {
        let mut headers = HeaderMap::new();
        headers.insert(ATTEMPT, HeaderValue::from_static("3"));
        mark(&mut headers, 1, Duration::from_secs(1));
        assert_eq!(headers.get_all(ATTEMPT_HEADER).iter().count(), 1);
        assert_eq!(headers[ATTEMPT_HEADER], "1");
    }
}
