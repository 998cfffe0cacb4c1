"""totoc.compat.kronos against upstream Kronos (kronos-finance 0.1.5's vendored copy) in eval mode: a script
written for upstream (the shape of upstream's prediction example: one ``predict``, one ``predict_batch``) runs
with only its import lines and the line that builds the predictor changed, and gives upstream's DataFrames within
1e-4·σ + 1e-6·|ref| on the greedy path (``top_k=1``); ``torch.manual_seed`` makes sampled calls reproducible; bad
input is an ``InvalidInput`` naming the problem and the fix.

Model: the k10 reference fixture (tests/fixtures/kronos/k10, random weights), its engine built with
configs/kronos-tiny.yaml. Series: GOOG's 64 daily candles from 2012-11-05 (the k10 `greedy_daily` case's window)
and MSFT's from 2012-10-03, from tests/fixtures/kronos/inputs/stocks_ohlcv.csv.
"""

from __future__ import annotations

import difflib
import runpy
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import REPO, THREADS, build_engine

K10 = REPO / "tests/fixtures/kronos/k10"
DATA = REPO / "tests/fixtures/kronos/inputs/stocks_ohlcv.csv"
COLUMNS = ["open", "high", "low", "close", "volume", "amount"]

# The shape of upstream's examples/prediction_example.py (and of its batch example), with eval mode, which the
# engine reproduces (upstream's from_pretrained leaves the model in training mode: docs/guide.md).
UPSTREAM = textwrap.dedent(
    """
    import pandas as pd
    from kronos_finance._vendor.kronos_model import Kronos, KronosTokenizer, KronosPredictor

    predictor = KronosPredictor(Kronos.from_pretrained(PREDICTOR).eval(), KronosTokenizer.from_pretrained(TOKENIZER).eval(), max_context=128)

    df = pd.read_csv(DATA, parse_dates=["date"])
    lookback, pred_len = 64, 16

    def window(ticker, start):
        rows = df[df["ticker"] == ticker].reset_index(drop=True)
        i = int(rows.index[rows["date"] == start][0])
        x_df = rows.loc[i:i + lookback - 1, ["open", "high", "low", "close", "volume"]]
        x_timestamp = rows.loc[i:i + lookback - 1, "date"]
        y_timestamp = rows.loc[i + lookback:i + lookback + pred_len - 1, "date"]
        return x_df, x_timestamp, y_timestamp

    x_df, x_timestamp, y_timestamp = window("GOOG", "2012-11-05")
    pred_df = predictor.predict(
        df=x_df, x_timestamp=x_timestamp, y_timestamp=y_timestamp, pred_len=pred_len,
        T=1.0, top_k=1, top_p=0.9, sample_count=1, verbose=False,
    )

    windows = [window("GOOG", "2012-11-05"), window("MSFT", "2012-10-03")]
    pred_dfs = predictor.predict_batch(
        df_list=[w[0] for w in windows], x_timestamp_list=[w[1] for w in windows],
        y_timestamp_list=[w[2] for w in windows], pred_len=pred_len,
        T=1.0, top_k=1, top_p=0.9, sample_count=1, verbose=False,
    )
    """
)

DROP_IN = UPSTREAM.replace(
    "from kronos_finance._vendor.kronos_model import Kronos, KronosTokenizer, KronosPredictor",
    "import totoc\nfrom totoc.compat.kronos import KronosPredictor",
).replace(
    "predictor = KronosPredictor(Kronos.from_pretrained(PREDICTOR).eval(), "
    "KronosTokenizer.from_pretrained(TOKENIZER).eval(), max_context=128)",
    "predictor = KronosPredictor(totoc.Engine(ENGINE, threads=1), max_context=128)",
)


