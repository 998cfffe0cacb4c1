"""Kronos through the Python API: ``Engine.forecast`` and ``predict_df`` give what ``totoc forecast`` gives for
the same series and seed, bit for bit (greedy and sampled); ``predict_df`` returns the wide layout (``layout="long"``
the long one) with the CLI's columns; ``cross_validation``'s windows equal ``Engine.forecast`` on the frame cut at
each cutoff, bit for bit; bad input is an ``InvalidInput`` naming the problem and the fix.

The engine: the k10 reference fixture's checkpoints (tests/fixtures/kronos/k10, random weights) exported and built
with the `totoc` command (under a second), with configs/kronos-tiny.yaml's window and a profile of one series and
16 paths (`PROFILE`). The series: the
k10 `greedy_daily` case's request (GOOG, 64 daily candles, five columns, 16 steps).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REPO, THREADS, f32, run_totoc

K10 = REPO / "tests/fixtures/kronos/k10"
COLUMNS = ["open", "high", "low", "close", "volume"]
SAMPLES = 16
#: configs/kronos-tiny.yaml's window and graphs for one series of up to 16 paths.
PROFILE = f"""model:
  generation: kronos
  checkpoint: {K10 / "predictor"}
  tokenizer: {K10 / "tokenizer"}
profiles:
  - name: small
    batch: 1
    variates: 1
    context: 160
    horizon: 24
    samples: 16
    family:
      window: 128
      encode: [{{rows: 1, slots: 160}}]
      prefill: [{{rows: 1, slots: 64}}, {{rows: 1, slots: 128}}]
      detokenize: [{{rows: 16, slots: 128}}]
      rows: [1, 16]
"""


@pytest.fixture(scope="session")
def kronos_dir(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("kronos")
    (work / "profile.yaml").write_text(PROFILE)
    run_totoc(
        "export", "--checkpoint", str(K10 / "predictor"), "--tokenizer", str(K10 / "tokenizer"),
        "--config", str(work / "profile.yaml"), "--out", str(work / "bundle"),
    )
    run_totoc("build-engine", "--artifacts", str(work / "bundle"), "--out", str(work / "engine"))
    return work / "engine"


@pytest.fixture(scope="session")
def kronos(totoc_module, engine, kronos_dir):
    # after the Toto 1.0 engine: the first engine loaded sets the process's thread pool (THREADS)
    eng = totoc_module.Engine(kronos_dir, threads=THREADS)
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def request_() -> dict:
    return json.loads((K10 / "cases/greedy_daily.json").read_text())["requests"][0]


def frame(req: dict) -> pd.DataFrame:
    """The request's series as a table: a `timestamp` column and the OHLCV columns."""
    df = pd.DataFrame({c: np.asarray(req["target"][i], dtype=np.float64) for i, c in enumerate(req["columns"])})
    df.insert(0, "timestamp", pd.to_datetime(req["timestamps"]))
    return df


def cli(kronos_dir: Path, ort_lib: str, tmp: Path, inp: Path, *extra: str) -> Path:
    out = tmp / f"out-{len(list(tmp.iterdir()))}{'.csv' if inp.suffix == '.csv' else '.json'}"
    run_totoc(
        "forecast", "--engine", str(kronos_dir), "--input", str(inp), "--output", str(out), "--write-samples",
        "--threads", str(THREADS), "--ort-lib", ort_lib, *extra,
    )
    return out


