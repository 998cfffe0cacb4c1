//! The model families the engines run, and the only place in this crate that names each of them: the `match`es
//! that build a family's engine and a family's engine bundle. Everything else reaches a family through
//! [`FamilyEngine`] or asks [`exporter::registry::Family::capabilities`].
//!
//! Adding a family: its folder (`engines/src/<family>/`) with an engine implementing [`FamilyEngine`] and an
//! engine-bundle builder, and one arm in each `match` below (see docs/architecture.md).

use std::path::Path;

use exporter::registry::AnyConfig;
use serde::{Deserialize, Serialize};

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

/// `totoc build-engine` by the export bundle's family: `source` is its manifest, already read and verified,
/// `source_sha` that manifest's sha256.
pub(crate) fn build_family_engine(
    artifacts: &Path,
    source: exporter::manifest::Manifest,
    source_sha: String,
    target: &crate::backend::Target,
    out: &Path,
    options: &crate::bundle::BuildOptions,
    progress: &mut dyn FnMut(crate::bundle::BuildEvent),
) -> Result<EngineManifest> {
    match source.model.clone() {
        AnyConfig::Toto1(model) => crate::toto1::build::build_engine(
            artifacts, source, model, source_sha, target, out, options, progress,
        ),
        AnyConfig::Toto2(_) => {
            crate::toto2::build::build_engine(artifacts, &source, source_sha, target, out, options, progress)
        }
    }
}

/// Each family's graphs in an engine manifest. Written flattened, as top-level manifest fields, so the engine
/// format (`totoc-engine/4`) is unchanged: `profiles` and `dropped` (Toto 1.0; empty in other engines),
/// `toto2_profiles` and `toto2_dropped` (Toto 2.0; absent in other engines).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct EngineGraphs {
    /// Toto 1.0 profiles (empty in other engines).
    pub profiles: Vec<crate::toto1::manifest::EngineProfile>,
    pub dropped: Vec<crate::toto1::manifest::DroppedBucket>,
    /// Toto 2.0 profiles: the graph sets kept (absent in other engines; see [`crate::toto2::engine`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub toto2_profiles: Vec<exporter::toto2::manifest::Toto2ProfileEntry>,
    /// Toto 2.0 graph sets left out for the memory budget, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub toto2_dropped: Vec<crate::toto2::manifest::Toto2Dropped>,
}

impl EngineGraphs {
    /// The TensorRT engine stamp of every graph that has one (file, stamp): checked against this machine at load.
    pub fn tensorrt_stamps(&self) -> Vec<(&str, &crate::tensorrt::EngineStamp)> {
        crate::toto1::manifest::graphs(&self.profiles)
            .filter_map(|(_, g)| g.tensorrt.as_ref().map(|s| (g.file.as_str(), s)))
            .collect()
    }

    /// Every Toto 1.0 bucket graph of every profile.
    pub fn graphs(
        &self,
    ) -> impl Iterator<Item = (&crate::toto1::manifest::EngineProfile, &crate::toto1::manifest::EngineGraph)>
    {
        crate::toto1::manifest::graphs(&self.profiles)
    }

    /// The engine's profiles (their bounds).
    pub fn profiles(&self) -> Vec<&exporter::profile::Profile> {
        self.profiles
            .iter()
            .map(|p| &p.profile)
            .chain(self.toto2_profiles.iter().map(|p| &p.profile))
            .collect()
    }

    /// Graph files of every profile.
    pub fn graph_count(&self) -> usize {
        self.profiles.iter().map(|p| p.graphs.len()).sum::<usize>()
            + self.toto2_profiles.iter().flat_map(|p| &p.sets).map(|s| s.graphs.len()).sum::<usize>()
    }
}
