//! Profile files: the YAML (`configs/*.yaml`) that lists shape profiles ([`crate::profile::Profile`]) and,
//! optionally, the model they are for.
//!
//! A file holds a [`ProfileSet`]:
//! ```yaml
//! profiles:
//!   - name: default
//!     batch: 8
//!     variates: 4
//!     context: 4096
//!     horizon: 336
//!     samples: 256    # optional, default 0
//!     family:         # optional: settings of the model family's own, read by that family only
//!       window: 512
//!     buckets:        # optional: the profile's own ladder instead of the default one (crate::bucket)
//!       prefill:
//!         - {rows: 1, context: 512}
//!         - {rows: 16, context: 4096}
//!       decode:
//!         - {rows: 1, context: 4096, horizon: 336}
//!         - {rows: 256, context: 512, horizon: 336}
//! ```
//! A profile is exported as a ladder of static-shape graphs ([`crate::bucket`]); a call runs on the smallest
//! that holds it, so one wide profile serves small and large calls alike. Listed buckets are in points (rows are
//! series × variates for prefill, series × sample paths × variates for decode); the largest prefill must cover the
//! profile's context and the largest decode its context + horizon, so every call within the bounds has a bucket.
//! [`ProfileSet::from_yaml`] checks what needs no model (positive bounds, unique directory-safe names) and
//! names the line of each fault; each family checks the bounds against its model (Toto 1.0: its folder's `profile.rs`).

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_saphyr::Spanned;

use crate::error::{Error, Result};
use crate::profile::{BucketSpec, DecodeSpec, PrefillSpec, Profile};

/// The profiles of one YAML file, validated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProfileSet {
    pub profiles: Vec<Profile>,
    /// The model the profiles are for (optional `model:` block): what CI exports them from, checked against
    /// the checkpoint by [`ConfigModel::check_checkpoint`].
    pub model: Option<ConfigModel>,
}

/// A profile file's `model:` block: the model generation and the checkpoint the profiles are sized for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigModel {
    /// `toto-1.0` or `toto-2.0`.
    pub generation: crate::registry::family::Family,
    /// The checkpoint's name (e.g. `Datadog/Toto-Open-Base-1.0`): CI's key for where to find it.
    pub checkpoint: String,
    /// The name of the model's tokenizer checkpoint, for a family whose export reads one (`--tokenizer`;
    /// `crate::registry::Capabilities::tokenizer_keys`): where CI finds it, as `checkpoint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<String>,
    /// Golden toto-ts cases of that checkpoint (`tests/reference/run_reference.py` output), for CI's
    /// `totoc verify`; a path like `checkpoint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub golden: Option<String>,
}

impl ConfigModel {
    /// The checkpoint directory's `config.json` must be of this generation.
    pub fn check_checkpoint(&self, checkpoint: &Path, config_file: &str) -> Result<()> {
        let path = checkpoint.join(crate::safetensors::CONFIG_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        let found = crate::registry::family::Family::detect(&text).map_err(|e| e.in_file(&path))?;
        if found != self.generation {
            return Err(Error::Profile {
                message: format!(
                    "{config_file} is for {} ({}), but {} holds a {} checkpoint; export it with a config for {}",
                    self.generation.as_str(),
                    self.checkpoint,
                    checkpoint.display(),
                    found.as_str(),
                    found.as_str()
                ),
            });
        }
        Ok(())
    }

    /// A config that names a tokenizer checkpoint needs `--tokenizer` (and one that names none, a family without
    /// one: the export refuses a stray `--tokenizer` itself).
    pub fn check_tokenizer(&self, tokenizer: Option<&Path>, config_file: &str) -> Result<()> {
        match (&self.tokenizer, tokenizer) {
            (Some(name), None) => Err(Error::Profile {
                message: format!(
                    "{config_file} is for {} ({}) with the tokenizer {name}: pass its directory as --tokenizer",
                    self.generation.as_str(),
                    self.checkpoint
                ),
            }),
            _ => Ok(()),
        }
    }
}

impl ProfileSet {
    /// Reads and validates a profile file.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        Self::from_yaml(&text, &path.display().to_string())
    }

