//! Strict, panic-free parsers for the header values shed reads.
//!
//! Every parser returns `None` for anything it does not fully understand:
//! empty values, stray characters, signs, too many digits, bad units,
//! non-ASCII, overflow. A malformed header is treated as absent, never as an
//! error answer, and never as a zero that would mean "retry now".

use std::time::Duration;

use http::header::HeaderValue;

/// A decimal number of at most `max_digits` ASCII digits, no sign, no spaces.
pub(crate) fn digits(value: &[u8], max_digits: usize) -> Option<u64> {
    if value.is_empty() || value.len() > max_digits || max_digits > 19 {
        return None;
    }
    value.iter().try_fold(0u64, |total, byte| {
        let digit = byte.is_ascii_digit().then(|| u64::from(byte - b'0'))?;
        total.checked_mul(10)?.checked_add(digit)
    })
}

/// A `grpc-timeout` value: 1 to 8 digits and one unit of `H M S m u n`.
///
/// ```text
/// grpc-timeout = 1*8DIGIT ("H" / "M" / "S" / "m" / "u" / "n")
/// ```
pub(crate) fn grpc_timeout(value: &[u8]) -> Option<Duration> {
    let (unit, amount) = value.split_last()?;
    let amount = digits(amount, 8)?;
    Some(match unit {
        b'H' => Duration::from_secs(amount * 3_600),
        b'M' => Duration::from_secs(amount * 60),
        b'S' => Duration::from_secs(amount),
        b'm' => Duration::from_millis(amount),
        b'u' => Duration::from_micros(amount),
        b'n' => Duration::from_nanos(amount),
        _ => return None,
    })
}

/// A timeout in whole milliseconds (`connect-timeout-ms`,
/// `x-envoy-expected-rq-timeout-ms`): at most 10 digits.
pub(crate) fn millis(value: &[u8]) -> Option<Duration> {
    digits(value, 10).map(Duration::from_millis)
}

/// A non-negative count (attempt numbers and retry counts): at most 9 digits,
/// so it always fits a `u32`.
pub(crate) fn count(value: &[u8]) -> Option<u32> {
    digits(value, 9).and_then(|n| u32::try_from(n).ok())
}

/// The attempt number of an `amz-sdk-request` value such as
/// `attempt=2; max=3` (pairs separated by `;`, spaces allowed around them).
pub(crate) fn amz_sdk_attempt(value: &[u8]) -> Option<u32> {
    let text = std::str::from_utf8(value).ok()?;
    let mut found = None;
    for pair in text.split(';') {
        let Some((key, number)) = pair.trim().split_once('=') else {
            continue;
        };
        if key.trim() == "attempt" {
            if found.is_some() {
                return None;
            }
            found = Some(count(number.trim().as_bytes())?);
        }
    }
    found
}

/// Writes `duration` as a `grpc-timeout` value: the finest unit that fits in 8 digits.
pub(crate) fn format_grpc_timeout(duration: Duration) -> HeaderValue {
    const LIMIT: u128 = 99_999_999;
    let nanos = duration.as_nanos();
    let (amount, unit) = [
        (1, 'n'),
        (1_000, 'u'),
        (1_000_000, 'm'),
        (1_000_000_000, 'S'),
        (60_000_000_000, 'M'),
        (3_600_000_000_000, 'H'),
    ]
    .into_iter()
    .map(|(per_unit, unit)| (nanos / per_unit, unit))
    .find(|(amount, _)| *amount <= LIMIT)
    .unwrap_or((LIMIT, 'H'));
    HeaderValue::try_from(format!("{amount}{unit}"))
        .expect("digits and a unit are a valid header value")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeout_accepts_each_unit() {
        let cases = [
            ("1H", Duration::from_secs(3_600)),
            ("2M", Duration::from_secs(120)),
            ("3S", Duration::from_secs(3)),
            ("250m", Duration::from_millis(250)),
            ("7u", Duration::from_micros(7)),
            ("99999999n", Duration::from_nanos(99_999_999)),
            ("0m", Duration::ZERO),
        ];
        for (text, expected) in cases {
            assert_eq!(grpc_timeout(text.as_bytes()), Some(expected), "{text}");
        }
    }

    #[test]
    fn grpc_timeout_refuses_malformed_values() {
        for text in [
            "",
            "m",
            "100",
            "100x",
            "100ms",
            "123456789m",
            "-5m",
            "+5m",
            " 5m",
            "5 m",
            "5M5",
            "１m",
            "99999999999999999999999S",
        ] {
            assert_eq!(grpc_timeout(text.as_bytes()), None, "{text:?}");
        }
    }

    #[test]
    fn millis_refuses_signs_spaces_and_overlong_values() {
        assert_eq!(millis(b"1500"), Some(Duration::from_millis(1_500)));
        for text in ["", "-1", "+1", " 1", "1.5", "12345678901", "1e3"] {
            assert_eq!(millis(text.as_bytes()), None, "{text:?}");
        }
    }

    #[test]
    fn counts_fit_u32_or_are_refused() {
        assert_eq!(count(b"3"), Some(3));
        assert_eq!(count(b"999999999"), Some(999_999_999));
        assert_eq!(count(b"4294967296"), None);
        assert_eq!(count(b"-1"), None);
    }

    #[test]
    fn amz_sdk_request_reads_the_attempt_pair() {
        assert_eq!(amz_sdk_attempt(b"attempt=2; max=3"), Some(2));
        assert_eq!(
            amz_sdk_attempt(b"ttl=20240101T000000Z; attempt=3; max=5"),
            Some(3)
        );
        assert_eq!(amz_sdk_attempt(b"max=3"), None);
        assert_eq!(amz_sdk_attempt(b"attempt=two"), None);
        assert_eq!(amz_sdk_attempt(b"attempt=1; attempt=9"), None);
    }

    #[test]
    fn grpc_timeout_is_written_in_the_finest_unit_that_fits() {
        assert_eq!(
            format_grpc_timeout(Duration::from_millis(1_450)),
            "1450000u"
        );
        assert_eq!(format_grpc_timeout(Duration::from_millis(50)), "50000000n");
        assert_eq!(format_grpc_timeout(Duration::from_secs(500_000)), "500000S");
        assert_eq!(
            format_grpc_timeout(Duration::from_secs(1_000_000_000)),
            "16666666M"
        );
        assert_eq!(
            grpc_timeout(format_grpc_timeout(Duration::from_millis(1_450)).as_bytes()),
            Some(Duration::from_millis(1_450))
        );
    }
}
