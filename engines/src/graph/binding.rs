//! How a graph's I/O is bound ([`binding_plan`], pure and unit-tested) and which captured CUDA graph each bucket
//! replays ([`capture_keys`]).

use exporter::bucket::Bucket;
use exporter::signature::TensorSig;

use crate::backend::Target;

use super::facts::state_input_name;

/// How a graph's KV caches are carried from one run to the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheMode {
    /// The graph has no cache outputs that update a cache input (e.g. prefill).
    None,
    /// Each cache output is bound to its input's buffer.
    InPlace,
    /// Two buffers per cache, input/output bindings swapped after each run.
    PingPong,
}

/// Where a bound tensor lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Memory {
    Host,
    /// CUDA device memory (fixed address for the runner's lifetime).
    Device(i32),
}

/// How one graph input or output is bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotPlan {
    pub name: String,
    pub memory: Memory,
    /// A pinned host mirror the host writes (inputs) or reads (outputs), copied to/from the device around each
    /// run. Caches have none: they stay on the device between steps.
    pub host_mirror: bool,
    /// For a KV-cache output: the cache input it updates (bound to that input's buffer in place, or to its
    /// ping-pong partner).
    pub cache_of: Option<String>,
}

/// Whether a runner's session is captured as a CUDA graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capture {
    /// Kernels launched every run (CPU, or CUDA graphs off).
    No,
    /// The session captures its kernels once and replays them, under ONNX Runtime's graph annotation
    /// `gpu_graph_id` (the run option key). Every bucket is its own session, so every bucket gets its own captured
    /// graph, all under the default id 0; a replay reads and writes the addresses bound at capture, which the
    /// runner never changes.
    Graph { gpu_graph_id: i64 },
}

/// A runner's whole binding: every slot, how caches carry over, and whether it is captured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindingPlan {
    pub inputs: Vec<SlotPlan>,
    pub outputs: Vec<SlotPlan>,
    pub cache_mode: CacheMode,
    pub capture: Capture,
}

/// The binding of a graph with `inputs`/`outputs` on `target`; `in_place` are the (input, output) cache pairs the
/// graph lets update in place ([`ModelFacts::in_place`](super::ModelFacts::in_place)). Pure: what
/// [`GraphRunner::load`](super::GraphRunner::load) allocates and binds.
///
/// Refuses CUDA graphs over a ping-pong cache: a captured graph replays the device addresses bound at capture, so
/// swapping the cache bindings between runs would make it read the stale buffer and write the live one.
pub fn binding_plan(
    target: &Target,
    inputs: &[TensorSig],
    outputs: &[TensorSig],
    in_place: &[(String, String)],
) -> std::result::Result<BindingPlan, String> {
    let memory = target.device().map_or(Memory::Host, Memory::Device);
    let gpu = target.is_gpu();
    let cache_of = |o: &TensorSig| {
        state_input_name(&o.name)
            .and_then(|n| inputs.iter().find(|i| i.name == n))
            .filter(|i| i.shape == o.shape && i.dtype == o.dtype)
            .map(|i| i.name.clone())
    };
    let outs: Vec<SlotPlan> = outputs
        .iter()
        .map(|o| {
            let c = cache_of(o);
            SlotPlan { name: o.name.clone(), memory, host_mirror: gpu && c.is_none(), cache_of: c }
        })
        .collect();
    let cache_inputs: Vec<&String> = outs.iter().filter_map(|o| o.cache_of.as_ref()).collect();
    let ins = inputs
        .iter()
        .map(|i| SlotPlan {
            name: i.name.clone(),
            memory,
            host_mirror: gpu && !cache_inputs.contains(&&i.name),
            cache_of: None,
        })
        .collect();
    let pairs: Vec<(&String, &String)> =
        outs.iter().filter_map(|o| o.cache_of.as_ref().map(|c| (c, &o.name))).collect();
    let cache_mode = if pairs.is_empty() {
        CacheMode::None
    } else if pairs.iter().all(|(i, o)| in_place.iter().any(|(a, b)| a == *i && b == *o)) {
        CacheMode::InPlace
    } else {
        CacheMode::PingPong
    };
    let capture = match (target.cuda_graph(), cache_mode) {
        (false, _) => Capture::No,
        (true, CacheMode::PingPong) => {
            return Err("this graph's caches cannot be updated in place (the cache input feeds more than the \
                        TensorScatter/ScatterND that writes it), and a captured CUDA graph replays fixed buffers; \
                        build the engine without --cuda-graph"
                .into())
        }
        (true, _) => Capture::Graph { gpu_graph_id: 0 },
    };
    Ok(BindingPlan { inputs: ins, outputs: outs, cache_mode, capture })
}

