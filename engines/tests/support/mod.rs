//! Shared by the equivalence and sampling tests: export + build a fixture checkpoint for ONNX Runtime CPU.
use std::path::{Path, PathBuf};

use engines::backend::Target;
use engines::engine::{Engine, LoadOptions};
use engines::engine_bundle::{build_engine, BuildOptions};
use exporter::export::{export, ExportOptions};
use exporter::graph::CacheUpdate;
use exporter::profile::ProfileSet;

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Exports and builds `config`'s fixture checkpoint; returns the loaded CPU engine.
pub fn cpu_engine(config: &str, dir: &Path, cache_update: CacheUpdate) -> Engine {
    let profiles = ProfileSet::from_file(&root().join("configs/tiny.yaml")).unwrap().profiles;
    let bundle = dir.join("bundle");
    let opts = ExportOptions {
        checkpoint: root().join("tests/fixtures").join(config).join("checkpoint"),
        profiles,
        out: bundle.clone(),
        cache_update,
        force: false,
        golden: None,
    };
    export(&opts, &mut |_| {}).unwrap();
    let engine = dir.join("engine");
    build_engine(&bundle, &Target::cpu(Some(1)), &engine, &BuildOptions::default(), &mut |_| {}).unwrap();
    Engine::load(&engine, &LoadOptions::default()).unwrap()
}
