"""`Engine.predict_df`: tables in and out, against `totoc forecast` on the same table (a Parquet file written by
pyarrow): the same numbers bit for bit, the same columns and types, the same calendars, notes and errors."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import THREADS, run_totoc

H = 8


def long_table(n_series: int = 3, length: int = 90, seed: int = 0) -> pd.DataFrame:
    """Hourly series of different lengths with a few missing values (NaN)."""
    rng = np.random.default_rng(seed)
    parts = []
    for s in range(n_series):
        n = length + 7 * s
        y = 10 + np.sin(np.arange(n) / (3 + s)) + 0.1 * rng.standard_normal(n)
        y[5 + s] = np.nan
        parts.append(
            pd.DataFrame(
                {"unique_id": f"s{s}", "ds": pd.date_range("2024-03-01", periods=n, freq="h"), "y": y}
            )
        )
    return pd.concat(parts, ignore_index=True)


def cli_table(engine_dir: Path, ort_lib: str, table: pa.Table, tmp: Path, *args: str, ok: bool = True):
    """`totoc forecast` of `table` written as Parquet: its output table (pyarrow), or the failed process."""
    inp, out = tmp / "in.parquet", tmp / "out.parquet"
    pq.write_table(table, inp)
    p = run_totoc(
        "forecast", "--engine", str(engine_dir), "--input", str(inp), "--output", str(out),
        "--threads", str(THREADS), "--ort-lib", ort_lib, *args, ok=ok,
    )
    if not ok:
        return p
    # The CLI's tables name their model (forecast tables 3); predict_df's frames do not: compared without it.
    t = pq.read_table(out)
    assert len(set(t["model"].to_pylist())) == 1 and t["model"][0].as_py() in ("toto-1.0", "toto-2.0"), t.schema
    return t.drop_columns(["model"])


def without_meta(t: pa.Table) -> pa.Table:
    return t.replace_schema_metadata(None)


def test_predict_df_equals_totoc_forecast_bit_for_bit(engine, engine_dir, ort_lib, tmp_path):
    df = long_table()
    got = engine.predict_df(pa.table(df), H, samples=16, quantile_levels=[0.1, 0.5, 0.9], seed=3)
    assert isinstance(got, pa.Table)
    want = cli_table(
        engine_dir, ort_lib, pa.table(df), tmp_path, "--horizon", str(H), "--samples", "16",
        "--quantiles", "0.1,0.5,0.9", "--seed", "3",
    )
    assert got.column_names == [*want.column_names, "context_truncated"]
    assert got.column_names == ["unique_id", "ds", "mean", "q0.1", "q0.5", "q0.9", "context_truncated"]
    # the same columns, types and values (float32 compared as bits), the calendar metadata included
    assert without_meta(got.drop_columns(["context_truncated"])).equals(without_meta(want))
    for name in ["mean", "q0.1", "q0.9"]:
        assert np.array_equal(got[name].to_numpy().view(np.uint32), want[name].to_numpy().view(np.uint32))
    assert got.schema.metadata[b"totoc.calendars"] == want.schema.metadata[b"totoc.calendars"]
    assert got.num_rows == 3 * H and not any(got["context_truncated"].to_pylist())


def test_pandas_polars_and_arrow_round_trips(engine):
    df = long_table(n_series=2)
    out_pd = engine.predict_df(df, H)
    out_pl = engine.predict_df(pl.from_pandas(df), H)
    out_pa = engine.predict_df(pa.table(df), H)
    assert isinstance(out_pd, pd.DataFrame) and isinstance(out_pl, pl.DataFrame) and isinstance(out_pa, pa.Table)
    assert list(out_pd.columns) == out_pl.columns == out_pa.column_names == ["unique_id", "ds", "mean", "context_truncated"]
    # the same numbers whichever table carried the rows
    assert np.array_equal(out_pd["mean"].to_numpy(), out_pl["mean"].to_numpy())
    assert np.array_equal(out_pd["mean"].to_numpy(), out_pa["mean"].to_numpy())
    # future timestamps continue each series at its step, of the input's type
    assert out_pd["ds"].dtype == df["ds"].dtype
    last_a = df[df.unique_id == "s0"]["ds"].max()
    assert list(out_pd[out_pd.unique_id == "s0"]["ds"]) == list(pd.date_range(last_a, periods=H + 1, freq="h")[1:])
    assert out_pl.schema["ds"] == pl.from_pandas(df).schema["ds"]


def test_integer_ids_epochs_several_targets_and_no_id(engine):
    t = pa.table(
        {
            "store": [7] * 40 + [9] * 40,
            "t": list(range(0, 40 * 60, 60)) * 2,
            "a": np.arange(80, dtype=np.float64),
            "b": np.arange(80, dtype=np.float32) * 2,
        }
    )
    out = engine.predict_df(t, 4, id_column="store", timestamp_column="t", target=["a", "b"])
    assert out.column_names == ["store", "t", "target_name", "mean", "context_truncated"]
    assert out["store"].type == pa.int64() and out["t"].to_pylist()[:4] == [2400, 2460, 2520, 2580]
    assert out["target_name"].to_pylist()[:8] == ["a"] * 4 + ["b"] * 4
    one = engine.predict_df(pa.table({"y": np.arange(50.0)}), 4, id_column=None, timestamp_column=None)
    assert one.column_names == ["step", "mean", "context_truncated"] and one["step"].to_pylist() == [1, 2, 3, 4]


def test_daily_stock_data_skips_weekends_as_the_cli_does(engine, engine_dir, ort_lib, tmp_path):
    days = pd.bdate_range("2024-01-01", periods=120)  # Mon–Fri only, as daily stock prices are
    df = pd.DataFrame({"unique_id": "AAPL", "ds": days, "y": 100 + np.cumsum(np.sin(np.arange(120)))})
    out = engine.predict_df(df, 10)
    assert (out["ds"].dt.day_of_week < 5).all(), out["ds"]
    assert list(out["ds"]) == list(pd.bdate_range(days[-1], periods=11)[1:])
    want = cli_table(engine_dir, ort_lib, pa.table(df), tmp_path, "--horizon", "10")
    assert list(out["ds"]) == list(want["ds"].to_pandas())
    assert np.array_equal(out["mean"].to_numpy(), want["mean"].to_numpy())
    # continuous when asked: the weekend steps come back
    cont = engine.predict_df(df, 10, calendar="continuous", freq="1d")
    assert (cont["ds"].dt.day_of_week >= 5).any()


def test_a_context_longer_than_the_engine_warns_and_is_flagged(engine):
    cap = engine.info["max_context"]
    long = pd.DataFrame({"unique_id": "long", "ds": pd.date_range("2024-01-01", periods=cap + 40, freq="min"),
                         "y": np.sin(np.arange(cap + 40.0))})
    short = pd.DataFrame({"unique_id": "short", "ds": pd.date_range("2024-01-01", periods=30, freq="min"),
                          "y": np.arange(30.0)})
    with pytest.warns(UserWarning, match=rf"1 of 2 series have more points than the engine's context of {cap}.*strict_context=True"):
        out = engine.predict_df(pd.concat([long, short]), 3)
    assert out.groupby("unique_id")["context_truncated"].all().to_dict() == {"long": True, "short": False}


def cli_error(engine_dir, ort_lib, table, tmp, *args) -> str:
    """`totoc forecast`'s error on `table`, as predict_df words it: the file named `df`, flags as keywords."""
    p = cli_table(engine_dir, ort_lib, table, tmp, *args, ok=False)
    assert p.returncode != 0
    line = [ln for ln in p.stderr.splitlines() if ln.startswith("error")][0]
    msg = re.sub(r"^error: ", "", line).replace(str(tmp / "in.parquet"), "df")
    for flag, kw in [("--id-column", "id_column="), ("--timestamp-column", "timestamp_column="),
                     ("--target-columns", "target="), ("--horizon", "prediction_length=")]:
        msg = msg.replace(flag, kw)
    return msg