/// ONNX Runtime's run option selecting a captured CUDA graph (`kOrtRunOptionsConfigCudaGraphAnnotation`).
pub const GPU_GRAPH_ID: &str = "gpu_graph_id";

/// The CUDA-graph key of every bucket of an engine: `buckets` are `(bucket, session file)` in load order; buckets
/// with the same file share one session (the shape-polymorphic form).
///
/// * One session per bucket: each captures its own graph under the default id 0.
/// * CUDA, one session for several buckets: each bucket gets its own `gpu_graph_id` (0, 1, …), and ONNX Runtime's
///   CUDA provider keeps one captured graph per id, each replaying that bucket's fixed addresses.
/// * TensorRT, one session for several buckets: refused — ONNX Runtime 1.31's TensorRT provider keeps a single
///   captured graph per provider instance (no annotation ids), so a second bucket would replay the first one's
///   shapes and buffers.
pub fn capture_keys(
    target: &Target,
    buckets: &[(Bucket, String)],
) -> std::result::Result<Vec<Capture>, String> {
    if !target.cuda_graph() {
        return Ok(vec![Capture::No; buckets.len()]);
    }
    // the same bucket listed by several profiles is one graph (the engine loads it once): one key
    let mut keys: Vec<(&str, Bucket)> = Vec::new();
    for (bucket, file) in buckets {
        if !keys.iter().any(|(f, b)| *f == file.as_str() && b == bucket) {
            keys.push((file.as_str(), *bucket));
        }
    }
    let mut out = Vec::with_capacity(buckets.len());
    for (bucket, file) in buckets {
        let on_session: Vec<Bucket> =
            keys.iter().filter(|(f, _)| *f == file.as_str()).map(|(_, b)| *b).collect();
        if on_session.len() > 1 && matches!(target, Target::TensorRt { .. }) {
            return Err(format!(
                "{} buckets share the TensorRT engine {file} and ONNX Runtime's TensorRT provider captures \
                 one CUDA graph per engine: build without --cuda-graph, or with `--graphs per-bucket` (one engine, \
                 and one copy of the weights, per bucket) to capture each bucket ({bucket:?})",
                on_session.len()
            ));
        }
        let id = on_session.iter().position(|b| b == bucket).expect("listed") as i64;
        out.push(Capture::Graph { gpu_graph_id: id });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use exporter::signature::DType;

    fn sig(name: &str, dtype: DType, shape: &[usize]) -> TensorSig {
        TensorSig { name: name.into(), dtype, shape: shape.to_vec() }
    }

    /// A decode graph's I/O: patches, write_pos, one cache pair, one mixture output.
    fn decode_io(dtype: DType) -> (Vec<TensorSig>, Vec<TensorSig>) {
        let cache = [2, 4, 8, 16];
        (
            vec![
                sig("patches", dtype, &[2, 16]),
                sig("write_pos", DType::I64, &[2]),
                sig("k_cache.0", dtype, &cache),
            ],
            vec![sig("loc", DType::F32, &[2, 16, 4]), sig("k_cache_out.0", dtype, &cache)],
        )
    }

    fn in_place() -> Vec<(String, String)> {
        vec![("k_cache.0".into(), "k_cache_out.0".into())]
    }

    #[test]
    fn cpu_binding_is_host_memory_with_caches_in_place() {
        let (i, o) = decode_io(DType::F32);
        let p = binding_plan(&Target::cpu(Some(1)), &i, &o, &in_place()).unwrap();
        assert_eq!(p.cache_mode, CacheMode::InPlace);
        assert_eq!(p.capture, Capture::No);
        assert!(p.inputs.iter().chain(&p.outputs).all(|s| s.memory == Memory::Host && !s.host_mirror));
        assert_eq!(p.outputs[1].cache_of.as_deref(), Some("k_cache.0"));
        assert_eq!(p.outputs[0].cache_of, None);
        // a graph that reads the old cache elsewhere cannot update in place
        assert_eq!(binding_plan(&Target::cpu(None), &i, &o, &[]).unwrap().cache_mode, CacheMode::PingPong);
        // a prefill has no cache inputs
        let prefill = binding_plan(&Target::cpu(None), &i[..2], &o, &[]).unwrap();
        assert_eq!(prefill.cache_mode, CacheMode::None);
        assert!(prefill.outputs.iter().all(|s| s.cache_of.is_none()));
    }

    #[test]
    fn gpu_binding_keeps_caches_on_the_device_and_mirrors_the_rest() {
        let (i, o) = decode_io(DType::F16);
        let p = binding_plan(&Target::cuda(2, true), &i, &o, &in_place()).unwrap();
        assert!(p.inputs.iter().chain(&p.outputs).all(|s| s.memory == Memory::Device(2)));
        let mirrored: Vec<(&str, bool)> =
            p.inputs.iter().chain(&p.outputs).map(|s| (s.name.as_str(), s.host_mirror)).collect();
        assert_eq!(
            mirrored,
            [
                ("patches", true),
                ("write_pos", true),
                ("k_cache.0", false),
                ("loc", true),
                ("k_cache_out.0", false)
            ]
        );
        // one captured graph per bucket session, under the default annotation id
        assert_eq!(p.capture, Capture::Graph { gpu_graph_id: 0 });
        let trt = binding_plan(&Target::tensorrt(0, true), &i, &o, &in_place()).unwrap();
        assert_eq!((trt.capture, trt.cache_mode), (Capture::Graph { gpu_graph_id: 0 }, CacheMode::InPlace));
        let no_graph = binding_plan(&Target::cuda(0, false), &i, &o, &in_place()).unwrap();
        assert_eq!(no_graph.capture, Capture::No);
    }

    #[test]
    fn cuda_graphs_refuse_ping_pong_caches() {
        let (i, o) = decode_io(DType::F16);
        let e = binding_plan(&Target::cuda(0, true), &i, &o, &[]).unwrap_err();
        assert!(e.contains("cannot be updated in place") && e.contains("without --cuda-graph"), "{e}");
        // without CUDA graphs the swap is fine
        let p = binding_plan(&Target::cuda(0, false), &i, &o, &[]).unwrap();
        assert_eq!((p.cache_mode, p.capture), (CacheMode::PingPong, Capture::No));
    }

    #[test]
    fn a_cache_output_must_match_its_input() {
        let (i, mut o) = decode_io(DType::F16);
        o[1].dtype = DType::F32;
        let p = binding_plan(&Target::cpu(None), &i, &o, &in_place()).unwrap();
        assert_eq!(p.outputs[1].cache_of, None);
        assert_eq!(p.cache_mode, CacheMode::None);
    }

    #[test]
    fn captured_graph_keys_per_session() {
        let (p1, p2, d1) = (Bucket::prefill(1, 8), Bucket::prefill(4, 8), Bucket::decode(8, 13));
        let own = |b: Bucket| (b, format!("{b:?}.onnx"));
        // one session per bucket: each its own graph under id 0
        let keys = capture_keys(&Target::cuda(0, true), &[own(p1), own(p2), own(d1)]).unwrap();
        assert_eq!(keys, vec![Capture::Graph { gpu_graph_id: 0 }; 3]);
        // CUDA, shared sessions: one id per bucket of each session
        let shared = [
            (p1, "dynamic.prefill.onnx".to_string()),
            (p2, "dynamic.prefill.onnx".into()),
            (d1, "dynamic.decode.onnx".into()),
        ];
        let keys = capture_keys(&Target::cuda(0, true), &shared).unwrap();
        let ids: Vec<i64> = keys
            .iter()
            .map(|k| match k {
                Capture::Graph { gpu_graph_id } => *gpu_graph_id,
                Capture::No => -1,
            })
            .collect();
        assert_eq!(ids, [0, 1, 0]);
        // TensorRT keeps one captured graph per engine: sharing is refused with the way out
        let e = capture_keys(&Target::tensorrt(0, true), &shared).unwrap_err();
        assert!(e.contains("2 buckets share") && e.contains("--graphs per-bucket"), "{e}");
        assert!(capture_keys(&Target::tensorrt(0, true), &shared[2..]).is_ok());
        // no CUDA graphs: nothing captured
        assert_eq!(capture_keys(&Target::tensorrt(0, false), &shared).unwrap(), vec![Capture::No; 3]);
        // the same bucket in two profiles is one graph: one key, and no sharing on its own
        let twice = [(p1, "dynamic.prefill.onnx".to_string()), (p1, "dynamic.prefill.onnx".to_string())];
        let keys = capture_keys(&Target::tensorrt(0, true), &twice).unwrap();
        assert_eq!(keys, vec![Capture::Graph { gpu_graph_id: 0 }; 2]);
    }
}
