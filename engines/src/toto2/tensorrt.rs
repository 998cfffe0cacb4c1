//! TensorRT optimisation profiles of Toto 2.0's shared (shape-polymorphic) graphs over a profile's buckets.
//!
//! The provider options come from the family-neutral [`crate::tensorrt::profile_options`] (the layout, spanning
//! or per bucket, is [`crate::tensorrt::profile_layout`]'s); this module gives it the 2.0 shared signature
//! ([`exporter::toto2::shared`]) and each bucket's static inputs, after checking that the buckets belong to one
//! profile (same fixed axes), which the spanning layout's per-axis min/max assumes.
//!
//! Not done yet: `build-engine --target tensorrt` for 2.0 (the registry refuses it from the family's
//! capabilities): the shared 2.0 graphs exist (`exporter::toto2::graph::toto2_shared_graph`) but are not yet
//! written into export bundles, and no 2.0 TensorRT build reads them and these options.

use exporter::toto2::shared::{bound_slots, dynamic_inputs};
use exporter::toto2::{Toto2Dims, Toto2GraphKind};

use crate::tensorrt::{profile_options, ProfileLayout};

/// The `trt_profile_{min,opt,max}_shapes` options of the shared 2.0 graph of `kind` over `buckets`, or an error
/// if the buckets are not of one profile (or do not run a `kind` graph).
pub fn toto2_profile_options(
    buckets: &[Toto2Dims],
    kind: Toto2GraphKind,
    layout: ProfileLayout,
) -> Result<Vec<(String, String)>, String> {
    let first = buckets.first().ok_or("no buckets to build TensorRT profiles over")?;
    let graph = dynamic_inputs(first, kind);
    let mut bound = Vec::with_capacity(buckets.len());
    for d in buckets {
        if !d.graphs().contains(&kind) {
            return Err(format!("bucket n{}.s{} has no {} graph", d.rows, d.context_slots, kind.as_str()));
        }
        if dynamic_inputs(d, kind) != graph {
            return Err(format!(
                "bucket n{}.s{} differs from n{}.s{} in a fixed axis (horizon, decode block or model): one shared \
                 graph serves the buckets of one profile only",
                d.rows, d.context_slots, first.rows, first.context_slots
            ));
        }
        bound.push(graph.iter().map(|s| s.at(d.rows, bound_slots(d, kind))).collect::<Vec<_>>());
    }
    Ok(profile_options(&graph, &bound, layout))
}

#[cfg(test)]
mod tests {
    use super::*;
    use exporter::profile::Profile;
    use exporter::toto2::ladder::ladder;
    use exporter::toto2::Toto2Config;

    fn cfg() -> Toto2Config {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/toto2/4m/config.json");
        Toto2Config::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    fn buckets(context: usize, decode_block: Option<usize>) -> Vec<Toto2Dims> {
        let profile = Profile {
            name: "p".into(),
            batch: 8,
            variates: 4,
            context,
            horizon: 336,
            samples: 0,
            buckets: None,
            decode_block,
        };
        ladder(&profile, &cfg()).unwrap()
    }

    fn get<'a>(o: &'a [(String, String)], key: &str) -> &'a str {
        o.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str()).unwrap()
    }

    /// The 4m (patch 32, Dr 32, 9 quantiles) at 8 series × 4 variates, 2048 points, horizon 336 = 11 patches:
    /// rows {1, 4, 16, 32} × context slots {16, 32, 64}; every input with a symbolic axis is listed.
    #[test]
    fn a_pass_profile_spans_the_smallest_to_the_largest_bucket() {
        let b = buckets(2048, None);
        assert_eq!(b.len(), 4 * 3);
        let o = toto2_profile_options(&b, Toto2GraphKind::Pass, ProfileLayout::Spanning).unwrap();
        let list = |r: usize, l: usize| {
            format!(
                "patches:{r}x{l}x32,missing:{r}x{l}x32,group_ids:{r}x{l},out_index:{r}x11,rope_cos:{r}x{l}x32,\
                 rope_sin:{r}x{l}x32,xpos_scale:{r}x{l}x32"
            )
        };
        assert_eq!(get(&o, "trt_profile_min_shapes"), list(1, 16 + 11));
        assert_eq!(get(&o, "trt_profile_max_shapes"), list(32, 64 + 11));
        // tuned for the largest bucket, whose time dominates
        assert_eq!(get(&o, "trt_profile_opt_shapes"), list(32, 64 + 11));
        // one profile per bucket (once ONNX Runtime selects profiles at run time): every bucket, min = opt = max
        let o = toto2_profile_options(&b, Toto2GraphKind::Pass, ProfileLayout::PerBucket).unwrap();
        let min = get(&o, "trt_profile_min_shapes");
        assert_eq!(min.matches("patches:").count(), b.len());
        assert!(min.starts_with(&list(1, 27)) && min.ends_with(&list(32, 75)), "{min}");
        assert_eq!(get(&o, "trt_profile_max_shapes"), min);
    }

    /// Block decoding (B = 2 patches): prefill over L = S + B tokens; decode over fixed 2B tokens with the
    /// caches' T = S + N + B slots symbolic.
    #[test]
    fn block_decoding_profiles_vary_tokens_for_prefill_and_cache_slots_for_decode() {
        let b = buckets(2048, Some(64));
        let o = toto2_profile_options(&b, Toto2GraphKind::Prefill, ProfileLayout::Spanning).unwrap();
        let max = get(&o, "trt_profile_max_shapes");
        assert!(
            max.starts_with("patches:32x66x32,missing:32x66x32,group_ids:32x66,out_index:32x2,"),
            "{max}"
        );
        assert!(get(&o, "trt_profile_min_shapes").starts_with("patches:1x18x32,"));
        let o = toto2_profile_options(&b, Toto2GraphKind::Decode, ProfileLayout::Spanning).unwrap();
        let (min, max) = (get(&o, "trt_profile_min_shapes"), get(&o, "trt_profile_max_shapes"));
        // 4m: num_groups 4 KV heads of 64 channels (qk and v), one entry per cache of each time layer
        let t_min = 16 + 11 + 2;
        assert!(
            min.starts_with(&format!("patches:1x2x32,group_ids:1x4,write_pos:1,key_valid:1x{t_min},")),
            "{min}"
        );
        assert!(min.contains(&format!("k_cache.0:1x4x{t_min}x64,v_cache.0:1x4x{t_min}x64")), "{min}");
        assert!(max.contains(&format!("k_cache.0:32x4x{}x64", 64 + 11 + 2)), "{max}");
        assert_eq!(max.matches("_cache.").count(), 2 * b[0].time_layers);
    }

    #[test]
    fn buckets_of_different_profiles_or_kinds_are_refused() {
        let mut mixed = buckets(2048, None);
        let mut other = buckets(1024, None);
        other[0].horizon_slots += 1;
        mixed.push(other[0]);
        let e = toto2_profile_options(&mixed, Toto2GraphKind::Pass, ProfileLayout::Spanning).unwrap_err();
        assert!(e.contains("one profile only"), "{e}");
        let e = toto2_profile_options(&buckets(2048, None), Toto2GraphKind::Decode, ProfileLayout::Spanning)
            .unwrap_err();
        assert!(e.contains("has no decode graph"), "{e}");
        assert!(toto2_profile_options(&[], Toto2GraphKind::Pass, ProfileLayout::Spanning).is_err());
    }
}
