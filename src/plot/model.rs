//! The chart of a forecast as data: what each panel shows (the last part of the history, the point forecast,
//! bands between symmetric quantiles, the axes' ticks and labels) and how the panels are laid out, built from
//! the series that were forecast and their forecasts ([`forecast_figure`]). Nothing here draws; the renderer
//! (`super::render`) only maps this model onto pixels, so tests check what a chart shows without rendering it.
//!
//! A panel is one variate of one series (a multivariate series gets one panel per variate: their scales
//! differ). Its x axis counts grid steps of the series: 0 is the last point of the history, `1..=H` are the
//! forecast steps, negative steps the history before it; missing points are gaps in the history line.

use engines::request::ForecastResponse;

use super::layout::Layout;
use super::ticks::{self, Tick};
use tables::Series;

/// Default number of history points shown: four horizons, at least this many.
pub const MIN_DEFAULT_HISTORY: usize = 64;
/// Panels drawn at most unless `--plot-panels` says otherwise (a 4 × 3 grid).
pub const DEFAULT_PANELS: usize = 12;

/// Series and their forecasts, one [`Forecast`] per series, as `totoc forecast` made them.
#[derive(Debug, Clone, Copy)]
pub struct Forecast<'a> {
    pub series: &'a Series,
    pub response: &'a ForecastResponse,
}

/// Where the forecasts came from, for the chart's subtitle.
#[derive(Debug, Clone, Default)]
pub struct About {
    /// `toto-1.0`, `toto-2.0`.
    pub model: Option<String>,
    /// The engine: its name and target, e.g. `tiny-cpu: cpu (onnxruntime 1.31.1)`.
    pub engine: Option<String>,
}

/// What to draw (the `--plot-*` flags).
#[derive(Debug, Clone, PartialEq)]
pub struct ChartOptions {
    /// History points per panel; `None`: four horizons, at least [`MIN_DEFAULT_HISTORY`].
    pub history: Option<usize>,
    /// Panels drawn at most; the others are left out with a note.
    pub max_panels: usize,
    /// Size of the whole image in pixels; `None`: from the number of panels.
    pub size: Option<(u32, u32)>,
    /// Replaces the default title.
    pub title: Option<String>,
}

impl Default for ChartOptions {
    fn default() -> Self {
        ChartOptions { history: None, max_panels: DEFAULT_PANELS, size: None, title: None }
    }
}

/// A whole chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub layout: Layout,
    pub title: String,
    /// Model, engine, window.
    pub subtitle: String,
    pub legend: Vec<Legend>,
    pub panels: Vec<Panel>,
    /// Shown under the panels: what was left out, and why.
    pub notes: Vec<String>,
}

/// An entry of the legend.
#[derive(Debug, Clone, PartialEq)]
pub enum Legend {
    History,
    /// The point forecast, by its name (`mean`, `median`).
    Point(String),
    /// The band between two quantile levels.
    Band {
        lower: f64,
        upper: f64,
    },
}

/// One variate of one series.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// Series id (or input name), variate name when the series has several, context cut.
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    /// The history window, split at missing points into runs of consecutive observed points `(step, value)`.
    pub history: Vec<Vec<(f64, f64)>>,
    /// The point forecast `(step, value)`, steps 1..=H.
    pub forecast: Vec<(f64, f64)>,
    /// Bands between symmetric quantile levels, widest first.
    pub bands: Vec<Band>,
}

#[cfg(test)]
impl Panel {
    /// History points drawn (observed points of the window).
    pub fn history_points(&self) -> usize {
        self.history.iter().map(Vec::len).sum()
    }
}

/// An axis: its range in data units and its ticks.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    pub range: (f64, f64),
    pub ticks: Vec<Tick>,
    /// A description under the axis, when the tick labels need one.
    pub desc: Option<String>,
}

impl Axis {
    /// The label of the tick at `at` (how the renderer labels its key points).
    pub fn label(&self, at: f64) -> String {
        self.ticks.iter().find(|t| (t.at - at).abs() < 1e-9).map_or_else(String::new, |t| t.label.clone())
    }
}

