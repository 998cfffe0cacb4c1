//! Strict loading of a Toto 2.0 checkpoint directory: `config.json` plus either `model.safetensors` or a sharded
//! `model.safetensors.index.json` with its shard files (the two layouts `Toto2Model._from_pretrained` reads).
//!
//! toto-2 loads the weights with `strict=True` but drops unknown config keys; totoc is strict about both: the
//! files must hold exactly the tensors [`expected_tensors`] lists for the config, as F32 with those shapes, and
//! a sharded index must name every tensor's shard correctly. Each safetensors file is validated the way the
//! Toto 1.0 loader does (`crate::checkpoint`: header bounds, offsets, overlaps, truncation) and memory-mapped;
//! [`Toto2Checkpoint::tensor`] returns a zero-copy view.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use memmap2::Mmap;
use serde::Deserialize;

use crate::error::{Error, Result};
use crate::fsutil::sha256_bytes;
use crate::manifest::CheckpointInfo;
use crate::safetensors::{parse_safetensors, TensorView, CONFIG_FILE, SAFETENSORS_FILE};
use crate::toto2::config::{Toto2Config, Toto2LayerKind};

/// The index of a sharded checkpoint (Hugging Face `save_torch_state_dict` layout).
pub const INDEX_FILE: &str = "model.safetensors.index.json";

/// Names and shapes of every tensor a checkpoint of `cfg` must hold, in module order (the τ buffers are 0-d).
///
/// The published 4m config has 48 tensors and 4,144,448 parameters (+ 8 τ scalars).
pub fn expected_tensors(cfg: &Toto2Config) -> Vec<(String, Vec<usize>)> {
    let (d, p, ff) = (cfg.d_model, cfg.patch_size, cfg.d_ff);
    let (qk, v, h, g) = (cfg.qk_dim, cfg.v_dim, cfg.num_heads, cfg.num_groups);
    let mut out = Vec::new();
    let linear = |prefix: &str, o: usize, i: usize, bias: bool, out: &mut Vec<(String, Vec<usize>)>| {
        out.push((format!("{prefix}.weight"), vec![o, i]));
        if bias {
            out.push((format!("{prefix}.bias"), vec![o]));
        }
    };
    linear("patch_proj.linear1", 4 * d, 2 * p, true, &mut out);
    linear("patch_proj.linear2", d, 4 * d, true, &mut out);
    linear("patch_proj.skip_proj", d, 2 * p, true, &mut out);
    for (i, _) in cfg.layer_kinds().iter().enumerate() {
        let l = format!("transformer.layers.{i}");
        out.push((format!("{l}.attn_tau"), vec![]));
        out.push((format!("{l}.mlp_tau"), vec![]));
        linear(&format!("{l}.attn.in_proj"), qk * h + qk * g + v * g, d, cfg.attn_bias, &mut out);
        linear(&format!("{l}.attn.out_proj"), d, v * h, cfg.attn_bias, &mut out);
        if cfg.per_dim_scale {
            out.push((format!("{l}.attn._pds.per_dim_scale"), vec![qk]));
        }
        linear(&format!("{l}.ffn.fc1"), 2 * ff, d, cfg.mlp_bias, &mut out);
        linear(&format!("{l}.ffn.fc2"), d, ff, cfg.mlp_bias, &mut out);
    }
    let head = "output_head.param_projection.proj";
    let q = cfg.quantiles() * p * cfg.num_output_patches;
    linear(&format!("{head}.linear1"), 4 * d, d, true, &mut out);
    linear(&format!("{head}.linear2"), q, 4 * d, true, &mut out);
    linear(&format!("{head}.skip_proj"), q, d, true, &mut out);
    out
}

/// Whether layer `i` of `cfg` is a time layer (and its index among the time layers).
pub fn time_layer_index(cfg: &Toto2Config, layer: usize) -> Option<usize> {
    let kinds = cfg.layer_kinds();
    (kinds.get(layer) == Some(&Toto2LayerKind::Time))
        .then(|| kinds[..layer].iter().filter(|k| **k == Toto2LayerKind::Time).count())
}

