//! Direction accuracy: is the forecast's move from the last observed value the actual move?

use super::window::Mean;

/// The correct (1) / wrong (0) steps of one window: sign(ŷ_t − y_c) = sign(y_t − y_c) with signs in
/// {−1, 0, +1} and y_c the last non-NaN value of the history, so a zero change is right only when both changes
/// are exactly zero. Steps with a missing actual are left out; a history with no observed value gives no steps.
pub(crate) fn direction_hits(history: &[f64], actual: &[f64], point: &[f64]) -> Option<Mean> {
    let last = *history.iter().rev().find(|v| !v.is_nan())?;
    let mut hits = Mean::default();
    for (&y, &f) in actual.iter().zip(point) {
        if !y.is_nan() {
            hits.add(if sign(y - last) == sign(f - last) { 1.0 } else { 0.0 });
        }
    }
    Some(hits)
}

fn sign(x: f64) -> i8 {
    if x > 0.0 {
        1
    } else if x < 0.0 {
        -1
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_directions() {
        // last observed value 10 (the trailing NaN is skipped).
        // steps: up/up ✓, down/up ✗, flat/flat ✓, flat/up ✗, missing, up/flat ✗, down/down ✓ → 3 of 6.
        let hits = direction_hits(
            &[8.0, 10.0, f64::NAN],
            &[11.0, 9.0, 10.0, 10.0, f64::NAN, 12.0, 1.0],
            &[10.5, 10.1, 10.0, 10.2, 0.0, 10.0, 9.99],
        )
        .unwrap();
        assert_eq!(hits.mean(), Some(0.5));
        assert_eq!(hits.count, 6);
    }

    #[test]
    fn no_observed_history_or_no_actual_gives_nothing() {
        assert!(direction_hits(&[f64::NAN], &[1.0], &[1.0]).is_none());
        assert!(direction_hits(&[], &[1.0], &[1.0]).is_none());
        assert_eq!(direction_hits(&[1.0], &[f64::NAN], &[1.0]).unwrap().mean(), None);
    }
}
