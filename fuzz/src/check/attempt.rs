//! The retry markers: counts and `amz-sdk-request`.

use shed_core::wire;

use super::input::Input;
use super::reference;

/// `shed-attempt`, `grpc-previous-rpc-attempts`, `x-envoy-attempt-count`,
/// `x-stainless-retry-count`: the parser agrees with the grammar (1 to 9
/// digits, nothing else), so an overflowing or signed count is absent,
/// never a small number.
pub fn retry_count(data: &[u8]) {
    let read = wire::count(data);
    let expected = reference::digits(data, 9).and_then(|count| u32::try_from(count).ok());
    assert_eq!(read, expected, "reading {data:?}");
}

/// The whitespace `amz-sdk-request` allows around keys and values.
fn is_space(byte: u8) -> bool {
    byte == b' ' || byte == b'\t'
}

fn trim_spaces(text: &[u8]) -> &[u8] {
    let start = text
        .iter()
        .position(|b| !is_space(*b))
        .unwrap_or(text.len());
    let end = text
        .iter()
        .rposition(|b| !is_space(*b))
        .map_or(start, |last| last + 1);
    &text[start..end]
}

/// `amz-sdk-request` as its grammar says: `;`-separated `key=value` pairs,
/// spaces and tabs allowed around keys and values, and exactly one
/// `attempt` pair whose value is a count. Only ASCII is understood.
fn reference_amz_sdk_attempt(value: &[u8]) -> Option<u32> {
    if !value.is_ascii() {
        return None;
    }
    let mut attempts = value.split(|byte| *byte == b';').filter_map(|pair| {
        let equals = pair.iter().position(|byte| *byte == b'=')?;
        let (key, rest) = pair.split_at(equals);
        (trim_spaces(key) == b"attempt").then(|| trim_spaces(&rest[1..]))
    });
    let only = attempts.next()?;
    if attempts.next().is_some() {
        return None;
    }
    u32::try_from(reference::digits(only, 9)?).ok()
}

/// `amz-sdk-request`: the whole input is read as a value, and also decoded
/// into an attempt number placed among other pairs.
///
/// - The parser agrees with the grammar exactly (non-ASCII, other
///   whitespace, two `attempt` pairs or a malformed count are absent).
/// - A well-formed `attempt=N` among other pairs, in any position, is read
///   as N; a second `attempt` pair makes the value absent.
pub fn amz_sdk_request(data: &[u8]) {
    let read = wire::amz_sdk_attempt(data);
    assert_eq!(read, reference_amz_sdk_attempt(data), "reading {data:?}");

    let mut input = Input::new(data);
    let attempt = u32::try_from(input.u64() % 1_000_000_000).unwrap_or(0);
    let layout = input.u8();
    let pad = |bit: u8| if layout & bit != 0 { " " } else { "" };
    let pair = format!("attempt{}={}{attempt}", pad(1), pad(2));
    let value = match layout >> 2 & 3 {
        0 => pair.clone(),
        1 => format!("{pair};{}max=3", pad(16)),
        2 => format!("ttl=20240101T000000Z;{}{pair}", pad(32)),
        _ => format!("ttl=20240101T000000Z; {pair} ;max=3"),
    };
    assert_eq!(
        wire::amz_sdk_attempt(value.as_bytes()),
        Some(attempt),
        "{value:?}"
    );
    let twice = format!("{value}; attempt={attempt}");
    assert_eq!(wire::amz_sdk_attempt(twice.as_bytes()), None, "{twice:?}");
}
