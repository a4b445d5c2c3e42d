//! Forwarding a deadline to the next hop: the `http` header value of
//! [`shed_core::wire::format_grpc_timeout`], written the same way by the
//! server half ([`Deadline`](crate::Deadline)) and the client half
//! ([`ShedRetryLayer`](crate::client::ShedRetryLayer)).

use std::time::Duration;

use http::{HeaderName, HeaderValue};
use shed_core::wire::{format_grpc_timeout, GRPC_TIMEOUT_HEADER};

/// The `grpc-timeout` header name.
pub(crate) const GRPC_TIMEOUT: HeaderName = HeaderName::from_static(GRPC_TIMEOUT_HEADER);

/// `remaining` as a `grpc-timeout` value: the finest unit that fits in
/// eight digits, rounded down (`1450000u` for 1.45 s).
pub(crate) fn grpc_timeout(remaining: Duration) -> HeaderValue {
    let text = format_grpc_timeout(remaining);
    HeaderValue::from_str(text.as_str())
        .expect("ASCII digits and a unit letter are always a valid header value")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forwarded_value_is_the_wire_format() {
        assert_eq!(grpc_timeout(Duration::from_millis(1_450)), "1450000u");
        assert_eq!(grpc_timeout(Duration::ZERO), "0n");
        assert_eq!(grpc_timeout(Duration::MAX), "99999999H");
    }
}
