//! Random-weight Toto 2.0 checkpoints in the Hugging Face layout, bit-identical to
//! `tests/reference/make_toto2_checkpoints.py`: the weights are a pure function of (config, seed), so tests,
//! benchmarks and the reference harness regenerate the same checkpoint anywhere and no weights are committed.
//!
//! Tensor t (in [`expected_tensors`] order) draws from its own SplitMix64 stream: its state is
//! `mix64(seed·2³² + t)`, element i is `u_i = (mix64(state + (i+1)·0x9E3779B97F4A7C15) >> 11)·2⁻⁵³`, and the
//! value is computed in f64 and rounded once to f32:
//! * weights (u-μP multiplies each Linear by 1/√fan_in at run time): `√3·(2u−1)`, unit variance;
//! * the head's readouts (`linear2`, `skip_proj`, scaled by 1/fan_in): `√fan_in·√3·(2u−1)`;
//! * biases: `0.5·(2u−1)/s`, s the layer's forward scale, so each bias moves its output by up to ±0.5;
//! * `attn_tau`/`mlp_tau`: `0.2 + 1.3u`; `attn._pds.per_dim_scale`: `2u − 1`.
//!
//! [`weights_sha256`] (sha256 over each tensor's name, a NUL byte and its little-endian f32 bytes, in order) is
//! what `tests/fixtures/toto2/provenance.json` records, so a test proves it regenerated the reference's weights.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::fsutil::write_atomic;
use crate::safetensors::{CONFIG_FILE, SAFETENSORS_FILE};
use crate::toto2::checkpoint::{expected_tensors, INDEX_FILE};
use crate::toto2::config::Toto2Config;

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output function.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// How a tensor's uniforms become values.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Weight,
    Readout { fan_in: usize },
    Bias { scale: f64 },
    Tau,
    PerDimScale,
}

/// The head's readout layers (`LinearReadout`: forward scale 1/fan_in instead of 1/√fan_in).
fn is_readout(prefix: &str) -> bool {
    prefix.starts_with("output_head.") && (prefix.ends_with(".linear2") || prefix.ends_with(".skip_proj"))
}

fn kind_of(name: &str, shapes: &[(String, Vec<usize>)]) -> Kind {
    if name.ends_with("_tau") {
        return Kind::Tau;
    }
    if name.ends_with(".per_dim_scale") {
        return Kind::PerDimScale;
    }
    let (prefix, leaf) = name.rsplit_once('.').unwrap_or((name, ""));
    let fan_in = shapes.iter().find(|(n, _)| *n == format!("{prefix}.weight")).map_or(1, |(_, s)| s[1]);
    match (leaf, is_readout(prefix)) {
        ("bias", true) => Kind::Bias { scale: 1.0 / fan_in as f64 },
        ("bias", false) => Kind::Bias { scale: 1.0 / (fan_in as f64).sqrt() },
        (_, true) => Kind::Readout { fan_in },
        _ => Kind::Weight,
    }
}

/// The values of tensor number `t` (`n` elements) for `seed`.
fn values(kind: Kind, seed: u64, t: usize, n: usize) -> Vec<f32> {
    let state = mix64(seed.wrapping_mul(1 << 32).wrapping_add(t as u64));
    let sqrt3 = 3f64.sqrt();
    (0..n as u64)
        .map(|i| {
            let z = mix64(state.wrapping_add(GOLDEN.wrapping_mul(i + 1)));
            let u = (z >> 11) as f64 * 2f64.powi(-53);
            let v = match kind {
                Kind::Weight => sqrt3 * (2.0 * u - 1.0),
                Kind::Readout { fan_in } => (fan_in as f64).sqrt() * sqrt3 * (2.0 * u - 1.0),
                Kind::Bias { scale } => 0.5 * (2.0 * u - 1.0) / scale,
                Kind::Tau => 0.2 + 1.3 * u,
                Kind::PerDimScale => 2.0 * u - 1.0,
            };
            v as f32
        })
        .collect()
}

/// Every tensor of the checkpoint: (name, shape, values), in [`expected_tensors`] order.
pub fn tensors(cfg: &Toto2Config, seed: u64) -> impl Iterator<Item = (String, Vec<usize>, Vec<f32>)> {
    let shapes = expected_tensors(cfg);
    let kinds: Vec<Kind> = shapes.iter().map(|(n, _)| kind_of(n, &shapes)).collect();
    shapes.into_iter().zip(kinds).enumerate().map(move |(t, ((name, shape), kind))| {
        let n = shape.iter().product();
        (name, shape, values(kind, seed, t, n))
    })
}

