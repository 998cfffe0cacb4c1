//! The model families totoc compiles: the one [`Family`] enum of the workspace (the engines and the binary use
//! it too), what each family can do ([`Capabilities`]), and the family-tagged types every layer names: a
//! family's config ([`AnyConfig`]) and its sections of an export manifest ([`FamilyGraphs`]).
//!
//! Code outside the family folders (`toto1/`, `toto2/`) never names a family: it asks
//! [`Family::capabilities`] what a family does (its point forecast, whether it samples, its quantile knots,
//! precisions, targets). This module names only the families' leaf modules (configs, manifest sections), so
//! shared layers may depend on it; the dispatch into family code (exporting a bundle) is [`super`], which
//! nothing in the crate below it imports.
//!
//! Which family a checkpoint holds is told from its `config.json`: each family names the keys only its config
//! has ([`Capabilities::config_keys`]); exactly one family must claim a config, and each family's parser then
//! checks it strictly.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::safetensors::CONFIG_FILE;
use crate::signature::Precision;
use crate::toto1::config::ModelConfig;
use crate::toto2::config::Toto2Config;

/// A model family (and generation) totoc compiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Family {
    /// Toto 1.0 (toto-ts 0.2.0): Student-T mixture head.
    #[serde(rename = "toto-1.0")]
    Toto1,
    /// Toto 2.0 (toto-2 2.0.0): nine quantile knots.
    #[serde(rename = "toto-2.0")]
    Toto2,
    /// Kronos (shiyu-coder/Kronos, kronos-finance 0.1.5): candlestick tokens, a predictor and its tokenizer.
    #[serde(rename = "kronos")]
    Kronos,
}

/// What a family does, asked by the code that serves every family (tables, requests, `bench`, `verify`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Capabilities {
    /// Manifest and API name: `toto-1.0`.
    pub name: &'static str,
    /// Human name: `Toto 1.0`.
    pub title: &'static str,
    /// The family's folder in each crate (`toto1`): where its code lives.
    pub folder: &'static str,
    /// The reference implementation the engines are checked against (`toto-ts 0.2.0`).
    pub reference: &'static str,
    /// `config.json` keys only this family's config has (how a checkpoint's family is told).
    pub config_keys: &'static [&'static str],
    /// `Some`: the family's export reads a second checkpoint directory, the model's tokenizer (`--tokenizer`, the
    /// profile YAML's `model.tokenizer`, `totoc.export(tokenizer=)`), whose `config.json` has these keys (and
    /// none of [`Self::config_keys`]); such a config given as `--checkpoint` is refused naming `--tokenizer`.
    /// `None`: one checkpoint directory, and `--tokenizer` is refused.
    pub tokenizer_keys: Option<&'static [&'static str]>,
    /// Name of the point forecast in responses and tables: `mean` or `median`.
    pub point_forecast: &'static str,
    /// Whether the engine draws sample paths (`samples > 0` in requests).
    pub samples: bool,
    /// The quantile levels the model predicts directly (others are interpolated), if it predicts quantiles.
    pub quantile_knots: Option<&'static [f64]>,
    /// Precisions `totoc export` writes graphs in (each family's export refuses the others with its reason).
    pub precisions: &'static [Precision],
    /// Engine targets `totoc build-engine` builds (`cpu`, `cuda`, `tensorrt`); others are refused before any work
    /// (`engines::registry::build_engine`).
    pub targets: &'static [&'static str],
    /// The rows of a series' `target` by name, in the default order, for a family that reads named columns;
    /// `None`: unnamed variates (any number, up to the engine's limit).
    pub columns: Option<&'static [InputColumn]>,
    /// Whether the engine reads each point's own timestamp (its wall clock): requests then need `timestamps`, and
    /// a table's rows are the series as given (a gap is no missing point; the calendar only continues it).
    pub reads_timestamps: bool,
    /// Whether a target may hold missing points (`null` / NaN); `false`: they are refused, naming the point.
    pub missing_points: bool,
    /// Whether requests may carry sampling controls (`temperature`, `top_k`, `top_p`).
    pub sampling_controls: bool,
    /// The request `params` the family takes, by name (each validated by the family).
    pub params: &'static [&'static str],
}

/// One named row of a family's input (`Capabilities::columns`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputColumn {
    /// Its name in requests (`columns`) and tables.
    pub name: &'static str,
    /// `None`: required. `Some(rule)`: it may be absent, and the engine derives it by `rule` (what the
    /// reference does), said in messages.
    pub derived_when_absent: Option<&'static str>,
}

