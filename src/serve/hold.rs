//! What one request holds of the server, for exactly as long as its work lasts.
//!
//! [`ByteBudget`] is `--max-bytes-in-flight`, with a per-client share (`--max-bytes-per-peer`): bytes are taken
//! as a request's body arrives (a first [`FIRST_HOLD`] at most from what it declares, the rest as it arrives),
//! then for what its decode builds
//! ([`engines::bounded`]'s estimate), then for its answer (the engine's output and its encoding) before the
//! engine runs. A request that could never fit is refused with 413 / RESOURCE_EXHAUSTED naming the limit; one
//! that does not fit now gets 503 with `Retry-After`.
//!
//! A [`Ticket`] is one request's hold: its bytes, its `--max-in-flight` slot once taken, and whether its client
//! left. It is shared (`Arc`) by everything that works for the request — the handler, a decode on the blocking
//! pool, the batcher's job, the response body — and gives everything back when the last of them drops it:
//! when the last frame of the answer is written, or when the last piece of work for a client that left ends.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::error::{Overload, ServeError};
use super::metrics::Metrics;

tokio::task_local! {
    /// The ticket of the gRPC call whose future is being polled, for its codec (`None`: a health probe, never
    /// charged; see codec.rs).
    pub static CALL: Option<Arc<Ticket>>;
}

/// Holds one of the `--max-in-flight` slots while a request is received and served.
pub struct InFlight {
    _permit: OwnedSemaphorePermit,
    metrics: Arc<Metrics>,
}

impl InFlight {
    pub fn new(permit: OwnedSemaphorePermit, metrics: Arc<Metrics>) -> Self {
        InFlight { _permit: permit, metrics }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.metrics.in_flight.dec();
    }
}

/// Bytes in KiB permits (rounded up; at most what a semaphore holds).
fn kib(bytes: u64) -> u32 {
    bytes.div_ceil(1024).min(u64::from(u32::MAX >> 4)) as u32
}

/// The first hold of a body or message: what it declares, up to this much; beyond it the hold grows with the
/// bytes that arrive (never from a declaration).
pub const FIRST_HOLD: u64 = 1 << 20;

/// What a body of `declared` bytes (when known) with `received` bytes in holds on the wire: its first hold, or
/// what arrived, rounded up to 64 KiB (so the budget is not asked at every frame).
pub fn wire_hold(declared: Option<u64>, received: u64) -> u64 {
    let first = declared.map_or(0, |d| d.min(FIRST_HOLD));
    received.div_ceil(64 << 10).saturating_mul(64 << 10).max(first)
}

/// The most bytes one value of an answer takes encoded as JSON text: an f32 in its shortest round-trip form
/// (`-1.1754944e-38`) and a separator.
pub const JSON_VALUE_BYTES: u64 = 15;
/// ... as a binary tensor (little-endian f32).
pub const BINARY_VALUE_BYTES: u64 = 4;

/// An upper bound of an encoded answer's size: `values` values, `steps` forecast steps in all (each may carry
/// a timestamp), `series` series (each with its own keys and parameters), as JSON text or binary tensors.
pub fn encoded_bytes(values: u64, steps: u64, series: u64, json: bool) -> u64 {
    let per_value = if json { JSON_VALUE_BYTES } else { BINARY_VALUE_BYTES };
    values
        .saturating_mul(per_value)
        .saturating_add(steps.saturating_mul(48))
        .saturating_add(series.saturating_mul(1024))
        .saturating_add(4096)
}

/// What an answer holds while it is made and written: the engine's output (4 bytes a value), the protocol's
/// copy of it (4 bytes a value), and the encoded answer twice (its body, and the transport's buffer of it).
pub fn answer_bytes(values: u64, encoded: u64) -> u64 {
    values.saturating_mul(8).saturating_add(encoded.saturating_mul(2))
}

/// `--max-bytes-in-flight`, shared out per client address (see the module docs).
pub struct ByteBudget {
    total: u64,
    per_peer: u64,
    permits: Arc<Semaphore>,
    /// KiB held per client address.
    peers: Mutex<HashMap<IpAddr, u32>>,
    metrics: Arc<Metrics>,
}

impl ByteBudget {
    pub fn new(total: u64, per_peer: u64, metrics: Arc<Metrics>) -> Arc<Self> {
        Arc::new(ByteBudget {
            total,
            per_peer: per_peer.min(total),
            permits: Arc::new(Semaphore::new(kib(total) as usize)),
            peers: Mutex::new(HashMap::new()),
            metrics,
        })
    }

