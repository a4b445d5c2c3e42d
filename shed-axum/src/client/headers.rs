//! Reading pushback from response headers and writing attempt markers into
//! request headers, with the names and formats of [`shed_core::wire`].

use std::time::{Duration, SystemTime};

use http::header::{HeaderMap, HeaderName, HeaderValue};
use shed_core::retry::Pushback;
use shed_core::wire::ATTEMPT_HEADER;

use crate::forward;

const ATTEMPT: HeaderName = HeaderName::from_static(ATTEMPT_HEADER);

/// Every pushback hint in `headers`, with the wall time of receipt.
pub(super) fn pushback(headers: &HeaderMap, received_at: SystemTime) -> Pushback {
    Pushback::from_headers(
        |name| headers.get(name).map(HeaderValue::as_bytes),
        received_at,
    )
}

/// Whether a request already carries an attempt number.
pub(super) fn is_marked(headers: &HeaderMap) -> bool {
    headers.contains_key(ATTEMPT)
}

/// Marks a request as attempt `attempt` with `forwarded_deadline` left of
/// its deadline, written as `grpc-timeout` in the one wire format
/// ([`shed_core::wire::format_grpc_timeout`]: rounded down, so the server is
/// never promised more time than is left).
pub(super) fn mark(headers: &mut HeaderMap, attempt: u32, forwarded_deadline: Duration) {
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
        assert!(is_marked(&headers));
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
    fn a_request_without_an_attempt_number_is_unmarked() {
        let mut headers = HeaderMap::new();
        headers.insert(GRPC_TIMEOUT_HEADER, HeaderValue::from_static("1S"));
        assert!(!is_marked(&headers));
    }
}
