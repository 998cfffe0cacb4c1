"""Type stubs of ``totoc._native``, the extension module (Rust, PyO3). Use :class:`totoc.Engine`, which wraps it."""

from typing import Any, Callable, Sequence

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

def export(
    checkpoint: str,
    config: str,
    out: str,
    *,
    profiles: Sequence[str] = ...,
    precisions: Sequence[str] = ...,
    opset: int = 24,
    force: bool = False,
    golden: str | None = None,
    progress: Callable[[str, str, int, int], None] | None = None,
) -> str: ...
def build_engine(
    artifacts: str,
    out: str,
    *,
    target: str = "cpu",
    device: int = 0,
    cuda_graph: bool = False,
    precision: str | None = None,
    graphs: str | None = None,
    threads: int | None = None,
    profiles: Sequence[str] = ...,
    memory_budget: int | str | None = None,
    force: bool = False,
    ort_lib: str | None = None,
    progress: Callable[[str, str, int, int], None] | None = None,
) -> str: ...
