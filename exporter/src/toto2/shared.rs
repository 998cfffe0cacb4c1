//! The I/O contract of Toto 2.0's shape-polymorphic ("shared") graph form: one graph per kind whose varying
//! dimensions are symbolic, so that one TensorRT engine (with optimisation profiles over the buckets) serves every
//! bucket of a profile, as Toto 1.0's `toto_dynamic_*` graphs do.
//!
//! Across the buckets of a 2.0 profile ([`crate::toto2::ladder`]) only the rows R and the context slots S vary;
//! the horizon N, the decode block B and every model dimension are the profile's. So a graph's symbolic
//! dimensions are:
//! * [`ROWS`] (R): the first axis of every input and output;
//! * [`SLOTS`] (L): the tokens of a pass (`S + N`) or prefill (`S + B`) call — axis 1 of `patches`, `missing`,
//!   `group_ids` and the rotary tables; a decode call's `2B` tokens are fixed;
//! * [`CACHE_SLOTS`] (T = `S + N + B`): the KV caches' slot axis and `key_valid`'s.
//!
//! `out_index [R, K]`, the decode `patches [R, B, P]` and the `quantiles [R, K, P, 9]` output keep their fixed
//! axes. Each graph's inputs have at most one symbolic axis besides the rows (L for pass/prefill, T for decode),
//! which is what [`DynSig::at`] instantiates — the property the TensorRT profile layout relies on.
//!
//! The graphs are [`crate::toto2::graph::toto2_shared_graph`]: the same forward pass as the static graphs, with
//! the reshapes written with `Reshape`'s 0/−1 (or `Unsqueeze`) in both forms, and the few values a static graph
//! stores by shape — the `[L, L]` causal mask, the decode mask's `[T]` slot numbers, the decode mask tokens'
//! `[R, B, ·]` expansion and `select_outputs`' row offsets — computed from the inputs' shapes ([`positions`],
//! [`select_rows`]). The KV caches are written with `TensorScatter` (the `ScatterND` form's index constants are
//! shaped by R). `engines/tests/toto2_shared_graph.rs` checks them against the static graphs on ONNX Runtime CPU.
//! Opset-24 exports write them per profile (`crate::toto2::export::write_shared_graphs`, manifest
//! `toto2_profiles[].shared`); `build-engine --target tensorrt` builds its engines from them.

use crate::graph::builder::{Attr, GraphBuilder};
use crate::signature::{Dim, DynSig, TensorSig, ROWS, SLOTS};
use crate::toto2::signature::{self as sig, Toto2Dims, Toto2GraphKind};

/// The symbolic name of the KV caches' slot axis (T).
pub const CACHE_SLOTS: &str = "cache_slots";

/// Which axis of a 2.0 tensor is which symbolic dimension (None: fixed for the whole profile).
fn symbolic_axis(kind: Toto2GraphKind, name: &str, axis: usize) -> Option<&'static str> {
    let is_cache = name.starts_with("k_cache") || name.starts_with("v_cache");
    match (axis, kind) {
        (0, _) => Some(ROWS),
        (2, _) if is_cache => Some(CACHE_SLOTS),
        (1, Toto2GraphKind::Decode) if name == sig::KEY_VALID => Some(CACHE_SLOTS),
        (1, Toto2GraphKind::Pass | Toto2GraphKind::Prefill)
            if [
                sig::PATCHES,
                sig::MISSING,
                sig::GROUP_IDS,
                sig::ROPE_COS,
                sig::ROPE_SIN,
                sig::XPOS_SCALE,
            ]
            .contains(&name) =>
        {
            Some(SLOTS)
        }
        _ => None,
    }
}

fn symbolic(kind: Toto2GraphKind, sigs: Vec<TensorSig>) -> Vec<DynSig> {
    sigs.into_iter()
        .map(|s| DynSig {
            dims: s
                .shape
                .iter()
                .enumerate()
                .map(|(axis, &n)| match symbolic_axis(kind, &s.name, axis) {
                    Some(name) => Dim::Named(name.into()),
                    None => Dim::Fixed(n),
                })
                .collect(),
            name: s.name,
            dtype: s.dtype,
        })
        .collect()
}

/// The inputs of the shared graph of `kind` for a profile one of whose buckets is `d` (any bucket gives the
/// same: the fixed axes are the profile's).
pub fn dynamic_inputs(d: &Toto2Dims, kind: Toto2GraphKind) -> Vec<DynSig> {
    symbolic(kind, d.inputs(kind))
}

/// The outputs of the shared graph of `kind` (see [`dynamic_inputs`]).
pub fn dynamic_outputs(d: &Toto2Dims, kind: Toto2GraphKind) -> Vec<DynSig> {
    symbolic(kind, d.outputs_sigs(kind))
}

/// The value of the symbolic input axis besides the rows that bucket `d` binds for `kind`: L (pass, prefill)
/// or T (decode) — the `slots` argument of [`DynSig::at`] for [`dynamic_inputs`].
pub fn bound_slots(d: &Toto2Dims, kind: Toto2GraphKind) -> usize {
    match kind {
        Toto2GraphKind::Decode => d.cache_slots(),
        _ => d.tokens(kind),
    }
}

