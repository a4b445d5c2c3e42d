//! The one strict decimal reader every wire parser is built on.

/// A run of ASCII digits, read strictly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Number {
    /// `1*DIGIT` that fits a `u64` (leading zeros allowed).
    Value(u64),
    /// `1*DIGIT` too large for a `u64`.
    Overflow,
    /// Empty, or any byte that is not an ASCII digit (signs, spaces, dots,
    /// exponents, non-ASCII digits).
    Malformed,
}

/// Reads `1*DIGIT`, nothing else.
pub(crate) fn decimal(value: &[u8]) -> Number {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return Number::Malformed;
    }
    let parsed = value.iter().try_fold(0u64, |total, digit| {
        total.checked_mul(10)?.checked_add(u64::from(digit - b'0'))
    });
    parsed.map_or(Number::Overflow, Number::Value)
}

/// Reads `1*max_digits DIGIT`: `None` when malformed or longer than
/// `max_digits` (at most 19, so the value always fits a `u64`).
pub(crate) fn at_most(value: &[u8], max_digits: usize) -> Option<u64> {
    if value.len() > max_digits.min(19) {
        return None;
    }
    match decimal(value) {
        Number::Value(value) => Some(value),
        Number::Overflow | Number::Malformed => None,
    }
}

/// `text` without the optional whitespace (RFC 9110's OWS: spaces and
/// tabs) around it.
pub(crate) fn trim_ows(mut text: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = text {
        text = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = text {
        text = rest;
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_reads_digits_and_leading_zeros() {
        assert_eq!(decimal(b"0"), Number::Value(0));
        assert_eq!(decimal(b"000042"), Number::Value(42));
        assert_eq!(decimal(b"18446744073709551615"), Number::Value(u64::MAX));
    }

    #[test]
    fn decimal_tells_overflow_from_malformed() {
        assert_eq!(decimal(b"18446744073709551616"), Number::Overflow);
        assert_eq!(decimal(b"99999999999999999999999"), Number::Overflow);
        for text in ["", "-1", "+1", " 1", "1 ", "1.5", "1e3", "٣"] {
            assert_eq!(decimal(text.as_bytes()), Number::Malformed, "{text:?}");
        }
    }

    #[test]
    fn at_most_refuses_values_longer_than_the_limit_even_with_leading_zeros() {
        assert_eq!(at_most(b"12345678", 8), Some(12_345_678));
        assert_eq!(at_most(b"123456789", 8), None);
        assert_eq!(at_most(b"000000001", 8), None);
        assert_eq!(
            at_most(b"9999999999999999999", 19),
            Some(9_999_999_999_999_999_999)
        );
    }
}
