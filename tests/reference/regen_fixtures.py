#!/usr/bin/env python3
"""Regenerates (or checks) the golden fixtures under tests/fixtures/ from toto-ts 0.2.0.

    regen_fixtures.py            # rewrite tests/fixtures/<config>/... and provenance.json
    regen_fixtures.py --check    # regenerate into a temp dir and compare with the committed files
    regen_fixtures.py --out DIR  # write somewhere else

Layout (see tests/reference/README.md for every field):
    tests/fixtures/provenance.json
    tests/fixtures/<config>/checkpoint/{config.json,model.safetensors}
    tests/fixtures/<config>/cases/<case>.json = {"request": {...}, "reference": {...}}

Generation is deterministic: checkpoints come from numpy PCG64 (make_checkpoints.py),
request inputs from numpy PCG64 with a fixed seed per case, toto-ts runs on CPU with one
thread and its kernels pinned to a branch every x86-64 CPU has (kernels.py: MKL's
COMPATIBLE,STRICT reproducibility branch, ATen's default kernels), every float is a float32
value written with Python's shortest repr, JSON is written with sorted keys and fixed
separators. A rerun is bit-for-bit identical on the same machine, and near-bitwise on others.

--check: checkpoints and requests must be byte-identical; every reference number must
satisfy |a - b| <= tau * (unit + |b|) in its own scale (live_check.py: scaled units for
the mixture parameters, the variate's scaler scale for the mean, scaler statistics and
samples; TAUS below from the drift kernel_drift.py measured); prints per file whether it
is bit-identical and its worst |diff|/tolerance; exits 1 naming the file, the JSON path,
the quantity class and |diff|/tolerance of the worst number on any mismatch.
--only CONFIG/CASE,...: check only those cases. test_live_checks.py perturbs a weight, an
input point and the seed and expects this check to fail by >= 10x.
"""

import argparse
import hashlib
import json
import os
import platform
import shutil
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kernels  # noqa: E402

kernels.pin()  # before anything imports torch: MKL and ATen read their kernel settings once
import live_check  # noqa: E402
import make_checkpoints  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
FIXTURES = os.path.join(REPO, "tests", "fixtures")
QUANTILES = [0.1, 0.5, 0.9]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- inputs

# Per-variate shape of a synthetic series: level, trend per step, seasonal amplitude,
# period, noise std. Very different magnitudes on purpose (the scaler must cope).
VARIATES = {
    "kilo": (1000.0, 0.5, 80.0, 24.0, 10.0),  # ~1e3
    "centi": (0.01, 1e-5, 0.003, 12.0, 0.0008),  # ~0.01
    "neg": (-50.0, -0.1, 5.0, 16.0, 2.0),  # negative, ~-50
    "big": (25000.0, 20.0, 1500.0, 48.0, 300.0),  # ~2.5e4
}


def synth(rng, kind, t):
    level, trend, amp, period, noise = VARIATES[kind]
    i = np.arange(t, dtype=np.float64)
    phase = rng.random() * 2.0 * np.pi
    x = level + trend * i + amp * np.sin(2.0 * np.pi * i / period + phase) + noise * rng.standard_normal(t)
    return x.astype(np.float32)


def make_request(seed, kinds, t, horizon, samples=0, id_mask=None, nulls=None, seed_field=0):
    """nulls: {variate: list of time indices} set to null (missing)."""
    rng = np.random.Generator(np.random.PCG64(seed))
    target = []
    for v, kind in enumerate(kinds):
        row = [float(x) for x in synth(rng, kind, t)]
        for j in (nulls or {}).get(v, []):
            row[j] = None
        target.append(row)
    req = {
        "target": target,
        "horizon": horizon,
        "samples": samples,
        "quantiles": QUANTILES if samples else [],
        "seed": seed_field,
    }
    if id_mask is not None:  # absent id_mask = all variates in group 0
        req["id_mask"] = id_mask
    return req


def scattered(seed, t, count, lo):
    rng = np.random.Generator(np.random.PCG64(seed))
    return sorted(int(j) for j in rng.choice(np.arange(lo, t), size=count, replace=False))