/// `Reshape` to `dims`, where 0 copies the input's dimension and −1 is inferred (ONNX semantics): how the graph
/// keeps R, L and T symbolic in the shared form and static in the per-bucket one, with one code path.
pub fn reshape(g: &mut GraphBuilder, x: &str, dims: &[i64]) -> String {
    let shape = g.const_i64(&[dims.len()], dims);
    g.op("Reshape", &[x, &shape], vec![])
}

/// Dimension `axis` of `x`, as an i64 scalar.
fn dim(g: &mut GraphBuilder, x: &str, axis: i64) -> String {
    let shape = g.op("Shape", &[x], vec![]);
    let at = g.const_i64(&[], &[axis]);
    g.op("Gather", &[&shape, &at], vec![("axis", Attr::Int(0))])
}

/// `0, 1, …, n − 1` (i64) for n = dimension `axis` of `x`: the slot positions a static graph stores as a
/// constant.
pub fn positions(g: &mut GraphBuilder, x: &str, axis: i64) -> String {
    let n = dim(g, x, axis);
    let (zero, one) = (g.const_i64(&[], &[0]), g.const_i64(&[], &[1]));
    g.op("Range", &[&zero, &n, &one], vec![])
}

/// `x [R, L, D]` at each row's `index [R, K]` → `[R, K, D]`, through the same flat `Gather` as the static graph
/// (row r's slot i is flat row `r·L + i`), with R and L read from `x`.
pub fn select_rows(g: &mut GraphBuilder, x: &str, index: &str, d: usize) -> String {
    let flat = reshape(g, x, &[-1, d as i64]);
    let rows = positions(g, x, 0);
    let l = dim(g, x, 1);
    let base = g.binary("Mul", &rows, &l);
    let base = g.unsqueeze(&base, &[1]);
    let idx = g.binary("Add", &base, index);
    g.op("Gather", &[&flat, &idx], vec![("axis", Attr::Int(0))])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::Profile;
    use crate::toto2::config::tests::config_4m_json;
    use crate::toto2::config::Toto2Config;
    use crate::toto2::ladder::ladder;

    fn buckets(decode_block: Option<usize>) -> Vec<Toto2Dims> {
        let cfg = Toto2Config::from_json(&config_4m_json()).unwrap();
        let profile = Profile {
            name: "p".into(),
            batch: 8,
            variates: 4,
            context: 4096,
            horizon: 336,
            samples: 0,
            buckets: None,
            decode_block,
            family: None,
        };
        let l = ladder(&profile, &cfg).unwrap();
        assert!(l.len() > 4, "the ladder should vary rows and context: {l:?}");
        l
    }

    /// Every bucket's static signature is the shared signature at that bucket's rows and slots: one graph of the
    /// shared form can stand for each of the profile's static graphs.
    #[test]
    fn the_shared_signature_instantiates_to_every_buckets_static_one() {
        for block in [None, Some(64)] {
            let l = buckets(block);
            for kind in l[0].graphs() {
                let shared = dynamic_inputs(&l[0], kind);
                for d in &l {
                    assert_eq!(
                        dynamic_inputs(d, kind),
                        shared,
                        "{kind:?}: fixed axes differ between buckets"
                    );
                    let at: Vec<TensorSig> =
                        shared.iter().map(|s| s.at(d.rows, bound_slots(d, kind))).collect();
                    assert_eq!(at, d.inputs(kind), "{kind:?} at {d:?}");
                    // the outputs' symbolic axes are named, their fixed ones equal the bucket's
                    for (s, o) in dynamic_outputs(d, kind).iter().zip(d.outputs_sigs(kind)) {
                        for (dim, n) in s.dims.iter().zip(&o.shape) {
                            match dim {
                                Dim::Fixed(f) => assert_eq!(f, n, "{}", o.name),
                                Dim::Named(x) if x == ROWS => assert_eq!(*n, d.rows),
                                Dim::Named(x) if x == CACHE_SLOTS => assert_eq!(*n, d.cache_slots()),
                                Dim::Named(x) => panic!("{}: unexpected symbolic {x}", o.name),
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn only_rows_and_one_slot_axis_are_symbolic() {
        let l = buckets(Some(64));
        let named = |sigs: Vec<DynSig>, n: &str| {
            sigs.iter().filter(|s| s.dims.iter().any(|d| d == &Dim::Named(n.into()))).count()
        };
        // prefill: patches, missing, group_ids and the three rotary tables carry L; out_index does not
        assert_eq!(named(dynamic_inputs(&l[0], Toto2GraphKind::Prefill), SLOTS), 6);
        assert_eq!(named(dynamic_inputs(&l[0], Toto2GraphKind::Prefill), CACHE_SLOTS), 0);
        // decode: 2B tokens fixed; key_valid and the 2 caches per time layer carry T
        let dec = dynamic_inputs(&l[0], Toto2GraphKind::Decode);
        assert_eq!(named(dec.clone(), SLOTS), 0);
        assert_eq!(named(dec.clone(), CACHE_SLOTS), 1 + 2 * l[0].time_layers);
        assert!(dec.iter().all(|s| s.dims[0] == Dim::Named(ROWS.into())));
        let q = &dynamic_outputs(&l[0], Toto2GraphKind::Decode)[0];
        assert_eq!(q.dims[1..], [Dim::Fixed(2), Dim::Fixed(32), Dim::Fixed(9)]);
    }
}
