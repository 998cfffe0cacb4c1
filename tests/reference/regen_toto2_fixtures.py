#!/usr/bin/env python3
"""Regenerates (or checks) the Toto 2.0 golden fixtures under tests/fixtures/toto2/ from toto-2 2.0.0.

    regen_fixtures.py            # rewrite tests/fixtures/toto2/
    regen_fixtures.py --check    # regenerate into a temp dir and compare with the committed files (CI)

Layout (see tests/reference/README.md, "Toto 2.0", for every field):
    tests/fixtures/toto2/provenance.json
    tests/fixtures/toto2/<config>/config.json
    tests/fixtures/toto2/<config>/cases/<case>.json = {"request": {...}, "options": {"decode_block": B|null},
                                                      "reference": {...}}

No weights are committed: make_toto2_checkpoints.py regenerates each checkpoint from (config, seed) bit for bit,
and provenance.json records the digest the Rust side checks its own regeneration against
(`exporter::toto2::synth`). The 4m and 22m configs are the published ones; `small` is shrunk and written
sharded (two safetensors files and an index).

Generation is deterministic (inputs from numpy PCG64 with a fixed seed per case, torch on one thread with its kernels
pinned as regen_fixtures.py pins them (kernels.py), every float a float32 value in Python's shortest repr, sorted
keys). --check: config.json and requests must be byte-identical and the weights digests equal; every reference number
within tau * (unit + |b|) in its own scale (live_check.py): the raw head knots in their asinh units, the median,
quantiles and the blocks' scaler statistics in units of the variate's largest scaler scale (TAUS below, from the drift
kernel_drift.py measured; toto-2's block decoding feeds each block's output back and the random-weight 2.0 models
amplify last-bit differences, so its drift is larger than toto-ts's). totoc's own equivalence tolerance is
1e-4·σ + 1e-6·|ref|.
"""

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kernels  # noqa: E402

kernels.pin()  # before anything imports torch: MKL and ATen read their kernel settings once
import live_check  # noqa: E402
import make_toto2_checkpoints as make_checkpoints  # noqa: E402
import regen_fixtures as v1  # noqa: E402  (the Toto 1.0 generator: input synthesis, JSON and comparison helpers)

REPO = os.path.dirname(os.path.dirname(HERE))
FIXTURES = os.path.join(REPO, "tests", "fixtures", "toto2")
# config -> safetensors shards it is written (and read back by the reference) in
SHARDS = {"4m": 1, "22m": 1, "small": 2}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def make_request(seed, kinds, t, horizon, id_mask=None, nulls=None):
    """A request {"target", "horizon"[, "id_mask"]}; nulls: {variate: time indices} set to null."""
    import numpy as np

    rng = np.random.Generator(np.random.PCG64(seed))
    target = []
    for v, kind in enumerate(kinds):
        row = [float(x) for x in v1.synth(rng, kind, t)]
        for j in (nulls or {}).get(v, []):
            row[j] = None
        target.append(row)
    req = {"target": target, "horizon": horizon}
    if id_mask is not None:
        req["id_mask"] = id_mask
    return req


def all_cases():
    """case -> (request, decode_block or None)."""
    cases = {}
    # 300 points -> the last 288 (9 patches) are used; H=100 -> 4 patches in one pass.
    cases["single_1v"] = (make_request(41, ["kilo"], 300, 100), None)
    # 200 -> 192 used (points 8..199; 6 patches). Two id groups. Variate 1: kept patch 2 (points 72..103) fully
    # missing; variate 2: kept patches 0 and 1 fully missing (its first 72 points); variate 0 (the other group):
    # kept patch 1 (points 40..71) fully missing too, so at that slot two variates of different groups share
    # toto-2's group id -1; variate 3: the last 3 points and one more inside the last patch missing
    # (forward-filled); scattered nulls elsewhere.
    t = 200
    nulls = {
        0: sorted(set(v1.scattered(42, t, 6, 0)) | set(range(40, 72))),
        1: list(range(72, 104)) + [150],
        2: list(range(72)) + [120],
        3: [180, 197, 198, 199],
    }
    cases["single_4v_groups"] = (
        make_request(43, ["kilo", "centi", "neg", "big"], t, 40, id_mask=[0, 0, 1, 1], nulls=nulls),
        None,
    )
    # Block decoding, H=200 -> 7 patches in blocks of 2 (2,2,2,1: prefill + 3 decode calls). Variate 1 (group 0)
    # has context patches 0 and 1 fully missing and variate 2 (group 1) patch 1: every decode call gives its
    # slots 0 and 1 those patches' group id -1 (toto-2 reads base_gids[..., :2B]), so in the variate layer
    # variate 1 leaves its group there and meets variate 2 at slot 1, whose output predicts the next patch.
    # Variate 2 also misses points inside the last context patch.
    nulls = {1: list(range(64)) + [100], 2: list(range(32, 64)) + [230, 255]}
    cases["block_3v"] = (make_request(44, ["kilo", "neg", "big"], 256, 200, id_mask=[0, 0, 1], nulls=nulls), 64)
    # 130 -> 128 used; H=336 -> 11 patches in blocks of 4 (4,4,3).
    cases["block_1v_long"] = (make_request(45, ["big"], 130, 336), 128)
    # A block decoding profile with H <= block: one pass (no cache), as forecast() does.
    cases["block_short"] = (make_request(46, ["neg", "kilo"], 96, 50, id_mask=[0, 1]), 128)
    return cases


