//! Shared by the equivalence, sampling, fp16 and int8 tests: export + build a fixture checkpoint for ONNX Runtime CPU.
#![allow(dead_code)]

pub mod ks;
use std::path::{Path, PathBuf};

use engines::backend::Target;
use engines::bundle::{BuildOptions, GraphForm};
use engines::compare::{precision_errors, Tolerance};
use engines::engine::{Engine, LoadOptions};
use engines::registry::build_engine;
use exporter::export::ExportOptions;
use exporter::graph::{Fp16Plan, Int8Plan};
use exporter::profile_file::ProfileSet;
use exporter::registry::export_bundle as export;
use exporter::signature::Precision;
use exporter::variant::OpsetVariant;

/// Worst `|Δ|/bound` and max `|Δ|/σ` of a `[V][H]` forecast against a reference (the fp16 and int8 error
/// tables).
pub fn errors(got: &[Vec<f32>], want: &[Vec<f32>], sigma: &[f64], tol: &Tolerance) -> (f64, f64) {
    let a: Vec<f32> = got.iter().flatten().copied().collect();
    let r: Vec<f32> = want.iter().flatten().copied().collect();
    precision_errors(&a, &r, got.len(), sigma, sigma, tol).unwrap()
}

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Exports and builds `config`'s fixture checkpoint; returns the loaded CPU engine.
pub fn cpu_engine(config: &str, dir: &Path, variant: OpsetVariant) -> Engine {
    cpu_engine_with(config, dir, variant, Precision::Fp32, Fp16Plan::DEFAULT)
}

/// [`cpu_engine`] of `precision` (fp16: the fp16 emulation engine, with `plan`'s fp32 regions).
pub fn cpu_engine_with(
    config: &str,
    dir: &Path,
    variant: OpsetVariant,
    precision: Precision,
    plan: Fp16Plan,
) -> Engine {
    cpu_engine_form(config, dir, variant, precision, plan, GraphForm::PerBucket)
}

/// [`cpu_engine_with`] with the buckets' sessions laid out as `form` (shared: the shape-polymorphic graphs a
/// TensorRT engine is built from, one session per graph kind).
pub fn cpu_engine_form(
    config: &str,
    dir: &Path,
    variant: OpsetVariant,
    precision: Precision,
    plan: Fp16Plan,
    form: GraphForm,
) -> Engine {
    let profiles = ProfileSet::from_file(&root().join("configs/tiny.yaml")).unwrap().profiles;
    let bundle = dir.join("bundle");
    let opts = ExportOptions {
        checkpoint: root().join("tests/fixtures").join(config).join("checkpoint"),
        tokenizer: None,
        profiles,
        out: bundle.clone(),
        precisions: vec![precision],
        variant,
        fp16_plan: plan,
        int8_plan: None,
        force: false,
        golden: None,
    };
    export(&opts, &mut |_| {}).unwrap();
    let engine = dir.join("engine");
    let opts = BuildOptions { precision: Some(precision), graphs: Some(form), ..BuildOptions::default() };
    build_engine(&bundle, &Target::cpu(Some(1)), &engine, &opts, &mut |_| {}).unwrap();
    Engine::load(&engine, &LoadOptions::default()).unwrap()
}

/// The int8 CPU engine of fixture `config` (configs/tiny.yaml profiles) with `plan`'s int8 roles instead of the
/// family's default; the bundle and the engine go to `dir/bundle` and `dir/engine`.
pub fn int8_engine_with_roles(config: &str, dir: &Path, plan: Int8Plan) -> Engine {
    let checkpoint = root().join("tests/fixtures").join(config).join("checkpoint");
    int8_engine_of(&checkpoint, &root().join("configs/tiny.yaml"), dir, plan)
}

