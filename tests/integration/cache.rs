//! Cached builds: `export` and `build-engine` skip the work (and say so, touching no file) when the bundle at
//! `--out` was made from the same inputs; a changed input rebuilds, replaces the bundle and names the input;
//! `--force` always rebuilds. Re-exporting from another working directory and temp dir is byte-identical.
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

use crate::common::*;

/// inode and mtime (ns) of every file under `dir`, by relative path.
fn stamps(dir: &Path) -> BTreeMap<String, (u64, i64, i64)> {
    exporter::integrity::files_under(dir)
        .unwrap()
        .into_iter()
        .map(|f| {
            let m = fs::metadata(dir.join(&f)).unwrap();
            (f, (m.ino(), m.mtime(), m.mtime_nsec()))
        })
        .collect()
}

fn run(args: &[&str]) -> String {
    let out = totoc(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "totoc {args:?}: {err}");
    err
}

#[test]
fn export_and_build_engine_skip_unchanged_inputs_and_rebuild_changed_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let (bundle, engine) = (tmp.path().join("bundle"), tmp.path().join("engine"));
    let ck = fixture_checkpoint("tiny");
    let config = tmp.path().join("profiles.yaml");
    fs::copy(tiny_profiles(), &config).unwrap();
    let export = |extra: &[&str]| {
        let mut args =
            vec!["export", "--checkpoint", ck.to_str().unwrap(), "--config", config.to_str().unwrap()];
        args.extend(["--out", bundle.to_str().unwrap()]);
        args.extend_from_slice(extra);
        run(&args)
    };
    let build = |extra: &[&str]| {
        let mut args =
            vec!["build-engine", "--artifacts", bundle.to_str().unwrap(), "--out", engine.to_str().unwrap()];
        args.extend_from_slice(extra);
        run(&args)
    };
    let first = export(&[]);
    assert!(first.contains("exported 2 toto-1.0 profile(s)"), "{first}");
    build(&[]);
    let m: serde_json::Value =
        serde_json::from_slice(&fs::read(bundle.join("manifest.json")).unwrap()).unwrap();
    for key in
        ["checkpoint.model.safetensors", "checkpoint.config.json", "profiles", "totoc", "opset", "precisions"]
    {
        assert!(m["inputs"][key].is_string(), "export inputs lack {key}: {}", m["inputs"]);
    }
    // the int8 roles and layout version are inputs of int8 exports only
    for key in ["int8_plan", "int8_weights"] {
        assert!(m["inputs"].get(key).is_none(), "{key}: {}", m["inputs"]);
    }
    let e: serde_json::Value =
        serde_json::from_slice(&fs::read(engine.join("manifest.json")).unwrap()).unwrap();
    for key in ["source.manifest.json", "onnxruntime", "target", "precision", "totoc", "memory_budget"] {
        assert!(e["inputs"][key].is_string(), "engine inputs lack {key}: {}", e["inputs"]);
    }

    // the same inputs again: skipped, said so, not one file touched
    let (b0, e0) = (stamps(&bundle), stamps(&engine));
    let again = export(&[]);
    assert!(again.contains("is up to date") && again.contains("skipped the export"), "{again}");
    let again = build(&[]);
    assert!(again.contains("is up to date") && again.contains("skipped the build"), "{again}");
    assert_eq!((stamps(&bundle), stamps(&engine)), (b0.clone(), e0.clone()));

    // --force rebuilds regardless (new files, same bytes)
    let forced = export(&["--force"]);
    assert!(forced.contains("exported 2 toto-1.0 profile(s)"), "{forced}");
    assert_ne!(stamps(&bundle), b0);

    // a changed config: re-exported, the change named, the old bundle replaced
    let yaml = fs::read_to_string(&config).unwrap().replace("horizon: 64", "horizon: 48");
    fs::write(&config, yaml).unwrap();
    let changed = export(&[]);
    assert!(changed.contains("re-exporting") && changed.contains("profiles: "), "{changed}");
    assert!(changed.contains("exported 2 toto-1.0 profile(s)"), "{changed}");
    let info: serde_json::Value =
        serde_json::from_str(&totoc_ok(&["bundle", "info", "--json", bundle.to_str().unwrap()])).unwrap();
    assert_eq!((info["profiles"][1]["horizon"].as_u64(), info["intact"].as_bool()), (Some(48), Some(true)));
    let leftovers: Vec<_> = fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(leftovers.len(), 3, "staging or old directories left behind: {leftovers:?}");

    // the engine's source changed: rebuilt, naming the source manifest; another option: named too
    let rebuilt = build(&[]);
    assert!(rebuilt.contains("rebuilding") && rebuilt.contains("source.manifest.json: "), "{rebuilt}");
    let budget = build(&["--memory-budget", "8GiB"]);
    assert!(budget.contains("memory_budget: "), "{budget}");
    let again = build(&["--memory-budget", "8GiB"]);
    assert!(again.contains("is up to date"), "{again}");

    // a damaged bundle is not a cache hit: rebuilt, the damage named
    fs::write(engine.join("extra.onnx"), b"x").unwrap();
    let repaired = build(&["--memory-budget", "8GiB"]);
    assert!(repaired.contains("the bundle is damaged (extra.onnx: not listed"), "{repaired}");
    totoc_ok(&["bundle", "verify", engine.to_str().unwrap()]);
}

/// Exporting from another working directory (relative paths), with another TMPDIR, gives the same bytes in
/// every file, the manifest and its hash included.
#[test]
fn reexport_from_another_directory_is_byte_identical() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    export_fixture("tiny", &a);
    let cwd = tmp.path().join("elsewhere");
    let other_tmp = tmp.path().join("tmp2");
    fs::create_dir_all(cwd.join("ck")).unwrap();
    fs::create_dir_all(&other_tmp).unwrap();
    copy_dir(&fixture_checkpoint("tiny"), &cwd.join("ck"));
    fs::copy(tiny_profiles(), cwd.join("p.yaml")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_totoc"))
        .args(["export", "--checkpoint", "ck", "--config", "p.yaml", "--out", "b"])
        .current_dir(&cwd)
        .env("TMPDIR", &other_tmp)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let b = cwd.join("b");
    let files = exporter::integrity::files_under(&a).unwrap();
    assert_eq!(files, exporter::integrity::files_under(&b).unwrap());
    assert!(files.contains(&"manifest.sha256".to_string()));
    for f in &files {
        assert!(fs::read(a.join(f)).unwrap() == fs::read(b.join(f)).unwrap(), "{f} differs");
    }
}
