#!/usr/bin/env python3
"""Times toto-ts 0.2.0 eager inference on CPU: the baseline `totoc bench` compares against.

    bench_reference.py --checkpoint DIR [--runs 5] [--threads 2] [--cases a,b] [--device cpu|cuda]

One series x 512 points (seeded synthetic data; 8 such series in one call for batch8_*), float32,
model.eval(), torch.no_grad(),
`TotoForecaster.forecast(..., use_kv_cache=True)`, samples_per_batch = num_samples
(one sample batch), one untimed warm-up per case, then --runs timed runs. With --device cuda (the GPU run,
scripts/gpu-device.sh) the model and inputs live on the GPU and each run ends with torch.cuda.synchronize().

stdout is exactly one JSON object (everything else goes to stderr):
    {"checkpoint": DIR, "threads": 2, "runs": 5, "context_len": 512, "device": "cpu" or "cuda (GPU name)",
     "versions": {"python", "torch", "toto-ts"},
     "cases": {NAME: {"horizon": H, "num_samples": N or null,
                      "median_ms": float, "min_ms": float, "runs_ms": [float, ...]}},
     "peak_rss_mb": float,            # resource.getrusage(RUSAGE_SELF).ru_maxrss at the end
     "rss_after_load_mb": float,      # VmRSS after import + model load (+ its tensor check)
     "peak_rss_cases_mb": float}      # VmHWM, reset after the load: the peak while the cases ran
Note: on Linux the VmHWM reset (/proc/self/clear_refs) also resets ru_maxrss, so both peaks
then cover the cases only (the transient checkpoint-loading peak is excluded).
Cases: mean_h336, samples256_h64, samples64_h336, mean_h64, batch8_mean_h336.
"""

import argparse
import contextlib
import gc
import json
import os
import platform
import resource
import statistics
import sys
import time
import warnings

warnings.filterwarnings("ignore", message="Using `json`-module for json-handling")

CASES = {
    "mean_h336": (336, None),
    "samples256_h64": (64, 256),
    "samples64_h336": (336, 64),
    "mean_h64": (64, None),
    "batch8_mean_h336": (336, None),
}
BATCH = {"batch8_mean_h336": 8}
CONTEXT = 512


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma list of {', '.join(CASES)}")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    a = ap.parse_args(argv)
    names = [c for c in a.cases.split(",") if c]
    for c in names:
        if c not in CASES:
            ap.error(f"unknown case {c!r}")
    if a.runs < 1:
        ap.error("--runs must be >= 1")

    real_stdout = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):  # keep stdout for the JSON only
        result = bench(a.checkpoint, names, a.runs, a.threads, a.device)
    real_stdout.write(json.dumps(result, sort_keys=True) + "\n")
    real_stdout.flush()
    return 0


def proc_status_mb(field):
    """VmRSS / VmHWM of this process from /proc/self/status, in MiB (None if unavailable)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return round(int(line.split()[1]) / 1024.0, 1)
    except OSError:
        pass
    return None


def reset_peak_rss():
    """Linux >= 4.0: writing 5 to /proc/self/clear_refs resets VmHWM to the current RSS."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def bench(checkpoint, names, runs, threads, device="cpu"):
    from importlib.metadata import version

    import numpy as np
    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import run_reference
    from toto.data.util.dataset import MaskedTimeseries
    from toto.inference.forecaster import TotoForecaster

    torch.set_num_threads(threads)
    model = run_reference.load_model(checkpoint).to(device)
    forecaster = TotoForecaster(model.model)

    rng = np.random.Generator(np.random.PCG64(512))
    i = np.arange(CONTEXT)
    x = 1000.0 + 0.5 * i + 80.0 * np.sin(2 * np.pi * i / 24.0) + 10.0 * rng.standard_normal(CONTEXT)
    series = torch.tensor(x, dtype=torch.float32)[None, :]

    def synchronize():
        if device == "cuda":
            torch.cuda.synchronize()

    def masked(batch):
        # `batch` series, each its own batch row (variates [B, 1, T]), the first one the series above
        if batch == 1:
            s = series
        else:
            noise = rng.standard_normal((batch - 1, CONTEXT))
            s = torch.cat([series, torch.tensor(x + 10.0 * noise, dtype=torch.float32)])[:, None, :]
        s = s.to(device)
        return MaskedTimeseries(
            series=s,
            padding_mask=torch.ones_like(s, dtype=torch.bool),
            id_mask=torch.zeros_like(s, dtype=torch.int32),
            timestamp_seconds=torch.zeros_like(s, dtype=torch.int64),
            time_interval_seconds=torch.full(s.shape[:-1], 60, dtype=torch.int64, device=device),
        )

    gc.collect()
    rss_loaded = proc_status_mb("VmRSS")
    hwm_reset = reset_peak_rss()
    cases = {}
    for name in names:
        horizon, n = CASES[name]
        inputs = masked(BATCH.get(name, 1))

        def once():
            torch.manual_seed(0)
            t0 = time.perf_counter()
            with torch.no_grad():
                fc = forecaster.forecast(
                    inputs,
                    prediction_length=horizon,
                    num_samples=n,
                    samples_per_batch=n if n else 1,
                    use_kv_cache=True,
                )
            synchronize()
            ms = (time.perf_counter() - t0) * 1e3
            assert torch.isfinite(fc.mean).all()
            return ms

        log(f"{name}: warm-up")
        once()
        times = [once() for _ in range(runs)]
        log(f"{name}: median {statistics.median(times):.1f} ms, min {min(times):.1f} ms")
        cases[name] = {
            "horizon": horizon,
            "num_samples": n,
            "series": BATCH.get(name, 1),
            "median_ms": round(statistics.median(times), 3),
            "min_ms": round(min(times), 3),
            "runs_ms": [round(t, 3) for t in times],
        }
    return {
        "checkpoint": os.path.abspath(checkpoint),
        "threads": threads,
        "runs": runs,
        "context_len": CONTEXT,
        "device": device if device == "cpu" else f"cuda ({torch.cuda.get_device_name(0)})",
        "versions": {"python": platform.python_version(), "torch": torch.__version__, "toto-ts": version("toto-ts")},
        "cases": cases,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
        "rss_after_load_mb": rss_loaded,
        # peak RSS (VmHWM) while running the cases only, or null where it cannot be reset
        "peak_rss_cases_mb": proc_status_mb("VmHWM") if hwm_reset else None,
    }


if __name__ == "__main__":
    sys.exit(main())
