//! Toto 2.0 model configuration: the `config.json` of a `Datadog/Toto-2.0-*` checkpoint, i.e. the fields of
//! toto-2 2.0.0's `Toto2ModelConfig` (`toto2/configuration.py`).
//!
//! toto-2 drops unknown keys silently when it loads a local checkpoint; totoc refuses them, and refuses values it
//! cannot export faithfully (query/key norms, weighted RMSNorms, several output patches per token: none of the
//! released sizes uses them). Optional fields take toto-2's defaults, and the derived ones (`d_ff`, `qk_dim`,
//! `v_dim`, `num_groups`, `heads_per_group`, `qk_norm_include_weight`) are computed as its `__post_init__`
//! does, so a parsed config always has every value; it serialises with all of them, as the released files do.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The nine quantile levels of the output head (`Toto2Model.output_head.knots`).
pub const KNOTS: [f64; 9] = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9];

/// Largest token position the rotary tables cover (`kwargs={"max_len": 8192}` of the time layers' RoPE).
pub const MAX_POSITIONS: usize = 8192;

/// A validated Toto 2.0 configuration with every derived value filled in. Deserialising validates it too (a
/// manifest can carry it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Raw")]
pub struct Toto2Config {
    pub patch_size: usize,
    pub d_model: usize,
    pub num_heads: usize,
    pub num_layers: usize,
    pub layer_group_size: usize,
    pub num_variate_layers_per_group: usize,
    pub variate_layer_first: bool,
    pub dropout_p: f64,
    pub norm_eps: f64,
    pub attn_bias: bool,
    pub mlp_bias: bool,
    pub num_output_patches: usize,
    /// Unused by toto-2's model code (it is always pre-norm); kept as given.
    pub pre_norm: bool,
    pub d_ff: usize,
    pub qk_dim: usize,
    pub v_dim: usize,
    /// Key/value heads (grouped-query attention when fewer than `num_heads`).
    pub num_groups: usize,
    pub heads_per_group: usize,
    /// Only sets the initial τ buffers; inference reads `attn_tau`/`mlp_tau` from the checkpoint.
    pub residual_mult: f64,
    pub residual_attn_ratio: f64,
    pub qk_norm: bool,
    pub norm_include_weight: bool,
    pub qk_norm_include_weight: bool,
    pub per_dim_scale: bool,
    pub use_xpos: bool,
}

/// `config.json` as written; `None` = toto-2's default or derived value.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    patch_size: usize,
    d_model: usize,
    num_heads: usize,
    num_layers: usize,
    layer_group_size: usize,
    num_variate_layers_per_group: usize,
    variate_layer_first: bool,
    dropout_p: Option<f64>,
    norm_eps: Option<f64>,
    attn_bias: Option<bool>,
    mlp_bias: Option<bool>,
    num_output_patches: Option<usize>,
    pre_norm: Option<bool>,
    d_ff: Option<usize>,
    qk_dim: Option<usize>,
    v_dim: Option<usize>,
    num_groups: Option<usize>,
    heads_per_group: Option<usize>,
    residual_mult: Option<f64>,
    residual_attn_ratio: Option<f64>,
    qk_norm: Option<bool>,
    norm_include_weight: Option<bool>,
    qk_norm_include_weight: Option<bool>,
    per_dim_scale: Option<bool>,
    use_xpos: Option<bool>,
}

impl TryFrom<Raw> for Toto2Config {
    type Error = Error;

    fn try_from(raw: Raw) -> Result<Self> {
        Self::from_raw(raw)
    }
}

/// Which axis a Toto 2.0 layer attends over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Toto2LayerKind {
    /// Causal attention over each variate's patches, with RoPE/xPos and a KV cache.
    Time,
    /// Attention across the variates of a series at each patch slot.
    Variate,
}

impl Toto2Config {
    /// Parses and validates a `config.json` text.
    pub fn from_json(text: &str) -> Result<Self> {
        let raw: Raw = serde_json::from_str(text).map_err(|e| Error::Config { message: e.to_string() })?;
        Self::from_raw(raw)
    }

