//! Unit tests of session calendars: inference, walks across daylight saving time, holidays, descriptions.

use super::super::axis::TimeAxis;
use super::super::timestamps::{parse_text, EpochUnit, Freq, MonthAnchor};
use super::*;

const HOUR: i128 = 3_600 * NANOS_PER_SECOND;

fn p(s: &str) -> Stamp {
    parse_text(s, EpochUnit::Seconds).unwrap()
}

fn no_holidays() -> Arc<BTreeSet<i64>> {
    Arc::new(BTreeSet::new())
}

/// Weekdays from `start` for `days` calendar days, leaving out `skip`.
fn trading_days(start: &str, days: i64, skip: &[&str]) -> Vec<Stamp> {
    let d0: Date = start.parse().unwrap();
    (0..days)
        .map(|i| d0.checked_add(jiff::Span::new().days(i)).unwrap())
        .filter(|d| d.weekday().to_monday_zero_offset() < 5)
        .map(|d| d.to_string())
        .filter(|d| !skip.contains(&d.as_str()))
        .map(|d| p(&d))
        .collect()
}

fn session(stamps: &[Stamp], step: i128) -> Calendar {
    match infer(stamps, step, Zone::Fixed(Offset::UTC), &no_holidays()).unwrap() {
        Inferred::Session(c) => c,
        Inferred::Continuous(why) => panic!("continuous: {why}"),
    }
}

fn axis(stamps: &[Stamp], cal: Calendar) -> TimeAxis {
    TimeAxis {
        last: *stamps.last().unwrap(),
        freq: Freq::Fixed(cal.step()),
        anchor: MonthAnchor::End,
        calendar: Some(Arc::new(cal)),
        off_session: Arc::from([]),
    }
}

/// Hourly FX bars, Sunday 17:00 to Friday 17:00 New York time, between two UTC instants, written with the
/// New York offset of each bar.
fn fx_bars(from: &str, to: &str) -> Vec<Stamp> {
    let ny = TimeZone::get("America/New_York").unwrap();
    let (a, b) = (p(from).at.as_nanosecond(), p(to).at.as_nanosecond());
    (0..)
        .map(|i| a + i * HOUR)
        .take_while(|&t| t <= b)
        .filter_map(|t| {
            let at = Timestamp::from_nanosecond(t).unwrap();
            let local = ny.to_datetime(at);
            let (wd, h) = (local.weekday().to_monday_zero_offset(), local.hour());
            let open = matches!((wd, h), (6, 17..) | (0..=3, _) | (4, ..=16));
            open.then(|| Stamp { at, offset: ny.to_offset(at), style: StampStyle::Offset })
        })
        .collect()
}

#[test]
fn daily_trading_days_are_weekdays_and_continue_on_monday() {
    // 2024-01-01 is a Monday; 1 February is a holiday-like gap inside the session.
    let stamps = trading_days("2024-01-01", 40, &["2024-02-01"]);
    let cal = session(&stamps, DAY);
    assert_eq!(cal.describe(), "weekdays Mon–Fri");
    // the grid counts weekdays only: 40 days from Monday hold 30 weekdays (the gap is one of them)
    let pos = positions(&stamps, &cal, 1_000, false).unwrap();
    assert_eq!((pos.len(), pos.last().copied()), (29, Some(29)));
    let a = axis(&stamps, cal);
    assert_eq!(a.last.to_text(), "2024-02-09"); // a Friday
    let future: Vec<String> = a.future(3).unwrap().iter().map(|s| s.to_text()).collect();
    assert_eq!(future, ["2024-02-12", "2024-02-13", "2024-02-14"]);
    let back: Vec<String> = (-6..=-4).map(|k| a.at(k).unwrap().to_text()).collect();
    assert_eq!(back, ["2024-02-01", "2024-02-02", "2024-02-05"]);
}

