//! `totoc forecast`.
use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use engines::engine_bundle::EngineBundle;
use engines::forecaster::Forecaster;
use engines::request::{read_requests, responses_to_string, write_responses, Format, Limits, Overrides};

use crate::cli::ForecastArgs;

pub fn run(a: ForecastArgs) -> anyhow::Result<ExitCode> {
    let overrides =
        Overrides { horizon: a.horizon, samples: a.samples, quantiles: a.quantiles.clone(), seed: a.seed };
    engines::runtime::set_intra_threads(a.threads);
    let bundle = EngineBundle::load(&a.engine, a.ort.ort_lib.as_deref())
        .with_context(|| format!("loading engine {}", a.engine.display()))?;
    let max_samples = bundle.manifest().profiles.iter().map(|p| p.profile.samples).max().unwrap_or(0);
    let reqs = read_requests(&a.input, None, &overrides, &Limits { max_samples })?;
    let mut f = Forecaster::new(bundle);
    let mut responses: Vec<_> = f.forecast(&reqs, false)?.into_iter().map(|f| f.response).collect();
    if a.no_samples_output {
        for r in &mut responses {
            r.samples = None;
        }
    }
    match &a.output {
        Some(path) => write_responses(path, &responses)?,
        None => {
            let format = if responses.len() == 1 { Format::Json } else { Format::JsonLines };
            let text = responses_to_string(&responses, format).map_err(anyhow::Error::msg)?;
            let mut out = std::io::stdout().lock();
            writeln!(out, "{}", text.trim_end())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
