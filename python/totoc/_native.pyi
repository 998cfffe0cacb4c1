"""Type stubs of ``totoc._native``, the extension module (Rust, PyO3). Use :class:`totoc.Engine`, which wraps it."""

from typing import Any, Sequence

import numpy as np

__version__: str
ORT_VERSION: str

class Engine:
    def __init__(
        self,
        path: str,
        *,
        threads: int | None = None,
        memory_budget: int | str | None = None,
        ort_lib: str | None = None,
    ) -> None: ...
    @property
    def info(self) -> dict[str, Any]: ...
    @property
    def closed(self) -> bool: ...
    @property
    def last_engine_seconds(self) -> float: ...
    def close(self) -> None: ...
    def forecast(
        self,
        target: np.ndarray | Sequence[np.ndarray],
        horizon: int,
        *,
        samples: int | None = None,
        quantiles: Sequence[float] | None = None,
        seed: int | None = None,
        id_mask: Sequence[int] | Sequence[Sequence[int] | None] | None = None,
        strict_context: bool = False,
    ) -> dict[str, Any]: ...

def runtime() -> dict[str, str] | None: ...
