//! Strict loading of a Toto 1.0 HF checkpoint directory (`config.json` + `model.safetensors`).
//!
//! toto-ts loads with `strict=False`, so a mis-named tensor silently stays random
//! (toto/model/toto.py:114-118). [`Checkpoint::load`] instead requires exactly the tensors the config
//! implies ([`expected_tensors`]), with their shapes and dtype F32, and validates the safetensors layout itself
//! (header bounds, offsets, overlaps, truncation) so a damaged file is an error naming the file and tensor,
//! never a panic.
//!
//! Tensors are addressed by their *canonical* name, the torch-fallback name of toto-ts
//! (`model.transformer.layers.3.mlp.0.weight`). The released checkpoint was trained with xFormers and stores
//! the SwiGLU MLP as `mlp.0.w12.*` / `mlp.0.w3.*`; both spellings are accepted, as
//! `Toto._map_state_dict_keys` (toto/model/toto.py:158-184) does. [`Checkpoint::tensor`] returns a zero-copy
//! [`TensorView`] into the memory-mapped file.

use std::collections::HashMap;
use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use memmap2::Mmap;

use super::config::ModelConfig;
use crate::error::{Error, Result};
use crate::fsutil::{sha256_bytes, sha256_file};
use crate::manifest::CheckpointInfo;
use crate::safetensors::{parse_safetensors, StoredTensor, TensorView, CONFIG_FILE, SAFETENSORS_FILE};

/// Label tensors of fine-tuned checkpoints with exogenous variables (toto/model/backbone.py:256-266).
const EXOGENOUS_LABELS: [&str; 2] = ["model.target_variate_label", "model.exogenous_variate_label"];
/// Suffixes of RoPE buffers that toto-ts recomputes and drops when loading (toto/model/toto.py:117).
const IGNORED_SUFFIXES: [&str; 2] = ["rotary_emb.freqs", "rotary_emb.scale"];
/// xFormers fused SwiGLU names → torch-fallback names (toto/model/toto.py:170-176).
const XFORMERS_RENAMES: [(&str, &str); 2] = [(".mlp.0.w12.", ".mlp.0."), (".mlp.0.w3.", ".mlp.2.")];

/// Canonical names and shapes of every tensor a checkpoint of `cfg` must hold, in module order.
///
/// Space-wise and time-wise layers have the same tensors. The base model has 132.
pub fn expected_tensors(cfg: &ModelConfig) -> Vec<(String, Vec<usize>)> {
    let (d, p, mlp, k) = (cfg.embed_dim, cfg.patch_size, cfg.mlp_hidden_dim, cfg.k_components());
    let mut v = Vec::with_capacity(12 + 10 * cfg.num_layers);
    linear(&mut v, "model.patch_embed.projection", d, p);
    for i in 0..cfg.num_layers {
        let l = format!("model.transformer.layers.{i}");
        v.push((format!("{l}.norm1.scale"), vec![d]));
        v.push((format!("{l}.norm2.scale"), vec![d]));
        linear(&mut v, &format!("{l}.attention.wQKV"), 3 * d, d);
        linear(&mut v, &format!("{l}.attention.wO"), d, d);
        // SwiGLU: the first linear yields gate and value halves (toto/model/feed_forward.py).
        linear(&mut v, &format!("{l}.mlp.0"), 2 * mlp, d);
        linear(&mut v, &format!("{l}.mlp.2"), d, mlp);
    }
    linear(&mut v, "model.unembed", d * p, d);
    for head in ["df", "loc_proj", "scale_proj", "mixture_weights"] {
        linear(&mut v, &format!("model.output_distribution.{head}"), k, d);
    }
    v
}

/// A torch `Linear(inp → out)`: weight `[out, inp]`, bias `[out]`.
fn linear(v: &mut Vec<(String, Vec<usize>)>, prefix: &str, out: usize, inp: usize) {
    v.push((format!("{prefix}.weight"), vec![out, inp]));
    v.push((format!("{prefix}.bias"), vec![out]));
}

/// The canonical (torch-fallback) name of a name as stored in the file.
fn canonical_name(stored: &str) -> String {
    XFORMERS_RENAMES
        .iter()
        .find(|(from, _)| stored.contains(from))
        .map_or_else(|| stored.to_string(), |(from, to)| stored.replacen(from, to, 1))
}

