//! The request admission every family shares: the engine's limits (variates, horizon, samples, context) and
//! the context policy the CLI and the server apply alike: a context longer than the engine holds keeps its most
//! recent points (reported as `context_truncated`; their f64 values and wall clocks are cut with them), or with
//! `strict_context` is an error. Request sizes are
//! checked against the limits and the request budget before anything is built ([`check_size`]).

use crate::budget::{Budget, RequestSize};
use crate::error::{Error, Result};
use crate::family::{EngineInfo, EngineLimits};
use crate::request::{ContextCut, ForecastRequest};

/// [`Engine::check_size`](crate::engine::Engine::check_size) on an engine's info.
pub fn check_size(info: &EngineInfo, budget: &Budget, sizes: &[RequestSize], at: &str) -> Result<()> {
    let limits = &info.limits;
    let err = |what: String, limit: usize| Err(Error::Limit { at: at.to_string(), what, limit });
    for s in sizes {
        if s.variates > limits.max_variates {
            return err(format!("{} variates", s.variates), limits.max_variates);
        }
        if s.horizon > limits.max_horizon {
            return err(format!("horizon {}", s.horizon), limits.max_horizon);
        }
        // A family that draws no sample paths refuses samples with its own reason (its admit).
        if info.model.capabilities().samples && s.samples > limits.max_samples {
            return err(format!("{} samples", s.samples), limits.max_samples);
        }
    }
    let kept: Vec<RequestSize> =
        sizes.iter().map(|s| RequestSize { context: s.context.min(limits.max_context), ..*s }).collect();
    budget.check(&kept, at)
}

/// The context policy and limit checks of [`Engine::admit`](crate::engine::Engine::admit), on plain limits.
pub fn admit(limits: &EngineLimits, req: &mut ForecastRequest, at: &str) -> Result<Option<ContextCut>> {
    let err = |what: String, limit: usize| Error::Limit { at: at.to_string(), what, limit };
    if req.variates() > limits.max_variates {
        return Err(err(format!("{} variates", req.variates()), limits.max_variates));
    }
    if req.horizon > limits.max_horizon {
        return Err(err(format!("horizon {}", req.horizon), limits.max_horizon));
    }
    if req.samples > limits.max_samples {
        return Err(err(format!("{} samples", req.samples), limits.max_samples));
    }
    let given = req.context_len();
    if given <= limits.max_context {
        return Ok(req.context_cut);
    }
    if req.strict_context {
        return Err(Error::ContextTooLong { at: at.to_string(), given, limit: limits.max_context });
    }
    let used = limits.max_context;
    for series in &mut req.target {
        series.drain(..given - used);
    }
    // what travels with the points is cut with them
    for series in req.target_f64.iter_mut().flatten() {
        series.drain(..given - used);
    }
    if !req.timestamps.is_empty() {
        req.timestamps.drain(..given - used);
    }
    if let Some(v) = req.target.iter().position(|s| s.iter().all(Option::is_none)) {
        return Err(Error::AllMissingAfterCut { at: at.to_string(), variate: v, used });
    }
    req.context_cut = Some(ContextCut { given, used });
    Ok(req.context_cut)
}

#[cfg(test)]
mod tests {
    use super::*;
    use exporter::registry::Family;

    fn req(len: usize) -> ForecastRequest {
        ForecastRequest {
            target: vec![(0..len).map(|i| Some(i as f32)).collect()],
            id_mask: vec![0],
            horizon: 4,
            ..ForecastRequest::default()
        }
    }

    const LIMITS: EngineLimits =
        EngineLimits { max_variates: 2, max_context: 8, max_horizon: 16, max_samples: 4 };

