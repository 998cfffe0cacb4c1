//! Toto 2.0 in the binary: its `totoc bench` workloads against toto-2 eager ([`bench`]), its `totoc bundle info` lines ([`info`]) and its `totoc verify`
//! table ([`verify`]).
pub mod backtest;
pub mod bench;
pub mod info;
pub mod verify;
