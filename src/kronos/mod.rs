//! Kronos in the binary: `bundle info` lines of its bundles ([`info`]), `totoc verify` on its reference cases
//! ([`verify`]) and `totoc bench` against upstream ([`bench`]).
pub mod bench;
pub mod info;
pub mod verify;
