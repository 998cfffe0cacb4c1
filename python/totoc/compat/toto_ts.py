"""A drop-in for toto-ts 0.2.0's ``TotoForecaster`` (Toto 1.0) over a totoc engine.

A toto-ts script changes its imports and the line that builds the forecaster::

    # before (toto-ts)
    from toto.data.util.dataset import MaskedTimeseries
    from toto.inference.forecaster import TotoForecaster
    from toto.model.toto import Toto
    forecaster = TotoForecaster(Toto.from_pretrained("Datadog/Toto-Open-Base-1.0").model)

    # after (totoc)
    import totoc
    from totoc.compat.toto_ts import MaskedTimeseries, TotoForecaster
    forecaster = TotoForecaster(totoc.Engine("engine"))

    # unchanged
    inputs = MaskedTimeseries(series=x, padding_mask=m, id_mask=ids, timestamp_seconds=ts,
                              time_interval_seconds=dt)
    fc = forecaster.forecast(inputs, prediction_length=336, num_samples=256, samples_per_batch=256)
    fc.median, fc.quantile(0.9), fc.std, fc.samples      # [B, V, H], [B, V, H], [B, V, H], [B, V, H, S]

The result is toto-ts's own ``Forecast`` when toto-ts is importable and the inputs are torch tensors, else
:class:`Forecast` here (the same frozen dataclass). Outputs are on the inputs' device and in their float dtype
(numpy arrays in give numpy arrays out). The engine computes in its own precision (fp32 engines: toto-ts's
numbers within ``1e-4·σ + 1e-6·|ref|``; sample paths are other draws of the same distribution).

What the drop-in reads of :class:`MaskedTimeseries` (or any object with its fields):

* ``series`` ``[B, V, T]`` or ``[V, T]`` (a batch axis of 1 is added, as toto-ts does).
* ``padding_mask`` (``True`` = an observed point): ``False`` points are missing (NaN to the engine). toto-ts still
  feeds a masked point's value to the model (only its scaler ignores it); the results agree when masked points
  hold 0, which is how toto-ts's own data loaders pad. A NaN in ``series`` is missing too.
* ``id_mask``: one group id per variate, constant along time (``[..., V, T]`` or ``[..., V, 1]``); an id that
  changes along time is refused (the engine holds one id per variate). Ids are compared for equality only.
* ``timestamp_seconds``, ``time_interval_seconds``: ignored, as toto-ts 0.2.0's model ignores them.
* ``num_exogenous_variables``: must be 0 (refused otherwise; the engines have no exogenous inputs).

``forecast`` arguments: ``samples_per_batch`` is ignored (the engine sizes its own batches; toto-ts's
requirement that it divide ``num_samples`` is not applied); ``use_kv_cache=False`` is ignored (the engine always
decodes with its KV cache, which toto-ts's mean and sample paths do not depend on); ``future_exogenous_variables``
is refused. A context longer than the engine's ``max_context`` keeps its most recent points (a
``RuntimeWarning`` says so; toto-ts would use all of it). The sample paths' seed is drawn from torch's default
generator when none is given, so a script that calls ``torch.manual_seed`` gets the same forecasts each run
(numpy's global generator without torch).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from .._engine import Engine
from ..errors import InvalidInput
from ._arrays import Like, check_engine, is_tensor, to_numpy, torch

__all__ = ["MaskedTimeseries", "Forecast", "TotoForecaster"]


class _MaskedTimeseries(NamedTuple):
    """toto-ts's ``MaskedTimeseries`` (``toto.data.util.dataset``), field for field, for users without toto-ts.

    ``*batch`` is an optional leading batch axis.

    Attributes:
        series: ``[*batch, V, T]`` float, the history.
        padding_mask: ``[*batch, V, T]`` bool, ``True`` where ``series`` holds an observed point (not padding).
        id_mask: ``[*batch, V, T]`` (or ``[*batch, V, 1]``) int, group ids: variates with equal ids are modelled
            jointly.
        timestamp_seconds: ``[*batch, V, T]`` int, POSIX seconds of each point (not used by the model).
        time_interval_seconds: ``[*batch, V]`` int, each variate's step in seconds (not used by the model).
        num_exogenous_variables: the last variates that are exogenous (0: none; totoc refuses others).
    """

    series: Any
    padding_mask: Any
    id_mask: Any
    timestamp_seconds: Any
    time_interval_seconds: Any
    num_exogenous_variables: int = 0

    def to(self, device: Any) -> _MaskedTimeseries:
        """The same series on ``device`` (torch tensors only)."""
        return _MaskedTimeseries(
            series=self.series.to(device),
            padding_mask=self.padding_mask.to(device),
            id_mask=self.id_mask.to(device),
            timestamp_seconds=self.timestamp_seconds.to(device),
            time_interval_seconds=self.time_interval_seconds.to(device),
            num_exogenous_variables=self.num_exogenous_variables,
        )


@dataclass(frozen=True)
class _Forecast:
    """toto-ts's ``Forecast`` (``toto.inference.forecaster``), for users without toto-ts or with numpy inputs.

    Attributes:
        mean: ``[B, V, H]``: the mean path, or the mean over the sample paths when there are some.
        samples: ``[B, V, H, S]`` sample paths, or ``None`` (a mean forecast).
    """

    mean: Any
    samples: Any = None

    def quantile(self, q: Any) -> Any:
        """The ``q`` quantile over the sample paths, ``[B, V, H]`` (linear interpolation, as ``torch.quantile``)."""
        assert self.samples is not None, "samples must be provided to compute quantiles"
        if is_tensor(self.samples):
            assert isinstance(q, float) or isinstance(q, torch.Tensor), "q must be a float or a tensor"
            if isinstance(q, float):
                q = torch.tensor(q, device=self.samples.device, dtype=self.samples.dtype)
            return self.samples.quantile(q, dim=-1)
        assert isinstance(q, (float, np.ndarray)), "q must be a float or an array"
        return np.quantile(self.samples, q, axis=-1).astype(self.samples.dtype, copy=False)

    @property
    def median(self) -> Any:
        """The median over the sample paths, ``[B, V, H]``."""
        return self.quantile(0.5)

    @property
    def std(self) -> Any:
        """The standard deviation over the sample paths (unbiased, as ``torch.std``), ``[B, V, H]``."""
        assert self.samples is not None, "samples must be provided to compute standard deviation"
        if is_tensor(self.samples):
            return self.samples.std(dim=-1)
        return self.samples.std(axis=-1, ddof=1)


def _toto_ts_classes() -> tuple[Any, Any] | None:
    """toto-ts's own ``MaskedTimeseries`` and ``Forecast``, when toto-ts is installed."""
    try:
        from toto.data.util.dataset import MaskedTimeseries as masked
        from toto.inference.forecaster import Forecast as forecast
    except ImportError:
        return None
    return masked, forecast


