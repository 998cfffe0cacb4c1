//! `totoc plot`: which saved forecast belongs to which series of the input. By series id when both have ids,
//! else in order; each forecast's variates are put in the series' order (tables name them in `target_name`),
//! and its steps must continue the series: the input's next timestamps (or step numbers 1..H without
//! timestamps). A forecast that does not fit its series is an error: it was made from another input.

use std::collections::HashMap;

use anyhow::bail;
use engines::request::{ForecastResponse, QuantileForecast};

use tables::forecast_in::{Saved, Steps};
use tables::{Dataset, Series};

/// Saved forecasts matched with their series.
#[derive(Debug)]
pub struct Paired {
    /// In input order: `(series index, response)`, the response's variates in the series' order.
    pub forecasts: Vec<(usize, ForecastResponse)>,
    /// About series of the input left without a forecast.
    pub notes: Vec<String>,
}

/// Pairs `saved` (read from the file `forecasts`) with the series of `dataset` (read from `input`).
pub fn pair(dataset: &Dataset, saved: Vec<Saved>, input: &str, forecasts: &str) -> anyhow::Result<Paired> {
    let fix = "plot the forecasts with the input they were made from";
    let by_id = dataset.series.iter().all(|s| s.request.id.is_some())
        && saved.iter().all(|f| f.response.id.is_some());
    let mut pairs: Vec<(usize, Saved)> = Vec::with_capacity(saved.len());
    if by_id {
        let index: HashMap<String, usize> = dataset
            .series
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.request.id.as_ref().map(|id| (id.to_string(), i)))
            .collect();
        for f in saved {
            let id = f.response.id.as_ref().map(ToString::to_string).unwrap_or_default();
            let Some(&i) = index.get(&id) else {
                bail!("{}: {input} has no series `{id}`; {fix}", f.at);
            };
            if pairs.iter().any(|(j, _)| *j == i) {
                bail!("{}: series {id} has two forecasts in {forecasts}; keep one per series", f.at);
            }
            pairs.push((i, f));
        }
        pairs.sort_by_key(|(i, _)| *i);
    } else {
        if saved.len() != dataset.series.len() {
            bail!(
                "{forecasts} holds {} forecasts and {input} {} series, without series ids to match them; {fix}",
                saved.len(),
                dataset.series.len()
            );
        }
        pairs.extend(saved.into_iter().enumerate());
    }
    let mut notes = Vec::new();
    let missing = dataset.series.len() - pairs.len();
    if missing > 0 {
        notes.push(format!(
            "{missing} of the {} series of {input} have no forecast in {forecasts}",
            dataset.series.len()
        ));
    }
    let out = pairs
        .into_iter()
        .map(|(i, f)| {
            let s = &dataset.series[i];
            check_steps(s, &f, fix)?;
            Ok((i, in_series_order(s, f, fix)?))
        })
        .collect::<anyhow::Result<_>>()?;
    Ok(Paired { forecasts: out, notes })
}

/// The response with its variates in the series' order.
fn in_series_order(s: &Series, f: Saved, fix: &str) -> anyhow::Result<ForecastResponse> {
    let mut r = f.response;
    let names = &s.target_names;
    let order: Vec<usize> = match &f.variates {
        None => {
            if r.point().len() != names.len() {
                bail!(
                    "{}: the forecast has {} variates and the series {}; {fix}",
                    f.at,
                    r.point().len(),
                    names.len()
                );
            }
            (0..names.len()).collect()
        }
        Some(saved) => {
            let mut order = Vec::with_capacity(names.len());
            for name in names {
                match saved.iter().position(|n| n == name) {
                    Some(k) => order.push(k),
                    None => bail!("{}: there is no forecast of target `{name}`; {fix}", f.at),
                }
            }
            if saved.len() != names.len() {
                bail!("{}: the forecast has targets {saved:?} and the series {names:?}; {fix}", f.at);
            }
            order
        }
    };
    let pick = |rows: &Vec<Vec<f32>>| order.iter().map(|&k| rows[k].clone()).collect::<Vec<_>>();
    r.mean = r.mean.as_ref().map(pick);
    r.median = r.median.as_ref().map(pick);
    r.quantiles = r.quantiles.iter().map(|q| QuantileForecast { q: q.q, values: pick(&q.values) }).collect();
    Ok(r)
}