BAD = {
    "unknown column": (lambda df: df, {"id_column": "store"}, ["--id-column", "store"], "InvalidInput",
                       "there is no column `store`"),
    "wrong dtype": (lambda df: df.assign(y=df.y.astype(str)), {}, [], "InvalidInput", "column `y` has type"),
    "all-NaN series": (lambda df: df.assign(y=np.where(df.unique_id == "s1", np.nan, df.y)), {}, [],
                       "InvalidInput", "df: series s1: column `y` has no value"),
    "duplicate timestamps": (lambda df: pd.concat([df, df.iloc[[3]]]), {}, [], "InvalidInput", "s0"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_tables_raise_the_cli_message(engine, engine_dir, ort_lib, tmp_path, totoc_module, case):
    change, kwargs, flags, exc, words = BAD[case]
    df = change(long_table(n_series=2, length=40))
    with pytest.raises(getattr(totoc_module, exc)) as e:
        engine.predict_df(df, H, **kwargs)
    assert words in str(e.value)
    assert str(e.value) == cli_error(engine_dir, ort_lib, pa.table(df), tmp_path, "--horizon", str(H), *flags)


def test_a_horizon_past_the_engine_is_an_engine_limit(engine, engine_dir, ort_lib, tmp_path, totoc_module):
    h = engine.info["max_horizon"] + 1
    df = long_table(n_series=1, length=40)
    with pytest.raises(totoc_module.EngineLimit) as e:
        engine.predict_df(df, h)
    assert str(h) in str(e.value)
    assert str(e.value) == cli_error(engine_dir, ort_lib, pa.table(df), tmp_path, "--horizon", str(h))


def test_what_is_not_a_table_is_named(engine, totoc_module):
    with pytest.raises(totoc_module.InvalidInput, match="df is a dict, not a table; give a pandas or polars"):
        engine.predict_df({"y": [1.0]}, H)
    with pytest.raises(totoc_module.InvalidInput, match="calendar=\"lunar\" is not a calendar"):
        engine.predict_df(long_table(1), H, calendar="lunar")
    with pytest.raises(totoc_module.InvalidInput, match=r"^timezone: .*Mars/Base"):
        engine.predict_df(long_table(1), H, timezone="Mars/Base")


def test_toto2_forecast_and_predict_df(engine2, engine2_dir, ort_lib, tmp_path):
    info = engine2.info
    assert info["samples"] is False and info["quantile_knots"]
    y = (10 + np.sin(np.arange(200) / 6)).astype(np.float32)
    f = engine2.forecast(y[None], horizon=H, quantiles=[0.1, 0.5, 0.9])
    assert f.mean is None and f.samples is None and f.median.shape == (1, H)
    assert f.quantiles.shape == (3, 1, H) and np.all(f.quantiles[0] <= f.quantiles[2])
    df = long_table(n_series=2, length=120)
    # 0.15 lies between the knots: interpolated, and said once as `totoc forecast` says it
    with pytest.warns(UserWarning, match="interpolat"):
        got = engine2.predict_df(pa.table(df), H, quantile_levels=[0.1, 0.15, 0.9])
    assert got.column_names == ["unique_id", "ds", "median", "q0.1", "q0.15", "q0.9", "context_truncated"]
    want = cli_table(engine2_dir, ort_lib, pa.table(df), tmp_path, "--horizon", str(H), "--quantiles", "0.1,0.15,0.9")
    assert without_meta(got.drop_columns(["context_truncated"])).equals(without_meta(want))


def test_the_table_examples_run_and_give_the_columns_they_say(totoc_module, engine):
    from test_docs import examples

    ns = {"eng": engine, "pd": pd, "df": long_table(n_series=2, length=120)}
    for method in (totoc_module.Engine.predict_df, totoc_module.Engine.cross_validation):
        (block,) = examples(method.__doc__)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(compile(block, "<docstring>", "exec"), ns)
        line = [ln for ln in block.splitlines() if "list(" in ln][0]
        code, _, comment = line.partition("#")
        assert str(eval(code.strip(), ns)) == comment.strip(), (method.__name__, line)


def test_categorical_ids_zoned_timestamps_an_index_and_a_lazy_frame(engine):
    base = long_table(n_series=2, length=60)
    plain = engine.predict_df(base, 3)
    zoned = pl.from_pandas(base).with_columns(
        pl.col("unique_id").cast(pl.Categorical), pl.col("ds").dt.replace_time_zone("Europe/Paris")
    )
    out = engine.predict_df(zoned, 3)
    assert out.schema["ds"] == pl.Datetime("us", "Europe/Paris") and out["unique_id"].to_list()[:1] == ["s0"]
    # the same instants one hour apart in Paris; the same numbers (the values did not change)
    assert out["ds"].dt.convert_time_zone("UTC").dt.replace_time_zone(None).to_list() == [
        t - pd.Timedelta(hours=1) for t in plain["ds"]
    ]
    assert np.array_equal(out["mean"].to_numpy(), plain["mean"].to_numpy())
    indexed = engine.predict_df(base.set_index("ds"), 3)  # a named index is a column of the Arrow table
    assert list(indexed["ds"]) == list(plain["ds"])
    lazy = engine.predict_df(pl.from_pandas(base).lazy(), 3)
    assert isinstance(lazy, pl.DataFrame) and np.array_equal(lazy["mean"].to_numpy(), plain["mean"].to_numpy())


def test_a_forced_step_far_below_the_data_is_invalid_input_not_an_abort(engine, totoc_module):
    # freq="1ms" on daily rows would be a grid of 86,400,000 points a day: refused before it is made.
    daily = pd.DataFrame({"unique_id": "a", "ds": pd.date_range("2024-01-01", periods=60, freq="D"),
                          "y": np.arange(60.0)})
    with pytest.raises(totoc_module.InvalidInput, match=r"a step of 1 millisecond puts .* more than 64 per row"):
        engine.predict_df(daily, H, freq="1ms")
    with pytest.raises(totoc_module.InvalidInput, match="more than 64 per row"):
        engine.cross_validation(daily, 3, 2, freq="1ms")


def test_a_new_york_zone_across_dst_forecasts_as_iso_text_with_offsets_does(engine):
    # Daily at New York midnight from 1 February to 31 March 2024: the clocks moved on 10 March (a 23-hour day).
    zoned = pd.DataFrame({"unique_id": "ny", "ds": pd.date_range("2024-02-01", periods=60, freq="D",
                                                                 tz="America/New_York"),
                          "y": 10 + np.sin(np.arange(60) / 3)})
    out = engine.predict_df(zoned, 5)
    assert str(out["ds"].dt.tz) == "America/New_York"
    assert [t.isoformat() for t in out["ds"]] == [f"2024-04-0{d}T00:00:00-04:00" for d in range(1, 6)]
    # The same data as ISO 8601 text with offsets (-05:00, then -04:00): the same forecast, bit for bit.
    text = zoned.assign(ds=[t.isoformat() for t in zoned["ds"]])
    assert text["ds"].iloc[0] == "2024-02-01T00:00:00-05:00" and text["ds"].iloc[-1] == "2024-03-31T00:00:00-04:00"
    want = engine.predict_df(text, 5)
    assert list(want["ds"]) == [t.isoformat() for t in out["ds"]]
    assert np.array_equal(out["mean"].to_numpy(), want["mean"].to_numpy())


def test_chronos_and_nixtla_column_names_are_recognised_without_arguments(engine):
    nixtla = long_table(n_series=2, length=60)
    chronos = nixtla.rename(columns={"unique_id": "item_id", "ds": "timestamp", "y": "target"})
    got = engine.predict_df(chronos, H)
    assert list(got.columns) == ["item_id", "timestamp", "mean", "context_truncated"]
    want = engine.predict_df(nixtla, H)
    assert np.array_equal(got["mean"].to_numpy(), want["mean"].to_numpy())
    assert list(got["timestamp"]) == list(want["ds"])
    cv = engine.cross_validation(chronos, 3, 2)
    assert list(cv.columns)[:4] == ["unique_id", "timestamp", "cutoff", "y"]
    assert np.array_equal(cv["totoc"].to_numpy(), engine.cross_validation(nixtla, 3, 2)["totoc"].to_numpy())