    /// Parses and validates a profile file's text; `source_name` (usually the path) starts every error
    /// message.
    pub fn from_yaml(text: &str, source_name: &str) -> Result<Self> {
        let raw: RawSet = serde_saphyr::from_str(text).map_err(|e| syntax_error(&e, source_name))?;
        let at = |line: u64, field: String, message: String| Error::ProfileField {
            file: source_name.to_string(),
            line,
            field,
            message,
        };
        if raw.profiles.value.is_empty() {
            let line = raw.profiles.referenced.line();
            return Err(at(line, "profiles".into(), "must list at least one profile".into()));
        }
        let mut profiles: Vec<(Profile, u64)> = Vec::with_capacity(raw.profiles.value.len());
        for (i, item) in raw.profiles.value.into_iter().enumerate() {
            let p = item.value;
            let name_line = p.name.referenced.line();
            let field = |key: &str| format!("profiles[{i}].{key}");
            check_name(&p.name.value).map_err(|m| at(name_line, field("name"), m))?;
            if let Some((j, (_, first_line))) =
                profiles.iter().enumerate().find(|(_, (q, _))| q.name == p.name.value)
            {
                let message = format!(
                    "`{}` repeats profiles[{j}].name (line {first_line}); names must be unique",
                    p.name.value
                );
                return Err(at(name_line, field("name"), message));
            }
            for (key, v) in [
                ("batch", &p.batch),
                ("variates", &p.variates),
                ("context", &p.context),
                ("horizon", &p.horizon),
            ] {
                if v.value == 0 {
                    return Err(at(v.referenced.line(), field(key), "must be ≥ 1".into()));
                }
            }
            let samples = p.samples.map_or(0, |s| s.value);
            if let Some(f) = p.family.as_ref().filter(|f| !f.value.is_object()) {
                let message = "must be a mapping of the model family's settings (`key: value` lines)".into();
                return Err(at(f.referenced.line(), field("family"), message));
            }
            if let Some(b) = &p.decode_block {
                if b.value == 0 {
                    return Err(at(b.referenced.line(), field("decode_block"), "must be ≥ 1".into()));
                }
            }
            let buckets = match p.buckets {
                None => None,
                Some(raw) => {
                    let line = raw.referenced.line();
                    let raw = raw.value;
                    if raw.prefill.is_empty() {
                        return Err(at(
                            line,
                            field("buckets.prefill"),
                            "must list at least one bucket".into(),
                        ));
                    }
                    let (rows_p, rows_d) =
                        (p.batch.value * p.variates.value, p.batch.value * p.variates.value * samples.max(1));
                    for (j, b) in raw.prefill.iter().enumerate() {
                        let f = field(&format!("buckets.prefill[{j}]"));
                        let l = b.referenced.line();
                        check_bucket(
                            b.value.rows,
                            rows_p,
                            "batch × variates",
                            b.value.context,
                            p.context.value,
                        )
                        .map_err(|m| at(l, f, m))?;
                    }
                    for (j, b) in raw.decode.iter().enumerate() {
                        let f = field(&format!("buckets.decode[{j}]"));
                        let l = b.referenced.line();
                        check_bucket(
                            b.value.rows,
                            rows_d,
                            "batch × variates × samples",
                            b.value.context,
                            p.context.value,
                        )
                        .and_then(|_| match b.value.horizon {
                            0 => Err("horizon must be ≥ 1".to_string()),
                            h if h > p.horizon.value => {
                                Err(format!("horizon {h} exceeds the profile's {}", p.horizon.value))
                            }
                            _ => Ok(()),
                        })
                        .map_err(|m| at(l, f, m))?;
                    }
                    Some(BucketSpec {
                        prefill: raw.prefill.into_iter().map(|b| b.value).collect(),
                        decode: raw.decode.into_iter().map(|b| b.value).collect(),
                    })
                }
            };
            let profile = Profile {
                name: p.name.value,
                batch: p.batch.value,
                variates: p.variates.value,
                context: p.context.value,
                horizon: p.horizon.value,
                samples,
                buckets,
                decode_block: p.decode_block.map(|b| b.value),
                family: p.family.map(|f| f.value),
            };
            profiles.push((profile, name_line));
        }
        Ok(ProfileSet { profiles: profiles.into_iter().map(|(p, _)| p).collect(), model: raw.model })
    }

