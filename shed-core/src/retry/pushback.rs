//! Server pushback: how long the server asked the client to stay away.
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use shed_core::retry::Pushback;
//!
//! let now = SystemTime::now();
//! assert_eq!(Pushback::retry_after(b"3", now), Pushback::Wait(Duration::from_secs(3)));
//! assert_eq!(Pushback::retry_after(b"soon", now), Pushback::Absent);
//! assert_eq!(Pushback::grpc_retry_pushback_ms(b"-1"), Pushback::Refuse);
//! ```
//!
//! Three hints are understood, read by the strict parsers of [`crate::wire`]
//! (which also name the headers):
//!
//! | header | grammar (parser) | malformed | too large |
//! |---|---|---|---|
//! | `Retry-After` | delay-seconds, or an HTTP-date ([`wire::retry_after`]) | absent | refuse |
//! | `retry-after-ms` | milliseconds ([`wire::delay_ms`]) | absent | refuse |
//! | `grpc-retry-pushback-ms` | milliseconds; negative = stop ([`wire::delay_ms`]) | refuse | refuse |
//!
//! "Too large" is anything above [`MAX_PUSHBACK`] (one day) or a digit string
//! that overflows ([`Delay::TooLong`]): such a value is a refusal, never an
//! overflow turned into "retry now". An HTTP-date is converted with the wall
//! time at receipt into a delay, which the caller then schedules on its
//! monotonic clock; a date in the past means no wait.

use std::time::{Duration, SystemTime};

use crate::wire::{
    self, Delay, GRPC_RETRY_PUSHBACK_MS_HEADER, RETRY_AFTER_HEADER, RETRY_AFTER_MS_HEADER,
};

/// The longest pushback honoured; anything longer refuses the retry.
pub const MAX_PUSHBACK: Duration = Duration::from_secs(24 * 60 * 60);

/// What the server said about retrying, read from one response.
///
/// A pushback is a floor under the client's own backoff: it is never
/// shortened to fit a deadline (if it does not fit, the operation ends).
///
/// ```
/// use std::time::Duration;
/// use shed_core::retry::Pushback;
///
/// let one_second = Pushback::Wait(Duration::from_secs(1));
/// assert_eq!(Pushback::Absent.and(one_second), one_second);
/// assert_eq!(one_second.and(Pushback::Refuse), Pushback::Refuse);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pushback {
    /// No usable hint: the client's own backoff decides.
    #[default]
    Absent,
    /// Wait at least this long before the next attempt.
    Wait(Duration),
    /// The server asked not to retry (or asked for an unusable wait).
    Refuse,
}

