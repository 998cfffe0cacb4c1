//! Kronos's section of an engine manifest: the graphs `build-engine` left out, and why (the kept graphs are the
//! export manifest's `KronosProfileEntry`s, `kronos_profiles`).

use serde::{Deserialize, Serialize};

/// A Kronos graph `build-engine` left out, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KronosDropped {
    pub profile: String,
    /// The graph file, e.g. `default.decode.n64.t512.onnx`.
    pub file: String,
    pub memory_bytes: u64,
    pub reason: String,
}
