//! Random-weight Kronos checkpoints in the layout `save_pretrained` writes (a predictor directory and a tokenizer
//! directory, each `config.json` + `model.safetensors` with every stored buffer), for tests and benchmarks. The
//! weights are a pure function of (config, seed), so a test regenerates the same checkpoint anywhere and nothing
//! is committed.
//!
//! Tensor t (in [`predictor_tensors`] / [`tokenizer_tensors`] order) draws from its own SplitMix64 stream, as
//! Toto 2.0's random checkpoints do: element i is `u_i ∈ [0, 1)`, and the value, computed in f64 and rounded once:
//! * linear weights: `√3·(2u−1)/√fan_in` (unit-variance outputs); biases `0.2·(2u−1)`;
//! * RMSNorm weights: `1 + 0.3·(2u−1)` (so a norm that ignored its weight would be seen);
//! * token and time tables: `(2u−1)·√3/√d_model` (upstream's `normal(0, d^-½)` init, in variance);
//! * `rotary.inv_freq`: upstream's `1/10000^(2j/head_dim)` (the values, not random: it is a buffer);
//! * `basis`, `group_basis`: upstream's bit weights (i64).

use std::io::{BufWriter, Write};
use std::path::Path;

use crate::error::{Error, Result};
use crate::fsutil::write_atomic;
use crate::kronos::checkpoint::{predictor_tensors, tokenizer_tensors, Expected};
use crate::kronos::config::{KronosConfig, PredictorConfig, TokenizerConfig};
use crate::safetensors::{CONFIG_FILE, SAFETENSORS_FILE};

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output function.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Tensor `t`'s uniforms in [0, 1) for `seed`.
fn uniforms(seed: u64, t: usize, n: usize) -> impl Iterator<Item = f64> {
    let state = mix64(seed.wrapping_mul(1 << 32).wrapping_add(t as u64));
    (0..n as u64)
        .map(move |i| (mix64(state.wrapping_add(GOLDEN.wrapping_mul(i + 1))) >> 11) as f64 * 2f64.powi(-53))
}

/// One stored tensor's little-endian bytes.
fn tensor_bytes(e: &Expected, seed: u64, t: usize, d_model: usize) -> Vec<u8> {
    let n: usize = e.shape.iter().product();
    if e.dtype == "I64" {
        return (0..n).rev().flat_map(|j| (1i64 << j).to_le_bytes()).collect();
    }
    let name = e.name.as_str();
    let sqrt3 = 3f64.sqrt();
    let values: Vec<f64> = if name.ends_with(".inv_freq") {
        let hd = 2 * n;
        (0..n).map(|j| 1.0 / 10000f64.powf((2 * j) as f64 / hd as f64)).collect()
    } else if name.ends_with("norm.weight") || name.contains(".norm1.") || name.contains(".norm2.") {
        uniforms(seed, t, n).map(|u| 1.0 + 0.3 * (2.0 * u - 1.0)).collect()
    } else if name.ends_with(".bias") {
        uniforms(seed, t, n).map(|u| 0.2 * (2.0 * u - 1.0)).collect()
    } else if name.starts_with("embedding.emb_") || name.starts_with("time_emb.") {
        uniforms(seed, t, n).map(|u| (2.0 * u - 1.0) * sqrt3 / (d_model as f64).sqrt()).collect()
    } else {
        let fan_in = e.shape[1] as f64;
        uniforms(seed, t, n).map(|u| sqrt3 * (2.0 * u - 1.0) / fan_in.sqrt()).collect()
    };
    values.into_iter().flat_map(|v| (v as f32).to_le_bytes()).collect()
}

