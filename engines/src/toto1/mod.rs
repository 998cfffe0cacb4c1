//! Toto 1.0 (toto-ts 0.2.0): the engine behind the [`crate::engine::Engine`] handle ([`engine`]).
pub mod engine;
