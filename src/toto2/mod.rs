//! Toto 2.0 in the binary: its `totoc bench` workloads against toto-2 eager ([`bench`]) and its `totoc verify`
//! table ([`verify`]).
pub mod bench;
pub mod verify;
