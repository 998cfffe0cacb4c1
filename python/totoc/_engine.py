"""``totoc.Engine``: an engine bundle loaded in this process, and its ``Forecast`` results."""

from __future__ import annotations

import os
import weakref
from dataclasses import dataclass
from typing import Any, Sequence, Union

import numpy as np

from . import _native, _runtime
from .errors import InvalidInput, RuntimeMissing

__all__ = ["Engine", "Forecast"]

#: What ``Engine.forecast`` takes as ``target``.
Target = Union[np.ndarray, Sequence[Any]]


@dataclass(frozen=True, eq=False)
class Forecast:
    """The forecasts of one ``Engine.forecast`` call, as numpy arrays.

    Shapes: ``N`` series, ``V`` variates (the most of any series; a series with fewer has NaN in the others),
    ``H`` horizon, ``Q`` quantile levels, ``S`` sample paths. The series axis ``N`` is there when the target was
    ``[N, V, T]`` or a list, and left out when it was one ``[V, T]`` array.

    Attributes:
        mean: ``[N, V, H]`` float32, the point forecast of a Toto 1.0 engine (the mean path, or the mean over the
            sample paths); ``None`` on a Toto 2.0 engine.
        median: ``[N, V, H]`` float32, the point forecast of a Toto 2.0 engine; ``None`` on a Toto 1.0 engine.
        quantiles: ``[Q, N, V, H]`` float32, one slice per level of ``quantile_levels``; ``None`` without levels.
        quantile_levels: ``[Q]`` float64, the levels, in the order asked (empty without levels).
        samples: ``[N, S, V, H]`` float32, the sample paths when ``samples > 0``; else ``None``.
        context_truncated: ``[N]`` bool (a bool for one series): whether the series had more points than the
            engine holds (``max_context``) and only its most recent ones were used.
        context_used: ``[N]`` int64 (an int for one series): the points of history each forecast used.
        engine: the engine that made them, e.g. ``cpu (onnxruntime 1.31.1)``.
    """

    mean: np.ndarray | None
    median: np.ndarray | None
    quantiles: np.ndarray | None
    quantile_levels: np.ndarray
    samples: np.ndarray | None
    context_truncated: np.ndarray | bool
    context_used: np.ndarray | int
    engine: str

    @property
    def point(self) -> np.ndarray:
        """The point forecast, whichever the model makes: ``mean`` (Toto 1.0) or ``median`` (Toto 2.0)."""
        return self.mean if self.mean is not None else self.median  # type: ignore[return-value]

    def quantile(self, level: float) -> np.ndarray:
        """The forecast at one of the levels asked for, e.g. ``f.quantile(0.9)`` (``[N, V, H]``)."""
        for i, q in enumerate(self.quantile_levels):
            if abs(q - level) <= 1e-9 and self.quantiles is not None:
                return self.quantiles[i]
        raise InvalidInput(
            f"quantile {level} was not asked for; this forecast has levels {list(map(float, self.quantile_levels))} "
            "(ask for it with quantiles=[...])"
        )


