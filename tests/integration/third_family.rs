//! A throwaway third model family, built here and never shipped: is adding a family a folder plus registry
//! lines (issue 23)? The test copies the workspace into `target/third-family-test/tree`, adds the toy family's files
//! (`tests/third_family/*.rs`: one per crate) and its registry lines (the edits below, each at an anchor that must
//! occur exactly once), builds `totoc` there (on the test build's dependencies, as the hostile-client test does),
//! and then exports a one-layer graph, builds an engine and forecasts through the CLI and `POST /v1/forecast`. It prints the existing files it had
//! to touch; the goal is at most 8, all of them registry or module-list lines.
//!
//! When a registry changes shape, an anchor stops matching and this test says which: update the edit (and
//! docs/architecture.md's checklist with it).

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use crate::common::{build_totoc_with_release_arithmetic, root};
use crate::serve::{post_json, spawn_serve};

/// Where an edit puts its text.
#[derive(Clone, Copy)]
enum At {
    After,
    Before,
    Replace,
}

/// One registry edit: `text` right after, right before, or instead of `anchor`.
struct Edit {
    file: &'static str,
    anchor: &'static str,
    text: &'static str,
    at: At,
}

const fn after(file: &'static str, anchor: &'static str, text: &'static str) -> Edit {
    Edit { file, anchor, text, at: At::After }
}

const fn before(file: &'static str, anchor: &'static str, text: &'static str) -> Edit {
    Edit { file, anchor, text, at: At::Before }
}

const fn replace(file: &'static str, anchor: &'static str, text: &'static str) -> Edit {
    Edit { file, anchor, text, at: At::Replace }
}

const EXPORTER_FAMILY: &str = "exporter/src/registry/family.rs";
const EXPORTER_REGISTRY: &str = "exporter/src/registry/mod.rs";
const ENGINES_GRAPHS: &str = "engines/src/registry/graphs.rs";
const ENGINES_REGISTRY: &str = "engines/src/registry/mod.rs";
const BIN_REGISTRY: &str = "src/registry.rs";

