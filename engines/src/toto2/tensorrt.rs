//! TensorRT engines of Toto 2.0 (`build-engine --target tensorrt`): which engines a build makes
//! ([`tensorrt_builds`]) and the optimisation profiles of the shared (shape-polymorphic) graphs over a profile's
//! buckets ([`toto2_profile_options`]).
//!
//! The shared form (the default for TensorRT) builds one engine per profile and graph kind from the profile's
//! shared graph (`exporter::toto2::shared`, written by opset-24 exports), with optimisation profiles over the kept
//! sets; `--graphs per-bucket` builds one engine per static graph. The provider options come from the
//! family-neutral [`crate::tensorrt::profile_options`] (the layout, spanning or per bucket, is
//! [`crate::tensorrt::profile_layout`]'s); this module gives it the 2.0 shared signature and each bucket's static
//! inputs, after checking that the buckets belong to one profile (same fixed axes), which the spanning layout's
//! per-axis min/max assumes. The build itself (provider configuration, the whole-graph-on-TensorRT check) is
//! Toto 1.0's `crate::bundle::build::build_tensorrt`.
//!
//! Built, never run on a GPU: no 2.0 TensorRT engine has been built or loaded on a machine with TensorRT yet.

use exporter::signature::Precision;
use exporter::toto2::manifest::Toto2ProfileEntry;
use exporter::toto2::shared::{bound_slots, dynamic_inputs};
use exporter::toto2::{Toto2Dims, Toto2GraphKind};

use crate::bundle::GraphForm;
use crate::tensorrt::{profile_options, ProfileLayout};

/// One TensorRT engine a 2.0 build makes: from the export bundle's graph `source`, with the optimisation
/// `profiles` (empty for a static graph).
#[derive(Debug, Clone, PartialEq)]
pub struct TensorRtBuild {
    pub profile: String,
    pub kind: Toto2GraphKind,
    pub source: String,
    /// From the profile's shared graph: every kept set's graph of `kind` in `profile` runs on it.
    pub shared: bool,
    pub profiles: Vec<(String, String)>,
}

