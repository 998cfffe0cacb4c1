//! Errors of reading and writing forecast data, in one style for every format: where (`FILE:LINE`,
//! `FILE: row N` for Parquet, `FILE: series ID`), then the problem, then the fix.
//!
//! Request checks done by the engines crate (`engines::request`) already follow that style: they are given the
//! same location text (`at`) and pass through unchanged.

use std::fmt;

/// Where in an input something is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loc {
    /// A CSV or JSON Lines line (1-based).
    Line(u64),
    /// A Parquet row (1-based).
    Row(u64),
    /// An index into a JSON request's `timestamps`.
    Index(usize),
}

impl Loc {
    /// `FILE:LINE`, `FILE: row N`, `FILE: timestamps[I]`.
    pub fn at(self, source: &str) -> String {
        match self {
            Loc::Line(l) => format!("{source}:{l}"),
            Loc::Row(r) => format!("{source}: row {r}"),
            Loc::Index(i) => format!("{source}: timestamps[{i}]"),
        }
    }

    /// How another place in the same input is referred to: `line 5`, `row 5`, `timestamps[5]`.
    pub fn name(self) -> String {
        match self {
            Loc::Line(l) => format!("line {l}"),
            Loc::Row(r) => format!("row {r}"),
            Loc::Index(i) => format!("timestamps[{i}]"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// Input that cannot be read as forecast data; `message` is the problem, then the fix.
    #[error("{at}: {message}")]
    Input { at: String, message: String },
    /// A request that the engines crate's checks refused (its message names the location already).
    #[error(transparent)]
    Request(#[from] engines::Error),
    /// A file or stream that cannot be read or written.
    #[error("{path}: {err}")]
    Io { path: String, err: std::io::Error },
}

impl DataError {
    pub fn input(at: impl Into<String>, problem: impl fmt::Display, fix: impl fmt::Display) -> Self {
        DataError::Input { at: at.into(), message: format!("{problem}; {fix}") }
    }

    /// An input error whose message already says the problem and the fix.
    pub fn at(at: impl Into<String>, message: impl Into<String>) -> Self {
        DataError::Input { at: at.into(), message: message.into() }
    }
}

pub type Result<T> = std::result::Result<T, DataError>;
