"""A drop-in for Kronos's ``KronosPredictor`` (shiyu-coder/Kronos, as vendored in kronos-finance 0.1.5) over a totoc
Kronos engine.

An upstream script changes its imports and the line that builds the predictor::

    # before (upstream)
    from model import Kronos, KronosTokenizer, KronosPredictor
    tokenizer = KronosTokenizer.from_pretrained("NeoQuasar/Kronos-Tokenizer-base")
    model = Kronos.from_pretrained("NeoQuasar/Kronos-small")
    predictor = KronosPredictor(model, tokenizer, max_context=512)

    # after (totoc)
    import totoc
    from totoc.compat.kronos import KronosPredictor
    predictor = KronosPredictor(totoc.Engine("engine-kronos-small"), max_context=512)

    # unchanged
    pred_df = predictor.predict(df=x_df, x_timestamp=x_ts, y_timestamp=y_ts, pred_len=120, T=1.0, top_p=0.9,
                                sample_count=1)
    pred_dfs = predictor.predict_batch(df_list=[x_df, x_df2], x_timestamp_list=[x_ts, x_ts2],
                                       y_timestamp_list=[y_ts, y_ts2], pred_len=120)

Results are upstream's: a ``pandas.DataFrame`` per series with the columns ``open, high, low, close, volume,
amount``, indexed by ``y_timestamp``, holding the mean of the sampled paths (in normalised space, de-normalised, as
upstream). The engine reproduces upstream in **eval mode** (upstream's ``from_pretrained`` → predictor path runs in
training mode, with dropout live: docs/guide.md).

How the arguments are read:

* ``df``: a DataFrame with ``open, high, low, close`` (required), ``volume`` and ``amount`` (optional): upstream's
  rules, computed here as upstream computes them (pandas, float64): no ``volume`` → ``volume`` and ``amount`` are 0
  (even when ``amount`` is given); no ``amount`` → ``volume × mean(open, high, low, close)``. All six columns go to
  the engine, so a derived column comes back as upstream returns it (a zero column: ``pred × 1e-5``). NaN in any of
  them is an ``InvalidInput`` naming the column. Other columns are ignored, as upstream ignores them.
* ``x_timestamp`` / ``y_timestamp``: a pandas ``Series`` **or** a ``DatetimeIndex`` (upstream raises on the latter),
  one stamp per row of ``df`` / per forecast step, in time order. The wall clock is read as written (a zone-aware
  stamp in its own zone's wall clock, as upstream's ``.dt`` reads it). Lengths are checked (upstream's ``predict``
  does not check ``len(y_timestamp) == pred_len`` and fails later); stamps out of order are refused.
* ``T``, ``top_k``, ``top_p``, ``sample_count``: upstream's sampling controls. ``top_k=1`` is the greedy path (one
  path, whatever ``sample_count``: every path would be the same). Otherwise ``sample_count`` paths are drawn with
  temperature ``T``; ``top_k > 0`` ignores ``top_p``, as upstream.
* ``verbose``: accepted and ignored (no progress bar).
* ``seed`` (keyword, totoc's): the seed of the paths. ``None`` (the default): drawn from torch's global generator
  (``torch.randint``) when torch is importable, else from numpy's global generator (``numpy.random.randint``), so a
  script that calls ``torch.manual_seed(s)`` (or ``numpy.random.seed(s)`` without torch) before predicting gets
  the same result each run. A path's draws depend only on the seed and its own index, not on the other series of a
  batch (upstream's do), so ``predict_batch`` gives each series what ``predict`` gives it with the same seed.
* ``return_paths`` (keyword, totoc's): ``True`` returns a :class:`Prediction` (``mean``: the DataFrame above,
  ``paths``: ``[S, pred_len, 6]`` float32, ``quantiles``: a DataFrame per level of ``quantiles``, default 0.1, 0.5,
  0.9) instead of the DataFrame. On the greedy path ``paths`` is the one path and every quantile equals it.
* ``predict_batch`` also takes series of **different lengths** (a superset of upstream, which requires equal
  lengths) and different ``y_timestamp`` lists of ``pred_len`` stamps each.
* ``KronosPredictor(engine, max_context=512, clip=5, device=None)``: ``max_context`` and ``clip`` are passed to the
  engine (``params``; ``max_context`` at most the engine's window, else the engine's error names it); ``device`` is
  accepted and ignored (the engine runs where it was built). A history longer than the engine's ``max_context``
  rows (``engine.info``) keeps its most recent rows, with a ``RuntimeWarning`` (upstream normalises over all
  rows).
* Any engine but a Kronos one is refused (``InvalidInput``).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .._engine import Engine
from ..errors import InvalidInput
from ._arrays import check_engine, torch

__all__ = ["KronosPredictor", "Prediction", "COLUMNS"]

#: The columns of upstream's results, in its order.
COLUMNS = ("open", "high", "low", "close", "volume", "amount")
PRICES = list(COLUMNS[:4])


@dataclass(frozen=True)
class Prediction:
    """``predict(..., return_paths=True)``: the mean DataFrame, the paths ``[S, pred_len, 6]`` and a DataFrame per
    quantile level (same index and columns as ``mean``)."""

    mean: Any
    paths: np.ndarray
    quantiles: dict[float, Any]


def _seed() -> int:
    """A seed drawn from torch's global generator (or numpy's without torch): see the module docs."""
    if torch is not None:
        return int(torch.randint(0, 2**62, (1,)).item())
    return int(np.random.randint(0, 2**62, dtype=np.int64))


def _frame(df: Any, where: str) -> np.ndarray:
    """``df``'s six columns by upstream's rules, ``[6, N]`` float64 (see the module docs)."""
    import pandas as pd

    if not isinstance(df, pd.DataFrame):
        raise InvalidInput(f"{where} is a {type(df).__name__}; give a pandas DataFrame with open, high, low, close")
    missing = [c for c in PRICES if c not in df.columns]
    if missing:
        raise InvalidInput(
            f"{where} has no price column {', '.join(missing)} (it has {list(map(str, df.columns))}); give the "
            "lowercase columns open, high, low, close (volume and amount are optional)"
        )
    df = df.copy()
    if "volume" not in df.columns:
        df["volume"] = 0.0
        df["amount"] = 0.0
    if "amount" not in df.columns:
        df["amount"] = df["volume"] * df[PRICES].mean(axis=1)
    values = df[list(COLUMNS)]
    nan = values.isnull()
    if nan.values.any():
        column = str(nan.any(axis=0).idxmax())
        row = int(np.argmax(nan[column].to_numpy()))
        raise InvalidInput(
            f"{where} has NaN in column {column} (row {row}); Kronos reads no missing value: fill or drop the rows"
        )
    return np.ascontiguousarray(values.to_numpy(dtype=np.float64).T)


def _stamps(ts: Any, want: int, name: str, what: str, count: str) -> Any:
    """``ts`` (a pandas Series or DatetimeIndex) checked: ``want`` stamps (one per ``what``; ``count`` says how
    many are needed), in time order."""
    import pandas as pd

    if ts is None:
        raise InvalidInput(f"{name} is missing; give one timestamp per {what} (a pandas Series or DatetimeIndex)")
    if isinstance(ts, pd.Series):
        index = pd.DatetimeIndex(ts) if ts.dtype.kind == "M" or str(ts.dtype).startswith("datetime") else None
    elif isinstance(ts, pd.DatetimeIndex):
        index = ts
    else:
        index = None
    if index is None:
        raise InvalidInput(
            f"{name} is a {type(ts).__name__}; give a pandas Series of datetimes or a DatetimeIndex, one per {what}"
        )
    if len(index) != want:
        raise InvalidInput(f"{name} has {len(index)} timestamps but {count}; give one timestamp per {what}")
    if index.hasnans:
        raise InvalidInput(f"{name} has a missing timestamp (NaT); give one timestamp per {what}")
    if not index.is_monotonic_increasing or not index.is_unique:
        bad = int(np.argmax(np.diff(index.asi8) <= 0)) + 1
        raise InvalidInput(
            f"{name} is not in increasing time order (stamp {bad}, {index[bad]}, is not after the one before); "
            "give them oldest first, one stamp each"
        )
    return index


class KronosPredictor:
    """Kronos's ``KronosPredictor`` on a totoc Kronos engine (see the module docs).

    Args:
        engine: a :class:`totoc.Engine` of a Kronos model (``engine.info["family"] == "kronos"``).
        max_context: the window of the autoregressive loop (upstream's default 512; at most the engine's window).
        clip: the normalised values' clip (upstream's default 5).
        device: ignored (upstream's torch device).

    Raises:
        InvalidInput: the engine is not a Kronos engine.
    """

    def __init__(self, engine: Engine, max_context: int = 512, clip: float = 5, device: Any = None) -> None:
        check_engine(
            engine,
            "KronosPredictor",
            "kronos",
            "Toto use totoc.compat.toto_ts.TotoForecaster or totoc.compat.toto2.Toto2Model",
        )
        self.engine = engine
        self.max_context = max_context
        self.clip = clip
        self.device = device
        self.price_cols = PRICES
        self.vol_col = "volume"
        self.amt_vol = "amount"

    def predict(
        self,
        df: Any,
        x_timestamp: Any,
        y_timestamp: Any,
        pred_len: int,
        T: float = 1.0,
        top_k: int = 0,
        top_p: float = 0.9,
        sample_count: int = 1,
        verbose: bool = True,
        *,
        seed: int | None = None,
        return_paths: bool = False,
        quantiles: Sequence[float] = (0.1, 0.5, 0.9),
    ) -> Any:
        """One series' forecast: upstream's DataFrame (``return_paths``: a :class:`Prediction`)."""
        return self._run(
            [df], [x_timestamp], [y_timestamp], pred_len, T, top_k, top_p, sample_count, seed, return_paths,
            quantiles, single=True,
        )[0]

    def predict_batch(
        self,
        df_list: Sequence[Any],
        x_timestamp_list: Sequence[Any],
        y_timestamp_list: Sequence[Any],
        pred_len: int,
        T: float = 1.0,
        top_k: int = 0,
        top_p: float = 0.9,
        sample_count: int = 1,
        verbose: bool = True,
        *,
        seed: int | None = None,
        return_paths: bool = False,
        quantiles: Sequence[float] = (0.1, 0.5, 0.9),
    ) -> list[Any]:
        """Several series in one engine call (of any lengths): a list of upstream's DataFrames, in order."""
        lists = (df_list, x_timestamp_list, y_timestamp_list)
        if not all(isinstance(x, (list, tuple)) for x in lists):
            raise InvalidInput("df_list, x_timestamp_list, y_timestamp_list must be lists (or tuples), as upstream")
        if not len(df_list) == len(x_timestamp_list) == len(y_timestamp_list):
            raise InvalidInput(
                f"df_list, x_timestamp_list, y_timestamp_list have {len(df_list)}, {len(x_timestamp_list)}, "
                f"{len(y_timestamp_list)} items; give one of each per series"
            )
        if not df_list:
            raise InvalidInput("df_list is empty; give at least one series")
        return self._run(
            list(df_list), list(x_timestamp_list), list(y_timestamp_list), pred_len, T, top_k, top_p,
            sample_count, seed, return_paths, quantiles, single=False,
        )

    def _run(
        self,
        dfs: list[Any],
        xs: list[Any],
        ys: list[Any],
        pred_len: int,
        T: float,
        top_k: int,
        top_p: float,
        sample_count: int,
        seed: int | None,
        return_paths: bool,
        levels: Sequence[float],
        single: bool,
    ) -> list[Any]:
        import pandas as pd

        if isinstance(pred_len, bool) or not isinstance(pred_len, (int, np.integer)) or pred_len < 1:
            raise InvalidInput(f"pred_len is {pred_len!r}; give the number of steps to forecast (an integer >= 1)")
        targets, stamps, futures, indexes = [], [], [], []
        for i, (df, x, y) in enumerate(zip(dfs, xs, ys)):
            label = (lambda n: n) if single else (lambda n: f"{n}_list[{i}]")  # noqa: B023 - used at once
            target = _frame(df, label("df"))
            targets.append(target)
            rows = target.shape[1]
            stamps.append(_stamps(x, rows, label("x_timestamp"), f"row of {label('df')}", f"{label('df')} has {rows} rows"))
            futures.append(_stamps(y, int(pred_len), label("y_timestamp"), "forecast step", f"pred_len is {pred_len}"))
            indexes.append(y)
        keep = int(self.engine.info["max_context"])
        longest = max(t.shape[1] for t in targets)
        if longest > keep:
            warnings.warn(
                f"a history of {longest} rows is longer than the engine's {keep}: its most recent {keep} rows are "
                "used (upstream normalises over all of them)",
                RuntimeWarning,
                stacklevel=3,
            )
        greedy = top_k == 1
        samples = 0 if greedy else int(sample_count)
        if not greedy and samples < 1:
            raise InvalidInput(f"sample_count is {sample_count}; give 1 or more paths")
        sampling: dict[str, Any] = {} if greedy else {"temperature": T, "top_k": top_k, "top_p": top_p}
        f = self.engine.forecast(
            targets,
            int(pred_len),
            samples=samples,
            quantiles=None if greedy else list(levels),
            seed=None if greedy else (_seed() if seed is None else seed),
            columns=list(COLUMNS),
            timestamps=stamps,
            future_timestamps=futures,
            params={"max_context": self.max_context, "clip": self.clip},
            **sampling,
        )
        out = []
        for n, index in enumerate(indexes):
            mean = np.asarray(f.point[n]).T  # [H, 6]
            frame = pd.DataFrame(mean, columns=list(COLUMNS), index=index)
            if not return_paths:
                out.append(frame)
                continue
            if greedy:
                paths = mean[None].copy()
                qs = {float(q): frame.copy() for q in levels}
            else:
                paths = np.transpose(np.asarray(f.samples[n]), (0, 2, 1))
                qs = {
                    float(q): pd.DataFrame(np.asarray(f.quantiles[k][n]).T, columns=list(COLUMNS), index=index)
                    for k, q in enumerate(f.quantile_levels)
                }
            out.append(Prediction(mean=frame, paths=paths, quantiles=qs))
        return out