    /// The profiles named, in the order asked (duplicates dropped); an empty list selects all of them.
    pub fn select(&self, names: &[String]) -> Result<Vec<Profile>> {
        if names.is_empty() {
            return Ok(self.profiles.clone());
        }
        let mut out: Vec<Profile> = Vec::with_capacity(names.len());
        for name in names {
            let p = self.get(name).ok_or_else(|| Error::UnknownProfile {
                name: name.clone(),
                available: self.profiles.iter().map(|p| p.name.clone()).collect(),
            })?;
            if !out.iter().any(|q| q.name == p.name) {
                out.push(p.clone());
            }
        }
        Ok(out)
    }

    pub fn get(&self, name: &str) -> Option<&Profile> {
        self.profiles.iter().find(|p| p.name == name)
    }
}

/// The file as written, with the location of every value so that semantic checks can name its line. `Profile`
/// itself stays plain: it is also serialized into manifests.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSet {
    #[serde(default)]
    model: Option<ConfigModel>,
    profiles: Spanned<Vec<Spanned<RawProfile>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProfile {
    name: Spanned<String>,
    batch: Spanned<usize>,
    variates: Spanned<usize>,
    context: Spanned<usize>,
    horizon: Spanned<usize>,
    #[serde(default)]
    samples: Option<Spanned<usize>>,
    #[serde(default)]
    buckets: Option<Spanned<RawBuckets>>,
    #[serde(default)]
    decode_block: Option<Spanned<usize>>,
    #[serde(default)]
    family: Option<Spanned<serde_json::Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBuckets {
    #[serde(default)]
    prefill: Vec<Spanned<PrefillSpec>>,
    #[serde(default)]
    decode: Vec<Spanned<DecodeSpec>>,
}

/// A listed bucket's rows and context must be positive and within the profile's bounds.
fn check_bucket(
    rows: usize,
    max_rows: usize,
    what: &str,
    context: usize,
    max_context: usize,
) -> std::result::Result<(), String> {
    if rows == 0 || context == 0 {
        return Err("rows and context must be ≥ 1".into());
    }
    if rows > max_rows {
        return Err(format!("{rows} rows exceed the profile's {what} = {max_rows}"));
    }
    if context > max_context {
        return Err(format!("context {context} exceeds the profile's {max_context}"));
    }
    Ok(())
}

/// Profile names become directory names in the bundle, so they are restricted to a portable character set.
fn check_name(name: &str) -> std::result::Result<(), String> {
    if name.is_empty() {
        return Err("must not be empty".into());
    }
    if let Some(c) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-')) {
        return Err(format!(
            "`{name}` contains {c:?}: names may only use [A-Za-z0-9_-] (each becomes a directory name)"
        ));
    }
    Ok(())
}

/// A YAML syntax or type error, with serde-saphyr's location but without its multi-line snippet (the message
/// must fit one log line).
fn syntax_error(e: &serde_saphyr::Error, source_name: &str) -> Error {
    let loc = e.location().filter(|l| l.line() > 0);
    let (line, column) = loc.map_or((0, 0), |l| (l.line(), l.column()));
    let message = e.without_snippet().to_string();
    // serde-saphyr ends its messages with the location, which our prefix already gives.
    let message =
        message.strip_suffix(&format!(" at line {line}, column {column}")).unwrap_or(&message).to_string();
    Error::ProfileSyntax { file: source_name.to_string(), line, column, message }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) const GOOD: &str = "\
# comment
profiles:
  - name: a
    batch: 1
    variates: 2
    context: 512
    horizon: 336
  - name: b-2_x
    batch: 8
    variates: 1
    context: 64
    horizon: 64
    samples: 16
