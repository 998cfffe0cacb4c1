//! `totoc._native`: totoc's engines in-process from Python, the extension module of the `totoc` package.
//!
//! Thin over the `engines` crate: [`Engine::load`](engines::engine::Engine::load) opens the engine bundle,
//! every series is validated as a JSON request with the same fields would be
//! ([`RequestFields::validate`](engines::request::RequestFields::validate)) and admitted by the engine's context
//! policy ([`Engine::admit`](engines::engine::Engine::admit)) before any runs, then the series are forecast with
//! [`Engine::forecast`](engines::engine::Engine::forecast) in the groups `totoc forecast` uses, so the numbers are
//! the CLI's, bit for bit. The GIL is released for all of that and for flattening the responses ([`output`]); it
//! is held only while the caller's arrays are read ([`input`]) and the result buffers are wrapped as arrays.
//!
//! The Python side (`python/totoc/`) adds the exception classes, finding ONNX Runtime in the installed
//! `onnxruntime` package, the `Forecast` result and the docs.

mod arrow;
mod build;
mod cv;
mod cv_rows;
mod cv_windows;
mod errors;
mod fields;
mod fork;
mod input;
mod interrupt;
mod output;
mod series;
mod table;

use std::ffi::CString;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use engines::engine::{Engine, LoadOptions};
use engines::request::ForecastRequest;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::errors::{guard, invalid, to_py};
use crate::interrupt::Interrupt;

use engines::engine::FORECAST_GROUP as GROUP;

/// The size of ONNX Runtime's intra-op thread pool, set by the first engine this process loaded.
static POOL_THREADS: OnceLock<usize> = OnceLock::new();

/// What `Engine.info` reports, read once at load.
struct Info {
    family: &'static str,
    title: &'static str,
    point_forecast: &'static str,
    samples: bool,
    quantile_knots: Option<Vec<f64>>,
    target: String,
    precision: &'static str,
    fp16_emulation: bool,
    engine: String,
    ort_version: String,
    max_variates: usize,
    max_context: usize,
    max_horizon: usize,
    max_samples: usize,
    profiles: Vec<Profile>,
    memory_budget: u64,
    path: PathBuf,
    has_golden: bool,
}

/// One profile of the engine: its bounds.
struct Profile {
    name: String,
    batch: usize,
    variates: usize,
    context: usize,
    horizon: usize,
    samples: usize,
    /// Toto 2.0: the profile's block decoding (points), if it has one.
    decode_block: Option<usize>,
}

impl Info {
    fn of(engine: &Engine) -> Info {
        let info = engine.info();
        let caps = info.model.capabilities();
        let manifest = engine.manifest();
        Info {
            family: caps.name,
            title: caps.title,
            point_forecast: caps.point_forecast,
            samples: caps.samples,
            quantile_knots: caps.quantile_knots.map(<[f64]>::to_vec),
            target: info.target.clone(),
            precision: manifest.precision.as_str(),
            fp16_emulation: manifest.fp16_emulation,
            engine: info.label.clone(),
            ort_version: info.ort_version.clone(),
            max_variates: info.limits.max_variates,
            max_context: info.limits.max_context,
            max_horizon: info.limits.max_horizon,
            max_samples: info.limits.max_samples,
            profiles: manifest
                .family
                .profiles()
                .iter()
                .map(|p| Profile {
                    name: p.name.clone(),
                    batch: p.batch,
                    variates: p.variates,
                    context: p.context,
                    horizon: p.horizon,
                    samples: p.samples,
                    decode_block: p.decode_block,
                })
                .collect(),
            memory_budget: engine.memory_budget(),
            path: engine.dir().to_path_buf(),
            has_golden: info.has_golden,
        }
    }

    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("family", self.family)?;
        d.set_item("title", self.title)?;
        d.set_item("point_forecast", self.point_forecast)?;
        d.set_item("samples", self.samples)?;
        d.set_item("quantile_knots", self.quantile_knots.clone())?;
        d.set_item("target", &self.target)?;
        d.set_item("precision", self.precision)?;
        d.set_item("fp16_emulation", self.fp16_emulation)?;
        d.set_item("engine", &self.engine)?;
        d.set_item("ort_version", &self.ort_version)?;
        d.set_item("max_variates", self.max_variates)?;
        d.set_item("max_context", self.max_context)?;
        d.set_item("max_horizon", self.max_horizon)?;
        d.set_item("max_samples", self.max_samples)?;
        let profiles = PyList::empty(py);
        for profile in &self.profiles {
            let p = PyDict::new(py);
            p.set_item("name", &profile.name)?;
            p.set_item("batch", profile.batch)?;
            p.set_item("variates", profile.variates)?;
            p.set_item("context", profile.context)?;
            p.set_item("horizon", profile.horizon)?;
            p.set_item("samples", profile.samples)?;
            p.set_item("decode_block", profile.decode_block)?;
            profiles.append(p)?;
        }
        d.set_item("profiles", profiles)?;
        d.set_item("memory_budget", self.memory_budget)?;
        d.set_item("path", self.path.to_string_lossy().into_owned())?;
        d.set_item("has_golden", self.has_golden)?;
        Ok(d)
    }
}

