//! The speed bound of Kronos workloads (issue 34), shared by `totoc bench` ([`super::bench`]) and the backtest's
//! speed report (through [`crate::registry::speed_bound`]): the tokens that run full passes (encode, prefill, the
//! recomputes after the window slides, the final decode) at the engine's measured prefill throughput, plus every
//! cached step (decode and refine) at the bytes it must read (the weights once per call group, the valid part of
//! each row's caches) over the machine's measured read bandwidth. Also the FLOP model of upstream's loop against
//! an exact KV cache, and the synthetic candles ([`bars`]) both measurements run on.
use std::time::{Duration, Instant};

use anyhow::Context;
use engines::budget::RequestSize;
use engines::engine::Engine;
use engines::kronos::columns::{Column, ColumnValues, COLUMNS};
use engines::kronos::engine::KronosEngine;
use engines::kronos::hooks::Hooks;
use engines::kronos::job::{JobInput, KronosJob, DEFAULT_MAX_CONTEXT};
use engines::kronos::stamps::WallClock;
use exporter::kronos::config::KronosConfig;
use exporter::signature::GraphKind;

use crate::cmd::bench_support::median_ms;
use crate::speed_bound::SpeedBound;

/// One group of identical series in one call: `series` series of `context` + `horizon` bars, `samples` paths
/// each (0: greedy), the transformer window `max_context`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    pub context: usize,
    pub horizon: usize,
    pub series: usize,
    pub samples: usize,
    pub max_context: usize,
}

/// `count` 15-minute bars from 2024-03-04 09:30 on weekdays (26 a day): stamps and the six columns, a random walk
/// of prices to the cent, intraday U-shaped volume, amount = volume × the typical price.
pub fn bars(seed: u64, count: usize) -> (Vec<WallClock>, [Vec<f64>; 6]) {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut normal = move || {
        // the sum of 12 uniforms − 6: a cheap, deterministic near-normal
        (0..12)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 11) as f64 / (1u64 << 53) as f64
            })
            .sum::<f64>()
            - 6.0
    };
    let cent = |x: f64| (x * 100.0).round() / 100.0;
    let mut stamps = Vec::with_capacity(count);
    // 2024 (a leap year) from Monday 4 March, day by day, into the next years as far as `count` needs
    const DAYS: [u32; 12] = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let (mut year, mut month, mut dom, mut day) = (2024u32, 3u32, 4u32, 0u32);
    while stamps.len() < count {
        let weekday = day % 7;
        if weekday < 5 {
            for k in 0..26u32 {
                let minutes = 570 + 15 * k;
                stamps.push(
                    WallClock::new(year as i32, month, dom, minutes / 60, minutes % 60, 0, 0)
                        .expect("a valid stamp"),
                );
            }
        }
        day += 1;
        dom += 1;
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
        if dom > DAYS[month as usize - 1] - u32::from(month == 2 && !leap) {
            (dom, month) = (1, month + 1);
            if month > 12 {
                (month, year) = (1, year + 1);
            }
        }
    }
    stamps.truncate(count);
    let mut cols: [Vec<f64>; 6] = Default::default();
    let mut close = cent(100.0 * (0.3 * normal()).exp());
    for i in 0..count {
        let first = i > 0 && stamps[i].day() != stamps[i - 1].day();
        let o = cent(close * ((if first { 0.01 } else { 0.0005 }) * normal()).exp());
        let c = cent(o * (0.003 * normal()).exp());
        let hi = cent(o.max(c) * (1.0 + 0.002 * normal().abs())).max(o).max(c);
        let lo = cent(o.min(c) * (1.0 - 0.002 * normal().abs())).min(o).min(c);
        let k = (i % 26) as f64;
        let vol =
            100.0 * (200.0 * (1.0 + 1.5 * ((k - 12.5) / 12.5).powi(2)) * (0.4 * normal()).exp()).round();
        let amt = cent(vol * (hi + lo + c) / 3.0);
        for (col, v) in cols.iter_mut().zip([o, hi, lo, c, vol, amt]) {
            col.push(v);
        }
        close = c;
    }
    (stamps, cols)
}