/// The band between quantile levels `lower` and `upper = 1 - lower`.
#[derive(Debug, Clone, PartialEq)]
pub struct Band {
    pub lower_q: f64,
    pub upper_q: f64,
    /// `(step, value)` of the lower and upper quantile, steps 1..=H.
    pub lower: Vec<(f64, f64)>,
    pub upper: Vec<(f64, f64)>,
}

impl Band {
    /// The band's outline: the upper quantile forward, the lower one back.
    pub fn outline(&self) -> Vec<(f64, f64)> {
        self.upper.iter().chain(self.lower.iter().rev()).copied().collect()
    }
}

/// The chart of `forecasts` (in input order; at most `opts.max_panels` panels are drawn). `notes` are shown under
/// the panels, after the chart's own (panels left out).
pub fn forecast_figure(
    forecasts: &[Forecast<'_>],
    about: &About,
    mut notes: Vec<String>,
    opts: &ChartOptions,
) -> anyhow::Result<Figure> {
    let total: usize = forecasts.iter().map(|f| f.response.point().len()).sum();
    if total == 0 {
        anyhow::bail!("there is no forecast to plot");
    }
    let shown = total.min(opts.max_panels.max(1));
    if shown < total {
        notes.insert(
            0,
            format!(
                "{} of {total} panels are not shown (one per series and variate); --plot-panels {total} shows them all",
                total - shown
            ),
        );
    }
    let layout = Layout::new(shown, notes.len(), opts.size)?;
    let mut panels = Vec::with_capacity(shown);
    'series: for f in forecasts {
        for v in 0..f.response.point().len() {
            if panels.len() == shown {
                break 'series;
            }
            panels.push(panel(f, v, opts.history, &layout));
        }
    }
    let point = point_name(forecasts[0].response).to_string();
    let mut legend = vec![Legend::History, Legend::Point(point)];
    let mut levels: Vec<(f64, f64)> = Vec::new();
    for b in panels.iter().flat_map(|p| &p.bands) {
        if !levels.iter().any(|&(lo, _)| lo == b.lower_q) {
            levels.push((b.lower_q, b.upper_q));
        }
    }
    levels.sort_by(|a, b| a.0.total_cmp(&b.0));
    legend.extend(levels.into_iter().map(|(lower, upper)| Legend::Band { lower, upper }));
    let title = opts.title.clone().unwrap_or_else(|| match forecasts {
        [one] => format!("Forecast of {}", series_name(one.series)),
        _ => format!("Forecasts of {} series", forecasts.len()),
    });
    let mut parts = Vec::new();
    parts.extend(about.model.as_ref().map(|m| format!("model {m}")));
    parts.extend(about.engine.as_ref().map(|e| format!("engine {e}")));
    parts.push(match opts.history {
        Some(n) => format!("last {n} points of history"),
        None => format!("history: last 4 horizons (at least {MIN_DEFAULT_HISTORY} points)"),
    });
    Ok(Figure { layout, title, subtitle: parts.join(" · "), legend, panels, notes })
}

/// `mean` (Toto 1.0) or `median` (Toto 2.0): the response's own point forecast.
pub fn point_name(r: &ForecastResponse) -> &'static str {
    if r.mean.is_some() {
        "mean"
    } else {
        "median"
    }
}

/// The series' id; without one, the column of a one-column table, else the input's file name (and line).
fn series_name(s: &Series) -> String {
    if let Some(id) = &s.request.id {
        return id.to_string();
    }
    match &s.target_names[..] {
        [one] if one.parse::<usize>().is_err() => one.clone(),
        _ => s.at.rsplit(['/', '\\']).next().unwrap_or(&s.at).to_string(),
    }
}