/// Every line the toy family adds to existing files.
const EDITS: &[Edit] = &[
    // module lists
    after("exporter/src/lib.rs", "pub mod toto2;\n", "pub mod toy;\n"),
    after("engines/src/lib.rs", "pub mod toto2;\n", "pub mod toy;\n"),
    after("src/main.rs", "mod toto2;\n", "mod toy;\n"),
    // exporter: the variant, its capabilities, its config, its manifest section, its export
    after(EXPORTER_FAMILY, "    #[serde(rename = \"toto-2.0\")]\n    Toto2,\n", "    #[serde(rename = \"toy\")]\n    Toy,\n"),
    before(
        EXPORTER_FAMILY,
        "impl Family {\n",
        "const TOY: Capabilities = Capabilities {\n    name: \"toy\",\n    title: \"Toy\",\n    folder: \"toy\",\n    \
         reference: \"none\",\n    config_keys: &[\"toy_context\"],\n    tokenizer_keys: None,\n    point_forecast: \"mean\",\n    samples: false,\n    \
         quantile_knots: None,\n    precisions: &[Precision::Fp32],\n    targets: &[\"cpu\"],\n    columns: None,\n    \
         reads_timestamps: false,\n    missing_points: true,\n    sampling_controls: false,\n    params: &[],\n};\n\n",
    ),
    replace(
        EXPORTER_FAMILY,
        "pub const ALL: [Family; 3] = [Family::Toto1, Family::Toto2, Family::Kronos];",
        "pub const ALL: [Family; 4] = [Family::Toto1, Family::Toto2, Family::Kronos, Family::Toy];",
    ),
    after(EXPORTER_FAMILY, "            Family::Toto2 => &TOTO2,\n", "            Family::Toy => &TOY,\n"),
    after(EXPORTER_FAMILY, "    Toto2(Toto2Config),\n", "    #[serde(rename = \"toy\")]\n    Toy(crate::toy::ToyConfig),\n"),
    after(EXPORTER_FAMILY, "            AnyConfig::Toto2(_) => Family::Toto2,\n", "            AnyConfig::Toy(_) => Family::Toy,\n"),
    after(
        EXPORTER_FAMILY,
        "            Family::Toto2 => AnyConfig::Toto2(Toto2Config::from_json(text)?),\n",
        "            Family::Toy => AnyConfig::Toy(crate::toy::ToyConfig::from_json(text)?),\n",
    ),
    after(
        EXPORTER_REGISTRY,
        "        Family::Toto2 => crate::toto2::export::export_bundle(opts, progress),\n",
        "        Family::Toy => crate::toy::export_bundle(opts, progress),\n",
    ),
    after(
        EXPORTER_FAMILY,
        "    pub dynamic_graphs: Vec<crate::toto1::manifest::DynamicGraphEntry>,\n",
        "    #[serde(default, skip_serializing_if = \"Vec::is_empty\")]\n    pub toy: Vec<crate::toy::ToyGraph>,\n",
    ),
    after(
        EXPORTER_FAMILY,
        "            .chain(self.toto2_profiles.iter().map(|p| p.profile.name.as_str()))\n",
        "            .chain(self.toy.iter().map(|g| g.profile.name.as_str()))\n",
    ),
    // engines: its engine, its build, its manifest section
    before(
        ENGINES_REGISTRY,
        "    })\n}\n\n/// `totoc build-engine`: builds an engine bundle",
        "        AnyConfig::Toy(_) => {\n            let (limits, engine) = crate::toy::ToyEngine::load(manifest)?;\n            \
         (limits, Box::new(engine))\n        }\n",
    ),
    before(
        ENGINES_REGISTRY,
        "        AnyConfig::Toto2(_) => {\n            crate::toto2::build::build_engine(",
        "        AnyConfig::Toy(_) => {\n            crate::toy::build_engine(artifacts, &source, source_sha, target, out, options, progress)\n        }\n",
    ),
    after(
        ENGINES_GRAPHS,
        "    pub toto2_dropped: Vec<crate::toto2::manifest::Toto2Dropped>,\n",
        "    #[serde(default, skip_serializing_if = \"Vec::is_empty\")]\n    pub toy: Vec<exporter::toy::ToyGraph>,\n",
    ),
    // the binary: bench, verify, readiness, notes, bundle info
    after(
        BIN_REGISTRY,
        "        Family::Toto2 => crate::toto2::bench::run(a, engines_arg, budget),\n",
        "        Family::Toy => crate::toy::bench(),\n",
    ),
    after(
        BIN_REGISTRY,
        "        Family::Toto2 => crate::toto2::bench::rss_probe(a, dir, name, budget),\n",
        "        Family::Toy => crate::toy::bench(),\n",
    ),
    after(
        BIN_REGISTRY,
        "        Family::Toto2 => crate::toto2::backtest::REFERENCE_SCRIPTS,\n",
        "        Family::Toy => crate::toy::BACKTEST_REFERENCE_SCRIPTS,\n",
    ),
    after(BIN_REGISTRY, "        Family::Toto2 => None,\n", "        Family::Toy => None,\n"),
    after(
        BIN_REGISTRY,
        "        Family::Toto2 => crate::toto2::verify::run(engine, cases),\n",
        "        Family::Toy => crate::toy::verify(cases),\n",
    ),
    before(
        BIN_REGISTRY,
        "    }\n}\n\n/// `totoc bundle info`: each profile of an export bundle",
        "        Family::Toy => crate::toy::golden_reports(path),\n",
    ),
    after(
        ENGINES_REGISTRY,
        "        Family::Toto2 => Some(crate::toto2::quantiles::INTERPOLATION_NOTE),\n",
        "        Family::Toy => None,\n",
    ),
    after(
        BIN_REGISTRY,
        "        .chain(g.toto2_profiles.iter().map(|p| crate::toto2::info::profile(p, None)))\n",
        "        .chain(g.toy.iter().map(|t| crate::toy::profile(t, \"fp32\")))\n",
    ),
    after(
        BIN_REGISTRY,
        "        .chain(g.toto2_profiles.iter().map(|p| crate::toto2::info::profile(p, Some(precision))))\n",
        "        .chain(g.toy.iter().map(|t| crate::toy::profile(t, precision)))\n",
    ),
];

