//! The delay hints a client reads: `Retry-After`, `retry-after-ms`,
//! `grpc-retry-pushback-ms`, as bytes ([`wire`]) and as pushback
//! ([`Pushback`]).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use shed_core::retry::{Pushback, MAX_PUSHBACK};
use shed_core::wire::{self, Delay};

use super::date::{Civil, LAST_SECOND};
use super::input::Input;
use super::reference;

/// The hint of a well-formed number of `unit`s, `Pushback`'s way: a wait of
/// at most a day, else a refusal (however many digits). `None` when the
/// value is not `1*DIGIT`.
fn bounded_digits(value: &[u8], unit: fn(u64) -> Duration) -> Option<Pushback> {
    Some(match reference::number(value)? {
        Some(units) if unit(units) <= MAX_PUSHBACK => Pushback::Wait(unit(units)),
        _ => Pushback::Refuse,
    })
}

/// The checks every pushback shares, stated on their own (the exact
/// expectations imply them): a wait is never longer than [`MAX_PUSHBACK`],
/// and a zero wait, "retry now", is only ever read from a value that says
/// zero (`says_zero`), never from an overflow or a malformed value.
fn assert_sane(pushback: Pushback, says_zero: bool, what: &str) {
    if let Pushback::Wait(wait) = pushback {
        assert!(wait <= MAX_PUSHBACK, "{what}: waits {wait:?}");
        assert!(!wait.is_zero() || says_zero, "{what}: retry now");
    }
}

/// Whether a delay hint's value is a number that says zero.
fn says_zero(value: &[u8]) -> bool {
    reference::number(reference::trim(value)) == Some(Some(0))
}

/// `retry-after-ms`: the input is one value.
///
/// - Digits (surrounding whitespace allowed) wait that many milliseconds
///   up to a day and refuse beyond it, however many digits: an overflow is
///   never "retry now".
/// - Anything else is absent.
/// - [`Pushback::from_headers`] reads the header the same way.
pub fn retry_after_ms(data: &[u8]) {
    let pushback = Pushback::retry_after_ms(data);
    let expected =
        bounded_digits(reference::trim(data), Duration::from_millis).unwrap_or(Pushback::Absent);
    assert_eq!(pushback, expected, "retry-after-ms {data:?}");
    assert_sane(pushback, says_zero(data), "retry-after-ms");
    assert_delay_ms(data);
    let lookup = |name: &str| (name == wire::RETRY_AFTER_MS_HEADER).then_some(data);
    assert_eq!(Pushback::from_headers(lookup, UNIX_EPOCH), pushback);
}

/// `grpc-retry-pushback-ms` (gRFC A6): the input is one value.
///
/// - Digits wait that many milliseconds up to a day, and refuse beyond it.
/// - Anything else refuses, a negative value first of all: a present
///   gRPC pushback is never absent and never an immediate retry unless it
///   says `0`.
/// - Any refusal wins when combined with other hints.
pub fn grpc_retry_pushback_ms(data: &[u8]) {
    let pushback = Pushback::grpc_retry_pushback_ms(data);
    let trimmed = reference::trim(data);
    let expected = bounded_digits(trimmed, Duration::from_millis).unwrap_or(Pushback::Refuse);
    assert_eq!(pushback, expected, "grpc-retry-pushback-ms {data:?}");
    assert_ne!(
        pushback,
        Pushback::Absent,
        "grpc-retry-pushback-ms {data:?}"
    );
    if trimmed.first() == Some(&b'-') {
        assert_eq!(pushback, Pushback::Refuse, "negative {data:?}");
    }
    assert_sane(pushback, says_zero(data), "grpc-retry-pushback-ms");
    assert_delay_ms(data);

    let lookup = |name: &str| match name {
        wire::GRPC_RETRY_PUSHBACK_MS_HEADER => Some(data),
        wire::RETRY_AFTER_HEADER => Some(&b"1"[..]),
        _ => None,
    };
    let combined = Pushback::from_headers(lookup, UNIX_EPOCH);
    assert_eq!(
        combined,
        pushback.and(Pushback::Wait(Duration::from_secs(1)))
    );
    if pushback == Pushback::Refuse {
        assert_eq!(combined, Pushback::Refuse);
    }
}

/// [`wire::delay_ms`] itself: digits are milliseconds, too many digits are
/// [`Delay::TooLong`], anything else is malformed.
fn assert_delay_ms(data: &[u8]) {
    let expected = reference::number(reference::trim(data)).map(|ms| match ms {
        Some(ms) => Delay::After(Duration::from_millis(ms)),
        None => Delay::TooLong,
    });
    assert_eq!(wire::delay_ms(data), expected, "delay_ms {data:?}");
}