fn panel(f: &Forecast<'_>, v: usize, history: Option<usize>, layout: &Layout) -> Panel {
    let r = f.response;
    let point = &r.point()[v];
    let horizon = point.len();
    let target = &f.series.request.target[v];
    let window = history.unwrap_or((4 * horizon).max(MIN_DEFAULT_HISTORY)).min(target.len()).max(1);
    // Step of target[i]: the last point is step 0.
    let last = target.len() as i64 - 1;
    let mut runs: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut run: Vec<(f64, f64)> = Vec::new();
    for (i, y) in target.iter().enumerate().skip(target.len() - window) {
        match y.map(f64::from).filter(|y| y.is_finite()) {
            Some(y) => run.push(((i as i64 - last) as f64, y)),
            None if !run.is_empty() => runs.push(std::mem::take(&mut run)),
            None => {}
        }
    }
    if !run.is_empty() {
        runs.push(run);
    }
    let forecast = steps(point);
    let bands = bands(r, v);

    let mut title = series_name(f.series);
    if f.series.target_names.len() > 1 {
        title = format!("{title} · {}", f.series.target_names[v]);
    }
    if let Some(cut) = &r.context_truncated {
        title = format!("{title} (context: last {} of {} points)", cut.used, cut.given);
    }

    let (first, end) = (1 - window as i64, horizon as i64);
    let span = (end - first) as f64;
    let pad = (span * 0.01).max(0.5);
    let axis = f.series.time.as_ref();
    let plot = layout.plot_area();
    // Labels are as long as the last timestamp's (or a step number's) text.
    let label_chars = axis.and_then(|a| a.at(0)).map_or(4, |s| ticks::stamp_label(&s).chars().count());
    let max_x = (plot.0 as usize / (label_chars * 7 + 24)).max(2);
    let x = Axis {
        range: (first as f64 - pad, end as f64 + pad),
        ticks: ticks::time_ticks(axis, first, end, max_x),
        desc: axis.is_none().then(|| "steps (0: last observation)".to_string()),
    };
    let ys = runs
        .iter()
        .flatten()
        .chain(&forecast)
        .chain(bands.iter().flat_map(|b| b.lower.iter().chain(&b.upper)));
    let (lo, hi) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &(_, y)| (lo.min(y), hi.max(y)));
    let (lo, hi) = if lo > hi { (0.0, 1.0) } else { (lo, hi) };
    let pad = if hi > lo { (hi - lo) * 0.06 } else { (hi.abs() * 0.05).max(1.0) };
    let range = (lo - pad, hi + pad);
    let y = Axis {
        range,
        ticks: ticks::value_ticks(range.0, range.1, (plot.1 as usize / 36).clamp(2, 8)),
        desc: None,
    };
    Panel { title, x, y, history: runs, forecast, bands }
}

/// Forecast values as `(step, value)`, steps 1..=H.
fn steps(values: &[f32]) -> Vec<(f64, f64)> {
    values.iter().enumerate().map(|(h, &y)| ((h + 1) as f64, f64::from(y))).collect()
}

/// The bands between symmetric quantile levels (q, 1 − q) of variate `v`, widest first.
fn bands(r: &ForecastResponse, v: usize) -> Vec<Band> {
    let mut out: Vec<Band> = Vec::new();
    for lo in r.quantiles.iter().filter(|q| q.q < 0.5) {
        let Some(hi) = r.quantiles.iter().find(|q| (q.q + lo.q - 1.0).abs() < 1e-9) else { continue };
        let (Some(l), Some(h)) = (lo.values.get(v), hi.values.get(v)) else { continue };
        if out.iter().all(|b| b.lower_q != lo.q) {
            out.push(Band { lower_q: lo.q, upper_q: hi.q, lower: steps(l), upper: steps(h) });
        }
    }
    out.sort_by(|a, b| a.lower_q.total_cmp(&b.lower_q));
    out
}

#[cfg(test)]
mod tests {
    use engines::request::{ContextCut, Limits, Overrides, QuantileForecast, RequestId};

    use super::*;
    use tables::{parse, Dataset, Format, ReadOptions};

