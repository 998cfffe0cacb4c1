//! Engine bundles: `totoc build-engine` turns a verified export bundle into a directory of graphs ready for one
//! target and precision, and [`EngineBundle`] loads it back (every file hash-checked) and loads each bucket's
//! graph on demand.
//!
//! Layout (written atomically through a staging directory):
//! ```text
//! manifest.json                           format totoc-engine/4: target, precision, session options, memory
//!                                         budget, source bundle hash, every bucket's graph and memory need,
//!                                         sha256 + size of every other file
//! weights.<precision>.bin                 CPU/CUDA: the export's weights of that precision, once for every bucket
//! <profile>.<kind>.n<N>.<s|t><S>[.fp16].onnx   CPU/CUDA: each bucket's graph, optimised by ONNX Runtime at load
//! weights.fp16-emulated.bin + *.fp16-emulated.onnx   CPU + fp16: the emulation (see below)
//! <stem>.trt_ctx.onnx + trt/              TensorRT: EPContext model (embed_mode 0) and the engine it points to
//! golden/*.json                           the export's golden cases, for `totoc verify`
//! ```
//! CPU and CUDA engines keep the exported graphs: ONNX Runtime's optimised graph runs no faster when it is saved
//! than when it is made at load (measured on the base model: prefill 47 vs 48 ms, decode 35 vs 35 ms), while
//! saving it wrote a full weight copy per graph — with a dozen buckets per profile, gigabytes of build output and
//! minutes of build time for nothing. The build instead checks every bucket: it loads it with the shared weights
//! and requires the graph's I/O to be the manifest's, and drops buckets that could never fit the memory budget
//! (with a note). Weights exist once on disk and, when loaded, once in memory however many buckets there are
//! (see [`crate::graph::SharedWeights`]).
//!
//! **Precision.** An export bundle may hold fp32 and fp16 graphs; an engine is built for one of them. On a GPU
//! an fp16 engine runs the fp16 graphs. On the CPU it runs their *emulation* (`exporter::graph::emulate`): ONNX
//! Runtime's CPU provider computes fp16 MatMul, Add, Softmax, … in fp32 without rounding in between, so it would
//! not show fp16 error; the emulation graph rounds every op's result to fp16 the way GPU kernels do. It checks
//! accuracy (`totoc verify`) and is not faster than fp32.
//!
//! Files: [`format`](mod@format) (the manifest and build options), [`load`] ([`EngineBundle`]), [`build`] (the build
//! machinery both families share, and [`build_engine`], which dispatches on the source model).

pub mod build;
pub mod format;
pub mod graph_file;
pub mod load;

pub use build::pick_precision;
pub(crate) use build::{check_cache, commit_engine, copy_golden_cases, engine_inputs, provider_present};
pub use format::{
    BuildEvent, BuildOptions, EngineManifest, GraphForm, SourceBundle, EMULATED_WEIGHTS, ENGINE_FORMAT,
    ENGINE_FORMAT_VERSION,
};
pub(crate) use load::{bundle_files, check_io};
pub use load::{EngineBundle, GraphFile};
