//! The chart of `totoc bench` as data: the median time of every workload, one bar per engine and one for toto-ts
//! (the reference), grouped by workload on a log scale (the times span three decades). Built from the bench's
//! results by [`bench_chart`]; drawn by `super::render`.

use anyhow::bail;

use super::model::Axis;
use super::ticks::{self, Tick};

/// One bar.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// Index into [`BarChart::series`].
    pub series: usize,
    /// Index into [`BarChart::groups`].
    pub group: usize,
    /// Left and right edge on the x axis (group `g` spans `g..g + 1`).
    pub x: (f64, f64),
    pub value: f64,
    /// The value as written above the bar.
    pub label: String,
}

/// A grouped bar chart on a log scale.
#[derive(Debug, Clone, PartialEq)]
pub struct BarChart {
    pub size: (u32, u32),
    pub title: String,
    pub subtitle: String,
    /// Group names (workloads), left to right.
    pub groups: Vec<String>,
    /// Series names (engines, then the reference), in legend order.
    pub series: Vec<String>,
    /// Whether the last series is the reference (toto-ts).
    pub reference: bool,
    pub bars: Vec<Bar>,
    /// Where a series has no time (the engine cannot run the workload): labelled `n/a` at the bottom.
    pub missing: Vec<Bar>,
    /// The value axis: log-scale, or linear from 0 ([`histogram_chart`]).
    pub y: Axis,
    /// Whether [`BarChart::y`] is a log scale.
    pub log: bool,
    pub x: Axis,
}

/// The bench chart: `medians[e][w]` is engine `e`'s median time (ms) on workload `w` (`None`: it cannot run it),
/// `reference[w]` toto-ts's when it was timed.
pub fn bench_chart(
    workloads: &[&str],
    engines: &[(String, Vec<Option<f64>>)],
    reference: Option<&[Option<f64>]>,
    subtitle: String,
) -> anyhow::Result<BarChart> {
    let mut series: Vec<(String, Vec<Option<f64>>)> = engines.to_vec();
    if let Some(r) = reference {
        series.push(("toto-ts eager".to_string(), r.to_vec()));
    }
    let per_group = series.len().max(1) as f64;
    let width = 0.8 / per_group;
    let (mut bars, mut missing) = (Vec::new(), Vec::new());
    for (s, (_, values)) in series.iter().enumerate() {
        for g in 0..workloads.len() {
            let left = g as f64 + 0.1 + s as f64 * width;
            let x = (left, left + width);
            match values.get(g).copied().flatten().filter(|v| v.is_finite() && *v > 0.0) {
                Some(v) => bars.push(Bar { series: s, group: g, x, value: v, label: ms_label(v) }),
                None => missing.push(Bar { series: s, group: g, x, value: 0.0, label: "n/a".into() }),
            }
        }
    }
    if bars.is_empty() {
        bail!("the benchmark has no timing to plot");
    }
    let lo = bars.iter().map(|b| b.value).fold(f64::INFINITY, f64::min);
    let hi = bars.iter().map(|b| b.value).fold(0.0, f64::max);
    // Bars start below the smallest value (a log axis has no zero) and leave room above the largest for its label.
    let range = (10f64.powf((lo / 2.0).log10().floor()), hi * 2.5);
    missing.iter_mut().for_each(|m| m.value = range.0);
    let y = Axis {
        range,
        ticks: ticks::log_ticks(range.0, range.1),
        desc: Some("median time, ms (log scale)".into()),
    };
    let x = Axis {
        range: (0.0, workloads.len() as f64),
        ticks: workloads
            .iter()
            .enumerate()
            .map(|(g, w)| Tick { at: g as f64 + 0.5, label: w.to_string() })
            .collect(),
        desc: None,
    };
    let size = ((workloads.len() as u32 * 150 + 120).max(720), 480);
    Ok(BarChart {
        size,
        title: "totoc bench: median time per workload".to_string(),
        subtitle,
        groups: workloads.iter().map(|w| w.to_string()).collect(),
        series: series.into_iter().map(|(name, _)| name).collect(),
        reference: reference.is_some(),
        bars,
        missing,
        y,
        log: true,
        x,
    })
}

/// A grouped bar chart of values that are not times (`totoc backtest`'s metrics per model): `values[s][g]` is
/// series `s`'s value in group `g`, labelled with four decimals, on the same log scale as
/// [`bench_chart`] (metrics of one report span decades).
pub fn value_chart(
    title: &str,
    groups: &[&str],
    values: &[(String, Vec<Option<f64>>)],
    subtitle: String,
) -> anyhow::Result<BarChart> {
    let mut c = bench_chart(groups, values, None, subtitle)?;
    c.title = title.to_string();
    c.y.desc = Some("value (log scale)".into());
    c.bars.iter_mut().for_each(|b| b.label = format!("{:.4}", b.value));
    Ok(c)
}

