//! `totoc verify`: runs golden reference cases through an engine and compares the deterministic outputs; the
//! cases and their comparison are the engine's family's (`verify.rs` in its folder, via
//! [`crate::registry`]).
use std::process::ExitCode;

use anyhow::{bail, Context};
use engines::compare::find_cases;
use engines::engine::{Engine, LoadOptions};

use crate::cli::VerifyArgs;

pub fn run(a: VerifyArgs) -> anyhow::Result<ExitCode> {
    let dir = a.fixtures.clone().unwrap_or_else(|| a.engine.join("golden"));
    if !dir.is_dir() {
        bail!(
            "no golden cases at {}: pass --fixtures DIR (e.g. tests/fixtures/tiny/cases), or export with --golden DIR \
             so the bundle carries its own",
            dir.display()
        );
    }
    let cases = find_cases(&dir)?;
    if cases.is_empty() {
        bail!("{} holds no golden case (*.json)", dir.display());
    }
    let opts = LoadOptions { ort_lib: a.ort.ort_lib.clone(), ..LoadOptions::default() };
    let engine =
        Engine::load(&a.engine, &opts).with_context(|| format!("loading engine {}", a.engine.display()))?;
    crate::registry::verify(&engine, &cases, &a, &opts)
}