def cases_for(config):
    p = make_checkpoints.CONFIGS[config][0]["patch_size"]
    cases = {}
    if p == 16:
        # T=100 -> left pad 12 (padded 112); H=40 -> 3 AR steps (rounded 48)
        cases["mean_1v"] = make_request(11, ["kilo"], 100, 40)
        t = 90  # left pad 6 (padded 96); variate 2 starts with 25 nulls (first patch all missing)
        nulls = {0: scattered(21, t, 4, 0), 1: scattered(22, t, 3, 0), 2: list(range(25)) + [60, 61], 3: [89]}
        cases["mean_4v_groups"] = make_request(12, ["kilo", "centi", "neg", "big"], t, 40, id_mask=[0, 0, 1, 1], nulls=nulls)
        # context shorter than one patch: 7 points -> one patch with 9 pad; two groups
        cases["mean_short"] = make_request(13, ["neg", "kilo"], 7, 20, id_mask=[0, 1])
    else:
        # T=100 -> left pad 28 (padded 128); H=150 -> 3 AR steps (rounded 192)
        cases["mean_1v"] = make_request(31, ["kilo"], 100, 150)
    if config == "tiny64":
        # T=150 -> padded 192; H=130 -> 3 AR steps
        cases["mean_2v"] = make_request(32, ["big", "centi"], 150, 130, id_mask=[0, 0])
    if config == "tiny":
        # exact multiples: no pad, 3 steps
        cases["sampled_256"] = make_request(14, ["centi"], 96, 48, samples=256, seed_field=7)
        cases["sampled_2v"] = make_request(15, ["kilo", "neg"], 64, 20, samples=64, seed_field=11)
    return cases


CONFIG_CASES = {
    "tiny": ["mean_1v", "mean_4v_groups", "mean_short", "sampled_256", "sampled_2v"],
    "tiny_spacefirst": ["mean_1v", "mean_4v_groups", "mean_short"],
    "tiny_alltime": ["mean_1v"],
    "tiny64": ["mean_1v", "mean_2v"],
}

# ----------------------------------------------------------------------------- output


def dumps(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False) + "\n"


def sha256_bytes(b):
    return hashlib.sha256(b).hexdigest()


def sha256_file(path):
    with open(path, "rb") as f:
        return sha256_bytes(f.read())


def self_consistency(name, request, ref):
    """The recorded step parameters must reproduce the recorded mean (and the decode
    patches must be the previous step's mean, scaled by this step's scaler stats)."""
    mean = np.asarray(ref["mean"], dtype=np.float64)  # [V][H]
    v, h = mean.shape
    chunks, mags = [], []
    for s in ref["steps"]:
        w = np.asarray(s["weights"], np.float64)
        loc = np.asarray(s["loc"], np.float64)
        sl = np.asarray(s["scaler_loc"], np.float64)[:, None]
        ss = np.asarray(s["scaler_scale"], np.float64)[:, None]
        z = (w * loc).sum(-1)  # [V][P]
        chunks.append(sl + ss * z)
        mags.append(np.abs(sl) + ss * (w * np.abs(loc)).sum(-1))
        assert np.allclose(w.sum(-1), 1.0, atol=1e-6), f"{name}: weights do not sum to 1"
        assert (np.asarray(s["df"]) > 2.0).all() and (np.asarray(s["scale"]) > 0).all()
    recomputed = np.concatenate(chunks, axis=1)[:, :h]
    mag = np.concatenate(mags, axis=1)[:, :h]
    err = np.abs(recomputed - mean) / (1e-30 + mag)
    assert err.max() <= 1e-6, f"{name}: mean != sum(weights*loc)*scale+loc (max rel {err.max():.3g})"
    p = len(ref["steps"][0]["loc"][0])
    for n, s in enumerate(ref["steps"][1:], start=1):
        x = mean[:, (n - 1) * p : n * p]
        sl = np.asarray(s["scaler_loc"], np.float64)[:, None]
        ss = np.asarray(s["scaler_scale"], np.float64)[:, None]
        got = np.asarray(s["patches"], np.float64)
        want = (x - sl) / ss
        bad = np.abs(got - want) > 1e-6 * (1.0 + (np.abs(x) + np.abs(sl)) / ss)
        assert not bad.any(), f"{name}: step {n} patches != (prev mean - scaler_loc) / scaler_scale"
    # not degenerate: the mean moves and the inputs' magnitudes survive
    assert np.all(np.ptp(mean, axis=1) > 0), f"{name}: constant forecast"
    return float(err.max())


