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
thread, every float is a float32 value written with Python's shortest repr, JSON is
written with sorted keys and fixed separators. On the same machine and venv a rerun is
bit-for-bit identical.

--check: checkpoints and requests must be byte-identical; reference outputs must match
within |a - b| <= 1e-6 * (1 + |b|) (a different CPU's BLAS may change the last bits);
prints per file whether it is bit-identical and the max difference; exits 1 naming the
file and field on any mismatch.
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
import make_checkpoints  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
FIXTURES = os.path.join(REPO, "tests", "fixtures")
RTOL = 1e-6
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


def generate(out_root):
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
        "torch_threads": 1,
        "checkpoints": {},
        "cases": {},
    }
    for config, case_names in CONFIG_CASES.items():
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
        cases = cases_for(config)
        assert set(case_names) <= set(cases), f"{config}: unknown case in {case_names}"
        os.makedirs(os.path.join(out_root, config, "cases"), exist_ok=True)
        for case in case_names:
            req = cases[case]
            ref = run_reference.run(model, req)
            name = f"{config}/{case}"
            self_consistency(name, req, ref)
            with open(os.path.join(out_root, config, "cases", case + ".json"), "w") as f:
                f.write(dumps({"request": req, "reference": ref}))
            prov["cases"][name] = {
                "request_sha256": sha256_bytes(dumps(req).encode()),
                "reference_sha256": sha256_bytes(dumps(ref).encode()),
            }
        log(f"{config}: {len(case_names)} cases in {time.time() - t0:.1f}s")
    with open(os.path.join(out_root, "provenance.json"), "w") as f:
        f.write(json.dumps(prov, sort_keys=True, indent=2) + "\n")


def _pkg_version(name):
    from importlib.metadata import version

    return version(name)


# ----------------------------------------------------------------------------- check


class Mismatch(Exception):
    pass


def compare(a, b, path, stats, slack=0.0, rtol=RTOL):
    """Structural equality; numbers within rtol * (1 + |b| + slack). a = regenerated, b = committed.

    slack is non-zero only for the scaled input patches: (x - loc) / scale of a raw value x
    near a large offset loc carries an f32 rounding error of about eps * |loc| / scale, so a
    different BLAS upstream moves it by more than 1e-6 * (1 + |b|)."""
    if isinstance(b, list) and path.endswith(".steps"):
        if not isinstance(a, list) or len(a) != len(b):
            raise Mismatch(f"{path}: length differs")
        for i, (x, y) in enumerate(zip(a, b)):
            if sorted(x) != sorted(y):
                raise Mismatch(f"{path}[{i}]: keys differ")
            for k in y:
                if k == "patches" and len(x[k]) == len(y[k]):
                    for v, (pa, pb) in enumerate(zip(x[k], y[k])):
                        extra = abs(y["scaler_loc"][v]) / y["scaler_scale"][v]
                        compare(pa, pb, f"{path}[{i}].{k}[{v}]", stats, extra, rtol)
                else:
                    compare(x[k], y[k], f"{path}[{i}].{k}", stats, rtol=rtol)
        return
    if isinstance(b, dict):
        if not isinstance(a, dict) or sorted(a) != sorted(b):
            raise Mismatch(f"{path}: keys differ ({sorted(a) if isinstance(a, dict) else type(a).__name__} vs {sorted(b)})")
        for k in b:
            compare(a[k], b[k], f"{path}.{k}", stats, slack, rtol)
    elif isinstance(b, list):
        if not isinstance(a, list) or len(a) != len(b):
            raise Mismatch(f"{path}: length differs")
        for i, (x, y) in enumerate(zip(a, b)):
            compare(x, y, f"{path}[{i}]", stats, slack, rtol)
    elif isinstance(b, float) or (isinstance(b, int) and not isinstance(b, bool) and isinstance(a, float)):
        if not isinstance(a, (int, float)) or isinstance(a, bool):
            raise Mismatch(f"{path}: type differs")
        d = abs(a - b)
        tol = rtol * (1.0 + abs(b) + slack)
        if d > stats["max_abs"]:
            stats["max_abs"], stats["at_abs"] = d, path
        if d / tol > stats["ratio"]:
            stats["ratio"], stats["at_ratio"] = d / tol, path
        if d > tol:
            raise Mismatch(
                f"{path}: {a!r} (regenerated) vs {b!r} (committed), |diff| {d:.3g} > {rtol:g}*(1+|b|+{slack:.3g})"
            )
    elif a != b or type(a) is not type(b):
        raise Mismatch(f"{path}: {a!r} (regenerated) vs {b!r} (committed)")


def check(committed_root):
    failures = []
    with tempfile.TemporaryDirectory(prefix="totoc-fixtures-") as tmp:
        generate(tmp)
        rel_files = set()
        for root_dir in (tmp, committed_root):
            for d, _, files in os.walk(root_dir):
                for f in files:
                    rel_files.add(os.path.relpath(os.path.join(d, f), root_dir))
        # tests/fixtures/toto2/ belongs to regen_toto2_fixtures.py (the Toto 2.0 oracle) and tests/fixtures/data/ to
        # tests/data/convert.py (public datasets); each checks its own
        rel_files = {r for r in rel_files if not r.startswith(("toto2" + os.sep, "data" + os.sep))}
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
            stats = {"max_abs": 0.0, "at_abs": "-", "ratio": 0.0, "at_ratio": "-"}
            try:
                compare(cn["reference"], co["reference"], "reference", stats)
            except Mismatch as e:
                failures.append(f"{rel}: {e}")
                print(f"{'MISMATCH':>14}  {rel}: {e}")
                continue
            tag = "bit-identical" if nb == ob else "within 1e-6"
            print(
                f"{tag:>14}  {rel}  max|diff| {stats['max_abs']:.3g} at {stats['at_abs']};"
                f" max |diff|/tolerance {stats['ratio']:.3g} at {stats['at_ratio']}"
            )
    if failures:
        print("\nFIXTURE CHECK FAILED:", file=sys.stderr)
        for f in failures:
            print("  " + f, file=sys.stderr)
        print("regenerate with tests/reference/regen_fixtures.sh if the change is intended", file=sys.stderr)
        return 1
    print("fixture check passed")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare a fresh regeneration with the committed fixtures")
    ap.add_argument("--out", default=FIXTURES, help="fixture root (default: tests/fixtures)")
    a = ap.parse_args(argv)
    t0 = time.time()
    if a.check:
        rc = check(a.out)
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
