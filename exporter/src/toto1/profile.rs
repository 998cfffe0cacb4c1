//! Toto 1.0's view of a profile: its buckets for a model (the listed ones or the default ladder), the patches
//! its KV cache holds, and its bounds checked against the model's ([`ModelProfile`]).

use super::bucket::default_ladder;
use super::config::ModelConfig;
use crate::bucket::{decode_slots, slots, Bucket};
use crate::error::{Error, Result};
use crate::profile::Profile;
use crate::profile_file::ProfileSet;

/// What a [`Profile`] is for a Toto 1.0 model.
pub trait ModelProfile {
    /// The profile's buckets for `model`: its listed ones, or the default ladder; sorted, prefill first.
    fn buckets(&self, model: &ModelConfig) -> Vec<Bucket>;
    /// Patches the profile's KV cache holds: `ceil(context/P) + ceil(horizon/P)`.
    fn patches(&self, model: &ModelConfig) -> usize;
    /// Checks the profile's bounds against a model: the patches it needs must stay within
    /// [`ModelConfig::max_patches`].
    fn check_against(&self, model: &ModelConfig) -> Result<()>;
}

impl ModelProfile for Profile {
    /// The profile's buckets for `model`: its listed ones, or the default ladder; sorted, prefill first.
    fn buckets(&self, model: &ModelConfig) -> Vec<Bucket> {
        let p = model.patch_size;
        let mut out = match &self.buckets {
            None => return default_ladder(self, model),
            Some(spec) => spec
                .prefill
                .iter()
                .map(|b| Bucket::prefill(b.rows, slots(b.context, p)))
                .chain(
                    spec.decode.iter().map(|b| Bucket::decode(b.rows, decode_slots(b.context, b.horizon, p))),
                )
                .collect::<Vec<_>>(),
        };
        out.sort();
        out.dedup();
        out
    }

    /// Patches the profile's KV cache holds: `ceil(context/P) + ceil(horizon/P)`.
    fn patches(&self, model: &ModelConfig) -> usize {
        self.context.div_ceil(model.patch_size) + self.horizon.div_ceil(model.patch_size)
    }

    /// Checks the profile's bounds against a model: the patches it needs must stay within
    /// [`ModelConfig::max_patches`].
    fn check_against(&self, model: &ModelConfig) -> Result<()> {
        if self.family.is_some() {
            return Err(Error::Profile {
                message: format!(
                    "profile {:?}: a Toto 1.0 profile has no `family:` settings (its bounds and `buckets` say \
                     everything): remove them",
                    self.name
                ),
            });
        }
        if let Some(b) = self.decode_block {
            return Err(Error::Profile {
                message: format!(
                    "profile {:?}: `decode_block: {b}` is for Toto 2.0 checkpoints (Toto 1.0 always decodes one \
                     patch per step): remove it",
                    self.name
                ),
            });
        }
        if let Some(spec) = &self.buckets {
            let p = model.patch_size;
            let bad = |message: String| {
                Err(Error::Profile { message: format!("profile {:?}: {message}", self.name) })
            };
            let s_need = slots(self.context, p);
            if spec.prefill.iter().map(|b| slots(b.context, p)).max() != Some(s_need) {
                return bad(format!(
                    "the largest listed prefill bucket must hold the profile's context ({} points = {s_need} patches \
                     of {p}), so that every call within the profile has a bucket",
                    self.context
                ));
            }
            let multi_patch = slots(self.horizon, p) > 1;
            let t_need = decode_slots(self.context, self.horizon, p);
            match (multi_patch, spec.decode.iter().map(|b| decode_slots(b.context, b.horizon, p)).max()) {
                (true, Some(t)) if t == t_need => {}
                (true, _) => {
                    return bad(format!(
                        "the largest listed decode bucket must hold the profile's context + horizon ({} + {} points \
                         = {t_need} cache patches of {p})",
                        self.context, self.horizon
                    ))
                }
                (false, None) => {}
                (false, Some(_)) => {
                    return bad(format!(
                        "its horizon ({} points) fits one patch of {p}, which the prefill forecasts: drop `decode`",
                        self.horizon
                    ))
                }
            }
        }
        let patches = self.patches(model);
        if patches > model.max_patches() {
            return Err(Error::ProfileTooLong {
                profile: self.name.clone(),
                context: self.context,
                horizon: self.horizon,
                patch_size: model.patch_size,
                patches,
                max_patches: model.max_patches(),
            });
        }
        Ok(())
    }
}

/// Every profile of a set checked against a Toto 1.0 model.
pub trait ModelProfileSet {
    fn check_against(&self, model: &ModelConfig) -> Result<()>;
}

impl ModelProfileSet for ProfileSet {
    /// Checks every profile against a model (see [`ModelProfile::check_against`]).
    fn check_against(&self, model: &ModelConfig) -> Result<()> {
        self.profiles.iter().try_for_each(|p| p.check_against(model))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    const GOOD: &str = crate::profile_file::tests::GOOD;

    #[test]
    fn too_many_patches_names_profile_and_numbers() {
        let model = super::super::checkpoint::tests::tiny_config(16);
        let long = format!(
            "profiles:\n  - {{name: long, batch: 1, variates: 1, context: {}, horizon: 16}}\n",
            16 * 8192
        );
        let set = ProfileSet::from_yaml(&long, "x.yaml").unwrap();
        let e = set.check_against(&model).unwrap_err().to_string();
        assert!(e.contains("`long`") && e.contains("8193") && e.contains("8192"), "{e}");
        ProfileSet::from_yaml(GOOD, "x.yaml").unwrap().check_against(&model).unwrap();
    }

    #[test]
    fn a_family_section_is_refused_naming_it() {
        let model = super::super::checkpoint::tests::tiny_config(16);
        let text = GOOD.replace("    samples: 16\n", "    samples: 16\n    family:\n      window: 64\n");
        let set = ProfileSet::from_yaml(&text, "x.yaml").unwrap();
        assert_eq!(set.profiles[1].family, Some(serde_json::json!({"window": 64})));
        let e = set.check_against(&model).unwrap_err().to_string();
        assert!(e.contains("\"b-2_x\"") && e.contains("`family:`") && e.contains("remove them"), "{e}");
        // a section that is no mapping is refused when the file is read, at its line
        let text = GOOD.replace("    samples: 16\n", "    samples: 16\n    family: 3\n");
        let e = ProfileSet::from_yaml(&text, "x.yaml").unwrap_err().to_string();
        assert!(e.starts_with("x.yaml: line 14: profiles[1].family must be a mapping"), "{e}");
    }

    /// The shipped profile files parse and fit the models they are meant for.
    #[test]
    fn shipped_configs_fit_their_models() {
        let configs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs");
        let base = super::super::checkpoint::tests::base_config();
        let set = ProfileSet::from_file(&configs.join("toto-base.yaml")).unwrap();
        set.check_against(&base).unwrap();
        let names: Vec<&str> = set.profiles.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["default"]);
        assert_eq!(set.profiles[0].buckets(&base).len(), 22);
        let tiny = ProfileSet::from_file(&configs.join("tiny.yaml")).unwrap();
        for patch in [16, 64] {
            tiny.check_against(&super::super::checkpoint::tests::tiny_config(patch)).unwrap();
        }
    }
}
