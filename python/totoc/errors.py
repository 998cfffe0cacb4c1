"""totoc's exceptions: one base class, four kinds.

Every error the engine reports is raised as one of these, with the engine's own message (the same words
``totoc forecast`` prints): where the problem is, what it is, and how to fix it.

>>> import totoc
>>> try:
...     totoc.Engine("/no/such/engine")
... except totoc.BundleIntegrity as e:
...     print(str(e).split(":")[0])
engine bundle /no/such/engine

``TotocError``
    The base class; also raised as itself for an engine-side failure that is none of the kinds below (an ONNX
    Runtime session error, ...).
``InvalidInput`` (also a ``ValueError``)
    The input is wrong: a target that is not a float array of shape ``[V, T]`` / ``[N, V, T]`` (or a list of
    ``[V, T]``), a series without observed points, a non-finite value, a horizon of 0, quantile levels outside
    (0, 1), quantiles without samples (Toto 1.0), a closed engine, ...
``EngineLimit`` (also a ``ValueError``)
    The input is valid but beyond what this engine was built for: more variates, a longer horizon or more
    samples than its profiles hold, a context longer than ``max_context`` with ``strict_context=True``. The
    message names the limit; a larger profile (``configs/*.yaml``) and a rebuilt engine lift it.
``BundleIntegrity``
    The engine bundle is missing, malformed, modified since it was built (its files' sha256 no longer match
    ``manifest.json``), or was built for something this process cannot run.
``RuntimeMissing`` (also an ``ImportError``)
    No usable ONNX Runtime library: install one with ``pip install 'totoc[cpu]'`` (or ``'totoc[gpu]'``).
"""

from __future__ import annotations

__all__ = ["TotocError", "InvalidInput", "EngineLimit", "BundleIntegrity", "RuntimeMissing"]


class TotocError(Exception):
    """Base class of every error totoc raises."""


class InvalidInput(TotocError, ValueError):
    """The input is wrong (its type, shape or values); the message says what and how to fix it."""


class EngineLimit(TotocError, ValueError):
    """The input is beyond this engine's limits (variates, horizon, samples, strict context)."""


class BundleIntegrity(TotocError):
    """The engine bundle is missing, malformed, modified, or built for something else."""


class RuntimeMissing(TotocError, ImportError):
    """No usable ONNX Runtime library was found or it could not be loaded."""
