//! The engine against upstream on every reference fixture (`tests/fixtures/kronos/`, tests/reference/README.md,
//! "Kronos"): each config's checkpoints exported with one test profile, built into a CPU engine, and every case
//! run and compared ([`crate::kronos::golden`]): encode tokens and every path's tokens identical, logits within
//! τ, decoded rows within 1e-4·σ. Then the planted defects, each of which must fail one fixture by a token or by
//! ≥ 10× a tolerance; then the statistics of totoc's own noise against upstream's 1,000 paths; then determinism.

use std::path::{Path, PathBuf};

use exporter::export::ExportOptions;
use exporter::graph::Fp16Plan;
use exporter::profile::Profile;
use exporter::signature::Precision;
use exporter::variant::OpsetVariant;

use crate::backend::Target;
use crate::bundle::BuildOptions;
use crate::engine::{Engine, LoadOptions};
use crate::kronos::engine::KronosEngine;
use crate::kronos::golden::{check_case, CheckOptions, KronosCase, Quantity};

pub(crate) fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/kronos")
}

/// The test profile: every fixture case (up to 3 series of up to 150 rows, horizons up to 16, max_context up to
/// 128), a call of 9 series, 1,000 paths.
pub(crate) fn test_profile() -> Profile {
    Profile {
        name: "test".into(),
        batch: 9,
        variates: 1,
        context: 160,
        horizon: 24,
        samples: 1000,
        buckets: None,
        decode_block: None,
        family: Some(serde_json::json!({
            "window": 128,
            "encode": [{"rows": 1, "slots": 64}, {"rows": 1, "slots": 160}, {"rows": 9, "slots": 160}],
            "prefill": [{"rows": 1, "slots": 64}, {"rows": 1, "slots": 128}, {"rows": 9, "slots": 128}],
            "detokenize": [{"rows": 16, "slots": 128}, {"rows": 64, "slots": 128}],
            "rows": [1, 4, 16, 64],
        })),
    }
}

/// A CPU engine of fixture config `config` (`k10`, `k4`, `k5g5`, `k6te`) under `dir`.
pub(crate) fn engine(config: &str, dir: &Path) -> Engine {
    let root = fixtures().join(config);
    let bundle = dir.join("bundle");
    let opts = ExportOptions {
        checkpoint: root.join("predictor"),
        tokenizer: Some(root.join("tokenizer")),
        profiles: vec![test_profile()],
        out: bundle.clone(),
        precisions: vec![Precision::Fp32],
        variant: OpsetVariant::Opset24,
        fp16_plan: Fp16Plan::DEFAULT,
        int8_plan: None,
        force: true,
        golden: None,
    };
    exporter::registry::export_bundle(&opts, &mut |_| {}).unwrap();
    let out = dir.join("engine");
    let build = BuildOptions { force: true, ..BuildOptions::default() };
    crate::registry::build_engine(&bundle, &Target::cpu(None), &out, &build, &mut |_| {}).unwrap();
    Engine::load(&out, &LoadOptions::default()).unwrap()
}

pub(crate) fn kronos(engine: &Engine) -> &KronosEngine {
    engine.family_engine().as_any().downcast_ref::<KronosEngine>().expect("a Kronos engine")
}

/// Every case of `config`, in name order.
pub(crate) fn cases(config: &str) -> Vec<KronosCase> {
    let dir = fixtures().join(config).join("cases");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| {
            let mut c = KronosCase::read(p).unwrap();
            c.name = format!("{config}/{}", c.name);
            c
        })
        .collect()
}

/// Runs `case` and returns its quantities.
pub(crate) fn check(engine: &Engine, case: &KronosCase, opts: CheckOptions) -> Vec<Quantity> {
    check_case(kronos(engine), engine.call(), case, opts).unwrap_or_else(|e| panic!("{}: {e}", case.name))
}

/// Prints a case's quantities, one line each.
pub(crate) fn print(case: &str, q: &[Quantity]) {
    for x in q {
        eprintln!(
            "{case:<22} series {} {:<14} {:>6} values, {:>4} over, worst/tol {:>9.3} {}",
            x.series, x.what, x.count, x.failures, x.worst, x.at
        );
    }
}