/// The family's own files: (source under tests/third_family, destination in the tree).
const NEW_FILES: &[(&str, &str)] = &[
    ("exporter_toy.rs", "exporter/src/toy.rs"),
    ("engines_toy.rs", "engines/src/toy.rs"),
    ("bin_toy.rs", "src/toy.rs"),
];

/// The workspace's files (tracked and untracked, not ignored), fixtures and docs left out, copied to `tree`.
fn copy_workspace(tree: &Path) {
    let root = root();
    let out = Command::new("git")
        .args(["ls-files", "-z", "--cached", "--others", "--exclude-standard"])
        .current_dir(&root)
        .output()
        .expect("git ls-files");
    assert!(out.status.success(), "git ls-files failed");
    for rel in out.stdout.split(|&b| b == 0).filter(|s| !s.is_empty()) {
        let rel = std::str::from_utf8(rel).unwrap();
        if rel.starts_with("tests/fixtures/") || rel.starts_with("docs/") || !root.join(rel).is_file() {
            continue;
        }
        let to = tree.join(rel);
        fs::create_dir_all(to.parent().unwrap()).unwrap();
        fs::copy(root.join(rel), &to).unwrap();
    }
}

/// Makes the copy's crates distinct units for cargo. The copy builds in the test build's build directory (so
/// dependencies compile once), and cargo hashes a path package by its path *relative to the workspace*, so the
/// copy's `totoc`, `engines`, ... are the very units of the hostile-client test's build of the workspace: when
/// that build finished after the copy was written (the two tests copy and build concurrently), the copy's older
/// sources looked up to date and cargo handed back the workspace's binary, without the toy family (seen on a
/// loaded 2-core machine: a build of 1 s, then the toy config was not recognised). A version of its own (semver
/// build metadata) changes the package ids of the workspace members only.
fn give_the_copy_its_own_version(tree: &Path) {
    let manifest = tree.join("Cargo.toml");
    let text = fs::read_to_string(&manifest).unwrap();
    let anchor = "[workspace.package]\nversion = \"";
    let at = text.find(anchor).expect("Cargo.toml: [workspace.package] version") + anchor.len();
    let end = at + text[at..].find('"').expect("version string");
    let edited = format!("{}{}+third-family{}", &text[..at], &text[at..end], &text[end..]);
    fs::write(&manifest, edited).unwrap();
}

/// Applies every edit; returns the existing files touched.
fn apply_edits(tree: &Path) -> BTreeSet<&'static str> {
    let mut touched = BTreeSet::new();
    for e in EDITS {
        let path = tree.join(e.file);
        let text = fs::read_to_string(&path).unwrap();
        let n = text.matches(e.anchor).count();
        assert_eq!(
            n, 1,
            "{}: anchor {:?} occurs {n} times (the registry changed: update this test)",
            e.file, e.anchor
        );
        let start = text.find(e.anchor).unwrap();
        let end = start + e.anchor.len();
        let edited = match e.at {
            At::After => format!("{}{}{}", &text[..end], e.text, &text[end..]),
            At::Before => format!("{}{}{}", &text[..start], e.text, &text[start..]),
            At::Replace => format!("{}{}{}", &text[..start], e.text, &text[end..]),
        };
        fs::write(&path, edited).unwrap();
        touched.insert(e.file);
    }
    touched
}

