//! Glue to ONNX Runtime: opening a session, signatures and where the execution providers placed the nodes
//! (element and dtype conversions and its errors are [`super::ort_types`]).

use std::ffi::CStr;
use std::path::Path;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use exporter::signature::TensorSig;
use ort::session::Session;
use ort::AsPointer;

use crate::backend::{self, SessionConfig, Target};
use crate::error::{Error, Result};
use crate::runtime::Runtime;

use super::cache_copy::with_copy_counter;
use super::facts::{model_facts, ModelFacts};
use super::ort_types::dtype_of;
use super::weights::{weight_placement, Held, SharedWeights, WeightPlacement};

/// Nodes an execution provider ran.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProviderNodes {
    pub provider: String,
    pub nodes: usize,
}

/// Creates `model`'s session for `target` (weights shared through `weights` on CPU), with the logger that counts
/// ONNX Runtime's cache-copy warnings. Returns the session, the model's facts and the shared values it holds.
pub(super) fn open_session(
    rt: &Runtime,
    model: &Path,
    name: &str,
    target: &Target,
    cfg: &SessionConfig,
    weights: Option<&SharedWeights>,
    copies_logged: Arc<AtomicUsize>,
) -> Result<(Session, ModelFacts, Held)> {
    let facts = model_facts(model)?;
    let builder = backend::session_builder(rt, target, cfg)?;
    let builder = with_copy_counter(builder, name, copies_logged)?;
    let (mut builder, held) = match (weights, weight_placement(target)) {
        (Some(w), WeightPlacement::Host | WeightPlacement::Device(_)) => {
            let dir = model.parent().unwrap_or(Path::new("."));
            w.attach(rt, builder, dir, &facts)?
        }
        _ => (builder, Held::default()),
    };
    let session = builder.commit_from_file(model).map_err(|e| Error::Session {
        graph: name.to_string(),
        message: format!("creating the {} session from {}: {e}", target.name(), model.display()),
    })?;
    Ok((session, facts, held))
}

/// A session input's or output's static signature (an error for anything totoc graphs never have).
pub(super) fn signature_of(o: &ort::value::Outlet, graph: &str) -> Result<TensorSig> {
    let err = |message: String| Error::Session { graph: graph.to_string(), message };
    let ty = o.dtype();
    let (Some(elem), Some(shape)) = (ty.tensor_type(), ty.tensor_shape()) else {
        return Err(err(format!("`{}` is not a tensor", o.name())));
    };
    let dtype = dtype_of(elem).ok_or_else(|| {
        err(format!("`{}` has element type {elem:?}; totoc graphs use f32/f16/i64", o.name()))
    })?;
    if shape.iter().any(|&d| d <= 0) {
        return Err(err(format!(
            "`{}` has a dynamic shape {:?}; totoc graphs are static",
            o.name(),
            &**shape
        )));
    }
    Ok(TensorSig { name: o.name().to_string(), dtype, shape: shape.iter().map(|&d| d as usize).collect() })
}

/// Nodes per execution provider (empty if ONNX Runtime did not record the assignment).
pub(super) fn ep_assignment(session: &Session) -> Vec<ProviderNodes> {
    let api = ort::api();
    let mut subgraphs: *const *const ort::sys::OrtEpAssignedSubgraph = std::ptr::null();
    let mut n = 0usize;
    // SAFETY: out-pointers valid; the arrays are owned by the session and read before it can drop.
    let status = unsafe { (api.Session_GetEpGraphAssignmentInfo)(session.ptr(), &mut subgraphs, &mut n) };
    if unsafe { ort::Error::result_from_status(status) }.is_err() || subgraphs.is_null() {
        return Vec::new();
    }
    let mut out: Vec<ProviderNodes> = Vec::new();
    for i in 0..n {
        // SAFETY: `n` valid subgraph pointers.
        let sg = unsafe { *subgraphs.add(i) };
        let mut name: *const std::ffi::c_char = std::ptr::null();
        let mut nodes: *const *const ort::sys::OrtEpAssignedNode = std::ptr::null();
        let mut count = 0usize;
        let ok = unsafe {
            ort::Error::result_from_status((api.EpAssignedSubgraph_GetEpName)(sg, &mut name)).is_ok()
                && ort::Error::result_from_status((api.EpAssignedSubgraph_GetNodes)(
                    sg, &mut nodes, &mut count,
                ))
                .is_ok()
        };
        if !ok || name.is_null() {
            continue;
        }
        // SAFETY: NUL-terminated string owned by the session.
        let provider = unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned();
        match out.iter_mut().find(|p| p.provider == provider) {
            Some(p) => p.nodes += count,
            None => out.push(ProviderNodes { provider, nodes: count }),
        }
    }
    out
}
