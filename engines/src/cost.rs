//! Cost in seconds: how long a group of requests will hold an engine, from the family's own plan and the speed
//! the engine measured for each of its graphs.
//!
//! * **Work** ([`Estimate`]): a family plans a group of requests from their counts alone
//!   ([`FamilyEngine::estimate`](crate::family::FamilyEngine::estimate), the same planner and packing its
//!   forecasts use) and says which graph runs the plan makes: runs and row-steps per graph. A row-step is one
//!   row of one run; a static shape costs every row alike, padding or not, so row-steps = runs × the graph's rows.
//!   A family whose cost is not per graph run of a static shape (tokens per step, window recomputes) still
//!   reports it as runs of its own graphs, and only it knows how many.
//! * **Rates** ([`Rates`]): at warm-up each graph is run on placeholder inputs, once untimed (unless the warm-up
//!   just ran it) and then [`TIMED_RUNS`] times timed, or [`MIN_TIMED_RUNS`] for a slow graph ([`time_runs`]);
//!   its rate is the median run's seconds over its rows. The shared
//!   code only multiplies: seconds = Σ row-steps × rate, times a host factor for the work around the graphs
//!   (scalers, sampling, quantiles, copies) that the placeholder runs leave out, and for a machine busier or
//!   quieter now than at warm-up: [`HOST_FACTOR`] until calls have run, then what the last calls took over their
//!   graph estimate ([`SharedRates::observe`]: calls of at least [`CALIBRATE_MIN_SECONDS`], the last
//!   [`CALIBRATE_CALLS`]).
//! * **Fits** ([`smallest_fit`]): when a request's estimate does not fit its deadline, the smallest single change
//!   that does (fewer samples, a shorter horizon, fewer series, fewer variates, a shorter context), found by
//!   bisection on the same estimate.
//!
//! Nothing here runs a graph or names a family; `totoc serve` refuses a request whose estimate exceeds its
//! deadline, and never packs a request with others it would make miss theirs.

use std::collections::VecDeque;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use crate::budget::RequestSize;
use crate::error::Result;

/// Timed runs per graph at warm-up (after one untimed run): the rate is their median.
pub const TIMED_RUNS: usize = 3;

/// Timed runs of a graph whose first [`MIN_TIMED_RUNS`] took [`SLOW_SECONDS`] or more: the median of two is the
/// slower (each run of such a graph is long enough that one more adds little but warm-up time).
pub const MIN_TIMED_RUNS: usize = 2;

/// See [`MIN_TIMED_RUNS`].
pub const SLOW_SECONDS: f64 = 2.0;

/// The pause before each timed run (see [`time_runs`]).
pub const IDLE_BEFORE_RUN: std::time::Duration = std::time::Duration::from_millis(2);

/// The factor on the graphs' time for the host's own work (preparing inputs, drawing sample paths, the scaler and
/// quantiles, cache copies) until calls have run: in `totoc bench cost` on a busy 2-core machine, calls of 50 ms or
/// more took 1.0–3.1× their graphs' time at the warm-up's rates (the tiny and base-size test engines; the most for
/// sampled forecasts on the tiny engine, whose graphs are short beside the host's work). Then the last calls set
/// it ([`SharedRates::observe`]), within [`HOST_FACTOR_RANGE`].
pub const HOST_FACTOR: f64 = 2.0;

/// The least and most host factor the last calls may set: below 1, the rates were measured on a machine busier
/// than now (a warm-up during other work); the bounds keep a few odd calls from making every estimate absurd.
pub const HOST_FACTOR_RANGE: (f64, f64) = (0.25, 100.0);

/// Calls whose graph estimate is shorter than this (seconds) do not calibrate the host factor: their fixed costs
/// (a response to build, a lock to take) would read as a slow machine.
pub const CALIBRATE_MIN_SECONDS: f64 = 0.05;

/// The calls the host factor is calibrated over (the most recent).
pub const CALIBRATE_CALLS: usize = 8;

/// Runs of one graph in a plan.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GraphWork {
    /// The graph's name (`default.decode.n64.t13`): the key of its measured rate.
    pub graph: String,
    pub runs: u64,
    /// Runs × the graph's rows.
    pub row_steps: u64,
}

/// The graph runs a plan makes (see the module docs), one entry per graph in the order first added.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Estimate {
    pub graphs: Vec<GraphWork>,
}

