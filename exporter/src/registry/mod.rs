//! The model families totoc compiles, and the only place in the exporter that names each of them.
//!
//! * [`family`]: the [`Family`] enum, its capabilities, a family's config ([`AnyConfig`]) and manifest sections
//!   ([`FamilyGraphs`]): the types shared layers name;
//! * here: the one `match` that calls into a family's code ([`export_bundle`]). Family code and the shared layers
//!   import only [`family`], never this module, so the arrows run one way: this module → family folders →
//!   [`family`] and the shared layers.
//!
//! Adding a family: a folder `<family>/` with its config, checkpoint loader, graph and `export_bundle`, one
//! variant in [`Family`], [`AnyConfig`] and [`FamilyGraphs`] ([`family`]), and one arm in [`export_bundle`]
//! (see docs/architecture.md).

pub mod family;

pub use family::{AnyConfig, Capabilities, Family, FamilyGraphs};

use crate::error::Result;
use crate::export::{ExportEvent, ExportOptions};
use crate::manifest::Manifest;

/// `totoc export` by the checkpoint's family (from its `config.json`); on any error nothing is left at
/// `opts.out`. A tokenizer directory is required by the families whose export reads one and refused by the
/// others ([`check_tokenizer`]).
pub fn export_bundle(opts: &ExportOptions, progress: &mut dyn FnMut(ExportEvent)) -> Result<Manifest> {
    let family = Family::of_checkpoint(&opts.checkpoint)?;
    check_tokenizer(family, opts.tokenizer.as_deref())?;
    match family {
        Family::Toto1 => crate::toto1::export::export_bundle(opts, progress),
        Family::Toto2 => crate::toto2::export::export_bundle(opts, progress),
        Family::Kronos => crate::kronos::export::export_bundle(opts, progress),
    }
}

/// `--tokenizer` where `family` reads a tokenizer checkpoint, and nowhere else.
fn check_tokenizer(family: Family, tokenizer: Option<&std::path::Path>) -> Result<()> {
    let c = family.capabilities();
    let message = match (c.tokenizer_keys.is_some(), tokenizer) {
        (true, None) => format!(
            "a {} checkpoint is exported with its tokenizer: pass the tokenizer's checkpoint directory as \
             --tokenizer (the profile YAML's `model.tokenizer` names it; `totoc.export(tokenizer=...)`)",
            c.title
        ),
        (false, Some(dir)) => format!(
            "--tokenizer {}: a {} checkpoint has no tokenizer checkpoint; remove --tokenizer",
            dir.display(),
            c.title
        ),
        _ => return Ok(()),
    };
    Err(crate::error::Error::Config { message })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_both_generations_and_refuses_neither() {
        let v2 = crate::toto2::config::tests::config_4m_json();
        assert_eq!(Family::detect(&v2).unwrap(), Family::Toto2);
        assert!(matches!(AnyConfig::from_json(&v2).unwrap(), AnyConfig::Toto2(_)));
        let v1 = r#"{"patch_size":64,"stride":64,"embed_dim":768,"num_layers":12,"num_heads":12,
            "mlp_hidden_dim":3072,"dropout":0.1,"spacewise_every_n_layers":12,"spacewise_first":false,
            "scaler_cls":"<class 'model.scaler.CausalPatchStdMeanScaler'>",
            "output_distribution_classes":["<class 'model.distribution.MixtureOfStudentTsOutput'>"],
            "output_distribution_kwargs":{"k_components":24}}"#;
        assert_eq!(AnyConfig::from_json(v1).unwrap().family(), Family::Toto1);
        // manifests carry it adjacently tagged, and read it back validated
        let any = AnyConfig::from_json(&v2).unwrap();
        let json = serde_json::to_value(&any).unwrap();
        assert_eq!(json["generation"], "toto-2.0");
        assert_eq!(serde_json::from_value::<AnyConfig>(json).unwrap(), any);
        let e = Family::detect(r#"{"hidden_size": 4}"#).unwrap_err().to_string();
        assert!(e.contains("embed_dim") && e.contains("d_model"), "{e}");
        assert!(Family::detect("[1]").is_err());
        // `d_model` alone claims nothing (other models' configs have it too)
        let e = Family::detect(r#"{"d_model": 64, "n_layers": 2}"#).unwrap_err().to_string();
        assert!(e.contains("`layer_group_size`"), "{e}");
        // a 2.0 config with a 1.0 key is refused by the 2.0 parser, naming the key
        let e =
            AnyConfig::from_json(&v2.replace("\"d_ff\"", "\"stride\":32,\"d_ff\"")).unwrap_err().to_string();
        assert!(e.contains("stride"), "{e}");
    }

    #[test]
    fn a_tokenizer_is_refused_for_families_without_one() {
        for f in Family::ALL.into_iter().filter(|f| f.capabilities().tokenizer_keys.is_none()) {
            check_tokenizer(f, None).unwrap();
            let e = check_tokenizer(f, Some(std::path::Path::new("/t"))).unwrap_err().to_string();
            assert!(e.contains("--tokenizer /t") && e.contains("remove --tokenizer"), "{e}");
        }
    }

    /// Every `config.json` under `dir`, recursively, sorted.
    fn config_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                out.extend(config_files(&path));
            } else if path.file_name().is_some_and(|n| n == crate::safetensors::CONFIG_FILE) {
                out.push(path);
            }
        }
        out.sort();
        out
    }

    /// The keys that tell the families apart must tell every committed checkpoint apart: each config is claimed
    /// by exactly one family, as its model's config (`detect` returns it, and the family's parser reads it) or as
    /// its tokenizer's (`detect` refuses it naming `--tokenizer`), whatever keys the families' configs share.
    #[test]
    fn every_committed_config_is_claimed_by_exactly_one_family() {
        let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
        let files = config_files(&fixtures);
        assert!(files.len() >= 9, "{files:?}");
        let (mut models, mut tokenizers) = (0, 0);
        for path in files {
            let text = std::fs::read_to_string(&path).unwrap();
            let obj: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&text).unwrap();
            let has = |keys: &[&str]| keys.iter().all(|k| obj.contains_key(*k));
            let model: Vec<Family> =
                Family::ALL.into_iter().filter(|f| has(f.capabilities().config_keys)).collect();
            let tokenizer: Vec<Family> = Family::ALL
                .into_iter()
                .filter(|f| f.capabilities().tokenizer_keys.is_some_and(has) && !model.contains(f))
                .collect();
            let shown = path.display();
            assert_eq!(
                model.len() + tokenizer.len(),
                1,
                "{shown}: model of {model:?}, tokenizer of {tokenizer:?}"
            );
            match (model.first(), tokenizer.first()) {
                (Some(&f), _) => {
                    assert_eq!(Family::detect(&text).unwrap_or_else(|e| panic!("{shown}: {e}")), f);
                    if f == Family::Kronos {
                        crate::kronos::config::PredictorConfig::from_json(&text).unwrap();
                    } else {
                        assert_eq!(AnyConfig::from_json(&text).unwrap().family(), f, "{shown}");
                    }
                    models += 1;
                }
                (None, Some(_)) => {
                    let e = Family::detect(&text).unwrap_err().to_string();
                    assert!(e.contains("tokenizer config") && e.contains("--tokenizer"), "{shown}: {e}");
                    crate::kronos::config::TokenizerConfig::from_json(&text).unwrap();
                    tokenizers += 1;
                }
                (None, None) => unreachable!(),
            }
        }
        println!("{models} model configs, {tokenizers} tokenizer configs");
    }
}
