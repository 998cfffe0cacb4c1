//! Equivalence checks of engine outputs against the toto-ts reference, used by the tests and `totoc verify`.
//!
//! A value passes when `|actual − reference| ≤ sigma_rel·σ_v + ref_rel·|reference|`, with σ_v a per-variate
//! scale (the variate's context standard deviation, [`context_sigma`]) or one absolute scale for outputs in
//! normalised units. [`compare`] returns a [`Report`] with the error statistics and the worst value (the one
//! furthest beyond its tolerance); [`Report::check`] turns a failing report into an [`Error::Mismatch`] that
//! names the output, the step and the error size.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Tolerance `sigma_rel·σ + ref_rel·|reference|`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerance {
    pub sigma_rel: f64,
    pub ref_rel: f64,
}

impl Default for Tolerance {
    /// totoc's acceptance bound against toto-ts: `1e-4·σ + 1e-6·|ref|`.
    fn default() -> Self {
        Tolerance { sigma_rel: 1e-4, ref_rel: 1e-6 }
    }
}

impl Tolerance {
    /// The allowed `|Δ|` for one value.
    pub fn bound(&self, sigma: f64, reference: f64) -> f64 {
        self.sigma_rel * sigma + self.ref_rel * reference.abs()
    }
}

/// The σ a comparison scales its tolerance with.
#[derive(Debug, Clone, Copy)]
pub enum Scale<'a> {
    /// One σ per variate (e.g. [`context_sigma`] of each context): forecasts in original units.
    PerVariate(&'a [f64]),
    /// One σ for every value: outputs in normalised units (mixture parameters, scaled inputs).
    Absolute(f64),
}

/// Population standard deviation (ddof 0) of a variate's observed context points, in f64; 0 with fewer than
/// two points. It only scales the tolerance, so the choice of estimator hardly matters; note that a constant
/// context gives σ = 0, leaving only the `ref_rel·|reference|` part.
pub fn context_sigma(context: &[Option<f32>]) -> f64 {
    let xs = || context.iter().flatten().map(|&x| f64::from(x));
    let n = xs().count();
    if n < 2 {
        return 0.0;
    }
    let mean = xs().sum::<f64>() / n as f64;
    (xs().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64).sqrt()
}

/// The value furthest beyond (or closest to) its tolerance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Worst {
    /// Flat index into the compared array.
    pub index: usize,
    pub variate: usize,
    /// Index within the variate's values (the time step for `[V][H]` outputs).
    pub t: usize,
    pub actual: f64,
    pub reference: f64,
    pub error: f64,
    pub tol: f64,
}

/// Result of comparing one named output at one step.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub output: String,
    pub step: usize,
    pub count: usize,
    /// Values with `|Δ| > tol` (NaN on either side but not both counts as infinitely far).
    pub failures: usize,
    pub max_abs: f64,
    pub median_abs: f64,
    /// `None` for an empty comparison.
    pub worst: Option<Worst>,
}

impl Report {
    pub fn passed(&self) -> bool {
        self.failures == 0
    }

    /// `Ok` if every value is within tolerance, else [`Error::Mismatch`] naming the worst value.
    pub fn check(&self) -> Result<()> {
        match self.worst {
            Some(w) if !self.passed() => Err(Error::Mismatch {
                output: self.output.clone(),
                step: self.step,
                variate: w.variate,
                t: w.t,
                error: w.error,
                tol: w.tol,
                failures: self.failures,
                count: self.count,
            }),
            _ => Ok(()),
        }
    }
}

impl fmt::Display for Report {
    /// One line: `loc at step 2: ok, 768 values, max |Δ| 1.2e-7, median 0.0e0 (worst variate 1, t=5, 9% of tol)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verdict = if self.passed() { "ok" } else { "FAIL" };
        write!(f, "{} at step {}: {verdict}, {} values", self.output, self.step, self.count)?;
        if !self.passed() {
            write!(f, " ({} out of tolerance)", self.failures)?;
        }
        write!(f, ", max |Δ| {:.1e}, median {:.1e}", self.max_abs, self.median_abs)?;
        if let Some(w) = self.worst {
            write!(f, " (worst variate {}, t={}: |Δ|={:.1e}, tol {:.1e})", w.variate, w.t, w.error, w.tol)?;
        }
        Ok(())
    }
}

