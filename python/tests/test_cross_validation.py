"""`Engine.cross_validation` against `totoc backtest` on the same table: the same windows, actual values and
forecasts (the CLI's table holds them as text and float64; Python's forecast columns are the same float64),
Nixtla's column names, the series' calendars, and the CLI's errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import THREADS, run_totoc
from test_table import long_table


def cli_backtest(engine_dir, ort_lib, df: pd.DataFrame, tmp, *args: str, ok: bool = True):
    inp, out = tmp / "in.parquet", tmp / "cv.parquet"
    pq.write_table(pa.table(df), inp)
    p = run_totoc(
        "backtest", "--engine", f"totoc={engine_dir}", "--input", str(inp), "--output", str(out),
        "--threads", str(THREADS), "--ort-lib", ort_lib, *args, ok=ok,
    )
    return pq.read_table(out) if ok else p


def test_cross_validation_equals_totoc_backtest(engine, engine_dir, ort_lib, tmp_path):
    df = long_table(n_series=3, length=70)
    got = engine.cross_validation(pa.table(df), h=5, n_windows=3, step_size=4, samples=8, seed=2)
    want = cli_backtest(engine_dir, ort_lib, df, tmp_path, "--horizon", "5", "--windows", "3", "--step", "4",
                        "--samples", "8", "--seed", "2")
    cols = ["unique_id", "ds", "cutoff", "y", "totoc", "totoc-lo-80", "totoc-median", "totoc-hi-80"]
    assert got.column_names == cols
    assert want.column_names[: len(cols)] == cols and "naive" in want.column_names
    assert got.num_rows == 3 * 3 * 5
    for c in ["unique_id", "y", *cols[4:]]:
        assert got[c].to_pylist() == want[c].to_pylist(), c
    # the timestamps: the input's type here, the CLI's ISO text there
    assert got["ds"].type == pa.table(df)["ds"].type
    as_text = lambda col: [t.isoformat() for t in col.to_pylist()]  # noqa: E731
    assert as_text(got["ds"]) == want["ds"].to_pylist()
    assert as_text(got["cutoff"]) == want["cutoff"].to_pylist()
    # each window forecasts the 5 steps after its cutoff; cutoffs 4 steps apart, the last at the series' end
    s0 = got.to_pandas().query("unique_id == 's0'")
    cutoffs = sorted(s0["cutoff"].unique())
    assert [b - a for a, b in zip(cutoffs, cutoffs[1:])] == [pd.Timedelta(hours=4)] * 2
    assert s0["ds"].max() == df.query("unique_id == 's0'")["ds"].max()


def test_kinds_and_a_toto2_engine(engine, engine2):
    df = long_table(n_series=2, length=60)
    out_pd = engine.cross_validation(df, 3, 2)
    out_pl = engine.cross_validation(pl.from_pandas(df), 3, 2)
    assert isinstance(out_pd, pd.DataFrame) and isinstance(out_pl, pl.DataFrame)
    assert list(out_pd.columns) == out_pl.columns == ["unique_id", "ds", "cutoff", "y", "totoc"]
    assert out_pd["ds"].dtype == df["ds"].dtype and out_pl.schema["cutoff"] == pl.from_pandas(df).schema["ds"]
    assert np.array_equal(out_pd["totoc"].to_numpy(), out_pl["totoc"].to_numpy())
    # Toto 2.0 predicts quantiles: they come by default, around its median
    two = engine2.cross_validation(df, 3, 2, model="toto2")
    assert list(two.columns) == ["unique_id", "ds", "cutoff", "y", "toto2", "toto2-lo-80", "toto2-median", "toto2-hi-80"]
    assert np.array_equal(two["toto2"].to_numpy(), two["toto2-median"].to_numpy())
    assert (two["toto2-lo-80"] <= two["toto2-hi-80"]).all()


def test_daily_stock_data_windows_skip_weekends(engine):
    days = pd.bdate_range("2024-01-01", periods=80)
    df = pd.DataFrame({"unique_id": "X", "ds": days, "y": np.cumsum(np.cos(np.arange(80.0)))})
    cv = engine.cross_validation(df, 5, 4)
    assert (cv["ds"].dt.day_of_week < 5).all() and (cv["cutoff"].dt.day_of_week < 5).all()
    assert set(cv["ds"]) <= set(days)


def test_too_many_windows_is_the_cli_error(engine, engine_dir, ort_lib, tmp_path, totoc_module):
    df = long_table(n_series=1, length=30)
    with pytest.raises(totoc_module.InvalidInput) as e:
        engine.cross_validation(df, 10, 5)
    p = cli_backtest(engine_dir, ort_lib, df, tmp_path, "--horizon", "10", "--windows", "5", ok=False)
    line = [ln for ln in p.stderr.splitlines() if ln.startswith("error")][0].removeprefix("error: ")
    for flag, arg in [("--horizon", "h"), ("--windows", "n_windows"), ("--step", "step_size")]:
        line = line.replace(flag, arg)
    assert str(e.value) == line
    h = engine.info["max_horizon"] + 1
    with pytest.raises(totoc_module.EngineLimit, match=f"horizon {h} exceed"):
        engine.cross_validation(long_table(n_series=1, length=h + 50), h, 1)
    with pytest.raises(totoc_module.InvalidInput, match="n_windows is 0"):
        engine.cross_validation(df, 3, 0)


def test_series_that_end_apart_are_warned_about_and_untimed_ones_pool_from_the_end(engine):
    df = long_table(n_series=2, length=60)  # hourly, 60 and 67 rows from the same start: they end apart
    with pytest.warns(UserWarning, match=r"the series end at different times \(s0 at .*, s1 at"):
        engine.cross_validation(df, 3, 2)
    # Without timestamps (100 and 120 points): positions count from each series' end, so window i of both
    # shares its cutoff (89, 99, 109 for h = 10, 3 windows), as fev pools them.
    untimed = pd.DataFrame({"unique_id": ["a"] * 100 + ["b"] * 120,
                            "y": np.concatenate([np.arange(100.0), np.arange(120.0) * 3])})
    cv = engine.cross_validation(untimed, 10, 3)
    cutoffs = cv.groupby("unique_id")["cutoff"].unique().to_dict()
    assert {k: list(v) for k, v in cutoffs.items()} == {"a": ["89", "99", "109"], "b": ["89", "99", "109"]}