#[test]
fn every_fixture_matches_upstream() {
    for config in ["k10", "k4", "k5g5", "k6te"] {
        let dir = tempfile::tempdir().unwrap();
        let e = engine(config, dir.path());
        for case in cases(config) {
            let q = check(&e, &case, CheckOptions::default());
            print(&case.name, &q);
            let bad: Vec<&Quantity> = q.iter().filter(|x| !x.ok()).collect();
            assert!(bad.is_empty(), "{}: {bad:?}", case.name);
        }
    }
}

/// Whether `q` shows a defect: a token that differs, or a value at least 10× its tolerance.
fn caught(q: &[Quantity]) -> Option<&Quantity> {
    q.iter().filter(|x| x.worst >= 10.0).max_by(|a, b| a.worst.total_cmp(&b.worst))
}

fn case(config: &str, name: &str) -> KronosCase {
    let mut c =
        KronosCase::read(&fixtures().join(config).join("cases").join(format!("{name}.json"))).unwrap();
    c.name = format!("{config}/{name}");
    c
}

#[test]
fn planted_defects_fail_a_fixture() {
    use crate::kronos::defects::{plant, Defects};
    let dir = tempfile::tempdir().unwrap();
    let (k10, k4) = (engine("k10", &dir.path().join("k10")), engine("k4", &dir.path().join("k4")));
    let off = Defects::default();
    let defects = [
        ("bits MSB-first", Defects { bits_msb_first: true, ..off }, vec!["k10/greedy_daily"]),
        ("the dependency layer causal", Defects { dep_causal: true, ..off }, vec!["k10/greedy_daily"]),
        ("the next row's stamp", Defects { next_stamp: true, ..off }, vec!["k4/greedy_intraday"]),
        ("std with ddof 1", Defects { std_ddof1: true, ..off }, vec!["k10/greedy_daily"]),
        (
            "temperature after filtering",
            Defects { temperature_after_filter: true, ..off },
            vec!["k10/topp_t07", "k4/samples4"],
        ),
        (
            "top-p without the right shift",
            Defects { top_p_no_shift: true, ..off },
            vec!["k10/topp_t07", "k4/samples4"],
        ),
        (
            "the window after the slide off by one",
            Defects { slide_off_by_one: true, ..off },
            vec!["k10/slide"],
        ),
        (
            "the final decode over the wrong window",
            Defects { final_window_wrong: true, ..off },
            vec!["k10/slide"],
        ),
    ];
    for (what, d, fixtures) in defects {
        let mut hits = Vec::new();
        for f in &fixtures {
            let (config, name) = f.split_once('/').unwrap();
            let e = if config == "k10" { &k10 } else { &k4 };
            let c = case(config, name);
            let clean = check(e, &c, CheckOptions::default());
            assert!(clean.iter().all(Quantity::ok), "{}: fails without the defect", c.name);
            let q = {
                let _planted = plant(d);
                check(e, &c, CheckOptions::default())
            };
            match caught(&q) {
                Some(hit) => {
                    eprintln!(
                        "{what:<40} {:<18} {} series {}: worst/tol {:.1} ({} of {} over)",
                        c.name, hit.what, hit.series, hit.worst, hit.failures, hit.count
                    );
                    hits.push(c.name.clone());
                }
                None => eprintln!("{what:<40} {:<18} not caught", c.name),
            }
        }
        assert!(!hits.is_empty(), "{what}: no fixture of {fixtures:?} fails by a token or 10× a tolerance");
    }
    // a graph defect: the dependency query scaled by √D (its export only)
    exporter::kronos::graph::planted::scale_dep_query(true);
    let scaled = engine("k10", &dir.path().join("k10-scaled"));
    exporter::kronos::graph::planted::scale_dep_query(false);
    let c = case("k10", "greedy_daily");
    let q = check(&scaled, &c, CheckOptions::default());
    let hit = caught(&q).expect("the dependency query × √D does not fail k10/greedy_daily");
    eprintln!(
        "{:<40} {:<18} {} series {}: worst/tol {:.1}",
        "the dependency query × √D", c.name, hit.what, hit.series, hit.worst
    );
}
