//! Kronos in the binary: `bundle info` lines of its bundles ([`info`]), `totoc verify` on its reference cases
//! ([`verify`]), `totoc bench` against upstream ([`bench`]), the speed bound of a run ([`bound`]) and the backtest's upstream reference ([`backtest`]).
pub mod backtest;
pub mod bench;
pub mod bound;
pub mod info;
pub mod verify;
