//! HTTP-dates written from first principles (RFC 9110 section 5.6.7), to
//! check the parser against: the three forms of one instant.

/// The last second an HTTP-date can name: 9999-12-31T23:59:59Z.
pub(crate) const LAST_SECOND: u64 = 253_402_300_799;

const WEEKDAYS: [&str; 7] = [
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];
/// Days in 400 Gregorian years, a whole number of weeks.
const DAYS_PER_400_YEARS: u64 = 146_097;

/// A calendar instant in UTC, to the second.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Civil {
    year: u64,
    /// 0 = January.
    month: usize,
    /// 1 to 31.
    day: u64,
    /// 0 = Thursday (1970-01-01 was one).
    weekday: usize,
    hour: u64,
    minute: u64,
    second: u64,
}

fn is_leap(year: u64) -> bool {
    year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400))
}

fn days_in_year(year: u64) -> u64 {
    if is_leap(year) {
        366
    } else {
        365
    }
}

fn days_in_month(year: u64, month: usize) -> u64 {
    match month {
        1 if is_leap(year) => 29,
        1 => 28,
        3 | 5 | 8 | 10 => 30,
        _ => 31,
    }
}

impl Civil {
    /// The instant `seconds` after 1970-01-01T00:00:00Z.
    pub(crate) fn at(seconds: u64) -> Civil {
        let mut days = seconds / 86_400;
        let in_day = seconds % 86_400;
        let weekday = (days % 7) as usize;
        // Whole 400-year cycles, then years, then months.
        let mut year = 1970 + 400 * (days / DAYS_PER_400_YEARS);
        days %= DAYS_PER_400_YEARS;
        while days >= days_in_year(year) {
            days -= days_in_year(year);
            year += 1;
        }
        let mut month = 0;
        while days >= days_in_month(year, month) {
            days -= days_in_month(year, month);
            month += 1;
        }
        Civil {
            year,
            month,
            day: days + 1,
            weekday,
            hour: in_day / 3_600,
            minute: in_day / 60 % 60,
            second: in_day % 60,
        }
    }

    fn short_weekday(&self) -> &'static str {
        &WEEKDAYS[self.weekday][..3]
    }

    fn time(&self) -> String {
        format!("{:02}:{:02}:{:02}", self.hour, self.minute, self.second)
    }

    /// `Sun, 06 Nov 1994 08:49:37 GMT`.
    pub(crate) fn imf_fixdate(&self) -> String {
        format!(
            "{}, {:02} {} {:04} {} GMT",
            self.short_weekday(),
            self.day,
            MONTHS[self.month],
            self.year,
            self.time()
        )
    }

    /// `Sunday, 06-Nov-94 08:49:37 GMT`, for the years a two-digit year
    /// names (1970 to 2069, as RFC 9110 asks recipients to read them).
    pub(crate) fn rfc850(&self) -> Option<String> {
        (1970..2070).contains(&self.year).then(|| {
            format!(
                "{}, {:02}-{}-{:02} {} GMT",
                WEEKDAYS[self.weekday],
                self.day,
                MONTHS[self.month],
                self.year % 100,
                self.time()
            )
        })
    }

    /// `Sun Nov  6 08:49:37 1994` (the day padded with a space).
    pub(crate) fn asctime(&self) -> String {
        self.asctime_with_day(format!("{:>2}", self.day))
    }

    fn asctime_with_day(&self, day: String) -> String {
        format!(
            "{} {} {day} {} {:04}",
            self.short_weekday(),
            MONTHS[self.month],
            self.time(),
            self.year
        )
    }

    /// Every spelling of this instant a recipient may accept: the three
    /// forms, and asctime with a zero-padded day, which parsers commonly
    /// take too.
    pub(crate) fn spellings(&self) -> Vec<String> {
        let mut all = vec![self.imf_fixdate(), self.asctime()];
        all.extend(self.rfc850());
        if self.day < 10 {
            all.push(self.asctime_with_day(format!("{:02}", self.day)));
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_forms_of_rfc_9110s_example() {
        let example = Civil::at(784_111_777);
        assert_eq!(example.imf_fixdate(), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(example.rfc850().unwrap(), "Sunday, 06-Nov-94 08:49:37 GMT");
        assert_eq!(example.asctime(), "Sun Nov  6 08:49:37 1994");
    }

    #[test]
    fn leap_days_and_the_last_nameable_second() {
        assert_eq!(
            Civil::at(951_782_400).imf_fixdate(),
            "Tue, 29 Feb 2000 00:00:00 GMT"
        );
        assert_eq!(
            Civil::at(LAST_SECOND).imf_fixdate(),
            "Fri, 31 Dec 9999 23:59:59 GMT"
        );
        assert_eq!(
            Civil::at(0).rfc850().unwrap(),
            "Thursday, 01-Jan-70 00:00:00 GMT"
        );
    }
}
