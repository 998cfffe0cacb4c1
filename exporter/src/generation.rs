//! Which Toto generation a checkpoint holds, told from its `config.json`.
//!
//! The two configs share no required key: Toto 1.0 (`Toto.__init__` kwargs) has `embed_dim` and
//! `scaler_cls`; Toto 2.0 (`Toto2ModelConfig`) has `d_model` and `layer_group_size`. [`ModelGeneration::detect`]
//! only decides which parser applies; each parser then checks its config strictly.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::checkpoint::CONFIG_FILE;
use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::toto2::Toto2Config;

/// A Toto model generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ModelGeneration {
    /// Toto 1.0 (toto-ts 0.2.0): Student-T mixture head.
    #[serde(rename = "toto-1.0")]
    Toto1,
    /// Toto 2.0 (toto-2 2.0.0): nine quantile knots.
    #[serde(rename = "toto-2.0")]
    Toto2,
}

/// A parsed, validated config of either generation. In manifests it is written adjacently tagged,
/// `{"generation": "toto-2.0", "config": {...}}`, so a reader knows which model a bundle holds before it reads
/// the config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "generation", content = "config")]
pub enum AnyConfig {
    #[serde(rename = "toto-1.0")]
    Toto1(ModelConfig),
    #[serde(rename = "toto-2.0")]
    Toto2(Toto2Config),
}

impl AnyConfig {
    pub fn generation(&self) -> ModelGeneration {
        match self {
            AnyConfig::Toto1(_) => ModelGeneration::Toto1,
            AnyConfig::Toto2(_) => ModelGeneration::Toto2,
        }
    }

    /// The Toto 1.0 config, if that is what this is.
    pub fn toto1(&self) -> Option<&ModelConfig> {
        match self {
            AnyConfig::Toto1(c) => Some(c),
            AnyConfig::Toto2(_) => None,
        }
    }

    /// The Toto 2.0 config, if that is what this is.
    pub fn toto2(&self) -> Option<&Toto2Config> {
        match self {
            AnyConfig::Toto2(c) => Some(c),
            AnyConfig::Toto1(_) => None,
        }
    }

    /// Reads `dir/config.json` with the parser of its generation.
    pub fn from_dir(dir: &Path) -> Result<Self> {
        let path = dir.join(CONFIG_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        Self::from_json(&text).map_err(|e| e.in_file(&path))
    }

    pub fn from_json(text: &str) -> Result<Self> {
        Ok(match ModelGeneration::detect(text)? {
            ModelGeneration::Toto1 => AnyConfig::Toto1(ModelConfig::from_json(text)?),
            ModelGeneration::Toto2 => AnyConfig::Toto2(Toto2Config::from_json(text)?),
        })
    }
}

impl ModelGeneration {
    pub fn as_str(self) -> &'static str {
        match self {
            ModelGeneration::Toto1 => "toto-1.0",
            ModelGeneration::Toto2 => "toto-2.0",
        }
    }

    /// The generation of a `config.json` text.
    pub fn detect(text: &str) -> Result<Self> {
        let obj: serde_json::Map<String, serde_json::Value> = serde_json::from_str(text)
            .map_err(|e| Error::Config { message: format!("not a JSON object: {e}") })?;
        match (obj.contains_key("embed_dim"), obj.contains_key("d_model")) {
            (true, false) => Ok(ModelGeneration::Toto1),
            (false, true) => Ok(ModelGeneration::Toto2),
            (a, b) => Err(Error::Config {
                message: format!(
                    "cannot tell the Toto generation: a Toto 1.0 config has `embed_dim` (present: {a}), a Toto 2.0 \
                     config has `d_model` (present: {b}), exactly one of them is required"
                ),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_both_generations_and_refuses_neither() {
        let v2 = crate::toto2::config::tests::config_4m_json();
        assert_eq!(ModelGeneration::detect(&v2).unwrap(), ModelGeneration::Toto2);
        assert!(matches!(AnyConfig::from_json(&v2).unwrap(), AnyConfig::Toto2(_)));
        let v1 = r#"{"patch_size":64,"stride":64,"embed_dim":768,"num_layers":12,"num_heads":12,
            "mlp_hidden_dim":3072,"dropout":0.1,"spacewise_every_n_layers":12,"spacewise_first":false,
            "scaler_cls":"<class 'model.scaler.CausalPatchStdMeanScaler'>",
            "output_distribution_classes":["<class 'model.distribution.MixtureOfStudentTsOutput'>"],
            "output_distribution_kwargs":{"k_components":24}}"#;
        assert_eq!(AnyConfig::from_json(v1).unwrap().generation(), ModelGeneration::Toto1);
        // manifests carry it adjacently tagged, and read it back validated
        let any = AnyConfig::from_json(&v2).unwrap();
        let json = serde_json::to_value(&any).unwrap();
        assert_eq!(json["generation"], "toto-2.0");
        assert_eq!(serde_json::from_value::<AnyConfig>(json).unwrap(), any);
        let e = ModelGeneration::detect(r#"{"hidden_size": 4}"#).unwrap_err().to_string();
        assert!(e.contains("embed_dim") && e.contains("d_model"), "{e}");
        assert!(ModelGeneration::detect("[1]").is_err());
        // a 2.0 config with a 1.0 key is refused by the 2.0 parser, naming the key
        let e =
            AnyConfig::from_json(&v2.replace("\"d_ff\"", "\"stride\":32,\"d_ff\"")).unwrap_err().to_string();
        assert!(e.contains("stride"), "{e}");
    }
}
