//! Delay hints from servers: `Retry-After`, `retry-after-ms` and
//! `grpc-retry-pushback-ms`.

use std::time::{Duration, SystemTime};

use super::number::{decimal, Number};

/// A well-formed delay hint: how long the server asked the client to wait.
///
/// What to do with it (cap it, treat a malformed hint as absent or as a
/// refusal) is the reader's policy; [`Pushback`](crate::retry::Pushback) is
/// shed's.
///
/// ```
/// use std::time::Duration;
/// use shed_core::wire::{delay_ms, Delay};
///
/// assert_eq!(delay_ms(b"250"), Some(Delay::After(Duration::from_millis(250))));
/// assert_eq!(delay_ms(b"99999999999999999999"), Some(Delay::TooLong));
/// assert_eq!(delay_ms(b"soon"), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delay {
    /// Wait this long from receipt (zero for a date already past).
    After(Duration),
    /// A number of digits too large to count (beyond `u64`): longer than
    /// any wait worth honouring, and never to be read as zero.
    TooLong,
}

/// Reads a `Retry-After` value (RFC 9110 section 10.2.3): delay-seconds, or
/// an HTTP-date in any of its three forms (IMF-fixdate, obsolete RFC 850,
/// asctime), converted into a delay from `received_at`, the wall time the
/// response arrived.
///
/// Surrounding ASCII whitespace is ignored. `None` when the value is
/// neither form: signs, fractions, units, dates that do not exist (a wrong
/// weekday, 31 April), non-ASCII. A date at or before `received_at` is
/// [`Delay::After`] zero; digits beyond `u64` are [`Delay::TooLong`].
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// use shed_core::wire::{retry_after, Delay};
///
/// // 2026-01-01T00:00:00Z
/// let received = UNIX_EPOCH + Duration::from_secs(1_767_225_600);
/// let two_seconds = Some(Delay::After(Duration::from_secs(2)));
/// assert_eq!(retry_after(b"2", received), two_seconds);
/// assert_eq!(retry_after(b"Thu, 01 Jan 2026 00:00:02 GMT", received), two_seconds);
/// assert_eq!(retry_after(b"Thursday, 01-Jan-26 00:00:02 GMT", received), two_seconds);
/// assert_eq!(retry_after(b"Thu Jan  1 00:00:02 2026", received), two_seconds);
/// assert_eq!(retry_after(b"-1", received), None);
/// ```
#[must_use]
pub fn retry_after(value: &[u8], received_at: SystemTime) -> Option<Delay> {
    let value = value.trim_ascii();
    if value.first().is_some_and(u8::is_ascii_digit) {
        return digits(value, Duration::from_secs);
    }
    if !is_date_shaped(value) {
        return None;
    }
    let text = std::str::from_utf8(value).ok()?;
    let at = httpdate::parse_http_date(text).ok()?;
    Some(Delay::After(
        at.duration_since(received_at).unwrap_or(Duration::ZERO),
    ))
}

/// Reads a delay in whole milliseconds, the grammar of `retry-after-ms` and
/// of `grpc-retry-pushback-ms` (gRFC A6): ASCII digits, surrounding ASCII
/// whitespace ignored.
///
/// `None` for anything else, a minus sign included: gRFC A6 reads a
/// negative or malformed `grpc-retry-pushback-ms` as "do not retry", while
/// a malformed `retry-after-ms` is usually ignored as absent; that choice
/// is the reader's. Digits beyond `u64` are [`Delay::TooLong`].
///
/// ```
/// use std::time::Duration;
/// use shed_core::wire::{delay_ms, Delay};
///
/// assert_eq!(delay_ms(b" 1500 "), Some(Delay::After(Duration::from_millis(1_500))));
/// assert_eq!(delay_ms(b"-1"), None);
/// assert_eq!(delay_ms(b"1e3"), None);
/// ```
#[must_use]
pub fn delay_ms(value: &[u8]) -> Option<Delay> {
    digits(value.trim_ascii(), Duration::from_millis)
}

/// What httpdate leaves unchecked: an HTTP-date is printable ASCII (httpdate
/// trims any whitespace itself, a vertical tab included), and in the two
/// forms that end in ` GMT` (IMF-fixdate and RFC 850) the time of day
/// follows a space (httpdate skips that byte in RFC 850 dates).
fn is_date_shaped(value: &[u8]) -> bool {
    if !value.iter().all(|byte| (b' '..=b'~').contains(byte)) {
        return false;
    }
    match value.strip_suffix(b" GMT") {
        // `... HH:MM:SS GMT`: the space before the eight bytes of the time.
        Some(rest) => rest.len() >= 9 && rest[rest.len() - 9] == b' ',
        None => true,
    }
}