def generate(out_root, only=None, perturb=None):
    """Writes every fixture under out_root; `only` ({"config/case"}) restricts it to those cases (no provenance is
    written then), `perturb` (see `perturbations`) changes the model or the request on purpose."""
    import torch

    import run_reference

    torch.set_num_threads(1)
    os.makedirs(out_root, exist_ok=True)
    prov = {
        "generator": "tests/reference/regen_fixtures.py",
        "versions": {
            "python": platform.python_version(),
            "toto-ts": _pkg_version("toto-ts"),
            "torch": torch.__version__,
            "numpy": np.__version__,
            "safetensors": _pkg_version("safetensors"),
        },
        "kernels": kernels.describe_setting(),
        "torch_threads": 1,
        "checkpoints": {},
        "cases": {},
    }
    for config, case_names in CONFIG_CASES.items():
        if only is not None:
            case_names = [c for c in case_names if f"{config}/{c}" in only]
            if not case_names:
                continue
        t0 = time.time()
        ck = os.path.join(out_root, config, "checkpoint")
        make_checkpoints.write_checkpoint(config, ck)
        prov["checkpoints"][config] = {
            "seed": make_checkpoints.CONFIGS[config][1],
            "layers": "".join(make_checkpoints.layer_types(make_checkpoints.CONFIGS[config][0])),
            "config.json": sha256_file(os.path.join(ck, "config.json")),
            "model.safetensors": sha256_file(os.path.join(ck, "model.safetensors")),
        }
        model = run_reference.load_model(ck)
        kind, size = parse_perturb(perturb)
        if kind == "weight":
            perturb_weight(model, size)
        cases = cases_for(config)
        assert set(case_names) <= set(cases), f"{config}: unknown case in {case_names}"
        os.makedirs(os.path.join(out_root, config, "cases"), exist_ok=True)
        for case in case_names:
            req = cases[case]
            fed = perturb_request(req, kind, size)
            ref = run_reference.run(model, fed)
            name = f"{config}/{case}"
            if perturb is None:
                self_consistency(name, req, ref)
            with open(os.path.join(out_root, config, "cases", case + ".json"), "w") as f:
                f.write(dumps({"request": req, "reference": ref}))
            prov["cases"][name] = {
                "request_sha256": sha256_bytes(dumps(req).encode()),
                "reference_sha256": sha256_bytes(dumps(ref).encode()),
            }
        log(f"{config}: {len(case_names)} cases in {time.time() - t0:.1f}s")
    if only is None:
        with open(os.path.join(out_root, "provenance.json"), "w") as f:
            f.write(json.dumps(prov, sort_keys=True, indent=2) + "\n")


def _pkg_version(name):
    from importlib.metadata import version

    return version(name)


# ----------------------------------------------------------------------------- perturbations (tests of the check)

# What test_live_checks.py changes on purpose ("KIND" or "KIND:SIZE", SIZE default 1e-3); each must fail the check.
PERTURBATIONS = {
    "weight": "the largest-magnitude weight of the perturbed tensor (PERTURBED_WEIGHT) x (1 + SIZE)",
    "input": "the last context point of variate 0 + SIZE x its context sigma",
    "seed": "the sampling seed + 1",
}


def parse_perturb(perturb):
    """(kind, size) of a perturbation "KIND[:SIZE]", or (None, 0) for none."""
    if perturb is None:
        return None, 0.0
    kind, _, size = perturb.partition(":")
    if kind not in PERTURBATIONS:
        raise ValueError(f"unknown perturbation {perturb!r}")
    return kind, float(size or 1e-3)


# check -> the weight tensor test_live_checks.py perturbs: toto-ts's mixture-mean projection (a weight of it moves
# every step's loc directly); toto-2's patch skip projection (the most sensitive tensor of the 4m model to a single
# weight, measured: 1.5e-5 of a raw knot at x (1 + 1e-3), where its transformer layers' weights give 1e-6..5e-6)
PERTURBED_WEIGHT = ("model.output_distribution.loc_proj.weight", "patch_proj.skip_proj.weight")


