//! Sampled forecasts compared as distributions: a two-sample Kolmogorov–Smirnov test per horizon step against
//! toto-ts's samples for the same input, and the sample means within a few standard errors.
#![allow(dead_code)]

use engines::engine::Engine;
use engines::toto1::golden::GoldenCase;

/// Two-sample KS statistic D = sup |F_a − F_b|.
pub fn ks_statistic(a: &[f32], b: &[f32]) -> f64 {
    let (mut a, mut b) = (a.to_vec(), b.to_vec());
    a.sort_by(f32::total_cmp);
    b.sort_by(f32::total_cmp);
    let (mut i, mut j, mut d) = (0, 0, 0f64);
    while i < a.len() && j < b.len() {
        let x = a[i].min(b[j]);
        while i < a.len() && a[i] <= x {
            i += 1;
        }
        while j < b.len() && b[j] <= x {
            j += 1;
        }
        d = d.max((i as f64 / a.len() as f64 - j as f64 / b.len() as f64).abs());
    }
    d
}

/// Critical D of the two-sample KS test at level `alpha` (asymptotic, c(α) = sqrt(−ln(α/2)/2); 1.628 at 0.01).
pub fn ks_critical_at(n: usize, m: usize, alpha: f64) -> f64 {
    let c = (-(alpha / 2.0).ln() / 2.0).sqrt();
    c * ((n + m) as f64 / (n * m) as f64).sqrt()
}

pub fn ks_critical(n: usize, m: usize) -> f64 {
    ks_critical_at(n, m, 0.01)
}

fn mean_var(x: &[f32]) -> (f64, f64) {
    let n = x.len() as f64;
    let m = x.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
    (m, x.iter().map(|&v| (f64::from(v) - m).powi(2)).sum::<f64>() / (n - 1.0))
}

/// How a sampled case compared.
#[derive(Debug, Clone, Copy)]
pub struct KsSummary {
    pub paths: usize,
    pub steps: usize,
    pub rejections: usize,
    /// Worst D / critical D at α = 0.01.
    pub worst: f64,
    /// Worst |mean difference| in standard errors.
    pub worst_z: f64,
}

/// Runs `case` (a sampled golden case) on `engine` and tests its sample paths against toto-ts's, step by step.
///
/// Each step is tested at α = 0.01. Over V·H correlated steps some per-step rejections are expected by chance
/// (0.48 on average for 48 steps; seeds 0–7 gave 0–2), so the test asks that (a) every step passes at a
/// family-wise α = 0.01 (Bonferroni: 0.01/(V·H) per step), (b) at most 3 steps reject at the per-step 0.01
/// (P ≈ 0.002 under the null for 48 steps) and (c) every step's sample mean is within 4.5 standard errors of
/// toto-ts's; a biased sampler fails all three at once.
pub fn check_samples(engine: &Engine, case: &GoldenCase) -> Result<KsSummary, String> {
    let name = &case.name;
    let theirs = case.reference.samples.clone().ok_or_else(|| format!("{name}: not a sampled fixture"))?;
    let ours = engine.forecast(vec![case.request.clone()]).remove(0).map_err(|e| e.to_string())?;
    let ours = ours.samples.ok_or_else(|| format!("{name}: no samples returned"))?;
    if ours.len() != theirs.len() {
        return Err(format!("{name}: {} paths, toto-ts has {}", ours.len(), theirs.len()));
    }
    let (v, h) = (case.request.variates(), case.request.horizon);
    let steps = v * h;
    let (mut worst, mut worst_z, mut rejections) = (0f64, 0f64, 0usize);
    for vi in 0..v {
        for t in 0..h {
            let a: Vec<f32> = ours.iter().map(|p| p[vi][t]).collect();
            let b: Vec<f32> = theirs.iter().map(|p| p[vi][t]).collect();
            let d = ks_statistic(&a, &b);
            let crit = ks_critical(a.len(), b.len());
            let family = ks_critical_at(a.len(), b.len(), 0.01 / steps as f64);
            if d > family {
                return Err(format!(
                    "{name}: variate {vi}, t={t}: KS D={d:.3} > {family:.3} (family-wise α=0.01)"
                ));
            }
            rejections += usize::from(d > crit);
            worst = worst.max(d / crit);
            let ((ma, va), (mb, vb)) = (mean_var(&a), mean_var(&b));
            let z = (ma - mb).abs() / ((va + vb) / a.len() as f64).sqrt().max(1e-12);
            worst_z = worst_z.max(z);
        }
    }
    if rejections > 3.max(steps / 16) {
        return Err(format!("{name}: {rejections} of {steps} steps reject at α=0.01"));
    }
    if worst_z >= 4.5 {
        return Err(format!("{name}: sample means differ by {worst_z:.2} standard errors"));
    }
    Ok(KsSummary { paths: ours.len(), steps, rejections, worst, worst_z })
}