/// The jobs of `shape` on `engine` (`name` names them in errors).
pub fn jobs(name: &str, shape: &Shape, engine: &KronosEngine) -> anyhow::Result<Vec<KronosJob>> {
    (0..shape.series)
        .map(|b| {
            let (stamps, cols) = bars(9000 + b as u64, shape.context + shape.horizon);
            let columns: Vec<Column> = COLUMNS
                .iter()
                .zip(&cols)
                .map(|(&name, v)| Column { name, values: ColumnValues::F64(&v[..shape.context]) })
                .collect();
            let input = JobInput {
                columns,
                timestamps: Some(&stamps[..shape.context]),
                future_timestamps: Some(&stamps[shape.context..]),
                horizon: shape.horizon,
                samples: shape.samples,
                seed: b as u64,
                max_context: Some(shape.max_context as u64),
                ..JobInput::default()
            };
            let at = format!("{name} series {b}");
            let job = KronosJob::new(&at, input, &engine.job_limits())?;
            engine.check_fits(&job, &at)?;
            Ok(job)
        })
        .collect()
}

/// The Kronos engine behind `engine`.
pub fn kronos(engine: &Engine) -> anyhow::Result<&KronosEngine> {
    engine.family_engine().as_any().downcast_ref::<KronosEngine>().context("not a Kronos engine")
}

/// One call of `jobs`.
pub fn run_jobs(engine: &Engine, jobs: &[KronosJob]) -> anyhow::Result<()> {
    let refs: Vec<&KronosJob> = jobs.iter().collect();
    for r in kronos(engine)?.forecast_jobs(engine.call(), &refs, Hooks::default(), None) {
        std::hint::black_box(r?);
    }
    Ok(())
}

/// What the machine and the engine measure: the prefill's throughput and the memory's read bandwidth.
#[derive(Debug, Clone, Copy)]
pub struct Rates {
    /// Tokens per second of the engine's full-window prefill (one series, its largest prefill bucket's slots).
    pub prefill_tokens_per_s: f64,
    /// Bytes per second a `threads`-thread sum reads from a buffer far larger than the caches.
    pub read_bytes_per_s: f64,
}

impl Rates {
    /// Both rates, measured now (`threads` reading threads).
    pub fn measure(engine: &Engine, threads: usize) -> anyhow::Result<Self> {
        Ok(Rates { prefill_tokens_per_s: prefill_rate(engine)?, read_bytes_per_s: read_bandwidth(threads) })
    }

    /// The bound of `c`, in seconds.
    pub fn seconds(&self, c: &Counts) -> f64 {
        c.pass_tokens / self.prefill_tokens_per_s + c.step_bytes / self.read_bytes_per_s
    }
}

/// The prefill throughput: the median of 5 one-step calls of a series of the largest prefill window, timed on its
/// prefill run alone.
pub fn prefill_rate(engine: &Engine) -> anyhow::Result<f64> {
    let k = kronos(engine)?;
    let window = engine
        .buckets()
        .iter()
        .filter(|b| b.kind == GraphKind::Prefill)
        .map(|b| b.slots)
        .max()
        .context("no prefill graph")?
        .min(k.job_limits().window);
    let shape = Shape { context: window, horizon: 1, series: 1, samples: 0, max_context: window };
    let jobs = jobs("prefill", &shape, k)?;
    let mut times = Vec::new();
    for _ in 0..6 {
        run_jobs(engine, &jobs)?;
        let s: f64 = engine
            .last_call()
            .iter()
            .filter(|r| r.bucket.kind == GraphKind::Prefill)
            .map(|r| r.seconds)
            .sum();
        times.push(Duration::from_secs_f64(s));
    }
    Ok(window as f64 / (median_ms(&times[1..]) / 1e3))
}