@pytest.mark.parametrize("samples", [0, SAMPLES])
def test_forecast_and_predict_df_equal_totoc_forecast_bit_for_bit(
    kronos, kronos_dir, ort_lib, tmp_path, request_, samples
):
    req = dict(request_, samples=samples)
    if samples:
        req.update(quantiles=[0.1, 0.5, 0.9], temperature=0.9, top_p=0.8)
    (tmp_path / "request.json").write_text(json.dumps(req))
    resp = json.loads(cli(kronos_dir, ort_lib, tmp_path, tmp_path / "request.json").read_text())
    sampling = {k: req[k] for k in ("temperature", "top_p") if k in req}

    # Engine.forecast: stamps as numpy datetime64, one [V, T] series
    f = kronos.forecast(
        np.asarray(req["target"], dtype=np.float64), req["horizon"], samples=samples,
        quantiles=req.get("quantiles"), seed=req["seed"], columns=req["columns"],
        timestamps=np.array(req["timestamps"], dtype="datetime64[s]"),
        future_timestamps=pd.DatetimeIndex(req["future_timestamps"]), params=req["params"], **sampling,
    )
    np.testing.assert_array_equal(f.mean, f32(resp["mean"]), strict=True)
    if samples:
        assert f.samples.shape == (samples, 5, 16)
        np.testing.assert_array_equal(f.samples, f32(resp["samples"]), strict=True)
        for i, q in enumerate(resp["quantiles"]):
            np.testing.assert_array_equal(f.quantiles[i], f32(q["values"]), strict=True)
    else:
        assert f.samples is None and f.quantiles is None

    # predict_df on the same series as a table: the weekday calendar with the exchange's holiday continues it to
    # the request's future stamps; the wide layout, the CLI's table of the same input, the same numbers
    holidays = tmp_path / "holidays.txt"
    holidays.write_text("2013-02-18\n")
    df = frame(req)
    out = kronos.predict_df(
        df, 16, quantile_levels=req.get("quantiles"), samples=samples, seed=req["seed"], params=req["params"],
        holidays=holidays, write_samples=True, **sampling,
    )
    levels = [f"_q{q}" for q in req.get("quantiles", [])]
    paths = [f"_sample_{p}" for p in range(samples)]
    want = ["timestamp", *COLUMNS, *[c + q for c in COLUMNS for q in levels], *[c + p for c in COLUMNS for p in paths]]
    assert list(out.columns) == [*want, "context_truncated"]
    assert [t.isoformat() for t in out["timestamp"]] == req["future_timestamps"]
    for c, name in enumerate(COLUMNS):
        np.testing.assert_array_equal(out[name].to_numpy(), f.mean[c], strict=True)
        for p in range(samples):
            np.testing.assert_array_equal(out[f"{name}_sample_{p}"].to_numpy(), f.samples[p, c], strict=True)
    # the CLI writes the same table (plus its `model` column) from the same rows
    table = tmp_path / "series.csv"
    df.to_csv(table, index=False)
    flags = ["--horizon", "16", "--seed", str(req["seed"]), "--samples", str(samples), "--holidays", str(holidays)]
    flags += [f"--param={k}={v}" for k, v in req["params"].items()]
    if samples:
        flags += ["--quantiles", "0.1,0.5,0.9", "--temperature", "0.9", "--top-p", "0.8"]
    written = pd.read_csv(cli(kronos_dir, ort_lib, tmp_path, table, *flags))
    assert list(written.columns) == [want[0], "model", *want[1:]]
    assert (written["model"] == "kronos").all()
    for name in want[1:]:
        np.testing.assert_array_equal(written[name].to_numpy(np.float32), out[name].to_numpy(), strict=True)

    # layout="long": a row per column and step, as for Toto
    long = kronos.predict_df(
        df, 16, samples=samples, seed=req["seed"], params=req["params"], holidays=holidays, layout="long",
        **sampling,
    )
    assert list(long.columns[:3]) == ["timestamp", "target_name", "mean"]
    assert list(long["target_name"][::16]) == COLUMNS
    np.testing.assert_array_equal(long["mean"].to_numpy(), f.mean.reshape(-1), strict=True)


def test_bad_input_names_the_problem_and_the_fix(kronos, request_, engine, totoc_module):
    req = request_
    target = np.asarray(req["target"], dtype=np.float64)
    stamps, future = req["timestamps"], req["future_timestamps"]
    base = dict(columns=req["columns"], timestamps=stamps, future_timestamps=future, params=req["params"])

    def err(call) -> str:
        with pytest.raises(totoc_module.InvalidInput) as e:
            call()
        return str(e.value)

    no_close = dict(base, columns=["open", "high", "low", "volume"])
    e = err(lambda: kronos.forecast(np.delete(target, 3, axis=0), 16, **no_close))
    assert "close" in e, e
    nan = target.copy()
    nan[2, 5] = np.nan
    e = err(lambda: kronos.forecast(nan, 16, **base))
    assert "low" in e and "5" in e, e
    e = err(lambda: kronos.forecast(target, 16, **dict(base, timestamps=None)))
    assert "timestamps" in e, e
    e = err(lambda: kronos.forecast(target, 16, **dict(base, timestamps=stamps[1:])))
    assert "timestamps" in e and "63" in e and "64" in e, e
    e = err(lambda: kronos.forecast(target, 16, **dict(base, future_timestamps=future[:3])))
    assert "future_timestamps" in e and "3" in e and "16" in e, e

    df = frame(req)
    e = err(lambda: kronos.predict_df(df.drop(columns="close"), 16))
    assert "close" in e, e
    bad = df.copy()
    bad.loc[5, "low"] = np.nan
    e = err(lambda: kronos.predict_df(bad, 16))
    assert "low" in e, e
    e = err(lambda: kronos.predict_df(df, 16, layout="diagonal"))
    assert 'layout="diagonal" is not a table layout' in e and '"long"' in e, e
    # a Toto engine refuses the sampling controls by name
    toto = pd.DataFrame({"ds": pd.date_range("2024-01-01", periods=40, freq="h"), "y": np.arange(40.0)})
    e = err(lambda: engine.predict_df(toto, 4, temperature=0.5))
    assert "temperature" in e, e