/// One validated tensor: canonical name, shape and byte range in the mmap.
#[derive(Debug)]
struct Entry {
    name: String,
    shape: Vec<usize>,
    range: Range<usize>,
}

/// A loaded, fully validated checkpoint. Tensor data stays in the memory-mapped file.
pub struct Checkpoint {
    pub config: ModelConfig,
    dir: PathBuf,
    mmap: Mmap,
    /// In [`expected_tensors`] order.
    entries: Vec<Entry>,
    index: HashMap<String, usize>,
    config_sha256: String,
    /// Hashing 600 MB takes seconds, so it is done on the first [`Checkpoint::info`] call only.
    safetensors_sha256: OnceLock<String>,
}

impl std::fmt::Debug for Checkpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkpoint").field("dir", &self.dir).field("tensors", &self.entries.len()).finish()
    }
}

impl Checkpoint {
    /// Loads `dir/config.json` and `dir/model.safetensors`, checking that the file holds exactly the tensors
    /// the config implies, with the right shapes and dtype F32.
    pub fn load(dir: &Path) -> Result<Checkpoint> {
        let config_path = dir.join(CONFIG_FILE);
        let config = ModelConfig::from_file(&config_path)?;
        let config_sha256 = sha256_file(&config_path)?;
        let path = dir.join(SAFETENSORS_FILE);
        let file = File::open(&path).map_err(|e| Error::io(&path, e))?;
        // SAFETY: the map is read-only and private to this process. Like every mmap-based loader
        // (safetensors, candle) we assume the file is not truncated or rewritten while the Checkpoint lives.
        let mmap = unsafe { Mmap::map(&file) }.map_err(|e| Error::io(&path, e))?;
        let stored = parse_safetensors(&path, &mmap)?;
        let entries = match_expected(&config, stored).map_err(|e| e.in_file(&path))?;
        let index = entries.iter().enumerate().map(|(i, e)| (e.name.clone(), i)).collect();
        Ok(Checkpoint {
            config,
            dir: dir.to_path_buf(),
            mmap,
            entries,
            index,
            config_sha256,
            safetensors_sha256: OnceLock::new(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// sha256 of both checkpoint files, for the bundle manifest. The safetensors hash is of the mapped bytes,
    /// i.e. exactly the weights that were exported.
    pub fn info(&self) -> CheckpointInfo {
        CheckpointInfo {
            safetensors_sha256: self.safetensors_sha256.get_or_init(|| sha256_bytes(&self.mmap)).clone(),
            config_sha256: self.config_sha256.clone(),
            tokenizer: None,
        }
    }

    /// The tensor with the given canonical name (see [`expected_tensors`]).
    pub fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        let i = *self.index.get(name).ok_or_else(|| Error::UnknownTensor { name: name.to_string() })?;
        Ok(self.view(&self.entries[i]))
    }

    /// Every tensor, in [`expected_tensors`] order.
    pub fn tensors(&self) -> impl Iterator<Item = TensorView<'_>> {
        self.entries.iter().map(|e| self.view(e))
    }

    fn view<'a>(&'a self, e: &'a Entry) -> TensorView<'a> {
        TensorView { name: &e.name, shape: &e.shape, bytes: &self.mmap[e.range.clone()] }
    }
}

// --- matching against the config

/// Maps the stored tensors onto [`expected_tensors`]: labels of exogenous-variable fine-tunes, unexpected and
/// missing tensors, shapes and dtypes are checked in that order.
fn match_expected(cfg: &ModelConfig, stored: Vec<StoredTensor>) -> Result<Vec<Entry>> {
    let labels: Vec<String> = stored
        .iter()
        .filter(|t| EXOGENOUS_LABELS.contains(&t.name.as_str()))
        .map(|t| t.name.clone())
        .collect();
    if !labels.is_empty() {
        return Err(Error::ExogenousLabels { names: labels });
    }
    let expected = expected_tensors(cfg);
    let mut by_canonical: HashMap<String, StoredTensor> = HashMap::with_capacity(stored.len());
    let mut unexpected = Vec::new();
    for t in stored {
        if IGNORED_SUFFIXES.iter().any(|s| t.name.ends_with(s)) {
            continue;
        }
        let canonical = canonical_name(&t.name);
        if let Some(first) = by_canonical.get(&canonical) {
            let (first, second) = (first.name.clone(), t.name);
            return Err(Error::DuplicateTensor { canonical, first, second });
        }
        if !expected.iter().any(|(n, _)| *n == canonical) {
            unexpected.push(t.name.clone());
        }
        by_canonical.insert(canonical, t);
    }
    if !unexpected.is_empty() {
        unexpected.sort();
        return Err(Error::UnexpectedTensors { names: unexpected });
    }
    let mut entries = Vec::with_capacity(expected.len());
    for (name, shape) in expected {
        let t = by_canonical
            .remove(&name)
            .ok_or_else(|| Error::MissingTensor { name: name.clone(), expected: shape.clone() })?;
        if t.shape != shape {
            return Err(Error::TensorShape { name: t.name, expected: shape, actual: t.shape });
        }
        if t.dtype != "F32" {
            return Err(Error::TensorDtype {
                name: t.name,
                expected: "F32 (totoc needs the f32 checkpoint as released)".into(),
                actual: t.dtype,
            });
        }
        entries.push(Entry { name, shape, range: t.range });
    }
    Ok(entries)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `config.json` of Toto-Open-Base-1.0 (toto-model.md §2).
    pub(crate) fn base_config() -> ModelConfig {
        ModelConfig::from_json(&config_json(64, 768, 12, 12, 3072, 12, 24)).unwrap()
    }

    /// The configs of `tests/fixtures/{tiny,tiny64}`: patch 16 → D 64, 4 layers [T,T,T,S], K 4; patch 64 →
    /// D 32, 2 layers [T,S], K 3.
    pub(crate) fn tiny_config(patch: usize) -> ModelConfig {
        let json = match patch {
            64 => config_json(64, 32, 2, 2, 64, 2, 3),
            _ => config_json(patch, 64, 4, 4, 128, 4, 4),
        };
        ModelConfig::from_json(&json).unwrap()
    }

    fn config_json(
        p: usize,
        d: usize,
        layers: usize,
        heads: usize,
        mlp: usize,
        every: usize,
        k: usize,
    ) -> String {
        format!(
            r#"{{"patch_size":{p},"stride":{p},"embed_dim":{d},"num_layers":{layers},"num_heads":{heads},
            "mlp_hidden_dim":{mlp},"dropout":0.1,"spacewise_every_n_layers":{every},"spacewise_first":false,
            "scaler_cls":"<class 'model.scaler.CausalPatchStdMeanScaler'>",
            "output_distribution_classes":["<class 'model.distribution.MixtureOfStudentTsOutput'>"],
            "output_distribution_kwargs":{{"k_components":{k}}},"use_memory_efficient_attention":true,
            "stabilize_with_global":true,"scale_factor_exponent":10.0}}"#
        )
    }

