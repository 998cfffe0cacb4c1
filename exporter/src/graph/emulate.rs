//! fp16 *emulation*: an fp16 graph rewritten to run on a CPU with fp16 rounding but fp32 kernels.
//!
//! ONNX Runtime's CPU provider has fp16 kernels only for data movement: it wraps MatMul, Add, Softmax, … of an
//! fp16 graph in casts and computes them in fp32, then keeps the fp32 results (no rounding between ops). Running
//! an fp16 graph on a CPU therefore does not show fp16 error. The emulation graph does: it is the same strongly
//! typed graph with every fp16 value carried as f32 and rounded to fp16 (`Cast → f16 → Cast → f32`) after every
//! op that computes something, i.e. fp16 storage with fp32 arithmetic inside each op — what GPU fp16 kernels do
//! (tensor-core matmuls accumulate in fp32 and round their output; elementwise kernels compute in fp32 and round).
//!
//! The rewrite ([`emulate`]):
//! * fp16 graph inputs become f32 inputs (the emulation takes the fp32 graph's inputs) and are rounded once on
//!   entry — except the KV caches, which only ever hold what the graphs wrote (already rounded), so their
//!   input stays the direct operand of the cache write and is updated in place as in every totoc graph;
//! * fp16 initializers become f32 ones holding the same (exactly representable) values: external weights point
//!   into an f32 copy of the fp16 weight file ([`write_emulated_weights`]), inline constants are widened;
//! * `Cast(to=f16)` becomes the round trip, `Cast(f16 → f32)` an `Identity`;
//! * an op with an fp16 output that can change values (not data movement, `Neg`, `Max`, `Where`, …; see
//!   [`types::exact_in_input_type`]) gets its outputs rounded.
//!
//! fp32 regions stay fp32 untouched, so the emulation measures exactly the rounding the fp16 graph's types imply.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;

use crate::error::{Error, Result};
use crate::graph::builder::{attribute, Attr};
use crate::graph::types::{self, output_type, ElemType};
use crate::pb::{
    tensor_proto, type_proto, GraphProto, ModelProto, NodeProto, StringStringEntryProto, ValueInfoProto,
};

const ALIGN: u64 = 4096;

/// An initializer stored in an external file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct External {
    pub name: String,
    pub dims: Vec<i64>,
    pub elem: ElemType,
    /// File, relative to the model's directory.
    pub location: String,
    pub offset: u64,
    pub length: u64,
}

/// The external initializers of `model`.
pub fn externals(model: &ModelProto) -> Result<Vec<External>> {
    let Some(g) = &model.graph else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    for t in g.initializer.iter().filter(|t| t.data_location == tensor_proto::DataLocation::External as i32) {
        let kv = |k: &str| t.external_data.iter().find(|e| e.key == k).map(|e| e.value.clone());
        let bad = |what: &str| Error::Graph {
            graph: g.name.clone(),
            message: format!("initializer {}: {what}", t.name),
        };
        out.push(External {
            name: t.name.clone(),
            dims: t.dims.clone(),
            elem: ElemType::from_onnx(t.data_type).ok_or_else(|| bad("unsupported data type"))?,
            location: kv("location").ok_or_else(|| bad("external data without a location"))?,
            offset: kv("offset").map_or(Ok(0), |v| v.parse().map_err(|_| bad("bad offset")))?,
            length: kv("length")
                .ok_or_else(|| bad("external data without a length"))?
                .parse()
                .map_err(|_| bad("bad length"))?,
        });
    }
    Ok(out)
}

/// Where the emulation graphs find their f32 weights: for each tensor of the fp16 weight file (by its offset and
/// length there), its offset and length in the emulated file.
#[derive(Debug, Clone, Default)]
pub struct EmulatedWeights {
    /// The f32 file as graphs reference it.
    pub location: String,
    map: HashMap<(String, u64, u64), (u64, u64)>,
}

impl EmulatedWeights {
    fn get(&self, e: &External) -> Option<(u64, u64)> {
        self.map.get(&(e.location.clone(), e.offset, e.length)).copied()
    }
}

