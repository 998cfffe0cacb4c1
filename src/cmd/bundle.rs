//! `totoc bundle verify` and `totoc bundle info`: check and describe export and engine bundles.
//!
//! `verify` runs the same integrity check every loader runs ([`exporter::integrity`]) and lists every problem by
//! file name. `info` prints what a bundle holds; its JSON form (`totoc-bundle-info/1`) is in docs/formats.md.
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use engines::bundle::EngineManifest;
use engines::memory::human;
use exporter::integrity::{check_bundle, MANIFEST_HASH_FILE};
use exporter::manifest::{FileEntry, FormatTag, Manifest, MANIFEST_FILE};
use serde::Serialize;

use crate::cli::{BundleArgs, BundleCommand};
use crate::profile_lines::ProfileInfo;

/// Format tag of `totoc bundle info --json`.
pub const INFO_FORMAT: &str = "totoc-bundle-info/1";

pub fn run(a: BundleArgs) -> anyhow::Result<ExitCode> {
    match a.command {
        BundleCommand::Verify { dir, json } => verify(&dir, json),
        BundleCommand::Info { dir, json, measure_rates, threads, ort } => {
            let measure = measure_rates.then_some(engines::engine::LoadOptions {
                ort_lib: ort.ort_lib,
                threads,
                memory_budget: None,
            });
            info(&dir, json, measure)
        }
    }
}

