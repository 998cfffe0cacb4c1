//! Toto 2.0's section of an engine manifest: the graph sets left out, and why (the kept sets are the export
//! manifest's `Toto2ProfileEntry`s).

use serde::{Deserialize, Serialize};

/// A Toto 2.0 graph set `build-engine` left out, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Toto2Dropped {
    pub profile: String,
    pub set: String,
    pub memory_bytes: u64,
    pub reason: String,
}