/// Writes `dst` (named `location` in the emulation graphs): every tensor of `tensors` read from its file under
/// `src_dir`, as f32 — f16 values widened (exactly), f32 copied — each aligned to 4 KiB. Tensors shared by several
/// graphs are written once.
pub fn write_emulated_weights(
    src_dir: &Path,
    tensors: &[External],
    dst: &Path,
    location: &str,
) -> Result<EmulatedWeights> {
    let mut unique: Vec<&External> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for t in tensors {
        if seen.insert((t.location.clone(), t.offset, t.length)) {
            unique.push(t);
        }
    }
    unique.sort_by(|a, b| (&a.location, a.offset).cmp(&(&b.location, b.offset)));
    let file = File::create(dst).map_err(|e| Error::io(dst, e))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let mut files: HashMap<String, File> = HashMap::new();
    let mut len = 0u64;
    let mut map = HashMap::new();
    for t in unique {
        let path = src_dir.join(&t.location);
        if !files.contains_key(&t.location) {
            files.insert(t.location.clone(), File::open(&path).map_err(|e| Error::io(&path, e))?);
        }
        let f = files.get_mut(&t.location).expect("opened");
        let mut raw = vec![0u8; t.length as usize];
        f.seek(SeekFrom::Start(t.offset))
            .and_then(|_| f.read_exact(&mut raw))
            .map_err(|e| Error::io(&path, e))?;
        let bytes: Vec<u8> = match t.elem {
            ElemType::F16 => raw
                .chunks_exact(2)
                .flat_map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32().to_le_bytes())
                .collect(),
            ElemType::F32 => raw,
            other => {
                return Err(Error::Graph {
                    graph: "fp16 emulation".into(),
                    message: format!("weight {} has type {other:?}; weights are f16 or f32", t.name),
                })
            }
        };
        let pad = (ALIGN - len % ALIGN) % ALIGN;
        out.write_all(&vec![0u8; pad as usize]).map_err(|e| Error::io(dst, e))?;
        let offset = len + pad;
        out.write_all(&bytes).map_err(|e| Error::io(dst, e))?;
        len = offset + bytes.len() as u64;
        map.insert((t.location.clone(), t.offset, t.length), (offset, bytes.len() as u64));
    }
    out.flush().map_err(|e| Error::io(dst, e))?;
    out.get_ref().sync_all().map_err(|e| Error::io(dst, e))?;
    Ok(EmulatedWeights { location: location.to_string(), map })
}

/// Whether graph input `name` is a KV cache (`k_cache.i` / `v_cache.i`): not rounded on entry (module docs).
fn is_cache_input(name: &str) -> bool {
    name.starts_with("k_cache.") || name.starts_with("v_cache.")
}

fn elem_of(vi: &ValueInfoProto) -> Option<ElemType> {
    match vi.r#type.as_ref()?.value.as_ref()? {
        type_proto::Value::TensorType(t) => ElemType::from_onnx(t.elem_type),
        #[allow(unreachable_patterns)]
        _ => None,
    }
}

fn set_f32(vi: &mut ValueInfoProto) {
    if let Some(type_proto::Value::TensorType(t)) = vi.r#type.as_mut().and_then(|t| t.value.as_mut()) {
        t.elem_type = ElemType::F32.onnx();
    }
}

fn cast_node(name: String, input: &str, output: &str, to: ElemType) -> NodeProto {
    NodeProto {
        input: vec![input.to_string()],
        output: vec![output.to_string()],
        name,
        op_type: "Cast".into(),
        attribute: vec![attribute("to", Attr::Int(to.onnx() as i64))],
        ..Default::default()
    }
}

/// `value` rounded to fp16 and widened again into `out`: two casts named after `base`.
fn round_trip(nodes: &mut Vec<NodeProto>, base: &str, value: &str, out: &str) {
    let half = format!("{out}.f16");
    nodes.push(cast_node(format!("{base}.to_f16"), value, &half, ElemType::F16));
    nodes.push(cast_node(format!("{base}.to_f32"), &half, out, ElemType::F32));
}

