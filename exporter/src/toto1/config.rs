//! Toto 1.0 model configuration (`config.json` of an HF checkpoint = `Toto.__init__` kwargs).
//!
//! Parsing is strict: unknown keys, and values toto-ts would accept but totoc cannot export faithfully (another
//! scaler or distribution class, a layer count that does not divide into space-wise blocks), are errors.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The only scaler class totoc exports (the host runs it in f64).
pub const CAUSAL_SCALER_CLS: &str = "<class 'model.scaler.CausalPatchStdMeanScaler'>";
/// The only output distribution class totoc exports.
pub const MIXTURE_STUDENT_T_CLS: &str = "<class 'model.distribution.MixtureOfStudentTsOutput'>";

/// `output_distribution_kwargs` of a Student-T mixture head.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DistributionKwargs {
    pub k_components: usize,
}

/// A validated Toto 1.0 configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    pub patch_size: usize,
    pub stride: usize,
    pub embed_dim: usize,
    pub num_layers: usize,
    pub num_heads: usize,
    pub mlp_hidden_dim: usize,
    pub dropout: f64,
    pub spacewise_every_n_layers: i64,
    pub scaler_cls: String,
    pub output_distribution_classes: Vec<String>,
    /// toto-ts's default is `true`; Toto-Open-Base-1.0 sets `false`.
    #[serde(default = "default_true")]
    pub spacewise_first: bool,
    pub output_distribution_kwargs: Option<DistributionKwargs>,
    /// Only changes the tensor layout inside toto-ts (xFormers vs SDPA); the math is the same.
    #[serde(default = "default_true")]
    pub use_memory_efficient_attention: bool,
    #[serde(default = "default_true")]
    pub stabilize_with_global: bool,
    #[serde(default = "default_exponent")]
    pub scale_factor_exponent: f64,
    /// Checkpoints saved before the xFormers SwiGLU rename; only changes which MLP names toto-ts maps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_xformers_checkpoint: Option<bool>,
}

fn default_true() -> bool {
    true
}
fn default_exponent() -> f64 {
    10.0
}

/// Which axis a transformer layer attends over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LayerKind {
    Time,
    Space,
}

