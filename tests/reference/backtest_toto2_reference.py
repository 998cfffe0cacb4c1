#!/usr/bin/env python3
"""The toto-2 2.0.0 eager side of `totoc backtest --reference-checkpoint` on Toto 2.0 engines: one
`Toto2Model.forecast` call per window, in a loop (CPU, float32, eval, no_grad), with the context prepared as
run_toto2_reference.py prepares it (the departures documented there).

    backtest_toto2_reference.py --checkpoint DIR --requests WINDOWS.jsonl [--threads 2]

stdout is exactly one JSON object (everything else goes to stderr):
    {"versions": {...}, "threads": N, "seconds": float, "window_seconds": [float, ...],
     "forecasts": [{"point": [H floats] (the median), "quantiles": {"0.1": [H floats], ...}}, ...]}
where "quantiles" holds the model's nine knots 0.1 ... 0.9 (deterministic: Toto 2.0 predicts them directly).
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
    with contextlib.redirect_stdout(sys.stderr):
        result = run(a.checkpoint, a.requests, a.threads)
    real_stdout.write(json.dumps(result) + "\n")
    real_stdout.flush()
    return 0


def run(checkpoint, requests_path, threads):
    from importlib.metadata import version

    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import run_toto2_reference as ref

    torch.set_num_threads(threads)
    model = ref.load_model(checkpoint)
    p = model.config.patch_size
    with open(requests_path) as f:
        requests = [json.loads(line) for line in f if line.strip()]
    forecasts, times = [], []
    for request in requests:
        values, observed, _ = ref.prepare_context(request, p)
        v = values.shape[0]
        ids = request.get("id_mask") or [0] * v
        inputs = {
            "target": torch.from_numpy(values)[None],
            "target_mask": torch.from_numpy(observed)[None],
            "series_ids": torch.tensor(ids, dtype=torch.long)[None],
        }
        horizon = int(request["horizon"])
        t0 = time.perf_counter()
        with torch.no_grad():
            q = model.forecast(inputs, horizon)
        times.append(time.perf_counter() - t0)
        q = q[:, 0, 0].to(torch.float32).numpy()  # [9][H]
        forecasts.append(
            {"point": q[4].tolist(), "quantiles": {repr(k): q[i].tolist() for i, k in enumerate(ref.KNOTS)}}
        )
    return {
        "versions": {"python": platform.python_version(), "torch": torch.__version__, "toto-2": version("toto-2")},
        "threads": threads,
        "seconds": sum(times),
        "window_seconds": times,
        "forecasts": forecasts,
    }


if __name__ == "__main__":
    sys.exit(main())
