#!/usr/bin/env python3
"""Upstream's sampled paths of the Kronos trained here, for the drop-in's distribution test
(python/tests/compat/test_kronos.py, `test_sampled_paths_follow_upstreams_on_the_trained_model`).

    make_kronos_paths.py            # (reference venv) rewrite fixtures/kronos-1m-aapl_sampled.paths.*, ~1 min
    make_kronos_paths.py --check    # regenerate and compare with the committed file

The request is the trained model's `aapl_sampled` golden case (tests/fixtures/trained/kronos-1m-cases: AAPL held-out
daily candles, 64 + 8, max_context 96, T 1, top_p 0.9, seed 7). Its 1,000 paths come from one upstream eval-mode
`predict(sample_count=1000)` call after `torch.manual_seed(7)`, through the reference runner
(tests/reference/run_kronos_reference.py `run_paths`: the strict loader, eval mode, the recording hooks with their
bitwise self-checks) under the pinned kernels (tests/reference/kernels.py), one torch thread: the de-normalised rows
of each path, F32 [1000, 8, 6] (`series.0.paths`, columns open … amount), as the Kronos fixtures'
`.paths.safetensors`.
The randomly-weighted fixture models (tests/fixtures/kronos) have nearly flat logits, so a KS test on their paths
cannot tell T 0.7 from T 1; the trained model's can (the test's docstring gives the figures).

`kronos-1m-aapl_sampled.paths.json` records what made the file (the checkpoint's and the request's sha256, versions,
kernels) and the file's sha256; the test checks both against the files it reads. `--check` allows up to 1% of the
paths to differ beyond the rows' tolerance (a path's tokens may flip on other kernels: no margins are enforced over
1,000 random paths), as `regen_kronos_fixtures.py --check --paths` does.
"""

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(REPO, "tests", "reference"))
import kernels  # noqa: E402

kernels.pin()  # before torch is imported
import regen_fixtures as v1  # noqa: E402  (dumps, hashing)

CHECKPOINT = os.path.join(REPO, "tests", "fixtures", "trained", "kronos-1m")
CASE = os.path.join(REPO, "tests", "fixtures", "trained", "kronos-1m-cases", "aapl_sampled.json")
OUT = os.path.join(HERE, "fixtures", "kronos-1m-aapl_sampled.paths")
PATHS = 1000
# The rows' tolerance of the Kronos fixture check (regen_kronos_fixtures.TAUS["rows"]): |a − b| ≤ τ·(σ + 1e-5).
ROWS_TAU = 9e-7


def generate():
    import torch

    import run_kronos_reference as runner

    torch.set_num_threads(1)
    with open(CASE) as f:
        case = json.load(f)
    (req,) = case["requests"]
    model, tokenizer = runner.load(os.path.join(CHECKPOINT, "predictor"), os.path.join(CHECKPOINT, "tokenizer"))
    t0 = time.time()
    paths = runner.run_paths(model, tokenizer, req, PATHS)
    std = np.asarray(case["reference"]["series"][0]["stats"]["std"], np.float64)
    return req, paths, std, time.time() - t0


def provenance(req, sha, seconds):
    import pandas
    import safetensors
    import torch

    files = [f"{p}/{f}" for p in ("predictor", "tokenizer") for f in ("config.json", "model.safetensors")]
    return {
        "generator": "python/tests/compat/make_kronos_paths.py",
        "oracle": "kronos-finance 0.1.5 KronosPredictor.predict(sample_count=1000), eval mode, strict load, CPU, "
        "torch.manual_seed(request seed)",
        "case": "tests/fixtures/trained/kronos-1m-cases/aapl_sampled.json",
        "request_sha256": v1.sha256_bytes(v1.dumps(req).encode()),
        "checkpoint": {f: v1.sha256_file(os.path.join(CHECKPOINT, f)) for f in files},
        "paths": PATHS,
        "paths_sha256": sha,
        "seconds": round(seconds, 1),
        "kernels": kernels.describe_setting(),
        "torch_threads": 1,
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "numpy": np.__version__,
            "pandas": pandas.__version__,
            "safetensors": safetensors.__version__,
        },
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="regenerate and compare with the committed file")
    a = ap.parse_args(argv)
    from safetensors.numpy import load_file, save_file

    req, paths, std, seconds = generate()
    if a.check:
        committed = load_file(OUT + ".safetensors")["series.0.paths"]
        assert committed.shape == paths.shape, (committed.shape, paths.shape)
        ratio = np.abs(paths.astype(np.float64) - committed) / (ROWS_TAU * (std + 1e-5))
        off = int((ratio.reshape(PATHS, -1).max(axis=1) > 1).sum())
        print(f"{PATHS} upstream paths regenerated in {seconds:.1f} s: {off} beyond the rows' tolerance "
              f"(at most {PATHS // 100} may be)")
        return 0 if off <= PATHS // 100 else 1
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file({"series.0.paths": paths}, OUT + ".safetensors")
    prov = provenance(req, v1.sha256_file(OUT + ".safetensors"), seconds)
    with open(OUT + ".json", "w") as f:
        f.write(json.dumps(prov, sort_keys=True, indent=2) + "\n")
    print(f"wrote {OUT}.safetensors ({PATHS} paths, {seconds:.1f} s) and its provenance")
    return 0


if __name__ == "__main__":
    sys.exit(main())