def _as_array(x: Any, what: str) -> Any:
    """``x`` as an array the engine reads without another copy: float32 / float64 arrays pass as they are;
    integer and bool arrays become float64, float16 float32 (one copy); nested lists are converted (``None`` and NaN
    mark missing points). Anything else is left for the engine to name in its error."""
    if isinstance(x, np.ndarray):
        if x.dtype.kind in "iub":
            return x.astype(np.float64)
        if x.dtype == np.float16:
            return x.astype(np.float32)
        return x
    if isinstance(x, (list, tuple)):
        try:
            return np.asarray(x, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise InvalidInput(
                f"{what} cannot be read as a [V, T] array of numbers ({e}); give a float array, NaN or None "
                "marking missing points"
            ) from None
    return x


#: numpy units a stamp is not written in, and the unit it is written in instead: a date needs its day, a time its
#: minutes, a fraction at most 9 digits.
_WRITTEN_AS = {"Y": "D", "M": "D", "W": "D", "h": "m", "ps": "ns", "fs": "ns", "as": "ns"}


def _written(t: Any) -> Any:
    """A numpy datetime64 value or array in a unit ``WallClock`` reads (see ``_WRITTEN_AS``)."""
    unit = np.datetime_data(t.dtype)[0]
    return t.astype(f"datetime64[{_WRITTEN_AS[unit]}]") if unit in _WRITTEN_AS else t


def _stamp_text(x: Any, where: str) -> str:
    """One stamp as ISO 8601 text, its wall clock as written: text as it is, a ``datetime`` / ``date`` /
    ``pandas.Timestamp`` by ``isoformat()`` (a zone-aware one keeps its local time and offset), a
    ``numpy.datetime64`` by ``numpy.datetime_as_string``."""
    if isinstance(x, str):
        return x
    if isinstance(x, np.datetime64):
        return str(np.datetime_as_string(_written(x)))
    if hasattr(x, "isoformat"):
        return str(x.isoformat())
    raise InvalidInput(
        f"{where} is a {type(x).__name__}; give stamps as ISO 8601 text, numpy datetime64, or datetime / "
        "pandas.Timestamp values"
    )


def _stamps(seq: Any, name: str, first: int | None, last: int | None) -> tuple[int, list[str]]:
    """One series' stamps as ``(count, text)``: the count the caller gave, and the text of the first ``first``
    (future stamps: no more than the horizon) or the last ``last`` of them (a history: the points the engine keeps),
    so a long history is not written out in full. ``seq``: a sequence of stamps, a numpy datetime64 array, or a
    pandas ``DatetimeIndex`` / ``Series`` (read through ``to_numpy()``: zone-aware values stay ``Timestamp``s)."""
    if isinstance(seq, (str, bytes)) or not hasattr(seq, "__len__"):
        raise InvalidInput(f"`{name}` must be a sequence of stamps, one per point, got a {type(seq).__name__}")
    if hasattr(seq, "to_numpy"):
        seq = seq.to_numpy()
    n = len(seq)
    if first is not None:
        part = seq[: min(n, first)]
    elif last is not None:
        part = seq[max(0, n - last) :]
    else:
        part = seq
    if isinstance(part, np.ndarray) and part.dtype.kind == "M":
        return n, [str(t) for t in np.datetime_as_string(_written(part))]
    return n, [_stamp_text(x, f"`{name}` item {i}") for i, x in enumerate(part)]


def _series_stamps(value: Any, name: str, single: bool, first: int | None, last: int | None) -> Any:
    """The stamps argument for every series: one sequence for one ``[V, T]`` series, else one per series."""
    if value is None:
        return None
    if single:
        return [_stamps(value, name, first, last)]
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        raise InvalidInput(f"`{name}` must be one sequence of stamps per series, got a {type(value).__name__}")
    return [_stamps(s, f"{name}[{i}]", first, last) for i, s in enumerate(value)]


#: The engines this process loaded and has not closed, for the at-fork hook below.
_LOADED: weakref.WeakSet[Engine] = weakref.WeakSet()


def _forget_after_fork() -> None:
    """In a child right after ``fork()``: every engine inherited from the parent becomes unusable (its calls raise
    ``TotocError`` saying to load the engine in the worker; ``closed`` is true) and is never released here (that
    would call into the parent's ONNX Runtime, which cannot run in the child). The engines check the process id
    on every call too, which also covers a ``fork()`` made outside Python."""
    for engine in list(_LOADED):
        engine._native.forget_after_fork()
    _LOADED.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def _targets(target: Any) -> Any:
    if isinstance(target, (list, tuple)):
        # a list of series ([V, T] each, of any lengths), unless it is one series written as nested lists
        if target and all(isinstance(t, (list, tuple)) for t in target) and all(
            not isinstance(v, (list, tuple, np.ndarray)) for t in target for v in t
        ):
            return _as_array(target, "target")
        return [_as_array(t, f"series {n}") for n, t in enumerate(target)]
    return _as_array(target, "target")


class Engine:
    """An engine bundle (``totoc build-engine``) loaded in this process.

    Args:
        path: the engine bundle's directory. Every file is checked against its sha256 in the manifest.
        threads: ONNX Runtime's CPU threads. The thread pool is the process's: the first engine loaded sets it
            (default: the count recorded in the engine, else the physical cores); later values only warn.
        memory_budget: bytes the engine may hold (its weights and loaded shape buckets), an ``int`` or a size such
            as ``"8G"``; default 80% of this container's or machine's memory.
        ort_lib: the ``libonnxruntime.so`` to load (default: see ``totoc._runtime``: ``$TOTOC_ORT_LIB``, then the
            installed ``onnxruntime`` package, then totoc's cache).

    Raises:
        BundleIntegrity: no engine at ``path``, or it is malformed or modified.
        RuntimeMissing: no ONNX Runtime library (``pip install 'totoc[cpu]'``).

    An engine is safe to share between threads; its calls are served one at a time (on the CPU they share one
    thread pool anyway, and one call at a time keeps the engine within its memory budget). Each call releases
    the GIL while the engine works, so other Python threads run meanwhile, and stops at a pending Ctrl-C
    (``KeyboardInterrupt``, raised between the engine's graph runs).

    An engine runs only in the process that loaded it. In a child made by ``fork()`` (multiprocessing's ``fork``
    start method, gunicorn ``--preload``) its calls raise ``TotocError`` at once, and so does a new ``Engine``
    there: load the engine in the worker, with the ``spawn`` or ``forkserver`` start method (docs/python.md).

    Example (an engine built from the repository's tiny checkpoint; the engine's limits are in ``info``)::

        import numpy as np, totoc

        with totoc.Engine("engine") as eng:
            f = eng.forecast(np.sin(np.arange(512.0))[None], horizon=64)
            f.mean.shape            # (1, 64): one variate, 64 steps
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        threads: int | None = None,
        memory_budget: int | str | None = None,
        *,
        ort_lib: str | os.PathLike[str] | None = None,
    ) -> None:
        lib = _runtime.resolve(ort_lib)
        try:
            self._native = _native.Engine(
                os.fspath(path), threads=threads, memory_budget=memory_budget, ort_lib=lib
            )
        except RuntimeMissing as e:
            raise RuntimeMissing(_runtime.failure_message(str(e))) from None
        _LOADED.add(self)

    @property
    def info(self) -> dict[str, Any]:
        """What the engine holds, e.g.::

            {"family": "toto-1.0", "title": "Toto 1.0", "point_forecast": "mean", "samples": True,
             "quantile_knots": None, "target": "cpu", "precision": "fp32", "fp16_emulation": False,
             "engine": "cpu (onnxruntime 1.31.1)", "ort_version": "1.31.1",
             "max_variates": 4, "max_context": 256, "max_horizon": 160, "max_samples": 256,
             "profiles": [{"name": "small", "batch": 2, "variates": 4, "context": 256, "horizon": 160,
                           "samples": 0, "decode_block": None}, ...],
             "memory_budget": 19327352832, "path": "/tmp/engine", "has_golden": False}

        ``max_*`` are the engine's limits (a longer context keeps its most recent ``max_context`` points);
        ``samples`` says whether the model draws sample paths (Toto 1.0) or predicts quantiles (Toto 2.0, at
        ``quantile_knots``).
        """
        return self._native.info

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._native.closed

    def close(self) -> None:
        """Releases the engine's graphs and weights (once calls in flight end). Later calls raise
        ``InvalidInput``; closing again does nothing. ``with totoc.Engine(...) as eng:`` closes it at the end."""
        self._native.close()
        _LOADED.discard(self)

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return repr(self._native)

    def forecast(
        self,
        target: Target,
        horizon: int,
        samples: int = 0,
        quantiles: Sequence[float] | None = None,
        seed: int | None = None,
        *,
        id_mask: Sequence[int] | Sequence[Sequence[int] | None] | None = None,
        strict_context: bool = False,
        columns: Sequence[str] | None = None,
        timestamps: Any = None,
        future_timestamps: Any = None,
        temperature: float | None = None,
        top_k: int | None = None,
        top_p: float | None = None,
        params: dict[str, float] | None = None,
    ) -> Forecast:
        """Forecasts one or more series.

        Args:
            target: the history, oldest first, NaN marking missing points: one series as a ``[V, T]`` array
                (``V`` variates sharing one time axis), ``N`` series as an ``[N, V, T]`` array, or a list of
                ``[V, T]`` arrays of any ``V`` and ``T``. float32 or float64 arrays are read in place; other
                numbers are converted first.
            horizon: steps to forecast (1 to ``info["max_horizon"]``).
            samples: Toto 1.0: sample paths to draw per series (0 = the mean path only). Toto 2.0 draws none.
            quantiles: levels in (0, 1) to report. Toto 1.0: from the sample paths (default ``[0.1, 0.5, 0.9]``
                when sampling, none otherwise; ``[]`` turns them off). Toto 2.0: any levels in [0.1, 0.9]
                (default its nine knots).
            seed: seed of the sample paths (default 0): the same series and seed give the same paths.
            id_mask: group ids >= 0 per variate (variates with equal ids are modelled jointly): one ``[V]``
                list for every series, or one per series (``None`` for the default, all 0).
            strict_context: a series longer than ``info["max_context"]`` is an error instead of keeping its most
                recent points.
            columns, timestamps, future_timestamps, temperature, top_k, top_p, params: the request fields of a
                model family that takes them (``docs/formats.md``, "Forecast request"), passed through as they are;
                an engine of a family that does not (Toto 1.0 and 2.0 take none of them) refuses each by name, as
                ``totoc forecast`` does. ``columns``: the names of each series' rows, in order. ``timestamps``: one
                stamp per point, oldest first (``future_timestamps``: one per forecast step), as ISO 8601 text,
                numpy ``datetime64``, ``datetime`` / ``pandas.Timestamp`` values, or a pandas ``DatetimeIndex`` /
                ``Series``; the wall clock is read as written (numpy and tz-naive values as they are; a tz-aware
                value in its own zone's wall clock: ``2024-03-10 09:30-04:00`` is 09:30). One sequence for a
                ``[V, T]`` series, else one per series. ``temperature``, ``top_k``, ``top_p``: sampling controls
                (with ``samples`` >= 1). ``params``: family parameters as one dict, e.g. Kronos's
                ``{"max_context": 256, "clip": 5}``.

        Returns:
            A :class:`Forecast` of numpy arrays (see its shapes).

        Raises:
            InvalidInput: a wrong type, shape or value, named with the series (``series 3: variate 1 has no
                observed point ...``).
            EngineLimit: beyond the engine's variates, horizon, samples (or context with ``strict_context``).
            TotocError: the engine was loaded by the process this one was forked from (load it in the worker);
                an internal error (a bug).
            KeyboardInterrupt: Ctrl-C while the engine ran (nothing is returned).

        Every series is checked before any is forecast; then all of them go to the engine together (in groups
        of 256, as ``totoc forecast`` sends them), so the numbers equal the CLI's for the same series in the same
        order, bit for bit.

        Copies: the target is read straight from the array's buffer (any strides); the points the engine keeps
        (the last ``max_context`` of each series) are copied once into the engine's request, 8 bytes per point
        (the value and whether it is missing), with the GIL held. A longer series' older points are scanned in
        place for the checks every point gets, not copied. Everything after runs without the GIL: validation,
        the engine's work, and copying the results once into the buffers the returned arrays own (4 bytes per
        value). Calls from several threads are served one at a time by the engine.

        Example::

            y = 10 + np.sin(np.arange(200) / 8).astype(np.float32)
            f = eng.forecast(y[None], horizon=24, samples=64, seed=7)
            f.mean.shape, f.quantiles.shape, f.samples.shape    # (1, 24), (3, 1, 24), (64, 1, 24)
            batch = eng.forecast([y[None], np.stack([y, 2 * y])], horizon=24)
            batch.mean.shape        # (2, 2, 24): 2 series, up to 2 variates (NaN where a series has fewer)
        """
        targets = _targets(target)
        single = isinstance(targets, np.ndarray) and targets.ndim == 2
        keep = int(self.info["max_context"])
        steps = horizon if isinstance(horizon, int) and horizon >= 0 else None
        out = self._native.forecast(
            targets,
            horizon,
            samples=samples,
            quantiles=quantiles,
            seed=seed,
            id_mask=id_mask,
            strict_context=strict_context,
            columns=columns,
            timestamps=_series_stamps(timestamps, "timestamps", single, None, keep),
            future_timestamps=_series_stamps(future_timestamps, "future_timestamps", single, steps, None),
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            params=params,
        )
        return Forecast(**out)

    # --- tables (python/totoc/_table.py) ---------------------------------------------------------------------

    def predict_df(
        self,
        df: Any,
        prediction_length: int,
        quantile_levels: Sequence[float] | None = None,
        id_column: str | None = None,
        timestamp_column: str | None = None,
        target: str | Sequence[str] | None = None,
        *,
        samples: int | None = None,
        seed: int | None = None,
        freq: str | None = None,
        calendar: str = "auto",
        timezone: str | None = None,
        holidays: str | os.PathLike[str] | None = None,
        timestamp_unit: str = "s",
        strict_context: bool = False,
        write_samples: bool = False,
        layout: str | None = None,
        temperature: float | None = None,
        top_k: int | None = None,
        top_p: float | None = None,
        params: dict[str, float] | None = None,
    ) -> Any:
        """Forecasts every series of a long table, as ``totoc forecast`` forecasts a CSV or Parquet table.

        Args:
            df: a pandas or polars DataFrame, or any Arrow table (an object with ``__arrow_c_stream__``, e.g. a
                ``pyarrow.Table``): one row per series and time step.
            prediction_length: steps to forecast (1 to ``info["max_horizon"]``).
            quantile_levels: levels in (0, 1), one column each. Default as ``totoc forecast``: Toto 1.0 none on
                the mean path, ``[0.1, 0.5, 0.9]`` with ``samples``; Toto 2.0 none (ask for any in [0.1, 0.9];
                levels between its knots are interpolated, with a warning).
            id_column: the series id column (text or integers). ``None`` (the default): a column named as
                ``totoc forecast`` recognises ids (``unique_id``, ``item_id``, ``id``, ``series_id``: Nixtla's,
                Chronos's and AutoGluon's names, any case), else the table is one series.
            timestamp_column: the time column (timestamps, dates, ISO 8601 text or integer epochs in
                ``timestamp_unit``; a time zone such as pandas ``tz=`` is kept and read as the series' zone).
                ``None`` (the default): a column named ``ds``, ``timestamp``, ``date`` or ``time``, else the rows
                are in time order without timestamps.
            target: the value column, or a list of them (the variates of each series). ``None`` (the default):
                as ``totoc forecast``: with an id column, the one named ``y``, ``target`` or ``value`` (else every
                other column); without, every column but the timestamp.
            samples: Toto 1.0: sample paths per series (the mean and quantiles come from them).
            seed: seed of the sample paths (default 0).
            freq: a step forced on every series (``"1h"``, ``"1d"``, ``"1mo"``...) instead of inferring each one's.
            calendar: ``"auto"`` (daily data with no weekend rows is on a Mon–Fri session calendar, so forecasts
                skip weekends), ``"continuous"`` or ``"weekdays"``; ``timezone`` and ``holidays`` (a file of dates)
                refine it.
            strict_context: a series longer than the engine's context is an error instead of keeping its most
                recent points (a warning says how many were cut).
            write_samples: also return each sample path as a column ``sample_0``, ``sample_1``...
            layout: ``None`` (the model's default), ``"long"`` or ``"wide"``: see Returns.
            temperature, top_k, top_p, params: the sampling controls and family parameters (e.g.
                ``params={"max_context": 256, "clip": 5}``) of a model that takes them (Kronos), applied to every
                series, as ``totoc forecast --temperature / --top-k / --top-p / --param``; a Toto engine refuses
                each by name.

        Returns:
            The same kind of table as ``df`` (pandas → pandas, polars → polars, other Arrow → ``pyarrow.Table``),
            the table ``totoc forecast`` writes, one row per series, (variate,) step: ``id_column`` (the input's
            name and type), ``timestamp_column`` holding the future timestamps (or ``step`` 1, 2, ... without
            timestamps), ``target_name`` when ``target`` lists several columns, the point forecast (``mean`` on
            Toto 1.0, ``median`` on Toto 2.0), ``q0.1``, ``q0.5``... per quantile level, and ``context_truncated``
            (bool). Series appear in order of first appearance in ``df``. That is the long layout, the default of
            models with unnamed variates (Toto). A model whose inputs are named columns (Kronos: ``open``, ``high``,
            ``low``, ``close``, ``volume``, ``amount``) returns the wide layout by default: one row per series and
            step, the point forecast under each input column's name (in the model's order), then
            ``<column>_q<level>`` per column and level (``close_q0.1``), ``<column>_sample_<i>`` with
            ``write_samples``, and ``context_truncated``. ``layout="long"`` gives it the long layout.

        Raises:
            InvalidInput: an unknown column, a column of the wrong type, a series with no value, duplicate or
                irregular timestamps, ... with ``totoc forecast``'s message (``df: series a: ...``).
            EngineLimit: a horizon, variate count or sample count beyond the engine.

        The numbers equal ``totoc forecast``'s on the same table bit for bit: both run the same Rust code
        (``tables`` crate) from reading the rows to building the output table.

        Example::

            import pandas as pd

            df = pd.DataFrame({"unique_id": ["a"] * 300, "ds": pd.date_range("2024-01-01", periods=300, freq="h"),
                               "y": range(300)})
            out = eng.predict_df(df, prediction_length=24, samples=64, quantile_levels=[0.1, 0.9])
            list(out.columns)   # ['unique_id', 'ds', 'mean', 'q0.1', 'q0.9', 'context_truncated']
        """
        from . import _table

        return _table.predict_df(
            self._native,
            df,
            prediction_length,
            quantile_levels,
            id_column,
            timestamp_column,
            target,
            samples=samples,
            seed=seed,
            freq=freq,
            calendar=calendar,
            timezone=timezone,
            holidays=holidays,
            timestamp_unit=timestamp_unit,
            strict_context=strict_context,
            write_samples=write_samples,
            layout=layout,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            params=params,
        )

    def cross_validation(
        self,
        df: Any,
        h: int,
        n_windows: int,
        step_size: int | None = None,
        *,
        id_column: str | None = None,
        timestamp_column: str | None = None,
        target: str | Sequence[str] | None = None,
        model: str = "totoc",
        context: int | None = None,
        samples: int = 0,
        quantile_levels: Sequence[float] | None = None,
        seed: int = 0,
        chunk: int = 512,
        freq: str | None = None,
        calendar: str = "auto",
        timezone: str | None = None,
        holidays: str | os.PathLike[str] | None = None,
        timestamp_unit: str = "s",
        layout: str | None = None,
        temperature: float | None = None,
        top_k: int | None = None,
        top_p: float | None = None,
        params: dict[str, float] | None = None,
    ) -> Any:
        """Rolling-origin forecasts of every series of a long table, as ``totoc backtest`` makes them, in Nixtla's
        ``cross_validation`` layout.

        Each series gets ``n_windows`` windows of ``h`` steps whose cutoffs are ``step_size`` grid steps apart
        (default ``h``: windows that do not overlap), the last ending at the series' last point; each window is
        forecast from the points at or before its cutoff only (its most recent ``context`` of them, default the
        engine's ``max_context``). Same reading of the table (columns, types, calendars, errors) as
        :meth:`predict_df`; windows are packed ``chunk`` per engine call as ``totoc backtest --chunk`` does.

        Args:
            df: a pandas or polars DataFrame or any Arrow table, one row per series and time step.
            h: steps per window. n_windows: windows per series. step_size: grid steps between cutoffs.
            model: the name of the forecast column (Nixtla names it after the model).
            samples, quantile_levels, seed: as ``totoc backtest``: quantiles default to ``[0.1, 0.5, 0.9]`` when
                sampling (Toto 1.0) or on a Toto 2.0 engine, none on Toto 1.0's mean path.

        Returns:
            The kind of table ``df`` is, one row per series, window and step: ``unique_id``, ``ds`` (the
            timestamp column's name and type), ``cutoff`` (the window's last observed timestamp), ``y`` (the
            actual value), ``<model>`` (the point forecast: Toto 1.0's mean, Toto 2.0's median), then
            ``<model>-lo-<L>`` / ``<model>-hi-<L>`` for the levels of a central ``L`` % interval (0.1 and 0.9:
            ``-lo-80``, ``-hi-80``), ``<model>-median`` for 0.5 and ``<model>-q<level>`` for a level outside any
            whole-percent interval; the columns of ``totoc backtest --output`` for one engine labelled
            ``model`` (without its ``naive`` / ``seasonal_naive`` baselines).

        On a model whose inputs are named columns (Kronos: ``target=["open", "high", "low", "close", "volume"]``,
        or the columns :meth:`predict_df` recognises), each series is read as :meth:`predict_df` reads it, its rows
        as given, and its windows are cut over those rows: a window's cutoff is a row, its context the rows at or
        before that row's timestamp (the most recent ``context`` of them), its steps the ``h`` rows after it (their
        timestamps are the forecast steps'). ``temperature``, ``top_k``, ``top_p`` and ``params`` are passed to
        every window's request (a model without them refuses each by name). The table is the model's
        :meth:`predict_df` table (wide by default: the point forecast under each column's name, then
        ``<column>_q<level>``; ``layout="long"``: a row per column and step) with ``cutoff`` (the cutoff row's
        timestamp) after the timestamp column, one block of rows per window; ``model`` names no column there,
        and the actual values are the input's rows after each cutoff (no ``y`` column).

        Example::

            cv = eng.cross_validation(df, h=24, n_windows=3, samples=64)
            list(cv.columns)   # ['unique_id', 'ds', 'cutoff', 'y', 'totoc', 'totoc-lo-80', 'totoc-median', 'totoc-hi-80']
        """
        from . import _table

        return _table.cross_validation(
            self._native,
            df,
            h,
            n_windows,
            step_size,
            id_column=id_column,
            timestamp_column=timestamp_column,
            target=target,
            model=model,
            context=context,
            samples=samples,
            quantile_levels=quantile_levels,
            seed=seed,
            chunk=chunk,
            freq=freq,
            calendar=calendar,
            timezone=timezone,
            holidays=holidays,
            timestamp_unit=timestamp_unit,
            layout=layout,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            params=params,
        )