/// A loaded engine (see `totoc.Engine`, which wraps it).
#[pyclass(module = "totoc._native", name = "Engine", frozen)]
pub(crate) struct NativeEngine {
    /// `None` once closed. A call in flight holds its own `Arc`, so closing never pulls the engine from under it.
    engine: Mutex<Option<Arc<Engine>>>,
    /// The process that loaded it: in a child forked from that process the engine cannot run ([`fork`]).
    owner: fork::Owner,
    info: Info,
    /// Seconds the last `forecast` call spent in the engine's own calls (`Engine::forecast`, all groups), for
    /// the overhead benchmark (`python/benchmarks/`): the rest of a Python call is the binding's.
    last_engine_seconds: Mutex<f64>,
}

impl NativeEngine {
    /// The engine, for one call: an error when it is closed, or when this process is a child forked from the
    /// one that loaded it (checked first, without touching anything the fork may have left locked).
    pub(crate) fn engine(&self) -> PyResult<Arc<Engine>> {
        self.owner.check(&self.info.path)?;
        let guard = self.engine.lock().unwrap_or_else(|p| p.into_inner());
        guard.clone().ok_or_else(|| {
            invalid(format!(
                "the engine {} is closed (Engine.close() was called); load it again with totoc.Engine(path)",
                self.info.path.display()
            ))
        })
    }
}

impl Drop for NativeEngine {
    /// In a forked child the engine is leaked, not released: releasing it would call into the parent's ONNX
    /// Runtime (its sessions, its thread pool), which cannot run here. The child's copy of its memory is the
    /// parent's, shared until written, so leaking it costs nothing.
    fn drop(&mut self) {
        if self.owner.forked() {
            let engine = self.engine.get_mut().unwrap_or_else(|p| p.into_inner()).take();
            std::mem::forget(engine);
        }
    }
}

#[pymethods]
impl NativeEngine {
    #[new]
    #[pyo3(signature = (path, *, threads=None, memory_budget=None, ort_lib=None))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        threads: Option<&Bound<'_, PyAny>>,
        memory_budget: Option<&Bound<'_, PyAny>>,
        ort_lib: Option<PathBuf>,
    ) -> PyResult<Self> {
        guard(|| Self::load(py, path, threads, memory_budget, ort_lib))
    }

    /// What the engine holds (a new dict each time).
    #[getter]
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.info.to_dict(py)
    }

    /// Whether the engine is closed: `close()` was called, or it was left unusable by a fork
    /// ([`forget_after_fork`](Self::forget_after_fork)).
    #[getter]
    fn closed(&self) -> bool {
        self.owner.forked() || self.engine.lock().unwrap_or_else(|p| p.into_inner()).is_none()
    }

    /// Seconds the most recent `forecast` call (of any thread) spent in the engine itself: not the reading of
    /// the arrays, the validation or the copies into the result arrays. 0.0 before the first call.
    #[getter]
    fn last_engine_seconds(&self) -> f64 {
        *self.last_engine_seconds.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Releases the engine (its graphs and weights) once calls in flight end. Closing twice is allowed; in a
    /// forked child it does nothing (the engine is the parent's).
    fn close(&self) {
        if !self.owner.forked() {
            self.engine.lock().unwrap_or_else(|p| p.into_inner()).take();
        }
    }

    /// Called in a child right after `fork()` (`os.register_at_fork`, python/totoc/_engine.py): the engine
    /// inherited from the parent is dropped from this object without being released (see [`Drop`]), so no call,
    /// `close()` or garbage collection in the child reaches the parent's ONNX Runtime. Calls raise the fork's
    /// error from then on, as they would from the process id alone.
    fn forget_after_fork(&self) {
        self.owner.mark_forked();
        // `try_lock`: a thread of the parent may have held the lock at the fork, and no thread of the parent
        // runs here to release it; the engine then stays in place, unused, and is leaked by `Drop`.
        if let Ok(mut engine) = self.engine.try_lock() {
            std::mem::forget(engine.take());
        }
    }

    #[pyo3(signature = (target, horizon, *, samples=None, quantiles=None, seed=None, id_mask=None, strict_context=false,
        columns=None, timestamps=None, future_timestamps=None, temperature=None, top_k=None, top_p=None, params=None))]
    #[allow(clippy::too_many_arguments)]
    fn forecast<'py>(
        &self,
        py: Python<'py>,
        target: &Bound<'py, PyAny>,
        horizon: &Bound<'py, PyAny>,
        samples: Option<&Bound<'py, PyAny>>,
        quantiles: Option<&Bound<'py, PyAny>>,
        seed: Option<&Bound<'py, PyAny>>,
        id_mask: Option<&Bound<'py, PyAny>>,
        strict_context: bool,
        columns: Option<&Bound<'py, PyAny>>,
        timestamps: Option<&Bound<'py, PyAny>>,
        future_timestamps: Option<&Bound<'py, PyAny>>,
        temperature: Option<&Bound<'py, PyAny>>,
        top_k: Option<&Bound<'py, PyAny>>,
        top_p: Option<&Bound<'py, PyAny>>,
        params: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        guard(|| {
            let engine = self.engine()?;
            let as_usize = |v: u64, name: &str| {
                usize::try_from(v)
                    .map_err(|_| invalid(format!("`{name}` is {v}: too large for this machine")))
            };
            let asked = series::Asked {
                horizon: as_usize(input::count(horizon, "horizon")?, "horizon")?,
                samples: match samples.filter(|s| !s.is_none()) {
                    Some(s) => Some(as_usize(input::count(s, "samples")?, "samples")?),
                    None => None,
                },
                quantiles: input::levels(quantiles)?,
                seed: seed.filter(|s| !s.is_none()).map(|s| input::count(s, "seed")).transpose()?,
                strict_context,
                extra: fields::Extra {
                    columns: fields::columns(columns)?,
                    timestamps: None,
                    future_timestamps: None,
                    temperature: fields::number(temperature, "temperature")?,
                    top_k: fields::integer(top_k, "top_k")?,
                    top_p: fields::number(top_p, "top_p")?,
                    params: fields::params(params)?,
                },
            };
            let stamps = (timestamps, future_timestamps);
            self.run_forecast(py, engine, target, id_mask, stamps, asked)
        })
    }

    fn __repr__(&self) -> String {
        let state = match (self.owner.forked(), self.closed()) {
            (true, _) => ", unusable in this forked process",
            (false, true) => ", closed",
            (false, false) => "",
        };
        format!(
            "Engine({:?}, {}, {}{state})",
            self.info.path.display().to_string(),
            self.info.family,
            self.info.engine
        )
    }
}

