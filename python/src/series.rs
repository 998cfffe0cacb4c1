//! A series read by [`crate::input`] as the engine's request: validated as a JSON request with the same fields
//! ([`RequestFields::validate`]) and admitted by the engine's context policy ([`Engine::admit`]), with the same
//! errors, in the same order, and the same `context_truncated`, whether or not the reader left its oldest points
//! out.
//!
//! A series longer than the engine's context arrives cut to its most recent `max_context` points, with a scan
//! of its whole history ([`RowScan`]). The checks validation makes on every point (a value that is not finite,
//! a variate with no observed point) are made on the scan; the request is built from the kept points, with the
//! cut recorded ([`ForecastRequest::context_cut`]) as the engine's own policy would have recorded it, so the
//! engine admits it as already cut and its response reports the history's length.

use engines::engine::Engine;
use engines::request::{ContextCut, ForecastRequest, Overrides, RequestFields};
use engines::Error;

use crate::fields::Extra;
use crate::input::{RowScan, Series};

/// What every series of one `forecast` call asks for.
pub struct Asked {
    pub horizon: usize,
    pub samples: Option<usize>,
    pub quantiles: Option<Vec<f64>>,
    pub seed: Option<u64>,
    pub strict_context: bool,
    /// The fields a family may take beyond these (passed through; validation says which it takes).
    pub extra: Extra,
}

impl Asked {
    /// Series `n`'s request fields, of `target`.
    fn fields(&self, n: usize, target: Vec<Vec<Option<f32>>>, id_mask: Option<Vec<i64>>) -> RequestFields {
        let kept = target.first().map_or(0, Vec::len);
        let (timestamps, future_timestamps) = self.extra.stamps_of(n, kept);
        RequestFields {
            id: None,
            target: target.into(),
            id_mask,
            horizon: Some(self.horizon),
            samples: self.samples,
            quantiles: self.quantiles.clone(),
            seed: self.seed,
            strict_context: Some(self.strict_context),
            columns: self.extra.columns.clone(),
            timestamps,
            future_timestamps,
            temperature: self.extra.temperature,
            top_k: self.extra.top_k,
            top_p: self.extra.top_p,
            params: self.extra.params.clone(),
        }
    }
}

/// `series` (the call's `n`-th) as the engine's admitted request (see the module docs); `at` names it in errors.
pub fn request(
    engine: &Engine,
    (n, series): (usize, Series),
    id_mask: Option<Vec<i64>>,
    asked: &Asked,
    at: &str,
) -> engines::Result<ForecastRequest> {
    let limits = engine.info().request_limits();
    let given = series.given;
    let validate = |fields: RequestFields| {
        let req = fields.validate(at, &Overrides::default(), &limits)?;
        asked.extra.check_counts(n, given, req.horizon, at)?;
        Ok::<_, Error>(req)
    };
    let Some(scan) = series.scan else {
        // the whole history: the engine's own checks and context policy
        let mut req = validate(asked.fields(n, series.kept, id_mask))?;
        engine.admit(&mut req, at)?;
        return Ok(req);
    };
    check_points(&scan, at)?;
    let used = series.kept.first().map_or(0, Vec::len);
    let no_recent = series.kept.iter().position(|row| row.iter().all(Option::is_none));
    if asked.strict_context || no_recent.is_some() {
        // The context policy refuses it. First the checks that come before the policy, on a stand-in of the
        // kept length with every point observed (its values are never forecast): the request's fields, then
        // the engine's limits. A profile that cannot run the request is checked after the policy: not here.
        let stand_in = vec![vec![Some(0.0); used]; series.kept.len()];
        let mut req = validate(asked.fields(n, stand_in, id_mask))?;
        match engine.admit(&mut req, at) {
            Err(Error::Unservable { .. }) | Ok(_) => {}
            Err(e) => return Err(e),
        }
        return Err(match no_recent {
            Some(variate) if !asked.strict_context => {
                Error::AllMissingAfterCut { at: at.to_string(), variate, used }
            }
            _ => Error::ContextTooLong { at: at.to_string(), given: series.given, limit: used },
        });
    }
    let mut req = validate(asked.fields(n, series.kept, id_mask))?;
    req.context_cut = Some(ContextCut { given: series.given, used });
    engine.admit(&mut req, at)?;
    Ok(req)
}

/// The checks validation makes on every point, in its order (variate by variate: a value that is not finite,
/// then no observed point), on the scan of the whole history.
fn check_points(scan: &[RowScan], at: &str) -> engines::Result<()> {
    for (variate, row) in scan.iter().enumerate() {
        if let Some((t, x)) = row.first_bad {
            // as validation writes it (a NaN is a missing point here, so only an infinity reaches this)
            let value = format!("{x} (overflows f32, |x| > 3.4e38)");
            return Err(Error::NonFinite { at: at.to_string(), variate, t, value });
        }
        if !row.observed {
            return Err(Error::AllMissing { at: at.to_string(), variate });
        }
    }
    Ok(())
}