def test_zone_aware_stamps_are_read_in_their_own_zones_wall_clock(kronos, request_):
    """A tz-aware stamp is its local wall clock (as upstream's `.dt` reads it): New York stamps give the naive
    stamps' forecast; the same instants in UTC (other hours) give another."""
    req = request_
    target = np.asarray(req["target"], dtype=np.float64)
    naive = pd.DatetimeIndex(req["timestamps"]), pd.DatetimeIndex(req["future_timestamps"])
    kw = dict(columns=req["columns"], params=req["params"])
    base = kronos.forecast(target, 16, timestamps=naive[0], future_timestamps=naive[1], **kw).mean
    ny = [t.tz_localize("America/New_York") for t in naive]
    same = kronos.forecast(target, 16, timestamps=ny[0], future_timestamps=pd.Series(ny[1]), **kw).mean
    np.testing.assert_array_equal(same, base, strict=True)
    utc = [t.tz_convert("UTC") for t in ny]
    other = kronos.forecast(target, 16, timestamps=utc[0], future_timestamps=utc[1], **kw).mean
    assert not np.array_equal(other, base)


@pytest.mark.parametrize("samples", [0, 4])
def test_cross_validation_windows_equal_forecast_on_the_frame_cut_at_each_cutoff(kronos, request_, samples):
    """Each window of ``cross_validation`` is ``Engine.forecast`` of the rows at or before its cutoff, forecast at
    the next rows' timestamps, bit for bit: two series of different lengths, windows 5 rows apart."""
    req = request_
    a = frame(req)
    b = frame(req).iloc[:40].assign(close=lambda d: d["close"] * 1.5)
    df = pd.concat([a.assign(unique_id="a"), b.assign(unique_id="b")])[["unique_id", "timestamp", *COLUMNS]]
    sampling = dict(temperature=0.9, top_p=0.8) if samples else {}
    levels = [0.1, 0.9] if samples else None
    kw = dict(samples=samples, seed=7, quantile_levels=levels, params=req["params"], **sampling)
    cv = kronos.cross_validation(df, h=4, n_windows=3, step_size=5, target=COLUMNS, **kw)
    q = [f"{c}_q{level}" for c in COLUMNS for level in levels or []]
    assert list(cv.columns) == ["unique_id", "timestamp", "cutoff", *COLUMNS, *q]
    # cutoffs: rows 49, 54, 59 of a (64 rows), 25, 30, 35 of b (40 rows); each window's steps the 4 rows after
    for sid, part, cutoffs in [("a", a, [49, 54, 59]), ("b", b, [25, 30, 35])]:
        got = cv[cv["unique_id"] == sid]
        assert list(got["cutoff"].unique()) == list(part["timestamp"].iloc[cutoffs])
        for c in cutoffs:
            block = got[got["cutoff"] == part["timestamp"].iloc[c]]
            cut = part.iloc[: c + 1]
            future = part["timestamp"].iloc[c + 1 : c + 5]
            assert list(block["timestamp"]) == list(future)
            f = kronos.forecast(
                cut[COLUMNS].to_numpy(np.float64).T, 4, samples=samples, seed=7, quantiles=levels, columns=COLUMNS,
                timestamps=cut["timestamp"].to_numpy(), future_timestamps=pd.DatetimeIndex(future),
                params=req["params"], **sampling,
            )
            for v, name in enumerate(COLUMNS):
                np.testing.assert_array_equal(block[name].to_numpy(), f.mean[v], strict=True)
                for i, level in enumerate(levels or []):
                    np.testing.assert_array_equal(block[f"{name}_q{level}"].to_numpy(), f.quantiles[i][v], strict=True)
    # layout="long": the same numbers, a row per column and step
    long = kronos.cross_validation(df, h=4, n_windows=3, step_size=5, target=COLUMNS, layout="long", **kw)
    assert list(long.columns[:5]) == ["unique_id", "timestamp", "cutoff", "target_name", "mean"]
    for name in COLUMNS:
        np.testing.assert_array_equal(
            long[long["target_name"] == name]["mean"].to_numpy(), cv[name].to_numpy(), strict=True
        )


def test_cross_validation_bad_input_names_the_problem_and_the_fix(kronos, request_, engine, totoc_module):
    df = frame(request_)

    def err(call) -> str:
        with pytest.raises(totoc_module.InvalidInput) as e:
            call()
        return str(e.value)

    e = err(lambda: kronos.cross_validation(df, h=4, n_windows=30, target=COLUMNS, params=request_["params"]))
    assert "64 points are too few for 30 windows" in e and "ask for at most 15 windows" in e, e
    e = err(lambda: kronos.cross_validation(df.drop(columns="timestamp"), h=4, n_windows=2, target=COLUMNS))
    assert "timestamp" in e, e
    e = err(lambda: kronos.cross_validation(df, h=4, n_windows=2, target=COLUMNS, layout="diagonal"))
    assert 'layout="diagonal" is not a table layout' in e, e
    e = err(lambda: kronos.cross_validation(df.drop(columns="close"), h=4, n_windows=2))
    assert "close" in e, e
    # a Toto engine: no layout, and its model refuses the sampling controls by name
    toto = pd.DataFrame({"ds": pd.date_range("2024-01-01", periods=40, freq="h"), "y": np.arange(40.0)})
    e = err(lambda: engine.cross_validation(toto, h=4, n_windows=2, layout="wide"))
    assert "layout" in e and "remove" in e, e
    e = err(lambda: engine.cross_validation(toto, h=4, n_windows=2, temperature=0.5))
    assert "temperature" in e, e