impl Pushback {
    /// Reads every hint from a response's headers, through `header`, which
    /// returns the first value of the named header (names are lower case).
    ///
    /// Hints combine with [`and`](Self::and): any refusal wins, otherwise the
    /// longest wait does.
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use shed_core::retry::Pushback;
    /// use shed_core::wire::{RETRY_AFTER_HEADER, RETRY_AFTER_MS_HEADER};
    ///
    /// let headers = [(RETRY_AFTER_HEADER, "1"), (RETRY_AFTER_MS_HEADER, "1500")];
    /// let lookup = |name: &str| {
    ///     headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_bytes())
    /// };
    /// let pushback = Pushback::from_headers(lookup, SystemTime::now());
    /// assert_eq!(pushback, Pushback::Wait(Duration::from_millis(1500)));
    /// ```
    #[must_use]
    pub fn from_headers<'a>(
        mut header: impl FnMut(&str) -> Option<&'a [u8]>,
        received_at: SystemTime,
    ) -> Self {
        let retry_after = header(RETRY_AFTER_HEADER)
            .map_or(Self::Absent, |value| Self::retry_after(value, received_at));
        let retry_after_ms =
            header(RETRY_AFTER_MS_HEADER).map_or(Self::Absent, Self::retry_after_ms);
        let grpc = header(GRPC_RETRY_PUSHBACK_MS_HEADER)
            .map_or(Self::Absent, Self::grpc_retry_pushback_ms);
        retry_after.and(retry_after_ms).and(grpc)
    }

    /// Reads a `Retry-After` value with [`wire::retry_after`]: delay-seconds,
    /// or an HTTP-date in any of its three forms (IMF-fixdate, RFC 850,
    /// asctime), measured from `received_at`. Malformed is absent; beyond
    /// [`MAX_PUSHBACK`], or too many digits to count, refuses.
    ///
    /// ```
    /// use std::time::{Duration, SystemTime, UNIX_EPOCH};
    /// use shed_core::retry::Pushback;
    ///
    /// // 2026-01-01T00:00:00Z
    /// let received = UNIX_EPOCH + Duration::from_secs(1_767_225_600);
    /// let date = b"Thu, 01 Jan 2026 00:00:02 GMT";
    /// assert_eq!(Pushback::retry_after(date, received), Pushback::Wait(Duration::from_secs(2)));
    /// assert_eq!(Pushback::retry_after(b"-1", received), Pushback::Absent);
    /// assert_eq!(Pushback::retry_after(b"999999999999999999999", received), Pushback::Refuse);
    /// ```
    #[must_use]
    pub fn retry_after(value: &[u8], received_at: SystemTime) -> Self {
        wire::retry_after(value, received_at).map_or(Self::Absent, Self::bounded)
    }

    /// Reads a `retry-after-ms` value (non-negative milliseconds) with
    /// [`wire::delay_ms`]. Malformed is absent; beyond [`MAX_PUSHBACK`]
    /// refuses.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::retry::Pushback;
    ///
    /// assert_eq!(Pushback::retry_after_ms(b"250"), Pushback::Wait(Duration::from_millis(250)));
    /// assert_eq!(Pushback::retry_after_ms(b"-5"), Pushback::Absent);
    /// assert_eq!(Pushback::retry_after_ms(b"86400001"), Pushback::Refuse);
    /// ```
    #[must_use]
    pub fn retry_after_ms(value: &[u8]) -> Self {
        wire::delay_ms(value).map_or(Self::Absent, Self::bounded)
    }

    /// Reads a `grpc-retry-pushback-ms` value (gRFC A6) with
    /// [`wire::delay_ms`]: non-negative milliseconds; a negative or
    /// unparsable value means "do not retry", and so does one beyond
    /// [`MAX_PUSHBACK`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::retry::Pushback;
    ///
    /// assert_eq!(Pushback::grpc_retry_pushback_ms(b"20"), Pushback::Wait(Duration::from_millis(20)));
    /// assert_eq!(Pushback::grpc_retry_pushback_ms(b"-1"), Pushback::Refuse);
    /// assert_eq!(Pushback::grpc_retry_pushback_ms(b"later"), Pushback::Refuse);
    /// ```
    #[must_use]
    pub fn grpc_retry_pushback_ms(value: &[u8]) -> Self {
        wire::delay_ms(value).map_or(Self::Refuse, Self::bounded)
    }

    /// Combines two hints: a refusal wins, otherwise the longer wait. For
    /// hints [`from_headers`](Self::from_headers) does not see, such as
    /// ones read from gRPC trailers.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::retry::Pushback;
    ///
    /// let short = Pushback::Wait(Duration::from_millis(10));
    /// let long = Pushback::Wait(Duration::from_millis(20));
    /// assert_eq!(short.and(long), long);
    /// ```
    #[must_use]
    pub fn and(self, other: Self) -> Self {
        match (self, other) {
            (Self::Refuse, _) | (_, Self::Refuse) => Self::Refuse,
            (Self::Wait(a), Self::Wait(b)) => Self::Wait(a.max(b)),
            (Self::Wait(wait), Self::Absent) | (Self::Absent, Self::Wait(wait)) => Self::Wait(wait),
            (Self::Absent, Self::Absent) => Self::Absent,
        }
    }

    /// The least wait this hint allows (zero when absent), or `None` when it
    /// refuses the retry.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_core::retry::Pushback;
    ///
    /// assert_eq!(Pushback::Absent.floor(), Some(Duration::ZERO));
    /// assert_eq!(Pushback::Refuse.floor(), None);
    /// ```
    #[must_use]
    pub fn floor(self) -> Option<Duration> {
        match self {
            Self::Absent => Some(Duration::ZERO),
            Self::Wait(wait) => Some(wait),
            Self::Refuse => None,
        }
    }

    /// A well-formed hint: a wait of at most [`MAX_PUSHBACK`], else a refusal.
    fn bounded(delay: Delay) -> Self {
        match delay {
            Delay::After(wait) if wait <= MAX_PUSHBACK => Self::Wait(wait),
            Delay::After(_) | Delay::TooLong => Self::Refuse,
        }
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

    fn retry_after(value: &str) -> Pushback {
        Pushback::retry_after(value.as_bytes(), new_year_2026())
    }

    const TWO_SECONDS: Pushback = Pushback::Wait(Duration::from_secs(2));

    #[test]
    fn retry_after_imf_fixdate_two_seconds_after_receipt_is_two_seconds() {
        assert_eq!(retry_after("Thu, 01 Jan 2026 00:00:02 GMT"), TWO_SECONDS);
    }

    #[test]
    fn retry_after_rfc850_date_of_the_same_instant_is_two_seconds() {
        assert_eq!(retry_after("Thursday, 01-Jan-26 00:00:02 GMT"), TWO_SECONDS);
    }

    #[test]
    fn retry_after_asctime_date_of_the_same_instant_is_two_seconds() {
        assert_eq!(retry_after("Thu Jan  1 00:00:02 2026"), TWO_SECONDS);
    }

    #[test]
    fn retry_after_delay_seconds_is_that_many_seconds() {
        assert_eq!(retry_after("2"), TWO_SECONDS);
        assert_eq!(retry_after(" 0 "), Pushback::Wait(Duration::ZERO));
    }

    #[test]
    fn retry_after_overflowing_digits_refuses() {
        assert_eq!(retry_after("999999999999999999999"), Pushback::Refuse);
    }

    #[test]
    fn retry_after_above_a_day_refuses() {
        assert_eq!(retry_after("86400"), Pushback::Wait(MAX_PUSHBACK));
        assert_eq!(retry_after("86401"), Pushback::Refuse);
        assert_eq!(
            retry_after("Sat, 03 Jan 2026 00:00:00 GMT"),
            Pushback::Refuse
        );
    }

    #[test]
    fn retry_after_minus_one_is_absent() {
        assert_eq!(retry_after("-1"), Pushback::Absent);
    }

    #[test]
    fn retry_after_malformed_values_are_absent() {
        for value in [
            "",
            "soon",
            "1.5",
            "+3",
            "3s",
            "1 2",
            "Thu, 32 Jan 2026 00:00:02 GMT",
        ] {
            assert_eq!(retry_after(value), Pushback::Absent, "{value:?}");
        }
        assert_eq!(
            Pushback::retry_after(&[0xff, 0xfe], new_year_2026()),
            Pushback::Absent
        );
    }

    #[test]
    fn retry_after_date_in_the_past_means_no_wait() {
        assert_eq!(
            retry_after("Wed, 31 Dec 2025 23:59:00 GMT"),
            Pushback::Wait(Duration::ZERO)
        );
    }

    #[test]
    fn grpc_pushback_negative_or_unparsable_refuses() {
        for value in ["-1", "-0", "x", "", "1e3", "99999999999999999999999"] {
            assert_eq!(
                Pushback::grpc_retry_pushback_ms(value.as_bytes()),
                Pushback::Refuse,
                "{value:?}"
            );
        }
    }

    #[test]
    fn grpc_pushback_zero_means_retry_at_once() {
        assert_eq!(
            Pushback::grpc_retry_pushback_ms(b"0"),
            Pushback::Wait(Duration::ZERO)
        );
    }

    #[test]
    fn grpc_pushback_signed_or_fractional_refuses() {
        for value in ["+5", "5.0", "0x10", "5ms", "--1", "- 1"] {
            assert_eq!(
                Pushback::grpc_retry_pushback_ms(value.as_bytes()),
                Pushback::Refuse,
                "{value:?}"
            );
        }
    }

    #[test]
    fn grpc_pushback_within_a_day_is_a_wait_beyond_it_a_refusal() {
        assert_eq!(
            Pushback::grpc_retry_pushback_ms(b"86400000"),
            Pushback::Wait(MAX_PUSHBACK)
        );
        assert_eq!(
            Pushback::grpc_retry_pushback_ms(b"86400001"),
            Pushback::Refuse
        );
    }

    #[test]
    fn a_malformed_grpc_pushback_refuses_despite_a_retry_after() {
        let headers = [
            (RETRY_AFTER_HEADER, "1"),
            (GRPC_RETRY_PUSHBACK_MS_HEADER, "soon"),
        ];
        let lookup = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.as_bytes())
        };
        assert_eq!(
            Pushback::from_headers(lookup, new_year_2026()),
            Pushback::Refuse
        );
    }

    #[test]
    fn every_hint_is_read_and_the_longest_wait_wins() {
        let headers = [
            (RETRY_AFTER_HEADER, "1"),
            (RETRY_AFTER_MS_HEADER, "300"),
            (GRPC_RETRY_PUSHBACK_MS_HEADER, "1200"),
        ];
        let lookup = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.as_bytes())
        };
        assert_eq!(
            Pushback::from_headers(lookup, new_year_2026()),
            Pushback::Wait(Duration::from_millis(1200))
        );
    }

    #[test]
    fn one_refusing_hint_refuses() {
        let lookup =
            |name: &str| (name == GRPC_RETRY_PUSHBACK_MS_HEADER).then_some(b"-1".as_slice());
        assert_eq!(
            Pushback::from_headers(lookup, new_year_2026()),
            Pushback::Refuse
        );
    }
}