def perturb_weight(model, size):
    """Multiplies the largest-magnitude weight of the tensor PERTURBED_WEIGHT names (every case runs it) by
    1 + size; returns its name."""
    import torch

    params = dict(model.named_parameters())
    name = next(n for n in PERTURBED_WEIGHT if n in params)
    p = params[name]
    with torch.no_grad():
        flat = p.view(-1)
        i = int(flat.abs().argmax())
        flat[i] *= 1.0 + size
    log(f"perturbed {name}[{i}] x (1 + {size:g})")
    return name


def perturb_request(req, kind, size):
    """The request the model is fed: `req` itself, or a copy changed as perturbation `kind` of `size` says."""
    if kind not in ("input", "seed"):
        return req
    fed = json.loads(json.dumps(req))
    if kind == "input":
        row = fed["target"][0]
        j = max(i for i, x in enumerate(row) if x is not None)
        row[j] = float(np.float32(row[j] + size * live_check.sigma(row)))
    else:
        fed["seed"] = int(fed.get("seed") or 0) + 1
    return fed


# ----------------------------------------------------------------------------- check

Mismatch = live_check.Mismatch

# τ per quantity class (live_check.py): SAFETY_FACTOR (4) x the worst drift tests/reference/kernel_drift.py measured
# over the kernel settings and two qemu-emulated CPUs, rounded up (tests/reference/kernel_drift.json; worst: mixture
# 8.0e-7 under aten-default, scaler 6.0e-8 emulated, mean 1.4e-7 native, samples 4.6e-6 native; docs/guide.md "CPUs").
TAUS = {
    "mixture": 4e-6,  # df/loc/scale/weights of the mixture and the scaled input patches (scaled units)
    "scaler": 3e-7,  # the causal scaler's loc and scale at every step (series units)
    "mean": 6e-7,  # the mean forecast (series units)
    "samples": 2e-5,  # sample paths and their quantiles: heavy-tailed draws amplify the scale's drift
}


def compare_reference(a, b, request, taus=TAUS):
    """A Tally of the regenerated reference `a` against the committed `b` of one case (see live_check.py)."""
    t = live_check.Tally(taus)
    if not isinstance(a, dict) or sorted(a) != sorted(b):
        raise Mismatch("reference: keys differ")
    steps_a, steps_b = a["steps"], b["steps"]
    if len(steps_a) != len(steps_b):
        raise Mismatch("reference.steps: length differs")
    variates = len(b["mean"])
    s = [max(st["scaler_scale"][v] for st in steps_b) for v in range(variates)]
    sig = [live_check.sigma(row) for row in request["target"]]

    def totoc_mean(v, y):  # totoc's own tolerance for the mean and scaler statistics: 1e-4·σ + 1e-6·|ref|
        return 1e-4 * sig[v] + 1e-6 * abs(y)

    for i, (sa, sb) in enumerate(zip(steps_a, steps_b)):
        if sorted(sa) != sorted(sb):
            raise Mismatch(f"reference.steps[{i}]: keys differ")
        for k in sorted(sb):
            for path, idx, x, y in live_check.numbers(sa[k], sb[k], f"reference.steps[{i}].{k}"):
                v = idx[0]
                if k == "patches":
                    t.add("mixture", path, x, y, 1.0 + abs(sb["scaler_loc"][v]) / sb["scaler_scale"][v])
                elif k in ("scaler_loc", "scaler_scale"):
                    t.add("scaler", path, x, y, s[v], totoc_mean(v, y))
                else:  # df, loc, scale, weights: totoc holds them to 1e-4 + 1e-6·|ref|
                    t.add("mixture", path, x, y, 1.0, 1e-4 + 1e-6 * abs(y))
    for key in sorted(b):
        if key == "steps":
            continue
        for path, idx, x, y in live_check.numbers(a[key], b[key], f"reference.{key}"):
            if key == "meta":  # counts: exact
                if x != y:
                    raise Mismatch(f"{path}: {x!r} (regenerated) vs {y!r} (committed)")
            elif key == "mean":
                t.add("mean", path, x, y, s[idx[0]], totoc_mean(idx[0], y))
            elif key == "samples":  # [N][V][H]; totoc checks sampled paths by their distribution
                t.add("samples", path, x, y, s[idx[1]])
            elif key == "quantiles":  # {q: [V][H]}
                t.add("samples", path, x, y, s[idx[0]])
            else:
                raise Mismatch(f"{path}: a number outside the compared outputs")
    return t