    fn dataset(csv: &str) -> Dataset {
        let o = Overrides { horizon: Some(3), ..Overrides::default() };
        parse(csv.as_bytes().to_vec(), Format::Csv, "in.csv", &ReadOptions::default(), &o, &Limits::default())
            .unwrap()
    }

    /// A response with the point forecast `point` (`median` when `median`) and the given quantile levels, each
    /// `point + (q - 0.5) * 10`.
    fn response(point: Vec<Vec<f32>>, median: bool, levels: &[f64]) -> ForecastResponse {
        let q = |level: f64| QuantileForecast {
            q: level,
            values: point
                .iter()
                .map(|v| v.iter().map(|x| x + (level as f32 - 0.5) * 10.0).collect())
                .collect(),
        };
        ForecastResponse {
            id: None,
            mean: (!median).then(|| point.clone()),
            median: median.then(|| point.clone()),
            quantiles: levels.iter().map(|&l| q(l)).collect(),
            samples: None,
            context_truncated: None,
            buckets: Vec::new(),
            profile: "p".into(),
            engine: "cpu".into(),
            sampler: None,
            engine_sha256: None,
        }
    }

    fn figure(d: &Dataset, rs: &[ForecastResponse], opts: &ChartOptions) -> Figure {
        let fs: Vec<Forecast<'_>> =
            d.series.iter().zip(rs).map(|(series, response)| Forecast { series, response }).collect();
        forecast_figure(&fs, &About::default(), Vec::new(), opts).unwrap()
    }

    const DAILY: &str = "unique_id,ds,y\na,2024-01-01,1\na,2024-01-02,2\na,2024-01-04,4\na,2024-01-05,5\n\
                         a,2024-01-06,6\na,2024-01-08,8\nb,2024-01-01,10\nb,2024-01-02,20\n";

    #[test]
    fn history_runs_split_at_gaps_and_the_forecast_follows_step_zero() {
        let d = dataset(DAILY);
        let rs = [
            response(vec![vec![9.0, 10.0, 11.0]], false, &[]),
            response(vec![vec![1.0, 2.0, 3.0]], false, &[]),
        ];
        let f = figure(&d, &rs, &ChartOptions::default());
        assert_eq!(f.panels.len(), 2);
        let a = &f.panels[0];
        assert_eq!(a.title, "a");
        // 2024-01-01 .. 2024-01-08 with 3 and 7 missing: runs of 2, 3 and 1 points
        assert_eq!(
            a.history,
            vec![
                vec![(-7.0, 1.0), (-6.0, 2.0)],
                vec![(-4.0, 4.0), (-3.0, 5.0), (-2.0, 6.0)],
                vec![(0.0, 8.0)]
            ]
        );
        assert_eq!(a.history_points(), 6);
        assert_eq!(a.forecast, vec![(1.0, 9.0), (2.0, 10.0), (3.0, 11.0)]);
        assert!(a.bands.is_empty());
        // the y range holds every value; ticks lie within it
        assert!(a.y.range.0 < 1.0 && a.y.range.1 > 11.0);
        assert!(a.y.ticks.iter().all(|t| t.at >= a.y.range.0 && t.at <= a.y.range.1));
        // daily ticks are the series' dates; the forecast's steps continue them
        assert!(a.x.ticks.iter().any(|t| t.label == "2024-01-08" && t.at == 0.0), "{:?}", a.x.ticks);
        assert!(a.x.ticks.iter().any(|t| t.label == "2024-01-10" && t.at == 2.0), "{:?}", a.x.ticks);
        assert_eq!(a.x.desc, None);
        assert_eq!(f.legend, vec![Legend::History, Legend::Point("mean".into())]);
        assert_eq!(f.title, "Forecasts of 2 series");
    }

