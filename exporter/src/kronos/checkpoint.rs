//! Strict loading of a Kronos model's two checkpoint directories, the predictor (`--checkpoint`) and its tokenizer
//! (`--tokenizer`), each `config.json` + `model.safetensors` as `save_pretrained` writes them.
//!
//! Upstream's `from_pretrained` loads non-strictly; totoc accounts for every stored tensor: each file must hold
//! exactly the tensors [`predictor_tensors`] / [`tokenizer_tensors`] list for its config, with those shapes and
//! dtypes, including the ones inference never reads (`post_quant_embed_pre`, the quantizer's `basis` and
//! `group_basis`, whose values are checked, and every `rotary.inv_freq`, which the graphs read as stored: torch's
//! f32 `pow` differs from a recomputed table by a few ulps). Each file is validated by
//! [`crate::safetensors`] (bounds, offsets, overlaps, truncation) and memory-mapped.

use std::collections::HashMap;
use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use memmap2::Mmap;

use crate::error::{Error, Result};
use crate::fsutil::sha256_bytes;
use crate::kronos::config::{
    KronosConfig, PredictorConfig, TokenizerConfig, DEP_HEADS, PREDICTOR_KEYS, ROW_COLUMNS, TIME_FEATURES,
};
use crate::manifest::{CheckpointFiles, CheckpointInfo};
use crate::safetensors::{parse_safetensors, StoredTensor, TensorView, CONFIG_FILE, SAFETENSORS_FILE};

/// A tensor a checkpoint must hold: name, shape and safetensors dtype.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    pub name: String,
    pub shape: Vec<usize>,
    /// `F32`, or `I64` for the quantizer's bit weights.
    pub dtype: &'static str,
}

fn f32(name: String, shape: &[usize]) -> Expected {
    Expected { name, shape: shape.to_vec(), dtype: "F32" }
}

/// A torch `Linear(i, o)` (weight `[o, i]`), with its bias or without.
fn linear(out: &mut Vec<Expected>, prefix: &str, o: usize, i: usize, bias: bool) {
    out.push(f32(format!("{prefix}.weight"), &[o, i]));
    if bias {
        out.push(f32(format!("{prefix}.bias"), &[o]));
    }
}

/// Attention projections with biases and the rotary buffer (`MultiHeadAttentionWithRoPE`,
/// `MultiHeadCrossAttentionWithRoPE`) of a `d`-wide layer with heads of `head_dim`.
fn attention(out: &mut Vec<Expected>, prefix: &str, d: usize, head_dim: usize) {
    for p in ["q_proj", "k_proj", "v_proj", "out_proj"] {
        linear(out, &format!("{prefix}.{p}"), d, d, true);
    }
    out.push(f32(format!("{prefix}.rotary.inv_freq"), &[head_dim / 2]));
}

/// One `TransformerBlock`: `norm1`, `self_attn`, `norm2`, the SwiGLU `ffn` (no biases).
fn block(out: &mut Vec<Expected>, prefix: &str, d: usize, heads: usize, ff: usize) {
    out.push(f32(format!("{prefix}.norm1.weight"), &[d]));
    attention(out, &format!("{prefix}.self_attn"), d, d / heads);
    out.push(f32(format!("{prefix}.norm2.weight"), &[d]));
    linear(out, &format!("{prefix}.ffn.w1"), ff, d, false);
    linear(out, &format!("{prefix}.ffn.w3"), ff, d, false);
    linear(out, &format!("{prefix}.ffn.w2"), d, ff, false);
}

/// The name of time-feature table `feature` (`minute`, …): `time_emb.minute_embed.weight` with learned tables,
/// `time_emb.minute_embed.emb.weight` with `FixedEmbedding`s (`learn_te: false`).
pub fn time_table(cfg: &PredictorConfig, feature: &str) -> String {
    if cfg.learn_te {
        format!("time_emb.{feature}_embed.weight")
    } else {
        format!("time_emb.{feature}_embed.emb.weight")
    }
}