impl ModelConfig {
    /// Reads and validates `config.json`.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        Self::from_json(&text).map_err(|e| e.in_file(path))
    }

    /// Parses and validates a `config.json` text.
    pub fn from_json(text: &str) -> Result<Self> {
        let cfg: ModelConfig =
            serde_json::from_str(text).map_err(|e| Error::Config { message: e.to_string() })?;
        cfg.validate()?;
        Ok(cfg)
    }

    fn validate(&self) -> Result<()> {
        let bad = |message: String| Err(Error::Config { message });
        if self.patch_size == 0 || self.embed_dim == 0 || self.num_heads == 0 || self.num_layers == 0 {
            return bad("patch_size, embed_dim, num_heads and num_layers must be positive".into());
        }
        if self.stride != self.patch_size {
            return bad(format!(
                "stride {} differs from patch_size {}: toto-ts decodes one patch per step and requires \
                 non-overlapping patches",
                self.stride, self.patch_size
            ));
        }
        if !self.embed_dim.is_multiple_of(self.num_heads) {
            return bad(format!(
                "embed_dim {} is not divisible by num_heads {}",
                self.embed_dim, self.num_heads
            ));
        }
        if !(self.embed_dim / self.num_heads).is_multiple_of(2) {
            return bad(format!(
                "head dim {} is odd: rotary embeddings rotate pairs of channels",
                self.embed_dim / self.num_heads
            ));
        }
        if self.mlp_hidden_dim == 0 {
            return bad("mlp_hidden_dim must be positive".into());
        }
        match self.spacewise_every_n_layers {
            -1 => {}
            n if n >= 1 && self.num_layers.is_multiple_of(n as usize) => {}
            n => {
                return bad(format!(
                    "spacewise_every_n_layers {n} must be -1 or a positive divisor of num_layers {}",
                    self.num_layers
                ))
            }
        }
        if self.scaler_cls != CAUSAL_SCALER_CLS {
            return bad(format!(
                "scaler_cls {:?} is not supported: totoc exports only {CAUSAL_SCALER_CLS:?}",
                self.scaler_cls
            ));
        }
        if self.output_distribution_classes.len() != 1
            || self.output_distribution_classes[0] != MIXTURE_STUDENT_T_CLS
        {
            return bad(format!(
                "output_distribution_classes {:?} is not supported: totoc exports only [{MIXTURE_STUDENT_T_CLS:?}]",
                self.output_distribution_classes
            ));
        }
        match &self.output_distribution_kwargs {
            Some(k) if k.k_components >= 1 => {}
            _ => return bad("output_distribution_kwargs.k_components must be given and positive".into()),
        }
        if !(self.scale_factor_exponent.is_finite()) {
            return bad("scale_factor_exponent must be finite".into());
        }
        Ok(())
    }

    /// Layer kinds in order, as `Transformer._get_layer_types` (toto/model/transformer.py) builds them.
    pub fn layer_kinds(&self) -> Vec<LayerKind> {
        if self.spacewise_every_n_layers == -1 {
            return vec![LayerKind::Time; self.num_layers];
        }
        let n = self.spacewise_every_n_layers as usize;
        let mut block = vec![LayerKind::Time; n - 1];
        if self.spacewise_first {
            block.insert(0, LayerKind::Space);
        } else {
            block.push(LayerKind::Space);
        }
        block.iter().copied().cycle().take(self.num_layers).collect()
    }

    /// Number of time-wise layers (each carries a KV cache).
    pub fn time_layer_count(&self) -> usize {
        self.layer_kinds().iter().filter(|k| **k == LayerKind::Time).count()
    }

    /// Student-T mixture components.
    pub fn k_components(&self) -> usize {
        self.output_distribution_kwargs.as_ref().map_or(0, |k| k.k_components)
    }

    pub fn head_dim(&self) -> usize {
        self.embed_dim / self.num_heads
    }

    /// Largest number of patches a profile may ask for. Toto has no learned positions, so the limit is numeric:
    /// the xPos scale `sbase^(±pos/512)` must stay finite in f32 (and in f16 for half-precision graphs).
    pub fn max_patches(&self) -> usize {
        // sbase_min = 0.4/1.4 ≈ 0.2857; ln(f32::MAX) ≈ 88.7 → |pos/2|/512·ln(3.5) < 88 → pos < ~72,000. Keep a
        // conservative bound that also keeps f16 graphs finite: ln(65504) ≈ 11.09 → pos/2 < 4500.
        8192
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn base_json() -> String {
        r#"{"patch_size":64,"stride":64,"embed_dim":768,"num_layers":12,"num_heads":12,"mlp_hidden_dim":3072,
        "dropout":0.1,"spacewise_every_n_layers":12,"spacewise_first":false,
        "scaler_cls":"<class 'model.scaler.CausalPatchStdMeanScaler'>",
        "output_distribution_classes":["<class 'model.distribution.MixtureOfStudentTsOutput'>"],
        "output_distribution_kwargs":{"k_components":24},"use_memory_efficient_attention":true,
        "stabilize_with_global":true,"scale_factor_exponent":10.0}"#
            .to_string()
    }

    #[test]
    fn base_layer_pattern_is_eleven_time_then_space() {
        let cfg = ModelConfig::from_json(&base_json()).unwrap();
        let kinds = cfg.layer_kinds();
        assert_eq!(kinds.len(), 12);
        assert!(kinds[..11].iter().all(|k| *k == LayerKind::Time));
        assert_eq!(kinds[11], LayerKind::Space);
        assert_eq!(cfg.time_layer_count(), 11);
    }

    #[test]
    fn spacewise_first_and_all_time() {
        let j = base_json().replace("\"spacewise_every_n_layers\":12", "\"spacewise_every_n_layers\":3");
        let j = j.replace("\"spacewise_first\":false", "\"spacewise_first\":true");
        let cfg = ModelConfig::from_json(&j).unwrap();
        let k = cfg.layer_kinds();
        assert_eq!(&k[..3], &[LayerKind::Space, LayerKind::Time, LayerKind::Time]);
        assert_eq!(cfg.time_layer_count(), 8);
        let j = base_json().replace("\"spacewise_every_n_layers\":12", "\"spacewise_every_n_layers\":-1");
        assert_eq!(ModelConfig::from_json(&j).unwrap().time_layer_count(), 12);
    }

    #[test]
    fn unknown_key_and_unsupported_classes_are_errors() {
        let j = base_json().replace("\"dropout\":0.1", "\"dropout\":0.1,\"bogus\":1");
        let e = ModelConfig::from_json(&j).unwrap_err().to_string();
        assert!(e.contains("bogus"), "{e}");
        let j = base_json().replace("CausalPatchStdMeanScaler", "StdMeanScaler");
        assert!(ModelConfig::from_json(&j).unwrap_err().to_string().contains("scaler_cls"));
        let j = base_json().replace("\"spacewise_every_n_layers\":12", "\"spacewise_every_n_layers\":5");
        assert!(ModelConfig::from_json(&j).unwrap_err().to_string().contains("divisor"));
    }
}