/// A grouped bar chart of fractions on a linear axis from 0 (`totoc backtest`'s PIT histogram per sampled
/// engine): `values[s][g]` is series `s`'s fraction in group `g`, zero bars drawn flat, the calibrated
/// level is for the caller to say in the subtitle.
pub fn histogram_chart(
    title: &str,
    groups: &[&str],
    values: &[(String, Vec<f64>)],
    subtitle: String,
) -> anyhow::Result<BarChart> {
    if values.is_empty() || groups.is_empty() {
        bail!("the histogram has no values to plot");
    }
    let width = 0.8 / values.len() as f64;
    let mut bars = Vec::new();
    for (s, (_, v)) in values.iter().enumerate() {
        for (g, &value) in v.iter().enumerate().take(groups.len()) {
            let left = g as f64 + 0.1 + s as f64 * width;
            let value = if value.is_finite() { value.max(0.0) } else { 0.0 };
            bars.push(Bar {
                series: s,
                group: g,
                x: (left, left + width),
                value,
                label: format!("{value:.3}"),
            });
        }
    }
    let hi = bars.iter().map(|b| b.value).fold(0.0, f64::max).max(1e-3) * 1.2;
    let y = Axis { range: (0.0, hi), ticks: ticks::value_ticks(0.0, hi, 6), desc: Some("fraction".into()) };
    let x = Axis {
        range: (0.0, groups.len() as f64),
        ticks: groups
            .iter()
            .enumerate()
            .map(|(g, w)| Tick { at: g as f64 + 0.5, label: w.to_string() })
            .collect(),
        desc: None,
    };
    Ok(BarChart {
        size: ((groups.len() as u32 * 90 + 120).max(720), 480),
        title: title.to_string(),
        subtitle,
        groups: groups.iter().map(|g| g.to_string()).collect(),
        series: values.iter().map(|(name, _)| name.clone()).collect(),
        reference: false,
        bars,
        missing: Vec::new(),
        y,
        log: false,
        x,
    })
}

/// `4713`, `28.4`, `0.52` (ms): three significant digits at most, no more decimals than that.
fn ms_label(v: f64) -> String {
    match v {
        v if v >= 100.0 => format!("{v:.0}"),
        v if v >= 10.0 => format!("{v:.1}"),
        v => format!("{v:.2}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_bar_per_timed_workload_and_engine_plus_the_reference() {
        let engines = vec![
            ("cpu".to_string(), vec![Some(130.0), Some(29.0), None]),
            ("cuda".to_string(), vec![Some(12.5), Some(3.25), Some(7.0)]),
        ];
        let reference = [Some(371.0), Some(4713.0), None];
        let c =
            bench_chart(&["mean_h336", "samples256_h64", "batch8"], &engines, Some(&reference), "s".into())
                .unwrap();
        assert_eq!(c.series, ["cpu", "cuda", "toto-ts eager"]);
        // 3 + 2 + 2 timed values (None: the engine cannot run the workload)
        assert_eq!(c.bars.len(), 7);
        assert_eq!(c.missing.iter().map(|m| (m.series, m.group)).collect::<Vec<_>>(), [(0, 2), (2, 2)]);
        let b = &c.bars[0];
        assert_eq!((b.series, b.group, b.label.as_str()), (0, 0, "130"));
        assert!((b.x.1 - b.x.0 - 0.8 / 3.0).abs() < 1e-12);
        assert_eq!(c.bars.iter().find(|b| b.series == 1 && b.group == 1).unwrap().label, "3.25");
        // the log axis holds every bar and its label
        assert!(c.y.range.0 <= 3.25 / 2.0 && c.y.range.1 >= 4713.0 * 2.0);
        assert_eq!(c.y.range.0, 1.0);
        assert!(c.y.ticks.iter().any(|t| t.label == "1000"));
        assert_eq!(c.x.label(1.5), "samples256_h64");
    }

    #[test]
    fn a_histogram_is_linear_from_zero_and_keeps_empty_bins() {
        let v = vec![("a".to_string(), vec![0.0, 0.5, 0.5]), ("b".to_string(), vec![0.25, 0.25, 0.5])];
        let c = histogram_chart("h", &["0-1", "1-2", "2-3"], &v, String::new()).unwrap();
        assert!(!c.log && c.y.range.0 == 0.0 && c.y.range.1 >= 0.5);
        assert_eq!(c.bars.len(), 6);
        assert_eq!((c.bars[0].value, c.bars[0].label.as_str()), (0.0, "0.000"));
        assert!(histogram_chart("h", &["x"], &[], String::new()).is_err());
    }

    #[test]
    fn without_reference_or_timings() {
        let engines = vec![("cpu".to_string(), vec![Some(1.0)])];
        let c = bench_chart(&["mean_h64"], &engines, None, String::new()).unwrap();
        assert_eq!((c.series.len(), c.bars.len()), (1, 1));
        let none = vec![("cpu".to_string(), vec![None])];
        assert!(bench_chart(&["mean_h64"], &none, None, String::new())
            .unwrap_err()
            .to_string()
            .contains("no timing"));
    }
}