";

    fn err(text: &str) -> String {
        ProfileSet::from_yaml(text, "x.yaml").unwrap_err().to_string()
    }

    #[test]
    fn parses_profiles_with_default_samples() {
        let set = ProfileSet::from_yaml(GOOD, "x.yaml").unwrap();
        assert_eq!(set.profiles.len(), 2);
        assert_eq!(set.profiles[0].samples, 0);
        assert_eq!(
            set.profiles[1],
            Profile {
                name: "b-2_x".into(),
                batch: 8,
                variates: 1,
                context: 64,
                horizon: 64,
                samples: 16,
                buckets: None,
                decode_block: None,
                family: None
            }
        );
    }

    #[test]
    fn zero_bound_names_field_and_line() {
        let e = err(&GOOD.replace("batch: 8", "batch: 0"));
        assert_eq!(e, "x.yaml: line 9: profiles[1].batch must be ≥ 1");
        let e = err(&GOOD.replace("horizon: 336", "horizon: 0"));
        assert_eq!(e, "x.yaml: line 7: profiles[0].horizon must be ≥ 1");
    }

    #[test]
    fn bad_names_are_errors_with_line() {
        let e = err(&GOOD.replace("name: b-2_x", "name: a"));
        assert!(
            e.starts_with("x.yaml: line 8: profiles[1].name `a` repeats profiles[0].name (line 3)"),
            "{e}"
        );
        let e = err(&GOOD.replace("name: b-2_x", "name: b/c"));
        assert!(e.starts_with("x.yaml: line 8: profiles[1].name `b/c` contains '/'"), "{e}");
        let e = err(&GOOD.replace("name: a", "name: ''"));
        assert_eq!(e, "x.yaml: line 3: profiles[0].name must not be empty");
    }

    #[test]
    fn syntax_type_and_unknown_field_errors_carry_the_line() {
        let e = err(&GOOD.replace("samples: 16", "samples: 16\n    bogus: 1"));
        assert!(e.starts_with("x.yaml: line 14, column 5: unknown field `bogus`"), "{e}");
        assert!(!e.contains("at line"), "location given twice: {e}");
        let e = err(&GOOD.replace("context: 64", "context: -3"));
        assert!(e.starts_with("x.yaml: line 11, column"), "{e}");
        let e = err(&GOOD.replace("    batch: 8\n", ""));
        assert!(e.contains("batch"), "{e}");
        let e = err("profiles: [\n");
        assert!(e.starts_with("x.yaml: line "), "{e}");
        let e = err(&GOOD.replace("batch: 8", "batch: 8\n    batch: 9"));
        assert!(e.starts_with("x.yaml: line 10, column 5:") && e.contains("batch"), "{e}");
    }

    #[test]
    fn a_model_block_may_name_a_tokenizer_and_then_needs_its_directory() {
        let text = format!("model:\n  generation: toto-1.0\n  checkpoint: a/b\n  tokenizer: a/tok\n{GOOD}");
        let set = ProfileSet::from_yaml(&text, "x.yaml").unwrap();
        let model = set.model.unwrap();
        assert_eq!(model.tokenizer.as_deref(), Some("a/tok"));
        let e = model.check_tokenizer(None, "x.yaml").unwrap_err().to_string();
        assert!(e.contains("x.yaml") && e.contains("a/tok") && e.contains("--tokenizer"), "{e}");
        model.check_tokenizer(Some(Path::new("/some/dir")), "x.yaml").unwrap();
        // without one, nothing is asked for (the export itself refuses a stray --tokenizer)
        let set =
            ProfileSet::from_yaml(&format!("model:\n  generation: toto-1.0\n  checkpoint: a/b\n{GOOD}"), "x")
                .unwrap();
        assert_eq!(set.model.as_ref().unwrap().tokenizer, None);
        set.model.unwrap().check_tokenizer(None, "x").unwrap();
    }

    #[test]
    fn empty_list_is_an_error() {
        assert_eq!(err("\nprofiles: []\n"), "x.yaml: line 2: profiles must list at least one profile");
    }

    #[test]
    fn select_keeps_order_and_lists_available_names() {
        let set = ProfileSet::from_yaml(GOOD, "x.yaml").unwrap();
        assert_eq!(set.select(&[]).unwrap().len(), 2);
        let names = ["b-2_x".to_string(), "a".to_string(), "a".to_string()];
        let picked: Vec<String> = set.select(&names).unwrap().into_iter().map(|p| p.name).collect();
        assert_eq!(picked, ["b-2_x", "a"]);
        let e = set.select(&["zzz".to_string()]).unwrap_err().to_string();
        assert!(e.contains("`zzz`") && e.contains("a, b-2_x"), "{e}");
    }
}