_TOTO_TS = _toto_ts_classes()
#: toto-ts's ``MaskedTimeseries`` when it is installed, else an identical NamedTuple.
MaskedTimeseries: Any = _TOTO_TS[0] if _TOTO_TS else _MaskedTimeseries
#: toto-ts's ``Forecast`` when it is installed, else an identical frozen dataclass (also used for numpy inputs).
Forecast: Any = _TOTO_TS[1] if _TOTO_TS else _Forecast


def draw_seed() -> int:
    """A sample-path seed from torch's default generator (numpy's global one without torch): reproducible after
    ``torch.manual_seed`` (``np.random.seed``), different from call to call."""
    if torch is not None:
        return int(torch.randint(0, 2**62, (), dtype=torch.int64))
    return int(np.random.randint(0, 2**62, dtype=np.int64))


def _group_ids(id_mask: Any, b: int, v: int) -> list[list[int]] | None:
    """One group id per variate per series, from toto-ts's ``id_mask`` (``[*batch, V, T or 1]``), renumbered from
    0 (the engine takes ids >= 0; only equality matters)."""
    if id_mask is None:
        return None
    ids = to_numpy(id_mask, "id_mask")
    if ids.ndim == 2:
        ids = ids[None]
    if ids.ndim != 3 or ids.shape[:2] != (b, v) or ids.shape[2] < 1:
        raise InvalidInput(
            f"id_mask has shape {list(ids.shape)}; give [B, V, T] or [B, V, 1] (or [V, T] without a batch) for "
            f"series of {b} x {v} variates"
        )
    if ids.dtype.kind not in "iub" and not np.array_equal(ids, np.round(ids)):
        raise InvalidInput("id_mask holds non-integer values; give integer group ids")
    if not (ids == ids[..., :1]).all():
        raise InvalidInput(
            "id_mask changes along time; the engine takes one group id per variate (give id_mask[..., :1], the "
            "ids of the whole series)"
        )
    if not ids.any():
        return None  # all in one group: the engine's default
    out = []
    for row in ids[..., 0]:
        _, inverse = np.unique(row, return_inverse=True)
        out.append([int(i) for i in inverse])
    return out


