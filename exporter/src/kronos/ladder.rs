//! A Kronos profile's own settings (its YAML `family:` section, [`KronosSettings`]) and the shape buckets it is
//! exported as ([`buckets`]).
//!
//! ```yaml
//! profiles:
//!   - name: small
//!     batch: 8            # series per call
//!     variates: 1         # a series is one candle series (its columns are the model's: open … amount)
//!     context: 2048       # rows a series may bring: all are normalised and encoded
//!     horizon: 120        # at most `window` (upstream refuses a horizon past max_context)
//!     samples: 8          # sample paths per series (0: the greedy path only)
//!     family:
//!       window: 512       # the transformer window: the caches' slots, and the largest max_context
//!       encode: [{rows: 1, slots: 512}, {rows: 1, slots: 2048}]     # optional
//!       prefill: [{rows: 1, slots: 256}, {rows: 1, slots: 512}]     # optional
//!       detokenize: [{rows: 8, slots: 512}]                         # optional
//!       rows: [1, 8, 64]  # optional: the rows of the per-path graphs (recompute, decode, refine)
//!       span: 256         # optional: positions a long pass (encode, prefill, recompute, detokenize) runs its
//!                         # row-wise parts in at a time; a multiple of 64
//! ```
//!
//! Rows are series for encode and prefill (one of each per series; its caches are copied to its paths' rows), and
//! paths (series × max(samples, 1)) for the others. The default ladders under-fill along what a call varies:
//! * rows: powers of two up to the profile's (at most [`ROWS_CAP`]: a larger call runs in chunks);
//! * encode slots: the profile's context, halving down to [`MIN_ENCODE_SLOTS`];
//! * prefill and recompute slots: quarters of `min(window, context)` (a window of 512: 128, 256, 384, 512);
//!   recompute graphs only when a call can slide (`context + horizon − 1 > window`);
//! * detokenize slots: quarters of `min(context + horizon, window)`;
//! * decode and refine: T = window.
//!
//! A listed ladder replaces the default one and must cover the profile: its largest slots are the bound above.

use serde::Deserialize;

use crate::bucket::Bucket;
use crate::error::{Error, Result};
use crate::kronos::config::KronosConfig;
use crate::kronos::graph::{DEFAULT_SPAN, QUERY_BLOCK};
use crate::kronos::signature::{inputs, outputs, ModelDims};
use crate::profile::Profile;
use crate::signature::{DType, GraphKind, TensorSig};

/// Largest rows of the default ladders.
pub const ROWS_CAP: usize = 64;
/// Fewest encode slots of the default ladder (a shorter context has just its own).
pub const MIN_ENCODE_SLOTS: usize = 64;
/// Largest window: the caches of one path at Kronos-base's size are 90 MB at 2048.
pub const MAX_WINDOW: usize = 8192;
/// Largest context (rows encoded per series).
pub const MAX_CONTEXT: usize = 1 << 16;
/// Most buckets one listed ladder may hold.
pub const MAX_LISTED: usize = 64;

/// One listed bucket: rows × slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shape {
    pub rows: usize,
    pub slots: usize,
}

/// A Kronos profile's `family:` section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KronosSettings {
    /// T: the transformer window, the caches' slots and the largest `max_context` a request may ask for.
    pub window: usize,
    #[serde(default)]
    pub encode: Option<Vec<Shape>>,
    #[serde(default)]
    pub prefill: Option<Vec<Shape>>,
    #[serde(default)]
    pub detokenize: Option<Vec<Shape>>,
    /// Rows of the per-path graphs (recompute, decode, refine).
    #[serde(default)]
    pub rows: Option<Vec<usize>>,
    /// Positions a long pass runs its row-wise parts in at a time (see `graph::causal`); [`DEFAULT_SPAN`] if
    /// not given. Fewer positions hold less memory during the pass, at more nodes (each loaded session holds
    /// its nodes' state: on Kronos-small's 512 positions spans of 256 peaked lowest, on Kronos-mini's 2,048
    /// spans of 512).
    #[serde(default)]
    pub span: Option<usize>,
}

fn bad<T>(profile: &Profile, message: String) -> Result<T> {
    Err(Error::Profile { message: format!("profile {:?}: {message}", profile.name) })
}