    /// A hold for one request of `peer`, holding nothing yet.
    pub fn ticket(self: &Arc<Self>, peer: IpAddr) -> Arc<Ticket> {
        Arc::new(Ticket {
            budget: self.clone(),
            peer,
            state: Mutex::new(Held::default()),
            gone: AtomicBool::new(false),
            refusal: Mutex::new(None),
        })
    }

    /// Bytes held by every request now.
    pub fn held(&self) -> u64 {
        u64::from(kib(self.total) - self.permits.available_permits() as u32) * 1024
    }

    fn peers(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, u32>> {
        self.peers.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[derive(Default)]
struct Held {
    permit: Option<OwnedSemaphorePermit>,
    kib: u32,
    /// Bytes of the request as received (body or message).
    wire: u64,
    /// What decoding it built (an upper bound).
    decoded: u64,
    /// The answer: the engine's output and its encoding.
    answer: u64,
    slot: Option<InFlight>,
}

impl Held {
    fn bytes(&self) -> u64 {
        self.wire.saturating_add(self.decoded).saturating_add(self.answer)
    }
}

/// What a request holds for its bytes (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// Its body or message, as received.
    Wire,
    /// What decoding it builds.
    Decoded,
    /// Its answer.
    Answer,
}

/// One request's hold (see the module docs).
pub struct Ticket {
    budget: Arc<ByteBudget>,
    peer: IpAddr,
    state: Mutex<Held>,
    gone: AtomicBool,
    /// The refusal that stopped a bounded decode (the decoder's own error only carries its text).
    refusal: Mutex<Option<ServeError>>,
}

impl Ticket {
    fn state(&self) -> std::sync::MutexGuard<'_, Held> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What the answer holds (its output and encoding, [`answer_bytes`]; 0 before it is held).
    pub fn answer_held(&self) -> u64 {
        self.state().answer
    }

    /// Grows `part` to `bytes` (never shrinks it); refuses when the request would not fit.
    pub fn hold(&self, part: Part, bytes: u64) -> Result<(), ServeError> {
        let mut st = self.state();
        let mut want = Held { permit: None, slot: None, ..*st };
        let slot = match part {
            Part::Wire => &mut want.wire,
            Part::Decoded => &mut want.decoded,
            Part::Answer => &mut want.answer,
        };
        if bytes <= *slot {
            return Ok(());
        }
        *slot = bytes;
        let need = kib(want.bytes());
        if need <= st.kib {
            st.wire = want.wire;
            st.decoded = want.decoded;
            st.answer = want.answer;
            return Ok(());
        }
        let b = &self.budget;
        let total = u64::from(need) * 1024;
        if total > b.per_peer {
            return Err(self.never_fits(total, part));
        }
        let more = need - st.kib;
        // The whole budget first (so that one client's share equal to the whole is refused as the whole), then
        // the client's share.
        let Ok(permit) = b.permits.clone().try_acquire_many_owned(more) else {
            b.metrics.reject(Overload::BytesInFlight.label());
            return Err(ServeError::overloaded(
                Overload::BytesInFlight,
                format!(
                    "the requests being received and served hold the server's budget of {} bytes \
                     (--max-bytes-in-flight); retry after the Retry-After delay",
                    b.total
                ),
            ));
        };
        {
            let mut peers = b.peers();
            let mine = peers.get(&self.peer).copied().unwrap_or(0);
            if u64::from(mine + more) * 1024 > b.per_peer {
                let held = u64::from(mine) * 1024;
                drop(peers);
                drop(permit);
                b.metrics.reject("peer_bytes");
                return Err(ServeError::overloaded(
                    Overload::BytesInFlight,
                    format!(
                        "this client's requests hold {held} bytes of the server's memory, its share of {} \
                         (--max-bytes-per-peer); retry after the Retry-After delay",
                        b.per_peer
                    ),
                ));
            }
            *peers.entry(self.peer).or_insert(0) += more;
        }
        match &mut st.permit {
            Some(h) => h.merge(permit),
            None => st.permit = Some(permit),
        }
        st.kib = need;
        st.wire = want.wire;
        st.decoded = want.decoded;
        st.answer = want.answer;
        Ok(())
    }

    /// Adds `bytes` to `part`.
    #[cfg(test)]
    pub fn add(&self, part: Part, bytes: u64) -> Result<(), ServeError> {
        let now = {
            let st = self.state();
            match part {
                Part::Wire => st.wire,
                Part::Decoded => st.decoded,
                Part::Answer => st.answer,
            }
        };
        self.hold(part, now.saturating_add(bytes))
    }

    fn never_fits(&self, total: u64, part: Part) -> ServeError {
        let b = &self.budget;
        b.metrics.reject("too_large");
        let what = match part {
            Part::Wire => "to receive",
            Part::Decoded => "to decode",
            Part::Answer => "to answer",
        };
        let (limit, flag) = if b.per_peer < b.total {
            (b.per_peer, "--max-bytes-per-peer")
        } else {
            (b.total, "--max-bytes-in-flight")
        };
        ServeError::TooLarge(format!(
            "this request needs at least {total} bytes of the server's memory {what}, more than one client may \
             hold ({limit} bytes, {flag}); send fewer series or values per request (binary tensor data and \
             binary outputs take the least)"
        ))
    }

    /// Counts a refusal of this request in `totoc_rejected_total{reason}`.
    pub fn reject(&self, reason: &str) {
        self.budget.metrics.reject(reason);
    }

    /// Bytes held now (rounded up to KiB).
    #[cfg(test)]
    pub fn held(&self) -> u64 {
        u64::from(self.state().kib) * 1024
    }

    /// Keeps the request's `--max-in-flight` slot until the ticket is dropped.
    pub fn keep_slot(&self, slot: InFlight) {
        self.state().slot = Some(slot);
    }

    /// The client left: work for it should stop at its next check.
    pub fn leave(&self) {
        self.gone.store(true, Ordering::Relaxed);
    }

    pub fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Relaxed)
    }

