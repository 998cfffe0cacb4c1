//! The shape buckets of a Toto 2.0 profile: which graph sets `totoc export` writes for it.
//!
//! Toto 2.0 has no sample paths, so a bucket is one static [`Toto2Dims`]: rows R (series × variates), context
//! patch slots S, and the profile's horizon (and decode block). The default ladder, as for Toto 1.0
//! ([`crate::bucket`]), under-fills along the two dimensions a call varies most:
//! * rows {1, 4, 16, 64} up to the profile's series × variates (capped at [`ROWS_CAP`]: a larger call runs as
//!   several chunks; at 64 rows of 16+ patches the matmuls are compute-bound);
//! * context slots halving from the profile's down to [`MIN_CONTEXT_POINTS`] points (or the profile's own
//!   context if that is shorter): below 512 points a pass costs about the same.
//!
//! Every bucket forecasts the profile's full horizon (shorter horizons read the first patches of its output).
//! Without `decode_block` each bucket is one pass graph; with it, a prefill and a decode graph (the prefill also
//! serves every horizon of at most one block as a single pass). A set is named `<profile>.n<R>.s<S>`; its graphs
//! are `<set>.<kind>.onnx` ([`crate::toto2::export::write_graph_set`]).

use crate::error::{Error, Result};
use crate::profile::Profile;
use crate::signature::{DType, TensorSig};
use crate::toto2::config::Toto2Config;
use crate::toto2::signature::{Toto2Dims, Toto2GraphKind};

/// Largest rows of the default ladder.
pub const ROWS_CAP: usize = 64;
/// Fewest context points of the default ladder (a profile with less context has just its own).
pub const MIN_CONTEXT_POINTS: usize = 512;
const ROWS: [usize; 4] = [1, 4, 16, 64];

/// Checks a profile's bounds against a Toto 2.0 model: no sampling, no Toto 1.0 bucket list, a decode block
/// that is a multiple of the patch, and positions within the rotary tables.
pub fn check_profile(profile: &Profile, cfg: &Toto2Config) -> Result<()> {
    let bad =
        |message: String| Err(Error::Profile { message: format!("profile {:?}: {message}", profile.name) });
    if profile.samples > 0 {
        return bad(format!(
            "`samples: {}`: a Toto 2.0 model predicts nine quantiles per step and draws no sample paths; remove it",
            profile.samples
        ));
    }
    if profile.family.is_some() {
        return bad(
            "a Toto 2.0 profile has no `family:` settings (its bounds and `decode_block` say everything): \
                    remove them"
                .into(),
        );
    }
    if profile.buckets.is_some() {
        return bad(
            "`buckets` lists Toto 1.0 prefill/decode buckets; a Toto 2.0 profile uses the default ladder \
                    (exporter/src/toto2/ladder.rs): remove it"
                .into(),
        );
    }
    Toto2Dims::new(
        cfg,
        profile.batch * profile.variates,
        profile.context,
        profile.horizon,
        profile.decode_block,
    )
    .map_err(|e| Error::Profile { message: format!("profile {:?}: {e}", profile.name) })?;
    Ok(())
}

/// The default ladder of a profile, ascending by (rows, context slots).
pub fn ladder(profile: &Profile, cfg: &Toto2Config) -> Result<Vec<Toto2Dims>> {
    check_profile(profile, cfg)?;
    let p = cfg.patch_size;
    let s_max = profile.context / p;
    let s_min = (MIN_CONTEXT_POINTS / p).clamp(1, s_max);
    let mut context_slots = vec![s_max];
    while let Some(&s) = context_slots.last() {
        if s <= s_min {
            break;
        }
        context_slots.push(s.div_ceil(2).max(s_min));
    }
    context_slots.reverse();
    let top = (profile.batch * profile.variates).clamp(1, ROWS_CAP.max(profile.variates));
    let mut rows: Vec<usize> = ROWS.iter().copied().filter(|&r| r < top).collect();
    rows.push(top);
    let mut out = Vec::new();
    for &r in &rows {
        for &s in &context_slots {
            out.push(Toto2Dims::new(cfg, r, s * p, profile.horizon, profile.decode_block)?);
        }
    }
    Ok(out)
}

/// The set name of one bucket of `profile`: `default.n4.s64`.
pub fn set_name(profile: &str, d: &Toto2Dims) -> String {
    format!("{profile}.n{}.s{}", d.rows, d.context_slots)
}