#[test]
fn short_coarse_misaligned_and_odd_step_series_stay_continuous() {
    let short = trading_days("2024-01-01", 26, &[]);
    let why =
        |stamps: &[Stamp], step: i128| match infer(stamps, step, Zone::Fixed(Offset::UTC), &no_holidays()) {
            Ok(Inferred::Continuous(why)) => why,
            other => panic!("{other:?}"),
        };
    assert!(why(&short, DAY).contains("fewer than 4 complete weeks"));
    // 28 days from a Monday: exactly 4 complete weeks
    assert!(matches!(
        infer(&trading_days("2024-01-01", 29, &[]), DAY, Zone::Fixed(Offset::UTC), &no_holidays()),
        Ok(Inferred::Session(_))
    ));
    let seven_hours: Vec<Stamp> = (0..200).map(|i| p(&(1_700_000_000 + i * 7 * 3_600).to_string())).collect();
    assert!(why(&seven_hours, 7 * HOUR).contains("step"));
    let weekly: Vec<Stamp> = (0..40).map(|i| p(&(1_700_000_000 + i * 7 * 86_400).to_string())).collect();
    assert!(why(&weekly, WEEK).contains("step"));
    let mut hourly: Vec<Stamp> = (0..1_000).map(|i| p(&(1_700_000_000 + i * 3_600).to_string())).collect();
    hourly[500] = p(&(1_700_000_000 + 500 * 3_600 + 60).to_string());
    assert!(why(&hourly, HOUR).contains("same time past the step"));
}

