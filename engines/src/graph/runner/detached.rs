//! Outputs without buffers of their own ([`GraphRunner::detach_outputs`]) and runs that write them straight into
//! another graph's cache rows ([`GraphRunner::run_into`]), with the in-place row copies that follow
//! ([`GraphRunner::copy_cache_rows`]): how a prefill fills the decode graph's caches without a second copy.

use exporter::signature::{DType, TensorSig};
use ort::memory::{Allocator, MemoryInfo};
use ort::value::{DynTensor, DynValueRefMut, TensorRefMut};
use ort::AsPointer;

use crate::error::{Error, Result};

use super::super::cache_copy::{bytes_of_mut, copy_rows_within, dtype_size, CacheLayout, CacheMove};
use super::super::facts::state_input_name;
use super::super::ort_types::{element_of, ort_error};
use super::GraphRunner;

impl GraphRunner {
    /// Frees the buffers of outputs `names` and unbinds them: a run still computes them (ONNX Runtime allocates
    /// them for that run and drops them after it), [`run_into`](Self::run_into) writes them straight into another
    /// graph's cache inputs, and [`attach_outputs`](Self::attach_outputs) gives them buffers again. For an output
    /// that is a second copy of another graph's state between calls (a prefill's caches, which the decode graph
    /// holds): the loaded graph then holds none of it. CPU runners only; not a cache this graph updates in place.
    pub fn detach_outputs(&mut self, names: &[String]) -> Result<()> {
        for name in names {
            let o = Self::slot_index(&self.outputs, name).ok_or_else(|| {
                self.tensor_error(name, format!("no such output (outputs: {})", self.output_names()))
            })?;
            if self.pinned.is_some() {
                return Err(self.tensor_error(name, "outputs are detached on CPU runners only"));
            }
            if self.caches.iter().any(|&(_, oi)| oi == o) {
                return Err(
                    self.tensor_error(name, "is a cache updated in place: it has no buffer of its own")
                );
            }
            let slot = &mut self.outputs[o];
            slot.bound = placeholder(slot.sig.dtype)?;
            slot.detached = true;
        }
        self.rebind_outputs()
    }