class TotoForecaster:
    """toto-ts's ``TotoForecaster``, forecasting on a totoc Toto 1.0 engine (see the module docs).

    Args:
        engine: a :class:`totoc.Engine` of a Toto 1.0 model (``engine.info["family"] == "toto-1.0"``).

    Raises:
        InvalidInput: the engine is not a Toto 1.0 engine.
    """

    def __init__(self, engine: Engine) -> None:
        check_engine(engine, "TotoForecaster", "toto-1.0", "Toto 2.0 use totoc.compat.toto2.Toto2Model")
        self.engine = engine

    def forecast(
        self,
        inputs: Any,
        prediction_length: int,
        num_samples: int | None = None,
        samples_per_batch: int = 10,
        use_kv_cache: bool = True,
        future_exogenous_variables: Any = None,
        *,
        seed: int | None = None,
    ) -> Any:
        """Forecasts a batch of series, as ``toto.inference.forecaster.TotoForecaster.forecast``.

        Args:
            inputs: a ``MaskedTimeseries`` (toto-ts's, this module's, or any object with its fields).
            prediction_length: steps to forecast (up to the engine's ``max_horizon``).
            num_samples: ``None`` for the mean path; else the sample paths to draw per series (up to the
                engine's ``max_samples``).
            samples_per_batch: ignored (the engine batches the paths itself).
            use_kv_cache: ignored (the engine always uses its KV cache; the numbers do not depend on it).
            future_exogenous_variables: refused unless ``None``.
            seed: totoc only: the sample paths' seed; default: drawn from torch's default generator.

        Returns:
            ``Forecast(mean [B, V, H], samples [B, V, H, S] or None)`` on the inputs' device, in their dtype.

        Raises:
            InvalidInput: a malformed input, exogenous variables, or an ``id_mask`` that changes along time.
            EngineLimit: beyond the engine's variates, horizon or samples.
        """
        if future_exogenous_variables is not None or int(getattr(inputs, "num_exogenous_variables", 0) or 0):
            raise InvalidInput(
                "exogenous variables (num_exogenous_variables > 0 or future_exogenous_variables) are not "
                "supported by totoc's engines; forecast the target variates only"
            )
        if num_samples is not None and (isinstance(num_samples, bool) or int(num_samples) < 1):
            raise InvalidInput(f"num_samples is {num_samples!r}; give None (the mean path) or at least 1")
        for field in ("series", "padding_mask"):
            if not hasattr(inputs, field):
                raise InvalidInput(
                    f"inputs has no `{field}`; give a MaskedTimeseries (totoc.compat.toto_ts.MaskedTimeseries)"
                )
        like = Like(inputs.series)
        series = to_numpy(inputs.series, "series")
        if series.dtype.kind not in "fiub":
            raise InvalidInput(f"series has dtype {series.dtype}; give a float tensor")
        if series.dtype != np.float64:
            series = series.astype(np.float32, copy=False)
        if series.ndim == 2:
            series = series[None]
        if series.ndim != 3:
            raise InvalidInput(f"series has shape {list(series.shape)}; give [B, V, T] or [V, T]")
        b, v, _ = series.shape
        if inputs.padding_mask is None:
            target = series
        else:
            mask = to_numpy(inputs.padding_mask, "padding_mask").astype(bool)
            if mask.ndim == 2:
                mask = mask[None]
            if mask.shape != series.shape:
                raise InvalidInput(
                    f"padding_mask has shape {list(mask.shape)}, series {list(series.shape)}; give one of the same shape"
                )
            target = np.where(mask, series, np.nan)
        ids = _group_ids(getattr(inputs, "id_mask", None), b, v)
        samples = 0 if num_samples is None else int(num_samples)
        if samples and seed is None:
            seed = draw_seed()
        f = self.engine.forecast(
            target, int(prediction_length), samples=samples, quantiles=[], seed=seed, id_mask=ids
        )
        truncated = np.asarray(f.context_truncated)
        if truncated.any():
            warnings.warn(
                f"{int(truncated.sum())} of {b} series are longer than the engine's context "
                f"({self.engine.info['max_context']} points): their most recent points were used",
                RuntimeWarning,
                stacklevel=2,
            )
        if samples:
            paths = like(np.moveaxis(f.samples, 1, -1))  # [N, S, V, H] -> [B, V, H, S]
            # as toto-ts: the mean over the paths, in the output's dtype
            mean = paths.mean(dim=-1) if like.torch else paths.mean(axis=-1).astype(paths.dtype, copy=False)
        else:
            paths, mean = None, like(f.mean)
        cls = Forecast if (like.torch and _TOTO_TS) else _Forecast
        return cls(mean=mean, samples=paths)
