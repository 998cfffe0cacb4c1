//! Reading the caller's arrays into the engine's request values, straight from their numpy buffers (any strides,
//! float32 or float64; NaN = a missing point): one copy, into `[variate][time]` of `Option<f32>` (8 bytes a
//! point), of the points the engine keeps only: a series longer than the engine's context is cut to its most
//! recent `keep` points here, as the engine's context policy would cut it, so a long history costs a scan, not a
//! copy ([`Series`]). Shapes and types are checked here; the values (empty, all missing, not finite) are checked
//! by the engine's request validation, with its messages (`crate::series` for a cut series).

use numpy::ndarray::{s, ArrayViewD, Axis, Ix2};
use numpy::{PyArrayDyn, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use crate::errors::invalid;

/// One series: `[variate][time]`, `None` = missing.
pub type Target = Vec<Vec<Option<f32>>>;

/// One series as read: the points kept, and what the whole history held.
pub struct Series {
    /// `[variate][time]`: the last `min(given, keep)` points of each variate.
    pub kept: Target,
    /// Points per variate in the history given (`T`).
    pub given: usize,
    /// Per variate, over the whole history (only when points were left out: else the request's validation sees
    /// them all).
    pub scan: Option<Vec<RowScan>>,
}

/// What one variate's whole history held, for the checks validation makes on it.
#[derive(Debug, Clone, Copy, Default)]
pub struct RowScan {
    /// The first point that is not finite: its time index and value.
    pub first_bad: Option<(usize, f32)>,
    /// Whether any point is observed (not NaN).
    pub observed: bool,
}

/// The caller's target: one series (`[V, T]`) or several (`[N, V, T]`, or a list of `[V, T]`).
pub struct Targets {
    pub series: Vec<Series>,
    /// Whether one `[V, T]` array was given (results then have no series axis).
    pub single: bool,
}

impl Targets {
    /// How each series is named in errors: `target` for one series, else `series 3`.
    pub fn at(&self, n: usize) -> String {
        if self.single {
            "target".to_string()
        } else {
            format!("series {n}")
        }
    }
}

const SHAPES: &str =
    "give one series as a [V, T] array, several as an [N, V, T] array or a list of [V, T] arrays (NaN marks a missing point)";

/// Reads `obj`: a numpy array `[V, T]` or `[N, V, T]`, or a list (or tuple) of `[V, T]` arrays, keeping the last
/// `keep` points of each series.
pub fn read(obj: &Bound<'_, PyAny>, keep: usize) -> PyResult<Targets> {
    if let Ok(list) = obj.cast::<PyList>() {
        return read_items(list.iter().collect(), keep);
    }
    if let Ok(tuple) = obj.cast::<PyTuple>() {
        return read_items(tuple.iter().collect(), keep);
    }
    let (view_ndim, series) = with_view(obj, "target", |view| match view.ndim() {
        2 => Ok((2, vec![rows(view, keep)?])),
        3 => Ok((3, view.axis_iter(Axis(0)).into_iter().map(|v| rows(v, keep)).collect::<PyResult<_>>()?)),
        n => Err(invalid(format!("target has {n} dimension(s), shape {:?}; {SHAPES}", view.shape()))),
    })?;
    if series.is_empty() {
        return Err(invalid(format!("target has no series (its shape is (0, ...)); {SHAPES}")));
    }
    Ok(Targets { series, single: view_ndim == 2 })
}

fn read_items(items: Vec<Bound<'_, PyAny>>, keep: usize) -> PyResult<Targets> {
    if items.is_empty() {
        return Err(invalid(format!("target is an empty list: no series to forecast; {SHAPES}")));
    }
    let series = items
        .iter()
        .enumerate()
        .map(|(n, item)| {
            let what = format!("series {n}");
            with_view(item, &what, |view| match view.ndim() {
                2 => rows(view, keep),
                d => Err(invalid(format!(
                    "{what} has {d} dimension(s), shape {:?}; each series of a list is a [V, T] array",
                    view.shape()
                ))),
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    Ok(Targets { series, single: false })
}

/// A value as the request holds it.
trait Point: Copy {
    fn point(self) -> Option<f32>;
}

impl Point for f32 {
    fn point(self) -> Option<f32> {
        (!self.is_nan()).then_some(self)
    }
}

impl Point for f64 {
    /// A value beyond f32's range becomes infinite, which the request's validation refuses (as it refuses such a
    /// number in JSON).
    fn point(self) -> Option<f32> {
        (!self.is_nan()).then_some(self as f32)
    }
}

/// The values of a float view, as `f32` points.
enum View<'a> {
    F32(ArrayViewD<'a, f32>),
    F64(ArrayViewD<'a, f64>),
}

impl View<'_> {
    fn ndim(&self) -> usize {
        match self {
            View::F32(v) => v.ndim(),
            View::F64(v) => v.ndim(),
        }
    }

    fn shape(&self) -> &[usize] {
        match self {
            View::F32(v) => v.shape(),
            View::F64(v) => v.shape(),
        }
    }

    fn axis_iter(&self, axis: Axis) -> Vec<View<'_>> {
        match self {
            View::F32(v) => v.axis_iter(axis).map(View::F32).collect(),
            View::F64(v) => v.axis_iter(axis).map(View::F64).collect(),
        }
    }
}

/// `[V, T]` → the last `keep` points of each variate, and when that leaves points out, what each whole row held.
fn rows(view: View<'_>, keep: usize) -> PyResult<Series> {
    fn of<T: Point>(v: ArrayViewD<'_, T>, keep: usize) -> PyResult<Series> {
        let shape = v.shape().to_vec();
        let v = v
            .into_dimensionality::<Ix2>()
            .map_err(|_| invalid(format!("a series has shape {shape:?}; {SHAPES}")))?;
        let (variates, given) = v.dim();
        let skip = given.saturating_sub(keep);
        if skip == 0 {
            let kept = v.rows().into_iter().map(|row| row.iter().map(|x| x.point()).collect()).collect();
            return Ok(Series { kept, given, scan: None });
        }
        let mut kept = Vec::with_capacity(variates);
        let mut scan = Vec::with_capacity(variates);
        for row in v.rows() {
            let mut seen = RowScan::default();
            for (t, x) in row.iter().enumerate() {
                if let Some(x) = x.point() {
                    seen.observed = true;
                    if !x.is_finite() {
                        seen.first_bad = Some((t, x));
                        break;
                    }
                }
            }
            kept.push(row.slice(s![skip..]).iter().map(|x| x.point()).collect());
            scan.push(seen);
        }
        Ok(Series { kept, given, scan: Some(scan) })
    }
    match view {
        View::F32(v) => of(v, keep),
        View::F64(v) => of(v, keep),
    }
}

/// Runs `f` on a view of `obj`'s buffer (float32 or float64); anything else is an error naming its type.
fn with_view<R>(obj: &Bound<'_, PyAny>, what: &str, f: impl FnOnce(View<'_>) -> PyResult<R>) -> PyResult<R> {
    let busy =
        |e: numpy::BorrowError| invalid(format!("{what}: its buffer is being written by Rust code: {e}"));
    if let Ok(a) = obj.cast::<PyArrayDyn<f32>>() {
        let ro = a.try_readonly().map_err(busy)?;
        return f(View::F32(ro.as_array()));
    }
    if let Ok(a) = obj.cast::<PyArrayDyn<f64>>() {
        let ro = a.try_readonly().map_err(busy)?;
        return f(View::F64(ro.as_array()));
    }
    if let Ok(a) = obj.cast::<PyUntypedArray>() {
        return Err(invalid(format!(
            "{what} has dtype {}, shape {:?}; give float32 or float64 values (NaN marks a missing point), e.g. \
             `x.astype(np.float32)`",
            a.dtype(),
            a.shape()
        )));
    }
    let ty = obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
    Err(invalid(format!("{what} is a {ty}; {SHAPES}")))
}

/// The caller's `id_mask`: none, one `[V]` list for every series, or one per series (`[N, V]`, `None` for the
/// default).
pub fn id_masks(obj: Option<&Bound<'_, PyAny>>, n: usize) -> PyResult<Vec<Option<Vec<i64>>>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else { return Ok(vec![None; n]) };
    if let Ok(shared) = obj.extract::<Vec<i64>>() {
        return Ok(vec![Some(shared); n]);
    }
    match obj.extract::<Vec<Option<Vec<i64>>>>() {
        Ok(each) if each.len() == n => Ok(each),
        Ok(each) => Err(invalid(format!(
            "id_mask has {} entries for {n} series; give one [V] list of group ids for every series, or one per \
             series",
            each.len()
        ))),
        Err(_) => Err(invalid(
            "id_mask must be integers >= 0, one per variate: a [V] list (every series) or an [N, V] list (one per \
             series)",
        )),
    }
}

/// A non-negative integer argument (`horizon`, `samples`, `seed`, `threads`).
pub fn count(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<u64> {
    if obj.is_instance_of::<pyo3::types::PyBool>() {
        return Err(invalid(format!("`{name}` must be an integer >= 0, got a bool")));
    }
    if let Ok(v) = obj.extract::<u64>() {
        return Ok(v);
    }
    match obj.extract::<i64>() {
        Ok(v) => Err(invalid(format!("`{name}` is {v}; it must be >= 0"))),
        Err(_) => {
            let ty = obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
            Err(invalid(format!("`{name}` must be an integer from 0 to 2^64 - 1, got a {ty}")))
        }
    }
}

/// The quantile levels argument: `None` (the engine's default), or a sequence of numbers.
pub fn levels(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Vec<f64>>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else { return Ok(None) };
    obj.extract::<Vec<f64>>()
        .map(Some)
        .map_err(|_| invalid("quantiles must be a sequence of levels in (0, 1), e.g. [0.1, 0.5, 0.9]"))
}
