#!/usr/bin/env python3
"""The Python package's benchmarks, in one invocation (not a test): run by scripts/bench-python.sh, which makes
the checkpoints and engines and this venv (the compat venv: torch, toto-ts, toto-2 and the totoc wheel).

1. Per-call overhead of the binding: `Engine.forecast` timed from Python against the engine's own calls
   inside it (`Engine._native.last_engine_seconds`), on the tiny engine and on the base-size engine; also the
   toto-ts drop-in's call against the same engine time.
2. The toto-ts drop-in (`totoc.compat.toto_ts.TotoForecaster`) against toto-ts eager (`TotoForecaster` of toto-ts
   0.2.0 on the same checkpoint), one series of 512 points: mean H=336, 64 samples H=336, 256 samples H=64.
3. The toto-2 drop-in (`totoc.compat.toto2.Toto2Model`) against toto-2 eager (22m): one series of 512 points
   H=336, and 1,000 series x 512 points H=336 (toto-2 in calls of 512 series, as its leaderboard runs it; the
   drop-in in one call).

Medians of --reps timed calls after one untimed warm-up (the 1,000-series case: one timed call). Prints the CPU,
the thread count and a Markdown table on stdout.

    bench_python.py --tiny-engine E --base-engine E --base-checkpoint C --toto2-engine E --toto2-checkpoint C
                    [--reps 5] [--eager-reps 3] [--threads 2]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
import warnings

warnings.filterwarnings("ignore", message=".*orjson.*")

import numpy as np  # noqa: E402
import torch  # noqa: E402

import totoc  # noqa: E402

CONTEXT = 512


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def cpu() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        model = platform.processor() or "unknown CPU"
    return f"{model}, {os.cpu_count()} logical CPUs, load average {os.getloadavg()[0]:.2f}"


def series(rng: np.random.Generator, n: int, t: int = CONTEXT) -> np.ndarray:
    """`[n, 1, t]` float32: a daily-ish cycle plus a random walk plus noise."""
    steps = np.arange(t)
    out = 100 + 10 * np.sin(2 * np.pi * steps / 24)[None] + np.cumsum(rng.normal(size=(n, t)), axis=1)
    return (out + rng.normal(scale=0.5, size=(n, t))).astype(np.float32)[:, None, :]


def median_time(fn, reps: int) -> tuple[float, list[float]]:
    fn()  # warm-up: loads the buckets, allocates
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times


def overhead(eng: totoc.Engine, name: str, horizon: int, reps: int, rows: list) -> None:
    """Engine.forecast from Python against the engine calls inside it, per call."""
    from totoc.compat.toto_ts import MaskedTimeseries, TotoForecaster

    # a context the engine holds whole (the tiny engine: 256 points), so no call is truncated
    y = series(np.random.default_rng(1), 1, min(CONTEXT, eng.info["max_context"]))[0]
    drop, inputs = TotoForecaster(eng), toto_ts_inputs(y, MaskedTimeseries)
    for label, call in (
        ("Engine.forecast", lambda: eng.forecast(y, horizon)),
        ("toto-ts drop-in", lambda: drop.forecast(inputs, horizon)),
    ):
        call()
        total, native = [], []
        for _ in range(reps):
            t0 = time.perf_counter()
            call()
            total.append(time.perf_counter() - t0)
            native.append(eng._native.last_engine_seconds)
        # per call: the Python-side time is the call's time less that call's engine time
        extra = statistics.median([t - n for t, n in zip(total, native)])
        med_native = statistics.median(native)
        rows.append(
            (
                f"{name}: {label}, mean H={horizon}",
                f"{statistics.median(total) * 1e3:.3f} ms",
                f"{med_native * 1e3:.3f} ms",
                f"{extra * 1e6:.0f} µs ({100 * extra / med_native:.2f}%)",
            )
        )
        log(rows[-1])


def toto_ts_inputs(y: np.ndarray, cls):
    return cls(
        series=torch.from_numpy(y),
        padding_mask=torch.ones(y.shape, dtype=torch.bool),
        id_mask=torch.zeros(y.shape, dtype=torch.int32),
        timestamp_seconds=torch.zeros(y.shape, dtype=torch.int64),
        time_interval_seconds=torch.full(y.shape[:1], 60, dtype=torch.int64),
    )


def toto_ts_section(eng: totoc.Engine, checkpoint: str, reps: int, eager_reps: int, rows: list) -> None:
    from toto.data.util.dataset import MaskedTimeseries
    from toto.inference.forecaster import TotoForecaster as Eager
    from toto.model.toto import Toto

    from totoc.compat.toto_ts import TotoForecaster

    model = Toto.load_from_checkpoint(checkpoint, map_location="cpu", strict=True).to(torch.float32).eval()
    eager, drop = Eager(model.model), TotoForecaster(eng)
    inputs = toto_ts_inputs(series(np.random.default_rng(2), 1)[0], MaskedTimeseries)
    for label, h, n in (("mean, H=336", 336, None), ("64 samples, H=336", 336, 64), ("256 samples, H=64", 64, 256)):
        kw = {"num_samples": n, "samples_per_batch": n or 10}
        ours, _ = median_time(lambda: drop.forecast(inputs, h, **kw), reps)
        with torch.no_grad():
            theirs, _ = median_time(lambda: eager.forecast(inputs, h, **kw), eager_reps)
        rows.append((f"toto-ts (base): {label}", f"{ours * 1e3:.1f} ms", f"{theirs * 1e3:.1f} ms", f"{theirs / ours:.1f}×"))
        log(rows[-1])


def toto2_section(eng: totoc.Engine, checkpoint: str, reps: int, eager_reps: int, n_series: int, rows: list) -> None:
    from toto2 import Toto2Model as Eager

    from totoc.compat.toto2 import Toto2Model

    eager, drop = Eager.from_pretrained(checkpoint).eval(), Toto2Model(eng)

    def inputs(y):
        return {
            "target": torch.from_numpy(y),
            "target_mask": torch.ones(y.shape, dtype=torch.bool),
            "series_ids": torch.zeros(y.shape[:-1], dtype=torch.long),
        }

    one = inputs(series(np.random.default_rng(3), 1))
    ours, _ = median_time(lambda: drop.forecast(one, 336), reps)
    with torch.no_grad():
        theirs, _ = median_time(lambda: eager.forecast(one, 336), eager_reps)
    rows.append(("toto-2 (22m): 1 series, H=336", f"{ours * 1e3:.1f} ms", f"{theirs * 1e3:.1f} ms", f"{theirs / ours:.1f}×"))
    log(rows[-1])
    many = series(np.random.default_rng(4), n_series)
    drop.forecast(inputs(many[:16]), 336)  # warm-up
    t0 = time.perf_counter()
    drop.forecast(inputs(many), 336)
    ours = time.perf_counter() - t0
    with torch.no_grad():
        eager.forecast(inputs(many[:16]), 336)
        t0 = time.perf_counter()
        for start in range(0, n_series, 512):
            eager.forecast(inputs(many[start : start + 512]), 336)
        theirs = time.perf_counter() - t0
    rows.append(
        (
            f"toto-2 (22m): {n_series:,} series, H=336",
            f"{ours:.2f} s ({n_series / ours:.0f} series/s)",
            f"{theirs:.2f} s ({n_series / theirs:.0f} series/s)",
            f"{theirs / ours:.1f}×",
        )
    )
    log(rows[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiny-engine", required=True)
    ap.add_argument("--base-engine", required=True)
    ap.add_argument("--base-checkpoint", required=True)
    ap.add_argument("--toto2-engine", required=True)
    ap.add_argument("--toto2-checkpoint", required=True)
    ap.add_argument("--reps", type=int, default=5, help="timed calls of totoc per case (median)")
    ap.add_argument("--eager-reps", type=int, default=3, help="timed calls of toto-ts / toto-2 eager per case")
    ap.add_argument("--overhead-reps", type=int, default=200, help="timed calls per overhead case on tiny")
    ap.add_argument("--series", type=int, default=1000, help="series of the toto-2 throughput case")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"CPU: {cpu()}; {args.threads} threads (ONNX Runtime and torch); totoc {totoc.__version__}, torch "
          f"{torch.__version__}; reps: totoc {args.reps}, eager {args.eager_reps}, overhead (tiny) {args.overhead_reps}")
    tiny = totoc.Engine(args.tiny_engine, threads=args.threads)
    base = totoc.Engine(args.base_engine)
    t2 = totoc.Engine(args.toto2_engine)

    over: list = []
    overhead(tiny, "tiny", 64, args.overhead_reps, over)
    overhead(base, "base", 336, args.reps, over)
    print("\n| per call | Python call | engine calls inside it | Python-side time (share of the engine's) |")
    print("|---|---|---|---|")
    for r in over:
        print("| " + " | ".join(r) + " |")
    sys.stdout.flush()

    rows: list = []
    toto_ts_section(base, args.base_checkpoint, args.reps, args.eager_reps, rows)
    toto2_section(t2, args.toto2_checkpoint, args.reps, args.eager_reps, args.series, rows)
    print("\n| workload | totoc drop-in | eager (toto-ts / toto-2) | speed-up |")
    print("|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