    /// What stopped a bounded decode, if this ticket did ([`engines::bounded::Meter`]).
    pub fn take_refusal(&self) -> Option<ServeError> {
        self.refusal.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// `Ok` while the client waits; its refusal when it left.
    pub fn check_here(&self) -> Result<(), ServeError> {
        match self.is_gone() {
            false => Ok(()),
            true => Err(ServeError::ClientGone),
        }
    }
}

/// A bounded decode charges what it builds to the ticket's [`Part::Decoded`], and stops once the client left.
impl engines::bounded::Meter for Ticket {
    fn built(&self, bytes: u64) -> Result<(), String> {
        let r = self.check_here().and_then(|()| self.hold(Part::Decoded, bytes));
        r.map_err(|e| {
            let text = e.to_string();
            *self.refusal.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
            text
        })
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        if st.kib == 0 {
            return;
        }
        let mut peers = self.budget.peers();
        if let Some(mine) = peers.get_mut(&self.peer) {
            *mine = mine.saturating_sub(st.kib);
            if *mine == 0 {
                peers.remove(&self.peer);
            }
        }
        // The permit goes back to the semaphore when `st.permit` drops, with the ticket.
    }
}

/// Marks a ticket's client gone when dropped before [`Leaving::answered`]: put one in a handler's future, so
/// that a client who leaves (the future is dropped) stops the work done for it elsewhere.
pub struct Leaving {
    ticket: Arc<Ticket>,
    answered: bool,
}

impl Leaving {
    pub fn new(ticket: Arc<Ticket>) -> Self {
        Leaving { ticket, answered: false }
    }

    pub fn answered(mut self) {
        self.answered = true;
    }
}

impl Drop for Leaving {
    fn drop(&mut self) {
        if !self.answered {
            self.ticket.leave();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(total: u64, per_peer: u64) -> Arc<ByteBudget> {
        ByteBudget::new(total, per_peer, Arc::new(Metrics::new()))
    }

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2));

    #[test]
    fn bytes_are_held_as_they_grow_and_given_back_with_the_last_holder() {
        let b = budget(1 << 20, 1 << 20);
        let t = b.ticket(A);
        t.add(Part::Wire, 1000).unwrap();
        t.add(Part::Wire, 1000).unwrap();
        assert_eq!(t.held(), 2048);
        t.hold(Part::Decoded, 10_000).unwrap();
        t.hold(Part::Decoded, 5_000).unwrap(); // never shrinks
        assert_eq!(t.held(), 12 * 1024);
        assert_eq!(t.answer_held(), 0);
        t.hold(Part::Answer, 3_000).unwrap();
        assert_eq!(
            (t.answer_held(), t.held()),
            (3_000, 15 * 1024),
            "the answer's own hold, apart from the rest"
        );
        let job = t.clone();
        drop(t);
        assert_eq!(b.held(), 15 * 1024, "a holder still works for the request");
        drop(job);
        assert_eq!(b.held(), 0);
        assert!(b.peers().is_empty());
    }