impl KronosSettings {
    /// The `family:` section of `profile`, parsed (unknown keys refused by name).
    pub fn of(profile: &Profile) -> Result<Self> {
        let Some(section) = &profile.family else {
            return bad(
                profile,
                "a Kronos profile needs its window: add `family: {window: 512}` (the transformer window, \
                 KronosPredictor's max_context: 512 for the published models; Kronos-mini was trained to 2048)"
                    .into(),
            );
        };
        serde_json::from_value(section.clone()).or_else(|e| bad(profile, format!("family: {e}")))
    }

    /// The long passes' span (checked by [`check_profile`]).
    pub fn span(&self) -> usize {
        self.span.unwrap_or(DEFAULT_SPAN)
    }
}

/// Paths per series: `max(samples, 1)` (samples 0 is the one greedy path).
fn paths(profile: &Profile) -> usize {
    profile.samples.max(1)
}

/// Powers of two below `max` (capped at [`ROWS_CAP`]), then the cap itself.
fn default_rows(max: usize) -> Vec<usize> {
    let top = max.clamp(1, ROWS_CAP);
    let mut v: Vec<usize> = (0..).map(|i| 1usize << i).take_while(|&r| r < top).collect();
    v.push(top);
    v
}

/// Quarters of `n` (rounded up), ascending and distinct.
fn quarters(n: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (1..=4).map(|q| (n * q).div_ceil(4)).filter(|&s| s > 0).collect();
    v.dedup();
    v
}

/// `n`, halving down to `min` (or `n` alone if smaller), ascending.
fn halving(n: usize, min: usize) -> Vec<usize> {
    let mut v = vec![n];
    while let Some(&s) = v.last() {
        if s <= min {
            break;
        }
        v.push(s.div_ceil(2).max(min));
    }
    v.reverse();
    v.dedup();
    v
}

/// The bounds a profile's buckets must cover.
struct Bounds {
    /// Series per call (encode, prefill rows).
    series: usize,
    /// Paths per call (the other graphs' rows).
    paths: usize,
    encode: usize,
    prefill: usize,
    detokenize: usize,
}

fn bounds(profile: &Profile, s: &KronosSettings) -> Bounds {
    Bounds {
        series: profile.batch,
        paths: profile.batch * paths(profile),
        encode: profile.context,
        prefill: s.window.min(profile.context),
        detokenize: s.window.min(profile.context + profile.horizon),
    }
}

/// Checks a listed ladder against its bounds: non-empty, each bucket within them, the largest slots covering.
fn check_listed(profile: &Profile, what: &str, list: &[Shape], max_rows: usize, slots: usize) -> Result<()> {
    if list.is_empty() || list.len() > MAX_LISTED {
        return bad(profile, format!("family.{what} must list 1 to {MAX_LISTED} buckets"));
    }
    for (i, b) in list.iter().enumerate() {
        if b.rows == 0 || b.rows > max_rows || b.slots == 0 || b.slots > slots {
            return bad(
                profile,
                format!(
                    "family.{what}[{i}] {{rows: {}, slots: {}}} must have 1 to {max_rows} rows and 1 to {slots} slots",
                    b.rows, b.slots
                ),
            );
        }
    }
    if list.iter().map(|b| b.slots).max() != Some(slots) {
        return bad(
            profile,
            format!("family.{what} must list a bucket of {slots} slots, so that every call within the profile has one"),
        );
    }
    Ok(())
}

