//! The deadline a request carries to the server, and when it arrived.
//!
//! The server's own accounting (late jobs, wasted work) needs the caller's
//! deadline, read the way shed reads it: the minimum of the valid
//! `grpc-timeout` and `x-envoy-expected-rq-timeout-ms` values, counted from
//! the request's arrival, malformed values ignored.

use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use shed::core::wire::GRPC_TIMEOUT_HEADER;

/// Envoy's deadline header, in milliseconds.
const ENVOY_TIMEOUT_HEADER: &str = "x-envoy-expected-rq-timeout-ms";

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
/// and `x-envoy-expected-rq-timeout-ms` values; malformed values are ignored.
pub fn request_budget(headers: &HeaderMap) -> Option<Duration> {
    let grpc = headers
        .get(GRPC_TIMEOUT_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_grpc_timeout);
    let envoy = headers
        .get(ENVOY_TIMEOUT_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| (1..=8).contains(&v.len()))
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_millis);
    grpc.into_iter().chain(envoy).min()
}

/// Parses the gRPC timeout grammar: 1 to 8 digits and a unit (H M S m u n).
fn parse_grpc_timeout(value: &str) -> Option<Duration> {
    if !value.is_ascii() {
        return None;
    }
    let (digits, unit) = value.split_at(value.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeout_grammar() {
        assert_eq!(parse_grpc_timeout("250m"), Some(Duration::from_millis(250)));
        assert_eq!(parse_grpc_timeout("2S"), Some(Duration::from_secs(2)));
        assert_eq!(parse_grpc_timeout("123456789m"), None);
        assert_eq!(parse_grpc_timeout("m"), None);
        assert_eq!(parse_grpc_timeout("10x"), None);
        assert_eq!(parse_grpc_timeout(""), None);
        assert_eq!(parse_grpc_timeout("-1m"), None);
        assert_eq!(parse_grpc_timeout("1é"), None);
    }

    #[test]
    fn budget_is_the_minimum_of_valid_headers() {
        let mut headers = HeaderMap::new();
        headers.insert(GRPC_TIMEOUT_HEADER, "300m".parse().unwrap());
        headers.insert(ENVOY_TIMEOUT_HEADER, "120".parse().unwrap());
        assert_eq!(request_budget(&headers), Some(Duration::from_millis(120)));
        headers.insert(ENVOY_TIMEOUT_HEADER, "bogus".parse().unwrap());
        assert_eq!(request_budget(&headers), Some(Duration::from_millis(300)));
    }
}