    /// Gives every detached output a buffer of its own again, bound, for runs whose outputs are read here; returns
    /// their names (to [`detach_outputs`](Self::detach_outputs) them again after).
    pub fn attach_outputs(&mut self) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for slot in self.outputs.iter_mut().filter(|s| s.detached) {
            slot.bound =
                DynTensor::new(&Allocator::default(), element_of(slot.sig.dtype), slot.sig.shape.clone())
                    .map_err(|e| ort_error(format!("allocating `{}`", slot.sig.name), e))?;
            slot.detached = false;
            names.push(slot.sig.name.clone());
        }
        self.rebind_outputs()?;
        Ok(names)
    }

    /// Whether some output is [detached](Self::detach_outputs).
    pub fn has_detached_outputs(&self) -> bool {
        self.outputs.iter().any(|s| s.detached)
    }

    /// Binds every output but the detached ones to its buffer (a cache: its input's, or the input's spare).
    fn rebind_outputs(&mut self) -> Result<()> {
        self.binding.clear_outputs();
        let GraphRunner { binding, inputs, outputs, caches, .. } = self;
        for (idx, s) in outputs.iter_mut().enumerate().filter(|(_, s)| !s.detached) {
            let target = match caches.iter().find(|(_, o)| *o == idx) {
                Some(&(i, _)) => match &mut inputs[i].spare {
                    Some(spare) => spare,
                    None => &mut inputs[i].bound,
                },
                None => &mut s.bound,
            };
            binding
                .bind_output(&s.sig.name, target)
                .map_err(|e| ort_error(format!("binding `{}`", s.sig.name), e))?;
        }
        Ok(())
    }

    /// Runs the graph with each [detached](Self::detach_outputs) output written straight into `dst`'s cache input
    /// of the same state (output `k_cache_out.0` into input `k_cache.0`) at rows `row..row + R`, R this graph's
    /// rows: rows are outermost, so they are one contiguous block of `dst`'s buffer, to which the output is bound
    /// as it stands — no buffer of this graph's, no copy. The shapes must agree but for the rows. The outputs are
    /// unbound again after the run, whatever it returns (the binding must not keep `dst`'s memory).
    pub fn run_into(&mut self, dst: &mut GraphRunner, row: usize) -> Result<()> {
        let mut views = Vec::new();
        for o in (0..self.outputs.len()).filter(|&o| self.outputs[o].detached) {
            let sig = &self.outputs[o].sig;
            let view = dst.rows_view(sig, row).map_err(|m| self.tensor_error(&sig.name, m))?;
            views.push((sig.name.clone(), view));
        }
        let (graph, binding) = (&self.name, &mut self.binding);
        let bound = views.iter().try_for_each(|(name, view)| {
            let c_name = std::ffi::CString::new(name.as_bytes()).map_err(|_| Error::Tensor {
                graph: graph.clone(),
                name: name.clone(),
                message: "has a NUL in its name".into(),
            })?;
            // SAFETY: the binding and the view are alive; the view is unbound below, before it is dropped.
            let status = unsafe {
                let status = (ort::api().BindOutput)(binding.ptr_mut(), c_name.as_ptr(), view.ptr());
                ort::Error::result_from_status(status)
            };
            status.map_err(|e| ort_error(format!("binding `{name}` to graph {}'s cache", dst.name), e))
        });
        let result = bound.and_then(|()| self.run());
        let unbound = self.rebind_outputs();
        drop(views);
        result.and(unbound)
    }

    /// A tensor of `sig`'s shape over rows `row..` of this graph's cache input of the state `sig` outputs.
    fn rows_view(
        &mut self,
        sig: &TensorSig,
        row: usize,
    ) -> std::result::Result<DynValueRefMut<'static>, String> {
        let want = state_input_name(&sig.name);
        let i = self
            .caches
            .iter()
            .map(|&(i, _)| i)
            .find(|&i| want.as_deref() == Some(self.inputs[i].sig.name.as_str()))
            .ok_or_else(|| format!("graph {} has no cache input for it", self.name))?;
        let slot = &mut self.inputs[i];
        let (have, rows) = (&slot.sig, sig.shape.first().copied().unwrap_or(0));
        if self.pinned.is_some() || slot.shared_from.is_some() {
            return Err(format!("graph {}'s `{}` is not a host buffer of its own", self.name, have.name));
        }
        if have.dtype != sig.dtype || have.shape.get(1..) != sig.shape.get(1..) || row + rows > have.shape[0]
        {
            return Err(format!(
                "{:?} {:?} at row {row} does not fit graph {}'s `{}` {:?} {:?}",
                sig.dtype, sig.shape, self.name, have.name, have.dtype, have.shape
            ));
        }
        let row_bytes = have.shape[1..].iter().product::<usize>() * dtype_size(sig.dtype);
        let bytes = bytes_of_mut(&mut slot.bound).map_err(|e| e.to_string())?;
        let block = &mut bytes[row * row_bytes..(row + rows) * row_bytes];
        let shape = ort::value::Shape::new(sig.shape.iter().map(|&d| d as i64));
        let (info, data) = (MemoryInfo::default(), block.as_mut_ptr().cast());
        // SAFETY: `block` is `rows` rows of the buffer, which this runner owns and `run_into` borrows mutably for
        // as long as the view lives.
        let view = unsafe {
            match sig.dtype {
                DType::F32 => TensorRefMut::<f32>::from_raw(info, data, shape).map(|t| t.into_dyn()),
                DType::F16 => TensorRefMut::<half::f16>::from_raw(info, data, shape).map(|t| t.into_dyn()),
                DType::I64 => TensorRefMut::<i64>::from_raw(info, data, shape).map(|t| t.into_dyn()),
            }
        };
        view.map_err(|e| format!("viewing rows of `{}`: {e}", have.name))
    }

    /// Copies KV-cache rows within this graph's cache inputs, in order: for every move and cache, slots
    /// `0..slots` of every head of row `src` into row `dst` (a series' cache, written once by
    /// [`run_into`](Self::run_into), given to each of its sample paths' rows).
    pub fn copy_cache_rows(&mut self, moves: &[CacheMove]) -> Result<()> {
        if self.pinned.is_some() {
            return Err(self.tensor_error("k_cache.0", "cache rows are copied in place on CPU runners only"));
        }
        for &(i, _) in &self.caches.clone() {
            let sig = &self.inputs[i].sig;
            let layout = CacheLayout::of(sig);
            let bad = moves
                .iter()
                .find(|m| layout.is_none_or(|l| m.dst >= l.rows || m.src >= l.rows || m.slots > l.slots));
            if let Some(m) = bad {
                return Err(self.tensor_error(&sig.name, format!("cache move {m:?} outside {:?}", sig.shape)));
            }
            let (layout, elem) = (layout.expect("checked"), dtype_size(sig.dtype));
            copy_rows_within(bytes_of_mut(&mut self.inputs[i].bound)?, layout, elem, moves);
        }
        Ok(())
    }
}

/// A one-element tensor bound where a buffer was freed.
pub(super) fn placeholder(dtype: DType) -> Result<DynTensor> {
    DynTensor::new(&Allocator::default(), element_of(dtype), vec![1usize])
        .map_err(|e| ort_error("allocating a placeholder", e))
}
