//! Tests of totoc's own noise through the sampler: its draws follow the distribution upstream's filtering gives
//! (chi-square goodness of fit, α = 0.001), s2 given s1 included, and a path's draws do not depend on how the
//! draws are laid out (order, batching, threads, other series).

use crate::kronos::noise::{Draw, DrawKey, NoiseStream};
use crate::kronos::sampler::{Sampler, SamplingParams};
use crate::kronos::testdata::logits;

pub(super) const DRAWS: usize = 20_000;
pub(super) const ALPHA: f64 = 0.001;

/// ln Γ(x) for x > 0 (Lanczos, g = 7, n = 9: about 15 digits).
fn ln_gamma(x: f64) -> f64 {
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let t = x + 7.5;
    let series = C[1..].iter().enumerate().fold(C[0], |s, (i, c)| s + c / (x + i as f64 + 1.0));
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + series.ln()
}

/// The regularised upper incomplete gamma function Q(a, x) (a series below a + 1, a continued fraction above).
fn gamma_q(a: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 1.0;
    }
    let front = (-x + a * x.ln() - ln_gamma(a)).exp();
    if x < a + 1.0 {
        let (mut term, mut sum, mut n) = (1.0 / a, 1.0 / a, a);
        while term.abs() > sum.abs() * 1e-15 {
            n += 1.0;
            term *= x / n;
            sum += term;
        }
        return 1.0 - sum * front;
    }
    // Lentz's method for the continued fraction
    let tiny = 1e-300;
    let mut b = x + 1.0 - a;
    let mut c = 1.0 / tiny;
    let mut d = 1.0 / b;
    let mut h = d;
    for i in 1..10_000 {
        let an = -(i as f64) * (i as f64 - a);
        b += 2.0;
        d = an * d + b;
        d = if d.abs() < tiny { tiny } else { d };
        c = b + an / c;
        c = if c.abs() < tiny { tiny } else { c };
        d = 1.0 / d;
        let delta = d * c;
        h *= delta;
        if (delta - 1.0).abs() < 1e-15 {
            break;
        }
    }
    front * h
}

/// The chi-square statistic, its degrees of freedom and p-value of `observed` counts against `expected` counts,
/// bins pooled (smallest expected first) until each pooled bin expects at least 5.
pub(super) fn chi_square(observed: &[f64], expected: &[f64]) -> (f64, usize, f64) {
    let mut order: Vec<usize> = (0..expected.len()).collect();
    order.sort_by(|&a, &b| expected[a].total_cmp(&expected[b]));
    let mut bins: Vec<(f64, f64)> = Vec::new();
    let mut open = (0.0, 0.0);
    for i in order {
        open = (open.0 + observed[i], open.1 + expected[i]);
        if open.1 >= 5.0 {
            bins.push(open);
            open = (0.0, 0.0);
        }
    }
    if open.1 > 0.0 || open.0 > 0.0 {
        let last = bins.last_mut().expect("some bin expects 5 or more");
        *last = (last.0 + open.0, last.1 + open.1);
    }
    let stat: f64 = bins.iter().map(|(o, e)| (o - e) * (o - e) / e).sum();
    let df = bins.len() - 1;
    (stat, df, gamma_q(df as f64 / 2.0, stat / 2.0))
}

/// Expected counts of `n` draws from the probabilities upstream samples from.
fn expected(sampler: &mut Sampler, x: &[f32], params: &SamplingParams, n: usize) -> Vec<f64> {
    let p = sampler.probabilities(x, params).unwrap();
    let total: f64 = p.iter().map(|&q| f64::from(q)).sum();
    p.iter().map(|&q| f64::from(q) / total * n as f64).collect()
}

fn key(path: usize, step: u64, draw: Draw) -> DrawKey {
    DrawKey { path: path as u64, step, draw }
}

