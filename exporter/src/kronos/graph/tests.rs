//! The graphs' structure: query blocks, cache writes before the next layer, the folded attention scale.

use super::attention::score_scale;
use super::*;
use crate::graph::WeightStore;
use crate::kronos::synth::{tiny_config, write_checkpoint};
use crate::variant::OpsetVariant;

/// The span of the long passes here: 160 positions are spans of 128 and 32.
const SPAN: usize = 128;

/// The nodes of bucket `b`'s graph (window 160, spans of [`SPAN`]) on the tiny checkpoint (predictor heads of 8,
/// not a power of 4; tokenizer heads of 4, one).
fn nodes(b: Bucket) -> Vec<crate::pb::NodeProto> {
    let d = tempfile::tempdir().unwrap();
    let (p, t) = (d.path().join("predictor"), d.path().join("tokenizer"));
    write_checkpoint(&p, &t, &tiny_config(), 3).unwrap();
    let ckpt = KronosCheckpoint::load(&p, &t).unwrap();
    let mut weights = WeightStore::create(&d.path().join("w.bin"), "w.bin").unwrap();
    let mut g = GraphBuilder::new("g", &mut weights, OpsetVariant::Opset24);
    let positions = Positions { predictor: 160, tokenizer: 160 };
    let lengths = Lengths { window: 160, span: SPAN, positions };
    kronos_graph(&mut g, &ckpt, &b, lengths, CacheUpdate::TensorScatter).unwrap();
    let model = g.finish("", &[]).unwrap();
    model.graph.unwrap().node
}

/// The op types of bucket `b`'s graph.
fn ops(b: Bucket) -> Vec<String> {
    nodes(b).into_iter().map(|n| n.op_type).collect()
}

/// The names of the nodes `of` depends on, itself included.
fn ancestors(nodes: &[crate::pb::NodeProto], of: &crate::pb::NodeProto) -> Vec<String> {
    let mut seen = vec![of.name.clone()];
    let mut todo: Vec<&str> = of.input.iter().map(String::as_str).collect();
    while let Some(t) = todo.pop() {
        if let Some(n) = nodes.iter().find(|n| n.output.iter().any(|o| o == t)) {
            if !seen.contains(&n.name) {
                seen.push(n.name.clone());
                todo.extend(n.input.iter().map(String::as_str));
            }
        }
    }
    seen
}

#[test]
fn a_prefill_writes_each_layers_caches_before_the_next_layer_starts() {
    let nodes = nodes(Bucket { kind: GraphKind::Prefill, rows: 2, slots: 160 });
    let writer = |out: &str| nodes.iter().find(|n| n.output.iter().any(|o| o == out)).unwrap().name.clone();
    let next = nodes.iter().find(|n| n.name.starts_with("transformer.1.")).unwrap();
    let before = ancestors(&nodes, next);
    for out in [k_cache(0, true), v_cache(0, true)] {
        assert!(before.contains(&writer(&out)), "{out} is not written before layer 1 starts");
    }
    // and nothing of layer 1 waits on its own outputs
    assert!(!before.contains(&writer(&k_cache(1, true))));
}

#[test]
fn the_attention_scale_is_folded_into_the_query_only_where_it_is_exact() {
    assert_eq!(folded_scale(64), Some(0.125));
    assert_eq!(folded_scale(16), Some(0.25));
    assert_eq!(folded_scale(4), Some(0.5));
    assert_eq!(folded_scale(1), Some(1.0));
    for dh in [2, 8, 12, 20, 52, 128] {
        assert_eq!(folded_scale(dh), None, "{dh}");
        assert_eq!(score_scale(dh), Some((1.0 / (dh as f64).sqrt()) as f32));
    }
    assert_eq!(score_scale(64), None);
    // the scores' op right before the mask: a bare MatMul where folded (tokenizer), a Mul where not (predictor)
    let before_softmax = |b: Bucket| -> Vec<String> {
        let nodes = nodes(b);
        let producer = |t: &str| nodes.iter().find(|n| n.output.iter().any(|o| o == t)).unwrap().clone();
        let scores_of = |n: &crate::pb::NodeProto| producer(&n.input[1]).op_type;
        nodes.iter().filter(|n| n.op_type == "Softmax").map(|n| scores_of(&producer(&n.input[0]))).collect()
    };
    let encode = before_softmax(Bucket { kind: GraphKind::Encode, rows: 1, slots: 64 });
    assert!(!encode.is_empty() && encode.iter().all(|o| o == "MatMul"), "{encode:?}");
    let prefill = before_softmax(Bucket { kind: GraphKind::Prefill, rows: 1, slots: 64 });
    assert!(!prefill.is_empty() && prefill.iter().all(|o| o == "Mul"), "{prefill:?}");
}