/// `1*DIGIT` in the unit of `unit`.
fn digits(value: &[u8], unit: fn(u64) -> Duration) -> Option<Delay> {
    match decimal(value) {
        Number::Value(amount) => Some(Delay::After(unit(amount))),
        Number::Overflow => Some(Delay::TooLong),
        Number::Malformed => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    /// 2026-01-01T00:00:00Z.
    fn new_year_2026() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_767_225_600)
    }

    fn after(secs: u64) -> Option<Delay> {
        Some(Delay::After(Duration::from_secs(secs)))
    }

    #[test]
    fn retry_after_delay_seconds_allow_surrounding_spaces_and_leading_zeros() {
        assert_eq!(retry_after(b" 0 ", new_year_2026()), after(0));
        assert_eq!(retry_after(b"\t0007", new_year_2026()), after(7));
    }

    #[test]
    fn retry_after_dates_in_all_three_forms_agree() {
        for date in [
            "Thu, 01 Jan 2026 00:01:00 GMT",
            "Thursday, 01-Jan-26 00:01:00 GMT",
            "Thu Jan  1 00:01:00 2026",
        ] {
            assert_eq!(
                retry_after(date.as_bytes(), new_year_2026()),
                after(60),
                "{date}"
            );
        }
    }

    #[test]
    fn retry_after_date_at_or_before_receipt_is_no_wait() {
        for date in [
            "Thu, 01 Jan 2026 00:00:00 GMT",
            "Wed, 31 Dec 2025 23:59:00 GMT",
        ] {
            assert_eq!(
                retry_after(date.as_bytes(), new_year_2026()),
                after(0),
                "{date}"
            );
        }
    }

    #[test]
    fn retry_after_date_measures_from_a_receipt_between_seconds() {
        let received = new_year_2026() + Duration::from_millis(250);
        assert_eq!(
            retry_after(b"Thu, 01 Jan 2026 00:00:02 GMT", received),
            Some(Delay::After(Duration::from_millis(1_750)))
        );
    }

    #[test]
    fn retry_after_overflowing_digits_are_too_long_not_zero() {
        assert_eq!(
            retry_after(b"18446744073709551616", new_year_2026()),
            Some(Delay::TooLong)
        );
    }

    #[test]
    fn retry_after_that_is_neither_form_is_malformed() {
        for value in [
            &b""[..],
            b"soon",
            b"1.5",
            b"+3",
            b"-1",
            b"3s",
            b"1 2",
            b"Fri, 01 Jan 2026 00:00:02 GMT",
            b"Thu, 32 Jan 2026 00:00:02 GMT",
            b"Thu, 01 Jan 2026 00:00:02 UTC",
            b"\xff\xfe",
        ] {
            assert_eq!(retry_after(value, new_year_2026()), None, "{value:?}");
        }
    }

    /// Found by the `retry_after` fuzz check (on an input made by hand
    /// while its target was smoke-tested): a date with a vertical tab
    /// around it was read as that date.
    #[test]
    fn retry_after_date_with_control_characters_is_malformed() {
        for value in [
            &b"Thu, 01 Jan 2026 00:00:02 GMT\x0b"[..],
            b"\x0bThu, 01 Jan 2026 00:00:02 GMT",
            b"Thu Jan  1 00:00:02 2026\x0b",
            b"Thu, 01 Jan 2026 00:00:02 GMT\0",
        ] {
            assert_eq!(retry_after(value, new_year_2026()), None, "{value:?}");
        }
    }

    /// Found by the `retry_after` fuzz target after 517,094 runs:
    /// `Thursday, 01-Jan-26000:00:02 GMT` was read as 2026-01-01T00:00:02Z,
    /// because httpdate does not check the space between an RFC 850 date's
    /// year and its time.
    #[test]
    fn retry_after_date_without_a_space_before_the_time_is_malformed() {
        for value in [
            &b"Thursday, 01-Jan-26000:00:02 GMT"[..],
            b"Thursday, 01-Jan-26x00:00:02 GMT",
            b"Thursday, 01-Jan-26-00:00:02 GMT",
        ] {
            assert_eq!(retry_after(value, new_year_2026()), None, "{value:?}");
        }
        assert_eq!(
            retry_after(b"Thursday, 01-Jan-26 00:00:02 GMT", new_year_2026()),
            after(2)
        );
    }

    #[test]
    fn delay_ms_reads_milliseconds_and_nothing_signed() {
        assert_eq!(delay_ms(b"0"), Some(Delay::After(Duration::ZERO)));
        assert_eq!(
            delay_ms(b"18446744073709551615"),
            Some(Delay::After(Duration::from_millis(u64::MAX)))
        );
        assert_eq!(delay_ms(b"18446744073709551616"), Some(Delay::TooLong));
        for value in ["", "-1", "-0", "+1", "1.5", "1e3", "1 2", "x"] {
            assert_eq!(delay_ms(value.as_bytes()), None, "{value:?}");
        }
    }
}