impl Estimate {
    /// Adds `runs` runs of `graph`, a graph of `rows` rows (saturating).
    pub fn add(&mut self, graph: &str, rows: usize, runs: u64) {
        if runs == 0 {
            return;
        }
        let row_steps = runs.saturating_mul(rows as u64);
        match self.graphs.iter_mut().find(|g| g.graph == graph) {
            Some(g) => {
                g.runs = g.runs.saturating_add(runs);
                g.row_steps = g.row_steps.saturating_add(row_steps);
            }
            None => self.graphs.push(GraphWork { graph: graph.to_string(), runs, row_steps }),
        }
    }

    /// Row-steps over every graph.
    pub fn row_steps(&self) -> u64 {
        self.graphs.iter().fold(0u64, |a, g| a.saturating_add(g.row_steps))
    }

    /// Graph runs over every graph.
    pub fn runs(&self) -> u64 {
        self.graphs.iter().fold(0u64, |a, g| a.saturating_add(g.runs))
    }
}

/// One graph's measured speed.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct GraphRate {
    /// The graph's name, as [`GraphWork::graph`] names it.
    pub graph: String,
    /// The graph's kind (`prefill`, `decode`, `pass`), for reports.
    pub kind: String,
    pub rows: usize,
    /// The median of the timed runs, in seconds.
    pub seconds_per_run: f64,
    /// One run's seconds over the graph's rows.
    pub seconds_per_row_step: f64,
    pub timed_runs: usize,
}

impl GraphRate {
    pub fn new(graph: String, kind: &str, rows: usize, seconds_per_run: f64, timed_runs: usize) -> Self {
        GraphRate {
            graph,
            kind: kind.to_string(),
            rows,
            seconds_per_run,
            seconds_per_row_step: seconds_per_run / rows.max(1) as f64,
            timed_runs,
        }
    }
}

/// The measured rates of an engine's graphs (see the module docs), sorted by graph name.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Rates {
    pub graphs: Vec<GraphRate>,
    /// The factor on the graphs' time for the host's own work: [`HOST_FACTOR`], or what the last calls took over
    /// their graph estimate when that is more.
    pub host_factor: f64,
}

impl Rates {
    /// Rates of `graphs` (sorted by name here).
    pub fn new(mut graphs: Vec<GraphRate>) -> Self {
        graphs.sort_by(|a, b| a.graph.cmp(&b.graph));
        Rates { graphs, host_factor: HOST_FACTOR }
    }

    pub fn get(&self, graph: &str) -> Option<&GraphRate> {
        self.graphs.binary_search_by(|g| g.graph.as_str().cmp(graph)).ok().map(|i| &self.graphs[i])
    }

    /// The seconds `estimate` takes: Σ row-steps × rate, times the host factor. `None` when a graph of the
    /// estimate was not measured (the engine then cannot say).
    pub fn seconds(&self, estimate: &Estimate) -> Option<f64> {
        Some(self.graph_seconds(estimate)? * self.host_factor)
    }

    /// The graphs' own seconds of `estimate`: Σ row-steps × rate.
    pub fn graph_seconds(&self, estimate: &Estimate) -> Option<f64> {
        let mut total = 0.0;
        for g in &estimate.graphs {
            total += g.row_steps as f64 * self.get(&g.graph)?.seconds_per_row_step;
        }
        Some(total)
    }
}

/// An engine's rates and its last calls' times, shared with what reports them (a server's model metadata): empty
/// until measured.
#[derive(Debug, Clone, Default)]
pub struct SharedRates(Arc<RwLock<Measured>>);

#[derive(Debug, Default)]
struct Measured {
    rates: Option<Rates>,
    /// The last calls that calibrate the host factor: (graph estimate, seconds taken); at most
    /// [`CALIBRATE_CALLS`].
    calls: VecDeque<(f64, f64)>,
}

impl SharedRates {
    /// A copy of the rates, if measured.
    pub fn get(&self) -> Option<Rates> {
        self.read().rates.clone()
    }

    /// Whether the rates are measured (a check that copies nothing).
    pub fn is_measured(&self) -> bool {
        self.read().rates.is_some()
    }

    /// New rates (a warm-up): the calibration starts again.
    pub fn set(&self, rates: Option<Rates>) {
        let mut m = self.0.write().unwrap_or_else(|p| p.into_inner());
        *m = Measured { rates, calls: VecDeque::new() };
    }

    /// The seconds `estimate` takes at the measured rates ([`Rates::seconds`]); `None` before they are measured.
    pub fn seconds(&self, estimate: &Estimate) -> Option<f64> {
        self.read().rates.as_ref()?.seconds(estimate)
    }