#[test]
fn chi_square_machinery() {
    // Q(a, x) against known values: χ²(1) at 3.841 → 0.05; χ²(10) at 29.588 → 0.001; χ²(1000) at 1106.969 → 0.01 (scipy.stats.chi2.isf)
    for (df, x, p) in [(1.0, 3.841_458_8, 0.05), (10.0, 29.588_298, 0.001), (1000.0, 1_106.969, 0.01)] {
        let q = gamma_q(df / 2.0, x / 2.0);
        assert!((q / p - 1.0).abs() < 1e-4, "df {df}: {q} vs {p}");
    }
    assert!((ln_gamma(10.0) - 362_880f64.ln()).abs() < 1e-12);
    // a fair die: fits; a loaded one: does not
    let fair = [1000.0, 980.0, 1020.0, 995.0, 1010.0, 995.0];
    let e = [1000.0; 6];
    assert!(chi_square(&fair, &e).2 > 0.5);
    let loaded = [1200.0, 960.0, 960.0, 960.0, 960.0, 960.0];
    assert!(chi_square(&loaded, &e).2 < ALPHA);
    // pooling: tiny bins are merged into one that expects ≥ 5
    let (_, df, _) = chi_square(&[0.0, 1.0, 0.0, 50.0, 49.0], &[1.0, 2.0, 3.0, 47.0, 47.0]);
    assert_eq!(df, 2);
}

/// 20,000 draws of s1 at step 0 of 20,000 paths, and of s2 from logits that depend on the drawn s1, follow the
/// filtered distributions, in the three sampled settings.
#[test]
fn own_noise_samples_upstreams_distribution() {
    let settings = [
        ("T 0.7, top_p 0.9", SamplingParams::new(0.7, 0, 0.9).unwrap()),
        ("top_k 5", SamplingParams::new(1.0, 5, 0.9).unwrap()),
        ("T 1, unfiltered", SamplingParams::new(1.0, 0, 1.0).unwrap()),
    ];
    let vocab = 1024;
    let s1_logits = logits(31, vocab, 1.5, 12, 0);
    // s2's logits depend on s1 through its class s1 mod 3
    let s2_logits: Vec<Vec<f32>> = (0..3).map(|c| logits(41 + c, vocab, 1.0 + c as f64, 6, 0)).collect();
    let mut sampler = Sampler::new();
    for (seed, (name, params)) in settings.iter().enumerate() {
        let noise = NoiseStream::new(1000 + seed as u64);
        // one prepared row per distribution: s1's and s2's of each class (the draws are what is tested)
        let mut s1_row = Sampler::new();
        s1_row.prepare(&s1_logits, params).unwrap();
        let mut s2_rows: Vec<Sampler> = s2_logits
            .iter()
            .map(|x| {
                let mut s = Sampler::new();
                s.prepare(x, params).unwrap();
                s
            })
            .collect();
        let mut s1_counts = vec![0.0; vocab];
        let mut joint = vec![0.0; 3 * vocab];
        for path in 0..DRAWS {
            let s1 = s1_row.draw(&noise, key(path, 0, Draw::S1)).unwrap() as usize;
            let class = s1 % 3;
            let s2 = s2_rows[class].draw(&noise, key(path, 0, Draw::S2)).unwrap() as usize;
            s1_counts[s1] += 1.0;
            joint[class * vocab + s2] += 1.0;
        }
        // the same draws through `sample`, for a few paths
        for path in 0..20 {
            let s1 = sampler.sample(&s1_logits, params, &noise, key(path, 0, Draw::S1)).unwrap();
            assert_eq!(s1, s1_row.draw(&noise, key(path, 0, Draw::S1)).unwrap());
        }
        let e1 = expected(&mut sampler, &s1_logits, params, DRAWS);
        let (stat, df, p) = chi_square(&s1_counts, &e1);
        eprintln!("{name}: s1 χ² = {stat:.1}, df {df}, p = {p:.3}");
        assert!(
            p > ALPHA,
            "{name}: s1 draws do not follow the filtered softmax (χ² {stat:.1}, df {df}, p {p:.2e})"
        );
        // P(class) from s1's distribution, then s2's filtered softmax given the class
        let p_class: Vec<f64> =
            (0..3).map(|c| (c..vocab).step_by(3).map(|t| e1[t]).sum::<f64>() / DRAWS as f64).collect();
        let mut e_joint = Vec::with_capacity(3 * vocab);
        for (c, pc) in p_class.iter().enumerate() {
            e_joint.extend(expected(&mut sampler, &s2_logits[c], params, DRAWS).iter().map(|e| e * pc));
        }
        let (stat, df, p) = chi_square(&joint, &e_joint);
        eprintln!("{name}: (s1 class, s2) χ² = {stat:.1}, df {df}, p = {p:.3}");
        assert!(
            p > ALPHA,
            "{name}: s2 given s1 does not follow its distribution (χ² {stat:.1}, df {df}, p {p:.2e})"
        );
    }
}