/// The two figures a precision report gives for `actual` against `reference` (both `[variates][n]` row-major):
/// the worst `|Δ|` / tolerance, the tolerance's σ term per variate from `tol_sigma` (≤ 1 meets it), and the max
/// `|Δ|/σ` with `sigma` per variate. `totoc verify --compare-engine` and the fp16/int8 error tables use it.
pub fn precision_errors(
    actual: &[f32],
    reference: &[f32],
    variates: usize,
    tol_sigma: &[f64],
    sigma: &[f64],
    tol: &Tolerance,
) -> Result<(f64, f64)> {
    let report = compare("mean", 0, actual, reference, variates, Scale::PerVariate(tol_sigma), tol)?;
    let ratio = report.worst.map_or(0.0, |w| if w.tol > 0.0 { w.error / w.tol } else { 0.0 });
    let n = actual.len() / variates.max(1);
    let per_sigma = actual
        .iter()
        .zip(reference)
        .enumerate()
        .map(|(i, (x, y))| f64::from((x - y).abs()) / sigma[i / n.max(1)].max(1e-12))
        .fold(0.0, f64::max);
    Ok((ratio, per_sigma))
}

/// Compares `actual` with `reference`, both `[variates][n]` row-major, value by value.
/// Errors only when the arrays do not match in shape.
pub fn compare(
    output: &str,
    step: usize,
    actual: &[f32],
    reference: &[f32],
    variates: usize,
    scale: Scale,
    tol: &Tolerance,
) -> Result<Report> {
    Error::check_len(&format!("{output} at step {step}"), reference.len(), actual.len())?;
    if variates == 0 || !reference.len().is_multiple_of(variates) {
        return Err(Error::Length {
            what: format!("{output} at step {step} (a multiple of {variates} variates)"),
            expected: reference.len().next_multiple_of(variates.max(1)),
            actual: reference.len(),
        });
    }
    if let Scale::PerVariate(s) = scale {
        Error::check_len(&format!("σ of {output}"), variates, s.len())?;
    }
    let per = reference.len() / variates;
    let mut errors = Vec::with_capacity(reference.len());
    let mut report = Report {
        output: output.to_string(),
        step,
        count: reference.len(),
        failures: 0,
        max_abs: 0.0,
        median_abs: 0.0,
        worst: None,
    };
    let mut worst_ratio = f64::NEG_INFINITY;
    for (i, (&a, &r)) in actual.iter().zip(reference).enumerate() {
        let (a, r, variate) = (f64::from(a), f64::from(r), i / per);
        let sigma = match scale {
            Scale::PerVariate(s) => s[variate],
            Scale::Absolute(s) => s,
        };
        let bound = tol.bound(sigma, r);
        let error = match (a.is_nan(), r.is_nan()) {
            (true, true) => 0.0,
            (false, false) if a == r => 0.0, // equal infinities
            (false, false) => (a - r).abs(),
            _ => f64::INFINITY,
        };
        let error = if error.is_nan() { f64::INFINITY } else { error };
        report.failures += usize::from(error > bound);
        report.max_abs = report.max_abs.max(error);
        let ratio = if bound > 0.0 {
            error / bound
        } else if error > 0.0 {
            f64::INFINITY
        } else {
            0.0
        };
        if ratio > worst_ratio {
            worst_ratio = ratio;
            report.worst =
                Some(Worst { index: i, variate, t: i % per, actual: a, reference: r, error, tol: bound });
        }
        errors.push(error);
    }
    errors.sort_unstable_by(f64::total_cmp);
    report.median_abs = match errors.len() {
        0 => 0.0,
        n if n % 2 == 1 => errors[n / 2],
        n => 0.5 * (errors[n / 2 - 1] + errors[n / 2]),
    };
    Ok(report)
}

