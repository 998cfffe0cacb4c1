//! Each family's sections of an engine manifest ([`EngineGraphs`]): the one type that names every family's
//! engine-manifest entries. It names only the families' manifest modules, so the bundle format may depend on it;
//! the dispatch into family code is [`super`], which nothing below it imports.

use serde::{Deserialize, Serialize};

/// Each family's graphs in an engine manifest. Written flattened, as top-level manifest fields, so the engine
/// format (`totoc-engine/4`) is unchanged: `profiles` and `dropped` (Toto 1.0; empty in other engines),
/// `toto2_profiles` and `toto2_dropped` (Toto 2.0), `kronos_profiles` and `kronos_dropped` (Kronos; each absent
/// in other engines).
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
    /// Toto 2.0 TensorRT engines and their stamps (TensorRT engine bundles only; absent in others).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub toto2_tensorrt: Vec<crate::toto2::manifest::Toto2TensorRtGraph>,
    /// Kronos profiles: the graphs kept (absent in other engines; see [`crate::kronos::engine`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kronos_profiles: Vec<exporter::kronos::manifest::KronosProfileEntry>,
    /// Kronos graphs left out for the memory budget, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kronos_dropped: Vec<crate::kronos::manifest::KronosDropped>,
}

impl EngineGraphs {
    /// The TensorRT engine stamp of every graph that has one (file, stamp): checked against this machine at load.
    pub fn tensorrt_stamps(&self) -> Vec<(&str, &crate::tensorrt::EngineStamp)> {
        crate::toto1::manifest::graphs(&self.profiles)
            .filter_map(|(_, g)| g.tensorrt.as_ref().map(|s| (g.file.as_str(), s)))
            .chain(self.toto2_tensorrt.iter().map(|g| (g.file.as_str(), &g.tensorrt)))
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
            .chain(self.kronos_profiles.iter().map(|p| &p.profile))
            .collect()
    }

    /// Graph files of every profile.
    pub fn graph_count(&self) -> usize {
        self.profiles.iter().map(|p| p.graphs.len()).sum::<usize>()
            + self.toto2_profiles.iter().flat_map(|p| &p.sets).map(|s| s.graphs.len()).sum::<usize>()
            + self.kronos_profiles.iter().map(|p| p.graphs.len()).sum::<usize>()
    }
}
