//! The engine's responses as numpy arrays: each response's values copied once into flat `f32` buffers (built
//! without the GIL), which become arrays that own them (no further copy).
//!
//! Layouts (`N` only when several series were given; `V` the most variates of any series, a series with fewer
//! has NaN in the others):
//! * the point forecast (`mean`, Toto 1.0; `median`, Toto 2.0): `[N, V, H]`;
//! * `quantiles`: `[Q, N, V, H]`, levels in `quantile_levels` `[Q]` (float64), in the order asked;
//! * `samples`: `[N, S, V, H]` when sample paths were drawn;
//! * `context_truncated` (bool) and `context_used` (points) per series `[N]`.

use engines::request::ForecastResponse;
use numpy::ndarray::{Array, IxDyn};
use numpy::IntoPyArray;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// A group's forecasts, flattened.
pub struct Output {
    single: bool,
    /// `mean` or `median`.
    point_name: &'static str,
    n: usize,
    v: usize,
    h: usize,
    point: Vec<f32>,
    levels: Vec<f64>,
    quantiles: Vec<f32>,
    /// Sample paths per series (0: none).
    s: usize,
    samples: Vec<f32>,
    truncated: Vec<bool>,
    used: Vec<i64>,
    engine: String,
}

impl Output {
    /// Flattens `responses` (one per series, in order; `given[n]` the context length series `n` had).
    pub fn new(
        responses: &[ForecastResponse],
        given: &[usize],
        single: bool,
        point_name: &'static str,
        horizon: usize,
    ) -> Output {
        let n = responses.len();
        let v = responses.iter().map(|r| r.point().len()).max().unwrap_or(0);
        let h = horizon;
        let levels: Vec<f64> =
            responses.first().map(|r| r.quantiles.iter().map(|q| q.q).collect()).unwrap_or_default();
        let s = responses.iter().filter_map(|r| r.samples.as_ref().map(Vec::len)).max().unwrap_or(0);
        let q = levels.len();
        let mut point = vec![f32::NAN; n * v * h];
        let mut quantiles = vec![f32::NAN; q * n * v * h];
        let mut samples = vec![f32::NAN; n * s * v * h];
        // `rows` ([variate][horizon]) into the `[V, H]` block starting at `at`.
        let put = |dst: &mut [f32], at: usize, rows: &[Vec<f32>]| {
            for (vi, row) in rows.iter().enumerate() {
                let start = at + vi * h;
                let len = row.len().min(h);
                dst[start..start + len].copy_from_slice(&row[..len]);
            }
        };
        for (ni, r) in responses.iter().enumerate() {
            put(&mut point[..], ni * v * h, r.point());
            for (qi, qf) in r.quantiles.iter().enumerate().take(q) {
                put(&mut quantiles[..], (qi * n + ni) * v * h, &qf.values[..]);
            }
            for (si, path) in r.samples.iter().flatten().enumerate() {
                put(&mut samples[..], (ni * s + si) * v * h, &path[..]);
            }
        }
        let truncated = responses.iter().map(|r| r.context_truncated.is_some()).collect();
        let used = responses
            .iter()
            .zip(given)
            .map(|(r, &g)| r.context_truncated.map_or(g, |c| c.used) as i64)
            .collect();
        let engine = responses.first().map(|r| r.engine.clone()).unwrap_or_default();
        Output { single, point_name, n, v, h, point, levels, quantiles, s, samples, truncated, used, engine }
    }

    /// The result dict `totoc.Forecast` is made from: `mean`, `median`, `quantiles`, `quantile_levels`,
    /// `samples`, `context_truncated`, `context_used`, `engine`.
    pub fn into_dict(self, py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
        let Output {
            single,
            point_name,
            n,
            v,
            h,
            point,
            levels,
            quantiles,
            s,
            samples,
            truncated,
            used,
            engine,
        } = self;
        // `lead` axes, the series axis at `series_at` (dropped when one [V, T] array was given), then [V, H]
        let shape = |lead: &[usize], series_at: usize| -> Vec<usize> {
            let mut dims = lead.to_vec();
            if !single {
                dims.insert(series_at, n);
            }
            dims.extend([v, h]);
            dims
        };
        let d = PyDict::new(py);
        let point = array(py, shape(&[], 0), point)?;
        let none = py.None().into_bound(py);
        d.set_item("mean", if point_name == "mean" { point.clone() } else { none.clone() })?;
        d.set_item("median", if point_name == "median" { point } else { none.clone() })?;
        let q = levels.len();
        d.set_item("quantiles", if q > 0 { array(py, shape(&[q], 1), quantiles)? } else { none.clone() })?;
        d.set_item("quantile_levels", levels.into_pyarray(py))?;
        d.set_item("samples", if s > 0 { array(py, shape(&[s], 0), samples)? } else { none })?;
        if single {
            d.set_item("context_truncated", truncated[0])?;
            d.set_item("context_used", used[0])?;
        } else {
            d.set_item("context_truncated", truncated.into_pyarray(py))?;
            d.set_item("context_used", used.into_pyarray(py))?;
        }
        d.set_item("engine", engine)?;
        Ok(d)
    }
}

/// `data` as an array of shape `dims` that owns it.
fn array(py: Python<'_>, dims: Vec<usize>, data: Vec<f32>) -> PyResult<Bound<'_, PyAny>> {
    let a = Array::from_shape_vec(IxDyn(&dims), data)
        .map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(format!("result shape {dims:?}: {e}")))?;
    Ok(a.into_pyarray(py).into_any())
}