CONFIG_CASES = {
    "4m": ["single_1v", "single_4v_groups", "block_3v", "block_1v_long", "block_short"],
    "22m": ["single_4v_groups", "block_3v"],
    "small": ["single_1v", "single_4v_groups", "block_3v", "block_1v_long"],
}


def self_consistency(name, ref):
    """The recorded raw head outputs and scaler statistics reproduce the recorded quantiles (sinh, scale, loc,
    sort: no non-finite values or caps occur in these cases)."""
    import numpy as np

    q = np.asarray(ref["quantiles"], np.float32)  # [9][V][H]
    h = q.shape[-1]
    parts = []
    for b in ref["blocks"]:
        raw = np.asarray(b["raw"], np.float32)
        loc = np.asarray(b["loc"], np.float32)[None, :, None]
        scale = np.asarray(b["scale"], np.float32)[None, :, None]
        parts.append(np.sort(np.sinh(raw) * scale + loc, axis=0))
    got = np.concatenate(parts, axis=-1)[..., :h]
    err = np.abs(got - q) / (1e-30 + np.abs(q) + np.abs(np.concatenate([b["scale"] for b in ref["blocks"]])).max())
    assert err.max() <= 1e-5, f"{name}: quantiles != sort(sinh(raw)*scale+loc) (max rel {err.max():.3g})"
    assert np.all(np.ptp(q[4], axis=1) > 0), f"{name}: constant median"


def generate(out_root, work, only=None, perturb=None):
    """Writes every fixture under out_root (checkpoints under work); `only` and `perturb` as in regen_fixtures.py,
    except that perturb \"seed\" takes the checkpoint's seed + 1 (toto-2 has no sampling seed)."""
    import numpy as np
    import torch

    import run_toto2_reference as run_reference

    torch.set_num_threads(1)
    os.makedirs(out_root, exist_ok=True)
    prov = {
        "generator": "tests/reference/regen_toto2_fixtures.py",
        "oracle": "Toto2Model.forecast(inputs, horizon, decode_block_size=options.decode_block), other kwargs default",
        "versions": {
            "python": platform.python_version(),
            "toto-2": v1._pkg_version("toto-2"),
            "dd-unit-scaling": v1._pkg_version("dd-unit-scaling"),
            "unit-scaling": v1._pkg_version("unit-scaling"),
            "torch": torch.__version__,
            "numpy": np.__version__,
            "safetensors": v1._pkg_version("safetensors"),
        },
        "kernels": kernels.describe_setting(),
        "torch_threads": 1,
        "checkpoints": {},
        "cases": {},
    }
    cases = all_cases()
    for config, case_names in CONFIG_CASES.items():
        if only is not None:
            case_names = [c for c in case_names if f"{config}/{c}" in only]
            if not case_names:
                continue
        t0 = time.time()
        ck = os.path.join(work, config)
        cfg, seed = make_checkpoints.CONFIGS[config]
        kind, size = v1.parse_perturb(perturb)
        if kind == "seed":
            seed += 1
        _, digest = make_checkpoints.write_checkpoint(config, ck, seed=seed, shards=SHARDS[config])
        os.makedirs(os.path.join(out_root, config, "cases"), exist_ok=True)
        shutil.copyfile(os.path.join(ck, "config.json"), os.path.join(out_root, config, "config.json"))
        prov["checkpoints"][config] = {
            "seed": seed,
            "shards": SHARDS[config],
            "layers": make_checkpoints.layer_types(cfg),
            "parameters": make_checkpoints.parameter_count(cfg),
            "config.json": v1.sha256_file(os.path.join(ck, "config.json")),
            "weights_sha256": digest,
        }
        model = run_reference.load_model(ck)
        if kind == "weight":
            v1.perturb_weight(model, size)
        for case in case_names:
            req, block = cases[case]
            fed = v1.perturb_request(req, kind if kind == "input" else None, size)
            ref = run_reference.run(model, fed, block)
            name = f"{config}/{case}"
            if perturb is None:
                self_consistency(name, ref)
            doc = {"request": req, "options": {"decode_block": block}, "reference": ref}
            with open(os.path.join(out_root, config, "cases", case + ".json"), "w") as f:
                f.write(v1.dumps(doc))
            prov["cases"][name] = {
                "request_sha256": v1.sha256_bytes(v1.dumps(req).encode()),
                "reference_sha256": v1.sha256_bytes(v1.dumps(ref).encode()),
            }
        shutil.rmtree(ck)
        log(f"toto2 {config}: {len(case_names)} cases in {time.time() - t0:.1f}s")
    if only is None:
        with open(os.path.join(out_root, "provenance.json"), "w") as f:
            f.write(json.dumps(prov, sort_keys=True, indent=2) + "\n")