fn verify(dir: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let problems = check_bundle(dir).with_context(|| format!("checking bundle {}", dir.display()))?;
    let files = listed_files(dir).unwrap_or_default();
    if json {
        let list: Vec<_> = problems
            .iter()
            .map(|p| serde_json::json!({ "file": p.file(), "kind": p.kind(), "message": p.to_string() }))
            .collect();
        let out = serde_json::json!({
            "dir": dir, "ok": problems.is_empty(), "files_checked": files.len(), "problems": list,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else if problems.is_empty() {
        let bytes: u64 = files.iter().map(|f| f.bytes).sum();
        println!(
            "{}: OK ({MANIFEST_FILE} matches {MANIFEST_HASH_FILE}; {} files, {}, every sha256 matches; no unlisted \
             files)",
            dir.display(),
            files.len(),
            human(bytes)
        );
    } else {
        for p in &problems {
            eprintln!("{}: {p}", dir.display());
        }
        eprintln!("{}: FAILED ({} problem(s))", dir.display(), problems.len());
    }
    Ok(if problems.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// The manifest's `files`, if it can be read at all.
fn listed_files(dir: &Path) -> Option<Vec<FileEntry>> {
    #[derive(serde::Deserialize)]
    struct Files {
        files: Vec<FileEntry>,
    }
    let text = std::fs::read(dir.join(MANIFEST_FILE)).ok()?;
    serde_json::from_slice::<Files>(&text).ok().map(|f| f.files)
}

/// `totoc bundle info --json` (documented in docs/formats.md).
#[derive(Debug, Serialize)]
struct BundleInfo {
    info_format: &'static str,
    dir: PathBuf,
    /// `export` or `engine`.
    kind: &'static str,
    /// The bundle's own format tag.
    format: String,
    totoc_version: String,
    /// sha256 of manifest.json.
    manifest_sha256: String,
    /// Whether the integrity check passes, and its problems if not.
    intact: bool,
    problems: Vec<String>,
    checkpoint: exporter::manifest::CheckpointInfo,
    model: serde_json::Value,
    precisions: Vec<String>,
    /// Engines: the target (`cpu`, `cuda`, `tensorrt`) and its settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    target: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ort_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    memory_budget: Option<u64>,
    /// Bytes of weights resident once everything is loaded (engines).
    #[serde(skip_serializing_if = "Option::is_none")]
    resident_weight_bytes: Option<u64>,
    profiles: Vec<ProfileInfo>,
    /// Engines, with `--measure-rates`: each graph's speed, measured now.
    #[serde(skip_serializing_if = "Option::is_none")]
    rates: Option<engines::cost::Rates>,
    files: Vec<FileEntry>,
    total_bytes: u64,
}

fn info(dir: &Path, json: bool, measure: Option<engines::engine::LoadOptions>) -> anyhow::Result<ExitCode> {
    let path = dir.join(MANIFEST_FILE);
    let text = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let tag: FormatTag =
        serde_json::from_slice(&text).with_context(|| format!("{}: not a totoc manifest", path.display()))?;
    let problems: Vec<String> = check_bundle(dir)?.iter().map(|p| p.to_string()).collect();
    let info = if tag.format.starts_with("totoc-engine/") {
        engine_info(dir, EngineManifest::read(dir)?)
    } else {
        export_info(dir, Manifest::read(dir)?)
    }?;
    let rates = match (measure, info.kind) {
        (None, _) => None,
        (Some(load), "engine") => Some(measure_rates(dir, &load)?),
        (Some(_), _) => anyhow::bail!(
            "{}: --measure-rates times an engine's graphs; this is an export bundle (build an engine from it first)",
            dir.display()
        ),
    };
    let info = BundleInfo {
        manifest_sha256: exporter::fsutil::sha256_bytes(&text),
        intact: problems.is_empty(),
        problems,
        rates,
        ..info
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&info)?);
    } else {
        print_text(&info);
    }
    Ok(ExitCode::SUCCESS)
}

/// Loads the engine at `dir` and times every graph as `totoc serve` does at warm-up.
fn measure_rates(dir: &Path, load: &engines::engine::LoadOptions) -> anyhow::Result<engines::cost::Rates> {
    let engine = engines::engine::Engine::load(dir, load)
        .with_context(|| format!("loading engine {} to measure its rates", dir.display()))?;
    engine.warm_up().context("warming up the engine")?;
    engine
        .rates()
        .get()
        .ok_or_else(|| anyhow::anyhow!("{}: this engine's model family gives no graph rates", dir.display()))
}

fn export_info(dir: &Path, m: Manifest) -> anyhow::Result<BundleInfo> {
    let profiles = crate::registry::export_profiles(&m.family);
    Ok(BundleInfo {
        info_format: INFO_FORMAT,
        dir: dir.to_path_buf(),
        kind: "export",
        format: m.format,
        totoc_version: m.totoc_version,
        manifest_sha256: String::new(),
        intact: false,
        problems: Vec::new(),
        checkpoint: m.checkpoint,
        model: serde_json::to_value(&m.model)?,
        precisions: m.precisions.iter().map(|p| p.as_str().to_string()).collect(),
        target: None,
        ort_version: None,
        memory_budget: None,
        resident_weight_bytes: None,
        profiles,
        rates: None,
        total_bytes: m.files.iter().map(|f| f.bytes).sum(),
        files: m.files,
    })
}

fn engine_info(dir: &Path, m: EngineManifest) -> anyhow::Result<BundleInfo> {
    let precision = m.precision.as_str();
    let profiles = crate::registry::engine_profiles(&m.family, precision);
    let precision =
        if m.fp16_emulation { format!("{precision} (cpu fp16 emulation)") } else { precision.to_string() };
    Ok(BundleInfo {
        info_format: INFO_FORMAT,
        dir: dir.to_path_buf(),
        kind: "engine",
        totoc_version: m.totoc_version.clone(),
        manifest_sha256: String::new(),
        intact: false,
        problems: Vec::new(),
        checkpoint: m.source.checkpoint.clone(),
        model: serde_json::to_value(&m.model)?,
        precisions: vec![precision],
        target: Some(serde_json::to_value(&m.target)?),
        ort_version: Some(m.ort_version.clone()),
        memory_budget: Some(m.memory_budget),
        resident_weight_bytes: Some(m.resident_weight_bytes()),
        profiles,
        rates: None,
        total_bytes: m.files.iter().map(|f| f.bytes).sum(),
        format: m.format,
        files: m.files,
    })
}

/// The text form, written at once (a closed pipe, e.g. `| head`, is not an error).
fn print_text(i: &BundleInfo) {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(o, "{} bundle {} ({}, totoc {})", i.kind, i.dir.display(), i.format, i.totoc_version);
    if i.intact {
        let _ = writeln!(o, "  integrity:   OK (manifest sha256 {})", i.manifest_sha256);
    } else {
        let _ = writeln!(o, "  integrity:   FAILED: {} (run `totoc bundle verify`)", i.problems.join("; "));
    }
    let _ = writeln!(
        o,
        "  checkpoint:  safetensors {} config {}",
        i.checkpoint.safetensors_sha256, i.checkpoint.config_sha256
    );
    if let Some(t) = &i.checkpoint.tokenizer {
        let _ = writeln!(o, "  tokenizer:   safetensors {} config {}", t.safetensors_sha256, t.config_sha256);
    }
    let _ = writeln!(o, "  model:       {}", i.model);
    let _ = writeln!(o, "  precision:   {}", i.precisions.join(", "));
    if let Some(t) = &i.target {
        let _ = writeln!(o, "  target:      {t} (onnxruntime {})", i.ort_version.as_deref().unwrap_or("?"));
    }
    if let (Some(budget), Some(w)) = (i.memory_budget, i.resident_weight_bytes) {
        let _ = writeln!(o, "  memory:      weights {} resident, budget {}", human(w), human(budget));
    }
    for p in &i.profiles {
        let _ = writeln!(
            o,
            "  profile {}: batch {}, variates {}, context {}, horizon {}, samples {}",
            p.name, p.batch, p.variates, p.context, p.horizon, p.samples
        );
        for b in &p.buckets {
            let _ = writeln!(
                o,
                "    {:<7} rows {:>4} slots {:>5} {:<5} {:>10}  {}",
                b.kind,
                b.rows,
                b.slots,
                b.precision,
                human(b.memory_bytes),
                b.file
            );
        }
    }
    match (&i.rates, i.kind) {
        (Some(r), _) => {
            let _ = writeln!(
                o,
                "  rates (measured now: the median of each graph's timed runs; estimates add a host factor of {}):",
                r.host_factor
            );
            for g in &r.graphs {
                let _ = writeln!(
                    o,
                    "    {:<32} {:<7} rows {:>4}  {:>10.3} ms/run  {:>10.3} µs/row-step",
                    g.graph,
                    g.kind,
                    g.rows,
                    g.seconds_per_run * 1e3,
                    g.seconds_per_row_step * 1e6
                );
            }
        }
        (None, "engine") => {
            let _ = writeln!(
                o,
                "  rates:       measured at serve warm-up (GET /v2/models/NAME); --measure-rates measures them here"
            );
        }
        (None, _) => {}
    }
    let _ = writeln!(o, "  files ({}, {}):", i.files.len(), human(i.total_bytes));
    for f in &i.files {
        let _ = writeln!(o, "    {:>10}  {}  {}", human(f.bytes), f.sha256, f.path);
    }
    use std::io::Write as _;
    let _ = std::io::stdout().write_all(o.as_bytes());
}