/// Read bandwidth: the best of 5 passes of `threads` threads summing 256 MiB of f32.
pub fn read_bandwidth(threads: usize) -> f64 {
    let n: usize = 64 << 20;
    let data: Vec<f32> = (0..n).map(|i| (i % 251) as f32).collect();
    let threads = threads.max(1);
    let mut best = 0.0f64;
    for _ in 0..5 {
        let t = Instant::now();
        let total: f32 = std::thread::scope(|s| {
            let chunk = n.div_ceil(threads);
            let handles: Vec<_> = data
                .chunks(chunk)
                .map(|c| {
                    s.spawn(move || {
                        let mut acc = [0f32; 16];
                        for block in c.chunks_exact(16) {
                            for (a, x) in acc.iter_mut().zip(block) {
                                *a += x;
                            }
                        }
                        acc.iter().sum::<f32>()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or(0.0)).sum()
        });
        std::hint::black_box(total);
        best = best.max((n * 4) as f64 / t.elapsed().as_secs_f64());
    }
    best
}

/// The model sizes the bound and the FLOP model need.
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    pub d: f64,
    pub ff: f64,
    pub layers: f64,
    pub vocab: f64,
}

impl Sizes {
    pub fn of(cfg: &KronosConfig) -> Self {
        let p = &cfg.predictor;
        Sizes {
            d: p.d_model as f64,
            ff: p.ff_dim as f64,
            layers: p.n_layers as f64,
            vocab: (1u64 << cfg.bits()) as f64,
        }
    }

    /// Bytes of the weights one decode step reads (every layer, the token fusion, the dependency keys/values, the
    /// s1 head).
    pub fn decode_weights(&self) -> f64 {
        let Sizes { d, ff, layers, vocab } = *self;
        4.0 * (layers * (4.0 * d * d + 4.0 * d + 3.0 * d * ff + 2.0 * d)
            + 2.0 * d * d
            + d
            + 2.0 * d * d
            + 2.0 * d
            + vocab * d
            + vocab
            + d)
    }

    /// Bytes of the weights one refine run reads (the dependency query and output, its norm, the s2 head).
    pub fn refine_weights(&self) -> f64 {
        let Sizes { d, vocab, .. } = *self;
        4.0 * (2.0 * d * d + 2.0 * d + d + vocab * d + vocab)
    }

    /// Multiply-adds of one position through the backbone, besides attention (and the token fusion).
    fn position_macs(&self) -> f64 {
        let Sizes { d, ff, layers, .. } = *self;
        layers * (4.0 * d * d + 3.0 * d * ff) + 2.0 * d * d
    }

    /// Multiply-adds of a causal pass over `w` positions (each position attends to those before it).
    fn pass_macs(&self, w: f64) -> f64 {
        w * self.position_macs() + self.layers * 2.0 * self.d * w * (w + 1.0) / 2.0
    }
}

/// What a call runs, counted from its shapes (the planner's: one prefill per series, cached steps while the
/// window grows, a full recompute per path once it slides, the final decode per path).
#[derive(Debug, Clone, Copy, Default)]
pub struct Counts {
    /// Tokens of full passes: encode, prefill, recompute, final decode.
    pub pass_tokens: f64,
    /// Bytes the cached steps (decode and refine) read.
    pub step_bytes: f64,
    /// Model FLOPs, upstream's loop and with an exact KV cache.
    pub upstream_flops: f64,
    pub exact_flops: f64,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.pass_tokens += o.pass_tokens;
        self.step_bytes += o.step_bytes;
        self.upstream_flops += o.upstream_flops;
        self.exact_flops += o.exact_flops;
    }
}

/// The counts of one call of `group` (its rows share each cached step's run: the weights are read once per step
/// for all of them).
pub fn counts(group: &[Shape], s: &Sizes) -> Counts {
    let d = s.d;
    let mut c = Counts::default();
    // s2 given s1 over a window of `k` keys: the dependency query and output, attention, the s2 head
    let s2 = |k: f64| 2.0 * d * d + 2.0 * k * d + s.vocab * d;
    for g in group {
        let (n, h, m) = (g.context, g.horizon, g.max_context);
        let series = g.series as f64;
        let paths = g.samples.max(1) as f64;
        c.pass_tokens += series * (n + n.min(m)) as f64 + series * paths * (n + h).min(m) as f64;
        let w0 = n.min(m) as f64;
        c.exact_flops += series * (s.pass_macs(w0) + 2.0 * d * d * w0 + s.vocab * d);
    }
    let steps = group.iter().map(|g| g.horizon).max().unwrap_or(0);
    for i in 0..steps {
        let (mut refine, mut decode) = (false, false);
        for g in group.iter().filter(|g| g.horizon > i) {
            let (n, m) = (g.context, g.max_context);
            let rows = g.series as f64 * g.samples.max(1) as f64;
            let l = n + i;
            let win = l.min(m) as f64;
            // upstream: the whole window every step, both heads and the dependency keys/values on every row
            c.upstream_flops += rows
                * (s.pass_macs(win) + win * s.vocab * d + 2.0 * d * d * win + s2(win) + win * s.vocab * d);
            refine = true;
            // each row's refine reads its valid dependency cache
            c.step_bytes += rows * 4.0 * 2.0 * d * win;
            if i == 0 {
                c.exact_flops += rows * s2(win);
            } else if l <= m {
                c.exact_flops += rows
                    * (s.position_macs() + s.layers * 2.0 * win * d + 2.0 * d * d + s.vocab * d + s2(win));
                // one decode run for all the call's rows: the weights once, each row's valid caches
                decode = true;
                c.step_bytes += rows * 4.0 * 2.0 * s.layers * d * win;
            } else {
                c.pass_tokens += rows * m as f64;
                c.exact_flops += rows * (s.pass_macs(win) + 2.0 * d * d * win + s.vocab * d + s2(win));
            }
        }
        c.step_bytes += f64::from(u8::from(refine)) * s.refine_weights()
            + f64::from(u8::from(decode)) * s.decode_weights();
    }
    c.upstream_flops *= 2.0;
    c.exact_flops *= 2.0;
    c
}

/// The bound of a run of `calls` (each the series of one engine call, as admitted) on a Kronos engine: each call's
/// series in groups of at most the engine's largest decode rows (a group shares each cached step's weight read),
/// at rates measured now with `threads` reading threads.
pub fn run_bound(engine: &Engine, calls: &[Vec<RequestSize>], threads: usize) -> anyhow::Result<SpeedBound> {
    let k = kronos(engine)?;
    let sizes = Sizes::of(&engine.manifest().model.kronos().cloned().context("not a Kronos engine")?);
    let limits = k.job_limits();
    let rows =
        engine.buckets().iter().filter(|b| b.kind == GraphKind::Decode).map(|b| b.rows).max().unwrap_or(1);
    let mut total = Counts::default();
    for call in calls {
        let mut group: Vec<Shape> = Vec::new();
        let mut used = 0;
        for r in call {
            let shape = Shape {
                context: r.context.min(limits.context),
                horizon: r.horizon,
                series: r.series,
                samples: r.samples,
                max_context: r.max_context.unwrap_or(DEFAULT_MAX_CONTEXT).clamp(1, limits.window),
            };
            let need = r.series * r.samples.max(1);
            if used > 0 && used + need > rows {
                total.add(&counts(&group, &sizes));
                (group, used) = (Vec::new(), 0);
            }
            group.push(shape);
            used += need;
        }
        total.add(&counts(&group, &sizes));
    }
    let rates = Rates::measure(engine, threads)?;
    Ok(SpeedBound {
        seconds: rates.seconds(&total),
        prefill_tokens_per_s: rates.prefill_tokens_per_s,
        read_bytes_per_s: rates.read_bytes_per_s,
        pass_tokens: total.pass_tokens,
        step_bytes: total.step_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_are_weekday_sessions_of_15_minutes() {
        let (stamps, cols) = bars(1, 60);
        assert_eq!(stamps.len(), 60);
        assert_eq!((stamps[0].hour(), stamps[0].minute()), (9, 30));
        assert_eq!((stamps[25].hour(), stamps[25].minute()), (15, 45));
        assert_eq!((stamps[26].day(), stamps[26].hour()), (5, 9));
        // Friday 8 March, then Monday 11 March
        let (s, _) = bars(1, 26 * 6);
        assert_eq!((s[26 * 5].day(), s[26 * 5].weekday()), (11, 0));
        // the mini row's 2,048 bars run into June, every stamp a weekday, in order
        let (s, _) = bars(1, 2048);
        assert!(s.windows(2).all(|w| w[0] < w[1]) && s.iter().all(|t| t.weekday() < 5));
        assert_eq!((s[2047].month(), s[2047].day()), (6, 20));
        let row = |i: usize| cols.each_ref().map(|c| c[i]);
        for [o, h, l, c, v, a] in (0..60).map(row) {
            assert!(h >= o.max(c) && l <= o.min(c));
            assert!(v > 0.0 && a > 0.0);
        }
    }

    #[test]
    fn a_call_reads_each_steps_weights_once_for_all_its_rows() {
        let small = Sizes { d: 512.0, ff: 1024.0, layers: 8.0, vocab: 1024.0 };
        let one = Shape { context: 256, horizon: 20, series: 1, samples: 0, max_context: 512 };
        let eight = counts(&[Shape { series: 8, ..one }], &small);
        // the same rows given as eight groups of one series in one call count the same
        let split = counts(&[one; 8], &small);
        assert!((eight.step_bytes - split.step_bytes).abs() <= 1e-6 * eight.step_bytes);
        assert_eq!(eight.pass_tokens, split.pass_tokens);
        // one series: encode 256 + prefill 256 + the final decode of 276 tokens
        let c1 = counts(&[one], &small);
        assert_eq!(c1.pass_tokens, 788.0);
        // eight calls of one series read the weights eight times: more bytes than one call of eight
        assert!(8.0 * c1.step_bytes > eight.step_bytes + 7.0 * 19.0 * small.decode_weights() * 0.99);
        // a shorter horizon stops reading at its last step
        let short = counts(&[Shape { horizon: 1, ..one }], &small);
        assert_eq!(short.step_bytes, small.refine_weights() + 4.0 * 2.0 * 512.0 * 256.0);
    }
}
