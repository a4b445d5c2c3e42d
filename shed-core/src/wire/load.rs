//! Load feedback: the `shed-load` statement a server puts on its answers,
//! so callers can shed before sending (DAGOR) and balancers can weigh
//! replicas.

use std::fmt;

use super::attempt::count;
use super::number::trim_ows;
use crate::{Cohort, Level, Rank};

/// The largest count [`format_load_report`] writes: nine digits, the most
/// [`count`] reads back.
const MAX_COUNT: u32 = 999_999_999;

/// The longest value [`format_load_report`] writes:
/// `ranks=7, cohorts=127, in-flight=999999999, limit=999999999, queued=999999999`.
const MAX_LEN: usize = 76;

/// A replica's state as its answers state it in `shed-load`: what it sheds
/// and how loaded it is against its limit.
///
/// ```
/// use shed_core::wire::{self, LoadReport};
/// use shed_core::{Class, Level, Rank};
///
/// let report = LoadReport { level: Level::new(2 * 128 + 32), in_flight: 60, limit: 64, queued: 17 };
/// let text = wire::format_load_report(&report);
/// assert_eq!(text.as_str(), "ranks=2, cohorts=32, in-flight=60, limit=64, queued=17");
/// assert_eq!(wire::load_report(text.as_ref()), Some(report));
/// // Batch and background retries are shed whole, a quarter of the
/// // interactive retries, and nothing else.
/// assert_eq!(report.level.share_shed(Rank::retry(Class::Batch)), 1.0);
/// assert_eq!(report.level.share_shed(Rank::retry(Class::Interactive)), 0.25);
/// assert_eq!(report.level.share_shed(Rank::original(Class::Background)), 0.0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LoadReport {
    /// The admission level: which ranks are shed, and how much of the
    /// rank it cuts into.
    pub level: Level,
    /// Requests holding a slot.
    pub in_flight: u32,
    /// The concurrency limit.
    pub limit: u32,
    /// Requests waiting for a slot, all ranks together.
    pub queued: u32,
}

/// Reads a `shed-load` value, such as
/// `ranks=2, cohorts=32, in-flight=60, limit=64, queued=17`.
///
/// The grammar, a subset of an RFC 8941 dictionary of integers:
///
/// ```text
/// value  = member *( OWS "," OWS member )      ; OWS = *( SP / HTAB )
/// member = key "=" 1*9DIGIT
/// key    = lcalpha *( lcalpha / DIGIT / "-" )
/// ```
///
/// - `ranks` (0 to 7): how many ranks, first shed first, are refused whole
///   ([`Rank::ALL`]`[..ranks]`);
/// - `cohorts` (0 to 127): how many of the 128 cohorts of the next rank
///   are refused;
/// - `in-flight`, `limit`, `queued`: as [`LoadReport`] says.
///
/// Each of the five must appear exactly once; members with other keys are
/// skipped, so a later server may add some. `None` for anything else:
/// a missing or repeated member, a rank or cohort out of range, a count of
/// more than nine digits, empty members, other whitespace, non-ASCII.
///
/// ```
/// use shed_core::wire::load_report;
///
/// let report = load_report(b"ranks=0, cohorts=0, in-flight=3, limit=64, queued=0").unwrap();
/// assert_eq!((report.in_flight, report.limit), (3, 64));
/// assert!(load_report(b"queued=0,limit=64,in-flight=3,cohorts=0,ranks=0,cpu=12").is_some());
/// assert_eq!(load_report(b"ranks=8, cohorts=0, in-flight=3, limit=64, queued=0"), None);
/// assert_eq!(load_report(b"ranks=0, in-flight=3, limit=64, queued=0"), None);
/// ```
#[must_use]
pub fn load_report(value: &[u8]) -> Option<LoadReport> {
    let mut members = Members::default();
    for member in value.split(|byte| *byte == b',') {
        let member = trim_ows(member);
        let equals = member.iter().position(|byte| *byte == b'=')?;
        let (key, number) = (&member[..equals], &member[equals + 1..]);
        if !is_key(key) {
            return None;
        }
        let number = count(number)?;
        let slot = match key {
            b"ranks" => &mut members.ranks,
            b"cohorts" => &mut members.cohorts,
            b"in-flight" => &mut members.in_flight,
            b"limit" => &mut members.limit,
            b"queued" => &mut members.queued,
            _ => continue,
        };
        if slot.replace(number).is_some() {
            return None;
        }
    }
    members.report()
}

