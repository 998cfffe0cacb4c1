"""Batch forecasting on Ray Data: ``totoc.ray.Forecaster``, a callable class for ``Dataset.map_batches`` that
loads the engine once per actor process and forecasts whole series with :meth:`totoc.Engine.predict_df`.

Series never straddle batches because each row of the dataset is one whole series (list columns): Ray Data cuts
batches by rows, so a long table (one row per time step) would have its series cut at batch boundaries, and a
series cut in two is forecast from half its history. :func:`pack` turns a long pandas table into that shape;
for data already on the cluster, ``ds.groupby("unique_id").map_groups(totoc.ray.pack, batch_format="pandas")``
packs it there. The output is ``predict_df``'s long forecast table (one row per series and step), so the batch
results concatenate into the table one ``predict_df`` over all the series gives.

Example::

    import ray, totoc.ray

    ds = ray.data.from_pandas(totoc.ray.pack(history))          # history: unique_id, ds, y (long)
    forecasts = ds.map_batches(
        totoc.ray.Forecaster,
        fn_constructor_args=("engine", 24),                       # engine bundle (on every node), horizon
        fn_constructor_kwargs={"quantile_levels": [0.1, 0.9], "samples": 64, "threads": 1},
        batch_size=256,                                           # series per batch
        batch_format="pandas",
        compute=ray.data.ActorPoolStrategy(size=4),               # four actors, one engine each
        num_cpus=1,
        max_restarts=-1, max_task_retries=-1,                     # a lost actor is restarted, its batch retried
    ).to_pandas()

Every actor process loads the engine once (``Forecaster`` instances in one process share it, as they share
ONNX Runtime's thread pool): give ``threads`` so that actors × threads fits the node's cores. With sample paths
and a fixed ``seed``, a series' samples depend on the other series of its engine call; point forecasts agree with
one ``predict_df`` to float32 rounding (``python/tests/test_ray.py`` checks 2,000 series).

The engine path must exist on every node that runs an actor (a shared file system, or the same path everywhere).
Ray itself is not a dependency of totoc: ``pip install ray[data]``.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Sequence

from ._engine import Engine
from .errors import InvalidInput

__all__ = ["Forecaster", "pack", "engine_loads"]

#: The engines this process has loaded, by (path, threads, memory budget, ort_lib): one per actor process.
_ENGINES: dict[tuple[Any, ...], Engine] = {}
_LOCK = threading.Lock()
_LOADS = 0


def engine_loads() -> int:
    """How many engines this process has loaded through :class:`Forecaster` (one per distinct engine path and
    options, however many ``Forecaster`` objects use it)."""
    return _LOADS


def _engine(path: str, threads: int | None, memory_budget: int | str | None, ort_lib: str | None) -> Engine:
    global _LOADS
    key = (os.path.abspath(path), threads, memory_budget, ort_lib)
    with _LOCK:
        eng = _ENGINES.get(key)
        if eng is None or eng.closed:
            eng = Engine(path, threads=threads, memory_budget=memory_budget, ort_lib=ort_lib)
            _ENGINES[key] = eng
            _LOADS += 1
        return eng


def _targets(target: str | Sequence[str]) -> list[str]:
    return [target] if isinstance(target, str) else list(target)


def pack(
    df: Any,
    id_column: str = "unique_id",
    timestamp_column: str | None = "ds",
    target: str | Sequence[str] = "y",
) -> Any:
    """A long pandas table (one row per series and time step) as one row per series: ``id_column`` and a list per
    other column (``timestamp_column`` and each ``target``), in order of first appearance, rows of a series in
    their table order. The shape :class:`Forecaster` takes.

    >>> import pandas as pd, totoc.ray
    >>> long = pd.DataFrame({"unique_id": ["a", "a", "b"], "ds": [1, 2, 1], "y": [1.0, 2.0, 5.0]})
    >>> totoc.ray.pack(long)
      unique_id      ds           y
    0         a  [1, 2]  [1.0, 2.0]
    1         b     [1]       [5.0]
    """
    import pandas as pd

    if not isinstance(df, pd.DataFrame):
        raise InvalidInput(f"pack takes a pandas DataFrame, not {type(df).__name__}; convert it with .to_pandas()")
    columns = ([timestamp_column] if timestamp_column else []) + _targets(target)
    missing = [c for c in [id_column, *columns] if c not in df.columns]
    if missing:
        raise InvalidInput(f"pack: no column {missing[0]!r} in the table (its columns: {list(df.columns)})")
    return df.groupby(id_column, sort=False)[columns].agg(list).reset_index()


class Forecaster:
    """Forecasts Ray Data batches of whole series with one engine per process; for ``Dataset.map_batches``.

    Args:
        engine: the engine bundle directory (the same path on every node).
        prediction_length: steps to forecast.
        quantile_levels: as :meth:`totoc.Engine.predict_df`.
        id_column, timestamp_column, target: the batch's columns: one row per series, ``id_column`` a scalar,
            ``timestamp_column`` (or ``None``) and each ``target`` a list (:func:`pack` makes this shape).
        threads, memory_budget, ort_lib: as :class:`totoc.Engine`, for the engine each process loads.
        **predict_kwargs: the other arguments of ``predict_df`` (``samples``, ``seed``, ``freq``, ``calendar``...).

    Calling it with a batch (pandas DataFrame, a dict of numpy arrays or a pyarrow Table) returns a pandas
    DataFrame: ``predict_df``'s forecast table of the batch's series.
    """

    def __init__(
        self,
        engine: str | os.PathLike[str],
        prediction_length: int,
        quantile_levels: Sequence[float] | None = None,
        *,
        id_column: str = "unique_id",
        timestamp_column: str | None = "ds",
        target: str | Sequence[str] = "y",
        threads: int | None = None,
        memory_budget: int | str | None = None,
        ort_lib: str | os.PathLike[str] | None = None,
        **predict_kwargs: Any,
    ) -> None:
        self.engine = _engine(
            os.fspath(engine), threads, memory_budget, None if ort_lib is None else os.fspath(ort_lib)
        )
        self.prediction_length = prediction_length
        self.quantile_levels = quantile_levels
        self.id_column = id_column
        self.timestamp_column = timestamp_column
        self.target = target
        self.predict_kwargs = predict_kwargs

    def unpack(self, batch: Any) -> Any:
        """A batch of one row per series as the long table ``predict_df`` reads."""
        import pandas as pd

        if not isinstance(batch, pd.DataFrame):
            batch = batch.to_pandas() if hasattr(batch, "to_pandas") else pd.DataFrame(dict(batch))
        columns = ([self.timestamp_column] if self.timestamp_column else []) + _targets(self.target)
        missing = [c for c in [self.id_column, *columns] if c not in batch.columns]
        if missing:
            raise InvalidInput(
                f"totoc.ray.Forecaster: no column {missing[0]!r} in the batch (its columns: {list(batch.columns)}); "
                "each row must be one whole series with list columns (totoc.ray.pack makes them)"
            )
        for c in columns:
            bad = batch[c].map(lambda v: isinstance(v, (str, bytes)) or not hasattr(v, "__len__"))
            if bad.any():
                sid = batch[self.id_column][bad].iloc[0]
                raise InvalidInput(
                    f"totoc.ray.Forecaster: series {sid!r}: column {c!r} holds a scalar, not the list of the whole "
                    "series; give one row per series (totoc.ray.pack) so that no series straddles two batches"
                )
        lengths = batch[columns[0]].map(len)
        for c in columns[1:]:
            unequal = batch[c].map(len) != lengths
            if unequal.any():
                sid = batch[self.id_column][unequal].iloc[0]
                raise InvalidInput(
                    f"totoc.ray.Forecaster: series {sid!r}: column {c!r} has {len(batch[c][unequal].iloc[0])} "
                    f"values, column {columns[0]!r} {lengths[unequal].iloc[0]}; every list of a series must be "
                    "as long"
                )
        long = batch[[self.id_column, *columns]].explode(columns, ignore_index=True)
        # explode leaves object columns: back to the lists' own types (floats, timestamps, integers)
        return long.infer_objects()

    def __call__(self, batch: Any) -> Any:
        return self.engine.predict_df(
            self.unpack(batch),
            self.prediction_length,
            self.quantile_levels,
            id_column=self.id_column,
            timestamp_column=self.timestamp_column,
            target=self.target,
            **self.predict_kwargs,
        )