#[test]
fn long_causal_attention_runs_in_query_blocks() {
    let softmaxes =
        |kind, slots| ops(Bucket { kind, rows: 2, slots }).iter().filter(|o| *o == "Softmax").count();
    // tiny: 2 predictor layers, 2 encoder blocks, 1 decoder block; 160 tokens are blocks of 64, 64 and 32
    assert_eq!(QUERY_BLOCK, 64);
    assert_eq!(softmaxes(GraphKind::Prefill, 160), 2 * 3);
    assert_eq!(softmaxes(GraphKind::Encode, 160), 2 * 3);
    assert_eq!(softmaxes(GraphKind::Detokenize, 160), 3);
    assert_eq!(softmaxes(GraphKind::Recompute, 129), 2 * 3);
    // up to one block: one softmax per attention, as before
    assert_eq!(softmaxes(GraphKind::Prefill, 64), 2);
    assert_eq!(softmaxes(GraphKind::Encode, 64), 2);
    // a decode step attends over its cache in one piece (one query row)
    assert_eq!(softmaxes(GraphKind::Decode, 160), 2);
}

#[test]
fn long_passes_run_their_row_wise_parts_in_spans() {
    // the q/k/v projection (one MatMul reading the fused weight) once per span: 160 tokens are spans of 128 and 32
    let qkv = |kind, slots| {
        nodes(Bucket { kind, rows: 2, slots })
            .iter()
            .filter(|n| n.op_type == "MatMul" && n.input[1].contains(".q_proj+"))
            .count()
    };
    assert_eq!(SPAN, 128);
    // tiny: 2 predictor layers, 2 encoder blocks, 1 decoder block
    assert_eq!(qkv(GraphKind::Prefill, 160), 2 * 2);
    assert_eq!(qkv(GraphKind::Recompute, 160), 2 * 2);
    assert_eq!(qkv(GraphKind::Encode, 160), 2 * 2);
    assert_eq!(qkv(GraphKind::Detokenize, 160), 2);
    assert_eq!(qkv(GraphKind::Prefill, 128), 2);
    assert_eq!(qkv(GraphKind::Decode, 160), 2);
    // a window pass embeds its tokens and computes the dependency keys/values span by span too
    let per_span = |weight: &str| {
        nodes(Bucket { kind: GraphKind::Prefill, rows: 2, slots: 160 })
            .iter()
            .filter(|n| n.op_type == "MatMul" && n.input[1].contains(weight))
            .count()
    };
    assert_eq!(per_span("embedding.fusion_proj"), 2);
    assert_eq!(per_span("dep_layer.cross_attn.k_proj+"), 2);
}

#[test]
fn no_mask_or_rotary_rows_of_a_long_pass_fold_into_a_constant() {
    // ONNX Runtime folds at load every node whose inputs are all constants (initializers, or outputs of such
    // nodes) and the session holds the result; the masks (`LessOrEqual`) and rotary rows (`Slice`) must not
    for kind in [GraphKind::Prefill, GraphKind::Recompute, GraphKind::Encode, GraphKind::Detokenize] {
        let nodes = nodes(Bucket { kind, rows: 2, slots: 160 });
        let produced: Vec<&str> = nodes.iter().flat_map(|n| n.output.iter().map(String::as_str)).collect();
        let inputs: Vec<&str> = nodes
            .iter()
            .flat_map(|n| n.input.iter().map(String::as_str))
            .filter(|i| {
                !produced.contains(i) && [sig::S1, sig::S2, sig::STAMPS, sig::LAST, sig::VALUES].contains(i)
            })
            .collect();
        assert!(!inputs.is_empty(), "{kind:?}");
        // nodes are in topological order: a value is per-run if a graph input or a per-run value feeds it
        let mut per_run: Vec<&str> = inputs;
        for n in &nodes {
            if n.input.iter().any(|i| per_run.contains(&i.as_str())) {
                per_run.extend(n.output.iter().map(String::as_str));
            }
        }
        let masks = nodes.iter().filter(|n| n.op_type == "LessOrEqual").count();
        assert!(masks >= 3, "{kind:?}: {masks} masks");
        for n in nodes.iter().filter(|n| n.op_type == "LessOrEqual" || n.op_type == "Slice") {
            assert!(
                per_run.contains(&n.output[0].as_str()),
                "{kind:?}: {} ({}) folds into a constant",
                n.name,
                n.op_type
            );
        }
    }
}
