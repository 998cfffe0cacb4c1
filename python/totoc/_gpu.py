"""The CUDA and cuDNN libraries of ``onnxruntime-gpu``'s pip wheels (``pip install 'totoc[gpu]'``), loaded before
the engine loads ONNX Runtime, as ONNX Runtime's own Python binding does (``onnxruntime.preload_dlls``).

``onnxruntime-gpu`` >= 1.31 depends on NVIDIA's wheels (``nvidia-cublas-cu12``, ``nvidia-cudnn-cu12``, ... for CUDA
12; the consolidated ``nvidia-cu13`` and ``nvidia-cudnn-cu13`` for CUDA 13), which unpack their libraries under
``site-packages/nvidia/``, a folder the dynamic loader does not search. ONNX Runtime's CUDA provider needs them when
a CUDA engine's session is created, so they are loaded into the process first (by path, in ONNX Runtime's order:
cuBLASLt before cuBLAS, which needs it; then NVRTC, cuRAND, cuFFT, the CUDA runtime, cuDNN). Loaded once, a
library satisfies the provider's dependency on it by its soname. A library not in the wheels is looked up on the
loader's default path, as ONNX Runtime does; cuFFT, NVRTC and cuDNN may be missing (the engines do not need them).

For the ``totoc`` command (which the console script execs, so nothing loaded here survives), the same folders go
on ``LD_LIBRARY_PATH`` instead (``library_dirs``).

The list is ``plan()``: no GPU is needed to check it (``python/tests/test_gpu_preload.py`` compares it with the
installed onnxruntime's own ``_get_nvidia_dll_paths``).
"""

from __future__ import annotations

import ctypes
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Library", "cuda_version", "plan", "preload", "library_dirs"]


@dataclass(frozen=True)
class Library:
    """One library to load: its file name, where the NVIDIA wheel puts it, the wheel, and whether it may be absent."""

    name: str
    path: Path
    wheel: str
    optional: bool

    @property
    def present(self) -> bool:
        return self.path.is_file()


def cuda_version(package_dir: Path) -> str:
    """The CUDA version the ``onnxruntime`` package in ``package_dir`` was built with (``""``: the CPU build), read
    from ``capi/build_and_package_info.py`` without importing onnxruntime."""
    info = package_dir / "capi" / "build_and_package_info.py"
    try:
        text = info.read_text()
    except OSError:
        return ""
    m = re.search(r"""^cuda_version\s*=\s*['"]([^'"]*)['"]""", text, re.M)
    return m.group(1) if m else ""


def plan(site_packages: Path, cuda: str) -> list[Library]:
    """The libraries to load for an onnxruntime-gpu built with CUDA ``cuda`` (e.g. ``"12.8"``), in order, at their
    places under ``site_packages`` (the folder holding ``onnxruntime/`` and ``nvidia/``). Empty for a CPU build."""
    if not cuda:
        return []
    major = cuda.split(".", 1)[0]
    if not major.isdigit():
        return []
    nvidia = site_packages / "nvidia"
    cufft = "12" if int(major) >= 13 else "11"
    if int(major) >= 13:
        # CUDA 13: one consolidated wheel, libraries directly in nvidia/cu13/lib
        lib, wheel = nvidia / f"cu{major}" / "lib", f"nvidia-cu{major}"
        cuda_libs = [
            (lib, f"libcublasLt.so.{major}", wheel, False),
            (lib, f"libcublas.so.{major}", wheel, False),
            (lib, f"libnvrtc.so.{major}", wheel, True),
            (lib, "libcurand.so.10", wheel, False),
            (lib, f"libcufft.so.{cufft}", wheel, True),
            (lib, f"libcudart.so.{major}", wheel, False),
        ]
    else:
        suffix = f"-cu{major}"
        cuda_libs = [
            (nvidia / "cublas" / "lib", f"libcublasLt.so.{major}", "nvidia-cublas" + suffix, False),
            (nvidia / "cublas" / "lib", f"libcublas.so.{major}", "nvidia-cublas" + suffix, False),
            (nvidia / "cuda_nvrtc" / "lib", f"libnvrtc.so.{major}", "nvidia-cuda-nvrtc" + suffix, True),
            (nvidia / "curand" / "lib", "libcurand.so.10", "nvidia-curand" + suffix, False),
            (nvidia / "cufft" / "lib", f"libcufft.so.{cufft}", "nvidia-cufft" + suffix, True),
            (nvidia / "cuda_runtime" / "lib", f"libcudart.so.{major}", "nvidia-cuda-runtime" + suffix, False),
        ]
    # cuDNN only by its main library: it loads its sub-libraries itself, later (as ONNX Runtime and PyTorch do)
    cudnn = [(nvidia / "cudnn" / "lib", "libcudnn.so.9", f"nvidia-cudnn-cu{major}", True)]
    return [Library(name, folder / name, wheel, optional) for folder, name, wheel, optional in cuda_libs + cudnn]


def preload(libraries: list[Library]) -> list[Path]:
    """Loads ``libraries`` in order; returns the paths loaded from the wheels. A required library in neither the
    wheels nor the loader's path is warned about with the wheel that provides it (a CPU engine runs without it; a
    CUDA engine's load then fails with ONNX Runtime's own message)."""
    loaded = []
    for lib in libraries:
        if lib.present:
            try:
                ctypes.CDLL(str(lib.path))
                loaded.append(lib.path)
                continue
            except OSError:
                pass
        try:
            ctypes.CDLL(lib.name)
        except OSError as e:
            if not lib.optional:
                warnings.warn(
                    f"{lib.name} (CUDA, for onnxruntime-gpu) was not found in the {lib.wheel} wheel nor on the "
                    f"library path ({e}); CUDA engines cannot load without it: `pip install 'totoc[gpu]'` installs "
                    f"it, or install CUDA and add its lib folder to LD_LIBRARY_PATH",
                    RuntimeWarning,
                    stacklevel=3,
                )
    return loaded


def library_dirs(libraries: list[Library]) -> list[str]:
    """The folders of the present libraries, each once, in plan order (for ``LD_LIBRARY_PATH``)."""
    dirs: list[str] = []
    for lib in libraries:
        folder = str(lib.path.parent)
        if lib.present and folder not in dirs:
            dirs.append(folder)
    return dirs
