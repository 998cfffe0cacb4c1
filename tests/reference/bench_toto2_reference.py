#!/usr/bin/env python3
"""Times toto-2 2.0.0 eager inference on CPU: the baseline `totoc bench` compares Toto 2.0 engines with.

    bench_toto2_reference.py --checkpoint DIR [--runs 5] [--threads 2] [--cases a,b] [--series 1000]

`Toto2Model.forecast({"target", "target_mask", "series_ids"}, horizon=336)` with its defaults (single pass,
has_missing_values=True), float32, eval(), torch.no_grad(), on seeded synthetic series of 512 points:
* `single_h336`: one series, one call; one untimed warm-up, then --runs timed runs (median, min);
* `throughput_h336`: --series series in calls of batch_size 512 (how the public leaderboard runs toto-2), timed
  once after a warm-up call; reported as series/s.

stdout is exactly one JSON object (everything else goes to stderr):
    {"checkpoint": DIR, "threads": 2, "runs": 5, "context_len": 512, "horizon": 336,
     "versions": {"python", "torch", "toto-2"},
     "cases": {"single_h336": {"median_ms", "min_ms", "runs_ms"},
               "throughput_h336": {"series", "batch_size", "seconds", "series_per_s"}},
     "peak_rss_mb": float}
"""

import argparse
import contextlib
import json
import os
import platform
import resource
import statistics
import sys
import time
import warnings

warnings.filterwarnings("ignore", message="Using `json`-module for json-handling")

CONTEXT = 512
HORIZON = 336
BATCH = 512
CASES = ["single_h336", "throughput_h336"]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--series", type=int, default=1000, help="series of the throughput case")
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma list of {', '.join(CASES)}")
    a = ap.parse_args(argv)
    names = [c for c in a.cases.split(",") if c]
    for c in names:
        if c not in CASES:
            ap.error(f"unknown case {c!r}")
    if a.runs < 1 or a.series < 1:
        ap.error("--runs and --series must be >= 1")
    real_stdout = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):  # keep stdout for the JSON only
        result = bench(a.checkpoint, names, a.runs, a.threads, a.series)
    real_stdout.write(json.dumps(result, sort_keys=True) + "\n")
    real_stdout.flush()
    return 0


def series_batch(rng, np, count):
    """`count` daily-seasonal series with trend and noise, [count, 1, CONTEXT] float32."""
    i = np.arange(CONTEXT)
    base = 1000.0 + 0.5 * i + 80.0 * np.sin(2 * np.pi * i / 24.0)
    noise = 10.0 * rng.standard_normal((count, CONTEXT))
    return (base[None, :] + noise).astype(np.float32)[:, None, :]


def bench(checkpoint, names, runs, threads, n_series):
    from importlib.metadata import version

    import numpy as np
    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import run_toto2_reference

    torch.set_num_threads(threads)
    model = run_toto2_reference.load_model(checkpoint)
    rng = np.random.Generator(np.random.PCG64(512))

    def call(x):
        t = torch.from_numpy(x)
        inputs = {
            "target": t,
            "target_mask": torch.ones_like(t, dtype=torch.bool),
            "series_ids": torch.zeros(t.shape[:-1], dtype=torch.long),
        }
        with torch.no_grad():
            q = model.forecast(inputs, HORIZON)
        assert torch.isfinite(q).all()
        return q

    cases = {}
    if "single_h336" in names:
        x = series_batch(rng, np, 1)
        call(x)
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            call(x)
            times.append((time.perf_counter() - t0) * 1e3)
        log(f"single_h336: median {statistics.median(times):.1f} ms, min {min(times):.1f} ms")
        cases["single_h336"] = {
            "median_ms": round(statistics.median(times), 3),
            "min_ms": round(min(times), 3),
            "runs_ms": [round(t, 3) for t in times],
        }
    if "throughput_h336" in names:
        x = series_batch(rng, np, n_series)
        call(x[: min(BATCH, n_series)])  # warm-up at the batch size
        t0 = time.perf_counter()
        for start in range(0, n_series, BATCH):
            call(x[start : start + BATCH])
        seconds = time.perf_counter() - t0
        log(f"throughput_h336: {n_series} series in {seconds:.2f} s, {n_series / seconds:.1f} series/s")
        cases["throughput_h336"] = {
            "series": n_series,
            "batch_size": BATCH,
            "seconds": round(seconds, 3),
            "series_per_s": round(n_series / seconds, 3),
        }
    return {
        "checkpoint": os.path.abspath(checkpoint),
        "threads": threads,
        "runs": runs,
        "context_len": CONTEXT,
        "horizon": HORIZON,
        "versions": {"python": platform.python_version(), "torch": torch.__version__, "toto-2": version("toto-2")},
        "cases": cases,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
    }


if __name__ == "__main__":
    sys.exit(main())
