//! [`WallClock`]: a civil date-time as written — year, month, day, hour, minute, second, nanosecond — with no zone
//! and no offset: what a family that reads each point's own time (its calendar fields: minute, hour, weekday,
//! day, month) takes from a request's `timestamps`. A stamp with an offset (`2017-04-19T23:30:00-05:00`) has hour
//! 23 (the clock as written, as pandas' `.dt` fields read a fixed-offset stamp), and `Z` changes nothing. There is
//! no zone conversion anywhere. The tables layer builds one from its jiff `civil::DateTime` with
//! [`WallClock::new`]; a JSON request's stamp is read by [`WallClock::parse`].

use std::fmt;

use crate::error::{Error, Result};

/// A civil date-time as written: no zone, no offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WallClock {
    year: u16,
    month: u8,
    day: u8,
    hour: u8,
    minute: u8,
    second: u8,
    nanosecond: u32,
}

/// Why a stamp is not a valid wall-clock time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StampError(String);

impl fmt::Display for StampError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl WallClock {
    /// A checked civil date-time: year 0–9999, a real day of that month (leap years proleptic Gregorian), hour
    /// 0–23, minute and second 0–59, nanosecond below 10⁹.
    pub fn new(
        year: i32,
        month: u32,
        day: u32,
        hour: u32,
        minute: u32,
        second: u32,
        nanosecond: u32,
    ) -> std::result::Result<Self, StampError> {
        let fail = |what: String| Err(StampError(what));
        if !(0..=9999).contains(&year) {
            return fail(format!("year {year} is outside 0000–9999"));
        }
        if !(1..=12).contains(&month) {
            return fail(format!("month {month} is not 1–12"));
        }
        let last = days_in_month(year, month);
        if !(1..=last).contains(&day) {
            return fail(format!("day {day} is not a day of {year:04}-{month:02} (1–{last})"));
        }
        if hour > 23 || minute > 59 || second > 59 {
            return fail(format!(
                "{hour:02}:{minute:02}:{second:02} is not a time of day (00:00:00–23:59:59)"
            ));
        }
        if nanosecond >= 1_000_000_000 {
            return fail(format!("{nanosecond} ns is not below one second"));
        }
        Ok(WallClock {
            year: year as u16,
            month: month as u8,
            day: day as u8,
            hour: hour as u8,
            minute: minute as u8,
            second: second as u8,
            nanosecond,
        })
    }

    /// Reads an ISO 8601 stamp as written: `YYYY-MM-DD`, then optionally `T` (or a space) and `HH:MM`,
    /// `:SS`, a fraction of 1–9 digits after `.` or `,`; then optionally `Z` or an offset `±HH:MM`, `±HHMM` or
    /// `±HH`, which is checked and ignored (the features are those of the clock as written, as pandas reads
    /// them).
    pub fn parse(text: &str) -> std::result::Result<Self, StampError> {
        let fail = |why: &str| {
            Err(StampError(format!(
                "`{text}` is not a timestamp: {why}; write YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS[.fff]] with an \
                 optional Z or ±HH:MM (the clock is read as written)"
            )))
        };
        let mut s = Cursor { b: text.as_bytes(), i: 0 };
        let Some(year) = s.digits(4) else { return fail("no 4-digit year") };
        let (Some(()), Some(month)) = (s.byte(b'-'), s.digits(2)) else { return fail("no -MM month") };
        let (Some(()), Some(day)) = (s.byte(b'-'), s.digits(2)) else { return fail("no -DD day") };
        let (mut hour, mut minute, mut second, mut nanosecond) = (0, 0, 0, 0);
        if s.byte(b'T').or_else(|| s.byte(b't')).or_else(|| s.byte(b' ')).is_some() {
            let (Some(h), Some(()), Some(m)) = (s.digits(2), s.byte(b':'), s.digits(2)) else {
                return fail("no HH:MM time after the date");
            };
            (hour, minute) = (h, m);
            if s.byte(b':').is_some() {
                let Some(sec) = s.digits(2) else { return fail("no 2-digit seconds after HH:MM:") };
                second = sec;
                if s.byte(b'.').or_else(|| s.byte(b',')).is_some() {
                    let Some(ns) = s.fraction() else {
                        return fail("the fraction of a second needs 1–9 digits");
                    };
                    nanosecond = ns;
                }
            }
        }
        if !s.offset() {
            return fail("unexpected text after the time (an offset is Z, ±HH:MM, ±HHMM or ±HH)");
        }
        WallClock::new(year as i32, month, day, hour, minute, second, nanosecond)
            .map_err(|e| StampError(format!("`{text}` is not a timestamp: {e}")))
    }

