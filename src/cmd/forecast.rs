//! `totoc forecast`.
use std::io::Write;
use std::process::ExitCode;

use anyhow::{bail, Context};
use engines::engine::{Engine, LoadOptions};
use engines::request::{read_requests, responses_to_string, write_responses, Format, Limits, Overrides};

use crate::cli::ForecastArgs;

pub fn run(a: ForecastArgs) -> anyhow::Result<ExitCode> {
    let overrides = Overrides {
        horizon: a.horizon,
        samples: a.samples,
        quantiles: a.quantiles.clone(),
        seed: a.seed,
        strict_context: None,
    };
    let memory_budget = a.memory_budget.as_deref().map(engines::memory::parse_size).transpose()?;
    let opts = LoadOptions { ort_lib: a.ort.ort_lib.clone(), threads: a.threads, memory_budget };
    let engine =
        Engine::load(&a.engine, &opts).with_context(|| format!("loading engine {}", a.engine.display()))?;
    let limits = Limits { max_samples: engine.info().limits.max_samples };
    let mut reqs = read_requests(&a.input, None, &overrides, &limits)?;
    // Every request is checked before any is run: a bad one stops the run with nothing written.
    for (i, r) in reqs.iter_mut().enumerate() {
        engine.admit(r, &format!("{} request {}", a.input.display(), i + 1))?;
    }
    let mut responses = Vec::with_capacity(reqs.len());
    for (i, r) in engine.forecast(reqs).into_iter().enumerate() {
        match r {
            Ok(r) => responses.push(r),
            Err(e) => bail!("{} request {}: {e}", a.input.display(), i + 1),
        }
    }
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