/// One validated tensor: name, shape, file and byte range in that file's map.
#[derive(Debug)]
struct Entry {
    name: String,
    shape: Vec<usize>,
    file: usize,
    range: Range<usize>,
}

/// A loaded, fully validated Toto 2.0 checkpoint. Tensor data stays in the memory-mapped files.
pub struct Toto2Checkpoint {
    pub config: Toto2Config,
    dir: PathBuf,
    /// The safetensors files (one, or the shards in index order) and their maps.
    files: Vec<(PathBuf, Mmap)>,
    /// In [`expected_tensors`] order.
    entries: Vec<Entry>,
    index: HashMap<String, usize>,
    config_sha256: String,
    weights_sha256: OnceLock<String>,
}

impl std::fmt::Debug for Toto2Checkpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Toto2Checkpoint")
            .field("dir", &self.dir)
            .field("files", &self.files.len())
            .field("tensors", &self.entries.len())
            .finish()
    }
}

/// `model.safetensors.index.json` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IndexFile {
    #[serde(default)]
    #[allow(dead_code)]
    metadata: serde_json::Value,
    weight_map: BTreeMap<String, String>,
}

impl Toto2Checkpoint {
    /// Loads `dir/config.json` and the weights (`model.safetensors`, or the shards of
    /// `model.safetensors.index.json`), checking that they hold exactly the tensors the config implies.
    pub fn load(dir: &Path) -> Result<Self> {
        let config_path = dir.join(CONFIG_FILE);
        let text = std::fs::read_to_string(&config_path).map_err(|e| Error::io(&config_path, e))?;
        let config = Toto2Config::from_json(&text).map_err(|e| e.in_file(&config_path))?;
        let config_sha256 = sha256_bytes(text.as_bytes());
        let (single, index) = (dir.join(SAFETENSORS_FILE), dir.join(INDEX_FILE));
        let (files, stored) = match (single.exists(), index.exists()) {
            (true, true) => {
                return Err(Error::Checkpoint {
                    message: format!(
                        "{} holds both {SAFETENSORS_FILE} and {INDEX_FILE}; keep one layout",
                        dir.display()
                    ),
                })
            }
            (true, false) => {
                let (map, tensors) = map_file(&single)?;
                let stored = tensors.into_iter().map(|t| (t, 0)).collect();
                (vec![(single, map)], stored)
            }
            (false, true) => load_shards(dir, &index)?,
            (false, false) => {
                return Err(Error::Checkpoint {
                    message: format!(
                        "{} has neither {SAFETENSORS_FILE} nor {INDEX_FILE}; a Toto 2.0 checkpoint needs its \
                         weights",
                        dir.display()
                    ),
                })
            }
        };
        let where_ = if files.len() == 1 { files[0].0.clone() } else { index.clone() };
        let entries = match_expected(&config, stored).map_err(|e| e.in_file(&where_))?;
        let index = entries.iter().enumerate().map(|(i, e)| (e.name.clone(), i)).collect();
        Ok(Toto2Checkpoint {
            config,
            dir: dir.to_path_buf(),
            files,
            entries,
            index,
            config_sha256,
            weights_sha256: OnceLock::new(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The safetensors files read (one, or every shard).
    pub fn files(&self) -> impl Iterator<Item = &Path> {
        self.files.iter().map(|(p, _)| p.as_path())
    }

    /// sha256 of `config.json` and of the weights: the file's sha256 for `model.safetensors`; for shards, the
    /// sha256 of the lines `<shard file> <its sha256>\n` in index order.
    pub fn info(&self) -> CheckpointInfo {
        let weights = self.weights_sha256.get_or_init(|| {
            if self.files.len() == 1 {
                return sha256_bytes(&self.files[0].1);
            }
            let lines: String = self
                .files
                .iter()
                .map(|(p, m)| {
                    let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                    format!("{name} {}\n", sha256_bytes(m))
                })
                .collect();
            sha256_bytes(lines.as_bytes())
        });
        CheckpointInfo {
            safetensors_sha256: weights.clone(),
            config_sha256: self.config_sha256.clone(),
            tokenizer: None,
        }
    }

    /// The tensor `name` (a checkpoint path such as `transformer.layers.0.attn.in_proj.weight`).
    pub fn tensor(&self, name: &str) -> Result<TensorView<'_>> {
        let i = *self.index.get(name).ok_or_else(|| Error::UnknownTensor { name: name.to_string() })?;
        Ok(self.view(&self.entries[i]))
    }

    /// Whether the checkpoint has tensor `name` (optional biases and per-dim scales depend on the config).
    pub fn has(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }

    /// Every tensor, in [`expected_tensors`] order.
    pub fn tensors(&self) -> impl Iterator<Item = TensorView<'_>> {
        self.entries.iter().map(|e| self.view(e))
    }

    fn view<'a>(&'a self, e: &'a Entry) -> TensorView<'a> {
        TensorView { name: &e.name, shape: &e.shape, bytes: &self.files[e.file].1[e.range.clone()] }
    }
}

/// Maps and parses one safetensors file.
fn map_file(path: &Path) -> Result<(Mmap, Vec<crate::safetensors::StoredTensor>)> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    // SAFETY: read-only private map; like every mmap-based loader we assume the file is not rewritten while the
    // checkpoint lives.
    let map = unsafe { Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
    let tensors = parse_safetensors(path, &map)?;
    Ok((map, tensors))
}

type Shards = (Vec<(PathBuf, Mmap)>, Vec<(crate::safetensors::StoredTensor, usize)>);

/// Reads the index and every shard it names; each tensor must sit in the shard the index names for it.
fn load_shards(dir: &Path, index_path: &Path) -> Result<Shards> {
    let text = std::fs::read_to_string(index_path).map_err(|e| Error::io(index_path, e))?;
    let index: IndexFile = serde_json::from_str(&text).map_err(|e| {
        Error::Checkpoint { message: format!("not a safetensors index: {e}") }.in_file(index_path)
    })?;
    let mut shard_names: Vec<&str> = index.weight_map.values().map(String::as_str).collect();
    shard_names.sort_unstable();
    shard_names.dedup();
    let mut files = Vec::new();
    let mut stored = Vec::new();
    for (i, shard) in shard_names.iter().enumerate() {
        if shard.is_empty() || shard.contains(['/', '\\']) || *shard == "." || *shard == ".." {
            return Err(Error::Checkpoint {
                message: format!("shard name {shard:?} must be a file name inside the checkpoint directory"),
            }
            .in_file(index_path));
        }
        let path = dir.join(shard);
        let (map, tensors) = map_file(&path)?;
        for t in tensors {
            match index.weight_map.get(&t.name) {
                Some(s) if s == shard => stored.push((t, i)),
                Some(s) => {
                    return Err(Error::TensorData {
                        path,
                        name: t.name,
                        message: format!("{INDEX_FILE} maps it to shard {s}; fix the index"),
                    })
                }
                None => {
                    return Err(Error::TensorData {
                        path,
                        name: t.name,
                        message: format!("{INDEX_FILE} does not list it; add it to the index or drop it"),
                    })
                }
            }
        }
        files.push((path, map));
    }
    for (name, shard) in &index.weight_map {
        if !stored.iter().any(|(t, _)| &t.name == name) {
            return Err(Error::TensorData {
                path: dir.join(shard),
                name: name.clone(),
                message: format!("{INDEX_FILE} places it in this shard but the shard does not hold it"),
            });
        }
    }
    Ok((files, stored))
}

/// Maps the stored tensors onto [`expected_tensors`]: unexpected, missing, shapes and dtypes in that order.
fn match_expected(
    cfg: &Toto2Config,
    stored: Vec<(crate::safetensors::StoredTensor, usize)>,
) -> Result<Vec<Entry>> {
    let expected = expected_tensors(cfg);
    let mut by_name: HashMap<String, (crate::safetensors::StoredTensor, usize)> = HashMap::new();
    let mut unexpected = Vec::new();
    for (t, file) in stored {
        if !expected.iter().any(|(n, _)| *n == t.name) {
            unexpected.push(t.name.clone());
        }
        by_name.insert(t.name.clone(), (t, file));
    }
    if !unexpected.is_empty() {
        unexpected.sort();
        return Err(Error::UnexpectedTensors { names: unexpected });
    }
    let mut entries = Vec::with_capacity(expected.len());
    for (name, shape) in expected {
        let (t, file) = by_name
            .remove(&name)
            .ok_or_else(|| Error::MissingTensor { name: name.clone(), expected: shape.clone() })?;
        if t.shape != shape {
            return Err(Error::TensorShape { name: t.name, expected: shape, actual: t.shape });
        }
        if t.dtype != "F32" {
            return Err(Error::TensorDtype {
                name: t.name,
                expected: "F32 (the released Toto 2.0 checkpoints are float32)".into(),
                actual: t.dtype,
            });
        }
        entries.push(Entry { name, shape, file, range: t.range });
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::toto2::synth::{tensors, write_checkpoint, write_safetensors};

    /// A very small config so the test files stay tiny: patch 4, D 8, 2 heads of 4, 2 layers (time, variate).
    pub(crate) fn mini_json() -> String {
        r#"{"patch_size":4,"d_model":8,"num_heads":2,"num_layers":2,"layer_group_size":2,
        "num_variate_layers_per_group":1,"variate_layer_first":false,"attn_bias":true,"mlp_bias":false,
        "d_ff":8,"qk_dim":4,"v_dim":4,"num_groups":2,"residual_attn_ratio":1.0,"qk_norm":false,
        "per_dim_scale":true,"use_xpos":true,"norm_eps":0.0001}"#
            .to_string()
    }

    type Items = Vec<(String, Vec<usize>, Vec<f32>)>;

    fn items() -> Items {
        tensors(&Toto2Config::from_json(&mini_json()).unwrap(), 7).collect()
    }

    /// A checkpoint directory holding `items` in one `model.safetensors`.
    fn dir_with(items: &Items) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(CONFIG_FILE), mini_json()).unwrap();
        write_safetensors(&dir.path().join(SAFETENSORS_FILE), items).unwrap();
        dir
    }

