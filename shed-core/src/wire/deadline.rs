//! Deadline headers: `grpc-timeout` (read and written) and the millisecond
//! timeouts of Connect and Envoy.

use std::fmt;
use std::time::Duration;

use super::number::at_most;

/// The most digits a `grpc-timeout` amount may have.
const GRPC_TIMEOUT_DIGITS: usize = 8;

/// The largest `grpc-timeout` amount: eight nines.
const GRPC_TIMEOUT_MAX_AMOUNT: u64 = 99_999_999;

/// The units of `grpc-timeout`, finest first, with their length in nanoseconds.
const GRPC_TIMEOUT_UNITS: [(u8, u64); 6] = [
    (b'n', 1),
    (b'u', 1_000),
    (b'm', 1_000_000),
    (b'S', 1_000_000_000),
    (b'M', 60_000_000_000),
    (b'H', 3_600_000_000_000),
];

/// Reads a `grpc-timeout` value: 1 to 8 ASCII digits and one unit of
/// `H M S m u n` (hours, minutes, seconds, milli-, micro-, nanoseconds).
///
/// ```text
/// grpc-timeout = 1*8DIGIT ("H" / "M" / "S" / "m" / "u" / "n")
/// ```
///
/// Anything else is `None`, to be treated as absent: an empty value, a
/// missing or unknown unit, a ninth digit (leading zeros count), a sign,
/// spaces, non-ASCII. The longest value it accepts is `99999999H`, about
/// 11,400 years.
///
/// ```
/// use std::time::Duration;
/// use shed_core::wire::grpc_timeout;
///
/// assert_eq!(grpc_timeout(b"250m"), Some(Duration::from_millis(250)));
/// assert_eq!(grpc_timeout(b"2S"), Some(Duration::from_secs(2)));
/// assert_eq!(grpc_timeout(b"100ms"), None);
/// assert_eq!(grpc_timeout(b"123456789m"), None);
/// assert_eq!(grpc_timeout(b"-5m"), None);
/// ```
#[must_use]
pub fn grpc_timeout(value: &[u8]) -> Option<Duration> {
    let (unit, amount) = value.split_last()?;
    let amount = at_most(amount, GRPC_TIMEOUT_DIGITS)?;
    let (_, nanos_per_unit) = GRPC_TIMEOUT_UNITS
        .into_iter()
        .find(|(name, _)| name == unit)?;
    // At most 99_999_999 hours: about 3.6e20 ns, which a u128 holds and a
    // Duration (u64 seconds) holds too.
    let nanos = u128::from(amount) * u128::from(nanos_per_unit);
    Some(duration_from_nanos(nanos))
}

/// Reads a timeout in whole milliseconds (`connect-timeout-ms`,
/// `x-envoy-expected-rq-timeout-ms`): 1 to 10 ASCII digits, nothing else.
///
/// Ten digits are over 115 days, longer than any deadline a server honours;
/// more digits (leading zeros included), signs, spaces, fractions and
/// exponents are `None`, to be treated as absent.
///
/// ```
/// use std::time::Duration;
/// use shed_core::wire::timeout_ms;
///
/// assert_eq!(timeout_ms(b"1500"), Some(Duration::from_millis(1_500)));
/// assert_eq!(timeout_ms(b"1.5"), None);
/// assert_eq!(timeout_ms(b"12345678901"), None);
/// ```
#[must_use]
pub fn timeout_ms(value: &[u8]) -> Option<Duration> {
    at_most(value, 10).map(Duration::from_millis)
}

/// Writes `timeout` as a `grpc-timeout` value: the finest unit whose amount
/// fits in eight digits, rounded down, so the receiver is never promised
/// more time than is left. Durations beyond `99999999H` are written as
/// `99999999H`.
///
/// This is the encoding of tonic and grpc-java: nanoseconds below 0.1 s,
/// then microseconds below 100 s, milliseconds below about 27 hours, and so
/// on. Reading the value back with [`grpc_timeout`] gives the duration less
/// than one of its unit, never more.
///
/// ```
/// use std::time::Duration;
/// use shed_core::wire::{format_grpc_timeout, grpc_timeout};
///
/// let written = format_grpc_timeout(Duration::from_millis(1_450));
/// assert_eq!(written, "1450000u");
/// assert_eq!(grpc_timeout(written.as_ref()), Some(Duration::from_millis(1_450)));
///
/// assert_eq!(format_grpc_timeout(Duration::from_millis(50)).to_string(), "50000000n");
/// assert_eq!(format_grpc_timeout(Duration::from_secs(1_000_000_000)), "16666666M");
/// assert_eq!(format_grpc_timeout(Duration::MAX), "99999999H");
/// ```
#[must_use]
pub fn format_grpc_timeout(timeout: Duration) -> GrpcTimeout {
    let nanos = timeout.as_nanos();
    let (amount, unit) = GRPC_TIMEOUT_UNITS
        .into_iter()
        .map(|(unit, per_unit)| (nanos / u128::from(per_unit), unit))
        .find(|(amount, _)| *amount <= u128::from(GRPC_TIMEOUT_MAX_AMOUNT))
        .unwrap_or((u128::from(GRPC_TIMEOUT_MAX_AMOUNT), b'H'));
    GrpcTimeout::new(amount, unit)
}

