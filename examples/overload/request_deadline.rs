//! The deadline a request carries to the server, and when it arrived.
//!
//! The server's own accounting (late jobs, wasted work) needs the caller's
//! deadline, read the way shed reads it: the minimum of the valid
//! `grpc-timeout` and `x-envoy-expected-rq-timeout-ms` values, counted from
//! the request's arrival, malformed values ignored.

use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use shed::wire::{self, ENVOY_EXPECTED_RQ_TIMEOUT_MS_HEADER, GRPC_TIMEOUT_HEADER};

/// When a request reached the server, stamped before any policy layer runs,
/// so its deadline counts from its arrival whatever the policy made it wait.
#[derive(Clone, Copy, Debug)]
pub struct Arrived(pub Instant);

/// Middleware (for `axum::middleware::map_request`) stamping [`Arrived`].
pub async fn stamp_arrival(mut request: axum::extract::Request) -> axum::extract::Request {
    request.extensions_mut().insert(Arrived(Instant::now()));
    request
}

/// The request's deadline: its arrival plus its budget, if it sent one.
pub fn deadline(arrived: Instant, headers: &HeaderMap) -> Option<Instant> {
    request_budget(headers).and_then(|budget| arrived.checked_add(budget))
}

/// The budget a request carries: the minimum of the valid `grpc-timeout`
/// and `x-envoy-expected-rq-timeout-ms` values, read with shed's own wire
/// parsers; malformed values are ignored.
pub fn request_budget(headers: &HeaderMap) -> Option<Duration> {
    let read = |name: &str, parse: fn(&[u8]) -> Option<Duration>| {
        headers.get(name).and_then(|value| parse(value.as_bytes()))
    };
    let grpc = read(GRPC_TIMEOUT_HEADER, wire::grpc_timeout);
    let envoy = read(ENVOY_EXPECTED_RQ_TIMEOUT_MS_HEADER, wire::timeout_ms);
    grpc.into_iter().chain(envoy).min()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_is_the_minimum_of_valid_headers() {
        let mut headers = HeaderMap::new();
        headers.insert(GRPC_TIMEOUT_HEADER, "300m".parse().unwrap());
        headers.insert(ENVOY_EXPECTED_RQ_TIMEOUT_MS_HEADER, "120".parse().unwrap());
        assert_eq!(request_budget(&headers), Some(Duration::from_millis(120)));
        headers.insert(
            ENVOY_EXPECTED_RQ_TIMEOUT_MS_HEADER,
            "bogus".parse().unwrap(),
        );
        assert_eq!(request_budget(&headers), Some(Duration::from_millis(300)));
    }
}