/// Every tensor of a predictor checkpoint, in module order. Kronos-small: 136 tensors.
pub fn predictor_tensors(cfg: &PredictorConfig) -> Vec<Expected> {
    let d = cfg.d_model;
    let mut out = Vec::new();
    out.push(f32("embedding.emb_s1.weight".into(), &[cfg.s1_vocab(), d]));
    out.push(f32("embedding.emb_s2.weight".into(), &[cfg.s2_vocab(), d]));
    linear(&mut out, "embedding.fusion_proj", d, 2 * d, true);
    for (feature, size) in TIME_FEATURES {
        out.push(f32(time_table(cfg, feature), &[size, d]));
    }
    for i in 0..cfg.n_layers {
        block(&mut out, &format!("transformer.{i}"), d, cfg.n_heads, cfg.ff_dim);
    }
    out.push(f32("norm.weight".into(), &[d]));
    attention(&mut out, "dep_layer.cross_attn", d, d / DEP_HEADS);
    out.push(f32("dep_layer.norm.weight".into(), &[d]));
    linear(&mut out, "head.proj_s1", cfg.s1_vocab(), d, true);
    linear(&mut out, "head.proj_s2", cfg.s2_vocab(), d, true);
    out
}

/// Every tensor of a tokenizer checkpoint, in module order. Kronos-Tokenizer-base: 96 tensors.
pub fn tokenizer_tensors(cfg: &TokenizerConfig) -> Vec<Expected> {
    let (d, bits) = (cfg.d_model, cfg.codebook_bits());
    let mut out = Vec::new();
    linear(&mut out, "embed", d, ROW_COLUMNS, true);
    linear(&mut out, "head", ROW_COLUMNS, d, true);
    for i in 0..cfg.encoder_blocks() {
        block(&mut out, &format!("encoder.{i}"), d, cfg.n_heads, cfg.ff_dim);
    }
    for i in 0..cfg.decoder_blocks() {
        block(&mut out, &format!("decoder.{i}"), d, cfg.n_heads, cfg.ff_dim);
    }
    linear(&mut out, "quant_embed", bits, d, true);
    linear(&mut out, "post_quant_embed_pre", d, cfg.s1_bits, true);
    linear(&mut out, "post_quant_embed", d, bits, true);
    out.push(Expected { name: BASIS.into(), shape: vec![bits], dtype: "I64" });
    out.push(Expected { name: GROUP_BASIS.into(), shape: vec![cfg.group_size], dtype: "I64" });
    out
}

/// The quantizer's bit weights `2^(n−1) … 2^0` (MSB first; persistent, unused at inference).
pub const BASIS: &str = "tokenizer.bsq.basis";
/// The quantizer's group bit weights `2^(g−1) … 2^0` (persistent, unused at inference).
pub const GROUP_BASIS: &str = "tokenizer.bsq.group_basis";

/// One validated tensor: name, shape and byte range in the file's map.
#[derive(Debug)]
struct Entry {
    name: String,
    shape: Vec<usize>,
    dtype: &'static str,
    range: Range<usize>,
}

/// One loaded checkpoint directory (the predictor's or the tokenizer's): its map and validated tensors.
pub struct CheckpointDir {
    dir: PathBuf,
    map: Mmap,
    /// In expected order.
    entries: Vec<Entry>,
    index: HashMap<String, usize>,
    config_sha256: String,
    safetensors_sha256: OnceLock<String>,
}

impl std::fmt::Debug for CheckpointDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckpointDir").field("dir", &self.dir).field("tensors", &self.entries.len()).finish()
    }
}

