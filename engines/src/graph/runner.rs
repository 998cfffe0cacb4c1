//! [`GraphRunner`]: one graph with its I/O preallocated and bound once (see the [`super`] module docs).

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use exporter::signature::{DType, TensorSig};
use ort::memory::{AllocationDevice, Allocator, AllocatorType, MemoryInfo, MemoryType};
use ort::session::{IoBinding, Session};
use ort::value::{DynTensor, PrimitiveTensorElementType};
use ort::AsPointer;

use crate::backend::{SessionConfig, Target};
use crate::error::{Error, Result};
use crate::runtime::Runtime;

use super::binding::{binding_plan, CacheMode, Capture, Memory, GPU_GRAPH_ID};
use super::cache_copy::{bytes_of, bytes_of_mut, copy_slots, dtype_size, CacheLayout, CacheMove};
use super::facts::state_input_name;
use super::ort_glue::{signature_of, ProviderNodes};
use super::ort_types::{element_of, ort_error};
use super::shared_session::SharedSession;
use super::transfer;
use super::weights::{Held, SharedWeights};

mod detached;
mod host_zeroed;

/// What [`GraphRunner::check`] found: the session's I/O and where its nodes run.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphCheck {
    pub inputs: Vec<TensorSig>,
    pub outputs: Vec<TensorSig>,
    pub providers: Vec<ProviderNodes>,
}

/// One bound input or output.
struct Slot {
    sig: TensorSig,
    /// The bound tensor (host memory on CPU, device memory on GPU).
    bound: DynTensor,
    /// Ping-pong partner of a cache input (the buffer the output is written to).
    spare: Option<DynTensor>,
    /// Pinned host mirror of a device tensor.
    host: Option<DynTensor>,
    /// Host mirror written since the last upload.
    dirty: bool,
    /// Bound to another runner's input of this name ([`GraphRunner::share_input`]): `bound` is a placeholder.
    shared_from: Option<String>,
    /// An output with no buffer of its own ([`GraphRunner::detach_outputs`]): `bound` is a placeholder.
    detached: bool,
}

/// A loaded graph with all I/O preallocated and bound once (see the module docs).
pub struct GraphRunner {
    name: String,
    target: Target,
    /// The session; shared by every bucket of a shape-polymorphic graph (TensorRT, [`SharedSession`]).
    session: Arc<Session>,
    binding: IoBinding,
    inputs: Vec<Slot>,
    outputs: Vec<Slot>,
    /// (input index, output index) of each cache pair.
    caches: Vec<(usize, usize)>,
    cache_mode: CacheMode,
    capture: Capture,
    /// Run options carrying a non-default `gpu_graph_id` (several captured graphs on one session).
    run_options: Option<ort::session::RunOptions>,
    providers: Vec<ProviderNodes>,
    copies_logged: Arc<AtomicUsize>,
    pinned: Option<Allocator>,
    /// Pinned scratch for `copy_cache` on GPU, by source output name and shape: caches of one name come from
    /// buckets of different sizes (a prefill of 1 row, then of 4), and each size needs its own buffer.
    scratch: HashMap<(String, Vec<usize>), DynTensor>,
    _weights: Arc<Held>,
}

impl std::fmt::Debug for GraphRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphRunner")
            .field("name", &self.name)
            .field("target", &self.target)
            .field("cache_mode", &self.cache_mode)
            .field("providers", &self.providers)
            .finish_non_exhaustive()
    }
}