/// The TensorRT engines of a `precision` build of the `kept` sets (their graphs of that precision only), whose
/// export manifest profiles are `source`: per profile and kind from the shared graph (`GraphForm::Shared`), or
/// per static graph. A shared build of a bundle without shared graphs is refused with the fix.
pub fn tensorrt_builds(
    source: &[Toto2ProfileEntry],
    kept: &[Toto2ProfileEntry],
    precision: Precision,
    form: GraphForm,
    layout: ProfileLayout,
) -> Result<Vec<TensorRtBuild>, String> {
    let mut out = Vec::new();
    for p in kept {
        let name = &p.profile.name;
        if form == GraphForm::PerBucket {
            for g in p.sets.iter().flat_map(|s| &s.graphs) {
                out.push(TensorRtBuild {
                    profile: name.clone(),
                    kind: g.kind,
                    source: g.file.clone(),
                    shared: false,
                    profiles: Vec::new(),
                });
            }
            continue;
        }
        let shared = source.iter().find(|s| &s.profile.name == name).map_or(&[][..], |s| &s.shared);
        let mut kinds: Vec<Toto2GraphKind> = Vec::new();
        for g in p.sets.iter().flat_map(|s| &s.graphs) {
            if !kinds.contains(&g.kind) {
                kinds.push(g.kind);
            }
        }
        for kind in kinds {
            let graph = shared.iter().find(|g| g.kind == kind && g.precision == precision).ok_or_else(|| {
                format!(
                    "the export bundle has no shape-polymorphic {precision} {} graph of profile {name:?} (bundles \
                     written with --opset 24 have them): re-export it, or build with `--graphs per-bucket`",
                    kind.as_str()
                )
            })?;
            let buckets: Vec<Toto2Dims> =
                p.sets.iter().filter(|s| s.graphs.iter().any(|g| g.kind == kind)).map(|s| s.dims).collect();
            out.push(TensorRtBuild {
                profile: name.clone(),
                kind,
                source: graph.file.clone(),
                shared: true,
                profiles: toto2_profile_options(&buckets, kind, layout)?,
            });
        }
    }
    Ok(out)
}

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
    use exporter::toto2::manifest::{Toto2GraphFile, Toto2SetEntry, Toto2SharedGraph};
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
            family: None,
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
    fn set(name: &str, d: Toto2Dims, precision: Precision) -> Toto2SetEntry {
        Toto2SetEntry {
            name: name.into(),
            dims: d,
            memory_bytes: 0,
            graphs: d
                .graphs()
                .into_iter()
                .map(|kind| Toto2GraphFile {
                    kind,
                    precision,
                    file: exporter::export::graph_file(&format!("{name}.{}", kind.as_str()), precision),
                    inputs: d.inputs(kind),
                    outputs: d.outputs_sigs(kind),
                    nodes: 1,
                })
                .collect(),
        }
    }

    /// An export manifest's profile "p" over `b`, with shared graphs of `shared` precisions.
    fn exported(b: &[Toto2Dims], shared: &[Precision]) -> Toto2ProfileEntry {
        let profile = Profile {
            name: "p".into(),
            batch: 8,
            variates: 4,
            context: 2048,
            horizon: 336,
            samples: 0,
            buckets: None,
            decode_block: None,
            family: None,
        };
        Toto2ProfileEntry {
            profile,
            sets: b
                .iter()
                .map(|&d| set(&format!("p.n{}.s{}", d.rows, d.context_slots), d, Precision::Fp32))
                .collect(),
            shared: shared
                .iter()
                .flat_map(|&precision| {
                    b[0].graphs().into_iter().map(move |kind| Toto2SharedGraph {
                        kind,
                        precision,
                        file: exporter::export::graph_file(
                            &format!("p.dynamic.{}", kind.as_str()),
                            precision,
                        ),
                        inputs: dynamic_inputs(&b[0], kind),
                        outputs: exporter::toto2::shared::dynamic_outputs(&b[0], kind),
                        nodes: 1,
                    })
                })
                .collect(),
        }
    }

    /// The engine keeps the sets that fit (no shared graphs in its entry): the shared build makes one engine per
    /// kind from the profile's shared graph, whose profiles span the kept sets only.
    #[test]
    fn a_shared_build_makes_one_engine_per_kind_over_the_kept_sets() {
        for block in [None, Some(64)] {
            let b = buckets(2048, block);
            let source = exported(&b, &[Precision::Fp32]);
            // the sets of the most rows dropped for the memory budget
            let most = b.iter().map(|d| d.rows).max().unwrap();
            let kept_dims: Vec<Toto2Dims> = b.iter().copied().filter(|d| d.rows < most).collect();
            let kept = Toto2ProfileEntry {
                shared: Vec::new(),
                sets: source.sets.iter().filter(|s| s.dims.rows < most).cloned().collect(),
                ..source.clone()
            };
            let builds = tensorrt_builds(
                std::slice::from_ref(&source),
                std::slice::from_ref(&kept),
                Precision::Fp32,
                GraphForm::Shared,
                ProfileLayout::Spanning,
            )
            .unwrap();
            assert_eq!(builds.len(), b[0].graphs().len(), "{block:?}");
            for (build, kind) in builds.iter().zip(b[0].graphs()) {
                assert_eq!(build.kind, kind);
                assert!(build.shared);
                assert_eq!(build.source, format!("p.dynamic.{}.onnx", kind.as_str()));
                let want = toto2_profile_options(&kept_dims, kind, ProfileLayout::Spanning).unwrap();
                assert_eq!(build.profiles, want);
                let all = toto2_profile_options(&b, kind, ProfileLayout::Spanning).unwrap();
                assert_ne!(
                    get(&build.profiles, "trt_profile_max_shapes"),
                    get(&all, "trt_profile_max_shapes")
                );
            }
        }
    }

    #[test]
    fn a_shared_build_without_shared_graphs_of_its_precision_is_refused_with_the_fix() {
        let b = buckets(2048, None);
        let source = exported(&b, &[Precision::Fp32]);
        let kept = Toto2ProfileEntry { shared: Vec::new(), ..source.clone() };
        let e = tensorrt_builds(
            std::slice::from_ref(&source),
            std::slice::from_ref(&kept),
            Precision::Fp16,
            GraphForm::Shared,
            ProfileLayout::Spanning,
        )
        .unwrap_err();
        assert!(
            e.contains("no shape-polymorphic fp16 pass graph") && e.contains("--graphs per-bucket"),
            "{e}"
        );
        // an opset-18 bundle (no shared graphs at all)
        let bare = exported(&b, &[]);
        assert!(tensorrt_builds(
            &[bare],
            std::slice::from_ref(&kept),
            Precision::Fp32,
            GraphForm::Shared,
            ProfileLayout::Spanning
        )
        .is_err());
        // per bucket: one engine per static graph, no profiles
        let builds =
            tensorrt_builds(&[], &[kept], Precision::Fp32, GraphForm::PerBucket, ProfileLayout::Spanning)
                .unwrap();
        assert_eq!(builds.len(), b.len());
        assert!(builds.iter().all(|x| !x.shared && x.profiles.is_empty()));
        assert_eq!(builds[0].source, format!("p.n{}.s{}.pass.onnx", b[0].rows, b[0].context_slots));
    }

    /// The provider configuration a 2.0 engine is built with is Toto 1.0's TensorRT one
    /// (`bundle::build::tensorrt_build_config`) with the 2.0 profiles: fp16 only for fp16 graphs, TF32 off for
    /// fp32 ones (the process environment), the EPContext model dumped next to the engine.
    #[test]
    fn the_tensorrt_configuration_carries_the_toto2_profiles() {
        use crate::backend::{process_env, Target};
        use std::path::Path;
        let b = buckets(2048, Some(64));
        let target = Target::tensorrt(0, false);
        for kind in [Toto2GraphKind::Prefill, Toto2GraphKind::Decode] {
            let profiles = toto2_profile_options(&b, kind, ProfileLayout::Spanning).unwrap();
            for precision in [Precision::Fp32, Precision::Fp16] {
                let stem = format!("p.dynamic.{}", kind.as_str());
                let cfg = crate::bundle::build::tensorrt_build_config(
                    &target,
                    precision,
                    &profiles,
                    Path::new("/eng"),
                    &stem,
                );
                let o = &cfg.providers[0].options;
                assert_eq!(get(o, "trt_fp16_enable"), if precision == Precision::Fp16 { "1" } else { "0" });
                assert_eq!(get(o, "trt_dump_ep_context_model"), "1");
                assert_eq!(get(o, "trt_ep_context_file_path"), format!("/eng/{stem}.trt_ctx.onnx"));
                for key in ["trt_profile_min_shapes", "trt_profile_opt_shapes", "trt_profile_max_shapes"] {
                    assert_eq!(get(o, key), get(&profiles, key), "{key}");
                }
                let tf32 = process_env(&target, precision);
                assert_eq!(tf32.is_empty(), precision == Precision::Fp16, "{tf32:?}");
            }
        }
    }

    /// A 2.0 engine TensorRT did not take whole is refused by the shared check `build_tensorrt` runs, naming the
    /// nodes (here the decode graph's cache writes, as a TensorRT without `TensorScatter` would leave them).
    #[test]
    fn a_toto2_engine_with_nodes_off_tensorrt_is_refused() {
        use exporter::pb::{GraphProto, ModelProto, NodeProto};
        let node =
            |op: &str, name: &str| NodeProto { op_type: op.into(), name: name.into(), ..Default::default() };
        let model = |nodes| ModelProto {
            graph: Some(GraphProto { node: nodes, ..Default::default() }),
            ..Default::default()
        };
        let b = buckets(2048, Some(64));
        let layers = b[0].time_layers;
        let mut nodes = vec![node(
            "EPContext",
            "TensorrtExecutionProvider_TRTKernel_graph_toto2_p_dynamic_decode_fp32_0",
        )];
        assert!(crate::tensorrt::check_all_on_tensorrt(&model(nodes.clone())).is_ok());
        for l in 0..layers {
            nodes.push(node("TensorScatter", &format!("time.{l}.k_cache_update")));
            nodes.push(node("TensorScatter", &format!("time.{l}.v_cache_update")));
        }
        let e = crate::tensorrt::check_all_on_tensorrt(&model(nodes)).unwrap_err();
        assert!(e.starts_with(&format!("{} node(s)", 2 * layers)), "{e}");
        assert!(e.contains("time.0.k_cache_update (TensorScatter)") && e.contains("`totoc doctor`"), "{e}");
    }
}
