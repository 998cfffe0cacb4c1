"""Finding the ONNX Runtime library for the engine.

totoc does not link ONNX Runtime: it loads ``libonnxruntime.so`` at run time, once per process. From Python it
looks, in order:

1. ``ort_lib=`` given to :class:`totoc.Engine`;
2. ``$TOTOC_ORT_LIB``, then ``$ORT_DYLIB_PATH`` (explicit settings win, as ``--ort-lib`` and these variables do
   for the ``totoc`` command);
3. the ``onnxruntime`` or ``onnxruntime-gpu`` package installed in this Python environment
   (``onnxruntime/capi/libonnxruntime.so.*``; ``pip install 'totoc[cpu]'`` or ``'totoc[gpu]'`` installs it); for
   ``onnxruntime-gpu``, the CUDA and cuDNN libraries of its NVIDIA wheels are loaded first (``totoc._gpu``);
4. the ``totoc`` command's own search: next to the Python executable, ``$TOTOC_ORT_DIR``,
   ``~/.cache/totoc/onnxruntime/<version>/``.

When none has it, :class:`totoc.RuntimeMissing` says how to install it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import warnings
from pathlib import Path

from . import _gpu, _native
from .errors import RuntimeMissing

#: The ONNX Runtime version totoc is built against; older libraries cannot run its engines.
ORT_VERSION: str = _native.ORT_VERSION

_INSTALL = (
    "install ONNX Runtime into this Python environment: `pip install 'totoc[cpu]'` (CPU), or "
    "`pip install 'totoc[gpu]'` (CUDA / TensorRT; onnxruntime-gpu)"
)


def _version_key(text: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in text.split("."))


def _distributions() -> list[str]:
    """The ONNX Runtime distributions installed in this environment (they share the ``onnxruntime`` folder)."""
    found = []
    for name in ("onnxruntime", "onnxruntime-gpu"):
        try:
            importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        found.append(name)
    return found


def package_library() -> Path | None:
    """``libonnxruntime.so.*`` of the installed ``onnxruntime`` / ``onnxruntime-gpu`` package, without importing it.

    Warns when both distributions are installed: they write the same ``onnxruntime/`` folder, so which library is
    there depends on which was installed last.
    """
    try:
        spec = importlib.util.find_spec("onnxruntime")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    dists = _distributions()
    if len(dists) > 1:
        warnings.warn(
            "both onnxruntime and onnxruntime-gpu are installed: they share the onnxruntime/ folder, so its library "
            "is whichever was installed last; keep one (`pip uninstall onnxruntime` for GPU engines, "
            "`pip uninstall onnxruntime-gpu` for CPU only) and reinstall it",
            RuntimeWarning,
            stacklevel=3,
        )
    libs: list[tuple[tuple[int, ...], Path]] = []
    for folder in spec.submodule_search_locations:
        capi = Path(folder) / "capi"
        if not capi.is_dir():
            continue
        for p in capi.iterdir():
            m = re.fullmatch(r"libonnxruntime\.so((?:\.\d+)*)", p.name)
            if m and p.is_file():
                libs.append((_version_key(m.group(1).lstrip(".")), p))
    if not libs:
        return None
    key, lib = max(libs)
    if len(key) >= 2 and key[:2] < _version_key(ORT_VERSION)[:2]:
        have = ".".join(map(str, key))
        raise RuntimeMissing(
            f"{lib}: ONNX Runtime {have} is installed ({' and '.join(dists) or 'onnxruntime'}) but totoc needs "
            f">= {'.'.join(ORT_VERSION.split('.')[:2])}; upgrade it: `pip install -U 'totoc[cpu]'` (or "
            "`'totoc[gpu]'`)"
        )
    return lib


#: The library found in the installed package and passed to the engine (to name its source in `runtime()`).
_from_package: Path | None = None

#: The CUDA / cuDNN libraries preloaded for the installed onnxruntime-gpu (once per process).
_preloaded: list[Path] | None = None


def gpu_libraries(lib: Path) -> list[_gpu.Library]:
    """The CUDA and cuDNN libraries that the ONNX Runtime package holding ``lib`` (``.../onnxruntime/capi/``)
    needs preloaded: none for the CPU build."""
    package = lib.parent.parent
    return _gpu.plan(package.parent, _gpu.cuda_version(package))


def preload_gpu(lib: Path) -> list[Path]:
    """Loads the CUDA and cuDNN libraries of an onnxruntime-gpu package (once); returns those loaded."""
    global _preloaded
    if _preloaded is None:
        _preloaded = _gpu.preload(gpu_libraries(lib))
    return _preloaded


def resolve(ort_lib: str | os.PathLike[str] | None) -> Path | None:
    """The library to pass to the engine, or ``None`` to let the engine search (environment variables, cache)."""
    global _from_package
    if ort_lib is not None:
        return Path(ort_lib)
    if os.environ.get("TOTOC_ORT_LIB") or os.environ.get("ORT_DYLIB_PATH"):
        return None
    lib = package_library()
    if lib is not None and _from_package is None:
        _from_package = lib
    if lib is not None:
        preload_gpu(lib)
    return lib


def failure_message(engine_message: str) -> str:
    """The message of a failed ONNX Runtime load: how to install it first, then what the engine found."""
    if "not found" in engine_message:
        return f"ONNX Runtime {ORT_VERSION} was not found: {_INSTALL}.\n{engine_message}"
    return f"ONNX Runtime could not be loaded; to reinstall it, {_INSTALL}.\n{engine_message}"


def runtime() -> dict[str, str] | None:
    """The ONNX Runtime this process loaded (``library``, ``source``, ``version``), or ``None`` before the first
    engine.

    >>> import totoc
    >>> totoc.runtime() is None or "library" in totoc.runtime()
    True
    """
    rt = _native.runtime()
    if rt is not None and _from_package is not None and Path(rt["library"]) == _from_package:
        rt["source"] = "the installed onnxruntime package"
    return rt