/// Rewrites the fp16 graph `model` into its fp32 emulation (see the module docs), its external weights read from
/// `weights`.
pub fn emulate(model: &ModelProto, weights: &EmulatedWeights) -> Result<ModelProto> {
    let g = model
        .graph
        .as_ref()
        .ok_or_else(|| Error::Graph { graph: "?".into(), message: "model has no graph".into() })?;
    let err = |message: String| Error::Graph { graph: g.name.clone(), message };
    let mut ty: HashMap<String, ElemType> = HashMap::new();
    let mut nodes = Vec::new();
    let mut rename: HashMap<String, String> = HashMap::new();

    let mut inputs = g.input.clone();
    for vi in &mut inputs {
        let t = elem_of(vi).ok_or_else(|| err(format!("input {} has no tensor type", vi.name)))?;
        ty.insert(vi.name.clone(), t);
        if t == ElemType::F16 {
            set_f32(vi);
            if !is_cache_input(&vi.name) {
                let rounded = format!("{}.emulated", vi.name);
                round_trip(&mut nodes, &format!("{}.round", vi.name), &vi.name, &rounded);
                // typed as the fp16 value it stands for, like every other value of the rewritten graph
                ty.insert(rounded.clone(), ElemType::F16);
                rename.insert(vi.name.clone(), rounded);
            }
        }
    }

    let ext: HashMap<String, External> = externals(model)?.into_iter().map(|e| (e.name.clone(), e)).collect();
    let mut initializer = Vec::with_capacity(g.initializer.len());
    for t in &g.initializer {
        let elem = ElemType::from_onnx(t.data_type)
            .ok_or_else(|| err(format!("initializer {}: unsupported type", t.name)))?;
        ty.insert(t.name.clone(), elem);
        let mut t = t.clone();
        if let Some(e) = ext.get(&t.name) {
            let (offset, length) = weights
                .get(e)
                .ok_or_else(|| err(format!("weight {} is not in the emulated weight file", e.name)))?;
            let kv = |k: &str, v: String| StringStringEntryProto { key: k.into(), value: v };
            t.external_data = vec![
                kv("location", weights.location.clone()),
                kv("offset", offset.to_string()),
                kv("length", length.to_string()),
            ];
            t.data_type = ElemType::F32.onnx();
        } else if elem == ElemType::F16 {
            if t.raw_data.is_empty() && !t.int32_data.is_empty() {
                return Err(err(format!(
                    "constant {} stores f16 in int32_data; totoc writes raw_data",
                    t.name
                )));
            }
            t.raw_data = t
                .raw_data
                .chunks_exact(2)
                .flat_map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32().to_le_bytes())
                .collect();
            t.data_type = ElemType::F32.onnx();
        }
        initializer.push(t);
    }

    for n in &g.node {
        let mut n = n.clone();
        for i in &mut n.input {
            if let Some(r) = rename.get(i) {
                *i = r.clone();
            }
        }
        let in_types: Vec<ElemType> = n
            .input
            .iter()
            .map(|i| ty.get(i).copied().ok_or_else(|| err(format!("node {} reads untyped `{i}`", n.name))))
            .collect::<Result<_>>()?;
        let cast_to = n.attribute.iter().find(|a| a.name == "to").map(|a| a.i);
        let out_t = output_type(&n.op_type, &in_types, cast_to)
            .ok_or_else(|| err(format!("node {}: no typing rule for op {}", n.name, n.op_type)))?;
        for o in &n.output {
            ty.insert(o.clone(), out_t);
        }
        match (n.op_type.as_str(), out_t) {
            ("Cast", ElemType::F16) => round_trip(&mut nodes, &n.name, &n.input[0], &n.output[0]),
            ("Cast", ElemType::F32) if in_types[0] == ElemType::F16 => {
                nodes.push(NodeProto { op_type: "Identity".into(), attribute: Vec::new(), ..n })
            }
            (op, ElemType::F16) if !types::exact_in_input_type(op) => {
                let outs = n.output.clone();
                n.output = outs.iter().map(|o| format!("{o}.unrounded")).collect();
                let name = n.name.clone();
                nodes.push(n);
                for (k, o) in outs.iter().enumerate() {
                    round_trip(&mut nodes, &format!("{name}.round{k}"), &format!("{o}.unrounded"), o);
                }
            }
            _ => nodes.push(n),
        }
    }

    let mut outputs = g.output.clone();
    for vi in &mut outputs {
        if elem_of(vi) == Some(ElemType::F16) {
            set_f32(vi);
        }
    }
    let mut out = model.clone();
    out.doc_string =
        format!("{} — fp16 emulation: f32 tensors rounded to fp16 after every op", model.doc_string);
    out.metadata_props.push(StringStringEntryProto { key: "totoc.emulation".into(), value: "fp16".into() });
    out.graph = Some(GraphProto {
        node: nodes,
        name: format!("{}_fp16_emulation", g.name),
        initializer,
        input: inputs,
        output: outputs,
        ..Default::default()
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::builder::GraphBuilder;
    use crate::graph::WeightStore;
    use crate::signature::{DType, TensorSig};
    use crate::variant::OpsetVariant;

    fn sig(name: &str, dtype: DType, shape: &[usize]) -> TensorSig {
        TensorSig { name: name.into(), dtype, shape: shape.to_vec() }
    }

    /// `y = Softmax(Cast_f32(x·w + b))` over an fp16 `x`, `w`, with a cache passed through a TensorScatter.
    fn small_fp16_model(dir: &Path) -> ModelProto {
        let mut store = WeightStore::create(&dir.join("weights.fp16.bin"), "weights.fp16.bin").unwrap();
        let mut g = GraphBuilder::new("t", &mut store, OpsetVariant::Opset24);
        let x = g.input(&sig("patches", DType::F16, &[2, 3]));
        let cache = g.input(&sig("k_cache.0", DType::F16, &[1, 1, 4, 3]));
        let upd = g.input(&sig("update", DType::F16, &[1, 1, 1, 3]));
        let pos = g.input(&sig("write_pos", DType::I64, &[1]));
        let w = g
            .weight("w", &[3, 3], DType::F16, || Ok((0..9).map(|i| i as f32 * 0.1 + 1e-3).collect()))
            .unwrap();
        let b = g.weight("b", &[3], DType::F32, || Ok(vec![0.5, -0.25, 1.0])).unwrap();
        let y = g.binary("MatMul", &x, &w);
        let y = g.cast(&y, DType::F32);
        let y = g.binary("Add", &y, &b);
        let p = g.op("Softmax", &[&y], vec![("axis", Attr::Int(-1))]);
        g.output(&p, &sig("p", DType::F32, &[2, 3]));
        let c =
            g.op_to("TensorScatter", &[&cache, &upd, &pos], "k_cache_out.0", vec![("axis", Attr::Int(2))]);
        g.output(&c, &sig("k_cache_out.0", DType::F16, &[1, 1, 4, 3]));
        let m = g.finish("doc", &[]).unwrap();
        store.finish().unwrap();
        m
    }

    #[test]
    fn emulation_rounds_computing_ops_and_keeps_caches_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let m = small_fp16_model(dir.path());
        let ext = externals(&m).unwrap();
        assert_eq!(
            ext.iter().map(|e| (e.name.as_str(), e.elem)).collect::<Vec<_>>(),
            [("w", ElemType::F16), ("b", ElemType::F32)]
        );
        let w = write_emulated_weights(dir.path(), &ext, &dir.path().join("emu.bin"), "emu.bin").unwrap();
        let e = emulate(&m, &w).unwrap();
        let g = e.graph.unwrap();
        // every declared type is f32 now
        for vi in g.input.iter().chain(&g.output) {
            assert_ne!(elem_of(vi), Some(ElemType::F16), "{}", vi.name);
        }
        for t in &g.initializer {
            assert_ne!(t.data_type, ElemType::F16.onnx(), "{}", t.name);
        }
        let ops: Vec<(&str, &str)> =
            g.node.iter().map(|n| (n.op_type.as_str(), n.output[0].as_str())).collect();
        // patches and update are rounded on entry; the cache is not (its only consumer is the TensorScatter)
        assert!(ops.contains(&("Cast", "patches.emulated")) && ops.contains(&("Cast", "update.emulated")));
        assert!(!ops.iter().any(|(_, o)| o.starts_with("k_cache.0.")));
        let scatter = g.node.iter().find(|n| n.op_type == "TensorScatter").unwrap();
        assert_eq!(scatter.input[0], "k_cache.0");
        assert_eq!(scatter.output[0], "k_cache_out.0");
        // the MatMul's output is rounded, the f16→f32 cast became an Identity, the f32 region is untouched
        let mm = g.node.iter().find(|n| n.op_type == "MatMul").unwrap();
        assert!(mm.output[0].ends_with(".unrounded"));
        assert!(g.node.iter().any(|n| n.op_type == "Identity"));
        let add = g.node.iter().find(|n| n.op_type == "Add").unwrap();
        assert!(!add.output[0].ends_with(".unrounded"));
        // the emulated file holds w widened (exact f16 values) and b as it was
        let bytes = std::fs::read(dir.path().join("emu.bin")).unwrap();
        let w_f32: Vec<f32> =
            bytes[..36].chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        for (i, v) in w_f32.iter().enumerate() {
            assert_eq!(*v, half::f16::from_f32(i as f32 * 0.1 + 1e-3).to_f32());
        }
        assert_eq!(&bytes[4096..4100], &0.5f32.to_le_bytes());
    }
}
