//! Reference readings, written from the grammars rather than from the
//! parsers, which the parsers must agree with exactly.

/// `1*max_digits DIGIT` read by the standard library: `None` unless every
/// byte is an ASCII digit (`str::parse` alone would take a leading `+`).
pub(crate) fn digits(value: &[u8], max_digits: usize) -> Option<u64> {
    if value.len() > max_digits {
        return None;
    }
    number(value)?
}

/// `1*DIGIT` of any length: `None` when it is not `1*DIGIT`, `Some(None)`
/// when the number is beyond `u64`, else its value.
pub(crate) fn number(value: &[u8]) -> Option<Option<u64>> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let first = value.iter().position(|digit| *digit != b'0');
    let significant = first.map_or(&b""[..], |first| &value[first..]);
    if significant.is_empty() {
        return Some(Some(0));
    }
    let text = std::str::from_utf8(significant).ok()?;
    Some(text.parse().ok())
}

/// The value with the ASCII whitespace the delay hints allow around them
/// (space, tab, line feed, form feed, carriage return) removed.
pub(crate) fn trim(value: &[u8]) -> &[u8] {
    let is_space = |byte: &u8| matches!(byte, b' ' | b'\t' | b'\n' | b'\r' | b'\x0c');
    let start = value
        .iter()
        .position(|byte| !is_space(byte))
        .unwrap_or(value.len());
    let end = value
        .iter()
        .rposition(|byte| !is_space(byte))
        .map_or(start, |last| last + 1);
    &value[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_reads_any_length_and_tells_overflow() {
        assert_eq!(number(b"0000000000000000000000000"), Some(Some(0)));
        assert_eq!(number(b"000000000000000000000000042"), Some(Some(42)));
        assert_eq!(number(b"18446744073709551615"), Some(Some(u64::MAX)));
        assert_eq!(number(b"18446744073709551616"), Some(None));
        assert_eq!(number(b"+1"), None);
        assert_eq!(digits(b"123456789", 8), None);
    }

    #[test]
    fn trim_removes_only_the_allowed_whitespace() {
        assert_eq!(trim(b" \t5\r\n"), b"5");
        assert_eq!(trim(b"\x0b5"), b"\x0b5");
        assert_eq!(trim(b"   "), b"");
    }
}
