//! The model families the binary serves, and the only place in it that names each of them: each family's
//! `bench` workloads and reference harness, its `backtest` reference harness, its `verify` and readiness golden cases, and its notes. The rest of
//! the binary asks [`Family::capabilities`] or calls these.
//!
//! Adding a family: its folder (`src/<family>/`: `bench.rs`, `verify.rs`) and one arm in each `match` below
//! (see docs/architecture.md).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use engines::compare::Report;
use engines::engine::{Engine, LoadOptions};
use exporter::registry::Family;

use crate::cli::{BenchArgs, VerifyArgs};
use crate::profile_lines::ProfileInfo;

/// `totoc bench` on engines of `family` (its workloads, against its reference).
pub fn bench(
    family: Family,
    a: &BenchArgs,
    engines_arg: &[(String, PathBuf)],
    budget: Option<u64>,
) -> anyhow::Result<ExitCode> {
    match family {
        Family::Toto1 => crate::toto1::bench::run(a, engines_arg, budget),
        Family::Toto2 => crate::toto2::bench::run(a, engines_arg, budget),
        Family::Kronos => crate::kronos::bench::run(a, engines_arg, budget),
    }
}

/// `totoc bench --rss-probe WORKLOAD` (the child process that measures one workload's peak RSS).
pub fn bench_rss_probe(
    family: Family,
    a: &BenchArgs,
    dir: &Path,
    name: &str,
    budget: Option<u64>,
) -> anyhow::Result<ExitCode> {
    match family {
        Family::Toto1 => crate::toto1::bench::rss_probe(a, dir, name, budget),
        Family::Toto2 => crate::toto2::bench::rss_probe(a, dir, name, budget),
        Family::Kronos => crate::kronos::bench::rss_probe(a, dir, name, budget),
    }
}

/// `totoc backtest --reference-checkpoint`: the family's eager reference harness, `(file name, text)` of each
/// script (the first is run), which `cmd/backtest/reference.rs` runs on the windows' requests.
pub fn backtest_reference_scripts(family: Family) -> &'static [(&'static str, &'static str)] {
    match family {
        Family::Toto1 => crate::toto1::backtest::REFERENCE_SCRIPTS,
        Family::Toto2 => crate::toto2::backtest::REFERENCE_SCRIPTS,
        Family::Kronos => crate::kronos::backtest::REFERENCE_SCRIPTS,
    }
}

/// The speed bound of a run of `calls` (each one engine call's series, as admitted) on `engine`, measured now
/// with `threads` reading threads; `None` for a family that gives none.
pub fn speed_bound(
    engine: &Engine,
    calls: &[Vec<engines::budget::RequestSize>],
    threads: usize,
) -> Option<anyhow::Result<crate::speed_bound::SpeedBound>> {
    match engine.info().model {
        Family::Toto1 => None,
        Family::Toto2 => None,
        Family::Kronos => Some(crate::kronos::bound::run_bound(engine, calls, threads)),
    }
}

/// `totoc verify`: the engine family's golden cases, printed as its table.
pub fn verify(
    engine: &Engine,
    cases: &[PathBuf],
    a: &VerifyArgs,
    opts: &LoadOptions,
) -> anyhow::Result<ExitCode> {
    match engine.info().model {
        Family::Toto1 => crate::toto1::verify::run(engine, cases, a, opts),
        Family::Toto2 => crate::toto2::verify::run(engine, cases),
        Family::Kronos => crate::kronos::verify::run(engine, cases),
    }
}

/// One golden case of the engine's family run on `engine` (the server's readiness check): the case's name and
/// one report per output (and step).
pub fn golden_reports(engine: &Engine, path: &Path) -> Result<(String, Vec<Report>), String> {
    match engine.info().model {
        Family::Toto1 => {
            let case = engines::toto1::golden::GoldenCase::read(path).map_err(|e| e.to_string())?;
            let tol = engines::toto1::golden::Tolerances::default();
            let reports = engines::toto1::golden::check_case(engine, &case, &tol)
                .map_err(|e| format!("{}: {e}", case.name))?;
            Ok((case.name, reports))
        }
        Family::Toto2 => {
            let case = engines::toto2::golden::Toto2Case::read(path).map_err(|e| e.to_string())?;
            let reports = engines::toto2::golden::check_case(engine, &case)
                .map_err(|e| format!("{}: {e}", case.name))?;
            Ok((case.name, reports))
        }
        Family::Kronos => crate::kronos::verify::reports(engine, path).map_err(|e| format!("{e:#}")),
    }
}

/// `totoc bundle info`: each profile of an export bundle, every family's section in turn.
pub fn export_profiles(g: &exporter::registry::FamilyGraphs) -> Vec<ProfileInfo> {
    g.profiles
        .iter()
        .map(crate::toto1::info::export_profile)
        .chain(g.toto2_profiles.iter().map(|p| crate::toto2::info::profile(p, None)))
        .chain(g.kronos_profiles.iter().map(crate::kronos::info::profile))
        .collect()
}

/// `totoc bundle info`: each profile of an engine, every family's section in turn.
pub fn engine_profiles(g: &engines::registry::EngineGraphs, precision: &str) -> Vec<ProfileInfo> {
    g.profiles
        .iter()
        .map(|p| crate::toto1::info::engine_profile(p, precision))
        .chain(g.toto2_profiles.iter().map(|p| crate::toto2::info::profile(p, Some(precision))))
        .chain(g.kronos_profiles.iter().map(crate::kronos::info::profile))
        .collect()
}
