//! The engine of the throwaway third family (`tests/integration/third_family.rs`; never shipped): its build
//! copies the export bundle's graphs, its engine runs one graph call per variate.

use std::any::Any;
use std::path::Path;
use std::sync::Mutex;

use exporter::fsutil::StagingDir;
use exporter::manifest::{file_entries, Manifest};
use exporter::signature::Precision;
use exporter::toy::ToyGraph;

use crate::admission::admit;
use crate::backend::Target;
use crate::bundle::{
    bundle_files, BuildEvent, BuildOptions, EngineManifest, GraphFile, GraphForm, SourceBundle, ENGINE_FORMAT,
    ENGINE_FORMAT_VERSION,
};
use crate::error::{Error, Result};
use crate::family::{Call, EngineLimits, FamilyEngine, Forecast, RunOptions};
use crate::graph::GraphRunner;
use crate::registry::graphs::EngineGraphs;
use crate::request::{ContextCut, ForecastRequest, ForecastResponse};

/// Builds a toy engine (CPU only): the graphs and weights copied, the manifest written.
pub fn build_engine(
    artifacts: &Path,
    source: &Manifest,
    source_sha: String,
    target: &Target,
    out: &Path,
    options: &BuildOptions,
    progress: &mut dyn FnMut(BuildEvent),
) -> Result<EngineManifest> {
    let rt = crate::runtime::init(options.ort_lib.as_deref())?;
    let stage = StagingDir::new(out, true)?;
    let graphs = &source.family.toy;
    progress(BuildEvent::Start { graphs: graphs.len(), precision: Precision::Fp32, emulation: false });
    let weights_file = source.weights_file(Precision::Fp32).unwrap_or("weights.fp32.bin").to_string();
    for f in graphs.iter().map(|g| &g.file).chain(std::iter::once(&weights_file)) {
        let to = stage.path().join(f);
        std::fs::copy(artifacts.join(f), &to).map_err(|e| Error::io(&to, e))?;
    }
    let files = bundle_files(stage.path())?;
    let manifest = EngineManifest {
        format: ENGINE_FORMAT.into(),
        format_version: ENGINE_FORMAT_VERSION,
        totoc_version: env!("CARGO_PKG_VERSION").into(),
        ort_version: rt.version().to_string(),
        target: target.clone(),
        precision: Precision::Fp32,
        fp16_emulation: false,
        graphs: GraphForm::PerBucket,
        source: SourceBundle::of(source, source_sha),
        model: source.model.clone(),
        weights_file,
        weights_bytes: 0,
        weight_copies: 1,
        memory_budget: options.memory_budget.unwrap_or_else(crate::memory::default_budget),
        family: EngineGraphs { toy: graphs.clone(), ..EngineGraphs::default() },
        files: file_entries(stage.path(), &files)?,
        inputs: Default::default(),
    };
    crate::bundle::commit_engine(stage, manifest)
}

/// The toy engine: its one graph per profile, loaded on first use.
#[derive(Debug)]
pub struct ToyEngine {
    graph: ToyGraph,
    runner: Mutex<Option<GraphRunner>>,
}

impl ToyEngine {
    pub fn load(manifest: &EngineManifest) -> Result<(EngineLimits, Self)> {
        let graph = manifest.family.toy.first().cloned().ok_or_else(|| Error::Engine {
            path: ".".into(),
            message: "a toy engine without graphs".into(),
        })?;
        let limits = EngineLimits {
            max_variates: graph.profile.variates,
            max_context: graph.profile.context,
            max_horizon: graph.horizon,
            max_samples: 0,
        };
        Ok((limits, ToyEngine { graph, runner: Mutex::new(None) }))
    }

    fn run(&self, call: Call<'_>, req: &ForecastRequest) -> Result<ForecastResponse> {
        let mut slot = self.runner.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            let g = &self.graph;
            *slot = Some(call.bundle.load_graph(&GraphFile {
                file: &g.file,
                label: &g.file,
                inputs: &g.inputs,
                outputs: &g.outputs,
                shared: false,
                gpu_graph_id: None,
                memory_pattern: true,
                cpu_arena: true,
            })?);
        }
        let runner = slot.as_mut().expect("loaded above");
        let c = self.graph.context;
        let mut mean = Vec::new();
        for series in &req.target {
            // the last `c` points, missing ones as the last observed value (0 before any), left-padded
            let mut last = 0.0;
            let filled: Vec<f32> = series
                .iter()
                .map(|v| {
                    last = v.unwrap_or(last);
                    last
                })
                .collect();
            let mut x = vec![filled.first().copied().unwrap_or(0.0); c.saturating_sub(filled.len())];
            x.extend(&filled[filled.len().saturating_sub(c)..]);
            runner.write_f32("x", 0, &x)?;
            runner.run()?;
            mean.push(runner.output::<f32>("y")?[..req.horizon].to_vec());
        }
        Ok(ForecastResponse {
            id: req.id.clone(),
            mean: Some(mean),
            median: None,
            quantiles: Vec::new(),
            samples: None,
            context_truncated: req.context_cut,
            buckets: vec![self.graph.file.clone()],
            profile: self.graph.profile.name.clone(),
            engine: call.info.label.clone(),
            sampler: None,
            engine_sha256: None,
        })
    }
}

impl FamilyEngine for ToyEngine {
    fn warm_up(&self, _call: Call<'_>) -> Result<usize> {
        Ok(0)
    }

    fn admit(&self, limits: &EngineLimits, req: &mut ForecastRequest, at: &str) -> Result<Option<ContextCut>> {
        admit(limits, req, at)
    }

    fn forecast(&self, call: Call<'_>, reqs: Vec<ForecastRequest>, _opts: RunOptions) -> Vec<Result<Forecast>> {
        reqs.into_iter()
            .enumerate()
            .map(|(i, mut req)| {
                admit(&call.info.limits, &mut req, &format!("request {}", i + 1))?;
                Ok(Forecast { response: self.run(call, &req)?, steps: Vec::new() })
            })
            .collect()
    }

    fn graph_sets(&self) -> Vec<String> {
        vec![self.graph.file.clone()]
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