/// Every `*.json` golden case under `dir` (recursively), sorted by path: the case files of any family.
pub fn find_cases(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).map_err(|e| Error::io(&d, e))? {
            let p = e.map_err(|e| Error::io(&d, e))?.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "json") {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigma_is_population_std_of_observed_points() {
        assert_eq!(context_sigma(&[Some(1.0), None, Some(3.0)]), 1.0);
        assert_eq!(
            context_sigma(&[
                Some(2.0),
                Some(4.0),
                Some(4.0),
                Some(4.0),
                Some(5.0),
                Some(5.0),
                Some(7.0),
                Some(9.0)
            ]),
            2.0
        );
        assert_eq!(context_sigma(&[Some(1.0), None]), 0.0);
        assert_eq!(context_sigma(&[]), 0.0);
    }

    #[test]
    fn passes_within_tolerance() {
        let reference = [1000.0f32, 1001.0, 1002.0, -5.0, -6.0, -7.0];
        let mut actual = reference;
        actual[1] += 6.1e-5; // one f32 ulp at 1000
        let sigma = [10.0, 1.0];
        let r = compare("mean", 0, &actual, &reference, 2, Scale::PerVariate(&sigma), &Tolerance::default())
            .unwrap();
        assert!(r.passed(), "{r}");
        assert!(r.check().is_ok());
        assert_eq!(r.count, 6);
        assert_eq!(r.worst.unwrap().index, 1);
        assert!(r.max_abs > 6.0e-5 && r.max_abs < 6.2e-5);
        assert_eq!(r.median_abs, 0.0);
    }

    #[test]
    fn perturbed_value_fails_with_a_message_naming_it() {
        let reference: Vec<f32> = (0..12).map(|i| i as f32 * 0.5).collect();
        let mut actual = reference.clone();
        actual[6 + 5] += 3.1e-2; // variate 1, t = 5
        let r =
            compare("loc", 2, &actual, &reference, 2, Scale::Absolute(0.4), &Tolerance::default()).unwrap();
        assert!(!r.passed());
        assert_eq!(r.failures, 1);
        let w = r.worst.unwrap();
        assert_eq!((w.variate, w.t, w.index), (1, 5, 11));
        let msg = r.check().unwrap_err().to_string();
        // tol = 1e-4·0.4 + 1e-6·|5.5| = 4.55e-5 (just above, in f64)
        assert!(msg.starts_with("loc at step 2, variate 1, t=5: |Δ|=3.1e-2 > tol 4.6e-5"), "{msg}");
        assert!(r.to_string().contains("FAIL"), "{r}");
    }

    #[test]
    fn nan_and_shape_handling() {
        let r =
            compare("df", 0, &[f32::NAN, 1.0], &[1.0, 1.0], 1, Scale::Absolute(1.0), &Tolerance::default())
                .unwrap();
        assert_eq!(r.failures, 1);
        assert_eq!(r.worst.unwrap().t, 0);
        let r = compare("df", 0, &[f32::NAN], &[f32::NAN], 1, Scale::Absolute(1.0), &Tolerance::default())
            .unwrap();
        assert!(r.passed());
        assert!(
            compare("df", 0, &[1.0], &[1.0, 2.0], 1, Scale::Absolute(1.0), &Tolerance::default()).is_err()
        );
        assert!(
            compare("df", 0, &[1.0; 3], &[1.0; 3], 2, Scale::Absolute(1.0), &Tolerance::default()).is_err()
        );
        assert!(compare("df", 0, &[1.0; 2], &[1.0; 2], 2, Scale::PerVariate(&[1.0]), &Tolerance::default())
            .is_err());
        // zero tolerance: only exact values pass
        let r = compare("x", 0, &[0.0, 1e-30], &[0.0, 0.0], 1, Scale::Absolute(0.0), &Tolerance::default())
            .unwrap();
        assert_eq!(r.failures, 1);
        let empty = compare("x", 0, &[], &[], 1, Scale::Absolute(1.0), &Tolerance::default()).unwrap();
        assert!(empty.passed() && empty.worst.is_none());
    }
}