    fn load_err(items: &Items) -> String {
        Toto2Checkpoint::load(dir_with(items).path()).unwrap_err().to_string()
    }

    #[test]
    fn published_4m_has_48_tensors_and_4_144_448_parameters() {
        let cfg = Toto2Config::from_json(&crate::toto2::config::tests::config_4m_json()).unwrap();
        let t = expected_tensors(&cfg);
        assert_eq!(t.len(), 48);
        let params: usize =
            t.iter().filter(|(_, s)| !s.is_empty()).map(|(_, s)| s.iter().product::<usize>()).sum();
        assert_eq!(params, 4_144_448);
        assert_eq!((time_layer_index(&cfg, 2), time_layer_index(&cfg, 3)), (Some(2), None));
    }

    #[test]
    fn loads_one_file_and_shards_alike() {
        let one = tempfile::tempdir().unwrap();
        write_checkpoint(one.path(), &mini_json(), 7, 1).unwrap();
        let three = tempfile::tempdir().unwrap();
        write_checkpoint(three.path(), &mini_json(), 7, 3).unwrap();
        let (a, b) =
            (Toto2Checkpoint::load(one.path()).unwrap(), Toto2Checkpoint::load(three.path()).unwrap());
        assert_eq!((a.files().count(), b.files().count()), (1, 3));
        let want = items();
        assert_eq!(a.tensors().count(), want.len());
        for ((name, shape, vals), (ta, tb)) in want.iter().zip(a.tensors().zip(b.tensors())) {
            assert_eq!((ta.name, ta.shape), (name.as_str(), shape.as_slice()));
            assert_eq!(ta.to_f32_vec(), *vals);
            assert_eq!(tb.to_f32_vec(), *vals);
        }
        assert!(a.tensor("transformer.layers.0.attn_tau").unwrap().shape.is_empty());
        assert!(!a.has("transformer.layers.0.ffn.fc1.bias"), "mlp_bias false");
        assert_eq!(a.info().config_sha256, b.info().config_sha256);
        assert_ne!(a.info().safetensors_sha256, b.info().safetensors_sha256);
    }

