//! Kronos in the binary: `bundle info` lines of its export bundles ([`info`]). Its engine, `bench` and `verify`
//! come with issue 34's engine phase; until then the registry's Kronos arms say so (`crate::registry`).
pub mod info;