/// The five members, as found.
#[derive(Default)]
struct Members {
    ranks: Option<u32>,
    cohorts: Option<u32>,
    in_flight: Option<u32>,
    limit: Option<u32>,
    queued: Option<u32>,
}

impl Members {
    fn report(self) -> Option<LoadReport> {
        let ranks = u16::try_from(self.ranks?)
            .ok()
            .filter(|ranks| usize::from(*ranks) < Rank::COUNT)?;
        let cohorts = u16::try_from(self.cohorts?)
            .ok()
            .filter(|cohorts| *cohorts < Cohort::COUNT)?;
        Some(LoadReport {
            level: Level::new(ranks * Cohort::COUNT + cohorts),
            in_flight: self.in_flight?,
            limit: self.limit?,
            queued: self.queued?,
        })
    }
}

/// `lcalpha *( lcalpha / DIGIT / "-" )`.
fn is_key(key: &[u8]) -> bool {
    match key {
        [first, rest @ ..] => {
            first.is_ascii_lowercase()
                && rest
                    .iter()
                    .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || *byte == b'-')
        }
        [] => false,
    }
}

/// Writes `report` as a `shed-load` value, in the one form
/// [`load_report`] reads back: `ranks=R, cohorts=C, in-flight=F, limit=L,
/// queued=Q`. Counts above 999,999,999 are written as 999,999,999.
///
/// ```
/// use shed_core::wire::{format_load_report, LoadReport};
///
/// let idle = LoadReport { limit: 64, ..LoadReport::default() };
/// assert_eq!(format_load_report(&idle).as_str(), "ranks=0, cohorts=0, in-flight=0, limit=64, queued=0");
/// ```
#[must_use]
pub fn format_load_report(report: &LoadReport) -> LoadReportText {
    let (rank, cohorts) = report.level.boundary();
    let mut text = LoadReportText {
        text: [0; MAX_LEN],
        len: 0,
    };
    for (name, number) in [
        ("ranks=", rank.index() as u32),
        (", cohorts=", u32::from(cohorts)),
        (", in-flight=", report.in_flight),
        (", limit=", report.limit),
        (", queued=", report.queued),
    ] {
        text.push(name.as_bytes());
        text.push_decimal(number.min(MAX_COUNT));
    }
    text
}

/// A `shed-load` value written by [`format_load_report`], held inline (at
/// most 76 ASCII bytes), so writing one allocates nothing; it is always a
/// valid header value.
///
/// ```
/// use shed_core::wire::{format_load_report, LoadReport};
///
/// let text = format_load_report(&LoadReport::default());
/// assert_eq!(format!("shed-load: {text}"), "shed-load: ranks=0, cohorts=0, in-flight=0, limit=0, queued=0");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct LoadReportText {
    text: [u8; MAX_LEN],
    len: u8,
}

impl LoadReportText {
    /// The value as text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        // Only ASCII names, digits, commas and spaces are ever written.
        std::str::from_utf8(self.as_bytes()).unwrap_or_default()
    }

    fn as_bytes(&self) -> &[u8] {
        &self.text[..usize::from(self.len)]
    }

    /// Appends `piece`; the longest value fits (see `MAX_LEN`).
    fn push(&mut self, piece: &[u8]) {
        let start = usize::from(self.len);
        let end = start + piece.len();
        self.text[start..end].copy_from_slice(piece);
        // At most MAX_LEN, which fits a u8.
        self.len = end as u8;
    }

    fn push_decimal(&mut self, mut n: u32) {
        let mut digits = [0u8; 10];
        let mut first = digits.len();
        loop {
            first -= 1;
            digits[first] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.push(&digits[first..]);
    }
}

