//! The model families the engines run, and the only place in this crate that names each of them: the `match`es
//! that build a family's engine and a family's engine bundle. Everything else reaches a family through
//! [`FamilyEngine`] or asks [`exporter::registry::Family::capabilities`].
//!
//! Adding a family: its folder (`engines/src/<family>/`) with an engine implementing [`FamilyEngine`] and an
//! engine-bundle builder, and one arm in each `match` below (see docs/architecture.md).

use std::path::Path;

use exporter::registry::AnyConfig;

use crate::bundle::EngineManifest;
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
    })
}