    fn from_raw(raw: Raw) -> Result<Self> {
        let (d, heads) = (raw.d_model, raw.num_heads);
        let qk_dim = raw.qk_dim.filter(|&v| v > 0).unwrap_or(d.checked_div(heads).unwrap_or(0));
        let num_groups = raw.num_groups.filter(|&v| v > 0).unwrap_or(heads);
        let norm_include_weight = raw.norm_include_weight.unwrap_or(false);
        let cfg = Toto2Config {
            patch_size: raw.patch_size,
            d_model: d,
            num_heads: heads,
            num_layers: raw.num_layers,
            layer_group_size: raw.layer_group_size,
            num_variate_layers_per_group: raw.num_variate_layers_per_group,
            variate_layer_first: raw.variate_layer_first,
            dropout_p: raw.dropout_p.unwrap_or(0.0),
            norm_eps: raw.norm_eps.unwrap_or(5e-5),
            attn_bias: raw.attn_bias.unwrap_or(false),
            mlp_bias: raw.mlp_bias.unwrap_or(false),
            num_output_patches: raw.num_output_patches.unwrap_or(1),
            pre_norm: raw.pre_norm.unwrap_or(true),
            d_ff: raw.d_ff.filter(|&v| v > 0).unwrap_or((4 * d * 2 / 3).div_ceil(8) * 8),
            qk_dim,
            v_dim: raw.v_dim.filter(|&v| v > 0).unwrap_or(qk_dim),
            num_groups,
            heads_per_group: heads.checked_div(num_groups).unwrap_or(0),
            residual_mult: raw.residual_mult.unwrap_or(1.0),
            residual_attn_ratio: raw.residual_attn_ratio.ok_or_else(|| Error::Config {
                message:
                    "residual_attn_ratio is missing: toto-2 requires it (Toto2ModelConfig.__post_init__)"
                        .into(),
            })?,
            qk_norm: raw.qk_norm.unwrap_or(true),
            norm_include_weight,
            qk_norm_include_weight: raw.qk_norm_include_weight.unwrap_or(norm_include_weight),
            per_dim_scale: raw.per_dim_scale.unwrap_or(false),
            use_xpos: raw.use_xpos.unwrap_or(false),
        };
        if let Some(h) = raw.heads_per_group {
            if h != cfg.heads_per_group {
                return Err(Error::Config {
                    message: format!(
                        "heads_per_group {h} contradicts num_heads {heads} / num_groups {num_groups}"
                    ),
                });
            }
        }
        cfg.validate()?;
        Ok(cfg)
    }

    fn validate(&self) -> Result<()> {
        let bad = |message: String| Err(Error::Config { message });
        let positive = [
            ("patch_size", self.patch_size),
            ("d_model", self.d_model),
            ("num_heads", self.num_heads),
            ("num_layers", self.num_layers),
            ("layer_group_size", self.layer_group_size),
            ("d_ff", self.d_ff),
            ("qk_dim", self.qk_dim),
            ("v_dim", self.v_dim),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return bad(format!("{name} must be positive"));
        }
        if !self.num_layers.is_multiple_of(self.layer_group_size) {
            return bad(format!(
                "num_layers {} is not divisible by layer_group_size {}",
                self.num_layers, self.layer_group_size
            ));
        }
        if self.num_variate_layers_per_group > self.layer_group_size {
            return bad(format!(
                "num_variate_layers_per_group {} exceeds layer_group_size {}",
                self.num_variate_layers_per_group, self.layer_group_size
            ));
        }
        if !self.d_model.is_multiple_of(self.num_heads) {
            return bad(format!("d_model {} is not divisible by num_heads {}", self.d_model, self.num_heads));
        }
        if !self.num_heads.is_multiple_of(self.num_groups) {
            return bad(format!(
                "num_heads {} is not divisible by num_groups {}",
                self.num_heads, self.num_groups
            ));
        }
        if !self.rotary_dim().is_multiple_of(2) || self.rotary_dim() == 0 {
            return bad(format!(
                "qk_dim {}: RoPE rotates the first half of each head in pairs, so qk_dim must be a multiple of 4",
                self.qk_dim
            ));
        }
        if self.dropout_p != 0.0 {
            return bad(format!("dropout_p {} must be 0 (toto-2 refuses other values)", self.dropout_p));
        }
        if !(self.norm_eps.is_finite() && self.norm_eps > 0.0) {
            return bad(format!("norm_eps {} must be a positive number", self.norm_eps));
        }
        if !(self.residual_attn_ratio.is_finite() && self.residual_mult.is_finite()) {
            return bad("residual_mult and residual_attn_ratio must be finite".into());
        }
        let unsupported = [
            (self.qk_norm, "qk_norm true (query/key RMSNorm)"),
            (self.norm_include_weight, "norm_include_weight true (weighted RMSNorm)"),
            (self.num_output_patches != 1, "num_output_patches other than 1"),
        ];
        if let Some((_, what)) = unsupported.iter().find(|(on, _)| *on) {
            return bad(format!(
                "{what} is not supported: totoc exports the Toto 2.0 architecture of the released checkpoints \
                 (qk_norm false, norm_include_weight false, num_output_patches 1)"
            ));
        }
        Ok(())
    }

    /// Layer kinds in order (`VariateTimeTransformerDecoder._if_variate_layer`).
    pub fn layer_kinds(&self) -> Vec<Toto2LayerKind> {
        let (g, n) = (self.layer_group_size, self.num_variate_layers_per_group);
        (0..self.num_layers)
            .map(|i| {
                let variate = if self.variate_layer_first { i % g < n } else { i % g >= g - n };
                if variate {
                    Toto2LayerKind::Variate
                } else {
                    Toto2LayerKind::Time
                }
            })
            .collect()
    }

