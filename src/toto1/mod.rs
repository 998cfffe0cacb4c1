//! Toto 1.0 in the binary: its `totoc bench` workloads against toto-ts eager ([`bench`]) and its `totoc verify`
//! table ([`verify`]).
pub mod bench;
pub mod verify;