/// The digest `make_toto2_checkpoints.py` prints and provenance records (see the module docs).
pub fn weights_sha256(cfg: &Toto2Config, seed: u64) -> String {
    let mut h = Sha256::new();
    for (name, _, vals) in tensors(cfg, seed) {
        h.update(name.as_bytes());
        h.update([0u8]);
        for v in vals {
            h.update(v.to_le_bytes());
        }
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes `dir/config.json` (the given text) and the weights, in one file or in `shards` files plus
/// `model.safetensors.index.json` (tensors split into runs of equal count, as the Python generator does).
/// Tensors are generated and streamed one at a time, so a 313m checkpoint needs no more memory than its
/// largest tensor. Each file is written to a temp name and renamed.
pub fn write_checkpoint(dir: &Path, config_json: &str, seed: u64, shards: usize) -> Result<()> {
    let cfg = Toto2Config::from_json(config_json)?;
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    write_atomic(&dir.join(CONFIG_FILE), config_json.as_bytes())?;
    let shapes = expected_tensors(&cfg);
    let shards = shards.max(1);
    let per = shapes.len().div_ceil(shards);
    let mut all = tensors(&cfg, seed);
    let mut weight_map = serde_json::Map::new();
    let mut total = 0usize;
    for (k, part) in shapes.chunks(per).enumerate() {
        let file = if shards == 1 {
            SAFETENSORS_FILE.to_string()
        } else {
            format!("model-{:05}-of-{shards:05}.safetensors", k + 1)
        };
        let items: Vec<_> = all.by_ref().take(part.len()).collect();
        for (name, _, v) in &items {
            weight_map.insert(name.clone(), serde_json::Value::String(file.clone()));
            total += v.len() * 4;
        }
        write_safetensors(&dir.join(&file), &items)?;
    }
    if shards > 1 {
        let index = serde_json::json!({"metadata": {"total_size": total}, "weight_map": weight_map});
        let text = serde_json::to_string_pretty(&index).expect("index serialises") + "\n";
        write_atomic(&dir.join(INDEX_FILE), text.as_bytes())?;
    }
    Ok(())
}

/// One safetensors file (F32, `__metadata__ {"format": "pt"}`, data in the given order).
pub fn write_safetensors(path: &Path, items: &[(String, Vec<usize>, Vec<f32>)]) -> Result<()> {
    let mut header = serde_json::Map::new();
    header.insert("__metadata__".into(), serde_json::json!({"format": "pt"}));
    let mut offset = 0usize;
    for (name, shape, v) in items {
        let end = offset + v.len() * 4;
        header.insert(
            name.clone(),
            serde_json::json!({"dtype": "F32", "shape": shape, "data_offsets": [offset, end]}),
        );
        offset = end;
    }
    let mut h = serde_json::to_vec(&header).expect("header serialises");
    h.resize(h.len().div_ceil(8) * 8, b' ');
    let tmp = path.with_extension("safetensors.partial");
    let io = |e| Error::io(path, e);
    let res = (|| -> std::io::Result<()> {
        let mut w = BufWriter::with_capacity(1 << 20, File::create(&tmp)?);
        w.write_all(&(h.len() as u64).to_le_bytes())?;
        w.write_all(&h)?;
        for (_, _, v) in items {
            for x in v {
                w.write_all(&x.to_le_bytes())?;
            }
        }
        w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = res {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::toto2::config::tests::config_4m_json;

    #[test]
    fn splitmix_matches_the_reference_sequence() {
        // SplitMix64 seeded with 0: the first outputs of the published reference implementation.
        let first: Vec<u64> = (1..=3u64).map(|i| mix64(GOLDEN.wrapping_mul(i))).collect();
        assert_eq!(first, [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]);
    }

    /// The reference harness's digest of the committed `small` fixture config (provenance.json).
    #[test]
    fn regenerates_the_reference_weights() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/toto2");
        let prov: serde_json::Value =
            serde_json::from_slice(&std::fs::read(root.join("provenance.json")).unwrap()).unwrap();
        let p = &prov["checkpoints"]["small"];
        let cfg = Toto2Config::from_json(&std::fs::read_to_string(root.join("small/config.json")).unwrap())
            .unwrap();
        assert_eq!(weights_sha256(&cfg, p["seed"].as_u64().unwrap()), p["weights_sha256"].as_str().unwrap());
        assert_ne!(weights_sha256(&cfg, 1), p["weights_sha256"].as_str().unwrap());
    }

    #[test]
    fn kinds_follow_the_layer_roles() {
        let cfg = Toto2Config::from_json(&config_4m_json()).unwrap();
        let shapes = expected_tensors(&cfg);
        let k = |n: &str| kind_of(n, &shapes);
        assert_eq!(k("patch_proj.linear1.weight"), Kind::Weight);
        assert_eq!(k("patch_proj.linear1.bias"), Kind::Bias { scale: 1.0 / 8.0 });
        assert_eq!(k("output_head.param_projection.proj.linear2.weight"), Kind::Readout { fan_in: 1024 });
        assert_eq!(k("output_head.param_projection.proj.skip_proj.bias"), Kind::Bias { scale: 1.0 / 256.0 });
        assert_eq!(k("transformer.layers.2.mlp_tau"), Kind::Tau);
        assert_eq!(k("transformer.layers.2.attn._pds.per_dim_scale"), Kind::PerDimScale);
        let taus: Vec<f32> =
            tensors(&cfg, 1).filter(|(n, _, _)| n.ends_with("_tau")).flat_map(|t| t.2).collect();
        assert_eq!(taus.len(), 8);
        assert!(taus.iter().all(|&t| (0.2..1.5).contains(&t)));
    }
}
