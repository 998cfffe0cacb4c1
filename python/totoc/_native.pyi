"""Type stubs of ``totoc._native``, the extension module (Rust, PyO3). Use :class:`totoc.Engine`, which wraps it."""

from typing import Any, Callable, Sequence

import numpy as np

__version__: str
ORT_VERSION: str
#: Whether this build has the tests' hooks (``TOTOC_TEST_PANIC``): dev builds only.
_TEST_HOOKS: bool

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
    def forget_after_fork(self) -> None: ...
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
        columns: Sequence[str] | None = None,
        timestamps: Sequence[tuple[int, list[str]]] | None = None,
        future_timestamps: Sequence[tuple[int, list[str]]] | None = None,
        temperature: float | None = None,
        top_k: int | None = None,
        top_p: float | None = None,
        params: dict[str, float] | None = None,
    ) -> dict[str, Any]: ...

def runtime() -> dict[str, str] | None: ...

# --- tables (src/table.rs, src/cv.rs, src/arrow.rs); used by totoc._table ------------------------------------

class ArrowTable:
    """A table made by the engine, readable once by any Arrow library through the Arrow PyCapsule interface."""

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object: ...
    @property
    def num_rows(self) -> int: ...
    @property
    def column_names(self) -> list[str]: ...

class TableResult:
    @property
    def table(self) -> ArrowTable: ...
    @property
    def calendar(self) -> str | None: ...
    @property
    def notes(self) -> list[str]: ...

def predict_table(
    engine: Engine,
    df: object,
    horizon: int,
    *,
    quantiles: Sequence[float] | None = None,
    samples: int | None = None,
    seed: int | None = None,
    id_column: str | None = None,
    timestamp_column: str | None = None,
    target: Sequence[str] | None = None,
    timestamp_unit: str = "s",
    freq: str | None = None,
    calendar: str = "auto",
    timezone: str | None = None,
    holidays: str | None = None,
    strict_context: bool = False,
    write_samples: bool = False,
    layout: str | None = None,
    temperature: float | None = None,
    top_k: int | None = None,
    top_p: float | None = None,
    params: dict[str, float] | None = None,
) -> TableResult: ...
def cross_validation(
    engine: Engine,
    df: object,
    h: int,
    n_windows: int,
    *,
    step_size: int | None = None,
    context: int | None = None,
    samples: int = 0,
    quantiles: Sequence[float] | None = None,
    seed: int = 0,
    chunk: int = 512,
    model: str = "totoc",
    id_column: str | None = None,
    timestamp_column: str | None = None,
    target: Sequence[str] | None = None,
    timestamp_unit: str = "s",
    freq: str | None = None,
    calendar: str = "auto",
    timezone: str | None = None,
    holidays: str | None = None,
) -> ArrowTable: ...
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
    int8_roles: str | None = None,
    tokenizer: str | None = None,
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