impl GraphRunner {
    /// Loads `model` for `target` with the session settings `cfg` (see
    /// [`backend::session_config`](crate::backend::session_config)).
    ///
    /// `weights`: share external initializers and prepacked weights with other sessions (CPU only; ignored on
    /// GPU targets). `name` names the graph in errors (`small.decode`).
    pub fn load(
        rt: &Runtime,
        model: &Path,
        name: &str,
        target: &Target,
        cfg: &SessionConfig,
        weights: Option<&SharedWeights>,
    ) -> Result<Self> {
        let shared = SharedSession::open(rt, model, name, target, cfg, weights)?;
        let sig_of = |o: &ort::value::Outlet| signature_of(o, name);
        let in_sigs: Vec<TensorSig> = shared.session.inputs().iter().map(sig_of).collect::<Result<_>>()?;
        let out_sigs: Vec<TensorSig> = shared.session.outputs().iter().map(sig_of).collect::<Result<_>>()?;
        Self::bind(&shared, name, target, in_sigs, out_sigs, 0)
    }

    /// One bucket of a shape-polymorphic graph's `shared` session, with this bucket's static I/O (`inputs`,
    /// `outputs`: the graph's inputs and outputs, in order, at the bucket's sizes) allocated and bound.
    ///
    /// `gpu_graph_id` keys this bucket's captured CUDA graph on the shared session (see
    /// [`capture_keys`](super::capture_keys)).
    pub fn load_bucket(
        shared: &SharedSession,
        name: &str,
        target: &Target,
        inputs: Vec<TensorSig>,
        outputs: Vec<TensorSig>,
        gpu_graph_id: i64,
    ) -> Result<Self> {
        let err = |message: String| Error::Session { graph: name.to_string(), message };
        shared.check_bucket(&inputs, &outputs).map_err(err)?;
        Self::bind(shared, name, target, inputs, outputs, gpu_graph_id)
    }