/// The int8 CPU engine (one thread) of `checkpoint` with the profiles of `profiles_file` and `plan`'s int8 roles;
/// the bundle and the engine go to `dir/bundle` and `dir/engine` (replaced if there).
pub fn int8_engine_of(checkpoint: &Path, profiles_file: &Path, dir: &Path, plan: Int8Plan) -> Engine {
    let bundle = dir.join("bundle");
    let opts = ExportOptions {
        checkpoint: checkpoint.to_path_buf(),
        tokenizer: None,
        profiles: ProfileSet::from_file(profiles_file).unwrap().profiles,
        out: bundle.clone(),
        precisions: vec![Precision::Int8],
        variant: OpsetVariant::Opset24,
        fp16_plan: Fp16Plan::DEFAULT,
        int8_plan: Some(plan),
        force: true,
        golden: None,
    };
    export(&opts, &mut |_| {}).unwrap();
    cpu_engine_of(&bundle, &dir.join("engine"), Precision::Int8, Some(1))
}

/// The fp32 and int8 CPU engines of fixture `config` (configs/tiny.yaml profiles), exported into one bundle.
pub fn fp32_and_int8_engines(config: &str, dir: &Path) -> (Engine, Engine) {
    fp32_and(config, dir, Precision::Int8, Fp16Plan::DEFAULT)
}

/// Exports `config`'s fixture checkpoint once with fp32 and fp16 graphs (`plan`'s fp32 regions) and builds both
/// CPU engines from it: the fp32 engine and the fp16 emulation engine.
pub fn fp32_and_fp16_engines(config: &str, dir: &Path, plan: Fp16Plan) -> (Engine, Engine) {
    fp32_and(config, dir, Precision::Fp16, plan)
}

/// Exports `config`'s fixture checkpoint (configs/tiny.yaml profiles) once with fp32 and `other` graphs and builds
/// the CPU engine of each.
fn fp32_and(config: &str, dir: &Path, other: Precision, plan: Fp16Plan) -> (Engine, Engine) {
    let profiles = ProfileSet::from_file(&root().join("configs/tiny.yaml")).unwrap().profiles;
    let checkpoint = root().join("tests/fixtures").join(config).join("checkpoint");
    let bundle = export_fp32_and(checkpoint, profiles, dir, other, plan);
    let engine =
        |precision: Precision, name: &str| cpu_engine_of(&bundle, &dir.join(name), precision, Some(1));
    (engine(Precision::Fp32, "engine32"), engine(other, &format!("engine-{}", other.as_str())))
}

/// Exports `checkpoint` into `dir/bundle` with fp32 and `other` graphs (`plan`'s fp32 regions for fp16).
fn export_fp32_and(
    checkpoint: PathBuf,
    profiles: Vec<exporter::profile::Profile>,
    dir: &Path,
    other: Precision,
    plan: Fp16Plan,
) -> PathBuf {
    let bundle = dir.join("bundle");
    let opts = ExportOptions {
        checkpoint,
        tokenizer: None,
        profiles,
        out: bundle.clone(),
        precisions: vec![Precision::Fp32, other],
        variant: OpsetVariant::Opset24,
        fp16_plan: plan,
        int8_plan: None,
        force: false,
        golden: None,
    };
    export(&opts, &mut |_| {}).unwrap();
    bundle
}

/// Builds `bundle`'s `precision` CPU engine into `out` (`threads`: default when `None`) and loads it.
fn cpu_engine_of(bundle: &Path, out: &Path, precision: Precision, threads: Option<usize>) -> Engine {
    let opts = BuildOptions { precision: Some(precision), ..BuildOptions::default() };
    build_engine(bundle, &Target::cpu(threads), out, &opts, &mut |_| {}).unwrap();
    Engine::load(out, &LoadOptions::default()).unwrap()
}

/// The base-size model's check (`base_model_*_vs_fp32`, ignored): the checkpoint at `$TOTOC_BASE_CHECKPOINT`
/// (`tests/reference/make_checkpoints.py --config base`: 151M parameters, random weights), a one-bucket profile
/// for it and one request of three synthetic series — an ordinary one, a large-valued one and a nearly constant
/// one (the scaler-floor case) — with each series' context σ.
pub struct BaseModelCase {
    pub checkpoint: PathBuf,
    pub profiles: Vec<exporter::profile::Profile>,
    pub request: engines::request::ForecastRequest,
    pub sigma: Vec<f64>,
}