impl CheckpointDir {
    /// Maps `dir/model.safetensors` and matches it against `expected`; `config_text` is the config already read.
    fn load(dir: &Path, config_text: &str, expected: Vec<Expected>) -> Result<Self> {
        let path = dir.join(SAFETENSORS_FILE);
        let file = File::open(&path).map_err(|e| Error::io(&path, e))?;
        // SAFETY: read-only private map; like every mmap-based loader we assume the file is not rewritten while
        // the checkpoint lives.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| Error::io(&path, e))?;
        let stored = parse_safetensors(&path, &map)?;
        let entries = match_expected(expected, stored).map_err(|e| e.in_file(&path))?;
        let index = entries.iter().enumerate().map(|(i, e)| (e.name.clone(), i)).collect();
        Ok(CheckpointDir {
            dir: dir.to_path_buf(),
            map,
            entries,
            index,
            config_sha256: sha256_bytes(config_text.as_bytes()),
            safetensors_sha256: OnceLock::new(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// sha256 of the directory's two files.
    pub fn files(&self) -> CheckpointFiles {
        CheckpointFiles {
            safetensors_sha256: self.safetensors_sha256.get_or_init(|| sha256_bytes(&self.map)).clone(),
            config_sha256: self.config_sha256.clone(),
        }
    }

    /// The f32 tensor `name`.
    pub fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        let e = self.entry(name)?;
        if e.dtype != "F32" {
            return Err(Error::Checkpoint { message: format!("`{name}` is {}, not an f32 tensor", e.dtype) });
        }
        Ok(TensorView { name: &e.name, shape: &e.shape, bytes: &self.map[e.range.clone()] })
    }

    /// The f32 values of tensor `name`.
    pub fn values(&self, name: &str) -> Result<Vec<f32>> {
        Ok(self.tensor(name)?.to_f32_vec())
    }

    /// The i64 tensor `name`'s values.
    fn i64_values(&self, name: &str) -> Result<Vec<i64>> {
        let e = self.entry(name)?;
        Ok(self.map[e.range.clone()]
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().expect("8")))
            .collect())
    }

    fn entry(&self, name: &str) -> Result<&Entry> {
        let i = *self.index.get(name).ok_or_else(|| Error::UnknownTensor { name: name.to_string() })?;
        Ok(&self.entries[i])
    }

    /// Every tensor's name, in expected order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| e.name.as_str())
    }
}

/// A loaded, fully validated Kronos model: both configs and both checkpoints.
#[derive(Debug)]
pub struct KronosCheckpoint {
    pub config: KronosConfig,
    pub predictor: CheckpointDir,
    pub tokenizer: CheckpointDir,
}

