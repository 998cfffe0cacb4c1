"""Writes the long table of the data benchmark: N series x T hourly points (unique_id, ds, y) as Parquet.

Synthetic (seeded): a daily cycle, a weekly cycle, a random-walk level and noise per series, so every series has
its own scale. Rows are sorted by series, then time, as a database export would give them.

Usage: python make_bench_table.py OUT.parquet [--series 1000] [--points 512]
"""

import argparse

import numpy as np
import pandas as pd


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--series", type=int, default=1000)
    ap.add_argument("--points", type=int, default=512)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    n, t = args.series, args.points
    hours = np.arange(t)
    level = np.cumsum(rng.normal(0, 0.3, (n, t)), axis=1)
    scale = rng.uniform(1, 100, (n, 1))
    y = scale * (
        10
        + np.sin(2 * np.pi * hours / 24) * rng.uniform(0.5, 2, (n, 1))
        + np.sin(2 * np.pi * hours / 168) * rng.uniform(0, 1, (n, 1))
        + level
        + rng.normal(0, 0.2, (n, t))
    )
    ds = pd.date_range("2024-01-01", periods=t, freq="h")
    df = pd.DataFrame(
        {
            "unique_id": np.repeat([f"s{i:04d}" for i in range(n)], t),
            "ds": np.tile(ds, n),
            "y": y.reshape(-1),
        }
    )
    df.to_parquet(args.out, index=False, compression="snappy")
    print(f"{args.out}: {n} series x {t} points")


if __name__ == "__main__":
    main()