    #[test]
    fn symmetric_quantile_pairs_become_bands_widest_first_with_the_median_as_point() {
        let d = dataset(DAILY);
        let levels = [0.1, 0.25, 0.5, 0.75, 0.9, 0.95];
        let rs = [
            response(vec![vec![9.0, 10.0, 11.0]], true, &levels),
            response(vec![vec![1.0, 2.0, 3.0]], true, &[]),
        ];
        let f = figure(&d, &rs, &ChartOptions::default());
        let bands = &f.panels[0].bands;
        // 0.95 has no 0.05: no band; 0.5 is not a pair
        assert_eq!(
            bands.iter().map(|b| (b.lower_q, b.upper_q)).collect::<Vec<_>>(),
            [(0.1, 0.9), (0.25, 0.75)]
        );
        assert_eq!(bands[0].lower, vec![(1.0, 5.0), (2.0, 6.0), (3.0, 7.0)]);
        assert_eq!(bands[0].upper[0], (1.0, 13.0));
        assert_eq!(bands[0].outline().len(), 6);
        assert!(f.panels[1].bands.is_empty());
        assert_eq!(
            f.legend,
            vec![
                Legend::History,
                Legend::Point("median".into()),
                Legend::Band { lower: 0.1, upper: 0.9 },
                Legend::Band { lower: 0.25, upper: 0.75 }
            ]
        );
        // the bands widen the y range
        assert!(f.panels[0].y.range.1 > 13.0);
    }

    #[test]
    fn the_window_panel_cap_and_multivariate_series() {
        // 100 points without timestamps, horizon 3: the default window is 64 points
        let csv: String =
            "cpu,mem\n".to_string() + &(0..100).map(|i| format!("{i},{}\n", 2 * i)).collect::<String>();
        let d = dataset(&csv);
        let mut r = response(vec![vec![1.0; 3], vec![2.0; 3]], false, &[]);
        r.context_truncated = Some(ContextCut { given: 300, used: 100 });
        let f = figure(&d, std::slice::from_ref(&r), &ChartOptions::default());
        assert_eq!(f.panels.len(), 2);
        assert_eq!(f.panels[0].history_points(), 64);
        assert_eq!(f.panels[0].history[0][0], (-63.0, 36.0));
        assert_eq!(f.panels[1].title, "in.csv · mem (context: last 100 of 300 points)");
        // a one-column table is named after its column
        let one = dataset("ds,co2\n2024-01-01,1\n2024-01-08,2\n");
        let g = figure(&one, &[response(vec![vec![1.0; 3]], false, &[])], &ChartOptions::default());
        assert_eq!((g.title.as_str(), g.panels[0].title.as_str()), ("Forecast of co2", "co2"));
        assert_eq!(f.panels[0].x.desc.as_deref(), Some("steps (0: last observation)"));
        assert!(f.panels[0].x.ticks.iter().any(|t| t.label == "0"));
        let opts = ChartOptions { history: Some(10), max_panels: 1, ..ChartOptions::default() };
        let f = figure(&d, &[r], &opts);
        assert_eq!(f.panels.len(), 1);
        assert_eq!(f.panels[0].history_points(), 10);
        assert_eq!(
            f.notes,
            ["1 of 2 panels are not shown (one per series and variate); --plot-panels 2 shows them all"]
        );
        assert_eq!(f.title, "Forecast of in.csv");
    }

    #[test]
    fn title_and_subtitle_name_the_series_model_and_engine() {
        let d = dataset("unique_id,ds,y\nco2,2024-01-01,1\nco2,2024-01-08,2\n");
        let mut r = response(vec![vec![1.0, 2.0, 3.0]], false, &[]);
        r.id = Some(RequestId::Str("co2".into()));
        let fs = [Forecast { series: &d.series[0], response: &r }];
        let about =
            About { model: Some("toto-1.0".into()), engine: Some("e: cpu (onnxruntime 1.31.1)".into()) };
        let f = forecast_figure(&fs, &about, vec!["a note".into()], &ChartOptions::default()).unwrap();
        assert_eq!(f.title, "Forecast of co2");
        assert_eq!(
            f.subtitle,
            "model toto-1.0 · engine e: cpu (onnxruntime 1.31.1) · history: last 4 horizons (at least 64 points)"
        );
        assert_eq!(f.notes, ["a note"]);
        assert_eq!(f.panels[0].title, "co2");
    }
}