#[test]
fn a_slot_is_open_when_observed_in_half_the_complete_weeks() {
    // Mondays observed in 3 of 6 complete weeks: open, the other Mondays are missing points.
    let skip = ["2024-01-08", "2024-01-22", "2024-02-05"];
    let half = trading_days("2024-01-01", 49, &skip);
    let cal = session(&half, DAY);
    assert_eq!(cal.describe(), "weekdays Mon–Fri");
    // Mondays in 2 of 6: closed, and the two Mondays observed are then off the session: continuous.
    let less = trading_days("2024-01-01", 49, &["2024-01-08", "2024-01-22", "2024-01-29", "2024-02-05"]);
    match infer(&less, DAY, Zone::Fixed(Offset::UTC), &no_holidays()).unwrap() {
        Inferred::Continuous(why) => {
            assert!(why.contains("is in a slot the calendar has closed"), "{why}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn rows_without_a_weekly_pattern_stay_continuous() {
    // One row every 8 days for a year: every weekday is seen in fewer than half the weeks.
    let sparse: Vec<Stamp> = (0..46).map(|i| p(&(1_704_067_200 + i * 8 * 86_400).to_string())).collect();
    match infer(&sparse, DAY, Zone::Fixed(Offset::UTC), &no_holidays()).unwrap() {
        Inferred::Continuous(why) => assert!(why.contains("no slot is observed in half"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_calendar_without_an_open_slot_is_refused() {
    let e = Calendar::new(DAY, 0, vec![false; 7], no_holidays(), Zone::Fixed(Offset::UTC)).unwrap_err();
    assert_eq!(e, CalendarError::Empty);
    assert!(e.to_string().contains("no open slot") && e.to_string().contains("--calendar continuous"));
    let e = Calendar::weekdays(7 * HOUR, 0, no_holidays(), Zone::Fixed(Offset::UTC)).unwrap_err();
    assert!(e.to_string().contains("divides one day") && e.to_string().contains("7 hours"), "{e}");
}

#[test]
fn fx_week_follows_new_york_across_the_march_2024_dst_change() {
    // Sunday 3 March 2024 to Thursday 4 April: the US clocks moved on Sunday 10 March.
    let bars = fx_bars("2024-03-03T00:00:00Z", "2024-04-05T00:00:00Z");
    let ny = Zone::Named(TimeZone::get("America/New_York").unwrap());
    let Inferred::Session(cal) = infer(&bars, HOUR, ny, &no_holidays()).unwrap() else {
        panic!("continuous")
    };
    assert_eq!(cal.describe(), "Sun 17:00 – Fri 17:00 America/New_York, 1 hour");
    // Every weekend is closed time: the grid has no missing point.
    let pos = positions(&bars, &cal, 10_000, false).unwrap();
    assert_eq!(*pos.last().unwrap() + 1, bars.len());
    assert_eq!(bars.len(), 4 * 120 + 7 + 72 + 21); // four whole weeks, then Sunday 31st 17:00 to Thursday 4th 20:00
                                                   // Friday 8 March 16:00 EST (21:00Z) is followed by Sunday 10 March 17:00 EDT (21:00Z), not 22:00Z.
    let fri = p("2024-03-08T16:00:00-05:00").at.as_nanosecond();
    assert_eq!(cal.next_after(fri), Some(p("2024-03-10T21:00:00Z").at.as_nanosecond()));
    // ... and in November the open moves back to 22:00Z.
    let fri = p("2024-11-01T16:00:00-04:00").at.as_nanosecond();
    assert_eq!(cal.next_after(fri), Some(p("2024-11-03T22:00:00Z").at.as_nanosecond()));
    assert_eq!(cal.last_before(p("2024-11-03T22:00:00Z").at.as_nanosecond()), Some(fri));
    // Future timestamps carry New York's offset of their own date.
    let a =
        axis(&bars[..bars.iter().position(|s| s.to_text() == "2024-03-08T16:00:00-05:00").unwrap() + 1], cal);
    let f: Vec<String> = a.future(2).unwrap().iter().map(|s| s.to_text()).collect();
    assert_eq!(f, ["2024-03-10T17:00:00-04:00", "2024-03-10T18:00:00-04:00"]);
}

#[test]
fn fx_bars_written_with_changing_offsets_keep_their_session_without_a_zone() {
    let bars = fx_bars("2024-03-03T00:00:00Z", "2024-04-05T00:00:00Z");
    let zone = series_zone(&bars, &CalendarOptions::default());
    assert!(matches!(zone, Zone::Written(ref c) if c.len() == 2), "{zone:?}");
    let Inferred::Session(cal) = infer(&bars, HOUR, zone, &no_holidays()).unwrap() else {
        panic!("continuous")
    };
    assert_eq!(cal.describe(), "Sun 17:00 – Fri 17:00 (the timestamps' offsets), 1 hour");
    let pos = positions(&bars, &cal, 10_000, false).unwrap();
    assert_eq!(*pos.last().unwrap() + 1, bars.len());
    let fri = p("2024-03-08T16:00:00-05:00").at.as_nanosecond();
    assert_eq!(cal.next_after(fri), Some(p("2024-03-10T21:00:00Z").at.as_nanosecond()));
    assert_eq!(cal.last_before(p("2024-03-10T21:00:00Z").at.as_nanosecond()), Some(fri));
}

#[test]
fn every_slot_in_a_named_zone_walks_the_repeated_hour_twice() {
    let ny = Zone::Named(TimeZone::get("America/New_York").unwrap());
    let open = vec![true; 7 * 24];
    let cal = Calendar::new(HOUR, 0, open, no_holidays(), ny).unwrap();
    assert!(cal.every_slot());
    assert_eq!(cal.describe(), "every slot, 1 hour");
    // 3 November 2024: 01:00 happens twice; hourly UTC instants all stay on the grid.
    let start = p("2024-11-03T03:00:00Z").at.as_nanosecond();
    let walked: Vec<i128> = (1..=5).map(|k| cal.step_from(start, k).unwrap()).collect();
    assert_eq!(walked, (1..=5).map(|k| start + k * HOUR).collect::<Vec<_>>());
    // a half-hour step: the repeated half hours come in instant order
    let cal = Calendar::new(HOUR / 2, 0, vec![true; 7 * 48], no_holidays(), cal.zone.clone()).unwrap();
    let walked: Vec<i128> = (1..=6).map(|k| cal.step_from(start, k).unwrap()).collect();
    assert_eq!(walked, (1..=6).map(|k| start + k * HOUR / 2).collect::<Vec<_>>());
    // 10 March 2024: 02:00 New York does not exist; a daily local-midnight step is 23 hours long.
    let daily = Calendar::new(DAY, 0, vec![true; 7], no_holidays(), cal.zone.clone()).unwrap();
    let sat = p("2024-03-09T05:00:00Z").at.as_nanosecond(); // Saturday midnight EST
    assert_eq!(daily.next_after(sat), Some(sat + DAY));
    assert_eq!(daily.next_after(sat + DAY), Some(sat + 2 * DAY - HOUR));
}

#[test]
fn holidays_are_closed_days_and_their_errors_name_the_fix() {
    let days = parse_holidays("# US market holidays\n2024-01-15\n\n2024-02-19  # Presidents' Day\n", "h.txt")
        .unwrap();
    assert_eq!(days.len(), 2);
    let e = parse_holidays("2024-01-15\n15/01/2024\n", "h.txt").unwrap_err();
    assert_eq!(
        e,
        "h.txt:2: `15/01/2024` is not a date; write one date per line as YYYY-MM-DD (# starts a comment)"
    );
    assert!(parse_holiday("2024-02-30").is_err());
    let e = parse_zone("America/Nowhere").unwrap_err();
    assert!(e.contains("not a time zone of the IANA database") && e.contains("America/New_York"), "{e}");
    let e = CalendarOptions::from_flags(
        CalendarMode::Auto,
        None,
        Some(std::path::Path::new("/nonexistent/h.txt")),
    )
    .unwrap_err();
    assert!(e.starts_with("--holidays /nonexistent/h.txt: ") && e.contains("YYYY-MM-DD"), "{e}");
    // A holiday inside the data's weeks closes its day: not a missing point, no forecast step on it.
    let holidays = Arc::new(days);
    let stamps = trading_days("2024-01-01", 49, &["2024-01-15", "2024-02-19"]);
    let Inferred::Session(cal) = infer(&stamps, DAY, Zone::Fixed(Offset::UTC), &holidays).unwrap() else {
        panic!("continuous")
    };
    assert_eq!(cal.describe(), "weekdays Mon–Fri, 2 holidays");
    let pos = positions(&stamps, &cal, 1_000, false).unwrap();
    assert_eq!(*pos.last().unwrap() + 1, stamps.len());
    let a = axis(&trading_days("2024-01-01", 47, &["2024-01-15"]), cal); // ends Friday 16 February
    let f: Vec<String> = a.future(2).unwrap().iter().map(|s| s.to_text()).collect();
    assert_eq!(f, ["2024-02-20", "2024-02-21"]);
    // A row on a holiday is an error naming it.
    let on = trading_days("2024-01-01", 49, &["2024-02-19"]);
    let e = infer(&on, DAY, Zone::Fixed(Offset::UTC), &holidays).unwrap_err();
    assert_eq!(e, CalendarError::Holiday("2024-01-15".into()));
}

#[test]
fn descriptions_of_sessions() {
    let z = || Zone::Fixed(Offset::UTC);
    let sat_closed: Vec<bool> = (0..7).map(|d| d != 5).collect();
    assert_eq!(Calendar::new(DAY, 0, sat_closed, no_holidays(), z()).unwrap().describe(), "days Sun–Fri");
    let mut hours = vec![false; 7 * 24];
    (0..5).for_each(|d| (9..17).for_each(|h| hours[d * 24 + h] = true));
    let c = Calendar::new(HOUR, 30 * 60 * NANOS_PER_SECOND, hours, no_holidays(), z()).unwrap();
    assert_eq!(
        c.describe(),
        "Mon 09:30 – Mon 17:30, Tue 09:30 – Tue 17:30, Wed 09:30 – Wed 17:30, Thu 09:30 – Thu 17:30, Fri 09:30 \
         – Fri 17:30 UTC, 1 hour"
    );
    assert_eq!(describe(None), "continuous");
}

#[test]
fn building_a_calendar_is_linear_in_the_slots_of_a_week() {
    // The worst cases of a scan from each slot to the next open one: a week of one-minute slots with two
    // adjacent open slots (Monday 09:00 and 09:01) or a single one. Each phase is this test's own, so no other
    // test's calendar is in the cache and the tables are built here.
    const MINUTE: i128 = 60 * NANOS_PER_SECOND;
    let slots = 7 * 1_440;
    let adjacent: Vec<bool> = (0..slots).map(|w| w == 540 || w == 541).collect();
    let single: Vec<bool> = (0..slots).map(|w| w == 9_000).collect();
    let every: Vec<bool> = vec![true; slots];
    for (phase_s, open) in [(13, adjacent), (17, single), (19, every)] {
        let steps = |open: Vec<bool>| {
            slots::STEPS.with(|s| s.set(0));
            let zone = Zone::Fixed(Offset::UTC);
            Calendar::new(MINUTE, phase_s * NANOS_PER_SECOND, open, no_holidays(), zone).unwrap();
            slots::STEPS.with(|s| s.get())
        };
        let built = steps(open.clone());
        assert!(built <= 4 * slots as u64, "{built} steps for {slots} slots");
        assert_eq!(built, 3 * slots as u64, "built here, not found in the cache");
        // The same session again: the cache's table (only the key is read).
        assert_eq!(steps(open), slots as u64);
    }
}

/// Hourly FX bars as a broker feed writes them: UTC stamps without an offset, open Sunday 17:00 to Friday 17:00
/// New York time (21:00 or 22:00 UTC as daylight saving time moves), with one bar after Friday's close on
/// `extra` dates (New York) and no bars on `closed` dates.
fn utc_fx_bars(from: &str, to: &str, extra: &[&str], closed: &[&str]) -> Vec<Stamp> {
    let ny = TimeZone::get("America/New_York").unwrap();
    let (a, b) = (p(from).at.as_nanosecond(), p(to).at.as_nanosecond());
    (0..)
        .map(|i| a + i * HOUR)
        .take_while(|&t| t <= b)
        .filter_map(|t| {
            let at = Timestamp::from_nanosecond(t).unwrap();
            let local = ny.to_datetime(at);
            let (wd, h) = (local.weekday().to_monday_zero_offset(), local.hour());
            let date = local.date().to_string();
            let open = matches!((wd, h), (6, 17..) | (0..=3, _) | (4, ..=16))
                || (wd == 4 && h == 17 && extra.contains(&date.as_str()));
            (open && !closed.contains(&date.as_str())).then(|| Stamp::civil(at, StampStyle::DateTime))
        })
        .collect()
}

#[test]
fn utc_fx_bars_across_a_dst_change_find_their_session_in_new_york() {
    // 3 September 2023 to 5 January 2024 (the US clocks moved on 5 November), an extra bar after the close on two
    // Fridays and a closed Thursday (Thanksgiving). In UTC the week opens at 21:00 in summer and 22:00 in winter,
    // so no UTC session is stable: New York's is.
    let extra = ["2023-10-06", "2023-10-20"];
    let bars = utc_fx_bars("2023-09-03T00:00:00Z", "2024-01-05T22:00:00Z", &extra, &["2023-11-23"]);
    let opts = CalendarOptions::default();
    let Inferred::Session(cal) = infer_auto(&bars, HOUR, &opts).unwrap() else { panic!("continuous") };
    assert_eq!(cal.describe(), "Sun 17:00 – Fri 17:00 America/New_York (zone inferred), 1 hour");
    // The two extra bars are points of their own; the closed Thursday is 24 missing points.
    let pos = positions(&bars, &cal, 2 * bars.len(), true).unwrap();
    assert_eq!(*pos.last().unwrap() + 1, bars.len() + 24);
    assert!(positions(&bars, &cal, 2 * bars.len(), false).is_err(), "strict placing refuses the extra bars");
    let off: Vec<i128> = bars.iter().map(|s| s.at.as_nanosecond()).filter(|&t| !cal.contains(t)).collect();
    assert_eq!(off.len(), 2);
    // The axis walks the extra bars too: stepping back from the last bar lands on each row's own stamp.
    let a = TimeAxis { off_session: off.into(), ..axis(&bars, cal) };
    let last = *pos.last().unwrap() as i64;
    for (s, &k) in bars.iter().zip(&pos).step_by(97).chain([(&bars[0], &0)]) {
        assert_eq!(a.at(k as i64 - last).unwrap().at, s.at, "position {k}");
    }
    let extra = bars.iter().position(|s| s.to_text() == "2023-10-06T21:00:00").unwrap();
    assert_eq!(a.at(pos[extra] as i64 - last).unwrap().to_text(), "2023-10-06T21:00:00");
    // The forecast after Friday 5 January 16:00 New York (21:00Z) reopens Sunday 22:00Z, naive like the input.
    let f: Vec<String> = a.future(2).unwrap().iter().map(|s| s.to_text()).collect();
    assert_eq!(f, ["2024-01-07T22:00:00", "2024-01-07T23:00:00"]);
}

#[test]
fn rows_off_the_session_in_many_weeks_or_at_the_ends_leave_the_series_continuous() {
    // An extra bar in 3 of 10 complete weeks: more than 1 in 8.
    let fridays = ["2023-10-06", "2023-10-13", "2023-10-20"];
    let bars = utc_fx_bars("2023-10-01T00:00:00Z", "2023-12-08T22:00:00Z", &fridays, &[]);
    let ny = Zone::Named(TimeZone::get("America/New_York").unwrap());
    match infer(&bars, HOUR, ny.clone(), &no_holidays()).unwrap() {
        Inferred::Continuous(why) => assert!(why.contains("3 of its 9 complete weeks"), "{why}"),
        Inferred::Session(c) => panic!("{}", c.describe()),
    }
    // One extra bar, on the last day (a partial week): the series is continued from there, so it must fit.
    let bars = utc_fx_bars("2023-10-01T00:00:00Z", "2023-12-08T23:00:00Z", &["2023-12-08"], &[]);
    match infer(&bars, HOUR, ny, &no_holidays()).unwrap() {
        Inferred::Continuous(why) => assert!(why.contains("outside its complete weeks"), "{why}"),
        Inferred::Session(c) => panic!("{}", c.describe()),
    }
    // A zone given by --timezone is not second-guessed: no market zone is tried.
    let opts = CalendarOptions { zone: Some(TimeZone::UTC), ..CalendarOptions::default() };
    let bars = utc_fx_bars("2023-10-01T00:00:00Z", "2023-12-15T22:00:00Z", &[], &[]);
    assert!(matches!(infer_auto(&bars, HOUR, &opts).unwrap(), Inferred::Continuous(_)));
}

/// `past(n)` walks back once to what `at` gives position by position: `at(-n)`, …, `at(-1)`, the steps outside the
/// range of timestamps (`at` gives `None`) being the oldest, left out; and `future(n)` is `at(1)`, …, `at(n)`.
fn walked_equals_stepped(a: &TimeAxis, n: usize) {
    let stepped: Vec<Option<Stamp>> = (1..=n as i64).rev().map(|k| a.at(-k)).collect();
    let past = a.past(n);
    let missing = n - past.len();
    let walked: Vec<Option<Stamp>> =
        std::iter::repeat_n(None, missing).chain(past.into_iter().map(Some)).collect();
    assert_eq!(walked, stepped, "{} back from {}", a.calendar_text(), a.last);
    let ahead: Option<Vec<Stamp>> = (1..=n as i64).map(|k| a.at(k)).collect();
    assert_eq!(a.future(n), ahead, "{} on from {}", a.calendar_text(), a.last);
}

#[test]
fn walking_back_once_gives_every_position_the_timestamp_of_a_walk_from_the_last() {
    // Trading days with two holidays (Monday 15 January and 19 February 2024), walked back past the first row.
    let holidays = Arc::new(parse_holidays("2024-01-15\n2024-02-19\n", "h.txt").unwrap());
    let days = trading_days("2024-01-01", 70, &["2024-01-15", "2024-02-19"]);
    let Inferred::Session(cal) = infer(&days, DAY, Zone::Fixed(Offset::UTC), &holidays).unwrap() else {
        panic!("continuous")
    };
    assert_eq!(cal.describe(), "weekdays Mon–Fri, 2 holidays");
    let a = axis(&days, cal);
    walked_equals_stepped(&a, 80);
    let texts = |a: &TimeAxis, n: usize| a.past(n).into_iter().map(Stamp::to_text).collect::<Vec<String>>();
    let back = texts(&a, 80);
    assert_eq!((back[0].as_str(), back[79].as_str()), ("2023-11-15", "2024-03-07")); // the last is Friday the 8th
    assert!(!back.iter().any(|d| d == "2024-01-15" || d == "2024-02-19"), "{back:?}");

    // FX bars across the March 2024 change of New York's clocks, in the zone and in their written offsets.
    let bars = fx_bars("2024-03-03T00:00:00Z", "2024-04-05T00:00:00Z");
    let ny = Zone::Named(TimeZone::get("America/New_York").unwrap());
    for zone in [ny.clone(), series_zone(&bars, &CalendarOptions::default())] {
        let Inferred::Session(cal) = infer(&bars, HOUR, zone, &no_holidays()).unwrap() else {
            panic!("continuous")
        };
        let friday = bars.iter().position(|s| s.to_text() == "2024-03-15T16:00:00-04:00").unwrap();
        walked_equals_stepped(&axis(&bars[..=friday], cal), 300);
    }

    // Every half hour in New York across the November 2024 fall back: 01:00 and 01:30 come twice.
    let cal = Calendar::new(HOUR / 2, 0, vec![true; 7 * 48], no_holidays(), ny.clone()).unwrap();
    let last = p("2024-11-03T09:00:00Z");
    let a = axis(&[Stamp { style: StampStyle::Offset, ..last }], cal.clone());
    walked_equals_stepped(&a, 60);
    let back = texts(&a, 60);
    assert_eq!(back.iter().filter(|t| t.starts_with("2024-11-03T01:30:00")).count(), 2, "{back:?}");
    walked_equals_stepped(&axis(&[last], cal), 60);

    // UTC FX bars with their session inferred in New York, rows off the session (two Fridays' extra bars), and
    // Thanksgiving a holiday of the calendar: back from Tuesday 28 November 2023 across the November change.
    let extra = ["2023-10-06", "2023-10-20"];
    let bars = utc_fx_bars("2023-09-03T00:00:00Z", "2024-01-05T22:00:00Z", &extra, &["2023-11-23"]);
    let Inferred::Session(cal) = infer_auto(&bars, HOUR, &CalendarOptions::default()).unwrap() else {
        panic!("continuous")
    };
    let thanksgiving = Arc::new(parse_holidays("2023-11-23", "h.txt").unwrap());
    let cal = Calendar { holidays: thanksgiving, ..cal };
    let bars = &bars[..=bars.iter().position(|s| s.to_text() == "2023-11-28T15:00:00").unwrap()];
    let off: Vec<i128> = bars.iter().map(|s| s.at.as_nanosecond()).filter(|&t| !cal.contains(t)).collect();
    assert_eq!(off.len(), 2);
    let a = TimeAxis { off_session: off.into(), ..axis(bars, cal) };
    walked_equals_stepped(&a, 800);
    let back = texts(&a, 800);
    assert!(back[0].as_str() < "2023-10-20" && back.contains(&"2023-10-20T21:00:00".into()), "{back:?}");
    // Thanksgiving in New York is 05:00Z 23 November to 05:00Z the 24th: no stamp in it.
    assert!(!back.iter().any(|t| ("2023-11-23T05".."2023-11-24T05").contains(&t.as_str())), "{back:?}");

    // Continuous axes: a fixed step, months to the month's end from mid-month (position 0 is not the last
    // stamp), and a fixed day: the 31st, clamped.
    let fixed = TimeAxis::continuous(p("2024-03-10T12:00:00Z"), Freq::Fixed(HOUR), MonthAnchor::End);
    walked_equals_stepped(&fixed, 50);
    for (months, anchor) in [(1, MonthAnchor::End), (3, MonthAnchor::Day(31))] {
        walked_equals_stepped(&TimeAxis::continuous(p("2024-02-15"), Freq::Months(months), anchor), 40);
    }
}

#[test]
fn walking_back_stops_at_the_range_of_timestamps_as_stepping_does() {
    let near = |days: i128| {
        let t = Timestamp::MIN.as_nanosecond() + days * DAY;
        Stamp::civil(Timestamp::from_nanosecond(t).unwrap(), StampStyle::DateTime)
    };
    let fixed = TimeAxis::continuous(near(5), Freq::Fixed(DAY), MonthAnchor::End);
    assert_eq!(fixed.past(20).len(), 5);
    walked_equals_stepped(&fixed, 20);
    let months = TimeAxis::continuous(near(100), Freq::Months(1), MonthAnchor::End);
    assert!(months.past(20).len() < 20);
    walked_equals_stepped(&months, 20);
    let cal = Calendar::weekdays(DAY, 0, no_holidays(), Zone::Fixed(Offset::UTC)).unwrap();
    let start = cal.next_after(near(12).at.as_nanosecond()).unwrap();
    let first = Stamp::civil(Timestamp::from_nanosecond(start).unwrap(), StampStyle::Date);
    let a = axis(&[first], cal);
    assert!(a.past(20).len() < 20);
    walked_equals_stepped(&a, 20);
}
