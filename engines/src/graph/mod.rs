//! One loaded graph with preallocated, fixed-address I/O: [`GraphRunner`].
//!
//! At load every input and output tensor is allocated once and bound once to an ONNX Runtime `IoBinding`;
//! [`GraphRunner::run`] is a single `RunWithBinding` call (no tensor allocation, no re-binding, no output
//! extraction). Host code writes inputs through [`GraphRunner::input_mut`] and reads outputs through
//! [`GraphRunner::output`], both views of the bound buffers.
//!
//! **KV caches** (`k_cache.i` in, `k_cache_out.i` out, same shape) are updated *in place*: the output is bound to
//! the input's tensor, so the cache lives in one buffer for the whole forecast. Measured with ONNX Runtime 1.31.1
//! on CPU (`tests/ort_experiments.rs`, `kv_cache_update_schemes`: `TensorScatter` + a read of the whole cache,
//! one thread), per decode step:
//!
//! | cache | in place | ping-pong (swap bindings) | separate output + host copy-back |
//! |---|---|---|---|
//! | `[64,12,64,64]` f32, 12 MiB | 0.52 ms | 2.09 ms | 3.25 ms |
//! | `[256,12,128,64]` f32, 96 MiB | 8.4 ms | 23.8 ms | 36.5 ms |
//!
//! In place is correct over many steps and ORT logs no copy; with any other binding the `TensorScatter` kernel
//! first copies the whole past cache into the present one (`TensorScatter: in-place optimization not activated,
//! copying past_cache to present_cache`, once per run) — ping-pong only saves the host copy, not that one. So
//! in place it is, whenever the graph allows it: the cache input's only consumer must be the `TensorScatter` /
//! `ScatterND` node producing the output (checked at load; otherwise the runner falls back to ping-pong). The
//! runner counts ORT's copy warnings ([`GraphRunner::cache_copies_logged`]) so tests can prove the copy is gone.
//!
//! **Weights** shared by the sessions of an engine ([`SharedWeights`], CPU): every external initializer is added
//! to each session as one ORT value over a read-only `mmap` of its weight file (`AddInitializer`), and all
//! sessions use one `PrepackedWeightsContainer`, so MLAS prepacks each weight once for all graphs and profiles;
//! after the sessions are built the mapped pages are released (`MADV_DONTNEED`; they fault back in from the page
//! cache if ever read). See `tests/ort_experiments.rs` (`rss_two_sessions_one_weight`) for the numbers.
//!
//! **Weights on a GPU** (CUDA target, [`SharedWeights::for_target`]): each external initializer is uploaded once
//! into a device buffer the engine owns and added to every bucket's session as the same device `OrtValue`
//! (`AddInitializer`). ONNX Runtime uses such a value in place when its device is the one the session planned
//! for the initializer (`initializers_to_share_map`, session_state_utils.cc since microsoft/onnxruntime#5092), so
//! however many bucket sessions are loaded, the weights exist once on the GPU. (`AddExternalInitializers` would
//! not do: before microsoft/onnxruntime#29013 it copied a device value into each session.) The value must not own
//! its buffer (ONNX Runtime refuses one that does), so the buffer comes from the CUDA allocator of a small
//! bootstrap session kept alive with the weights. TensorRT engines carry their weights inside the engine.
//!
//! **Sessions shared by buckets** ([`SharedSession`]): a bucket's graph is its own session, or — for a
//! shape-polymorphic graph (rows and slots symbolic; what TensorRT engines are built from) — one session serves
//! every bucket of its kind, each bucket a runner with its own I/O at its own sizes
//! ([`GraphRunner::load_bucket`]). On the CUDA provider each such bucket captures its own CUDA graph under its own
//! `gpu_graph_id`; [`capture_keys`] assigns them and refuses what cannot work.
//!
//! **GPU I/O** (CUDA / TensorRT): I/O lives in device memory (fixed addresses, as CUDA graphs need); non-cache I/O
//! has a pinned host mirror copied before/after each run, caches stay on the device. [`binding_plan`] decides
//! all of it, and whether the graph may be captured ([`Capture`]), as a pure, unit-tested function. These paths
//! compile and their plans are unit-tested, but have not run: no GPU on the development machine
//! (`scripts/gpu-smoke.sh` runs them on the first one).

mod binding;
mod cache_copy;
mod facts;
mod ort_glue;
mod ort_types;
mod runner;
mod shared_session;
mod transfer;
mod weights;

pub use binding::{
    binding_plan, capture_keys, BindingPlan, CacheMode, Capture, Memory, SlotPlan, GPU_GRAPH_ID,
};
pub use cache_copy::CacheMove;
pub use facts::{model_facts, state_input_name, ExternalInit, ModelFacts};
pub use ort_glue::ProviderNodes;
pub use runner::{GraphCheck, GraphRunner};
pub use shared_session::SharedSession;
pub use weights::{weight_placement, SharedWeights, WeightPlacement};