const TOTO1: Capabilities = Capabilities {
    name: "toto-1.0",
    title: "Toto 1.0",
    folder: "toto1",
    reference: "toto-ts 0.2.0",
    config_keys: &["embed_dim"],
    tokenizer_keys: None,
    point_forecast: "mean",
    samples: true,
    quantile_knots: None,
    precisions: &[Precision::Fp32, Precision::Fp16, Precision::Int8],
    targets: &["cpu", "cuda", "tensorrt"],
    columns: None,
    reads_timestamps: false,
    missing_points: true,
    sampling_controls: false,
    params: &[],
};

const TOTO2: Capabilities = Capabilities {
    name: "toto-2.0",
    title: "Toto 2.0",
    folder: "toto2",
    reference: "toto-2 2.0.0",
    // `d_model` alone is not enough: other families' configs have it too; `layer_group_size` is Toto 2.0's own
    config_keys: &["d_model", "layer_group_size"],
    tokenizer_keys: None,
    point_forecast: "median",
    samples: false,
    quantile_knots: Some(&crate::toto2::config::KNOTS),
    precisions: &[Precision::Fp32],
    targets: &["cpu", "cuda", "tensorrt"],
    columns: None,
    reads_timestamps: false,
    missing_points: true,
    sampling_controls: false,
    params: &[],
};

const KRONOS: Capabilities = Capabilities {
    name: "kronos",
    title: "Kronos",
    folder: "kronos",
    reference: "kronos-finance 0.1.5 (shiyu-coder/Kronos 67b630e) in eval mode",
    config_keys: &crate::kronos::config::PREDICTOR_KEYS,
    tokenizer_keys: Some(&crate::kronos::config::TOKENIZER_KEYS),
    point_forecast: "mean",
    samples: true,
    quantile_knots: None,
    precisions: &[Precision::Fp32],
    targets: &["cpu"],
    // upstream's `KronosPredictor.predict` (k:522-530): the prices are required, volume and amount derived
    columns: Some(&[
        InputColumn { name: "open", derived_when_absent: None },
        InputColumn { name: "high", derived_when_absent: None },
        InputColumn { name: "low", derived_when_absent: None },
        InputColumn { name: "close", derived_when_absent: None },
        InputColumn {
            name: "volume",
            derived_when_absent: Some("volume = amount = 0, even when amount is given"),
        },
        InputColumn { name: "amount", derived_when_absent: Some("volume × mean(open, high, low, close)") },
    ]),
    reads_timestamps: true,
    missing_points: false,
    sampling_controls: true,
    params: &crate::kronos::config::PARAMS,
};

impl Family {
    /// Every family, in the order they were added.
    pub const ALL: [Family; 3] = [Family::Toto1, Family::Toto2, Family::Kronos];