/// The same (seed, path, step, draw) gives the same token whatever the layout of the calls: path-major or
/// step-major, paths in any order, split over threads, interleaved with another series' draws.
#[test]
fn a_path_does_not_depend_on_the_layout() {
    type Tokens = Vec<(u32, u32)>;
    let (paths, steps, vocab) = (24usize, 12u64, 1024);
    let params = SamplingParams::new(0.8, 0, 0.95).unwrap();
    // each (path, step, draw) sees its own logits, as paths diverge
    let row = |p: usize, s: u64, d: Draw| logits(p as u64 * 1000 + s * 2 + d as u64, vocab, 2.0, 8, 0);
    let noise = NoiseStream::new(99);
    let draw = |sampler: &mut Sampler, p: usize, s: u64| {
        let a = sampler.sample(&row(p, s, Draw::S1), &params, &noise, key(p, s, Draw::S1)).unwrap();
        let b = sampler.sample(&row(p, s, Draw::S2), &params, &noise, key(p, s, Draw::S2)).unwrap();
        (a, b)
    };
    let mut sampler = Sampler::new();
    let path_major: Vec<Tokens> =
        (0..paths).map(|p| (0..steps).map(|s| draw(&mut sampler, p, s)).collect()).collect();
    // step-major, paths reversed, another series' draws in between (same path numbers, another seed)
    let other = NoiseStream::new(100);
    let mut step_major = vec![vec![(0, 0); steps as usize]; paths];
    for s in 0..steps {
        for p in (0..paths).rev() {
            step_major[p][s as usize] = draw(&mut sampler, p, s);
            sampler.sample(&row(p, s, Draw::S1), &params, &other, key(p, s, Draw::S1)).unwrap();
        }
    }
    assert_eq!(step_major, path_major);
    // three threads, each with its own sampler, paths dealt round-robin
    let threaded: Vec<Vec<(usize, Tokens)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..3)
            .map(|t| {
                let draw = &draw;
                scope.spawn(move || {
                    let mut sampler = Sampler::new();
                    (t..paths)
                        .step_by(3)
                        .map(|p| (p, (0..steps).map(|s| draw(&mut sampler, p, s)).collect()))
                        .collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (p, tokens) in threaded.into_iter().flatten() {
        assert_eq!(tokens, path_major[p], "path {p} on a thread");
    }
    // and the paths are not copies of each other
    let distinct: std::collections::BTreeSet<_> = path_major.iter().collect();
    assert!(distinct.len() > paths / 2);
}

/// Rough cost of one draw at V = 1024 per setting (release: `cargo test -p engines --release --lib --
/// --ignored sampler_speed --nocapture`).
#[test]
#[ignore]
fn sampler_speed() {
    let x = logits(5, 1024, 1.5, 12, 0);
    let noise = NoiseStream::new(1);
    let mut sampler = Sampler::new();
    for (name, params) in [
        ("greedy", SamplingParams::greedy()),
        ("top_k 5", SamplingParams::new(1.0, 5, 0.9).unwrap()),
        ("T 0.7, top_p 0.9", SamplingParams::new(0.7, 0, 0.9).unwrap()),
        ("T 1, unfiltered", SamplingParams::new(1.0, 0, 1.0).unwrap()),
    ] {
        let reps = 20_000;
        let t0 = std::time::Instant::now();
        let mut acc = 0u64;
        for i in 0..reps {
            acc += u64::from(sampler.sample(&x, &params, &noise, key(i, 0, Draw::S1)).unwrap());
        }
        let per = t0.elapsed() / reps as u32;
        eprintln!("{name}: {per:?} per draw (kept {}, checksum {acc})", sampler.kept().len());
    }
}
