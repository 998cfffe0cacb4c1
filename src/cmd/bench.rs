//! `totoc bench`: a family's reference workloads through one or more engines of that family, interleaved run by
//! run in one invocation, side by side with the family's eager reference timed in the same invocation. The
//! workloads and the reference harness belong to the family (`bench.rs` in its folder), reached through
//! [`crate::registry`].
use std::process::ExitCode;

use anyhow::{bail, Context};

use crate::cli::BenchArgs;
use crate::cmd::bench_support::parse_engines;

pub fn run(a: BenchArgs) -> anyhow::Result<ExitCode> {
    if a.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let budget = a.memory_budget.as_deref().map(engines::memory::parse_size).transpose()?;
    if a.engines.is_empty() {
        bail!("give at least one engine to time: --engine LABEL=DIR (repeatable), or `totoc bench serve` to load-test a server");
    }
    let engines_arg = parse_engines(&a.engines)?;
    // The first engine's family picks the workloads and the reference (each family has its own).
    let first = engines::bundle::EngineManifest::read(&engines_arg[0].1)
        .with_context(|| format!("reading engine {}", engines_arg[0].1.display()))?;
    let family = first.model.family();
    if let Some(name) = &a.rss_probe {
        return crate::registry::bench_rss_probe(family, &a, &engines_arg[0].1, name, budget);
    }
    crate::registry::bench(family, &a, &engines_arg, budget)
}
