//! Shape buckets: one static graph shape (a kind, rows N and slots), the unit an engine loads, runs and
//! evicts, and the patch arithmetic every family sizes them with. Which buckets a profile is exported as is the
//! family's (Toto 1.0's default ladder is in its folder's `bucket.rs`).
//!
//! * **prefill** buckets: rows N × context slots S;
//! * **decode** buckets: rows N × cache slots T (context + forecast patches);
//! * the other kinds of [`GraphKind`] likewise: rows × tokens per row, or rows × cache slots for a kind that runs
//!   one token per row.

use serde::{Deserialize, Serialize};

use crate::signature::GraphKind;

/// One static graph shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Bucket {
    pub kind: GraphKind,
    /// Rows N.
    pub rows: usize,
    /// Prefill: context slots S. Decode: cache slots T.
    pub slots: usize,
}

impl Bucket {
    pub fn prefill(rows: usize, slots: usize) -> Self {
        Bucket { kind: GraphKind::Prefill, rows, slots }
    }

    pub fn decode(rows: usize, slots: usize) -> Self {
        Bucket { kind: GraphKind::Decode, rows, slots }
    }

    /// A bucket of `kind` with `rows` rows and `slots` slots (tokens per row, or cache slots for a kind that
    /// runs one token per row: [`GraphKind::per_row`]).
    pub fn of(kind: GraphKind, rows: usize, slots: usize) -> Self {
        Bucket { kind, rows, slots }
    }

    /// File stem of the bucket's graph in a bundle: `default.prefill.n16.s8`, `default.decode.n64.t14`.
    pub fn stem(&self, profile: &str) -> String {
        let letter = if self.kind.per_row() { 't' } else { 's' };
        format!("{profile}.{}.n{}.{letter}{}", self.kind.as_str(), self.rows, self.slots)
    }

    /// Tokens (row × slot positions) one run processes: what its compute scales with.
    pub fn tokens(&self) -> usize {
        if self.kind.per_row() {
            self.rows
        } else {
            self.rows * self.slots
        }
    }
}

/// Context slots `ceil(points / P)`.
pub fn slots(points: usize, patch: usize) -> usize {
    points.div_ceil(patch)
}

/// Cache slots a decode needs for `context` and `horizon` points: the context patches plus one per forecast
/// patch after the first (the prefill predicts the first; each decode step writes the patch it feeds back).
pub fn decode_slots(context: usize, horizon: usize, patch: usize) -> usize {
    slots(context, patch) + slots(horizon, patch).saturating_sub(1)
}