/// Reads `dir/config.json`.
fn read_config(dir: &Path) -> Result<(PathBuf, String)> {
    let path = dir.join(CONFIG_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    Ok((path, text))
}

/// Whether a config text has all of `keys`.
fn has_keys(text: &str, keys: &[&str]) -> bool {
    serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(text)
        .is_ok_and(|o| keys.iter().all(|k| o.contains_key(*k)))
}

impl KronosCheckpoint {
    /// Loads the predictor directory `predictor` and the tokenizer directory `tokenizer`, checking each holds
    /// exactly the tensors its config implies and that the two configs belong together.
    pub fn load(predictor: &Path, tokenizer: &Path) -> Result<Self> {
        let (p_path, p_text) = read_config(predictor)?;
        let (t_path, t_text) = read_config(tokenizer)?;
        if has_keys(&t_text, &PREDICTOR_KEYS) {
            let message = format!(
                "--tokenizer {} holds a Kronos predictor (model) config, not a tokenizer's: give the tokenizer's \
                 checkpoint directory (its config has n_enc_layers, n_dec_layers, group_size)",
                tokenizer.display()
            );
            return Err(Error::Config { message }.in_file(&t_path));
        }
        let p_cfg = PredictorConfig::from_json(&p_text).map_err(|e| e.in_file(&p_path))?;
        let t_cfg = TokenizerConfig::from_json(&t_text).map_err(|e| e.in_file(&t_path))?;
        let config = KronosConfig::new(p_cfg, t_cfg)?;
        let p = CheckpointDir::load(predictor, &p_text, predictor_tensors(&config.predictor))?;
        let t = CheckpointDir::load(tokenizer, &t_text, tokenizer_tensors(&config.tokenizer))?;
        let ckpt = KronosCheckpoint { config, predictor: p, tokenizer: t };
        ckpt.check_values()?;
        Ok(ckpt)
    }

    /// The values the graphs rely on: the quantizer's bit weights are upstream's (else this is not a tokenizer as
    /// upstream saves it), and every rotary table is finite.
    fn check_values(&self) -> Result<()> {
        let at = self.tokenizer.dir.join(SAFETENSORS_FILE);
        for (name, n) in
            [(BASIS, self.config.tokenizer.codebook_bits()), (GROUP_BASIS, self.config.tokenizer.group_size)]
        {
            let want: Vec<i64> = (0..n).rev().map(|j| 1i64 << j).collect();
            let got = self.tokenizer.i64_values(name)?;
            if got != want {
                return Err(Error::TensorData {
                    path: at,
                    name: name.into(),
                    message: format!(
                        "holds {got:?}, not upstream's bit weights 2^{} … 2^0 (most significant first)",
                        n - 1
                    ),
                });
            }
        }
        for part in [&self.predictor, &self.tokenizer] {
            for name in part.names().filter(|n| n.ends_with(".inv_freq")) {
                if part.values(name)?.iter().any(|v| !v.is_finite()) {
                    return Err(Error::TensorData {
                        path: part.dir.join(SAFETENSORS_FILE),
                        name: name.into(),
                        message: "holds a value that is not finite".into(),
                    });
                }
            }
        }
        Ok(())
    }

    /// The hashes of both directories' files: the predictor's as the checkpoint, the tokenizer's beside them.
    pub fn info(&self) -> CheckpointInfo {
        let p = self.predictor.files();
        CheckpointInfo {
            safetensors_sha256: p.safetensors_sha256,
            config_sha256: p.config_sha256,
            tokenizer: Some(self.tokenizer.files()),
        }
    }
}

/// Maps the stored tensors onto `expected`: unexpected, missing, shapes and dtypes in that order.
fn match_expected(expected: Vec<Expected>, stored: Vec<StoredTensor>) -> Result<Vec<Entry>> {
    let mut by_name: HashMap<String, StoredTensor> = HashMap::new();
    let mut unexpected = Vec::new();
    for t in stored {
        if !expected.iter().any(|e| e.name == t.name) {
            unexpected.push(t.name.clone());
        }
        by_name.insert(t.name.clone(), t);
    }
    if !unexpected.is_empty() {
        unexpected.sort();
        return Err(Error::Checkpoint {
            message: format!(
                "unexpected tensor(s) {unexpected:?}: the Kronos config does not have them (a checkpoint of \
                 another size or version?)"
            ),
        });
    }
    let mut entries = Vec::with_capacity(expected.len());
    for e in expected {
        let t = by_name
            .remove(&e.name)
            .ok_or_else(|| Error::MissingTensor { name: e.name.clone(), expected: e.shape.clone() })?;
        if t.shape != e.shape {
            return Err(Error::TensorShape { name: t.name, expected: e.shape, actual: t.shape });
        }
        if t.dtype != e.dtype {
            return Err(Error::TensorDtype { name: t.name, expected: e.dtype.into(), actual: t.dtype });
        }
        entries.push(Entry { name: e.name, shape: e.shape, dtype: e.dtype, range: t.range });
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kronos::config::tests::{small_json, tokenizer_base_json};
    use crate::kronos::synth::{
        predictor_stored, tiny_config, tokenizer_stored, write_checkpoint, write_dir,
    };

    /// A tiny model's two directories under a temp dir: (guard, predictor, tokenizer).
    fn tiny() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let (p, t) = (d.path().join("predictor"), d.path().join("tokenizer"));
        write_checkpoint(&p, &t, &tiny_config(), 3).unwrap();
        (d, p, t)
    }

    fn load_err(p: &Path, t: &Path) -> String {
        KronosCheckpoint::load(p, t).unwrap_err().to_string()
    }

    #[test]
    fn published_sizes_have_upstreams_tensor_and_parameter_counts() {
        let small = PredictorConfig::from_json(&small_json()).unwrap();
        let t = predictor_tensors(&small);
        assert_eq!(t.len(), 136);
        // parameters (buffers excluded), as the model notes compute them
        let params = |t: &[Expected]| -> usize {
            t.iter()
                .filter(|e| !e.name.ends_with("inv_freq") && e.dtype == "F32")
                .map(|e| e.shape.iter().product::<usize>())
                .sum()
        };
        assert_eq!(params(&t), 24_741_376);
        let base = small_json()
            .replace("\"d_model\": 512", "\"d_model\": 832")
            .replace("\"n_layers\": 8", "\"n_layers\": 12")
            .replace("\"n_heads\": 8", "\"n_heads\": 16")
            .replace("\"ff_dim\": 1024", "\"ff_dim\": 2048");
        assert_eq!(params(&predictor_tensors(&PredictorConfig::from_json(&base).unwrap())), 102_310_592);
        let tok = tokenizer_tensors(&TokenizerConfig::from_json(&tokenizer_base_json()).unwrap());
        assert_eq!(tok.len(), 96);
        assert_eq!(params(&tok), 3_958_042);
        // learn_te false: the same tables under `emb.weight`
        let fixed =
            PredictorConfig::from_json(&small_json().replace("\"learn_te\": true", "\"learn_te\": false"))
                .unwrap();
        let names: Vec<String> = predictor_tensors(&fixed).into_iter().map(|e| e.name).collect();
        assert!(names.contains(&"time_emb.minute_embed.emb.weight".to_string()));
        assert!(!names.contains(&"time_emb.minute_embed.weight".to_string()));
    }

    #[test]
    fn loads_both_directories_with_every_tensor_and_both_hashes() {
        let (_d, p, t) = tiny();
        let ck = KronosCheckpoint::load(&p, &t).unwrap();
        assert_eq!(ck.config, tiny_config());
        assert_eq!(ck.predictor.names().count(), predictor_tensors(&ck.config.predictor).len());
        assert_eq!(ck.tokenizer.names().count(), tokenizer_tensors(&ck.config.tokenizer).len());
        assert_eq!(
            ck.predictor.values("transformer.0.self_attn.rotary.inv_freq").unwrap(),
            [1.0, 0.1, 0.01, 0.001]
        );
        assert!(ck.tokenizer.tensor(BASIS).unwrap_err().to_string().contains("I64"));
        let info = ck.info();
        let tok = info.tokenizer.clone().unwrap();
        assert_ne!(info.safetensors_sha256, tok.safetensors_sha256);
        assert_eq!(tok.config_sha256, sha256_bytes(&std::fs::read(t.join(CONFIG_FILE)).unwrap()));
        // the same seed gives the same bytes
        let (_e, p2, t2) = tiny();
        assert_eq!(KronosCheckpoint::load(&p2, &t2).unwrap().info(), info);
    }

    #[test]
    fn missing_extra_misshaped_and_mistyped_tensors_are_named() {
        let cfg = tiny_config();
        let (_d, p, t) = tiny();
        let mut v = predictor_stored(&cfg.predictor, 3);
        v.retain(|(n, ..)| n != "dep_layer.cross_attn.rotary.inv_freq");
        write_dir(&p, &cfg.predictor, &v).unwrap();
        let e = load_err(&p, &t);
        assert!(e.contains("`dep_layer.cross_attn.rotary.inv_freq` is missing") && e.contains("[2]"), "{e}");

        let (_d, p, t) = tiny();
        let mut v = tokenizer_stored(&cfg.tokenizer, 3);
        v.retain(|(n, ..)| n != "post_quant_embed_pre.bias");
        write_dir(&t, &cfg.tokenizer, &v).unwrap();
        let e = load_err(&p, &t);
        assert!(e.contains("`post_quant_embed_pre.bias` is missing"), "{e}");
        assert!(
            e.contains(&t.join(SAFETENSORS_FILE).display().to_string()),
            "names the tokenizer's file: {e}"
        );

        let (_d, p, t) = tiny();
        let mut v = predictor_stored(&cfg.predictor, 3);
        v.push(("transformer.2.norm1.weight".into(), "F32", vec![16], vec![0; 64]));
        write_dir(&p, &cfg.predictor, &v).unwrap();
        let e = load_err(&p, &t);
        assert!(e.contains("unexpected tensor(s)") && e.contains("transformer.2.norm1.weight"), "{e}");
        assert!(e.contains(&p.join(SAFETENSORS_FILE).display().to_string()), "names the file: {e}");

        let mut v = predictor_stored(&cfg.predictor, 3);
        let i = v.iter().position(|(n, ..)| n == "head.proj_s1.weight").unwrap();
        v[i].2 = vec![8, 32];
        write_dir(&p, &cfg.predictor, &v).unwrap();
        let e = load_err(&p, &t);
        assert!(e.contains("`head.proj_s1.weight` has shape [8, 32], expected [16, 16]"), "{e}");

        let (_d, p, t) = tiny();
        let mut v = tokenizer_stored(&cfg.tokenizer, 3);
        let i = v.iter().position(|(n, ..)| n == GROUP_BASIS).unwrap();
        v[i].1 = "F64";
        write_dir(&t, &cfg.tokenizer, &v).unwrap();
        let e = load_err(&p, &t);
        assert!(e.contains("`tokenizer.bsq.group_basis` has dtype F64, expected I64"), "{e}");

        let mut v = tokenizer_stored(&cfg.tokenizer, 3);
        let i = v.iter().position(|(n, ..)| n == BASIS).unwrap();
        v[i].3 = (0..8).flat_map(|j: i64| (1i64 << j).to_le_bytes()).collect();
        write_dir(&t, &cfg.tokenizer, &v).unwrap();
        let e = load_err(&p, &t);
        assert!(e.contains("tokenizer.bsq.basis") && e.contains("2^7 … 2^0"), "{e}");
    }

    /// The reference fixtures' checkpoints, written by upstream's `save_pretrained` (tests/reference/
    /// make_kronos_checkpoints.py): every stored tensor accounted for, in each of the four configurations.
    #[test]
    fn the_reference_fixtures_load_strictly() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/kronos");
        for (name, bits, group, learn_te) in
            [("k10", 10, 4, true), ("k4", 4, 4, true), ("k5g5", 5, 5, true), ("k6te", 6, 4, false)]
        {
            let dir = root.join(name);
            let ck = KronosCheckpoint::load(&dir.join("predictor"), &dir.join("tokenizer"))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let c = &ck.config;
            assert_eq!(
                (c.bits(), c.tokenizer.group_size, c.predictor.learn_te),
                (bits, group, learn_te),
                "{name}"
            );
            assert_eq!(ck.predictor.names().count(), predictor_tensors(&c.predictor).len());
            assert_eq!(ck.tokenizer.names().count(), tokenizer_tensors(&c.tokenizer).len());
        }
    }

    #[test]
    fn swapped_and_mismatched_directories_say_which_is_which() {
        let (_d, p, t) = tiny();
        let e = load_err(&p, &p);
        assert!(e.contains("holds a Kronos predictor (model) config, not a tokenizer's"), "{e}");
        // a tokenizer of other bit counts
        let mut cfg = tiny_config();
        cfg.tokenizer.s1_bits = 2;
        cfg.tokenizer.s2_bits = 2;
        write_dir(&t, &cfg.tokenizer, &tokenizer_stored(&cfg.tokenizer, 3)).unwrap();
        let e = load_err(&p, &t);
        assert!(e.contains("4/4 but the tokenizer's 2/2") && e.contains("--tokenizer"), "{e}");
        // unequal halves in the predictor
        let mut text: serde_json::Value =
            serde_json::from_slice(&std::fs::read(p.join(CONFIG_FILE)).unwrap()).unwrap();
        text["s2_bits"] = 3.into();
        std::fs::write(p.join(CONFIG_FILE), text.to_string()).unwrap();
        let e = load_err(&p, &t);
        assert!(e.contains("config.json") && e.contains("s1_bits 4 ≠ s2_bits 3"), "{e}");
    }
}