/// The forecast's steps must be the series' next ones.
fn check_steps(s: &Series, f: &Saved, fix: &str) -> anyhow::Result<()> {
    let horizon = f.response.point().first().map_or(0, Vec::len);
    match (&s.time, &f.steps) {
        (Some(axis), Steps::Stamps(got)) => {
            let want = axis.future(horizon).unwrap_or_default();
            if let Some(k) = (0..horizon).find(|&k| want.get(k).map(|w| w.at) != got.get(k).map(|g| g.at)) {
                let (w, g) = (want.get(k).map(ToString::to_string), got.get(k).map(ToString::to_string));
                bail!(
                    "{}: forecast step {} is {}, but the series in the input continues at {}; {fix} (and the same --freq)",
                    f.at,
                    k + 1,
                    g.unwrap_or_else(|| "missing".into()),
                    w.unwrap_or_else(|| "no timestamp".into())
                );
            }
        }
        (Some(_), _) => bail!("{}: the forecast has no timestamps but the input does; {fix}", f.at),
        (None, Steps::Stamps(_)) => {
            bail!("{}: the forecast has timestamps but the input has none; {fix}", f.at)
        }
        (None, Steps::Numbers(n)) => {
            if !n.iter().copied().eq(1..=horizon as i64) {
                bail!("{}: the steps are not 1..{horizon} in order; {fix}", f.at);
            }
        }
        (None, Steps::Absent) => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use engines::request::{Limits, Overrides, RequestId};

    use super::*;
    use tables::forecast_in::Steps;
    use tables::timestamps::{parse_text, EpochUnit};
    use tables::{parse, Format, ReadOptions};

    fn dataset(csv: &str) -> Dataset {
        let o = Overrides { horizon: Some(1), ..Overrides::default() };
        parse(csv.as_bytes().to_vec(), Format::Csv, "in.csv", &ReadOptions::default(), &o, &Limits::default())
            .unwrap()
    }

    fn saved(id: Option<&str>, point: Vec<Vec<f32>>, variates: Option<&[&str]>, steps: Steps) -> Saved {
        Saved {
            at: format!("f.csv: series {}", id.unwrap_or("-")),
            response: ForecastResponse {
                id: id.map(|i| RequestId::Str(i.into())),
                mean: None,
                median: Some(point.clone()),
                quantiles: vec![QuantileForecast { q: 0.1, values: point }],
                samples: None,
                context_truncated: None,
                buckets: Vec::new(),
                profile: String::new(),
                engine: String::new(),
                sampler: None,
                engine_sha256: None,
            },
            variates: variates.map(|v| v.iter().map(|s| s.to_string()).collect()),
            model: None,
            steps,
        }
    }

    fn stamps(xs: &[&str]) -> Steps {
        Steps::Stamps(xs.iter().map(|s| parse_text(s, EpochUnit::Seconds).unwrap()).collect())
    }

    const LONG: &str = "unique_id,ds,y\na,2024-01-01,1\na,2024-01-02,2\nb,2024-01-01,3\nb,2024-01-02,4\nc,2024-01-01,5\nc,2024-01-02,6\n";

    #[test]
    fn forecasts_pair_by_id_in_input_order_and_missing_series_are_noted() {
        let d = dataset(LONG);
        let f = vec![
            saved(Some("c"), vec![vec![7.0]], None, stamps(&["2024-01-03"])),
            saved(Some("a"), vec![vec![3.0]], None, stamps(&["2024-01-03"])),
        ];
        let Paired { forecasts: pairs, notes } = pair(&d, f, "in.csv", "f.csv").unwrap();
        assert_eq!(
            pairs.iter().map(|(i, r)| (*i, r.median.clone().unwrap()[0][0])).collect::<Vec<_>>(),
            [(0, 3.0), (2, 7.0)]
        );
        assert_eq!(notes, ["1 of the 3 series of in.csv have no forecast in f.csv"]);
        let e = |f: Vec<Saved>| pair(&d, f, "in.csv", "f.csv").unwrap_err().to_string();
        assert_eq!(
            e(vec![saved(Some("z"), vec![vec![1.0]], None, stamps(&["2024-01-03"]))]),
            "f.csv: series z: in.csv has no series `z`; plot the forecasts with the input they were made from"
        );
        let msg = e(vec![saved(Some("a"), vec![vec![1.0]], None, stamps(&["2024-01-04"]))]);
        assert!(
            msg.contains(
                "forecast step 1 is 2024-01-04, but the series in the input continues at 2024-01-03"
            ),
            "{msg}"
        );
        assert!(e(vec![saved(Some("a"), vec![vec![1.0]], None, Steps::Numbers(vec![1]))])
            .contains("has no timestamps but the input does"));
        let two = vec![
            saved(Some("a"), vec![vec![1.0]], None, stamps(&["2024-01-03"])),
            saved(Some("a"), vec![vec![1.0]], None, stamps(&["2024-01-03"])),
        ];
        assert!(e(two).contains("two forecasts"));
    }

    #[test]
    fn table_variates_are_put_in_series_order() {
        let d = dataset("cpu,mem\n1,2\n3,4\n");
        let f = vec![saved(
            None,
            vec![vec![20.0, 21.0], vec![10.0, 11.0]],
            Some(&["mem", "cpu"]),
            Steps::Numbers(vec![1, 2]),
        )];
        let Paired { forecasts: pairs, notes } = pair(&d, f, "in.csv", "f.csv").unwrap();
        assert!(notes.is_empty());
        assert_eq!(pairs[0].1.median.as_ref().unwrap(), &vec![vec![10.0, 11.0], vec![20.0, 21.0]]);
        assert_eq!(pairs[0].1.quantiles[0].values[0], vec![10.0, 11.0]);
        let e = |f: Vec<Saved>| pair(&d, f, "in.csv", "f.csv").unwrap_err().to_string();
        assert!(e(vec![saved(None, vec![vec![1.0]], Some(&["disk"]), Steps::Numbers(vec![1]))])
            .contains("no forecast of target `cpu`"));
        assert!(e(vec![saved(None, vec![vec![1.0]], None, Steps::Numbers(vec![1]))])
            .contains("1 variates and the series 2"));
        assert!(e(vec![saved(None, vec![vec![1.0], vec![1.0]], None, Steps::Numbers(vec![2]))])
            .contains("not 1..1"));
        assert!(e(vec![]).contains("holds 0 forecasts and in.csv 1 series"));
    }
}
