//! The throwaway third family in the binary (`tests/integration/third_family.rs`; never shipped): no
//! benchmark, no golden cases, no backtest reference; its `bundle info` line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::profile_lines::{profile_info, BucketInfo, ProfileInfo};

/// No eager reference for `totoc backtest --reference-checkpoint` (it says so instead of running one).
pub const BACKTEST_REFERENCE_SCRIPTS: &[(&str, &str)] = &[];

pub fn bench() -> anyhow::Result<ExitCode> {
    anyhow::bail!("the toy family has no benchmark workloads")
}

pub fn verify(_cases: &[PathBuf]) -> anyhow::Result<ExitCode> {
    anyhow::bail!("the toy family has no golden cases")
}

pub fn golden_reports(path: &Path) -> Result<(String, Vec<engines::compare::Report>), String> {
    Err(format!("{}: the toy family has no golden cases", path.display()))
}

pub fn profile(g: &exporter::toy::ToyGraph, precision: &str) -> ProfileInfo {
    let line = BucketInfo {
        kind: "pass".into(),
        rows: 1,
        slots: g.context,
        precision: precision.into(),
        file: g.file.clone(),
        memory_bytes: 0,
    };
    profile_info(&g.profile, vec![line])
}
