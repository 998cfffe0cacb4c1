//! Shared by the equivalence, sampling, fp16 and int8 tests: export + build a fixture checkpoint for ONNX Runtime CPU.
#![allow(dead_code)]

pub mod ks;
use std::path::{Path, PathBuf};

use engines::backend::Target;
use engines::compare::{precision_errors, Tolerance};
use engines::engine::{Engine, LoadOptions};
use engines::engine_bundle::{build_engine, BuildOptions, GraphForm};
use exporter::export::{export, ExportOptions};
use exporter::graph::Fp16Plan;
use exporter::profile::ProfileSet;
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
        profiles,
        out: bundle.clone(),
        precisions: vec![precision],
        variant,
        fp16_plan: plan,
        force: false,
        golden: None,
    };
    export(&opts, &mut |_| {}).unwrap();
    let engine = dir.join("engine");
    let opts = BuildOptions { precision: Some(precision), graphs: Some(form), ..BuildOptions::default() };
    build_engine(&bundle, &Target::cpu(Some(1)), &engine, &opts, &mut |_| {}).unwrap();
    Engine::load(&engine, &LoadOptions::default()).unwrap()
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
    let bundle = dir.join("bundle");
    let opts = ExportOptions {
        checkpoint: root().join("tests/fixtures").join(config).join("checkpoint"),
        profiles,
        out: bundle.clone(),
        precisions: vec![Precision::Fp32, other],
        variant: OpsetVariant::Opset24,
        fp16_plan: plan,
        force: false,
        golden: None,
    };
    export(&opts, &mut |_| {}).unwrap();
    let engine = |precision: Precision, name: &str| {
        let out = dir.join(name);
        let opts = BuildOptions { precision: Some(precision), ..BuildOptions::default() };
        build_engine(&bundle, &Target::cpu(Some(1)), &out, &opts, &mut |_| {}).unwrap();
        Engine::load(&out, &LoadOptions::default()).unwrap()
    };
    (engine(Precision::Fp32, "engine32"), engine(other, &format!("engine-{}", other.as_str())))
}
