//! Checks that CI and deployment files only call what exists: every `totoc ...` invocation in the GitHub
//! workflows, in every script they (and the Dockerfile) call, in the Dockerfile's command and in the KServe
//! ServingRuntime parses with the real clap CLI ([`Cli`]); every script they name exists; the ports and probe routes
//! of the Dockerfile and the KServe manifests agree with the `totoc serve` arguments. (That the probe routes answer
//! on a real server is `tests/integration/deploy.rs`.)
#![cfg(test)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use clap::Parser;
use serde_json::Value;

use crate::cli::{Cli, Command};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn yaml(rel: &str) -> Value {
    serde_saphyr::from_str(&read(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Words that end a command (pipes, redirections, separators).
fn ends_command(w: &str) -> bool {
    matches!(w, "|" | "||" | "&&" | ";" | ")" | "then" | "do" | "2>&1")
        || w.starts_with('>')
        || w.starts_with("2>")
}

/// A shell word with its quotes removed; a word that is only a variable becomes a sample value (`$target` → `cpu`,
/// others `1`, which is a valid path, count and name); array expansions (`"${flags[@]}"`) vanish.
fn unquote(w: &str) -> Option<String> {
    let w = w.trim_matches('"').trim_matches('\'');
    if w.contains("[@]}") {
        return None;
    }
    let var = w.strip_prefix("${").and_then(|v| v.strip_suffix('}')).or_else(|| w.strip_prefix('$'));
    match var {
        Some(v) if v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => {
            Some(if v == "target" { "cpu".into() } else { "1".into() })
        }
        _ => Some(w.to_string()),
    }
}

/// Every `totoc` command line in shell text: a word `totoc`, `*/totoc` or `"$totoc"` in command position (first
/// on its line or after `&&`, `;`, `|`, `then`, `do`), up to the end of the command; `\` continuations joined,
/// comments skipped, GitHub `${{ ... }}` expressions replaced by one word.
fn totoc_invocations(text: &str) -> Vec<Vec<String>> {
    let joined = text.replace("\\\n", " ");
    let mut out = Vec::new();
    for line in joined.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        let line = strip_gh_expressions(line);
        let words: Vec<&str> = line.split_whitespace().collect();
        for (i, w) in words.iter().enumerate() {
            let bare = w.trim_matches('"');
            let is_totoc = !bare.contains('=')
                && (bare == "totoc" || bare.ends_with("/totoc") || bare == "$totoc" || bare == "${totoc}");
            let command_position = i == 0 || ends_command(words[i - 1]) || words[i - 1] == "exec";
            if is_totoc && command_position {
                let args: Vec<String> = std::iter::once("totoc".to_string())
                    .chain(words[i + 1..].iter().take_while(|w| !ends_command(w)).filter_map(|w| unquote(w)))
                    .collect();
                out.push(args);
            }
        }
    }
    out
}

fn strip_gh_expressions(line: &str) -> String {
    let mut s = line.to_string();
    while let (Some(a), Some(b)) = (s.find("${{"), s.find("}}")) {
        if b < a {
            break;
        }
        s.replace_range(a..b + 2, "GH_EXPR");
    }
    s
}

/// Scripts (`scripts/*.sh`, `.ci/run`, `tests/**/*.sh`) that shell text names.
fn scripts_named(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for w in text.split(|c: char| c.is_whitespace() || "\"'$()=;".contains(c)) {
        let w = w.trim_start_matches("./");
        if w.contains('*') {
            continue; // a glob (`shellcheck scripts/*.sh`), not a call
        }
        if (w.starts_with("scripts/") || w.starts_with("tests/")) && w.ends_with(".sh") || w == ".ci/run" {
            out.insert(w.to_string());
        }
    }
    out
}

/// The shell text of every `run:` step of a workflow.
fn run_steps(workflow: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for job in workflow["jobs"].as_object().expect("jobs").values() {
        for step in job["steps"].as_array().expect("steps") {
            if let Some(run) = step["run"].as_str() {
                out.push(run.to_string());
            }
        }
    }
    out
}

/// Parses one `totoc` call as the binary would; `totoc --version` and `totoc --help` are valid calls (clap reports
/// them as "errors" of their own kinds, which print and exit 0), so they parse to `None`.
fn parse(args: &[String], at: &str) -> Option<Cli> {
    match Cli::try_parse_from(args) {
        Ok(cli) => Some(cli),
        Err(e)
            if matches!(
                e.kind(),
                clap::error::ErrorKind::DisplayVersion | clap::error::ErrorKind::DisplayHelp
            ) =>
        {
            None
        }
        Err(e) => panic!("{at}: `{}` does not parse:\n{e}", args.join(" ")),
    }
}

/// Checks the scripts `text` names exist and that every `totoc` call in them (recursively) parses; returns how
/// many calls were checked.
fn check_shell(text: &str, at: &str, seen: &mut BTreeSet<String>) -> usize {
    let mut checked = 0;
    for args in totoc_invocations(text) {
        parse(&args, at);
        checked += 1;
    }
    for script in scripts_named(text) {
        assert!(root().join(&script).is_file(), "{at} calls {script}, which does not exist");
        if seen.insert(script.clone()) {
            checked += check_shell(&read(&script), &script, seen);
        }
    }
    checked
}

#[test]
fn workflows_call_only_existing_scripts_and_valid_totoc_commands() {
    let mut seen = BTreeSet::new();
    let mut checked = 0;
    for wf in [".github/workflows/artifacts.yml", ".github/workflows/ci.yml"] {
        for run in run_steps(&yaml(wf)) {
            checked += check_shell(&run, wf, &mut seen);
        }
    }
    // the scripts the workflows call, and the totoc commands in them and in the workflows themselves
    for s in ["scripts/build-artifacts.sh", "scripts/fetch-onnxruntime.sh", ".ci/run", "scripts/test.sh"] {
        assert!(seen.contains(s), "{s} not found in the workflows: {seen:?}");
    }
    assert!(checked >= 10, "only {checked} totoc invocations found");
    let build = totoc_invocations(&read("scripts/build-artifacts.sh"));
    let subcommands: BTreeSet<String> = build.iter().map(|a| a[1..3.min(a.len())].join(" ")).collect();
    for want in
        ["export --checkpoint", "build-engine --artifacts", "verify --engine", "bundle verify", "bundle info"]
    {
        assert!(
            subcommands.contains(want),
            "build-artifacts.sh does not run `totoc {want}`: {subcommands:?}"
        );
    }
    // pull requests run the README's test command
    let ci = yaml(".github/workflows/ci.yml");
    assert!(ci["on"].get("pull_request").is_some(), "ci.yml must run on pull_request");
    assert!(run_steps(&ci).iter().any(|r| r.trim() == ".ci/run"));
}

#[test]
fn the_artifacts_workflow_builds_every_config() {
    let wf = yaml(".github/workflows/artifacts.yml");
    let listed: BTreeSet<String> = wf["jobs"]["cpu"]["strategy"]["matrix"]["config"]
        .as_array()
        .expect("cpu job matrix")
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect();
    let configs: BTreeSet<String> = std::fs::read_dir(root().join("configs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    assert_eq!(listed, configs, "the cpu job's matrix must list every config in configs/");
    for c in &configs {
        let set = exporter::profile_file::ProfileSet::from_file(&root().join("configs").join(c)).unwrap();
        let model =
            set.model.unwrap_or_else(|| panic!("configs/{c} names no model: generation and checkpoint"));
        assert!(!model.checkpoint.is_empty());
    }
    // on tags and by hand; the GPU job only where a GPU runner is configured
    assert!(wf["on"].get("workflow_dispatch").is_some() && wf["on"].get("push").is_some());
    let inputs = &wf["on"]["workflow_dispatch"]["inputs"];
    assert!(inputs.get("checkpoint_root").is_some() && inputs.get("checkpoint_cache_key").is_some());
    assert!(wf["jobs"]["gpu"]["if"].as_str().unwrap().contains("vars.TOTOC_GPU_RUNNER"));
    let steps = wf["jobs"]["cpu"]["steps"].as_array().unwrap();
    let upload =
        steps.iter().find(|s| s["uses"].as_str().is_some_and(|u| u.starts_with("actions/upload-artifact")));
    assert_eq!(upload.expect("an upload step")["with"]["path"], "artifacts");
}

/// The port of a `HOST:PORT` argument.
fn port_of(addr: &str) -> u16 {
    addr.rsplit_once(':').and_then(|(_, p)| p.parse().ok()).unwrap_or_else(|| panic!("no port in {addr}"))
}

/// `totoc serve` arguments parsed by the real CLI: (http port, grpc port, engine path).
fn serve_ports(args: &[String], at: &str) -> (u16, u16, PathBuf) {
    let cli = parse(args, at).unwrap_or_else(|| panic!("{at}: prints help or version, not `totoc serve`"));
    match cli.command {
        Command::Serve(s) => {
            assert_eq!(s.addr.ip().to_string(), "0.0.0.0", "{at}: serve must listen on all interfaces");
            (s.addr.port(), port_of(&s.grpc_addr), s.engine)
        }
        other => panic!("{at}: runs {other:?}, not `totoc serve`"),
    }
}

#[test]
fn the_dockerfile_serves_on_the_exposed_ports_and_runs_existing_scripts() {
    let text = read("Dockerfile");
    let json_array = |key: &str| -> Vec<String> {
        let line = text.lines().find(|l| l.starts_with(key)).unwrap_or_else(|| panic!("no {key}"));
        serde_json::from_str(line[key.len()..].trim())
            .unwrap_or_else(|e| panic!("{key} is not exec form: {e}"))
    };
    let entry = json_array("ENTRYPOINT");
    assert_eq!(entry, ["totoc"]);
    let args: Vec<String> = entry.into_iter().chain(json_array("CMD")).collect();
    let (http, grpc, engine) = serve_ports(&args, "Dockerfile CMD");
    let exposed: BTreeSet<u16> = text
        .lines()
        .filter_map(|l| l.strip_prefix("EXPOSE "))
        .flat_map(|l| l.split_whitespace().map(|p| p.parse::<u16>().unwrap()))
        .collect();
    assert_eq!(exposed, BTreeSet::from([http, grpc]));
    assert_eq!((http, grpc), (8080, 8081));
    assert_eq!(engine, Path::new("/models/engine"));
    // multi-stage, non-root, ORT inside
    assert_eq!(text.lines().filter(|l| l.starts_with("FROM ")).count(), 2);
    let user = text.lines().filter_map(|l| l.strip_prefix("USER ")).next_back().expect("a USER line");
    assert_ne!(user.trim(), "root");
    assert!(text.contains("ENV TOTOC_ORT_LIB="));
    let runs: String = text.lines().filter(|l| !l.starts_with('#')).collect::<Vec<_>>().join("\n");
    let mut seen = BTreeSet::new();
    check_shell(&runs, "Dockerfile", &mut seen);
    assert!(
        seen.contains("scripts/build-artifacts.sh") && seen.contains("scripts/fetch-onnxruntime.sh"),
        "{seen:?}"
    );
    // The image builds with the toolchain the workspace declares (an older one fails on newer syntax).
    let workspace = read("Cargo.toml");
    let rust_version = workspace
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = "))
        .map(|v| v.trim().trim_matches('"').to_string())
        .expect("Cargo.toml declares the workspace rust-version");
    let docker_rust = text
        .lines()
        .find_map(|l| l.strip_prefix("ARG RUST_VERSION="))
        .expect("the Dockerfile names its Rust toolchain with ARG RUST_VERSION=");
    assert_eq!(
        docker_rust.trim(),
        rust_version,
        "the Dockerfile's Rust differs from the workspace rust-version"
    );
}

/// A `--flag value` of `args`, if given.
fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).map(String::as_str)
}

/// Kubernetes quantities as bytes (`4Gi`, `512Mi`, `2GiB` as totoc writes them).
fn bytes_of(q: &str) -> u64 {
    let q = q.trim_end_matches('B');
    let (n, unit) = q.split_at(q.find(|c: char| !c.is_ascii_digit()).unwrap_or(q.len()));
    let n: u64 = n.parse().unwrap_or_else(|_| panic!("quantity {q}"));
    n * match unit {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        other => panic!("unit {other} in {q}"),
    }
}

#[test]
fn the_kserve_runtime_is_sized_and_drains_within_its_grace_period() {
    let rt = yaml("deploy/kserve/servingruntime.yaml");
    let c = &rt["spec"]["containers"][0];
    let args: Vec<String> =
        c["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()).collect();
    // The engine's budget, the bodies in flight and the runtime fit the memory limit (the default budget, 80% of
    // the limit, would not leave room for the rest).
    let budget = bytes_of(flag(&args, "--memory-budget").expect("the runtime sets --memory-budget"));
    let in_flight = bytes_of(flag(&args, "--max-bytes-in-flight").unwrap_or("256MiB"));
    let limit = bytes_of(c["resources"]["limits"]["memory"].as_str().unwrap());
    assert!(
        budget + in_flight + (512 << 20) <= limit,
        "--memory-budget {budget} + bodies in flight {in_flight} + 512 MiB exceed the memory limit {limit}"
    );
    // Drain: preStop sleep, then SIGTERM and --shutdown-timeout-s, all within the pod's grace period.
    let pre_stop: Vec<&str> = c["lifecycle"]["preStop"]["exec"]["command"]
        .as_array()
        .expect("a preStop hook")
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(pre_stop[0], "sleep");
    let sleep: u64 = pre_stop[1].parse().unwrap();
    let shutdown: u64 =
        flag(&args, "--shutdown-timeout-s").expect("the runtime sets --shutdown-timeout-s").parse().unwrap();
    let isvc = yaml("deploy/kserve/inferenceservice.yaml");
    let grace = isvc["spec"]["predictor"]["terminationGracePeriodSeconds"].as_u64().expect("a grace period");
    assert!(
        sleep + shutdown + 5 <= grace,
        "preStop {sleep} s + shutdown {shutdown} s + 5 s > grace period {grace} s"
    );
}

/// The probe paths of a container or predictor spec, checked to be on `port`.
fn probes(spec: &Value, port: u16, at: &str) -> (String, String) {
    let probe = |k: &str| {
        let get = &spec[k]["httpGet"];
        assert_eq!(get["port"].as_u64(), Some(port as u64), "{at}: {k} port");
        get["path"].as_str().unwrap_or_else(|| panic!("{at}: no {k} path")).to_string()
    };
    (probe("readinessProbe"), probe("livenessProbe"))
}

/// The probe routes the KServe manifests use (`tests/integration/deploy.rs` GETs them on a real server).
pub fn kserve_probe_paths() -> Vec<String> {
    let rt = yaml("deploy/kserve/servingruntime.yaml");
    let isvc = yaml("deploy/kserve/inferenceservice.yaml");
    let (a, b) = probes(&rt["spec"]["containers"][0], 8080, "servingruntime");
    let (c, d) = probes(&isvc["spec"]["predictor"]["model"], 8080, "inferenceservice");
    vec![a, b, c, d]
}

#[test]
fn kserve_manifests_match_the_serve_flags_and_routes() {
    let rt = yaml("deploy/kserve/servingruntime.yaml");
    assert_eq!(
        (rt["kind"].as_str(), rt["apiVersion"].as_str()),
        (Some("ServingRuntime"), Some("serving.kserve.io/v1alpha1"))
    );
    let c = &rt["spec"]["containers"][0];
    let args: Vec<String> = std::iter::once("totoc".to_string())
        .chain(c["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()))
        .collect();
    let (http, grpc, engine) = serve_ports(&args, "servingruntime args");
    assert_eq!(
        engine,
        Path::new("/mnt/models"),
        "KServe's storage initializer puts the model at /mnt/models"
    );
    let ports: Vec<(String, u16)> = c["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["name"].as_str().unwrap().to_string(), p["containerPort"].as_u64().unwrap() as u16))
        .collect();
    assert_eq!(ports, [("http1".to_string(), http), ("h2c".to_string(), grpc)]);
    assert!(rt["spec"]["protocolVersions"].as_array().unwrap().iter().any(|v| v == "v2"));
    // The model format the runtime declares is the engine bundle format this totoc reads, and docs/formats.md
    // names the formats of this totoc.
    let format = &rt["spec"]["supportedModelFormats"][0];
    assert_eq!(format["name"], "totoc-engine");
    assert_eq!(
        format["version"].as_str(),
        Some(engines::bundle::ENGINE_FORMAT_VERSION.to_string().as_str()),
        "deploy/kserve/servingruntime.yaml declares another engine format than {}",
        engines::bundle::ENGINE_FORMAT
    );
    assert_eq!(
        engines::bundle::ENGINE_FORMAT,
        format!("totoc-engine/{}", engines::bundle::ENGINE_FORMAT_VERSION)
    );
    let formats = read("docs/formats.md");
    for tag in [engines::bundle::ENGINE_FORMAT, exporter::manifest::BUNDLE_FORMAT] {
        assert!(
            formats.contains(&format!("`{tag}`")),
            "docs/formats.md does not name the current format {tag}"
        );
    }
    assert!(c["resources"]["requests"]["cpu"].is_string() && c["resources"]["limits"]["memory"].is_string());

    let isvc = yaml("deploy/kserve/inferenceservice.yaml");
    assert_eq!(isvc["kind"], "InferenceService");
    let p = &isvc["spec"]["predictor"];
    assert_eq!(
        (p["model"]["runtime"].as_str(), p["model"]["protocolVersion"].as_str()),
        (Some("totoc"), Some("v2"))
    );
    assert_eq!(p["model"]["modelFormat"]["name"], rt["spec"]["supportedModelFormats"][0]["name"]);
    assert_eq!(p["scaleMetric"], "concurrency");
    assert_eq!(isvc["metadata"]["annotations"]["autoscaling.knative.dev/metric"], "concurrency");
    assert!(p["model"]["resources"]["requests"]["memory"].is_string());
    let paths = kserve_probe_paths();
    assert_eq!(paths, ["/v2/health/ready", "/v2/health/live", "/v2/health/ready", "/v2/health/live"]);
}

#[test]
fn invocations_are_found_in_command_position_only() {
    let text = "install -m 0755 target/release/totoc /usr/local/bin/totoc\n\
                # totoc nope\n\
                x && \"$totoc\" bundle verify \"$dir/export\" > out.json\n\
                target/release/totoc build-engine --artifacts a \\\n  --out b --target \"$target\"\n\
                run --totoc target/release/totoc";
    let found = totoc_invocations(text);
    assert_eq!(
        found,
        vec![
            vec!["totoc", "bundle", "verify", "$dir/export"],
            vec!["totoc", "build-engine", "--artifacts", "a", "--out", "b", "--target", "cpu"],
        ]
    );
    assert!(
        Cli::try_parse_from(["totoc", "bundle", "verify"]).is_err(),
        "the real CLI refuses a missing DIR"
    );
}
