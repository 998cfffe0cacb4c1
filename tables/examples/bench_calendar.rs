//! Times session-calendar inference (`tables::calendar::infer`, what `totoc forecast`, `predict_df`,
//! `cross_validation` and `/v1/forecast` run for every series with timestamps) on one-minute weekday series:
//! Monday to Friday, every minute, over four complete weeks and a day (30,240 rows each), as a table of SERIES
//! such series would be read. Prints the first (cold) series' time and the total.
//!
//! Run: `scripts/bench-calendar.sh [SERIES]` (a release build; default 5,000 series).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use jiff::tz::Offset;
use jiff::Timestamp;
use tables::calendar::{infer, Inferred, Zone};
use tables::timestamps::{Stamp, StampStyle};

const MINUTE: i128 = 60_000_000_000;

fn main() {
    let series: usize = std::env::args().nth(1).map_or(5_000, |s| s.parse().expect("SERIES is a count"));
    // Monday 1 January 2024 00:00 UTC, 29 days: 21 weekdays of 1,440 minutes.
    let start = 1_704_067_200i64;
    let stamps: Vec<Stamp> = (0..29 * 1_440i64)
        .map(|m| start + 60 * m)
        .filter(|s| ((s - start) / 86_400) % 7 < 5)
        .map(|s| Stamp::civil(Timestamp::from_second(s).unwrap(), StampStyle::DateTime))
        .collect();
    let holidays = Arc::new(BTreeSet::new());
    let run = || match infer(&stamps, MINUTE, Zone::Fixed(Offset::UTC), &holidays).unwrap() {
        Inferred::Session(cal) => cal.open_per_week(),
        Inferred::Continuous(why) => panic!("continuous: {why}"),
    };
    let t = Instant::now();
    assert_eq!(run(), 5 * 1_440);
    let first = t.elapsed();
    for _ in 1..series {
        assert_eq!(run(), 5 * 1_440);
    }
    let total = t.elapsed();
    println!(
        "calendar inference: {series} one-minute weekday series of {} rows: first {:.2} ms, total {:.2} s \
         ({:.3} ms per series)",
        stamps.len(),
        first.as_secs_f64() * 1e3,
        total.as_secs_f64(),
        total.as_secs_f64() * 1e3 / series as f64
    );
}