    #[test]
    fn sizes_are_checked_against_the_engine_and_the_budget_before_anything_is_built() {
        let info = EngineInfo {
            // a family that samples: its sample limit is checked here
            model: Family::ALL.into_iter().find(|f| f.capabilities().samples).expect("a sampling family"),
            target: "cpu".into(),
            ort_version: "x".into(),
            label: "cpu".into(),
            limits: LIMITS,
            has_golden: false,
        };
        let size = |series, variates, context, horizon, samples| RequestSize {
            series,
            variates,
            context,
            horizon,
            samples,
            quantiles: 3,
            max_context: None,
        };
        let b = Budget::DEFAULT;
        assert!(
            check_size(&info, &b, &[size(256, 2, 1 << 40, 16, 4)], "r").is_ok(),
            "context counts up to 8"
        );
        let e = |s| check_size(&info, &b, &[s], "r").unwrap_err().to_string();
        assert!(e(size(1, 3, 1, 1, 0)).contains("3 variates exceed this engine's limit of 2"));
        assert!(e(size(1, 1, 1, usize::MAX, 0)).contains("this engine's limit of 16"));
        assert!(e(size(1, 1, 1, 1, 1 << 40)).contains("samples exceed this engine's limit of 4"));
        assert!(e(size(usize::MAX, 1, 1, 1, 0)).contains("--max-series"));
        let tight = Budget { max_cost: 50, ..b };
        let e = check_size(&info, &tight, &[size(1, 1, 1 << 40, 16, 4)], "r").unwrap_err().to_string();
        assert!(e.contains("cost of 96") && e.contains("--max-request-cost"), "{e}");
    }

    #[test]
    fn long_contexts_keep_their_most_recent_points() {
        let mut r = req(20);
        let cut = admit(&LIMITS, &mut r, "r").unwrap();
        assert_eq!(cut, Some(ContextCut { given: 20, used: 8 }));
        assert_eq!(r.target[0].first(), Some(&Some(12.0)));
        assert_eq!(r.context_len(), 8);
        // admitting again keeps the record of the cut
        assert_eq!(admit(&LIMITS, &mut r, "r").unwrap(), Some(ContextCut { given: 20, used: 8 }));
        let mut r = req(8);
        assert_eq!(admit(&LIMITS, &mut r, "r").unwrap(), None);
    }

    #[test]
    fn the_f64_values_and_wall_clocks_are_cut_with_the_points() {
        use crate::host::wall_clock::WallClock;
        let clock = |d: u32| WallClock::new(2024, 1, d, 0, 0, 0, 0).unwrap();
        let mut r = ForecastRequest {
            target_f64: Some(vec![(0..20).map(f64::from).collect()]),
            timestamps: (1..=20).map(clock).collect(),
            future_timestamps: (21..=24).map(clock).collect(),
            ..req(20)
        };
        admit(&LIMITS, &mut r, "r").unwrap();
        assert_eq!(r.target_f64.as_ref().unwrap()[0], (12..20).map(f64::from).collect::<Vec<_>>());
        assert_eq!(r.timestamps, (13..=20).map(clock).collect::<Vec<_>>());
        assert_eq!(r.future_timestamps.len(), 4);
        // admitting again changes nothing
        let again = r.clone();
        admit(&LIMITS, &mut r, "r").unwrap();
        assert_eq!(r, again);
    }

    #[test]
    fn strict_context_and_limits_are_errors_naming_the_limit() {
        let mut r = ForecastRequest { strict_context: true, ..req(20) };
        let e = admit(&LIMITS, &mut r, "r").unwrap_err().to_string();
        assert!(e.contains("20 points") && e.contains("8"), "{e}");
        let mut r = ForecastRequest { horizon: 17, ..req(4) };
        let e = admit(&LIMITS, &mut r, "r").unwrap_err().to_string();
        assert!(e.contains("horizon 17") && e.contains("16"), "{e}");
        let mut r = ForecastRequest { samples: 5, ..req(4) };
        assert!(admit(&LIMITS, &mut r, "r").unwrap_err().to_string().contains("5 samples"));
    }

    #[test]
    fn a_cut_that_leaves_a_variate_unobserved_is_an_error() {
        let mut r = req(20);
        for x in &mut r.target[0][12..] {
            *x = None;
        }
        let e = admit(&LIMITS, &mut r, "r").unwrap_err().to_string();
        assert!(e.contains("variate 0") && e.contains("last 8"), "{e}");
    }
}