impl NativeEngine {
    /// `Engine(path, ...)`: the arguments checked, then the bundle loaded without the GIL.
    fn load(
        py: Python<'_>,
        path: PathBuf,
        threads: Option<&Bound<'_, PyAny>>,
        memory_budget: Option<&Bound<'_, PyAny>>,
        ort_lib: Option<PathBuf>,
    ) -> PyResult<Self> {
        let threads = match threads.filter(|t| !t.is_none()) {
            None => None,
            Some(t) => match input::count(t, "threads")? {
                0 => return Err(invalid("`threads` is 0; give at least 1 (or None for the default)")),
                n => Some(usize::try_from(n).map_err(|_| invalid(format!("`threads` is {n}: too many")))?),
            },
        };
        let memory_budget = match memory_budget.filter(|m| !m.is_none()) {
            None => None,
            Some(m) => Some(match m.extract::<String>() {
                Ok(text) => engines::memory::parse_size(&text).map_err(to_py)?,
                Err(_) => input::count(m, "memory_budget")?,
            }),
        };
        if !path.is_dir() {
            return Err(errors::Kind::Bundle.err(format!(
                "engine bundle {}: no such directory; build one with `totoc build-engine --artifacts BUNDLE --out \
                 ENGINE`",
                path.display()
            )));
        }
        // The intra-op thread pool is the process's: a count asked for after it started cannot take effect.
        let started = engines::runtime::get().is_some();
        if let (Some(n), Some(&running)) = (threads, POOL_THREADS.get()) {
            if n != running {
                let message = format!(
                    "threads={n} has no effect: ONNX Runtime's thread pool was started with {running} threads by \
                     the first engine this process loaded (the pool is per process)"
                );
                let category = py.get_type::<pyo3::exceptions::PyRuntimeWarning>();
                PyErr::warn(py, category.as_any(), &CString::new(message).unwrap_or_default(), 1)?;
            }
        }
        let opts = LoadOptions { ort_lib, threads: threads.filter(|_| !started), memory_budget };
        // In a child forked after the parent loaded ONNX Runtime, this fails at once (engines::runtime::init).
        let loaded = py.detach(|| Engine::load(&path, &opts));
        if !started && engines::runtime::get().is_some() {
            // the size the pool started with (later loads reset the engines crate's setting, not the pool)
            let _ = POOL_THREADS.set(engines::runtime::intra_threads());
        }
        let engine = loaded.map_err(to_py)?;
        let info = Info::of(&engine);
        Ok(NativeEngine {
            engine: Mutex::new(Some(Arc::new(engine))),
            owner: fork::Owner::this_process(),
            info,
            last_engine_seconds: Mutex::new(0.0),
        })
    }