    #[test]
    fn a_full_budget_is_503_and_a_request_that_never_fits_is_413() {
        let b = budget(64 << 10, 64 << 10);
        let t1 = b.ticket(A);
        t1.hold(Part::Wire, 60 << 10).unwrap();
        let t2 = b.ticket(B);
        let e = t2.hold(Part::Wire, 8 << 10).unwrap_err();
        assert_eq!(e.status(), axum::http::StatusCode::SERVICE_UNAVAILABLE, "{e}");
        assert!(e.to_string().contains("--max-bytes-in-flight"), "{e}");
        let e = t2.hold(Part::Answer, 65 << 10).unwrap_err();
        assert_eq!(e.status(), axum::http::StatusCode::PAYLOAD_TOO_LARGE, "{e}");
        assert!(
            e.to_string().contains("to answer") && e.to_string().contains("--max-bytes-in-flight"),
            "{e}"
        );
        drop(t1);
        t2.hold(Part::Wire, 8 << 10).unwrap();
    }

    #[test]
    fn one_client_holds_at_most_its_share() {
        let b = budget(256 << 10, 100 << 10);
        let a: Vec<_> = (0..3).map(|_| b.ticket(A)).collect();
        a[0].hold(Part::Wire, 50 << 10).unwrap();
        a[1].hold(Part::Wire, 50 << 10).unwrap();
        let e = a[2].hold(Part::Wire, 1).unwrap_err();
        assert!(e.to_string().contains("--max-bytes-per-peer"), "{e}");
        // Another client is served meanwhile.
        b.ticket(B).hold(Part::Wire, 100 << 10).unwrap();
        let e = b.ticket(B).hold(Part::Decoded, 101 << 10).unwrap_err();
        assert!(e.to_string().contains("more than one client may hold"), "{e}");
    }

    #[test]
    fn a_body_holds_a_first_mib_of_what_it_declares_then_what_arrives() {
        assert_eq!(wire_hold(None, 0), 0);
        assert_eq!(wire_hold(Some(600), 0), 600);
        assert_eq!(wire_hold(Some(16 << 20), 0), FIRST_HOLD);
        assert_eq!(wire_hold(Some(16 << 20), (1 << 20) + 1), (1 << 20) + (64 << 10));
        assert_eq!(wire_hold(None, 1), 64 << 10);
    }

    #[test]
    fn json_answers_stay_within_their_estimate() {
        // The longest f32s serde writes, in every output of a v2 answer.
        let worst = [-1.1754944e-38f32, -3.4028235e38, 1.0e-45, -1.2345679e-10];
        let data: Vec<f32> = (0..10_000).map(|i| worst[i % worst.len()]).collect();
        let resp = super::super::kserve::InferResponse {
            model_name: "toto".into(),
            model_version: "1".into(),
            id: Some("x".repeat(64)),
            parameters: Default::default(),
            outputs: ["mean", "quantiles", "samples"]
                .iter()
                .map(|n| super::super::kserve::OutputTensor {
                    name: n.to_string(),
                    shape: vec![10, 1000],
                    data: data.clone(),
                    binary: false,
                })
                .collect(),
        };
        let (body, _) = super::super::kserve::encode_response(&resp);
        let bound = encoded_bytes(30_000, 10 * 1000, 10, true);
        assert!((body.len() as u64) <= bound, "{} > {bound}", body.len());
        let worst_json: String =
            worst.iter().map(|x| serde_json::to_string(x).unwrap()).max_by_key(String::len).unwrap();
        assert!((worst_json.len() as u64) < JSON_VALUE_BYTES, "{worst_json} and a separator");
    }

    #[test]
    fn a_decode_meter_stops_when_the_client_leaves_and_keeps_the_refusal() {
        use engines::bounded::Meter;
        let b = budget(1 << 20, 1 << 20);
        let t = b.ticket(A);
        t.built(1000).unwrap();
        let leaving = Leaving::new(t.clone());
        drop(leaving);
        assert!(t.is_gone());
        assert!(t.built(2000).is_err());
        assert_eq!(t.take_refusal(), Some(ServeError::ClientGone));
        let t = b.ticket(A);
        Leaving::new(t.clone()).answered();
        assert!(!t.is_gone());
        let e = t.built(2 << 20).unwrap_err();
        assert!(e.contains("to decode"), "{e}");
        assert!(matches!(t.take_refusal(), Some(ServeError::TooLarge(_))));
    }
}