impl AsRef<str> for LoadReportText {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<[u8]> for LoadReportText {
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl fmt::Display for LoadReportText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for LoadReportText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(level: u16, in_flight: u32, limit: u32, queued: u32) -> LoadReport {
        LoadReport {
            level: Level::new(level),
            in_flight,
            limit,
            queued,
        }
    }

    #[test]
    fn a_written_report_reads_back() {
        for level in [0, 1, 127, 128, 300, Level::MAX.get()] {
            for count in [0, 1, 64, MAX_COUNT] {
                let sent = report(level, count, count, count);
                let text = format_load_report(&sent);
                assert_eq!(load_report(text.as_ref()), Some(sent), "{text}");
            }
        }
    }

    #[test]
    fn the_level_is_written_in_rank_terms() {
        let text = format_load_report(&report(2 * 128 + 32, 60, 64, 17));
        assert_eq!(
            text.as_str(),
            "ranks=2, cohorts=32, in-flight=60, limit=64, queued=17"
        );
    }

    #[test]
    fn the_longest_report_fits_its_buffer() {
        let longest = report(Level::MAX.get(), u32::MAX, u32::MAX, u32::MAX);
        let text = format_load_report(&longest);
        assert_eq!(text.as_str().len(), MAX_LEN);
        assert_eq!(
            load_report(text.as_ref()).map(|read| read.in_flight),
            Some(MAX_COUNT)
        );
    }

    #[test]
    fn members_may_come_in_any_order_with_optional_whitespace() {
        let read = load_report(b"queued=5,\tlimit=64 ,in-flight=3,cohorts=1,  ranks=0");
        assert_eq!(read, Some(report(1, 3, 64, 5)));
    }

    #[test]
    fn unknown_members_are_skipped() {
        let read = load_report(b"ranks=1, cohorts=0, in-flight=3, limit=64, queued=5, cpu=80");
        assert_eq!(read, Some(report(128, 3, 64, 5)));
    }

    #[test]
    fn malformed_reports_are_absent() {
        for text in [
            &b""[..],
            b" ",
            b"ranks=0",
            b"ranks=0, cohorts=0, in-flight=3, limit=64",
            b"ranks=0, cohorts=0, in-flight=3, limit=64, queued=5,",
            b",ranks=0, cohorts=0, in-flight=3, limit=64, queued=5",
            b"ranks=0, ranks=0, cohorts=0, in-flight=3, limit=64, queued=5",
            b"ranks=8, cohorts=0, in-flight=3, limit=64, queued=5",
            b"ranks=0, cohorts=128, in-flight=3, limit=64, queued=5",
            b"ranks=0, cohorts=0, in-flight=-3, limit=64, queued=5",
            b"ranks=0, cohorts=0, in-flight=1234567890, limit=64, queued=5",
            b"ranks=0, cohorts=0, in-flight=3, limit=64, queued=5, cpu=0.8",
            b"ranks=0, cohorts=0, in-flight=3, limit=64, queued=5, Cpu=1",
            b"ranks=0, cohorts=0, in-flight=3, limit=64, queued=5, =1",
            b"ranks=0, cohorts=0, in-flight=3, limit=64, queued=5, cpu",
            b"Ranks=0, cohorts=0, in-flight=3, limit=64, queued=5",
            b"ranks = 0, cohorts=0, in-flight=3, limit=64, queued=5",
            b"ranks=0;cohorts=0, in-flight=3, limit=64, queued=5",
            b"ranks=0,\ncohorts=0, in-flight=3, limit=64, queued=5",
            b"ranks=0, cohorts=0, in-flight=3, limit=64, queued=5\xc2\xa0",
        ] {
            assert_eq!(
                load_report(text),
                None,
                "{:?}",
                String::from_utf8_lossy(text)
            );
        }
    }
}