    /// `forecast`'s work: the caller's arrays read (GIL held: the points the engine keeps are copied, see
    /// [`input`]), then without the GIL every series checked and admitted before any runs, the CLI's groups
    /// forecast (stopped by a pending Ctrl-C, [`Interrupt`]) and the results flattened.
    fn run_forecast<'py>(
        &self,
        py: Python<'py>,
        engine: Arc<Engine>,
        target: &Bound<'py, PyAny>,
        id_mask: Option<&Bound<'py, PyAny>>,
        (timestamps, future_timestamps): (Option<&Bound<'py, PyAny>>, Option<&Bound<'py, PyAny>>),
        mut asked: series::Asked,
    ) -> PyResult<Bound<'py, PyDict>> {
        let targets = input::read(target, engine.info().limits.max_context)?;
        let masks = input::id_masks(id_mask, targets.series.len())?;
        asked.extra.timestamps = fields::stamps(timestamps, "timestamps", targets.series.len())?;
        asked.extra.future_timestamps =
            fields::stamps(future_timestamps, "future_timestamps", targets.series.len())?;
        let asked = &asked;
        let single = targets.single;
        let point_name = self.info.point_forecast;
        let engine_seconds = &self.last_engine_seconds;
        let interrupt = Interrupt::new();
        let result = py.detach(|| -> Result<output::Output, (errors::Kind, String)> {
            errors::test_panic("forecast");
            let n = targets.series.len();
            let ats: Vec<String> = (0..n).map(|i| targets.at(i)).collect();
            let mut given = Vec::with_capacity(n);
            let mut reqs: Vec<ForecastRequest> = Vec::with_capacity(n);
            for (n, ((series, id_mask), at)) in targets.series.into_iter().zip(masks).zip(&ats).enumerate() {
                given.push(series.given);
                reqs.push(series::request(&engine, (n, series), id_mask, asked, at).map_err(parts)?);
            }
            // Every series is checked before any runs; then the CLI's groups.
            let mut responses = Vec::with_capacity(reqs.len());
            let mut ats = ats.into_iter();
            let mut reqs = reqs.into_iter().peekable();
            let mut in_engine = std::time::Duration::ZERO;
            while reqs.peek().is_some() {
                let group: Vec<ForecastRequest> = reqs.by_ref().take(GROUP).collect();
                let started = std::time::Instant::now();
                let results = interrupt.run(|opts| engine.forecast_with(group, opts));
                in_engine += started.elapsed();
                for result in results {
                    let at = ats.next().unwrap_or_default();
                    // as `totoc forecast` reports it: the series, then the engine's message
                    let response = result.map_err(|e| (errors::Kind::of(&e), format!("{at}: {e}")))?.response;
                    responses.push(response);
                }
            }
            *engine_seconds.lock().unwrap_or_else(|p| p.into_inner()) = in_engine.as_secs_f64();
            Ok(output::Output::new(&responses, &given, single, point_name, asked.horizon))
        });
        if let Some(raised) = interrupt.take() {
            return Err(raised);
        }
        result.map_err(|(kind, message)| kind.err(message))?.into_dict(py)
    }
}

/// An error as the exception it becomes: its kind and its message (made without the GIL, raised with it).
fn parts(e: engines::Error) -> (errors::Kind, String) {
    (errors::Kind::of(&e), e.to_string())
}

/// The ONNX Runtime this process loaded: `{"library", "source", "version"}`, or `None` before any engine loaded.
#[pyfunction]
fn runtime(py: Python<'_>) -> PyResult<Option<Bound<'_, PyDict>>> {
    guard(|| {
        let Some(rt) = engines::runtime::get() else { return Ok(None) };
        let d = PyDict::new(py);
        d.set_item("library", rt.library().to_string_lossy().into_owned())?;
        d.set_item("source", rt.source().describe())?;
        d.set_item("version", rt.version())?;
        Ok(Some(d))
    })
}

#[pymodule]
#[pyo3(name = "_native")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeEngine>()?;
    m.add_function(wrap_pyfunction!(runtime, m)?)?;
    m.add_function(wrap_pyfunction!(build::export, m)?)?;
    m.add_function(wrap_pyfunction!(build::build_engine, m)?)?;
    // tables: Engine.predict_df / cross_validation (src/table.rs, src/cv.rs)
    table::register(m)?;
    cv::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // The ONNX Runtime version totoc is built against (the `ort` API it needs is this version's).
    m.add("ORT_VERSION", engines::runtime::ORT_VERSION)?;
    // Whether this build has the tests' hooks (errors::test_panic): dev builds only.
    m.add("_TEST_HOOKS", cfg!(debug_assertions))?;
    Ok(())
}