    #[test]
    fn missing_extra_misshaped_and_non_f32_tensors_are_named() {
        let mut v = items();
        v.retain(|(n, _, _)| n != "transformer.layers.1.attn.out_proj.bias");
        let e = load_err(&v);
        assert!(
            e.contains("`transformer.layers.1.attn.out_proj.bias`")
                && e.contains("missing")
                && e.contains("[8]"),
            "{e}"
        );
        let mut v = items();
        v.push(("transformer.layers.1.norm1.weight".into(), vec![8], vec![1.0; 8]));
        let e = load_err(&v);
        assert!(e.contains("unexpected") && e.contains("transformer.layers.1.norm1.weight"), "{e}");
        let mut v = items();
        v[0].1 = vec![64, 4];
        let e = load_err(&v);
        assert!(
            e.contains("`patch_proj.linear1.weight`") && e.contains("[64, 4]") && e.contains("[32, 8]"),
            "{e}"
        );
        // a τ stored as [1] instead of a 0-d scalar is a shape error too
        let mut v = items();
        let i = v.iter().position(|(n, _, _)| n.ends_with("layers.0.mlp_tau")).unwrap();
        v[i].1 = vec![1];
        assert!(load_err(&v).contains("`transformer.layers.0.mlp_tau` has shape [1], expected []"));
        // a non-F32 dtype: rewrite the header of the first tensor to I32 (same width, so the layout stays valid)
        let dir = dir_with(&items());
        let path = dir.path().join(SAFETENSORS_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let header = String::from_utf8(bytes[8..8 + n].to_vec()).unwrap();
        let header = header.replacen("\"F32\"", "\"I32\"", 1);
        bytes[8..8 + n].copy_from_slice(header.as_bytes());
        std::fs::write(&path, bytes).unwrap();
        let e = Toto2Checkpoint::load(dir.path()).unwrap_err().to_string();
        assert!(e.contains("dtype I32") && e.contains("float32"), "{e}");
    }

    #[test]
    fn sharded_index_faults_are_named() {
        let make = || {
            let dir = tempfile::tempdir().unwrap();
            write_checkpoint(dir.path(), &mini_json(), 7, 2).unwrap();
            dir
        };
        let index = |dir: &tempfile::TempDir| dir.path().join(INDEX_FILE);
        let edit = |dir: &tempfile::TempDir, f: &dyn Fn(&mut serde_json::Value)| {
            let mut v: serde_json::Value =
                serde_json::from_slice(&std::fs::read(index(dir)).unwrap()).unwrap();
            f(&mut v);
            std::fs::write(index(dir), serde_json::to_vec(&v).unwrap()).unwrap();
            Toto2Checkpoint::load(dir.path()).unwrap_err().to_string()
        };
        let first = "model-00001-of-00002.safetensors";
        let second = "model-00002-of-00002.safetensors";
        // a tensor of shard 1 mapped to shard 2
        let d = make();
        let e = edit(&d, &|v| v["weight_map"]["patch_proj.linear1.weight"] = second.into());
        assert!(
            e.contains("patch_proj.linear1.weight") && e.contains(&format!("maps it to shard {second}")),
            "{e}"
        );
        // a tensor the index does not list
        let d = make();
        let e = edit(&d, &|v| {
            v["weight_map"].as_object_mut().unwrap().remove("patch_proj.linear1.bias");
        });
        assert!(e.contains("patch_proj.linear1.bias") && e.contains("does not list it"), "{e}");
        // an index entry its shard does not hold
        let d = make();
        let e = edit(&d, &|v| v["weight_map"]["transformer.layers.9.attn_tau"] = first.into());
        assert!(e.contains("transformer.layers.9.attn_tau") && e.contains("does not hold it"), "{e}");
        // a shard outside the directory, a missing shard, and an unreadable index
        let d = make();
        let e = edit(&d, &|v| v["weight_map"]["patch_proj.linear1.bias"] = "../x.safetensors".into());
        assert!(e.contains("must be a file name"), "{e}");
        let d = make();
        std::fs::remove_file(d.path().join(second)).unwrap();
        let e = Toto2Checkpoint::load(d.path()).unwrap_err().to_string();
        assert!(e.contains(second), "{e}");
        let d = make();
        std::fs::write(index(&d), "{\"weights\": {}}").unwrap();
        let e = Toto2Checkpoint::load(d.path()).unwrap_err().to_string();
        assert!(e.contains(INDEX_FILE) && e.contains("not a safetensors index"), "{e}");
        // both layouts, or neither
        let d = make();
        write_safetensors(&d.path().join(SAFETENSORS_FILE), &items()).unwrap();
        assert!(Toto2Checkpoint::load(d.path()).unwrap_err().to_string().contains("keep one layout"));
        let d = make();
        std::fs::remove_file(index(&d)).unwrap();
        assert!(Toto2Checkpoint::load(d.path()).unwrap_err().to_string().contains("neither"));
    }

    /// A safetensors file past 4 GiB (2.5B is 9.8 GB): a tensor after a 4.5 GiB one is parsed, validated and
    /// viewed through the map at its real offset. The file is sparse: no 4 GiB of disk or memory.
    #[test]
    fn tensors_past_4_gib_are_mapped_at_their_offsets() {
        use std::io::{Seek, SeekFrom, Write};
        let big: usize = 9 << 27; // f32 elements: 4.5 GiB
        let header = serde_json::json!({
            "big": {"dtype": "F32", "shape": [big], "data_offsets": [0, 4 * big]},
            "small": {"dtype": "F32", "shape": [2], "data_offsets": [4 * big, 4 * big + 8]},
        });
        let mut h = serde_json::to_vec(&header).unwrap();
        h.resize(h.len().div_ceil(8) * 8, b' ');
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.safetensors");
        let mut f = File::create(&path).unwrap();
        f.write_all(&(h.len() as u64).to_le_bytes()).unwrap();
        f.write_all(&h).unwrap();
        f.seek(SeekFrom::Current(4 * big as i64)).unwrap();
        f.write_all(&[1.5f32.to_le_bytes(), (-2.0f32).to_le_bytes()].concat()).unwrap();
        drop(f);
        let (map, tensors) = map_file(&path).unwrap();
        let small = tensors.iter().find(|t| t.name == "small").unwrap();
        assert!(small.range.start > u32::MAX as usize);
        let view = TensorView { name: "small", shape: &small.shape, bytes: &map[small.range.clone()] };
        assert_eq!(view.to_f32_vec(), [1.5, -2.0]);
    }

    #[test]
    fn a_toto1_config_is_refused_naming_the_key() {
        let d = dir_with(&items());
        std::fs::write(d.path().join(CONFIG_FILE), r#"{"embed_dim": 8}"#).unwrap();
        let e = Toto2Checkpoint::load(d.path()).unwrap_err().to_string();
        assert!(e.contains("config.json") && e.contains("embed_dim"), "{e}");
    }
}