    /// Allocates and binds `in_sigs`/`out_sigs` on `shared`'s session per [`binding_plan`].
    fn bind(
        shared: &SharedSession,
        name: &str,
        target: &Target,
        in_sigs: Vec<TensorSig>,
        out_sigs: Vec<TensorSig>,
        gpu_graph_id: i64,
    ) -> Result<Self> {
        let session = shared.session.clone();
        let (facts, copies_logged) = (&shared.facts, shared.copies_logged.clone());
        let providers = shared.providers.clone();

        let host_alloc = Allocator::default();
        let (device_alloc, pinned) = if let Some(device) = target.device() {
            let dev =
                MemoryInfo::new(AllocationDevice::CUDA, device, AllocatorType::Device, MemoryType::Default)
                    .and_then(|info| Allocator::new(&session, info))
                    .map_err(|e| ort_error("creating the CUDA allocator", e))?;
            let pin = MemoryInfo::new(
                AllocationDevice::CUDA_PINNED,
                0,
                AllocatorType::Device,
                MemoryType::CPUOutput,
            )
            .and_then(|info| Allocator::new(&session, info))
            .map_err(|e| ort_error("creating the pinned host allocator", e))?;
            (dev, Some(pin))
        } else {
            (Allocator::default(), None)
        };
        let session_err = |message: String| Error::Session { graph: name.to_string(), message };
        let new_tensor = |alloc: &Allocator, sig: &TensorSig| {
            DynTensor::new(alloc, element_of(sig.dtype), sig.shape.clone())
                .map_err(|e| ort_error(format!("allocating `{}` of graph {name}", sig.name), e))
        };
        let plan = binding_plan(target, &in_sigs, &out_sigs, &facts.in_place).map_err(session_err)?;
        let alloc_for = |m: Memory| match m {
            Memory::Host => &host_alloc,
            Memory::Device(_) => &device_alloc,
        };
        // a host buffer starts as zeros, resident only where written (see [`host_zeroed`])
        let new_bound = |m: Memory, sig: &TensorSig| {
            let mut t = new_tensor(alloc_for(m), sig)?;
            if m == Memory::Host {
                host_zeroed::zero_unresident(&mut t);
            }
            Ok::<_, Error>(t)
        };
        let mut inputs = Vec::new();
        for (sig, p) in in_sigs.into_iter().zip(&plan.inputs) {
            let bound = new_bound(p.memory, &sig)?;
            let host = match (&pinned, p.host_mirror) {
                (Some(pin), true) => Some(new_tensor(pin, &sig)?),
                _ => None,
            };
            inputs.push(Slot {
                sig,
                bound,
                spare: None,
                host,
                dirty: false,
                shared_from: None,
                detached: false,
            });
        }
        let mut outputs = Vec::new();
        let mut caches = Vec::new();
        for (sig, p) in out_sigs.into_iter().zip(&plan.outputs) {
            match p.cache_of.as_ref().and_then(|n| inputs.iter().position(|s| &s.sig.name == n)) {
                Some(i) => {
                    if plan.cache_mode == CacheMode::PingPong {
                        inputs[i].spare = Some(new_bound(p.memory, &sig)?);
                    }
                    caches.push((i, outputs.len()));
                    // the output slot's own tensor is unused for a cache: it is the input's (or its spare)
                    let bound = new_tensor(&host_alloc, &TensorSig { shape: vec![1], ..sig.clone() })?;
                    outputs.push(Slot {
                        sig,
                        bound,
                        spare: None,
                        host: None,
                        dirty: false,
                        shared_from: None,
                        detached: false,
                    });
                }
                None => {
                    let bound = new_bound(p.memory, &sig)?;
                    let host = match (&pinned, p.host_mirror) {
                        (Some(pin), true) => Some(new_tensor(pin, &sig)?),
                        _ => None,
                    };
                    outputs.push(Slot {
                        sig,
                        bound,
                        spare: None,
                        host,
                        dirty: false,
                        shared_from: None,
                        detached: false,
                    });
                }
            }
        }
        let mut binding = session.create_binding().map_err(|e| ort_error("creating the I/O binding", e))?;
        for s in &inputs {
            binding
                .bind_input(&s.sig.name, &s.bound)
                .map_err(|e| ort_error(format!("binding `{}`", s.sig.name), e))?;
        }
        for (idx, s) in outputs.iter_mut().enumerate() {
            let target_tensor = match caches.iter().find(|(_, o)| *o == idx) {
                Some((i, _)) => match &mut inputs[*i].spare {
                    Some(spare) => spare,
                    None => &mut inputs[*i].bound,
                },
                None => &mut s.bound,
            };
            binding
                .bind_output(&s.sig.name, target_tensor)
                .map_err(|e| ort_error(format!("binding `{}`", s.sig.name), e))?;
        }
        let cache_mode = plan.cache_mode;
        let capture = match plan.capture {
            Capture::Graph { .. } => Capture::Graph { gpu_graph_id },
            Capture::No => Capture::No,
        };
        let run_options = match capture {
            Capture::Graph { gpu_graph_id } if gpu_graph_id != 0 => {
                let mut o =
                    ort::session::RunOptions::new().map_err(|e| ort_error("creating run options", e))?;
                o.set(GPU_GRAPH_ID, gpu_graph_id.to_string())
                    .map_err(|e| ort_error("setting gpu_graph_id", e))?;
                Some(o)
            }
            _ => None,
        };
        Ok(GraphRunner {
            name: name.to_string(),
            target: target.clone(),
            session,
            binding,
            inputs,
            outputs,
            caches,
            cache_mode,
            capture,
            run_options,
            providers,
            copies_logged,
            pinned,
            scratch: HashMap::new(),
            _weights: shared.held.clone(),
        })
    }

