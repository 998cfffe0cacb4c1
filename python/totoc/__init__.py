"""totoc: Datadog's Toto forecasting models, compiled into ONNX Runtime engines, forecasting in-process.

An engine is built once with the ``totoc`` command (``totoc export``, then ``totoc build-engine``) and loaded
here; ``Engine.forecast`` takes numpy arrays and returns numpy arrays, the numbers of ``totoc forecast`` bit for
bit::

    import numpy as np, totoc

    with totoc.Engine("engine") as eng:                  # an engine bundle directory
        y = np.loadtxt("history.txt", dtype=np.float32)  # [T], NaN = missing
        f = eng.forecast(y[None], horizon=64, samples=256, seed=7)
        f.mean          # [1, 64]      the point forecast of the one variate
        f.quantiles     # [3, 1, 64]   at f.quantile_levels = [0.1, 0.5, 0.9]

Tables (pandas, polars or any Arrow table) go through ``Engine.predict_df`` and ``Engine.cross_validation``, the
tables of ``totoc forecast`` and ``totoc backtest``::

    out = eng.predict_df(df, prediction_length=24, id_column="unique_id", timestamp_column="ds", target="y")
    cv = eng.cross_validation(df, h=24, n_windows=3)   # unique_id, ds, cutoff, y, totoc

ONNX Runtime comes from the ``onnxruntime`` package (``pip install 'totoc[cpu]'``) or ``onnxruntime-gpu``
(``'totoc[gpu]'``); see ``totoc._runtime`` for where else it is looked for. Errors are the classes of
``totoc.errors``.
"""

from . import _native
from ._build import Progress, build_engine, export
from ._engine import Engine, Forecast
from ._runtime import ORT_VERSION, runtime
from .errors import BundleIntegrity, EngineLimit, InvalidInput, RuntimeMissing, TotocError

__version__: str = _native.__version__

__all__ = [
    "Engine",
    "Forecast",
    "export",
    "build_engine",
    "Progress",
    "TotocError",
    "InvalidInput",
    "EngineLimit",
    "BundleIntegrity",
    "RuntimeMissing",
    "runtime",
    "ORT_VERSION",
    "__version__",
]
