//! Skipping a build whose output is already there: `totoc export` and `totoc build-engine` record the hashes and
//! values of everything that decides their output in the manifest's `inputs` (a sorted name → value map), and
//! before building compare them with the bundle already at `--out`.
//!
//! * same inputs and the bundle intact ([`crate::integrity`]): [`CacheCheck::Hit`], nothing is written;
//! * a bundle of ours with other inputs (or damaged): [`CacheCheck::Changed`] names what differs, and the build
//!   replaces it (staged beside it, then swapped in);
//! * nothing there, or not a bundle: [`CacheCheck::Absent`] (a non-empty directory that is not a bundle is still
//!   refused without `--force`).
//!
//! `--force` rebuilds without asking.

use std::path::Path;

use crate::bundle_files::MANIFEST_FILE;
use crate::integrity::check_bundle;
pub use crate::manifest::BuildInputs;

/// The bundle at `--out` against this build's inputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheCheck {
    /// Built from exactly these inputs and intact: skip.
    Hit,
    /// A bundle built from other inputs (each entry `name: old → new`), or damaged: rebuild and replace it.
    Changed(Vec<String>),
    /// No bundle with recorded inputs there.
    Absent,
}

impl CacheCheck {
    /// Whether the build may replace what is at `--out` without `--force`.
    pub fn replaces(&self) -> bool {
        matches!(self, CacheCheck::Changed(_))
    }
}

/// Compares the bundle at `out` with `inputs`.
pub fn check(out: &Path, inputs: &BuildInputs) -> CacheCheck {
    let Ok(text) = std::fs::read(out.join(MANIFEST_FILE)) else { return CacheCheck::Absent };
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(&text) else { return CacheCheck::Absent };
    let Some(old) = v.get("inputs").and_then(|i| serde_json::from_value::<BuildInputs>(i.clone()).ok())
    else {
        return CacheCheck::Absent;
    };
    let changed = diff(&old, inputs);
    if !changed.is_empty() {
        return CacheCheck::Changed(changed);
    }
    match check_bundle(out) {
        Ok(p) if p.is_empty() => CacheCheck::Hit,
        Ok(p) => CacheCheck::Changed(p.iter().map(|p| format!("the bundle is damaged ({p})")).collect()),
        Err(e) => CacheCheck::Changed(vec![format!("the bundle cannot be checked ({e})")]),
    }
}

/// `name: old → new` for every input that differs (hashes shortened to 12 digits).
pub fn diff(old: &BuildInputs, new: &BuildInputs) -> Vec<String> {
    let short = |v: Option<&String>| match v {
        None => "(none)".to_string(),
        Some(s) if s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) => s[..12].to_string(),
        Some(s) => s.clone(),
    };
    let names: std::collections::BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    names
        .into_iter()
        .filter(|n| old.get(*n) != new.get(*n))
        .map(|n| format!("{n}: {} → {}", short(old.get(n)), short(new.get(n))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(pairs: &[(&str, &str)]) -> BuildInputs {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn diff_names_each_changed_added_and_removed_input() {
        let h1 = "a".repeat(64);
        let old = inputs(&[("config", &h1), ("totoc", "0.2.0"), ("gone", "x")]);
        let new = inputs(&[("config", &"b".repeat(64)), ("totoc", "0.2.0"), ("opset", "24")]);
        assert_eq!(
            diff(&old, &new),
            ["config: aaaaaaaaaaaa → bbbbbbbbbbbb", "gone: x → (none)", "opset: (none) → 24"]
        );
        assert!(diff(&new, &new).is_empty());
    }

    #[test]
    fn a_directory_without_recorded_inputs_is_absent() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(check(d.path(), &BuildInputs::new()), CacheCheck::Absent);
        std::fs::write(d.path().join(MANIFEST_FILE), b"{\"format\": \"totoc-export/3\"}").unwrap();
        assert_eq!(check(d.path(), &BuildInputs::new()), CacheCheck::Absent);
    }
}
