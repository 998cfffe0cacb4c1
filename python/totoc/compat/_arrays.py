"""What the drop-ins share: reading torch tensors or numpy arrays as numpy, and giving results back in the
caller's kind, device and dtype."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._engine import Engine
from ..errors import InvalidInput

try:  # torch is optional: numpy in, numpy out without it
    import torch
except ImportError:  # pragma: no cover - the compat tests run with torch
    torch = None  # type: ignore[assignment]


def is_tensor(x: Any) -> bool:
    return torch is not None and isinstance(x, torch.Tensor)


def to_numpy(x: Any, what: str, dtype: Any = None) -> np.ndarray:
    """``x`` (a torch tensor on any device, a numpy array, or nested lists) as a numpy array on the host. Float
    tensors of other widths (bfloat16, float16) become float32 first: numpy has no bfloat16."""
    if is_tensor(x):
        t = x.detach()
        if t.is_floating_point() and t.dtype not in (torch.float32, torch.float64):
            t = t.to(torch.float32)
        a = t.cpu().numpy()
    else:
        try:
            a = np.asarray(x)
        except (TypeError, ValueError) as e:
            raise InvalidInput(f"`{what}` cannot be read as an array ({e}); give a torch tensor or a numpy array") from None
    if dtype is not None:
        a = a.astype(dtype, copy=False)
    return a


class Like:
    """The kind (torch or numpy), device and float dtype of the caller's input: results go back as that."""

    def __init__(self, x: Any) -> None:
        self.torch = is_tensor(x)
        if self.torch:
            self.device = x.device
            self.dtype = x.dtype if x.is_floating_point() else torch.float32
        else:
            dtype = np.asarray(x).dtype
            self.dtype = dtype if dtype.kind == "f" else np.dtype(np.float32)

    def __call__(self, a: np.ndarray) -> Any:
        if self.torch:
            return torch.from_numpy(np.ascontiguousarray(a)).to(device=self.device, dtype=self.dtype)
        return a.astype(self.dtype, copy=False)


def check_engine(engine: Any, cls: str, family: str, other: str) -> None:
    """Refuses anything but a totoc ``Engine`` of ``family`` for the drop-in ``cls``, naming the drop-in ``other``
    that drives the other family."""
    if not isinstance(engine, Engine):
        raise InvalidInput(
            f"{cls} takes a totoc.Engine, not {type(engine).__name__}: " f'{cls}(totoc.Engine("ENGINE_DIR"))'
        )
    actual = engine.info["family"]
    if actual != family:
        generation = family.replace("toto-", "Toto ")
        raise InvalidInput(f"this engine is {actual}; {cls} drives {generation} engines (for {other})")
