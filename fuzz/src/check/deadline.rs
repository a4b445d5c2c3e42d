//! The deadline headers: `grpc-timeout` read and written, and the
//! millisecond timeouts.

use std::time::Duration;

use shed_core::wire;

use super::input::Input;
use super::reference;

/// The units of `grpc-timeout` and their length, finest first.
const UNITS: [(u8, Duration); 6] = [
    (b'n', Duration::from_nanos(1)),
    (b'u', Duration::from_micros(1)),
    (b'm', Duration::from_millis(1)),
    (b'S', Duration::from_secs(1)),
    (b'M', Duration::from_secs(60)),
    (b'H', Duration::from_secs(3_600)),
];

/// The longest `grpc-timeout`: `99999999H`.
const LONGEST: Duration = Duration::from_secs(99_999_999 * 3_600);

fn unit_length(unit: u8) -> Option<Duration> {
    UNITS
        .into_iter()
        .find_map(|(name, length)| (name == unit).then_some(length))
}

/// `grpc-timeout` as the grammar says: 1 to 8 digits and a unit.
fn reference_grpc_timeout(value: &[u8]) -> Option<Duration> {
    let (unit, amount) = value.split_last()?;
    let amount = u32::try_from(reference::digits(amount, 8)?).ok()?;
    unit_length(*unit)?.checked_mul(amount)
}

/// `grpc-timeout`: the whole input is read as a value, and also decoded
/// into a duration that is written and read back.
///
/// - The parser agrees with the grammar exactly (so anything with a ninth
///   digit, a sign, a space or an unknown unit is absent, and zero is only
///   ever read from zeros), and never reads more than `99999999H`.
/// - A written value is 1 to 8 digits without leading zeros and one unit,
///   a valid `http` header value, in the finest unit that fits.
/// - Reading a written value gives the duration less than one of its unit,
///   never more (beyond `99999999H`, exactly `99999999H`).
pub fn grpc_timeout(data: &[u8]) {
    let read = wire::grpc_timeout(data);
    assert_eq!(read, reference_grpc_timeout(data), "reading {data:?}");
    if let Some(read) = read {
        assert!(read <= LONGEST, "{data:?} read as {read:?}");
        round_trip(read);
    }
    let mut input = Input::new(data);
    let seconds = input.magnitude();
    let nanos = u32::try_from(input.u64() % 1_000_000_000).unwrap_or(0);
    round_trip(Duration::new(seconds, nanos));
}

/// Writes `timeout` and reads it back.
fn round_trip(timeout: Duration) {
    let written = wire::format_grpc_timeout(timeout);
    let text: &[u8] = written.as_ref();
    assert_eq!(written.as_str().as_bytes(), text);
    assert_eq!(written.to_string(), written.as_str());
    let (unit, amount) = text.split_last().expect("a written value is never empty");
    let unit_length = unit_length(*unit).unwrap_or_else(|| panic!("unit of {written}"));
    assert!(
        (1..=8).contains(&amount.len()) && amount.iter().all(u8::is_ascii_digit),
        "{timeout:?} written as {written}"
    );
    assert!(
        amount == b"0" || amount[0] != b'0',
        "leading zero in {written}"
    );
    assert!(http::HeaderValue::from_bytes(text).is_ok(), "{written}");

    let read = wire::grpc_timeout(text).unwrap_or_else(|| panic!("{written} does not read back"));
    assert!(
        read <= timeout,
        "{timeout:?} written as {written}, read as {read:?}"
    );
    if timeout <= LONGEST {
        assert!(
            timeout - read < unit_length,
            "{timeout:?} written as {written}, read as {read:?}: more than one unit lost"
        );
        // The finest unit that fits: one unit finer would need a ninth digit.
        if let Some(finer) = UNITS
            .into_iter()
            .take_while(|(name, _)| name != unit)
            .last()
            .map(|(_, length)| length)
        {
            assert!(
                timeout.as_nanos() / finer.as_nanos() > 99_999_999,
                "{timeout:?} written as {written}, but fits a finer unit"
            );
        }
    } else {
        assert_eq!(read, LONGEST, "{timeout:?} written as {written}");
    }
}

/// `connect-timeout-ms` and `x-envoy-expected-rq-timeout-ms`: the parser
/// agrees with the grammar (1 to 10 digits, nothing else), so an overlong
/// or signed value is absent, never zero and never longer than ten digits
/// of milliseconds.
pub fn timeout_ms(data: &[u8]) {
    let read = wire::timeout_ms(data);
    let expected = reference::digits(data, 10).map(Duration::from_millis);
    assert_eq!(read, expected, "reading {data:?}");
    if let Some(read) = read {
        assert!(read <= Duration::from_millis(9_999_999_999), "{data:?}");
    }
}
