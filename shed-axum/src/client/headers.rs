//! Reading pushback from response headers and writing attempt markers into
//! request headers.

use std::time::{Duration, SystemTime};

use http::header::{HeaderMap, HeaderName, HeaderValue};
use shed_core::retry::Pushback;
use shed_core::wire::{ATTEMPT_HEADER, GRPC_TIMEOUT_HEADER};

/// Every pushback hint in `headers`, with the wall time of receipt.
pub(crate) fn pushback(headers: &HeaderMap, received_at: SystemTime) -> Pushback {
    Pushback::from_headers(
        |name| headers.get(name).map(HeaderValue::as_bytes),
        received_at,
    )
}

/// Marks a request as attempt `attempt` with `remaining` left of its deadline.
pub(crate) fn mark(headers: &mut HeaderMap, attempt: u32, remaining: Duration) {
    headers.insert(
        HeaderName::from_static(ATTEMPT_HEADER),
        HeaderValue::from(attempt),
    );
    if let Ok(timeout) = HeaderValue::try_from(grpc_timeout(remaining)) {
        headers.insert(HeaderName::from_static(GRPC_TIMEOUT_HEADER), timeout);
    }
}

/// `remaining` in the gRPC timeout grammar (at most 8 digits and a unit),
/// rounded down so the server is never promised more time than is left.
///
/// ```text
/// 1450 ms -> "1450m"; 10^8 ms -> "100000S"; beyond 8 digits of hours -> "99999999H"
/// ```
pub(crate) fn grpc_timeout(remaining: Duration) -> String {
    const MAX: u128 = 99_999_999;
    let millis = remaining.as_millis();
    if millis <= MAX {
        return format!("{millis}m");
    }
    let seconds = u128::from(remaining.as_secs());
    [(1, 'S'), (60, 'M'), (3_600, 'H')]
        .into_iter()
        .find_map(|(per, unit)| {
            let value = seconds / per;
            (value <= MAX).then(|| format!("{value}{unit}"))
        })
        .unwrap_or_else(|| format!("{MAX}H"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeout_uses_milliseconds_while_they_fit_in_eight_digits() {
        assert_eq!(grpc_timeout(Duration::from_millis(1_450)), "1450m");
        assert_eq!(grpc_timeout(Duration::from_micros(1_450_999)), "1450m");
        assert_eq!(grpc_timeout(Duration::ZERO), "0m");
        assert_eq!(grpc_timeout(Duration::from_millis(99_999_999)), "99999999m");
    }

    #[test]
    fn grpc_timeout_falls_back_to_coarser_units() {
        assert_eq!(grpc_timeout(Duration::from_millis(100_000_000)), "100000S");
        assert_eq!(grpc_timeout(Duration::from_secs(100_000_000)), "1666666M");
        assert_eq!(grpc_timeout(Duration::MAX), "99999999H");
    }

    #[test]
    fn marking_sets_the_attempt_and_the_deadline() {
        let mut headers = HeaderMap::new();
        mark(&mut headers, 2, Duration::from_millis(1_360));
        assert_eq!(headers[ATTEMPT_HEADER], "2");
        assert_eq!(headers[GRPC_TIMEOUT_HEADER], "1360m");
    }
}
