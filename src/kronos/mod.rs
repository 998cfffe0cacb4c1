//! Kronos in the binary: `bundle info` lines of its bundles ([`info`]), `totoc verify` on its reference cases
//! ([`verify`]), `totoc bench` against upstream ([`bench`]) and the backtest's upstream reference ([`backtest`]).
pub mod backtest;
pub mod bench;
pub mod info;
pub mod verify;