@pytest.fixture(scope="session")
def kronos_engine_dir(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("kronos")
    return build_engine(work, K10 / "predictor", REPO / "configs/kronos-tiny.yaml", "--tokenizer", K10 / "tokenizer")


@pytest.fixture(scope="session")
def kronos_engine(totoc_module, kronos_engine_dir):
    eng = totoc_module.Engine(kronos_engine_dir, threads=THREADS)
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def goog():
    df = pd.read_csv(DATA, parse_dates=["date"])
    rows = df[df["ticker"] == "GOOG"].reset_index(drop=True)
    i = int(rows.index[rows["date"] == "2012-11-05"][0])
    return rows.loc[i : i + 63, ["open", "high", "low", "close", "volume"]], rows.loc[i : i + 63, "date"], rows.loc[
        i + 64 : i + 79, "date"
    ]


def sigma(x_df: pd.DataFrame) -> np.ndarray:
    """Upstream's per-column std of the context (ddof 0, the six columns, amount derived as upstream does)."""
    x = x_df.copy()
    x["amount"] = x["volume"] * x[["open", "high", "low", "close"]].mean(axis=1)
    return np.std(x[COLUMNS].to_numpy(np.float32), axis=0)


def within(ours: pd.DataFrame, theirs: pd.DataFrame, sd: np.ndarray, what: str) -> float:
    assert list(ours.columns) == list(theirs.columns) == COLUMNS, what
    assert ours.index.equals(theirs.index), what
    a, b = ours.to_numpy(np.float64), theirs.to_numpy(np.float64)
    tol = 1e-4 * (sd[None, :] + 1e-5) + 1e-6 * np.abs(b)
    worst = float((np.abs(a - b) / tol).max())
    assert worst <= 1.0, f"{what}: |Δ| up to {worst:.2f}x the tolerance 1e-4·σ + 1e-6·|ref|"
    return worst


def test_an_upstream_script_runs_with_its_imports_and_predictor_line_changed(kronos_engine_dir, kronos_engine):
    changed = [
        line[2:]
        for line in difflib.ndiff(UPSTREAM.splitlines(), DROP_IN.splitlines())
        if line.startswith(("- ", "+ "))
    ]
    assert changed and all(c.startswith(("import ", "from ", "predictor = ")) for c in changed), changed
    assert sum(c.startswith("predictor = ") for c in changed) == 2  # the one line, before and after

    torch.set_num_threads(THREADS)
    given = {"DATA": str(DATA), "PREDICTOR": str(K10 / "predictor"), "TOKENIZER": str(K10 / "tokenizer")}
    theirs = runpy.run_path(_script(UPSTREAM, kronos_engine_dir), init_globals=given)
    ours = runpy.run_path(_script(DROP_IN, kronos_engine_dir), init_globals={**given, "ENGINE": str(kronos_engine_dir)})
    worst = within(ours["pred_df"], theirs["pred_df"], sigma(theirs["x_df"]), "predict")
    assert len(ours["pred_dfs"]) == len(theirs["pred_dfs"]) == 2
    for (x_df, _, _), a, b in zip(theirs["windows"], ours["pred_dfs"], theirs["pred_dfs"]):
        worst = max(worst, within(a, b, sigma(x_df), "predict_batch"))
    print(f"drop-in against upstream (eval, greedy): worst |Δ| / tolerance {worst:.3f}")


def _script(text: str, where: Path) -> str:
    path = where.parent / f"script-{abs(hash(text))}.py"
    path.write_text(text)
    return str(path)


def test_torch_manual_seed_makes_sampled_calls_reproducible(kronos_engine, goog):
    from totoc.compat.kronos import KronosPredictor

    predictor = KronosPredictor(kronos_engine, max_context=128, device="cuda:0")  # device: ignored
    x_df, x_ts, y_ts = goog

    def sampled(seed: int) -> pd.DataFrame:
        torch.manual_seed(seed)
        return predictor.predict(x_df, x_ts, y_ts, 16, T=1.0, top_p=0.9, sample_count=4, verbose=False)

    first, again, other = sampled(3), sampled(3), sampled(4)
    pd.testing.assert_frame_equal(first, again, check_exact=True)
    assert not np.array_equal(first.to_numpy(), other.to_numpy())
    # a DatetimeIndex (upstream raises on one) gives what the Series gives
    torch.manual_seed(3)
    by_index = predictor.predict(x_df, pd.DatetimeIndex(x_ts), pd.DatetimeIndex(y_ts), 16, sample_count=4)
    np.testing.assert_array_equal(by_index.to_numpy(), first.to_numpy())

    # return_paths: the paths and quantiles beside the mean
    p = predictor.predict(x_df, x_ts, y_ts, 16, sample_count=4, seed=11, return_paths=True)
    assert p.paths.shape == (4, 16, 6) and p.paths.dtype == np.float32
    assert sorted(p.quantiles) == [0.1, 0.5, 0.9]
    lo, mid, hi = (p.quantiles[q].to_numpy() for q in (0.1, 0.5, 0.9))
    assert np.all(lo <= mid) and np.all(mid <= hi)
    assert np.all(p.paths.min(axis=0) <= hi) and np.all(p.paths.max(axis=0) >= lo)

    # series of different lengths in one batch, each as predict gives it with the same seed
    short = (x_df.iloc[10:], x_ts.iloc[10:], y_ts)
    batch = predictor.predict_batch([x_df, short[0]], [x_ts, short[1]], [y_ts, y_ts], 16, sample_count=4, seed=5)
    for (xd, xt, yt), got in zip([(x_df, x_ts, y_ts), short], batch):
        alone = predictor.predict(xd, xt, yt, 16, sample_count=4, seed=5)
        within(got, alone, sigma(xd), "a batch of two lengths")


def test_bad_input_names_the_problem_and_the_fix(kronos_engine, toto1_engine, goog, totoc_module):
    from totoc.compat.kronos import KronosPredictor

    x_df, x_ts, y_ts = goog

    def err(call) -> str:
        with pytest.raises(totoc_module.InvalidInput) as e:
            call()
        return str(e.value)

    e = err(lambda: KronosPredictor(toto1_engine))
    assert "this engine is toto-1.0; KronosPredictor drives kronos engines" in e, e
    p = KronosPredictor(kronos_engine, max_context=128)
    e = err(lambda: p.predict(x_df.drop(columns="close"), x_ts, y_ts, 16, top_k=1))
    assert "no price column close" in e and "open, high, low, close" in e, e
    nan = x_df.copy()
    nan.iloc[5, 2] = np.nan
    e = err(lambda: p.predict(nan, x_ts, y_ts, 16, top_k=1))
    assert "NaN in column low (row 5)" in e, e
    e = err(lambda: p.predict(x_df, None, y_ts, 16, top_k=1))
    assert "x_timestamp is missing" in e, e
    e = err(lambda: p.predict(x_df, x_ts.iloc[1:], y_ts, 16, top_k=1))
    assert "x_timestamp has 63 timestamps but df has 64 rows; give one timestamp per row of df" in e, e
    e = err(lambda: p.predict(x_df, x_ts, y_ts.iloc[:8], 16, top_k=1))
    assert "y_timestamp has 8 timestamps but pred_len is 16" in e, e
    swapped = x_ts.copy()
    swapped.iloc[[3, 4]] = swapped.iloc[[4, 3]].to_numpy()
    e = err(lambda: p.predict(x_df, swapped, y_ts, 16, top_k=1))
    assert "not in increasing time order (stamp 4" in e, e
    e = err(lambda: p.predict_batch([x_df], [x_ts, x_ts], [y_ts], 16))
    assert "1, 2, 1 items" in e, e
    e = err(lambda: KronosPredictor(kronos_engine, max_context=4096).predict(x_df, x_ts, y_ts, 16, top_k=1))
    assert "max_context" in e, e
