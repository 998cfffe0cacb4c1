//! Which int8 GEMM ONNX Runtime runs, and that the choice changes no bit of a forecast.
//!
//! totoc asks for ONNX Runtime's u8·u8 GEMM (`session.x64quantprecision`) only on x86 CPUs whose u8·s8 kernel
//! adds products in saturating int16 (`engines::cpu::int8_needs_u8u8_gemm`). On the others (VNNI, AMX) it leaves
//! the u8·s8 kernel in place because that kernel is exact too — which this test checks rather than assumes: the
//! same int8 engine, with every transformer matmul int8 (`Int8Plan::ALL`: the attention projections and the MLP,
//! so every GEMM shape of either family's default role set), forecasts every tiny fixture case in two processes,
//! one in the default mode and one with `TOTOC_INT8_U8U8=1` (the u8·u8 GEMM forced), and the forecasts must be
//! bitwise equal. On a CPU that needs the u8·u8 GEMM both processes run it, and the test checks that the default
//! asks for it.
mod support;

use std::path::Path;
use std::process::Command;

use engines::backend::{session_config, Stage, Target};
use engines::compare::find_cases;
use engines::cpu::{cpu_summary, int8_needs_u8u8_gemm, INT8_U8U8_ENV};
use engines::engine::{Engine, LoadOptions};
use engines::toto1::golden::GoldenCase;
use exporter::graph::Int8Plan;
use exporter::signature::Precision;
use support::{int8_engine_with_roles, root};

/// Set in the child processes: where `child_writes_int8_forecasts` writes its forecasts.
const OUT_ENV: &str = "TOTOC_TEST_INT8_GEMM_OUT";
/// Set in the child processes: the int8 engine the parent built.
const ENGINE_ENV: &str = "TOTOC_TEST_INT8_GEMM_ENGINE";

/// The child half: with [`OUT_ENV`] set, forecasts every tiny case's mean path with the engine at [`ENGINE_ENV`]
/// and writes the forecasts' f32 bits and whether this process's int8 sessions ask for the u8·u8 GEMM; without
/// it, nothing.
#[test]
fn child_writes_int8_forecasts() {
    let Some(out) = std::env::var_os(OUT_ENV) else { return };
    let engine = std::env::var_os(ENGINE_ENV).expect("the parent names the engine");
    let e8 = Engine::load(Path::new(&engine), &LoadOptions::default()).unwrap();
    let load = Stage::Load { bundle_dir: ".".into() };
    let asks = session_config(&Target::cpu(Some(1)), &load, Precision::Int8)
        .config_entries
        .iter()
        .any(|(k, v)| k == "session.x64quantprecision" && v == "1");
    let mut text = format!("u8u8 {asks}\n");
    for path in find_cases(&root().join("tests/fixtures/tiny/cases")).unwrap() {
        let case = GoldenCase::read(&path).unwrap();
        let got = e8.forecast_traced(vec![case.mean_request()], false).remove(0).unwrap();
        let bits: Vec<String> =
            got.response.point().iter().flatten().map(|x| format!("{:08x}", x.to_bits())).collect();
        text += &format!("{} {}\n", case.name, bits.join(" "));
    }
    std::fs::write(out, text).unwrap();
}

/// Runs [`child_writes_int8_forecasts`] on the engine at `engine` in a new process of this test binary, with the
/// u8·u8 GEMM forced or not.
fn child_forecasts(dir: &Path, engine: &Path, force_u8u8: bool) -> String {
    let out = dir.join(format!("forecasts-{force_u8u8}.txt"));
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "child_writes_int8_forecasts", "--nocapture", "--test-threads", "1"]);
    cmd.env(OUT_ENV, &out).env(ENGINE_ENV, engine).env_remove(INT8_U8U8_ENV);
    if force_u8u8 {
        cmd.env(INT8_U8U8_ENV, "1");
    }
    // captured, so the child's test summary does not join this binary's in the test log
    let out_child = cmd.output().unwrap();
    assert!(
        out_child.status.success(),
        "child test process failed: {}\n{}{}",
        out_child.status,
        String::from_utf8_lossy(&out_child.stdout),
        String::from_utf8_lossy(&out_child.stderr)
    );
    std::fs::read_to_string(&out).unwrap()
}

#[test]
fn int8_forecasts_are_the_same_bits_with_the_u8s8_gemm_totoc_picks_and_the_u8u8_one() {
    let cpu = cpu_summary().unwrap_or_else(|| "unknown CPU".into());
    let needs = int8_needs_u8u8_gemm();
    eprintln!("CPU: {cpu}; int8 sessions ask for the u8·u8 GEMM by default: {needs}");
    let tmp = tempfile::tempdir().unwrap();
    drop(int8_engine_with_roles("tiny", tmp.path(), Int8Plan::ALL));
    let engine = tmp.path().join("engine");
    let default = child_forecasts(tmp.path(), &engine, false);
    let forced = child_forecasts(tmp.path(), &engine, true);
    let (d_head, d_body) = default.split_once('\n').unwrap();
    let (f_head, f_body) = forced.split_once('\n').unwrap();
    assert_eq!(d_head, format!("u8u8 {needs}"), "the default mode's sessions follow int8_needs_u8u8_gemm");
    if cfg!(target_arch = "x86_64") {
        assert_eq!(f_head, "u8u8 true", "{INT8_U8U8_ENV}=1 asks for the u8·u8 GEMM");
    }
    assert!(d_body.lines().count() >= 4, "every tiny case forecast: {d_body}");
    for (d, f) in d_body.lines().zip(f_body.lines()) {
        assert_eq!(d, f, "{cpu}: the int8 forecast changed with the GEMM kernel");
    }
}