def check(committed_root, only=None, perturb=None, report=None):
    """Regenerates and compares; returns (exit code, [failure messages], merged Tally)."""
    failures = []
    total = live_check.Tally(TAUS)
    log(kernels.describe())
    with tempfile.TemporaryDirectory(prefix="totoc-fixtures-") as tmp:
        generate(tmp, only, perturb)
        rel_files = set()
        for root_dir in (tmp, committed_root):
            for d, _, files in os.walk(root_dir):
                for f in files:
                    rel_files.add(os.path.relpath(os.path.join(d, f), root_dir))
        # tests/fixtures/toto2/ belongs to regen_toto2_fixtures.py (the Toto 2.0 oracle), tests/fixtures/kronos/ to
        # regen_kronos_fixtures.py and kronos_inputs.py (Kronos), tests/fixtures/data/ to tests/data/convert.py
        # (public datasets) and tests/fixtures/trained/ to tests/training/ (SHA256SUMS, the corpus check and
        # --verify-training); each checks its own
        owned_elsewhere = tuple(d + os.sep for d in ("toto2", "kronos", "data", "trained"))
        rel_files = {r for r in rel_files if not r.startswith(owned_elsewhere)}
        if only is not None:
            rel_files = {r for r in rel_files if r.replace(os.sep + "cases" + os.sep, "/")[: -len(".json")] in only}
        for rel in sorted(rel_files):
            new, old = os.path.join(tmp, rel), os.path.join(committed_root, rel)
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
                    failures.append("provenance.json: checkpoints differ")
                for k in sorted(set(pn["cases"]) | set(po["cases"])):
                    if pn["cases"].get(k, {}).get("request_sha256") != po["cases"].get(k, {}).get("request_sha256"):
                        failures.append(f"provenance.json: cases.{k}.request_sha256 differs")
                print(f"{'bit-identical' if nb == ob else 'differs (hashes only)':>14}  {rel}")
                continue
            if not rel.endswith(".json") or "/checkpoint/" in rel:
                ok = nb == ob
                print(f"{'bit-identical' if ok else 'DIFFERENT':>14}  {rel}")
                if not ok:
                    failures.append(f"{rel}: checkpoint file is not byte-identical")
                continue
            cn, co = json.loads(nb), json.loads(ob)
            if dumps(cn["request"]) != dumps(co["request"]):
                failures.append(f"{rel}: request is not byte-identical")
                print(f"{'DIFFERENT':>14}  {rel} (request)")
                continue
            live_check.judge(
                rel,
                lambda: compare_reference(cn["reference"], co["reference"], co["request"]),
                nb == ob,
                total,
                failures,
            )
    if report:
        live_check.write_report(report, "toto-ts", total)
    if failures:
        print("\nFIXTURE CHECK FAILED:", file=sys.stderr)
        for f in failures:
            print("  " + f, file=sys.stderr)
        print("regenerate with tests/reference/regen_fixtures.sh if the change is intended", file=sys.stderr)
        return 1, failures, total
    print("fixture check passed")
    return 0, failures, total


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare a fresh regeneration with the committed fixtures")
    ap.add_argument("--out", default=FIXTURES, help="fixture root (default: tests/fixtures)")
    ap.add_argument("--report", help="--check: also write the worst drift per quantity class as JSON here")
    ap.add_argument("--only", help="--check: only these cases, comma-separated CONFIG/CASE (e.g. tiny/mean_short)")
    a = ap.parse_args(argv)
    t0 = time.time()
    if a.check:
        rc, _, _ = check(a.out, only=a.only and set(a.only.split(",")), report=a.report)
        log(f"check took {time.time() - t0:.1f}s")
        return rc
    # write next to the target, then swap in the directories this script owns
    parent = os.path.dirname(os.path.abspath(a.out))
    os.makedirs(a.out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".fixtures-", dir=parent)
    try:
        generate(tmp)
        for name in list(CONFIG_CASES) + ["provenance.json"]:
            dst = os.path.join(a.out, name)
            if os.path.isdir(dst):
                shutil.rmtree(dst)
            os.replace(os.path.join(tmp, name), dst)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log(f"wrote {a.out} in {time.time() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
