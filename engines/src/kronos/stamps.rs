//! Wall-clock stamps and Kronos's time features: upstream's `calc_time_stamps` (k:470-477) reads pandas' `.dt`
//! fields of each row's timestamp — minute, hour, weekday (Monday 0), day of month (1–31), month (1–12) — in that
//! column order, as f32 (`x_time_df.values.astype(np.float32)`, k:536-537).
//!
//! The features come from the clock **as written**: a stamp with an offset (`2017-04-19T23:30:00-05:00`) has
//! hour 23 (pandas keeps the fixed offset and reads the local fields), and `Z` changes nothing. There is no zone
//! conversion anywhere. [`WallClock`] is the shared civil date-time of requests (`crate::host::wall_clock`:
//! proleptic Gregorian, years 0000–9999; [`WallClock::parse`] reads the grammar of the Kronos request contract);
//! this module adds its features.

pub use crate::host::wall_clock::{StampError, WallClock};

/// Kronos's five time features of one stamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeFeatures {
    pub minute: u8,
    pub hour: u8,
    /// Monday 0 … Sunday 6 (pandas `.dt.weekday`).
    pub weekday: u8,
    /// 1–31.
    pub day: u8,
    /// 1–12.
    pub month: u8,
}

impl TimeFeatures {
    /// The features in upstream's column order `minute, hour, weekday, day, month`, as f32 (the graphs' stamp
    /// input; the model casts them to integer indices of its embedding tables).
    pub fn as_row(&self) -> [f32; 5] {
        [self.minute, self.hour, self.weekday, self.day, self.month].map(f32::from)
    }
}

impl WallClock {
    /// Kronos's time features of this stamp.
    pub fn features(&self) -> TimeFeatures {
        TimeFeatures {
            minute: self.minute(),
            hour: self.hour(),
            weekday: self.weekday(),
            day: self.day(),
            month: self.month(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kronos::testdata::vectors;

    /// pandas' `.dt` fields through upstream's calc_time_stamps (stamps.json).
    #[test]
    fn features_match_pandas() {
        let v = vectors("stamps");
        for case in v["cases"].as_array().unwrap() {
            let stamp = case["stamp"].as_str().unwrap();
            let want: Vec<f32> =
                case["features"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
            let got = WallClock::parse(stamp).unwrap_or_else(|e| panic!("{e}")).features().as_row();
            assert_eq!(got.to_vec(), want, "{stamp}");
        }
    }

    #[test]
    fn features_of_a_leap_day() {
        let features = WallClock::parse("2024-02-29T16:45:00").unwrap().features();
        assert_eq!(features.as_row(), [45.0, 16.0, 3.0, 29.0, 2.0]); // a Thursday
    }
}