# τ per quantity class (live_check.py): SAFETY_FACTOR (4) x the worst drift tests/reference/kernel_drift.py measured
# over the kernel settings and two qemu-emulated CPUs, rounded up (tests/reference/kernel_drift.json; worst: knots
# 6.0e-6, scaler 1.1e-7, quantiles 1.3e-5, all native; docs/guide.md "CPUs").
TAUS = {
    "knots": 3e-5,  # the head's raw knots (asinh units)
    "scaler": 5e-7,  # the blocks' scaler loc and scale (series units)
    "quantiles": 6e-5,  # median and quantiles (series units)
}


def compare_reference(a, b, request, taus=TAUS):
    """A Tally of the regenerated reference `a` against the committed `b` of one case (see live_check.py)."""
    t = live_check.Tally(taus)
    if not isinstance(a, dict) or sorted(a) != sorted(b):
        raise v1.Mismatch("reference: keys differ")
    variates = len(b["median"])
    s = [max(abs(blk["scale"][v]) for blk in b["blocks"]) for v in range(variates)]
    sig = [live_check.sigma(row) for row in request["target"]]

    def totoc_series(v, y):  # totoc's own tolerance for the median and quantiles: 1e-4·σ + 1e-6·|ref|
        return 1e-4 * sig[v] + 1e-6 * abs(y)

    for key in sorted(b):
        for path, idx, x, y in live_check.numbers(a[key], b[key], f"reference.{key}"):
            if key == "meta":  # knots and counts: exact
                if x != y:
                    raise v1.Mismatch(f"{path}: {x!r} (regenerated) vs {y!r} (committed)")
            elif key == "median":  # [V][H]
                t.add("quantiles", path, x, y, s[idx[0]], totoc_series(idx[0], y))
            elif key == "quantiles":  # [9][V][H]
                t.add("quantiles", path, x, y, s[idx[1]], totoc_series(idx[1], y))
            elif key == "blocks":
                field = path.split("].", 1)[1].split("[", 1)[0]
                if field == "raw":  # [9][V][P]: totoc holds the knots to 1e-4 + 1e-6·|ref|
                    t.add("knots", path, x, y, 1.0, 1e-4 + 1e-6 * abs(y))
                elif field in ("loc", "scale"):  # [V]: totoc holds them to 1e-6·|ref|
                    t.add("scaler", path, x, y, s[idx[1]], 1e-6 * abs(y))
                else:
                    raise v1.Mismatch(f"{path}: a number outside the compared outputs")
            else:
                raise v1.Mismatch(f"{path}: a number outside the compared outputs")
    return t


