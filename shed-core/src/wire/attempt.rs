//! Retry markers: attempt numbers and retry counts sent by clients.

use super::number::{at_most, trim_ows};

/// Reads a count (`shed-attempt`, `grpc-previous-rpc-attempts`,
/// `x-envoy-attempt-count`, `x-stainless-retry-count`): 1 to 9 ASCII
/// digits, nothing else, so it always fits a `u32`.
///
/// What the count means differs by header (an attempt number, or the
/// retries before this one); the reader of the header decides.
///
/// ```
/// use shed_core::wire::count;
///
/// assert_eq!(count(b"2"), Some(2));
/// assert_eq!(count(b"999999999"), Some(999_999_999));
/// assert_eq!(count(b"4294967296"), None);
/// assert_eq!(count(b"-1"), None);
/// assert_eq!(count(b" 2"), None);
/// ```
#[must_use]
pub fn count(value: &[u8]) -> Option<u32> {
    at_most(value, 9).and_then(|count| u32::try_from(count).ok())
}

/// Reads the attempt number of an `amz-sdk-request` value such as
/// `attempt=2; max=3`: `key=value` pairs separated by `;`, optional
/// whitespace (spaces and tabs, RFC 9110 section 5.6.3) allowed around
/// keys and values, pairs without `=` skipped.
///
/// The `attempt` value is read with [`count`]. `None` when there is no
/// `attempt` pair, when it is not a count, when `attempt` appears twice
/// (ambiguous), or when the value is not ASCII.
///
/// ```
/// use shed_core::wire::amz_sdk_attempt;
///
/// assert_eq!(amz_sdk_attempt(b"attempt=2; max=3"), Some(2));
/// assert_eq!(amz_sdk_attempt(b"ttl=20240101T000000Z; attempt=3; max=5"), Some(3));
/// assert_eq!(amz_sdk_attempt(b"max=3"), None);
/// assert_eq!(amz_sdk_attempt(b"attempt=1; attempt=9"), None);
/// ```
#[must_use]
pub fn amz_sdk_attempt(value: &[u8]) -> Option<u32> {
    if !value.is_ascii() {
        return None;
    }
    let mut found = None;
    for pair in value.split(|byte| *byte == b';') {
        let Some(equals) = pair.iter().position(|byte| *byte == b'=') else {
            continue;
        };
        let (key, number) = (&pair[..equals], &pair[equals + 1..]);
        if trim_ows(key) == b"attempt" {
            if found.is_some() {
                return None;
            }
            found = Some(count(trim_ows(number))?);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_fit_u32_or_are_refused() {
        assert_eq!(count(b"0"), Some(0));
        assert_eq!(count(b"3"), Some(3));
        assert_eq!(count(b"999999999"), Some(999_999_999));
        for text in [
            "",
            "1234567890",
            "4294967296",
            "-1",
            "+1",
            "2 ",
            "two",
            "2\u{e9}",
        ] {
            assert_eq!(count(text.as_bytes()), None, "{text:?}");
        }
    }

    #[test]
    fn amz_sdk_request_reads_the_attempt_pair() {
        assert_eq!(amz_sdk_attempt(b"attempt=2; max=3"), Some(2));
        assert_eq!(amz_sdk_attempt(b" attempt = 4 ;max=5"), Some(4));
        assert_eq!(amz_sdk_attempt(b"attempt=\t5\t"), Some(5));
        assert_eq!(
            amz_sdk_attempt(b"ttl=20240101T000000Z; attempt=3; max=5"),
            Some(3)
        );
    }

    #[test]
    fn amz_sdk_request_without_one_valid_attempt_is_absent() {
        for text in [
            &b"max=3"[..],
            b"",
            b"attempt",
            b"attempt=",
            b"attempt=two",
            b"attempt=-1",
            b"attempt=1; attempt=9",
            b"attempt=1; attempt=x",
            b"Attempt=2",
            b"attempt=2\xff",
        ] {
            assert_eq!(amz_sdk_attempt(text), None, "{text:?}");
        }
    }

    /// Found by the `amz_sdk_request` fuzz target: `\rattempt=2` was read
    /// as attempt 2, because pairs were trimmed of any Unicode whitespace.
    #[test]
    fn amz_sdk_request_with_other_whitespace_or_non_ascii_is_absent() {
        for text in [
            &b"\rattempt=2; max=3"[..],
            b"attempt=2\n",
            b"attempt=\x0c2",
            "attempt=\u{a0}2".as_bytes(),
            "attempt=2\u{3000}".as_bytes(),
            "ttl=\u{e9}; attempt=2".as_bytes(),
        ] {
            assert_eq!(amz_sdk_attempt(text), None, "{text:?}");
        }
    }
}
