#!/usr/bin/env python3
"""`Engine.predict_df` against `totoc forecast` on one table: series/s of each, medians over runs.

The table: N series × T points (hourly timestamps, a sine with noise), the same for both. `totoc forecast` reads
it from a Parquet file and writes its forecasts to one (its own summary line's series/s: reading, forecasting
and writing, without the engine load); `predict_df` takes it as a pandas DataFrame and returns one (the call's
wall time; the engine loaded once before). Both run the same Rust code from the rows to the output table with the
same ONNX Runtime threads, so the goal is predict_df within 5% of the CLI. Runs alternate (CLI, Python, CLI, ...)
so drift on a shared machine hits both.

Run (the package installed in the venv, as scripts/test.sh installs it; a tiny engine is built when none is given):
    python scripts/bench-python.py [--engine DIR] [--series 1000] [--points 512] [--horizon 64] [--runs 5]
Environment: TOTOC_BIN (default target/release/totoc, else target/debug/totoc), TOTOC_ORT_LIB.

A separate script from the drop-in benchmarks (python/totoc/compat), so each can change on its own.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} logical CPUs"
    except OSError:
        pass
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} logical CPUs"


def totoc_bin() -> Path:
    if os.environ.get("TOTOC_BIN"):
        return Path(os.environ["TOTOC_BIN"])
    target = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")
    for profile in ["release", "debug"]:
        if (target / profile / "totoc").is_file():
            return target / profile / "totoc"
    sys.exit(f"no totoc binary under {target}: build one (cargo build --release) or set TOTOC_BIN")


def table(series: int, points: int):
    import pandas as pd

    rng = np.random.default_rng(0)
    t = np.arange(points)
    y = 10 + np.sin(t[None, :] / (4 + np.arange(series)[:, None] % 17)) + 0.1 * rng.standard_normal((series, points))
    return pd.DataFrame(
        {
            "unique_id": np.repeat([f"s{i}" for i in range(series)], points),
            "ds": np.tile(pd.date_range("2024-01-01", periods=points, freq="h").values, series),
            "y": y.ravel(),
        }
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", type=Path, help="an engine bundle (default: the tiny engine, built here)")
    ap.add_argument("--series", type=int, default=1000)
    ap.add_argument("--points", type=int, default=512)
    ap.add_argument("--horizon", type=int, default=64)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None, help="ONNX Runtime threads (default: the engine's)")
    a = ap.parse_args()

    import pyarrow as pa
    import pyarrow.parquet as pq
    import totoc

    bin_ = totoc_bin()
    work = Path(tempfile.mkdtemp(prefix="bench-python-"))
    engine_dir = a.engine
    if engine_dir is None:
        engine_dir = work / "engine"
        for args in (
            ["export", "--checkpoint", str(REPO / "tests/fixtures/tiny/checkpoint"), "--config",
             str(REPO / "configs/tiny.yaml"), "--out", str(work / "bundle")],
            ["build-engine", "--artifacts", str(work / "bundle"), "--out", str(engine_dir)],
        ):
            subprocess.run([str(bin_), *args], check=True, capture_output=True)
    eng = totoc.Engine(engine_dir, threads=a.threads)
    lib = totoc.runtime()["library"]
    df = table(a.series, a.points)
    inp, out = work / "in.parquet", work / "out.parquet"
    pq.write_table(pa.table(df), inp)
    cli = [str(bin_), "forecast", "--engine", str(engine_dir), "--input", str(inp), "--output", str(out),
           "--horizon", str(a.horizon), "--ort-lib", lib]
    if a.threads:
        cli += ["--threads", str(a.threads)]

    eng.predict_df(df, a.horizon)  # the first call loads the shape buckets; the CLI loads them in every run
    cli_rates, py_rates = [], []
    for _ in range(a.runs):
        p = subprocess.run(cli, check=True, capture_output=True, text=True)
        m = re.search(r"forecast (\d+) series .*?: ([\d.]+) series/s", p.stderr)
        if not m:
            sys.exit(f"no summary line in totoc forecast's stderr:\n{p.stderr}")
        cli_rates.append(float(m.group(2)))
        t = time.perf_counter()
        got = eng.predict_df(df, a.horizon)
        py_rates.append(a.series / (time.perf_counter() - t))
        assert len(got) == a.series * a.horizon
    c, p_ = statistics.median(cli_rates), statistics.median(py_rates)
    print(f"cpu: {cpu()}")
    print(f"engine: {engine_dir} ({eng.info['family']}, {eng.info['engine']}, max_context {eng.info['max_context']})")
    print(f"table: {a.series} series x {a.points} points, horizon {a.horizon}; {a.runs} runs, medians")
    print(f"totoc forecast (Parquet in/out): {c:9.1f} series/s  runs {[round(x, 1) for x in cli_rates]}")
    print(f"predict_df (pandas in/out):      {p_:9.1f} series/s  runs {[round(x, 1) for x in py_rates]}")
    print(f"predict_df / totoc forecast: {p_ / c:.3f} ({100 * (p_ / c - 1):+.1f}%)")


if __name__ == "__main__":
    main()