    /// A very small config so test files stay tiny: 2 layers, D 8, patch 4, K 2.
    fn mini_json() -> String {
        config_json(4, 8, 2, 2, 6, 2, 2)
    }

    /// A tensor to write: stored name, dtype, shape.
    type Spec = (String, &'static str, Vec<usize>);

    /// The expected tensors of `mini_json`, with the MLP under xFormers names if `xformers`.
    fn mini_specs(xformers: bool) -> Vec<Spec> {
        let cfg = ModelConfig::from_json(&mini_json()).unwrap();
        let rename = |n: String| {
            if !xformers {
                return n;
            }
            n.replacen(".mlp.0.", ".mlp.0.w12.", 1).replacen(".mlp.2.", ".mlp.0.w3.", 1)
        };
        expected_tensors(&cfg).into_iter().map(|(n, s)| (rename(n), "F32", s)).collect()
    }

    /// Serializes tensors in safetensors layout; element `j` of the `i`-th tensor holds `i + j/1000`.
    fn safetensors_bytes(specs: &[Spec]) -> Vec<u8> {
        let mut header = serde_json::Map::new();
        header.insert("__metadata__".into(), serde_json::json!({"format": "pt"}));
        let mut data = Vec::new();
        for (i, (name, dtype, shape)) in specs.iter().enumerate() {
            let numel: usize = shape.iter().product();
            let begin = data.len();
            for j in 0..numel {
                let x = i as f32 + j as f32 / 1000.0;
                match *dtype {
                    "F32" => data.extend_from_slice(&x.to_le_bytes()),
                    _ => data.extend_from_slice(&half::f16::from_f32(x).to_le_bytes()),
                }
            }
            let entry =
                serde_json::json!({"dtype": dtype, "shape": shape, "data_offsets": [begin, data.len()]});
            header.insert(name.clone(), entry);
        }
        let mut h = serde_json::to_vec(&header).unwrap();
        h.resize(h.len().div_ceil(8) * 8, b' ');
        let mut out = (h.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(&h);
        out.extend_from_slice(&data);
        out
    }

    fn write_dir(safetensors: &[u8]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(CONFIG_FILE), mini_json()).unwrap();
        std::fs::write(dir.path().join(SAFETENSORS_FILE), safetensors).unwrap();
        dir
    }

    fn load_specs(specs: &[Spec]) -> Result<Checkpoint> {
        let dir = write_dir(&safetensors_bytes(specs));
        Checkpoint::load(dir.path())
    }

    fn load_err(specs: &[Spec]) -> String {
        load_specs(specs).unwrap_err().to_string()
    }

    #[test]
    fn base_model_has_132_tensors_and_151m_parameters() {
        let t = expected_tensors(&base_config());
        assert_eq!(t.len(), 132);
        let params: usize = t.iter().map(|(_, s)| s.iter().product::<usize>()).sum();
        assert_eq!(params, 151_306_080);
        assert_eq!(expected_tensors(&tiny_config(16)).len(), 52);
    }

    #[test]
    fn loads_both_mlp_naming_styles() {
        for xformers in [false, true] {
            let dir = write_dir(&safetensors_bytes(&mini_specs(xformers)));
            let ck = Checkpoint::load(dir.path()).unwrap();
            let w = ck.tensor("model.transformer.layers.1.mlp.2.weight").unwrap();
            assert_eq!(w.name, "model.transformer.layers.1.mlp.2.weight");
            assert_eq!(w.shape, &[8, 6]);
            // Module order puts layer 1's mlp.2.weight at index 2 + 10 + 8.
            let expected: Vec<f32> = (0..48).map(|j| 20.0 + j as f32 / 1000.0).collect();
            assert_eq!(w.to_f32_vec(), expected);
            assert_eq!(ck.tensors().count(), 32);
            let info = ck.info();
            assert_eq!(info.config_sha256, sha256_bytes(mini_json().as_bytes()));
            assert_eq!(info.safetensors_sha256, sha256_file(&ck.dir().join(SAFETENSORS_FILE)).unwrap());
            assert!(ck.tensor("model.transformer.layers.1.mlp.0.w3.weight").is_err());
        }
    }

    #[test]
    fn rope_buffers_are_ignored() {
        let mut specs = mini_specs(true);
        specs.push(("model.transformer.rotary_emb.freqs".into(), "F32", vec![4]));
        specs.push(("model.transformer.layers.0.attention.rotary_emb.scale".into(), "F32", vec![4]));
        load_specs(&specs).unwrap();
    }

    #[test]
    fn missing_tensor_is_named_with_shape() {
        let mut specs = mini_specs(false);
        specs.retain(|(n, _, _)| n != "model.transformer.layers.1.attention.wO.bias");
        let e = load_err(&specs);
        assert!(
            e.contains("model.safetensors") && e.contains("`model.transformer.layers.1.attention.wO.bias`"),
            "{e}"
        );
        assert!(e.contains("missing") && e.contains("[8]"), "{e}");
    }

    #[test]
    fn extra_tensors_are_listed() {
        let mut specs = mini_specs(false);
        specs.push(("model.transformer.layers.2.norm1.scale".into(), "F32", vec![8]));
        let e = load_err(&specs);
        assert!(e.contains("unexpected") && e.contains("model.transformer.layers.2.norm1.scale"), "{e}");
    }

    #[test]
    fn both_mlp_names_at_once_is_an_error() {
        let mut specs = mini_specs(false);
        specs.push(("model.transformer.layers.0.mlp.0.w12.bias".into(), "F32", vec![12]));
        let e = load_err(&specs);
        assert!(e.contains("`model.transformer.layers.0.mlp.0.bias`") && e.contains("mlp.0.w12.bias"), "{e}");
    }

    #[test]
    fn wrong_shape_is_named() {
        let mut specs = mini_specs(true);
        let i = specs.iter().position(|(n, _, _)| n == "model.unembed.weight").unwrap();
        specs[i].2 = vec![8, 32];
        let e = load_err(&specs);
        assert!(
            e.contains("`model.unembed.weight`") && e.contains("[8, 32]") && e.contains("[32, 8]"),
            "{e}"
        );
    }

    #[test]
    fn f16_dtype_is_rejected() {
        let specs: Vec<Spec> = mini_specs(true).into_iter().map(|(n, _, s)| (n, "F16", s)).collect();
        let e = load_err(&specs);
        assert!(e.contains("`model.patch_embed.projection.weight`") && e.contains("F16"), "{e}");
        assert!(e.contains("f32 checkpoint as released"), "{e}");
    }

    #[test]
    fn truncated_file_names_the_cut_tensor() {
        let specs = mini_specs(true);
        let mut bytes = safetensors_bytes(&specs);
        bytes.truncate(bytes.len() - 3);
        let dir = write_dir(&bytes);
        let e = Checkpoint::load(dir.path()).unwrap_err().to_string();
        // The last tensor in file order is the last one written.
        let last = &specs.last().unwrap().0;
        assert!(e.contains(&format!("`{last}`")) && e.contains("truncated"), "{e}");
        assert!(e.contains("re-download or re-save"), "{e}");
    }

    #[test]
    fn garbage_header_length_and_json_are_errors() {
        let mut bytes = safetensors_bytes(&mini_specs(true));
        bytes[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        let e = Checkpoint::load(write_dir(&bytes).path()).unwrap_err().to_string();
        assert!(e.contains("model.safetensors") && e.contains("header length"), "{e}");
        let mut bytes = safetensors_bytes(&mini_specs(true));
        bytes[8] = b'[';
        let e = Checkpoint::load(write_dir(&bytes).path()).unwrap_err().to_string();
        assert!(e.contains("not a JSON object"), "{e}");
        let e = Checkpoint::load(write_dir(b"abc").path()).unwrap_err().to_string();
        assert!(e.contains("shorter than"), "{e}");
    }

    #[test]
    fn overlapping_and_oversized_ranges_are_errors() {
        let specs = mini_specs(true);
        let good = safetensors_bytes(&specs);
        let n = u64::from_le_bytes(good[..8].try_into().unwrap()) as usize;
        let edit = |from: &str, to: &str| {
            let header = std::str::from_utf8(&good[8..8 + n]).unwrap().replacen(from, to, 1);
            let mut b = (header.len() as u64).to_le_bytes().to_vec();
            b.extend_from_slice(header.as_bytes());
            b.extend_from_slice(&good[8 + n..]);
            Checkpoint::load(write_dir(&b).path()).unwrap_err().to_string()
        };
        // The first tensor written (patch_embed weight, 32 floats) claims one float less.
        let e = edit("\"data_offsets\":[0,128]", "\"data_offsets\":[0,124]");
        assert!(e.contains("`model.patch_embed.projection.weight`") && e.contains("needs 128"), "{e}");
        // The bias (8 floats at 128..160) is moved back onto the weight.
        let e = edit("\"data_offsets\":[128,160]", "\"data_offsets\":[96,128]");
        assert!(e.contains("`model.patch_embed.projection.bias`") && e.contains("overlaps"), "{e}");
        let e = edit("\"data_offsets\":[128,160]", "\"data_offsets\":[128,99999999]");
        assert!(e.contains("`model.patch_embed.projection.bias`") && e.contains("outside"), "{e}");
    }

    #[test]
    fn exogenous_labels_are_not_supported() {
        let mut specs = mini_specs(true);
        specs.push(("model.target_variate_label".into(), "F32", vec![8]));
        let e = load_err(&specs);
        assert!(e.contains("model.target_variate_label") && e.contains("not supported"), "{e}");
    }
}