/// Checks a profile's bounds and settings for a Kronos model.
pub fn check_profile(profile: &Profile) -> Result<KronosSettings> {
    let s = KronosSettings::of(profile)?;
    if profile.variates != 1 {
        return bad(
            profile,
            format!(
                "`variates: {}`: a Kronos series is one candle series, its columns the model's own (open, high, \
                 low, close, volume, amount); set `variates: 1`",
                profile.variates
            ),
        );
    }
    if profile.buckets.is_some() || profile.decode_block.is_some() {
        return bad(
            profile,
            "`buckets` and `decode_block` are Toto settings; a Kronos profile lists its ladders under `family:` \
             (encode, prefill, detokenize, rows): remove them"
                .into(),
        );
    }
    if s.window == 0 || s.window > MAX_WINDOW {
        return bad(profile, format!("family.window {} must be 1 to {MAX_WINDOW}", s.window));
    }
    if let Some(span) = s.span.filter(|&n| n == 0 || n % QUERY_BLOCK != 0 || n > MAX_CONTEXT) {
        return bad(
            profile,
            format!(
                "family.span {span} must be a multiple of {QUERY_BLOCK} (a long pass's query blocks) up to \
                 {MAX_CONTEXT}; leave it out for {DEFAULT_SPAN}"
            ),
        );
    }
    if profile.context > MAX_CONTEXT {
        return bad(profile, format!("context {} exceeds {MAX_CONTEXT} rows", profile.context));
    }
    if profile.horizon > s.window {
        return bad(
            profile,
            format!(
                "horizon {} exceeds the window {}: Kronos decodes the forecast within one window (upstream refuses \
                 pred_len > max_context); lower the horizon or widen the window",
                profile.horizon, s.window
            ),
        );
    }
    let b = bounds(profile, &s);
    if let Some(l) = &s.encode {
        check_listed(profile, "encode", l, b.series, b.encode)?;
    }
    if let Some(l) = &s.prefill {
        check_listed(profile, "prefill", l, b.series, b.prefill)?;
    }
    if let Some(l) = &s.detokenize {
        check_listed(profile, "detokenize", l, b.paths, b.detokenize)?;
    }
    if let Some(rows) = &s.rows {
        if rows.is_empty() || rows.len() > MAX_LISTED || rows.iter().any(|&r| r == 0 || r > b.paths) {
            return bad(
                profile,
                format!(
                    "family.rows must list 1 to {MAX_LISTED} row counts of 1 to {} (batch × paths)",
                    b.paths
                ),
            );
        }
    }
    Ok(s)
}

/// A listed ladder as buckets of `kind`, or the default: `rows` × `slots`.
fn ladder(kind: GraphKind, listed: &Option<Vec<Shape>>, rows: &[usize], slots: &[usize]) -> Vec<Bucket> {
    match listed {
        Some(l) => l.iter().map(|s| Bucket::of(kind, s.rows, s.slots)).collect(),
        None => rows.iter().flat_map(|&r| slots.iter().map(move |&s| Bucket::of(kind, r, s))).collect(),
    }
}

/// Every bucket of `profile`, by kind in [`crate::kronos::signature::KINDS`] order, each kind sorted and
/// deduplicated.
pub fn buckets(profile: &Profile) -> Result<(KronosSettings, Vec<Bucket>)> {
    let s = check_profile(profile)?;
    let b = bounds(profile, &s);
    let series_rows = default_rows(b.series);
    let path_rows = s.rows.clone().unwrap_or_else(|| default_rows(b.paths));
    let window_slots = quarters(b.prefill);
    let mut out = Vec::new();
    let mut push = |mut v: Vec<Bucket>| {
        v.sort();
        v.dedup();
        out.extend(v);
    };
    push(ladder(GraphKind::Encode, &s.encode, &series_rows, &halving(b.encode, MIN_ENCODE_SLOTS)));
    push(ladder(GraphKind::Prefill, &s.prefill, &series_rows, &window_slots));
    if profile.context + profile.horizon > s.window + 1 {
        // the window slides: every later step recomputes it, one path per row
        push(ladder(GraphKind::Recompute, &None, &path_rows, &window_slots));
    }
    push(ladder(GraphKind::Decode, &None, &path_rows, &[s.window]));
    push(ladder(GraphKind::Refine, &None, &path_rows, &[s.window]));
    push(ladder(GraphKind::Detokenize, &s.detokenize, &default_rows(b.paths), &quarters(b.detokenize)));
    Ok((s, out))
}

/// Bytes of a signature list.
fn sig_bytes(sigs: &[TensorSig]) -> u64 {
    sigs.iter()
        .map(|s| {
            let width = match s.dtype {
                DType::F16 => 2,
                DType::F32 => 4,
                DType::I64 => 8,
            };
            s.numel() as u64 * width
        })
        .sum()
}