    /// [`WallClock::parse`] of row `row` of the series `at`, as a request error.
    pub fn parse_at(at: &str, row: usize, text: &str) -> Result<Self> {
        WallClock::parse(text).map_err(|e| Error::RequestSyntax {
            at: at.to_string(),
            message: format!("`timestamps` row {row}: {e}"),
        })
    }

    /// Monday 0 … Sunday 6 (proleptic Gregorian).
    pub fn weekday(&self) -> u8 {
        // day 0 of the count is 1970-01-01, a Thursday (3)
        (days_from_civil(i64::from(self.year), i64::from(self.month), i64::from(self.day)) + 3).rem_euclid(7)
            as u8
    }

    pub fn year(&self) -> i32 {
        i32::from(self.year)
    }
    pub fn month(&self) -> u8 {
        self.month
    }
    pub fn day(&self) -> u8 {
        self.day
    }
    pub fn hour(&self) -> u8 {
        self.hour
    }
    pub fn minute(&self) -> u8 {
        self.minute
    }
    pub fn second(&self) -> u8 {
        self.second
    }
    pub fn nanosecond(&self) -> u32 {
        self.nanosecond
    }
}

/// `YYYY-MM-DDTHH:MM:SS`, with the fraction of a second when there is one (`.5`, `.123456789`: its digits without
/// trailing zeros).
impl fmt::Display for WallClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )?;
        if self.nanosecond != 0 {
            let digits = format!("{:09}", self.nanosecond);
            write!(f, ".{}", digits.trim_end_matches('0'))?;
        }
        Ok(())
    }
}

