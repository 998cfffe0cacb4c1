//! A loaded session that one or more runners bind their I/O to ([`SharedSession`]).

use std::path::Path;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use exporter::signature::TensorSig;
use ort::session::Session;

use crate::backend::{SessionConfig, Target};
use crate::error::Result;
use crate::runtime::Runtime;

use super::facts::ModelFacts;
use super::ort_glue::{ep_assignment, open_session, ProviderNodes};
use super::ort_types::dtype_of;
use super::weights::{Held, SharedWeights};

/// A loaded session that one or more [`GraphRunner`](super::GraphRunner)s bind their I/O to: one per static bucket
/// graph, or one for
/// every bucket of a shape-polymorphic graph (a TensorRT engine serving several buckets holds its weights once).
pub struct SharedSession {
    pub(super) session: Arc<Session>,
    pub(super) facts: ModelFacts,
    pub(super) held: Arc<Held>,
    pub(super) providers: Vec<ProviderNodes>,
    pub(super) copies_logged: Arc<AtomicUsize>,
}

impl std::fmt::Debug for SharedSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedSession").field("providers", &self.providers).finish_non_exhaustive()
    }
}

impl SharedSession {
    /// Opens `model` for `target` (see [`GraphRunner::load`](super::GraphRunner::load)).
    pub fn open(
        rt: &Runtime,
        model: &Path,
        name: &str,
        target: &Target,
        cfg: &SessionConfig,
        weights: Option<&SharedWeights>,
    ) -> Result<Self> {
        let copies_logged = Arc::new(AtomicUsize::new(0));
        let (session, facts, held) =
            open_session(rt, model, name, target, cfg, weights, copies_logged.clone())?;
        let providers = ep_assignment(&session);
        Ok(SharedSession {
            session: Arc::new(session),
            facts,
            held: Arc::new(held),
            providers,
            copies_logged,
        })
    }

    /// Nodes per execution provider.
    pub fn providers(&self) -> &[ProviderNodes] {
        &self.providers
    }

    /// Whether a bucket with static `inputs`/`outputs` fits this (shape-polymorphic) session: the same names and
    /// types in order, every fixed dimension equal.
    pub fn check_bucket(
        &self,
        inputs: &[TensorSig],
        outputs: &[TensorSig],
    ) -> std::result::Result<(), String> {
        let fits = |o: &ort::value::Outlet, s: &TensorSig| {
            let ty = o.dtype();
            let (Some(elem), Some(shape)) = (ty.tensor_type(), ty.tensor_shape()) else { return false };
            o.name() == s.name
                && dtype_of(elem) == Some(s.dtype)
                && shape.len() == s.shape.len()
                && shape.iter().zip(&s.shape).all(|(&d, &n)| d < 0 || d as usize == n)
        };
        let session = &self.session;
        for (what, outlets, sigs) in
            [("input", session.inputs(), inputs), ("output", session.outputs(), outputs)]
        {
            if outlets.len() != sigs.len() || !outlets.iter().zip(sigs.iter()).all(|(o, s)| fits(o, s)) {
                return Err(format!(
                    "the bucket's {what}s {:?} do not fit the shared graph's ({:?})",
                    sigs.iter().map(|s| (&s.name, &s.shape)).collect::<Vec<_>>(),
                    outlets.iter().map(|o| o.name()).collect::<Vec<_>>()
                ));
            }
        }
        Ok(())
    }
}
