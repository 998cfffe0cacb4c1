//! [`Budget`]: how much one request may ask of an engine, checked from its counts alone ([`RequestSize`]) before
//! anything per series is built, so that a small body cannot make a large allocation or a long engine call:
//! series per request, variates per series, quantile levels, response values (series × variates × horizon ×
//! (1 + levels + samples)) and an estimate of engine work (series × variates × (context + horizon) ×
//! max(1, samples)). Shared by every caller of an engine (`totoc serve` sets it from its flags;
//! [`Engine::check_size`] adds the engine's own limits). Each refusal names the limit, the flag that raises it,
//! and a reason for metrics.
//!
//! [`Engine::check_size`]: crate::engine::Engine::check_size

use crate::error::{Error, Result};
use crate::request::ForecastRequest;

/// The family parameter [`RequestSize::max_context`] reads.
pub const MAX_CONTEXT: &str = "max_context";

/// The counts of a request, known before its series are built: `series` series of (at most) `variates`
/// variates, `context` points, `horizon` steps, `samples` paths and `quantiles` levels each.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestSize {
    pub series: usize,
    pub variates: usize,
    pub context: usize,
    pub horizon: usize,
    pub samples: usize,
    pub quantiles: usize,
    /// The request's `params.max_context` (a family that reads at most that many recent points per step), when
    /// it gives one: a family's cost estimate uses it (a smaller window can mean more work).
    pub max_context: Option<usize>,
}

impl RequestSize {
    /// The counts of one built request (one series; its context as it stands, so after admission the context
    /// the engine keeps).
    pub fn of(req: &ForecastRequest) -> Self {
        RequestSize {
            series: 1,
            variates: req.variates(),
            context: req.context_len(),
            horizon: req.horizon,
            samples: req.samples,
            quantiles: req.quantiles.len(),
            max_context: req.params.get(MAX_CONTEXT).map(|&m| m as usize),
        }
    }

    /// Response values: series × variates × horizon × (1 + quantiles + samples), saturating.
    pub fn response_values(&self) -> u64 {
        let per = 1u64.saturating_add(self.quantiles as u64).saturating_add(self.samples as u64);
        (self.series as u64)
            .saturating_mul(self.variates as u64)
            .saturating_mul(self.horizon as u64)
            .saturating_mul(per)
    }

    /// Engine work, in value-steps: series × variates × (context + horizon) × max(1, samples), saturating.
    pub fn cost(&self) -> u64 {
        let steps = (self.context as u64).saturating_add(self.horizon as u64);
        (self.series as u64)
            .saturating_mul(self.variates as u64)
            .saturating_mul(steps)
            .saturating_mul(self.samples.max(1) as u64)
    }
}

/// The limits (see the module docs); the defaults are `totoc serve`'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Budget {
    /// `--max-series`.
    pub max_series: usize,
    /// `--max-variates` (the engine's own limit applies too).
    pub max_variates: usize,
    /// `--max-quantile-levels`.
    pub max_quantiles: usize,
    /// `--max-response-values`.
    pub max_response_values: u64,
    /// `--max-request-cost`.
    pub max_cost: u64,
}

impl Budget {
    pub const DEFAULT: Budget = Budget {
        max_series: 256,
        max_variates: 1024,
        max_quantiles: 99,
        max_response_values: 1 << 24,
        max_cost: 1 << 32,
    };

    /// No limits (the CLI over local files).
    pub const UNLIMITED: Budget = Budget {
        max_series: usize::MAX,
        max_variates: usize::MAX,
        max_quantiles: usize::MAX,
        max_response_values: u64::MAX,
        max_cost: u64::MAX,
    };

    /// Checks the total of `sizes` (one request's parts); `at` names the request in errors.
    pub fn check(&self, sizes: &[RequestSize], at: &str) -> Result<()> {
        let over = |what: String, limit: u64, flag: &'static str, reason: &'static str| {
            Err(Error::OverBudget { at: at.to_string(), what, limit, flag, reason })
        };
        let series = sizes.iter().fold(0usize, |a, s| a.saturating_add(s.series));
        if series > self.max_series {
            return over(format!("{series} series"), self.max_series as u64, "--max-series", "max_series");
        }
        let variates = sizes.iter().map(|s| s.variates).max().unwrap_or(0);
        if variates > self.max_variates {
            return over(
                format!("{variates} variates"),
                self.max_variates as u64,
                "--max-variates",
                "max_variates",
            );
        }
        let quantiles = sizes.iter().map(|s| s.quantiles).max().unwrap_or(0);
        if quantiles > self.max_quantiles {
            return over(
                format!("{quantiles} quantile levels"),
                self.max_quantiles as u64,
                "--max-quantile-levels",
                "max_quantile_levels",
            );
        }
        let values = sizes.iter().fold(0u64, |a, s| a.saturating_add(s.response_values()));
        if values > self.max_response_values {
            return over(
                format!(
                    "a response of {values} values (series × variates × horizon × (1 + quantiles + samples))"
                ),
                self.max_response_values,
                "--max-response-values",
                "max_response_values",
            );
        }
        let cost = sizes.iter().fold(0u64, |a, s| a.saturating_add(s.cost()));
        if cost > self.max_cost {
            return over(
                format!(
                    "an estimated engine cost of {cost} (series × variates × (context + horizon) × samples)"
                ),
                self.max_cost,
                "--max-request-cost",
                "max_request_cost",
            );
        }
        Ok(())
    }
}

impl Default for Budget {
    fn default() -> Self {
        Budget::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size(series: usize, variates: usize, horizon: usize, samples: usize, quantiles: usize) -> RequestSize {
        RequestSize { series, variates, context: 64, horizon, samples, quantiles, max_context: None }
    }

    #[test]
    fn each_limit_names_its_flag() {
        let b = Budget::DEFAULT;
        assert!(b.check(&[size(16, 4, 160, 256, 3)], "r").is_ok());
        assert!(b.check(&[size(256, 4, 160, 0, 0)], "r").is_ok());
        let cases = [
            (size(257, 1, 1, 0, 0), "--max-series", "max_series"),
            (size(1, 1025, 1, 0, 0), "--max-variates", "max_variates"),
            (size(1, 1, 1, 8, 100), "--max-quantile-levels", "max_quantile_levels"),
            (size(200, 4, 160, 256, 3), "--max-response-values", "max_response_values"),
            (size(usize::MAX, usize::MAX, usize::MAX, usize::MAX, usize::MAX), "--max-series", "max_series"),
        ];
        for (s, flag, reason) in cases {
            let e = b.check(&[s], "r").unwrap_err();
            assert!(e.to_string().contains(flag), "{e}");
            assert!(matches!(e, Error::OverBudget { reason: r, .. } if r == reason), "{e}");
        }
        let cost = Budget { max_cost: 1000, ..Budget::DEFAULT };
        let e = cost.check(&[size(1, 1, 1000, 0, 0)], "r").unwrap_err().to_string();
        assert!(e.contains("--max-request-cost") && e.starts_with("r: "), "{e}");
        // Parts add up.
        let parts = vec![size(1, 4, 160, 256, 3); 200];
        assert!(b.check(&parts, "r").unwrap_err().to_string().contains("--max-response-values"));
    }

    #[test]
    fn sizes_saturate() {
        let s = RequestSize {
            series: usize::MAX,
            variates: 2,
            context: usize::MAX,
            horizon: 5,
            samples: 3,
            quantiles: 1,
            max_context: None,
        };
        assert_eq!(s.response_values(), u64::MAX);
        assert_eq!(s.cost(), u64::MAX);
    }
}