/// Written as its [`Display`](fmt::Display) text.
impl serde::Serialize for WallClock {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

fn is_leap(year: i32) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: i32, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a proleptic Gregorian date (H. Hinnant's `days_from_civil`: years start in March so
/// the leap day is last, 400-year eras of 146097 days).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A byte cursor over the stamp.
struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn byte(&mut self, want: u8) -> Option<()> {
        (self.b.get(self.i) == Some(&want)).then(|| self.i += 1)
    }

    /// Exactly `n` ASCII digits.
    fn digits(&mut self, n: usize) -> Option<u32> {
        let d = self.b.get(self.i..self.i + n)?;
        if !d.iter().all(u8::is_ascii_digit) {
            return None;
        }
        self.i += n;
        Some(d.iter().fold(0, |v, &c| v * 10 + u32::from(c - b'0')))
    }

    /// 1–9 digits of a fraction of a second, as nanoseconds.
    fn fraction(&mut self) -> Option<u32> {
        let n = self.b[self.i..].iter().take_while(|c| c.is_ascii_digit()).count();
        if !(1..=9).contains(&n) {
            return None;
        }
        let v = self.digits(n)?;
        Some(v * 10u32.pow(9 - n as u32))
    }

    /// The rest is empty, `Z`, or a valid offset.
    fn offset(&mut self) -> bool {
        if self.byte(b'Z').or_else(|| self.byte(b'z')).is_some() {
            return self.i == self.b.len();
        }
        if self.byte(b'+').or_else(|| self.byte(b'-')).is_some() {
            let Some(h) = self.digits(2) else { return false };
            let m = if self.byte(b':').is_some() { self.digits(2) } else { self.digits(2).or(Some(0)) };
            return matches!(m, Some(m) if h <= 23 && m <= 59) && self.i == self.b.len();
        }
        self.i == self.b.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weekdays_over_four_centuries() {
        // 2000-01-03 was a Monday; consecutive days step the weekday by one, across leap days and centuries
        let mut d = days_from_civil(2000, 1, 3);
        assert_eq!((d + 3).rem_euclid(7), 0);
        for year in [1600, 1700, 1900, 2000, 2100, 2400] {
            let jan1 = days_from_civil(year, 1, 1);
            let next = days_from_civil(year + 1, 1, 1);
            assert_eq!(next - jan1, if is_leap(year as i32) { 366 } else { 365 }, "{year}");
        }
        for year in 1999..2002 {
            for month in 1..=12 {
                for day in 1..=days_in_month(year, month) {
                    let w = WallClock::new(year, month, day, 0, 0, 0, 0).unwrap();
                    let n = days_from_civil(year as i64, month as i64, day as i64);
                    assert_eq!(i64::from(w.weekday()), (n + 3).rem_euclid(7));
                    d = n;
                }
            }
        }
        assert_eq!(d, days_from_civil(2001, 12, 31));
        assert_eq!(WallClock::new(1, 1, 1, 0, 0, 0, 0).unwrap().weekday(), 0); // 0001-01-01: a Monday
        assert_eq!(WallClock::new(0, 3, 1, 0, 0, 0, 0).unwrap().weekday(), 2); // 0000-03-01: a Wednesday
    }

    #[test]
    fn parsing_reads_the_clock_as_written() {
        let p = |s: &str| WallClock::parse(s).unwrap();
        assert_eq!(p("2017-04-19T23:30:00-05:00"), p("2017-04-19T23:30:00"));
        assert_eq!(p("2017-04-19t23:30Z"), p("2017-04-19 23:30:00+0130"));
        assert_eq!(p("2017-04-19T23:30:00+09").hour(), 23);
        assert_eq!(p("2017-04-19T09:05:07,25").nanosecond(), 250_000_000);
        assert_eq!(p("2017-04-19T09:05:07.123456789").nanosecond(), 123_456_789);
        assert_eq!(p("2017-04-19"), WallClock::new(2017, 4, 19, 0, 0, 0, 0).unwrap());
        assert!(p("2017-04-19T09:00:00") < p("2017-04-19T09:00:00.000000001"));
        let t = p("2024-02-29T16:45:00");
        assert_eq!((t.minute(), t.hour(), t.weekday(), t.day(), t.month()), (45, 16, 3, 29, 2));
        // a Thursday
    }

    #[test]
    fn bad_stamps_say_why() {
        for (s, why) in [
            ("2017-4-19", "no -MM month"),
            ("17-04-19", "no 4-digit year"),
            ("2017-04-19T9:00", "no HH:MM time"),
            ("2017-04-19T09:00:5", "no 2-digit seconds"),
            ("2017-04-19T09:00:00.", "1–9 digits"),
            ("2017-04-19T09:00:00.1234567891", "1–9 digits"),
            ("2017-04-19T09:00:00+25:00", "unexpected text after the time"),
            ("2017-04-19T09:00:00 UTC", "unexpected text after the time"),
            ("2017-04-19T09:00:00Zx", "unexpected text"),
            ("2017-02-29", "day 29 is not a day of 2017-02 (1–28)"),
            ("1900-02-29", "day 29 is not a day of 1900-02"),
            ("2017-13-01", "month 13 is not 1–12"),
            ("2017-04-19T24:00:00", "24:00:00 is not a time of day"),
            ("2017-04-19T23:60", "is not a time of day"),
            ("", "no 4-digit year"),
            ("２０１７-04-19", "no 4-digit year"),
        ] {
            let e = WallClock::parse(s).unwrap_err().to_string();
            assert!(e.contains(why), "{s:?}: {e}");
            assert!(e.starts_with(&format!("`{s}` is not a timestamp")), "{e}");
        }
        assert!(WallClock::parse("2000-02-29").is_ok());
        let e = WallClock::parse_at("series AAPL", 12, "2017-02-30").unwrap_err();
        assert!(e.is_request_error());
        assert!(
            e.to_string().starts_with("series AAPL: `timestamps` row 12: `2017-02-30` is not a timestamp"),
            "{e}"
        );
    }

    #[test]
    fn display_round_trips() {
        for s in [
            "2017-04-19T09:05:07",
            "0001-01-01T00:00:00",
            "2024-02-29T23:59:59.5",
            "2024-02-29T23:59:59.000000001",
        ] {
            let t = WallClock::parse(s).unwrap();
            assert_eq!(t.to_string(), s);
            assert_eq!(WallClock::parse(&t.to_string()).unwrap(), t);
        }
        assert_eq!(WallClock::parse("2017-04-19").unwrap().to_string(), "2017-04-19T00:00:00");
        let json = serde_json::to_string(&WallClock::parse("2017-04-19T09:00Z").unwrap()).unwrap();
        assert_eq!(json, "\"2017-04-19T09:00:00\"");
    }
}
