#!/usr/bin/env python3
"""The toto-ts 0.2.0 eager side of `totoc backtest --reference-checkpoint`: one forecast per window, in a loop,
exactly as a user backtesting with toto-ts would run it (one `TotoForecaster.forecast` call per window, CPU,
float32, model.eval(), torch.no_grad(), use_kv_cache=True).

    backtest_reference.py --checkpoint DIR --requests WINDOWS.jsonl [--threads 2]

WINDOWS.jsonl holds one forecast request per line (docs/formats.md, "Forecast request"): each window's context
up to its cutoff. samples 0/absent = the mean path (deterministic); N > 0 = one batch of N sampled paths
(torch.manual_seed(seed) before each window), whose mean is the point forecast and whose quantiles are
`Forecast.quantile(q)`.

stdout is exactly one JSON object (everything else goes to stderr):
    {"versions": {...}, "threads": N, "seconds": float,      # the forecast calls only, summed
     "window_seconds": [float, ...],                        # one per window
     "forecasts": [{"point": [H floats], "quantiles": {"0.1": [H floats], ...}}, ...]}
"""

import argparse
import contextlib
import json
import os
import platform
import sys
import time
import warnings

warnings.filterwarnings("ignore", message="Using `json`-module for json-handling")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--requests", required=True)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args(argv)
    real_stdout = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):  # keep stdout for the JSON only
        result = run(a.checkpoint, a.requests, a.threads)
    real_stdout.write(json.dumps(result) + "\n")
    real_stdout.flush()
    return 0


def run(checkpoint, requests_path, threads):
    from importlib.metadata import version

    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import run_reference
    from toto.inference.forecaster import TotoForecaster

    torch.set_num_threads(threads)
    model = run_reference.load_model(checkpoint)
    forecaster = TotoForecaster(model.model)
    with open(requests_path) as f:
        requests = [json.loads(line) for line in f if line.strip()]
    forecasts, times = [], []
    for i, request in enumerate(requests):
        inputs = run_reference.build_inputs(request)
        horizon = int(request["horizon"])
        n = int(request.get("samples") or 0)
        torch.manual_seed(int(request.get("seed") or 0))
        t0 = time.perf_counter()
        with torch.no_grad():
            if n:
                fc = forecaster.forecast(
                    inputs, prediction_length=horizon, num_samples=n, samples_per_batch=n, use_kv_cache=True
                )
            else:
                fc = forecaster.forecast(inputs, prediction_length=horizon, num_samples=None, use_kv_cache=True)
        times.append(time.perf_counter() - t0)
        point = fc.mean[0, 0].to(torch.float32).numpy()
        quantiles = {}
        if n:
            for q in request.get("quantiles") or []:
                quantiles[repr(float(q))] = fc.quantile(float(q))[0, 0].to(torch.float32).numpy().tolist()
        forecasts.append({"point": point.tolist(), "quantiles": quantiles})
        if (i + 1) % 50 == 0:
            print(f"toto-ts: {i + 1}/{len(requests)} windows", file=sys.stderr, flush=True)
    return {
        "versions": {"python": platform.python_version(), "torch": torch.__version__, "toto-ts": version("toto-ts")},
        "threads": threads,
        "seconds": sum(times),
        "window_seconds": times,
        "forecasts": forecasts,
    }


if __name__ == "__main__":
    sys.exit(main())
