//! Toto 1.0 (toto-ts 0.2.0): what only the first model family needs.
//!
//! * [`build`]: `totoc build-engine` for a Toto 1.0 export bundle.

pub mod build;