/// Estimated bytes of one set's buffers when loaded and run (weights not counted; they are shared): its inputs
/// and outputs (with block decoding the KV caches, twice: the prefill's outputs and the decode's), plus a
/// conservative bound on the largest intermediates of ONNX Runtime's plan (residual stream, MLP, attention
/// scores of the time and variate layers), as Toto 1.0's `ModelBuckets::memory_bytes` does for its buckets.
pub fn memory_bytes(d: &Toto2Dims, cfg: &Toto2Config) -> u64 {
    let f = 4u64;
    let sig_bytes = |sigs: Vec<TensorSig>| -> u64 {
        sigs.iter()
            .map(|s| {
                let width = match s.dtype {
                    DType::F16 => 2,
                    DType::F32 => 4,
                    DType::I64 => 8,
                };
                s.shape.iter().product::<usize>() as u64 * width
            })
            .sum()
    };
    let mut total = 0u64;
    let mut widest = 0u64;
    for kind in d.graphs() {
        total += sig_bytes(d.inputs(kind)) + sig_bytes(d.outputs_sigs(kind));
        let (r, l) = (d.rows as u64, d.tokens(kind) as u64);
        let keys = if kind == Toto2GraphKind::Decode { d.cache_slots() as u64 } else { l };
        let h = cfg.num_heads as u64;
        let residual = 6 * r * l * cfg.d_model as u64 * f;
        let mlp = 3 * r * l * cfg.d_ff as u64 * f;
        let time_scores = 2 * r * h * l * keys * f;
        let variate_scores = 2 * l * h * r * r * f;
        widest = widest.max(residual + mlp.max(time_scores).max(variate_scores));
    }
    total + widest
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::toto2::config::tests::config_4m_json;

    fn profile(
        batch: usize,
        variates: usize,
        context: usize,
        horizon: usize,
        block: Option<usize>,
    ) -> Profile {
        Profile {
            name: "p".into(),
            batch,
            variates,
            context,
            horizon,
            samples: 0,
            buckets: None,
            decode_block: block,
            family: None,
        }
    }

    #[test]
    fn wide_profile_ladder_halves_context_to_512_points_and_caps_rows() {
        let cfg = Toto2Config::from_json(&config_4m_json()).unwrap();
        let l = ladder(&profile(64, 8, 4096, 336, None), &cfg).unwrap();
        let shapes: Vec<(usize, usize)> = l.iter().map(|d| (d.rows, d.context_slots)).collect();
        assert_eq!(shapes.len(), 4 * 4);
        assert_eq!(&shapes[..4], [(1, 16), (1, 32), (1, 64), (1, 128)]);
        assert_eq!(shapes.last(), Some(&(64, 128)));
        assert!(l.iter().all(|d| d.horizon_slots == 11 && d.block.is_none()));
        assert_eq!(set_name("p", &l[5]), "p.n4.s32");
        // small profiles: their own context and rows only
        let small = ladder(&profile(1, 3, 300, 64, None), &cfg).unwrap();
        let shapes: Vec<(usize, usize)> = small.iter().map(|d| (d.rows, d.context_slots)).collect();
        assert_eq!(shapes, [(1, 9), (3, 9)]);
        // block decoding: prefill + decode sets
        let b = ladder(&profile(2, 1, 1024, 1024, Some(256)), &cfg).unwrap();
        assert!(b.iter().all(|d| d.block == Some(8) && d.graphs().len() == 2));
    }

    #[test]
    fn toto1_fields_and_bad_blocks_are_refused_with_the_fix() {
        let cfg = Toto2Config::from_json(&config_4m_json()).unwrap();
        let e = |p: Profile| check_profile(&p, &cfg).unwrap_err().to_string();
        let s = e(Profile { samples: 8, ..profile(1, 1, 512, 64, None) });
        assert!(s.contains("samples: 8") && s.contains("remove it"), "{s}");
        assert!(e(profile(1, 1, 512, 64, Some(100))).contains("multiple of the patch size 32"));
        assert!(e(profile(1, 1, 16, 64, None)).contains("at least one patch"));
        let s = e(Profile { family: Some(serde_json::json!({"window": 8})), ..profile(1, 1, 512, 64, None) });
        assert!(s.contains("`family:`") && s.contains("remove them"), "{s}");
    }

    #[test]
    fn memory_grows_with_rows_context_and_caches() {
        let cfg = Toto2Config::from_json(&config_4m_json()).unwrap();
        let m = |r, c, b| memory_bytes(&Toto2Dims::new(&cfg, r, c, 336, b).unwrap(), &cfg);
        assert!(m(4, 512, None) > m(1, 512, None));
        assert!(m(1, 4096, None) > m(1, 512, None));
        assert!(m(1, 512, Some(64)) > m(1, 512, None), "caches");
    }
}