    pub fn capabilities(self) -> &'static Capabilities {
        match self {
            Family::Toto1 => &TOTO1,
            Family::Toto2 => &TOTO2,
            Family::Kronos => &KRONOS,
        }
    }

    /// `toto-1.0`: its name in manifests, responses and profile files.
    pub fn as_str(self) -> &'static str {
        self.capabilities().name
    }

    /// Name of the point forecast in responses: `mean` (Toto 1.0) or `median` (Toto 2.0).
    pub fn point_forecast(self) -> &'static str {
        self.capabilities().point_forecast
    }

    /// The family of a `config.json` text: the one family whose config keys it has. A family's tokenizer
    /// config ([`Capabilities::tokenizer_keys`]) is refused with the flag it belongs to.
    pub fn detect(text: &str) -> Result<Self> {
        let obj: serde_json::Map<String, serde_json::Value> = serde_json::from_str(text)
            .map_err(|e| Error::Config { message: format!("not a JSON object: {e}") })?;
        let has = |keys: &[&str]| keys.iter().all(|k| obj.contains_key(*k));
        let claims = |f: &Family| has(f.capabilities().config_keys);
        let found: Vec<Family> = Family::ALL.into_iter().filter(claims).collect();
        if let [one] = found.as_slice() {
            return Ok(*one);
        }
        let tokenizer_of = Family::ALL.into_iter().find(|f| f.capabilities().tokenizer_keys.is_some_and(has));
        if let (Some(f), []) = (tokenizer_of, found.as_slice()) {
            let title = f.capabilities().title;
            return Err(Error::Config {
                message: format!(
                    "this is a {title} tokenizer config, not a model's: give the {title} model's checkpoint \
                     directory as --checkpoint and this directory as --tokenizer (the profile YAML's \
                     `model.tokenizer`, `totoc.export(tokenizer=...)`)"
                ),
            });
        }
        Err(Error::Config {
            message: format!(
                "cannot tell the model family: {}; exactly one of them is required",
                Family::ALL
                    .iter()
                    .map(|f| {
                        let c = f.capabilities();
                        let keys =
                            c.config_keys.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ");
                        format!("a {} config has {keys} (present: {})", c.title, claims(f))
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })
    }

    /// The family of the checkpoint directory `dir` (from its `config.json`), whose config its family's parser
    /// accepts; a family read with its tokenizer ([`Capabilities::tokenizer_keys`]) checks its two configs
    /// together when it loads them.
    pub fn of_checkpoint(dir: &Path) -> Result<Self> {
        let path = dir.join(CONFIG_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        let family = Family::detect(&text).map_err(|e| e.in_file(&path))?;
        if family.capabilities().tokenizer_keys.is_some() {
            return Ok(family);
        }
        Ok(AnyConfig::from_json(&text).map_err(|e| e.in_file(&path))?.family())
    }
}

/// A parsed, validated config of any family. In manifests it is written adjacently tagged,
/// `{"generation": "toto-2.0", "config": {...}}`, so a reader knows which model a bundle holds before it reads
/// the config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "generation", content = "config")]
pub enum AnyConfig {
    #[serde(rename = "toto-1.0")]
    Toto1(ModelConfig),
    #[serde(rename = "toto-2.0")]
    Toto2(Toto2Config),
    /// Both of its configs: `{"predictor": {...}, "tokenizer": {...}}`.
    #[serde(rename = "kronos")]
    Kronos(crate::kronos::config::KronosConfig),
}

impl AnyConfig {
    pub fn family(&self) -> Family {
        match self {
            AnyConfig::Toto1(_) => Family::Toto1,
            AnyConfig::Toto2(_) => Family::Toto2,
            AnyConfig::Kronos(_) => Family::Kronos,
        }
    }

    /// The Toto 1.0 config, if that is what this is.
    pub fn toto1(&self) -> Option<&ModelConfig> {
        match self {
            AnyConfig::Toto1(c) => Some(c),
            _ => None,
        }
    }

    /// The Toto 2.0 config, if that is what this is.
    pub fn toto2(&self) -> Option<&Toto2Config> {
        match self {
            AnyConfig::Toto2(c) => Some(c),
            _ => None,
        }
    }

    /// The Kronos configs, if that is what this is.
    pub fn kronos(&self) -> Option<&crate::kronos::config::KronosConfig> {
        match self {
            AnyConfig::Kronos(c) => Some(c),
            _ => None,
        }
    }

    /// Reads `dir/config.json` with the parser of its family.
    pub fn from_dir(dir: &Path) -> Result<Self> {
        let path = dir.join(CONFIG_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        Self::from_json(&text).map_err(|e| e.in_file(&path))
    }

    pub fn from_json(text: &str) -> Result<Self> {
        Ok(match Family::detect(text)? {
            Family::Toto1 => AnyConfig::Toto1(ModelConfig::from_json(text)?),
            Family::Toto2 => AnyConfig::Toto2(Toto2Config::from_json(text)?),
            Family::Kronos => return Err(crate::kronos::config::KronosConfig::needs_tokenizer()),
        })
    }
}

/// Each family's graphs in an export manifest. Written flattened, as top-level manifest fields, so the manifest
/// format (`totoc-export/4`) is unchanged: `profiles` and `dynamic_graphs` (Toto 1.0; empty in other bundles),
/// `toto2_profiles` (Toto 2.0), `kronos_profiles` (Kronos; each absent in other bundles).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FamilyGraphs {
    /// Toto 1.0 profiles (empty in other bundles).
    pub profiles: Vec<crate::toto1::manifest::ProfileEntry>,
    /// Toto 2.0 profiles (absent in other bundles).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub toto2_profiles: Vec<crate::toto2::manifest::Toto2ProfileEntry>,
    /// Toto 1.0, opset-24 bundles: each graph kind once more with rows and slots symbolic, per precision.
    pub dynamic_graphs: Vec<crate::toto1::manifest::DynamicGraphEntry>,
    /// Kronos profiles (absent in other bundles).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kronos_profiles: Vec<crate::kronos::manifest::KronosProfileEntry>,
}

impl FamilyGraphs {
    /// Names of the bundle's profiles.
    pub fn profile_names(&self) -> Vec<&str> {
        self.profiles
            .iter()
            .map(|p| p.profile.name.as_str())
            .chain(self.toto2_profiles.iter().map(|p| p.profile.name.as_str()))
            .chain(self.kronos_profiles.iter().map(|p| p.profile.name.as_str()))
            .collect()
    }

    /// Graph files of every profile (shape-polymorphic graphs not counted).
    pub fn graph_count(&self) -> usize {
        self.profiles.iter().map(|p| p.graphs.len()).sum::<usize>()
            + self.toto2_profiles.iter().flat_map(|p| &p.sets).map(|s| s.graphs.len()).sum::<usize>()
            + self.kronos_profiles.iter().map(|p| p.graphs.len()).sum::<usize>()
    }
}