/// A `grpc-timeout` value written by [`format_grpc_timeout`]: at most eight
/// ASCII digits and a unit letter, held inline.
///
/// It is a small `Copy` type rather than a `String` so that writing a
/// deadline allocates nothing in shed-core (which knows no HTTP types);
/// [`as_str`](Self::as_str) or [`AsRef<[u8]>`](AsRef) hand it to a header
/// type, and it is always a valid header value.
///
/// ```
/// use std::time::Duration;
/// use shed_core::wire::format_grpc_timeout;
///
/// let value = format_grpc_timeout(Duration::from_secs(3));
/// assert_eq!(value.as_str(), "3000000u");
/// assert_eq!(format!("grpc-timeout: {value}"), "grpc-timeout: 3000000u");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct GrpcTimeout {
    text: [u8; GRPC_TIMEOUT_DIGITS + 1],
    len: u8,
}

impl GrpcTimeout {
    /// `amount` (at most eight digits) followed by `unit`.
    fn new(amount: u128, unit: u8) -> GrpcTimeout {
        let mut digits = [0u8; GRPC_TIMEOUT_DIGITS];
        let mut rest = amount.min(u128::from(GRPC_TIMEOUT_MAX_AMOUNT));
        let mut first = GRPC_TIMEOUT_DIGITS;
        loop {
            first -= 1;
            // `rest % 10` is a single digit.
            digits[first] = b'0' + (rest % 10) as u8;
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
        let used = GRPC_TIMEOUT_DIGITS - first;
        let mut text = [0u8; GRPC_TIMEOUT_DIGITS + 1];
        text[..used].copy_from_slice(&digits[first..]);
        text[used] = unit;
        GrpcTimeout {
            text,
            // At most nine bytes.
            len: (used + 1) as u8,
        }
    }

    /// The value as text, such as `"1450000u"`.
    #[must_use]
    pub fn as_str(&self) -> &str {
        // Only ASCII digits and an ASCII unit letter are ever written.
        std::str::from_utf8(self.as_bytes()).unwrap_or_default()
    }

    fn as_bytes(&self) -> &[u8] {
        &self.text[..usize::from(self.len)]
    }
}

impl AsRef<str> for GrpcTimeout {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<[u8]> for GrpcTimeout {
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl fmt::Display for GrpcTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for GrpcTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl PartialEq<str> for GrpcTimeout {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for GrpcTimeout {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// `nanos` as a duration; every value [`grpc_timeout`] computes fits.
fn duration_from_nanos(nanos: u128) -> Duration {
    const PER_SECOND: u128 = 1_000_000_000;
    let seconds = u64::try_from(nanos / PER_SECOND).unwrap_or(u64::MAX);
    // Below one billion, so it fits a u32.
    let subsec = (nanos % PER_SECOND) as u32;
    Duration::new(seconds, subsec)
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
            ("99999999H", Duration::from_secs(99_999_999 * 3_600)),
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
            "000000001m",
            "-5m",
            "+5m",
            " 5m",
            "5m ",
            "5 m",
            "5M5",
            "１m",
            "5é",
            "99999999999999999999999S",
        ] {
            assert_eq!(grpc_timeout(text.as_bytes()), None, "{text:?}");
        }
    }

    #[test]
    fn timeout_ms_refuses_signs_spaces_and_overlong_values() {
        assert_eq!(timeout_ms(b"1500"), Some(Duration::from_millis(1_500)));
        assert_eq!(
            timeout_ms(b"9999999999"),
            Some(Duration::from_millis(9_999_999_999))
        );
        for text in ["", "-1", "+1", " 1", "1.5", "12345678901", "1e3", "５００"] {
            assert_eq!(timeout_ms(text.as_bytes()), None, "{text:?}");
        }
    }

    #[test]
    fn grpc_timeout_is_written_in_the_finest_unit_that_fits() {
        let cases = [
            (Duration::ZERO, "0n"),
            (Duration::from_nanos(99_999_999), "99999999n"),
            (Duration::from_millis(100), "100000u"),
            (Duration::from_millis(1_450), "1450000u"),
            (Duration::from_micros(99_999_999), "99999999u"),
            (Duration::from_secs(100), "100000m"),
            (Duration::from_millis(99_999_999), "99999999m"),
            (Duration::from_secs(500_000), "500000S"),
            (Duration::from_secs(99_999_999), "99999999S"),
            (Duration::from_secs(1_000_000_000), "16666666M"),
            (Duration::from_secs(6_000_000_000), "1666666H"),
            (Duration::from_secs(99_999_999 * 3_600), "99999999H"),
            (Duration::MAX, "99999999H"),
        ];
        for (timeout, expected) in cases {
            assert_eq!(format_grpc_timeout(timeout), expected, "{timeout:?}");
        }
    }

    #[test]
    fn grpc_timeout_is_rounded_down_to_its_unit() {
        assert_eq!(
            format_grpc_timeout(Duration::new(1_450, 999_999_999)),
            "1450999m"
        );
        assert_eq!(
            format_grpc_timeout(Duration::from_nanos(100_000_001)),
            "100000u"
        );
    }

    #[test]
    fn a_written_grpc_timeout_reads_back_within_one_unit_and_never_longer() {
        for timeout in [
            Duration::from_nanos(1),
            Duration::from_millis(1_450),
            Duration::new(86_399, 123_456_789),
            Duration::new(7_777_777_777, 1),
        ] {
            let written = format_grpc_timeout(timeout);
            let read = grpc_timeout(written.as_ref()).expect("a written value reads back");
            assert!(read <= timeout, "{written} reads {read:?} > {timeout:?}");
            let unit = written.as_str().as_bytes().last().copied();
            let (_, per_unit) = GRPC_TIMEOUT_UNITS
                .into_iter()
                .find(|(name, _)| Some(*name) == unit)
                .unwrap();
            assert!(timeout - read < Duration::from_nanos(per_unit), "{written}");
        }
    }
}
