//! Forecast-quality metrics in f64, with fev 0.10.0's and utilsforecast 0.2.17's definitions, the naive and
//! seasonal-naive baselines, and their aggregation per window, per series, per cutoff and overall.
//!
//! # Inputs
//! One [`WindowInput`] is one forecast window of one series: the history up to and including the cutoff, the `H`
//! actual values after it, and the model's `H` point forecasts, optional quantiles and optional sample paths.
//! * A NaN in `actual` is a missing value: that step is left out of every metric (of the window and of every
//!   aggregate). This matches fev, whose metrics are NaN-skipping means (`np.nanmean`), and utilsforecast on the
//!   table with the missing rows dropped (utilsforecast itself would count a NaN-`y` row as "not covered" and in
//!   scaled CRPS's row count, so the rows are dropped, as `y` is not known there).
//! * A NaN in `history` is a missing value: the seasonal scale of MASE skips every pair `(y[t], y[t-m])` with a
//!   NaN (fev's `np.nanmean` of the seasonal differences, no imputation); the baselines forward-fill it (fev's
//!   statsforecast wrapper `ffill`s the history before its baselines) and ignore leading NaNs; direction accuracy
//!   starts from the last non-NaN value of the history.
//! * Forecasts (point, quantiles, samples) must be finite (fev refuses NaN/Inf predictions): a non-finite one is a
//!   [`MetricError`].
//!
//! # Metrics ([`Metric`]; `e_t = y_t − ŷ_t` over the steps whose actual is present)
//! * `mae`: mean |e_t|. `rmse`: sqrt(mean e_t²) (fev `MAE`, `RMSE`).
//! * `smape`: mean of 2|e_t| / (|y_t| + |ŷ_t|), a fraction in [0, 2] (not percent); a 0/0 step is left out
//!   (fev `SMAPE`, whose `_safemean` skips non-finite terms).
//! * `mase`: mean of |e_t| / s, s = mean over the history of |y(t) − y(t−m)| (m = season, NaN pairs skipped),
//!   from the history up to this window's cutoff; undefined (left out) when the history has no such pair or s = 0
//!   (fev `MASE` with ε = 0: the scaled errors are then NaN/Inf, which fev's `_safemean` skips).
//! * `wql`: mean over quantile levels q of [Σ_t ρ_q(y_t, ŷ_q,t) / n] / [Σ_t |y_t| / n], with the quantile loss
//!   ρ_q(y, x) = 2·|(y − x)·(1{y ≤ x} − q)| (fev `WQL`: every level given, ε = 0).
//! * `scaled_crps`: 2 · mean_q[mean_t ρ'_q] · n / (Σ_t |y_t| + ε), ρ'_q(y, x) = max(q(y − x), (q − 1)(y − x)),
//!   ε = f64::EPSILON (utilsforecast `scaled_crps`, per series and cutoff).
//! * `coverage_L`: fraction of steps with lo ≤ y_t ≤ hi (both ends included), lo/hi the quantiles
//!   (100 − L)/200 and 1 − (100 − L)/200: one metric per symmetric pair of levels the quantiles hold
//!   (utilsforecast `coverage` with its `{model}-lo-{L}` / `{model}-hi-{L}` columns, see [`quantile_column`]).
//! * `crps_samples`: mean over steps of the energy form of the CRPS of the M sample paths' empirical
//!   distribution, (1/M) Σ_i |x_i − y| − (1/(2M²)) Σ_i Σ_j |x_i − x_j| (the "NRG"/V-statistic normalisation,
//!   the exact CRPS of the empirical distribution, as properscoring's `crps_ensemble`; in the units of y; one
//!   sample gives |x − y|, the absolute error).
//! * `direction_accuracy`: fraction of steps where sign(ŷ_t − y_c) = sign(y_t − y_c), y_c the last observed value
//!   of the history, signs in {−1, 0, +1}: a zero change is correct only when both changes are exactly zero.
//!
//! # Aggregates ([`evaluate`], [`Scope`])
//! * `window` (one series, one cutoff): the formulas above over that window's steps.
//! * `cutoff` (all series at one cutoff: fev's evaluation window): **pooled** over the series and steps for
//!   `mae`, `rmse`, `smape`, `mase`, `wql`, `crps_samples` and `direction_accuracy` (the formulas above with the
//!   means taken over every (series, step) at once, as fev's metrics do over their `[N, H]` arrays; each series'
//!   MASE keeps its own scale); the **mean of the per-series values** for `scaled_crps` and `coverage_L` (as
//!   utilsforecast's `evaluate(..., agg_fn="mean")`).
//! * `series` (one series, all its cutoffs): the mean of its window values.
//! * `overall`: the mean of the cutoff values over the cutoffs (fev's task score: the mean over its evaluation
//!   windows); one backtest is one fev task.
//!
//! A metric an aggregate cannot define (no present actual, no quantiles, undefined MASE scale, a non-finite
//! ratio such as a WQL with all actuals 0) is left out of that aggregate instead of being reported as NaN or Inf
//! (where fev reports NaN/Inf, and where its mean over windows would turn NaN because one window's value is:
//! here the overall mean is over the cutoffs that define the metric).
//!
//! # Baselines
//! [`naive`] and [`seasonal_naive`] (see [`baseline`](seasonal_naive) for how they follow fev's baseline and
//! where they differ); [`point_as_quantiles`] gives them quantiles the way fev's `seasonal_naive` does (the point
//! forecast at every level), so WQL and its skill score exist for them.
//!
//! The oracle test (`backtest/tests/oracle.rs`) checks every value with a package definition against fev 0.10.0 and
//! utilsforecast 0.2.17 within 1e-9 relative; `crps_samples`, `direction_accuracy` and the baselines are checked
//! against hand-computed cases in the unit tests.
//!
//! # Relative skill ([`relative_skill`])
//! fev's skill score: 1 − geometric mean over tasks of clip(error_model / error_baseline, 0.01, 100), with one
//! task = the whole backtest (its `overall` row), as fev's `leaderboard(..., baseline_model=...)`;
//! [`relative_skill_by_cutoff`] takes each cutoff as one task instead.

mod aggregate;
mod baseline;
mod direction;
mod error;
mod input;
mod metric;
mod point;
mod quantile;
mod sample;
mod skill;
mod window;

pub use aggregate::{evaluate, MetricRow, Scope, SeriesWindows};
pub use baseline::{naive, point_as_quantiles, seasonal_naive};
pub use error::MetricError;
pub use input::{Quantiles, Samples, WindowInput};
pub use metric::Metric;
pub use quantile::{interval_levels, quantile_column};
pub use sample::crps_samples_step;
pub use skill::{relative_skill, relative_skill_by_cutoff, MAX_RELATIVE_ERROR, MIN_RELATIVE_ERROR};
pub use window::score_window;