    /// Time layers (each carries a KV cache when block decoding).
    pub fn time_layer_count(&self) -> usize {
        self.layer_kinds().iter().filter(|k| **k == Toto2LayerKind::Time).count()
    }

    /// Channels of each query/key head that RoPE rotates: the first half (`partial_factor=(0.0, 0.5)`).
    pub fn rotary_dim(&self) -> usize {
        self.qk_dim / 2
    }

    /// Quantile outputs per forecast point.
    pub fn quantiles(&self) -> usize {
        KNOTS.len()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The published 4m `config.json` (every field, as `PyTorchModelHubMixin` saves it).
    pub(crate) fn config_4m_json() -> String {
        r#"{"attn_bias":true,"d_ff":688,"d_model":256,"dropout_p":0.0,"heads_per_group":1,"layer_group_size":4,
        "mlp_bias":false,"norm_eps":0.0001,"norm_include_weight":false,"num_groups":4,"num_heads":4,"num_layers":4,
        "num_output_patches":1,"num_variate_layers_per_group":1,"patch_size":32,"per_dim_scale":true,
        "pre_norm":true,"qk_dim":64,"qk_norm":false,"qk_norm_include_weight":false,"residual_attn_ratio":5.136215466577748,
        "residual_mult":0.75,"use_xpos":true,"v_dim":64,"variate_layer_first":false}"#
            .to_string()
    }

    #[test]
    fn published_4m_parses_with_one_variate_layer_last() {
        let c = Toto2Config::from_json(&config_4m_json()).unwrap();
        assert_eq!((c.d_model, c.d_ff, c.num_heads, c.qk_dim, c.rotary_dim()), (256, 688, 4, 64, 32));
        let kinds = c.layer_kinds();
        assert_eq!(kinds[..3], [Toto2LayerKind::Time; 3]);
        assert_eq!(kinds[3], Toto2LayerKind::Variate);
        assert_eq!(c.time_layer_count(), 3);
        // serialises with every field, and round-trips (also through serde, validating)
        let text = serde_json::to_string(&c).unwrap();
        assert_eq!(Toto2Config::from_json(&text).unwrap(), c);
        assert_eq!(serde_json::from_str::<Toto2Config>(&text).unwrap(), c);
        let bad = text.replace("\"qk_norm\":false", "\"qk_norm\":true");
        assert!(serde_json::from_str::<Toto2Config>(&bad).unwrap_err().to_string().contains("qk_norm"));
    }

    #[test]
    fn defaults_and_derived_values_follow_toto2() {
        let j = r#"{"patch_size":32,"d_model":512,"num_heads":8,"num_layers":6,"layer_group_size":3,
            "num_variate_layers_per_group":1,"variate_layer_first":true,"residual_attn_ratio":2.0,"qk_norm":false}"#;
        let c = Toto2Config::from_json(j).unwrap();
        assert_eq!(c.d_ff, 1368); // (int(4·512·2/3) + 7) // 8 · 8, the published 22m value
        assert_eq!((c.qk_dim, c.v_dim, c.num_groups, c.heads_per_group), (64, 64, 8, 1));
        assert_eq!(c.norm_eps, 5e-5);
        assert!(!c.attn_bias && !c.per_dim_scale && !c.use_xpos);
        use Toto2LayerKind::*;
        assert_eq!(c.layer_kinds(), [Variate, Time, Time, Variate, Time, Time]);
    }

    #[test]
    fn unknown_missing_and_unsupported_are_errors() {
        let e = |j: String| Toto2Config::from_json(&j).unwrap_err().to_string();
        let s = e(config_4m_json().replace("\"pre_norm\":true", "\"pre_norm\":true,\"bogus\":1"));
        assert!(s.contains("bogus"), "{s}");
        let s = e(config_4m_json().replace("\"residual_attn_ratio\":5.136215466577748,", ""));
        assert!(s.contains("residual_attn_ratio"), "{s}");
        let s = e(config_4m_json().replace("\"qk_norm\":false", "\"qk_norm\":true"));
        assert!(s.contains("qk_norm") && s.contains("not supported"), "{s}");
        let s = e(config_4m_json().replace("\"heads_per_group\":1", "\"heads_per_group\":2"));
        assert!(s.contains("heads_per_group"), "{s}");
        let s = e(config_4m_json().replace("\"num_layers\":4", "\"num_layers\":6"));
        assert!(s.contains("layer_group_size"), "{s}");
        let s = e(config_4m_json().replace("\"num_groups\":4", "\"num_groups\":3"));
        assert!(s.contains("num_groups"), "{s}");
        // qk_norm defaults to true in toto-2, so a config that omits it is refused by name
        let s = e(config_4m_json().replace("\"qk_norm\":false,", ""));
        assert!(s.contains("qk_norm"), "{s}");
    }
}