def check(committed_root, only=None, perturb=None, report=None):
    """Regenerates and compares; returns (exit code, [failure messages], merged Tally)."""
    failures = []
    total = live_check.Tally(TAUS)
    log(kernels.describe())
    with tempfile.TemporaryDirectory(prefix="totoc-toto2-fixtures-") as tmp:
        new_root = os.path.join(tmp, "fixtures")
        generate(new_root, os.path.join(tmp, "checkpoints"), only, perturb)
        rel_files = set()
        for root_dir in (new_root, committed_root):
            for d, _, files in os.walk(root_dir):
                for f in files:
                    rel_files.add(os.path.relpath(os.path.join(d, f), root_dir))
        # profiles.yaml is written by hand (the test profiles `totoc export` uses on these checkpoints), not by
        # the oracle
        rel_files.discard("profiles.yaml")
        if only is not None:
            rel_files = {r for r in rel_files if r.replace(os.sep + "cases" + os.sep, "/")[: -len(".json")] in only}
        for rel in sorted(rel_files):
            new, old = os.path.join(new_root, rel), os.path.join(committed_root, rel)
            if not os.path.exists(old):
                failures.append(f"{rel}: missing from the committed fixtures")
                continue
            if not os.path.exists(new):
                failures.append(f"{rel}: committed but no longer generated (stale)")
                continue
            with open(new, "rb") as f:
                nb = f.read()
            with open(old, "rb") as f:
                ob = f.read()
            if rel == "provenance.json":
                pn, po = json.loads(nb), json.loads(ob)
                if pn["versions"] != po["versions"]:
                    log(f"note: versions differ: regenerated {pn['versions']} vs committed {po['versions']}")
                if pn["checkpoints"] != po["checkpoints"]:
                    failures.append("provenance.json: checkpoints (config or weights digest) differ")
                for k in sorted(set(pn["cases"]) | set(po["cases"])):
                    if pn["cases"].get(k, {}).get("request_sha256") != po["cases"].get(k, {}).get("request_sha256"):
                        failures.append(f"provenance.json: cases.{k}.request_sha256 differs")
                print(f"{'bit-identical' if nb == ob else 'differs (hashes only)':>14}  toto2/{rel}")
                continue
            if rel.endswith("config.json"):
                print(f"{'bit-identical' if nb == ob else 'DIFFERENT':>14}  toto2/{rel}")
                if nb != ob:
                    failures.append(f"{rel}: config is not byte-identical")
                continue
            cn, co = json.loads(nb), json.loads(ob)
            if v1.dumps(cn["request"]) != v1.dumps(co["request"]) or cn["options"] != co["options"]:
                failures.append(f"{rel}: request or options are not byte-identical")
                print(f"{'DIFFERENT':>14}  toto2/{rel} (request)")
                continue
            live_check.judge(
                f"toto2/{rel}",
                lambda: compare_reference(cn["reference"], co["reference"], co["request"]),
                nb == ob,
                total,
                failures,
            )
    if report:
        live_check.write_report(report, "toto-2", total)
    if failures:
        print("\nTOTO 2.0 FIXTURE CHECK FAILED:", file=sys.stderr)
        for f in failures:
            print("  " + f, file=sys.stderr)
        print("regenerate with tests/reference/regen_toto2_fixtures.sh if the change is intended", file=sys.stderr)
        return 1, failures, total
    print("toto2 fixture check passed")
    return 0, failures, total


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare a fresh regeneration with the committed fixtures")
    ap.add_argument("--out", default=FIXTURES, help="fixture root (default: tests/fixtures/toto2)")
    ap.add_argument("--report", help="--check: also write the worst drift per quantity class as JSON here")
    ap.add_argument("--only", help="--check: only these cases, comma-separated CONFIG/CASE (e.g. tiny/mean_short)")
    a = ap.parse_args(argv)
    t0 = time.time()
    if a.check:
        rc, _, _ = check(a.out, only=a.only and set(a.only.split(",")), report=a.report)
        log(f"toto2 check took {time.time() - t0:.1f}s")
        return rc
    parent = os.path.dirname(os.path.abspath(a.out))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".toto2-fixtures-", dir=parent)
    try:
        generate(os.path.join(tmp, "fixtures"), os.path.join(tmp, "checkpoints"))
        # keep the hand-written test profiles across a regeneration
        kept = os.path.join(a.out, "profiles.yaml")
        if os.path.exists(kept):
            shutil.copyfile(kept, os.path.join(tmp, "fixtures", "profiles.yaml"))
        if os.path.isdir(a.out):
            shutil.rmtree(a.out)
        os.replace(os.path.join(tmp, "fixtures"), a.out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log(f"wrote {a.out} in {time.time() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
