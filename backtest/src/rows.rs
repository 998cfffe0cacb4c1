//! Windows over a series' rows as given: a family that reads every row it is given, with each row's timestamp
//! (its requests carry `timestamps`), is cut at a cutoff's timestamp, not on a grid. A window's request holds the
//! rows at or before the cutoff (the most recent `context` of them) and forecasts at the timestamps it is given,
//! so nothing after the cutoff is read but the forecast steps' clocks.

use engines::host::wall_clock::WallClock;
use engines::request::{ForecastRequest, RequestId};

/// The request of a window whose history is `full`'s rows `..end`, cut to the most recent `context` of them, and
/// whose `horizon` forecast steps are at `future` (empty: the engine's default steps). Everything else (columns,
/// sampling, parameters, quantiles, seed) is `full`'s.
pub fn cut(
    full: &ForecastRequest,
    id: RequestId,
    end: usize,
    context: usize,
    horizon: usize,
    future: Vec<WallClock>,
) -> ForecastRequest {
    let start = end.saturating_sub(context);
    let rows = |v: &Vec<Option<f32>>| v[start..end.min(v.len())].to_vec();
    ForecastRequest {
        id: Some(id),
        target: full.target.iter().map(rows).collect(),
        id_mask: full.id_mask.clone(),
        horizon,
        samples: full.samples,
        quantiles: full.quantiles.clone(),
        seed: full.seed,
        strict_context: false,
        context_cut: None,
        columns: full.columns.clone(),
        target_f64: full
            .target_f64
            .as_ref()
            .map(|t| t.iter().map(|v| v[start..end.min(v.len())].to_vec()).collect()),
        timestamps: full.timestamps.get(start..end).map_or_else(Vec::new, <[WallClock]>::to_vec),
        future_timestamps: future,
        sampling: full.sampling,
        params: full.params.clone(),
    }
}

/// The forecast steps of the window with cutoff row `cutoff` of `full`: the clocks of the `horizon` rows after
/// it (`None` when the rows end first or the series has no timestamps).
pub fn next_rows(full: &ForecastRequest, cutoff: usize, horizon: usize) -> Option<Vec<WallClock>> {
    let from = cutoff.checked_add(1)?;
    full.timestamps.get(from..from.checked_add(horizon)?).map(<[WallClock]>::to_vec)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(n: usize) -> ForecastRequest {
        let clock = |d: u32| WallClock::new(2024, 1, d, 0, 0, 0, 0).unwrap();
        ForecastRequest {
            target: vec![
                (0..n).map(|i| Some(i as f32)).collect(),
                (0..n).map(|i| Some(-(i as f32))).collect(),
            ],
            timestamps: (1..=n as u32).map(clock).collect(),
            ..ForecastRequest::default()
        }
    }

    #[test]
    fn a_window_holds_its_most_recent_rows_up_to_the_cutoff_and_the_next_rows_clocks() {
        let full = request(10);
        let future = next_rows(&full, 5, 3).unwrap();
        assert_eq!(future, full.timestamps[6..9].to_vec());
        let r = cut(&full, RequestId::Str("a@5".into()), 6, 4, 3, future.clone());
        assert_eq!(r.target[0], (2..6).map(|i| Some(i as f32)).collect::<Vec<_>>());
        assert_eq!(r.target[1], (2..6).map(|i| Some(-(i as f32))).collect::<Vec<_>>());
        assert_eq!(
            (r.timestamps, r.future_timestamps, r.horizon),
            (full.timestamps[2..6].to_vec(), future, 3)
        );
        // the rows end before the horizon does
        assert_eq!(next_rows(&full, 7, 3), None);
        assert_eq!(next_rows(&full, usize::MAX, 3), None);
    }
}