/// `Retry-After`: the input is a receipt time, an instant, and a value.
///
/// Of the value:
/// - Delay-seconds (surrounding whitespace allowed) wait that many seconds
///   up to a day and refuse beyond it, however many digits.
/// - Anything else that starts with a digit is absent.
/// - A value read as a date is exactly the spelling of one instant in one
///   of the three forms (nothing looser), and is measured from the receipt
///   time.
///
/// Of the instant, n seconds after the receipt time (or before it):
/// - Its IMF-fixdate, RFC 850 and asctime spellings all read as n seconds,
///   the same as the delay-seconds `n`: a wait of n s up to a day, a
///   refusal beyond, no wait for an instant already past.
pub fn retry_after(data: &[u8]) {
    let mut input = Input::new(data);
    let received_secs = input.u64() % (LAST_SECOND + 2 * 86_400);
    let received_nanos = if input.u8() & 1 == 0 {
        0
    } else {
        u32::try_from(input.u64() % 1_000_000_000).unwrap_or(0)
    };
    let received = UNIX_EPOCH + Duration::new(received_secs, received_nanos);
    let ahead = input.magnitude();
    let behind = input.u8() & 1 == 1;
    let value = input.rest();

    retry_after_value(value, received);

    let at = if behind {
        received_secs.saturating_sub(ahead)
    } else {
        received_secs.saturating_add(ahead)
    }
    .min(LAST_SECOND);
    forms_agree(at, received);
}

fn retry_after_value(value: &[u8], received: SystemTime) {
    let pushback = Pushback::retry_after(value, received);
    let trimmed = reference::trim(value);
    if trimmed.first().is_some_and(u8::is_ascii_digit) {
        let expected = bounded_digits(trimmed, Duration::from_secs).unwrap_or(Pushback::Absent);
        assert_eq!(pushback, expected, "retry-after {value:?}");
        assert_sane(pushback, says_zero(value), "retry-after");
        return;
    }
    // Read as a date, measured from the epoch, the instant itself comes
    // back: the value must be one of its spellings.
    match wire::retry_after(value, UNIX_EPOCH) {
        Some(Delay::After(since_epoch)) => {
            assert_eq!(since_epoch.subsec_nanos(), 0, "{value:?}");
            let at = since_epoch.as_secs();
            assert!(at <= LAST_SECOND, "{value:?} read as {since_epoch:?}");
            let spellings = Civil::at(at).spellings();
            assert!(
                spellings
                    .iter()
                    .any(|spelling| spelling.as_bytes() == trimmed),
                "{value:?} read as {at} s after the epoch, spelled {spellings:?}"
            );
            let instant = UNIX_EPOCH + since_epoch;
            let wait = instant.duration_since(received).unwrap_or(Duration::ZERO);
            let expected = if wait <= MAX_PUSHBACK {
                Pushback::Wait(wait)
            } else {
                Pushback::Refuse
            };
            assert_eq!(pushback, expected, "retry-after {value:?}");
            assert_sane(pushback, instant <= received, "retry-after");
        }
        Some(Delay::TooLong) => panic!("a date {value:?} read as too long"),
        None => assert_eq!(pushback, Pushback::Absent, "retry-after {value:?}"),
    }
}

/// The instant `at` (seconds after the epoch), spelled each way, read at
/// `received`.
fn forms_agree(at: u64, received: SystemTime) {
    let instant = UNIX_EPOCH + Duration::from_secs(at);
    let wait = instant.duration_since(received).unwrap_or(Duration::ZERO);
    let expected = if wait <= MAX_PUSHBACK {
        Pushback::Wait(wait)
    } else {
        Pushback::Refuse
    };
    let civil = Civil::at(at);
    for spelling in [
        Some(civil.imf_fixdate()),
        civil.rfc850(),
        Some(civil.asctime()),
    ]
    .into_iter()
    .flatten()
    {
        assert_eq!(
            wire::retry_after(spelling.as_bytes(), received),
            Some(Delay::After(wait)),
            "{spelling:?}"
        );
        assert_eq!(
            Pushback::retry_after(spelling.as_bytes(), received),
            expected,
            "{spelling:?}"
        );
    }
    // The delay-seconds form of the same wait, when the receipt time is a
    // whole second (dates have no fractions).
    let whole_second = received
        .duration_since(UNIX_EPOCH)
        .is_ok_and(|since| since.subsec_nanos() == 0);
    if whole_second {
        let seconds = wait.as_secs().to_string();
        assert_eq!(
            Pushback::retry_after(seconds.as_bytes(), received),
            expected,
            "{seconds}"
        );
    }
}
