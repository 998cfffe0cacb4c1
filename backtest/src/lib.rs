//! Rolling-origin backtests of totoc engines (`totoc backtest`; the Python package's `cross_validation` wraps the
//! same code).
//!
//! * [`windows`]: the rolling origins of each series (Nixtla's `cross_validation` semantics, in grid positions).
//! * [`run`]: every window of every series as one packed workload through the engine's forecast call.
//! * [`score`]: the run's forecasts turned into the metrics' inputs, with the naive and seasonal-naive baselines.
//! * [`metrics`]: forecast-quality metrics in f64 with fev's and utilsforecast's definitions, the naive and
//!   seasonal-naive baselines, and their aggregation per series, per window and overall.
//!
//! * [`rows`]: the windows of a family that reads its rows as given, cut at a cutoff's timestamp.
//! * [`calibration`]: coverage against nominal levels and the PIT histogram of a sampled run's paths.
//! * [`frame`]: a table's series ([`tables::Dataset`]) with their windows, and the per-window forecast table
//!   (Nixtla's columns), for `totoc backtest` and the Python package alike.
//!
//! The crate reads no files: the `tables` crate turns tables into series on their calendar grid, and writes the
//! reports.

pub mod calibration;
pub mod frame;
pub mod metrics;
pub mod rows;
pub mod run;
pub mod score;
pub mod windows;
