"""A drop-in for toto-2 2.0.0's ``Toto2Model.forecast`` (Toto 2.0) over a totoc engine.

A toto-2 script changes its imports and the line that builds the model::

    # before (toto-2)
    from toto2 import Toto2Model
    model = Toto2Model.from_pretrained("Datadog/Toto-2.0-22m").eval()

    # after (totoc)
    import totoc
    from totoc.compat.toto2 import Toto2Model
    model = Toto2Model(totoc.Engine("engine-22m"))

    # unchanged
    q = model.forecast({"target": x, "target_mask": m, "series_ids": ids}, horizon=336)
    q.shape            # (9, B, V, 336): the quantiles 0.1, 0.2, ..., 0.9 (q[4] is the median)

The result is a torch tensor on the target's device and in its float dtype (numpy in, numpy out). An fp32
engine gives toto-2's quantiles within ``1e-4·σ + 1e-6·|ref|`` (docs/guide.md, "Equivalence with toto-2").

Inputs (a mapping, as toto-2's ``Toto2ForecastInputs``):

* ``target`` ``[*batch, V, T]`` float; ``target_mask`` ``[*batch, V, T]`` bool (``True`` = observed);
  ``series_ids`` ``[*batch, V]`` int (variates of a series with equal ids are modelled jointly; only equality
  matters).
* Missing points (``target_mask`` ``False``, or NaN) reach the engine as missing. In the last patch (the last
  32 points) toto-2 forces every point to observed and uses its value as given; the drop-in does the same, except
  that a NaN there is forward-filled from the last observed point (toto-2 returns NaN).
* ``T`` need not be a multiple of 32 (toto-2 raises): the engine keeps the most recent multiple of 32 points, as
  toto-2's GluonTS wrapper does. A context longer than the engine's ``max_context`` keeps its most recent points
  (a ``RuntimeWarning`` says so).
* ``known_dynamic``, ``known_dynamic_mask``, ``known_dynamic_series_ids`` (exogenous covariates): refused.

Keyword arguments of ``forecast``:

* ``decode_block_size`` (default ``None``: one pass): the engine decodes as it was built (a profile's
  ``decode_block``). A value that gives the same decoding for this horizon is accepted: ``None``/0 or a block
  of at least the horizon on an engine without ``decode_block``, the engine's own ``decode_block`` (or one of at
  least the horizon on an engine whose block covers it); any other value is refused, naming the engine's. A value
  that is not a multiple of 32 is refused, as toto-2 asserts.
* ``has_missing_values`` (default ``True``): ``False`` is accepted when no context patch is wholly missing (the
  results are the same), else refused (toto-2's results would differ).
* ``scaler_fallback_min_obs`` and ``quantile_real_cap_k``: 0/``None`` (their defaults) only; other values are
  refused.
* Other keywords are ignored, as toto-2 ignores them.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._engine import Engine
from ..errors import InvalidInput
from ._arrays import Like, check_engine, to_numpy

__all__ = ["Toto2Model", "KNOTS", "PATCH"]

#: The levels of toto-2's nine quantiles, in the order of the result's first axis.
KNOTS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
#: Toto 2.0's patch (points), the same for every released size.
PATCH = 32


def _blocks(decode_block: int | None, horizon: int) -> int | None:
    """How ``Toto2Model.forecast`` decodes ``horizon`` with ``decode_block`` points per block: the block in patches
    when it runs more than one block, ``None`` for one pass."""
    patches = math.ceil(horizon / PATCH)
    if not decode_block:
        return None
    block = min(decode_block // PATCH, patches)
    return block if block < patches else None


class Toto2Model:
    """toto-2's ``Toto2Model`` for forecasting, on a totoc Toto 2.0 engine (see the module docs).

    Args:
        engine: a :class:`totoc.Engine` of a Toto 2.0 model (``engine.info["family"] == "toto-2.0"``).

    Raises:
        InvalidInput: the engine is not a Toto 2.0 engine.
    """

    def __init__(self, engine: Engine) -> None:
        check_engine(engine, "Toto2Model", "toto-2.0", "Toto 1.0 use totoc.compat.toto_ts.TotoForecaster")
        self.engine = engine

    def eval(self) -> Toto2Model:
        """Returns the model, as ``torch.nn.Module.eval`` does (an engine has no training mode)."""
        return self

    def _check_decode_block(self, decode_block: int | None, horizon: int, variates: int) -> None:
        if decode_block and decode_block % PATCH:
            raise InvalidInput(
                f"decode_block_size ({decode_block}) must be divisible by patch_size ({PATCH}), as toto-2 asserts"
            )
        want = _blocks(decode_block, horizon)
        holding = [
            p for p in self.engine.info["profiles"] if p["variates"] >= variates and p["horizon"] >= horizon
        ]
        # how the engine would decode on each profile that holds the request (it picks the cheapest)
        modes = {_blocks(p.get("decode_block"), horizon) for p in holding}
        if not holding or modes == {want}:
            return  # no profile holds it: the engine's own error names its limits
        built = sorted({p.get("decode_block") or 0 for p in holding})
        built_text = ", ".join("none (one pass)" if b == 0 else f"{b}" for b in built)
        asked = "None (one pass)" if want is None else f"{decode_block} ({want} patches per block)"
        if want not in modes:
            raise InvalidInput(
                f"decode_block_size={asked} at horizon {horizon}: this engine decodes with decode_block "
                f"{built_text}; pass that decode_block_size, or build an engine whose profile has "
                f"decode_block: {decode_block or 'none'} (docs/formats.md, Toto 2.0 profiles)"
            )
        raise InvalidInput(
            f"decode_block_size={asked} at horizon {horizon}: this engine has profiles with several decode "
            f"blocks ({built_text}) that hold the request, and picks one by cost; build an engine with one "
            "decode_block for this horizon"
        )

    def forecast(self, inputs: Mapping[str, Any], horizon: int, **kwargs: Any) -> Any:
        """The nine quantiles of each series, as ``toto2.Toto2Model.forecast``.

        Args:
            inputs: ``{"target": [*batch, V, T], "target_mask": [*batch, V, T], "series_ids": [*batch, V]}``.
            horizon: steps to forecast (up to the engine's ``max_horizon``).
            **kwargs: ``decode_block_size``, ``has_missing_values``, ``scaler_fallback_min_obs``,
                ``quantile_real_cap_k``: accepted or refused as the module docs say; others ignored.

        Returns:
            ``[9, *batch, V, horizon]``: the quantiles at :data:`KNOTS`, sorted, on the target's device and in
            its dtype.

        Raises:
            InvalidInput: a malformed input, exogenous covariates, or an option the engine cannot honour.
            EngineLimit: beyond the engine's variates or horizon.
        """
        if not isinstance(inputs, Mapping):
            raise InvalidInput(
                f"inputs is a {type(inputs).__name__}; give a dict with target, target_mask and series_ids"
            )
        exogenous = [k for k in ("known_dynamic", "known_dynamic_mask", "known_dynamic_series_ids") if k in inputs]
        if exogenous:
            raise InvalidInput(
                f"inputs has {', '.join(exogenous)}: exogenous covariates are not supported by totoc's engines; "
                "forecast the target variates only"
            )
        for key in ("target", "target_mask", "series_ids"):
            if key not in inputs:
                raise InvalidInput(f"inputs has no `{key}`; give target, target_mask and series_ids")
        for key in ("scaler_fallback_min_obs", "quantile_real_cap_k"):
            if kwargs.get(key):
                raise InvalidInput(
                    f"{key}={kwargs[key]!r} is not supported by totoc's engines; leave it at its default (0)"
                )
        decode_block = kwargs.get("decode_block_size") or 0
        horizon = int(horizon)

        like = Like(inputs["target"])
        target = to_numpy(inputs["target"], "target")
        if target.dtype.kind not in "fiub":
            raise InvalidInput(f"target has dtype {target.dtype}; give a float tensor")
        if target.dtype != np.float64:
            target = target.astype(np.float32, copy=False)
        if target.ndim < 2:
            raise InvalidInput(f"target has shape {list(target.shape)}; give [*batch, V, T]")
        batch, (v, t) = target.shape[:-2], target.shape[-2:]
        mask = to_numpy(inputs["target_mask"], "target_mask").astype(bool)
        ids = to_numpy(inputs["series_ids"], "series_ids")
        if mask.shape != target.shape:
            raise InvalidInput(
                f"target_mask has shape {list(mask.shape)}, target {list(target.shape)}; give one of the same shape"
            )
        if ids.shape != target.shape[:-1]:
            raise InvalidInput(
                f"series_ids has shape {list(ids.shape)}; give [*batch, V] = {list(target.shape[:-1])}"
            )
        if ids.dtype.kind not in "iub" and not np.array_equal(ids, np.round(ids)):
            raise InvalidInput("series_ids holds non-integer values; give integer ids")
        target, mask, ids = target.reshape(-1, v, t), mask.reshape(-1, v, t), ids.reshape(-1, v)

        # toto-2 forces the last context patch to observed and uses its values as given
        observed = mask.copy()
        observed[..., -PATCH:] = True
        if kwargs.get("has_missing_values", True) is False:
            kept = (t // PATCH) * PATCH
            patches = observed[..., t - kept :].reshape(*observed.shape[:-1], -1, PATCH)
            if (~patches.any(axis=-1)).any():
                raise InvalidInput(
                    "has_missing_values=False with a context patch that has no observed point: toto-2's results "
                    "then differ from the engine's (which masks such patches); leave has_missing_values at True"
                )
        self._check_decode_block(decode_block, horizon, v)
        series = np.where(observed, target, np.nan)
        group_ids = [[int(i) for i in np.unique(row, return_inverse=True)[1]] for row in ids]

        f = self.engine.forecast(series, horizon, quantiles=list(KNOTS), id_mask=group_ids)
        # (context_truncated also marks a context cut to a multiple of the patch, which toto-2 would refuse)
        max_context = self.engine.info["max_context"]
        if t > max_context:
            warnings.warn(
                f"the context has {t} points, more than the engine's {max_context}: the most recent ones were used",
                RuntimeWarning,
                stacklevel=2,
            )
        q = f.quantiles  # [9, N, V, H]
        return like(q.reshape(len(KNOTS), *batch, v, horizon))
