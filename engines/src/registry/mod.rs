//! The model families the engines run, and the only place in this crate that names each of them:
//!
//! * [`graphs`]: each family's sections of an engine manifest ([`EngineGraphs`]), the type the bundle format
//!   names;
//! * here: the `match`es that call into family code — loading a family's engine ([`load_family`]) and building
//!   a family's engine bundle ([`build_engine`]). Family code and the shared layers never import this module
//!   (only [`graphs`]), so the arrows run one way.
//!
//! Everything else reaches a family through [`FamilyEngine`] or asks
//! [`exporter::registry::Family::capabilities`].
//!
//! Adding a family: its folder (`engines/src/<family>/`) with an engine implementing [`FamilyEngine`] and an
//! engine-bundle builder, a field in [`EngineGraphs`], and one arm in each `match` below (see
//! docs/architecture.md).

pub mod graphs;

use std::path::Path;

use exporter::fsutil::sha256_file;
use exporter::manifest::{Manifest, MANIFEST_FILE};
use exporter::registry::AnyConfig;

pub use graphs::EngineGraphs;

use crate::backend::Target;
use crate::bundle::format::{BuildEvent, BuildOptions, EngineManifest};
use crate::error::Result;
use crate::family::{EngineLimits, FamilyEngine};

/// The engine of `manifest`'s family within `budget` bytes, and its limits.
pub(crate) fn load_family(
    manifest: &EngineManifest,
    dir: &Path,
    budget: u64,
) -> Result<(EngineLimits, Box<dyn FamilyEngine>)> {
    Ok(match &manifest.model {
        AnyConfig::Toto1(cfg) => {
            let (limits, engine) = crate::toto1::engine::Toto1Engine::load(manifest, cfg, dir, budget)?;
            (limits, Box::new(engine))
        }
        AnyConfig::Toto2(cfg) => {
            let engine = crate::toto2::engine::Toto2Engine::new(manifest, cfg, budget)?;
            (crate::toto2::engine::Toto2Engine::limits(manifest), Box::new(engine))
        }
        AnyConfig::Kronos(cfg) => {
            let (limits, engine) = crate::kronos::engine::KronosEngine::load(manifest, cfg, dir, budget)?;
            (limits, Box::new(engine))
        }
    })
}

/// `totoc build-engine`: builds an engine bundle for `target` from the export bundle at `artifacts` into `out`.
/// The source manifest is read and its bundle checked intact here; its family's builder does the rest.
pub fn build_engine(
    artifacts: &Path,
    target: &Target,
    out: &Path,
    options: &BuildOptions,
    progress: &mut dyn FnMut(BuildEvent),
) -> Result<EngineManifest> {
    let source = Manifest::read(artifacts)?;
    exporter::integrity::require_intact(artifacts, "totoc export")?;
    let source_sha = sha256_file(&artifacts.join(MANIFEST_FILE))?;
    check_target(&source, artifacts, target)?;
    match source.model.clone() {
        AnyConfig::Toto1(model) => crate::toto1::build::build_engine(
            artifacts, source, model, source_sha, target, out, options, progress,
        ),
        AnyConfig::Toto2(_) => {
            crate::toto2::build::build_engine(artifacts, &source, source_sha, target, out, options, progress)
        }
        AnyConfig::Kronos(_) => {
            crate::kronos::build::build_engine(artifacts, &source, source_sha, target, out, options, progress)
        }
    }
}

/// A target the bundle's family does not build engines for is refused before any work, naming the targets it
/// does build ([`exporter::registry::Capabilities::targets`]).
fn check_target(source: &Manifest, artifacts: &Path, target: &Target) -> Result<()> {
    let caps = source.model.family().capabilities();
    if caps.targets.contains(&target.name()) {
        return Ok(());
    }
    let fix = caps.targets.iter().map(|t| format!("`--target {t}`")).collect::<Vec<_>>().join(" or ");
    Err(crate::error::Error::Engine {
        path: artifacts.to_path_buf(),
        message: format!(
            "{} engines are not built for {} bundles yet: build with {fix}",
            target.title(),
            caps.title
        ),
    })
}

/// What `totoc forecast` (and the Python package) says once when a requested quantile level lies between the
/// family's quantile knots, so it was interpolated (none for a family without knots).
pub fn interpolation_note(family: exporter::registry::Family) -> Option<&'static str> {
    use exporter::registry::Family;
    match family {
        Family::Toto1 => None,
        Family::Toto2 => Some(crate::toto2::quantiles::INTERPOLATION_NOTE),
        Family::Kronos => None,
    }
}
