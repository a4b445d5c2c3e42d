//! The load feedback: `shed-load`.

use std::collections::HashMap;

use shed_core::wire::{self, LoadReport};
use shed_core::Level;

use super::input::Input;
use super::reference;

/// The five members a report must carry, each exactly once.
const MEMBERS: [&str; 5] = ["ranks", "cohorts", "in-flight", "limit", "queued"];

/// `shed-load` as its grammar says: comma-separated `key=1*9DIGIT`
/// members, spaces and tabs around them, keys of lowercase letters, digits
/// and `-` starting with a letter; each of the five known members exactly
/// once, others skipped; ranks below 8, cohorts below 128.
fn reference_load_report(value: &[u8]) -> Option<LoadReport> {
    let text = std::str::from_utf8(value).ok()?;
    let mut found: HashMap<&str, u32> = HashMap::new();
    for member in text.split(',') {
        let member = member.trim_matches(|c| c == ' ' || c == '\t');
        let (key, number) = member.split_once('=')?;
        let mut chars = key.chars();
        let first = chars.next()?;
        let key_ok = first.is_ascii_lowercase()
            && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !key_ok {
            return None;
        }
        let number = u32::try_from(reference::digits(number.as_bytes(), 9)?).ok()?;
        if MEMBERS.contains(&key) && found.insert(key, number).is_some() {
            return None;
        }
    }
    let ranks = *found.get("ranks")?;
    let cohorts = *found.get("cohorts")?;
    if ranks >= 8 || cohorts >= 128 {
        return None;
    }
    Some(LoadReport {
        level: Level::new(u16::try_from(ranks * 128 + cohorts).ok()?),
        in_flight: *found.get("in-flight")?,
        limit: *found.get("limit")?,
        queued: *found.get("queued")?,
    })
}

/// `shed-load`: the whole input is read as a value, and also decoded into a
/// report that is written and read back.
///
/// - The parser agrees with the grammar exactly.
/// - A written report is at most 76 bytes, and reads back as the report
///   with its counts capped at 999,999,999.
pub fn load_report(data: &[u8]) {
    let read = wire::load_report(data);
    assert_eq!(read, reference_load_report(data), "reading {data:?}");

    let mut input = Input::new(data);
    let level = Level::new((input.u64() % 1024) as u16);
    let mut count = || u32::try_from(input.u64() % (1 << 32)).unwrap_or(u32::MAX);
    let report = LoadReport {
        level,
        in_flight: count(),
        limit: count(),
        queued: count(),
    };
    let text = wire::format_load_report(&report);
    assert!(text.as_str().len() <= 76, "{text}");
    let cap = |count: u32| count.min(999_999_999);
    let expected = LoadReport {
        level,
        in_flight: cap(report.in_flight),
        limit: cap(report.limit),
        queued: cap(report.queued),
    };
    assert_eq!(wire::load_report(text.as_ref()), Some(expected), "{text}");
}