    /// The graphs' own seconds of `estimate` ([`Rates::graph_seconds`]); `None` before the rates are measured.
    pub fn graph_seconds(&self, estimate: &Estimate) -> Option<f64> {
        self.read().rates.as_ref()?.graph_seconds(estimate)
    }

    /// Records a call whose graphs were estimated at `graph_seconds` and which took `took` seconds: over the last
    /// [`CALIBRATE_CALLS`] calls of at least [`CALIBRATE_MIN_SECONDS`], the host factor becomes the time they
    /// took over their graph estimate (within [`HOST_FACTOR_RANGE`]).
    pub fn observe(&self, graph_seconds: f64, took: f64) {
        if !(graph_seconds >= CALIBRATE_MIN_SECONDS && took.is_finite() && took >= 0.0) {
            return;
        }
        let mut m = self.0.write().unwrap_or_else(|p| p.into_inner());
        if m.rates.is_none() {
            return;
        }
        if m.calls.len() == CALIBRATE_CALLS {
            m.calls.pop_front();
        }
        m.calls.push_back((graph_seconds, took));
        let (estimated, taken) = m.calls.iter().fold((0.0, 0.0), |(e, t), &(a, b)| (e + a, t + b));
        if let Some(r) = m.rates.as_mut() {
            r.host_factor = (taken / estimated).clamp(HOST_FACTOR_RANGE.0, HOST_FACTOR_RANGE.1);
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Measured> {
        self.0.read().unwrap_or_else(|p| p.into_inner())
    }
}

/// Runs `run` once untimed (first-run allocations; skipped when `warm`: it just ran), then [`TIMED_RUNS`] times
/// timed, or [`MIN_TIMED_RUNS`] when those took [`SLOW_SECONDS`] or more; returns (the median run's seconds, the
/// timed runs).
pub fn time_runs(warm: bool, mut run: impl FnMut() -> Result<()>) -> Result<(f64, usize)> {
    if !warm {
        run()?;
    }
    let mut seconds = Vec::with_capacity(TIMED_RUNS);
    while seconds.len() < TIMED_RUNS
        && (seconds.len() < MIN_TIMED_RUNS || seconds.iter().sum::<f64>() < SLOW_SECONDS)
    {
        // A call's graph runs come between host work, long enough for the intra-op threads to stop spinning:
        // time each run after such a pause, so its rate includes waking them.
        std::thread::sleep(IDLE_BEFORE_RUN);
        let t0 = Instant::now();
        run()?;
        seconds.push(t0.elapsed().as_secs_f64());
    }
    let n = seconds.len();
    Ok((median(&mut seconds), n))
}

/// The median of `v` (the upper one of an even count; 0 when empty).
pub fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One way to change a request: which count, and how a change of it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Knob {
    Samples,
    Horizon,
    Series,
    Variates,
    Context,
}

impl Knob {
    const ALL: [Knob; 5] = [Knob::Samples, Knob::Horizon, Knob::Series, Knob::Variates, Knob::Context];

    /// The request's current value, and the least one worth trying.
    fn range(self, sizes: &[RequestSize]) -> (usize, usize) {
        let max = |f: fn(&RequestSize) -> usize| sizes.iter().map(f).max().unwrap_or(0);
        match self {
            Knob::Samples => (max(|s| s.samples), 0),
            Knob::Horizon => (max(|s| s.horizon), 1),
            Knob::Series => (sizes.iter().fold(0usize, |a, s| a.saturating_add(s.series)), 1),
            Knob::Variates => (max(|s| s.variates), 1),
            Knob::Context => (max(|s| s.context), 1),
        }
    }

    /// `sizes` with this count cut to `to` (series: the first `to` series kept).
    fn cut(self, sizes: &[RequestSize], to: usize) -> Vec<RequestSize> {
        if self == Knob::Series {
            let mut left = to;
            let mut out = Vec::new();
            for s in sizes {
                if left == 0 {
                    break;
                }
                let n = s.series.min(left);
                out.push(RequestSize { series: n, ..*s });
                left -= n;
            }
            return out;
        }
        sizes
            .iter()
            .map(|s| {
                let mut s = *s;
                let field = match self {
                    Knob::Samples => &mut s.samples,
                    Knob::Horizon => &mut s.horizon,
                    Knob::Variates => &mut s.variates,
                    Knob::Context => &mut s.context,
                    Knob::Series => unreachable!("handled above"),
                };
                *field = (*field).min(to);
                s
            })
            .collect()
    }

    fn describe(self, to: usize, from: usize) -> String {
        let s = if to == 1 { "" } else { "s" };
        match self {
            Knob::Samples if to == 0 => format!("no sample paths (a mean forecast; it asks {from})"),
            Knob::Samples => format!("at most {to} sample{s} (it asks {from})"),
            Knob::Horizon => format!("a horizon of at most {to} (it asks {from})"),
            Knob::Series => format!("at most {to} of its {from} series per request (split it)"),
            Knob::Variates => format!("at most {to} variate{s} per series (it has {from})"),
            Knob::Context => format!("at most {to} context point{s} (it sends {from})"),
        }
    }
}

/// The smallest single changes to a request (its `sizes`) that make `fits` true, smallest first: for each count
/// (samples, horizon, series, variates, context), the largest value below the request's that fits, found by
/// bisection (the estimate grows with each count). Counts that fit at no value are left out; empty when no single
/// change fits.
pub fn smallest_fit(sizes: &[RequestSize], fits: &dyn Fn(&[RequestSize]) -> bool) -> Vec<String> {
    let mut found: Vec<(f64, String)> = Vec::new();
    for knob in Knob::ALL {
        let (from, least) = knob.range(sizes);
        if from <= least || !fits(&knob.cut(sizes, least)) {
            continue;
        }
        // invariant: `lo` fits, `hi` does not
        let (mut lo, mut hi) = (least, from);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if fits(&knob.cut(sizes, mid)) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        // the share of the count that must go: the smaller, the smaller the change
        found.push((1.0 - lo as f64 / from as f64, knob.describe(lo, from)));
    }
    found.sort_by(|a, b| a.0.total_cmp(&b.0));
    found.into_iter().map(|(_, s)| s).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(graph: &str, rows: usize, seconds_per_run: f64) -> GraphRate {
        GraphRate::new(graph.into(), "decode", rows, seconds_per_run, 3)
    }

    #[test]
    fn estimates_merge_runs_by_graph_and_price_them_by_rate() {
        let mut e = Estimate::default();
        e.add("b", 8, 3);
        e.add("a", 16, 1);
        e.add("b", 8, 2);
        e.add("c", 4, 0);
        assert_eq!(
            e.graphs,
            [
                GraphWork { graph: "b".into(), runs: 5, row_steps: 40 },
                GraphWork { graph: "a".into(), runs: 1, row_steps: 16 }
            ]
        );
        assert_eq!((e.runs(), e.row_steps()), (6, 56));
        let rates = Rates::new(vec![rate("b", 8, 0.08), rate("a", 16, 0.5)]);
        assert_eq!(rates.graphs[0].graph, "a", "sorted by name");
        // 5 runs of b at 0.08 s + 1 run of a at 0.5 s = 0.9 s, times the host factor
        let s = rates.seconds(&e).unwrap();
        assert!((s - 0.9 * HOST_FACTOR).abs() < 1e-9, "{s}");
        // an unmeasured graph: the engine cannot say
        e.add("z", 1, 1);
        assert_eq!(rates.seconds(&e), None);
        // saturating
        let mut big = Estimate::default();
        big.add("a", usize::MAX, u64::MAX);
        big.add("a", usize::MAX, u64::MAX);
        assert_eq!(big.row_steps(), u64::MAX);
    }

    #[test]
    fn the_host_factor_follows_what_the_last_long_calls_took() {
        let shared = SharedRates::default();
        shared.observe(1.0, 5.0);
        assert_eq!(shared.get(), None, "nothing to calibrate before the rates are measured");
        let mut e = Estimate::default();
        e.add("a", 10, 1);
        shared.set(Some(Rates::new(vec![rate("a", 10, 1.0)])));
        assert_eq!(shared.seconds(&e), Some(HOST_FACTOR));
        assert_eq!(shared.graph_seconds(&e), Some(1.0));
        // a call took 1.1× its graphs' time: so do estimates now
        shared.observe(1.0, 1.1);
        assert_eq!(shared.get().unwrap().host_factor, 1.1);
        // a slower machine: 1.1 + 4.9 s for 2 s of graphs
        shared.observe(1.0, 4.9);
        assert_eq!(shared.get().unwrap().host_factor, 3.0);
        assert_eq!(shared.seconds(&e), Some(3.0));
        // short calls do not count (fixed costs), nor nonsense
        shared.observe(CALIBRATE_MIN_SECONDS / 2.0, 100.0);
        shared.observe(1.0, f64::NAN);
        assert_eq!(shared.get().unwrap().host_factor, 3.0);
        // only the last calls count: fast calls bring it down (rates measured on a busier machine: below 1)
        for _ in 0..CALIBRATE_CALLS {
            shared.observe(1.0, 0.5);
        }
        assert_eq!(shared.get().unwrap().host_factor, 0.5);
        // within bounds
        shared.observe(1.0, 1e-9);
        for _ in 0..CALIBRATE_CALLS {
            shared.observe(1.0, 1e6);
        }
        assert_eq!(shared.get().unwrap().host_factor, HOST_FACTOR_RANGE.1);
        // a new warm-up starts again
        shared.observe(1.0, 4.0);
        shared.set(Some(Rates::new(vec![rate("a", 10, 1.0)])));
        assert_eq!(shared.get().unwrap().host_factor, HOST_FACTOR);
    }

    #[test]
    fn timed_runs_skip_the_first_and_take_the_median() {
        let mut calls = 0;
        let (s, n) = time_runs(false, || {
            calls += 1;
            if calls == 1 {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Ok(())
        })
        .unwrap();
        assert_eq!((calls, n), (1 + TIMED_RUNS, TIMED_RUNS));
        assert!(s < 0.05, "the untimed first run counted: {s}");
        // a graph the warm-up just ran: no untimed run
        let mut calls = 0;
        time_runs(true, || {
            calls += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(calls, TIMED_RUNS);
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [1.0, 2.0]), 2.0, "of two, the slower");
        assert_eq!(median(&mut []), 0.0);
        let e = time_runs(false, || Err(crate::Error::Cancelled { at: "x".into() })).unwrap_err();
        assert!(e.is_cancelled());
    }

    fn size(series: usize, variates: usize, horizon: usize, samples: usize) -> RequestSize {
        RequestSize { series, variates, context: 256, horizon, samples, quantiles: 0, max_context: None }
    }

    /// A cost of series × variates × horizon × max(1, samples) against a limit.
    fn under(limit: usize) -> impl Fn(&[RequestSize]) -> bool {
        move |sizes: &[RequestSize]| {
            sizes.iter().map(|s| s.series * s.variates * s.horizon * s.samples.max(1)).sum::<usize>() <= limit
        }
    }

    #[test]
    fn the_smallest_change_that_fits_comes_first() {
        // 4 series × 4 variates × horizon 160 × 256 samples = 655,360; the limit is a tenth of it.
        let sizes = [size(4, 4, 160, 256)];
        let fits = under(65_536);
        let hints = smallest_fit(&sizes, &fits);
        assert_eq!(
            hints,
            [
                // 90% of the horizon must go, 90.2% of the samples
                "a horizon of at most 16 (it asks 160)",
                "at most 25 samples (it asks 256)",
                // neither fewer series (1 series: 163,840) nor fewer variates nor a shorter context fits alone
            ]
        );
        // Every suggestion fits, and one more does not.
        assert!(fits(&Knob::Samples.cut(&sizes, 25)) && !fits(&Knob::Samples.cut(&sizes, 26)));
        assert!(fits(&Knob::Horizon.cut(&sizes, 16)) && !fits(&Knob::Horizon.cut(&sizes, 17)));
        // Series are kept in order across the request's parts.
        let parts = [size(2, 1, 10, 0), size(3, 2, 10, 0)];
        assert_eq!(Knob::Series.cut(&parts, 3), [size(2, 1, 10, 0), size(1, 2, 10, 0)]);
        let hints = smallest_fit(&parts, &under(45));
        assert_eq!(hints[0], "at most 3 of its 5 series per request (split it)", "{hints:?}");
        // One path costs as much as a mean forecast here: one sample is the answer.
        assert_eq!(smallest_fit(&[size(1, 1, 10, 64)], &under(10)), ["at most 1 sample (it asks 64)"]);
        // Where a mean forecast is cheaper than one path, only it fits.
        let paths_cost = |sizes: &[RequestSize]| sizes.iter().all(|s| s.samples == 0);
        assert_eq!(
            smallest_fit(&[size(1, 1, 10, 64)], &paths_cost),
            ["no sample paths (a mean forecast; it asks 64)"]
        );
        // Nothing fits.
        assert!(smallest_fit(&[size(1, 1, 1, 0)], &under(0)).is_empty());
    }
}