impl BaseModelCase {
    /// `None` (with a note on stderr) when `$TOTOC_BASE_CHECKPOINT` is not set.
    pub fn from_env() -> Option<Self> {
        let Some(checkpoint) = std::env::var_os("TOTOC_BASE_CHECKPOINT").map(PathBuf::from) else {
            eprintln!("skipping: set TOTOC_BASE_CHECKPOINT to a base-size checkpoint directory");
            return None;
        };
        let yaml = "profiles:\n  - name: base\n    batch: 1\n    variates: 3\n    context: 512\n    horizon: 256\n    buckets:\n      prefill: [{rows: 3, context: 512}]\n      decode: [{rows: 3, context: 512, horizon: 256}]\n";
        let profiles = ProfileSet::from_yaml(yaml, "base.yaml").unwrap().profiles;
        let (len, h) = (512usize, 256usize);
        let wave =
            |t: usize, amp: f32, period: f32| amp * (2.0 * std::f32::consts::PI * t as f32 / period).sin();
        let noise = |t: usize, k: u32| {
            ((t as u32).wrapping_mul(2654435761).wrapping_add(k) % 1000) as f32 / 1000.0 - 0.5
        };
        let target: Vec<Vec<Option<f32>>> = vec![
            (0..len).map(|t| Some(1000.0 + wave(t, 50.0, 48.0) + 10.0 * noise(t, 1))).collect(),
            (0..len).map(|t| Some(26000.0 + wave(t, 1300.0, 96.0) + 200.0 * noise(t, 2))).collect(),
            (0..len).map(|t| Some(0.0105 + wave(t, 0.002, 24.0) + 0.0005 * noise(t, 3))).collect(),
        ];
        let sigma = target.iter().map(|s| engines::compare::context_sigma(s)).collect();
        let request = engines::request::ForecastRequest {
            id: None,
            target,
            id_mask: vec![0, 0, 1],
            horizon: h,
            samples: 0,
            quantiles: vec![],
            seed: 0,
            strict_context: false,
            context_cut: None,
            ..engines::request::ForecastRequest::default()
        };
        Some(Self { checkpoint, profiles, request, sigma })
    }

    /// Exports the checkpoint into `dir` with fp32 and `other` graphs (`plan`'s fp32 regions for fp16), builds
    /// both CPU engines and returns their traced forecasts of the request: `(fp32, other)`.
    pub fn forecasts(
        &self,
        dir: &Path,
        other: Precision,
        plan: Fp16Plan,
    ) -> (engines::toto1::session::Forecast, engines::toto1::session::Forecast) {
        let bundle = export_fp32_and(self.checkpoint.clone(), self.profiles.clone(), dir, other, plan);
        let run = |precision: Precision| {
            let e = cpu_engine_of(&bundle, &dir.join(precision.as_str()), precision, None);
            e.forecast_traced(vec![self.request.clone()], true).remove(0).unwrap()
        };
        (run(Precision::Fp32), run(other))
    }

    /// Each variate's max `|Δ|/σ` of `got` against `want`, and the worst `|Δ| / goal` with σ and with
    /// `σ_eff = max(σ, scaler scale)`.
    pub fn errors(
        &self,
        got: &engines::toto1::session::Forecast,
        want: &engines::toto1::session::Forecast,
        goal: &Tolerance,
    ) -> (Vec<f64>, f64, f64) {
        let scale = &want.steps[0].scaler_scale;
        let sigma_eff: Vec<f64> = self.sigma.iter().zip(scale).map(|(s, c)| s.max(f64::from(*c))).collect();
        let (g, w) = (got.response.point(), want.response.point());
        let per_variate =
            (0..g.len()).map(|v| errors(&g[v..=v], &w[v..=v], &self.sigma[v..=v], goal).1).collect();
        (per_variate, errors(g, w, &self.sigma, goal).0, errors(g, w, &sigma_eff, goal).0)
    }
}