#[test]
fn a_third_family_is_a_folder_and_registry_lines() {
    let root = root();
    let work = root.join("target/third-family-test");
    let tree = work.join("tree");
    let _ = fs::remove_dir_all(&tree);
    copy_workspace(&tree);
    for (from, to) in NEW_FILES {
        fs::copy(root.join("tests/third_family").join(from), tree.join(to)).unwrap();
    }
    let touched = apply_edits(&tree);
    give_the_copy_its_own_version(&tree);
    eprintln!(
        "third family: {} new files, {} edits in {} existing files: {}",
        NEW_FILES.len(),
        EDITS.len(),
        touched.len(),
        touched.iter().copied().collect::<Vec<_>>().join(", ")
    );
    assert!(touched.len() <= 8, "{} existing files touched (goal: at most 8)", touched.len());
    let registry_or_module_list = |f: &&str| {
        f.ends_with("/registry.rs")
            || f.contains("/registry/")
            || *f == "src/registry.rs"
            || f.ends_with("lib.rs")
            || f.ends_with("main.rs")
    };
    assert!(
        touched.iter().all(registry_or_module_list),
        "only registries and module lists may change: {touched:?}"
    );

    // Build totoc with the toy family (its dependencies are the test build's, compiled once).
    let bin = work.join("totoc");
    build_totoc_with_release_arithmetic(&tree, &bin);

    // A toy checkpoint and profile, exported, built and forecast through the CLI.
    let ckpt = work.join("checkpoint");
    fs::create_dir_all(&ckpt).unwrap();
    fs::write(ckpt.join("config.json"), r#"{"toto_context_is_not_this": 0}"#).unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(&bin).args(args).output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let profiles = work.join("toy.yaml");
    fs::write(&profiles, "profiles:\n  - {name: toy, batch: 1, variates: 2, context: 8, horizon: 4}\n")
        .unwrap();
    let (bundle, engine) = (work.join("bundle"), work.join("engine"));
    let ck = ckpt.to_str().unwrap();
    let export = |out: &Path| {
        run(&[
            "export",
            "--checkpoint",
            ck,
            "--config",
            profiles.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--force",
        ])
    };
    // a config no family claims is refused, naming every family's keys
    let (ok, _, err) = export(&bundle);
    assert!(
        !ok && err.contains("toy_context") && err.contains("embed_dim") && err.contains("d_model"),
        "{err}"
    );
    fs::write(ckpt.join("config.json"), r#"{"toy_context": 8}"#).unwrap();
    let (ok, _, err) = export(&bundle);
    assert!(ok, "export: {err}");
    let (ok, _, err) = run(&[
        "build-engine",
        "--artifacts",
        bundle.to_str().unwrap(),
        "--target",
        "cpu",
        "--out",
        engine.to_str().unwrap(),
        "--force",
    ]);
    assert!(ok, "build-engine: {err}");
    let context: Vec<f64> = (0..12).map(|i| i as f64).collect();
    let request = json!({"target": [context, vec![2.0; 12]], "id_mask": [0, 0], "horizon": 4});
    let input = work.join("request.json");
    fs::write(&input, request.to_string()).unwrap();
    let (ok, out, err) =
        run(&["forecast", "--engine", engine.to_str().unwrap(), "--input", input.to_str().unwrap()]);
    assert!(ok, "forecast: {err}");
    let cli: Value = serde_json::from_str(&out).unwrap();
    // the layer averages the last 8 points: 4..=11 -> 7.5, and the constant 2
    let mean = |v: &Value, i: usize| {
        v["mean"][i].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect::<Vec<_>>()
    };
    assert_eq!(mean(&cli, 0), vec![7.5; 4], "{cli}");
    assert_eq!(mean(&cli, 1), vec![2.0; 4], "{cli}");
    assert_eq!(cli["context_truncated"], json!({"given": 12, "used": 8}), "{cli}");

    // The same through the server.
    let log = work.join("serve.log");
    let (mut child, http, _grpc) = spawn_serve(&bin, &engine, &[], "warn", &log);
    let url = format!("http://{http}");
    let ready = (0..300).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(100));
        ureq::get(&format!("{url}/v2/health/ready")).call().is_ok()
    });
    let (status, served) = post_json(&format!("{url}/v1/forecast"), &request);
    let _ = child.kill();
    let _ = child.wait();
    assert!(ready, "the toy engine's server never became ready:\n{}", fs::read_to_string(&log).unwrap());
    assert_eq!(status, 200, "{served}");
    assert_eq!(mean(&served, 0), mean(&cli, 0), "{served}");
    assert_eq!(mean(&served, 1), mean(&cli, 1), "{served}");
}