/// Estimated bytes of one bucket's buffers when loaded and run (weights not counted; they are shared): its inputs
/// and outputs (decode's caches once: they are updated in place), plus a conservative bound on the largest
/// intermediates of ONNX Runtime's plan (the residual stream, the MLP, one query block's attention scores).
pub fn memory_bytes(cfg: &KronosConfig, b: &Bucket, window: usize) -> u64 {
    let m = ModelDims::of(cfg);
    let (ins, outs) = (inputs(&m, b, window), outputs(&m, b, window));
    let io = if b.kind == GraphKind::Decode { sig_bytes(&ins) } else { sig_bytes(&ins) + sig_bytes(&outs) };
    let f = 4u64;
    let (r, tokens) = (b.rows as u64, if b.kind.per_row() { 1 } else { b.slots as u64 });
    let (d, ff, heads, keys) = match b.kind {
        GraphKind::Encode | GraphKind::Detokenize => {
            let t = &cfg.tokenizer;
            (t.d_model as u64, t.ff_dim as u64, t.n_heads as u64, b.slots as u64)
        }
        _ => {
            let p = &cfg.predictor;
            let keys = if b.kind.per_row() { window } else { b.slots };
            (p.d_model as u64, p.ff_dim as u64, p.n_heads as u64, keys as u64)
        }
    };
    let residual = 6 * r * tokens * d * f;
    let mlp = 3 * r * tokens * ff * f;
    // a long causal pass attends in query blocks (`graph::QUERY_BLOCK`): one block's scores at a time
    let queries = tokens.min(QUERY_BLOCK as u64);
    let scores = 2 * r * heads * queries * keys * f;
    let logits = if matches!(b.kind, GraphKind::Encode | GraphKind::Detokenize) {
        0
    } else {
        2 * r * (m.vocab() as u64) * f
    };
    io + residual + mlp.max(scores) + logits
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kronos::synth::tiny_config;

    fn profile(
        batch: usize,
        context: usize,
        horizon: usize,
        samples: usize,
        family: serde_json::Value,
    ) -> Profile {
        Profile {
            name: "p".into(),
            batch,
            variates: 1,
            context,
            horizon,
            samples,
            buckets: None,
            decode_block: None,
            family: Some(family),
        }
    }

    fn shapes(v: &[Bucket], kind: GraphKind) -> Vec<(usize, usize)> {
        v.iter().filter(|b| b.kind == kind).map(|b| (b.rows, b.slots)).collect()
    }

    #[test]
    fn default_ladders_follow_the_profile() {
        let (s, v) = buckets(&profile(8, 2048, 120, 8, serde_json::json!({"window": 512}))).unwrap();
        assert_eq!(s.window, 512);
        let encode = shapes(&v, GraphKind::Encode);
        assert_eq!(encode.len(), 4 * 6);
        assert_eq!(&encode[..6], [(1, 64), (1, 128), (1, 256), (1, 512), (1, 1024), (1, 2048)]);
        assert_eq!(shapes(&v, GraphKind::Prefill)[..4], [(1, 128), (1, 256), (1, 384), (1, 512)]);
        assert_eq!(shapes(&v, GraphKind::Prefill).last(), Some(&(8, 512)));
        let decode = shapes(&v, GraphKind::Decode);
        assert_eq!(decode, [(1, 512), (2, 512), (4, 512), (8, 512), (16, 512), (32, 512), (64, 512)]);
        assert_eq!(shapes(&v, GraphKind::Refine), decode);
        assert_eq!(shapes(&v, GraphKind::Recompute).len(), 7 * 4, "2048 + 120 slides past 512");
        assert_eq!(shapes(&v, GraphKind::Detokenize).last(), Some(&(64, 512)));
        // a profile that never slides has no recompute graphs; listed ladders replace the defaults
        let fam = serde_json::json!({"window": 512, "rows": [1, 3], "encode": [{"rows": 1, "slots": 392}],
            "prefill": [{"rows": 1, "slots": 392}], "detokenize": [{"rows": 3, "slots": 512}]});
        let (_, v) = buckets(&profile(1, 392, 120, 3, fam)).unwrap();
        assert!(shapes(&v, GraphKind::Recompute).is_empty());
        assert_eq!(shapes(&v, GraphKind::Encode), [(1, 392)]);
        assert_eq!(shapes(&v, GraphKind::Decode), [(1, 512), (3, 512)]);
        assert_eq!(shapes(&v, GraphKind::Detokenize), [(3, 512)]);
    }

    #[test]
    fn bad_profiles_name_the_field_and_the_fix() {
        let e = |p: Profile| check_profile(&p).unwrap_err().to_string();
        let w = serde_json::json!({"window": 64});
        assert!(
            e(Profile { family: None, ..profile(1, 64, 8, 0, w.clone()) }).contains("family: {window: 512}")
        );
        assert!(e(Profile { variates: 6, ..profile(1, 64, 8, 0, w.clone()) }).contains("set `variates: 1`"));
        assert!(e(profile(1, 64, 65, 0, w.clone())).contains("horizon 65 exceeds the window 64"));
        let s = e(profile(1, 64, 8, 0, serde_json::json!({"window": 64, "bogus": 1})));
        assert!(s.contains("unknown field `bogus`"), "{s}");
        let s =
            e(profile(1, 100, 8, 0, serde_json::json!({"window": 64, "encode": [{"rows": 1, "slots": 64}]})));
        assert!(s.contains("family.encode must list a bucket of 100 slots"), "{s}");
        let s = e(profile(
            1,
            100,
            8,
            0,
            serde_json::json!({"window": 64, "prefill": [{"rows": 2, "slots": 64}]}),
        ));
        assert!(s.contains("family.prefill[0]") && s.contains("1 to 1 rows"), "{s}");
        let s = e(profile(2, 100, 8, 2, serde_json::json!({"window": 64, "rows": [5]})));
        assert!(s.contains("family.rows") && s.contains("1 to 4"), "{s}");
        assert!(e(profile(1, 8, 8, 0, serde_json::json!({"window": 0}))).contains("window 0"));
        for span in [0, 100] {
            let s = e(profile(1, 64, 8, 0, serde_json::json!({"window": 64, "span": span})));
            assert!(s.contains(&format!("family.span {span} must be a multiple of 64")), "{s}");
        }
    }

    #[test]
    fn the_span_is_the_profiles_or_the_default() {
        let spans = |family| check_profile(&profile(1, 64, 8, 0, family)).unwrap().span();
        assert_eq!(spans(serde_json::json!({"window": 64})), DEFAULT_SPAN);
        assert_eq!(spans(serde_json::json!({"window": 64, "span": 128})), 128);
    }

    /// The shipped Kronos profile files parse, check and name their tokenizer.
    #[test]
    fn shipped_configs_check() {
        let configs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs");
        for (file, window) in [
            ("kronos-small.yaml", 512),
            ("kronos-base.yaml", 512),
            ("kronos-mini.yaml", 2048),
            ("kronos-tiny.yaml", 128),
        ] {
            let set = crate::profile_file::ProfileSet::from_file(&configs.join(file)).unwrap();
            let model = set.model.as_ref().unwrap();
            assert_eq!(model.generation, crate::registry::Family::Kronos, "{file}");
            assert!(model.tokenizer.is_some(), "{file} names no tokenizer");
            for p in &set.profiles {
                let (s, v) = buckets(p).unwrap_or_else(|e| panic!("{file}: {e}"));
                assert_eq!(s.window, window, "{file}");
                assert!(v.iter().any(|b| b.kind == GraphKind::Decode), "{file}");
            }
        }
    }

    #[test]
    fn memory_grows_with_rows_and_slots() {
        let cfg = tiny_config();
        let m = |kind, r, s| memory_bytes(&cfg, &Bucket::of(kind, r, s), 64);
        assert!(m(GraphKind::Prefill, 4, 64) > m(GraphKind::Prefill, 1, 64));
        assert!(m(GraphKind::Prefill, 1, 64) > m(GraphKind::Prefill, 1, 16));
        assert!(m(GraphKind::Decode, 8, 64) > m(GraphKind::Decode, 1, 64));
        assert!(m(GraphKind::Encode, 1, 64) > 0 && m(GraphKind::Refine, 1, 64) > 0);
        // past one query block the scores grow with the keys only: linearly in the slots (unblocked: 15× here)
        let long = |s| memory_bytes(&cfg, &Bucket::of(GraphKind::Encode, 1, s), 64);
        assert!(long(1024) <= 4 * long(256), "{} {}", long(1024), long(256));
    }
}