/// Writes a safetensors file of `tensors` (name, dtype, shape, bytes) in order.
pub fn write_safetensors(path: &Path, tensors: &[(String, &str, Vec<usize>, Vec<u8>)]) -> Result<()> {
    let mut header = serde_json::Map::new();
    let mut offset = 0usize;
    for (name, dtype, shape, bytes) in tensors {
        header.insert(
            name.clone(),
            serde_json::json!({"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + bytes.len()]}),
        );
        offset += bytes.len();
    }
    let mut h = serde_json::to_vec(&serde_json::Value::Object(header)).expect("header serialises");
    h.resize(h.len().div_ceil(8) * 8, b' ');
    let file = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    let mut w = BufWriter::new(file);
    let io = |e| Error::io(path, e);
    w.write_all(&(h.len() as u64).to_le_bytes()).map_err(io)?;
    w.write_all(&h).map_err(io)?;
    for (_, _, _, bytes) in tensors {
        w.write_all(bytes).map_err(io)?;
    }
    w.flush().map_err(io)
}

/// The tensors of one directory: (name, dtype, shape, bytes).
type Stored = Vec<(String, &'static str, Vec<usize>, Vec<u8>)>;

fn stored(expected: Vec<Expected>, seed: u64, d_model: usize) -> Stored {
    expected
        .into_iter()
        .enumerate()
        .map(|(t, e)| {
            let bytes = tensor_bytes(&e, seed, t, d_model);
            (e.name, e.dtype, e.shape, bytes)
        })
        .collect()
}

/// The predictor's tensors for `seed`.
pub fn predictor_stored(cfg: &PredictorConfig, seed: u64) -> Stored {
    stored(predictor_tensors(cfg), seed, cfg.d_model)
}

/// The tokenizer's tensors for `seed`.
pub fn tokenizer_stored(cfg: &TokenizerConfig, seed: u64) -> Stored {
    stored(tokenizer_tensors(cfg), seed.wrapping_add(1), cfg.d_model)
}

/// Writes one checkpoint directory: `config` as `config.json`, `tensors` as `model.safetensors`.
pub fn write_dir(dir: &Path, config: &impl serde::Serialize, tensors: &Stored) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let text = serde_json::to_string_pretty(config).expect("config serialises");
    write_atomic(&dir.join(CONFIG_FILE), text.as_bytes())?;
    write_safetensors(&dir.join(SAFETENSORS_FILE), tensors)
}

/// Writes a random Kronos model of `cfg`: the predictor into `predictor`, the tokenizer into `tokenizer`.
pub fn write_checkpoint(predictor: &Path, tokenizer: &Path, cfg: &KronosConfig, seed: u64) -> Result<()> {
    write_dir(predictor, &cfg.predictor, &predictor_stored(&cfg.predictor, seed))?;
    write_dir(tokenizer, &cfg.tokenizer, &tokenizer_stored(&cfg.tokenizer, seed))
}

/// A tiny Kronos model for tests: 4/4 bits (vocabularies of 16), predictor d 16, 2 layers of 2 heads, learned time
/// tables; tokenizer d 8, 2 heads, 2 encoder and 1 decoder block, group 4.
pub fn tiny_config() -> KronosConfig {
    KronosConfig::new(
        PredictorConfig {
            s1_bits: 4,
            s2_bits: 4,
            n_layers: 2,
            d_model: 16,
            n_heads: 2,
            ff_dim: 24,
            ffn_dropout_p: 0.2,
            attn_dropout_p: 0.0,
            resid_dropout_p: 0.2,
            token_dropout_p: 0.0,
            learn_te: true,
        },
        TokenizerConfig {
            d_in: 6,
            d_model: 8,
            n_heads: 2,
            ff_dim: 16,
            n_enc_layers: 3,
            n_dec_layers: 2,
            ffn_dropout_p: 0.0,
            attn_dropout_p: 0.0,
            resid_dropout_p: 0.0,
            s1_bits: 4,
            s2_bits: 4,
            beta: 0.05,
            gamma0: 1.0,
            gamma: 1.1,
            zeta: 0.05,
            group_size: 4,
        },
    )
    .expect("a valid config")
}