    /// Creates the graph's session as [`load`](Self::load) does — so ONNX Runtime parses, optimises and plans it
    /// for `target` — and reports its I/O and providers, without allocating any of its I/O (a build checks every
    /// bucket, and the largest caches are gigabytes).
    pub fn check(
        rt: &Runtime,
        model: &Path,
        name: &str,
        target: &Target,
        cfg: &SessionConfig,
        weights: Option<&SharedWeights>,
    ) -> Result<GraphCheck> {
        let shared = SharedSession::open(rt, model, name, target, cfg, weights)?;
        let session = &shared.session;
        Ok(GraphCheck {
            inputs: session.inputs().iter().map(|o| signature_of(o, name)).collect::<Result<_>>()?,
            outputs: session.outputs().iter().map(|o| signature_of(o, name)).collect::<Result<_>>()?,
            providers: shared.providers.clone(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Input signatures, in graph order.
    pub fn inputs(&self) -> impl Iterator<Item = &TensorSig> {
        self.inputs.iter().map(|s| &s.sig)
    }

    /// Whether input `name` reads another graph's buffer ([`share_input`](Self::share_input)): its host buffer is
    /// that graph's to write.
    pub fn is_shared(&self, name: &str) -> bool {
        Self::slot_index(&self.inputs, name).is_some_and(|i| self.inputs[i].shared_from.is_some())
    }

    /// Output signatures, in graph order.
    pub fn outputs(&self) -> impl Iterator<Item = &TensorSig> {
        self.outputs.iter().map(|s| &s.sig)
    }

    pub fn cache_mode(&self) -> CacheMode {
        self.cache_mode
    }

    /// Whether (and under which key) this runner's session captures it as a CUDA graph.
    pub fn capture(&self) -> Capture {
        self.capture
    }

    /// Nodes per execution provider, as ONNX Runtime assigned them (`session.record_ep_graph_assignment_info`).
    pub fn providers(&self) -> &[ProviderNodes] {
        &self.providers
    }

    /// The provider that ran the most nodes (`CPUExecutionProvider`, `CUDAExecutionProvider`, ...).
    pub fn main_provider(&self) -> Option<&str> {
        self.providers.iter().max_by_key(|p| p.nodes).map(|p| p.provider.as_str())
    }

    /// How many times ONNX Runtime reported copying a whole KV cache (`TensorScatter` not in place). 0 with the
    /// in-place binding.
    pub fn cache_copies_logged(&self) -> usize {
        self.copies_logged.load(Ordering::Relaxed)
    }

    fn slot_index(slots: &[Slot], name: &str) -> Option<usize> {
        slots.iter().position(|s| s.sig.name == name)
    }

    fn tensor_error(&self, name: &str, message: impl Into<String>) -> Error {
        Error::Tensor { graph: self.name.clone(), name: name.to_string(), message: message.into() }
    }

    /// The index of input `name`, whose buffer is this runner's own (not [shared](Self::share_input)).
    fn host_input(&self, name: &str) -> Result<usize> {
        let i = Self::slot_index(&self.inputs, name).ok_or_else(|| {
            self.tensor_error(name, format!("no such input (inputs: {})", self.input_names()))
        })?;
        match &self.inputs[i].shared_from {
            Some(from) => {
                Err(self.tensor_error(name, format!("is graph {from}'s buffer: read or write it there")))
            }
            None => Ok(i),
        }
    }

    /// Binds input `name` to the buffer of `from`'s input of the same name and shape, so this graph reads what
    /// `from` holds there, where `from` updates it, without a copy (a graph that reads another graph's cache: the
    /// second token head reading the cache a decode step writes in place). CPU runners only, and `from`'s caches
    /// must be updated in place (a ping-pong cache changes buffers every run). This runner's own buffer for
    /// `name` is freed; [`input`](Self::input) and [`input_mut`](Self::input_mut) of it are errors from then on.
    /// The binding holds its own reference to the buffer: it stays valid if `from` is dropped. Binding again
    /// (after `from` was reloaded) replaces it.
    pub fn share_input(&mut self, name: &str, from: &GraphRunner) -> Result<()> {
        let i = Self::slot_index(&self.inputs, name).ok_or_else(|| {
            self.tensor_error(name, format!("no such input (inputs: {})", self.input_names()))
        })?;
        let j = Self::slot_index(&from.inputs, name).ok_or_else(|| {
            self.tensor_error(name, format!("graph {} has no input of this name", from.name))
        })?;
        let (mine, theirs) = (&self.inputs[i].sig, &from.inputs[j].sig);
        if mine.dtype != theirs.dtype || mine.shape != theirs.shape {
            return Err(self.tensor_error(
                name,
                format!(
                    "is {:?} {:?}, graph {}'s is {:?} {:?}: only equal buffers can be shared",
                    mine.dtype, mine.shape, from.name, theirs.dtype, theirs.shape
                ),
            ));
        }
        if self.pinned.is_some() || from.pinned.is_some() || from.cache_mode == CacheMode::PingPong {
            return Err(self.tensor_error(
                name,
                "buffers are shared between CPU runners whose caches are updated in place only",
            ));
        }
        if from.inputs[j].shared_from.is_some() {
            return Err(self.tensor_error(name, format!("graph {}'s buffer is itself shared", from.name)));
        }
        self.binding
            .bind_input(name, &from.inputs[j].bound)
            .map_err(|e| ort_error(format!("binding `{name}` to graph {}'s buffer", from.name), e))?;
        let slot = &mut self.inputs[i];
        slot.bound = DynTensor::new(&Allocator::default(), element_of(slot.sig.dtype), vec![1usize])
            .map_err(|e| ort_error("allocating a placeholder", e))?;
        slot.shared_from = Some(from.name.clone());
        Ok(())
    }

    /// The host buffer of input `name`, to be filled before [`run`](Self::run). On GPU targets this is the
    /// pinned mirror, uploaded by `run` (a cache input is first downloaded, so partial writes keep the rest).
    pub fn input_mut<T: PrimitiveTensorElementType + std::fmt::Debug>(
        &mut self,
        name: &str,
    ) -> Result<&mut [T]> {
        let i = self.host_input(name)?;
        if let (Some(pin), None) = (&self.pinned, &self.inputs[i].host) {
            let mut host =
                DynTensor::new(pin, element_of(self.inputs[i].sig.dtype), self.inputs[i].sig.shape.clone())
                    .map_err(|e| ort_error(format!("allocating a host mirror of `{name}`"), e))?;
            transfer::copy(&self.inputs[i].bound, &mut host, &format!("downloading `{name}`"))?;
            self.inputs[i].host = Some(host);
        }
        let graph = self.name.clone();
        let slot = &mut self.inputs[i];
        slot.dirty = true;
        let t = slot.host.as_mut().unwrap_or(&mut slot.bound);
        t.try_extract_tensor_mut::<T>().map(|(_, d)| d).map_err(|e| Error::Tensor {
            graph,
            name: name.to_string(),
            message: format!("cannot view as {}: {e}", std::any::type_name::<T>()),
        })
    }

    /// Zeroes rows `rows` (indices along the first axis) of f32 input `name`, giving their whole pages back to the
    /// system: a row the graph will not read again for a while (a cache row whose contents are dead) then holds no
    /// memory until it is written again, and reads as zeros. Written with zeros instead where the buffer is not
    /// this runner's own anonymous memory (pinned, or shared with another graph). Returns the bytes given back.
    pub fn release_input_rows(&mut self, name: &str, rows: &[usize]) -> Result<usize> {
        let i = self.host_input(name)?;
        let sig = &self.inputs[i].sig;
        let row_len: usize = sig.shape.iter().skip(1).product();
        let n_rows = sig.shape.first().copied().unwrap_or(0);
        if let Some(&r) = rows.iter().find(|&&r| r >= n_rows) {
            return Err(self.tensor_error(name, format!("row {r} of {n_rows}")));
        }
        let own = self.pinned.is_none() && self.inputs[i].shared_from.is_none();
        let data = self.input_mut::<f32>(name)?;
        let mut given = 0;
        for &r in rows {
            let row = &mut data[r * row_len..(r + 1) * row_len];
            if own {
                // SAFETY: the row's f32s viewed as bytes (same memory, any bit pattern is a valid u8).
                let bytes =
                    unsafe { std::slice::from_raw_parts_mut(row.as_mut_ptr().cast::<u8>(), row.len() * 4) };
                given += host_zeroed::zero_bytes(bytes);
            } else {
                row.fill(0.0);
            }
        }
        Ok(given)
    }

    /// Whether the graph has an input `name` (shape-polymorphic graphs take the time mask as one).
    pub fn has_input(&self, name: &str) -> bool {
        Self::slot_index(&self.inputs, name).is_some()
    }

    /// The element type of input `name`.
    pub fn input_dtype(&self, name: &str) -> Result<DType> {
        Self::slot_index(&self.inputs, name)
            .map(|i| self.inputs[i].sig.dtype)
            .ok_or_else(|| self.tensor_error(name, format!("no such input (inputs: {})", self.input_names())))
    }

    /// Writes f32 `values` into float input `name` from element `offset`, rounding to nearest f16 when the graph
    /// takes f16 (fp16 graphs take f16 patches, rotary tables and caches; the host computes in f32/f64).
    pub fn write_f32(&mut self, name: &str, offset: usize, values: &[f32]) -> Result<()> {
        let dtype = self.input_dtype(name)?;
        let out_of_range =
            |len: usize| format!("writing {} values at {offset} into {len} elements", values.len());
        match dtype {
            DType::F32 => {
                let dst = self.input_mut::<f32>(name)?;
                let len = dst.len();
                let d = dst.get_mut(offset..offset + values.len()).ok_or_else(|| out_of_range(len));
                match d {
                    Ok(d) => d.copy_from_slice(values),
                    Err(m) => return Err(self.tensor_error(name, m)),
                }
            }
            DType::F16 => {
                let dst = self.input_mut::<half::f16>(name)?;
                let len = dst.len();
                match dst.get_mut(offset..offset + values.len()) {
                    Some(d) => d.iter_mut().zip(values).for_each(|(d, v)| *d = half::f16::from_f32(*v)),
                    None => return Err(self.tensor_error(name, out_of_range(len))),
                }
            }
            DType::I64 => return Err(self.tensor_error(name, "is an integer input, not a float one")),
        }
        Ok(())
    }

    /// Sets every element of float input `name` to `v` (f32 or f16).
    pub fn fill_f32(&mut self, name: &str, v: f32) -> Result<()> {
        match self.input_dtype(name)? {
            DType::F32 => self.input_mut::<f32>(name)?.fill(v),
            DType::F16 => self.input_mut::<half::f16>(name)?.fill(half::f16::from_f32(v)),
            DType::I64 => return Err(self.tensor_error(name, "is an integer input, not a float one")),
        }
        Ok(())
    }

    /// The current contents of input `name` (host view; on GPU the pinned mirror, if any).
    pub fn input<T: PrimitiveTensorElementType + std::fmt::Debug>(&self, name: &str) -> Result<&[T]> {
        let i = self.host_input(name)?;
        let slot = &self.inputs[i];
        self.view(slot.host.as_ref().unwrap_or(&slot.bound), name)
    }

    /// Output `name` of the last run. For a KV cache this is the updated cache (the input's buffer after an
    /// in-place run). On GPU, caches are device-resident: read them with [`input_mut`](Self::input_mut) on the
    /// cache input or move them with [`copy_cache`](Self::copy_cache).
    pub fn output<T: PrimitiveTensorElementType + std::fmt::Debug>(&self, name: &str) -> Result<&[T]> {
        let o = Self::slot_index(&self.outputs, name).ok_or_else(|| {
            self.tensor_error(name, format!("no such output (outputs: {})", self.output_names()))
        })?;
        if self.outputs[o].detached {
            return Err(self.tensor_error(name, "is detached: it has no buffer here (see `detach_outputs`)"));
        }
        let t = match self.caches.iter().find(|(_, oi)| *oi == o) {
            // after a ping-pong run the inputs were swapped: the fresh state is the bound input
            Some((i, _)) => &self.inputs[*i].bound,
            None => self.outputs[o].host.as_ref().unwrap_or(&self.outputs[o].bound),
        };
        self.view(t, name)
    }

    fn view<'a, T: PrimitiveTensorElementType + std::fmt::Debug>(
        &self,
        t: &'a DynTensor,
        name: &str,
    ) -> Result<&'a [T]> {
        t.try_extract_tensor::<T>().map(|(_, d)| d).map_err(|e| {
            self.tensor_error(name, format!("cannot view as {} on the host: {e}", std::any::type_name::<T>()))
        })
    }

    fn input_names(&self) -> String {
        self.inputs.iter().map(|s| s.sig.name.as_str()).collect::<Vec<_>>().join(", ")
    }

    fn output_names(&self) -> String {
        self.outputs.iter().map(|s| s.sig.name.as_str()).collect::<Vec<_>>().join(", ")
    }

    /// Runs the graph on the bound buffers: one `RunWithBinding` (plus, on GPU, the uploads of written inputs
    /// and downloads of non-cache outputs).
    pub fn run(&mut self) -> Result<()> {
        if self.pinned.is_some() {
            for s in self.inputs.iter_mut().filter(|s| s.dirty) {
                if let Some(host) = &s.host {
                    transfer::copy(host, &mut s.bound, &format!("uploading `{}`", s.sig.name))?;
                }
                s.dirty = false;
            }
        }
        let api = ort::api();
        // SAFETY: session and binding are alive and belong together; all bound values are owned by `self`.
        let options = self.run_options.as_ref().map_or(std::ptr::null(), |o| o.ptr());
        let status =
            unsafe { (api.RunWithBinding)(self.session.ptr().cast_mut(), options, self.binding.ptr()) };
        unsafe { ort::Error::result_from_status(status) }
            .map_err(|e| Error::Session { graph: self.name.clone(), message: format!("run failed: {e}") })?;
        if self.pinned.is_some() {
            for s in self.outputs.iter_mut() {
                if let Some(host) = &mut s.host {
                    transfer::copy(&s.bound, host, &format!("downloading `{}`", s.sig.name))?;
                }
            }
        }
        if self.cache_mode == CacheMode::PingPong {
            self.swap_ping_pong()?;
        }
        Ok(())
    }

    fn swap_ping_pong(&mut self) -> Result<()> {
        for &(i, o) in &self.caches {
            let slot = &mut self.inputs[i];
            let Some(spare) = slot.spare.as_mut() else { continue };
            std::mem::swap(&mut slot.bound, spare);
            self.binding
                .bind_input(&slot.sig.name, &slot.bound)
                .map_err(|e| ort_error("re-binding a cache", e))?;
            let out_name = &self.outputs[o].sig.name;
            self.binding
                .bind_output(out_name, slot.spare.as_mut().expect("spare"))
                .map_err(|e| ort_error("re-binding a cache", e))?;
        }
        Ok(())
    }

    /// The cache inputs this graph carries (`k_cache.0`, `v_cache.0`, ...).
    pub fn cache_inputs(&self) -> impl Iterator<Item = &str> {
        self.caches.iter().map(|&(i, _)| self.inputs[i].sig.name.as_str())
    }

    /// Copies KV cache rows from `src`'s cache outputs into this graph's cache inputs: for every move and every
    /// `k_cache.i`/`v_cache.i`, slots `0..slots` of every head of row `dst` become those of `src`'s row `src_row`
    /// of `k_cache_out.i`/`v_cache_out.i`. The two graphs may have different rows and slot counts (a prefill
    /// bucket's S context slots go into a decode bucket's T-slot cache); slots past `slots` are left as they are
    /// (the decode key mask hides them until written). Used to give every sample path of a series its prefill
    /// cache once.
    pub fn copy_cache(&mut self, src: &GraphRunner, moves: &[CacheMove]) -> Result<()> {
        let pairs: Vec<(usize, usize)> = self
            .inputs
            .iter()
            .enumerate()
            .filter(|(i, _)| self.caches.iter().any(|(ci, _)| ci == i))
            .filter_map(|(i, s)| {
                src.outputs
                    .iter()
                    .position(|o| state_input_name(&o.sig.name).as_deref() == Some(&s.sig.name))
                    .map(|o| (i, o))
            })
            .collect();
        if pairs.is_empty() {
            return Err(
                self.tensor_error("k_cache.0", format!("no cache input matches an output of {}", src.name))
            );
        }
        if let Some(&(_, o)) = pairs.iter().find(|&&(_, o)| src.outputs[o].detached) {
            let message = format!(
                "graph {}'s `{}` is detached: it has no buffer to copy",
                src.name, src.outputs[o].sig.name
            );
            return Err(self.tensor_error("k_cache.0", message));
        }
        for (i, o) in pairs {
            let (dst_sig, src_sig) = (&self.inputs[i].sig, &src.outputs[o].sig);
            let layout = match (CacheLayout::of(dst_sig), CacheLayout::of(src_sig)) {
                (Some(d), Some(s))
                    if dst_sig.dtype == src_sig.dtype && d.heads == s.heads && d.width == s.width =>
                {
                    (d, s)
                }
                _ => {
                    return Err(self.tensor_error(
                        &dst_sig.name,
                        format!(
                            "cache {:?} {:?} does not match {}'s {} {:?} {:?}",
                            dst_sig.dtype,
                            dst_sig.shape,
                            src.name,
                            src_sig.name,
                            src_sig.dtype,
                            src_sig.shape
                        ),
                    ))
                }
            };
            if let Some(m) = moves.iter().find(|m| {
                m.dst >= layout.0.rows
                    || m.src >= layout.1.rows
                    || m.slots > layout.0.slots
                    || m.slots > layout.1.slots
            }) {
                return Err(self.tensor_error(
                    &dst_sig.name,
                    format!("cache move {m:?} outside {:?} ← {:?}", dst_sig.shape, src_sig.shape),
                ));
            }
            let elem = dtype_size(dst_sig.dtype);
            if let Some(pin) = &self.pinned {
                // GPU: device → pinned scratch (source rows), host copy into the pinned mirror, one upload.
                let key = (src_sig.name.clone(), src_sig.shape.clone());
                if !self.scratch.contains_key(&key) {
                    let t = DynTensor::new(pin, element_of(src_sig.dtype), src_sig.shape.clone())
                        .map_err(|e| ort_error("allocating cache scratch", e))?;
                    self.scratch.insert(key.clone(), t);
                }
                let scratch = self.scratch.get_mut(&key).expect("inserted");
                transfer::copy(src.output_tensor(o), scratch, "downloading a cache")?;
                if self.inputs[i].host.is_none() {
                    let mut t = DynTensor::new(pin, element_of(dst_sig.dtype), dst_sig.shape.clone())
                        .map_err(|e| ort_error("allocating a cache mirror", e))?;
                    // the mirror must start as the device cache, or the upload would overwrite untouched slots
                    transfer::copy(&self.inputs[i].bound, &mut t, "downloading a cache")?;
                    self.inputs[i].host = Some(t);
                }
                let slot = &mut self.inputs[i];
                let host = slot.host.as_mut().expect("mirror");
                copy_slots(bytes_of(scratch)?, bytes_of_mut(host)?, layout, elem, moves);
                transfer::copy(host, &mut slot.bound, "uploading a cache")?;
                slot.dirty = false;
            } else {
                let s = bytes_of(src.output_tensor(o))?;
                let d = bytes_of_mut(&mut self.inputs[i].bound)?;
                copy_slots(s, d, layout, elem, moves);
            }
        }
        Ok(())
    }

    /// The tensor holding output `o` after a run.
    fn output_tensor(&self, o: usize) -> &DynTensor {
        match self.caches.iter().find(|(_, oi)| *oi == o) {
            Some((i, _)) => &self.inputs[*i].bound,
            None => &self.outputs[o].bound,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runners_can_move_between_threads() {
        fn send<T: Send>() {}
        send::<GraphRunner>();
        send::<SharedWeights>();
    }
}
