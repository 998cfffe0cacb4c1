"""The CUDA / cuDNN preload of `totoc[gpu]` (totoc._gpu), checked without a GPU: the libraries, their order and
the NVIDIA wheels they come from are those of the installed onnxruntime's own `preload_dlls`; a fake
onnxruntime-gpu site-packages gets them loaded in that order, and the command's LD_LIBRARY_PATH gets their
folders."""

from __future__ import annotations

import importlib.metadata
import warnings
from pathlib import Path

import pytest


@pytest.mark.parametrize("cuda", ["12.8", "13.0"])
def test_the_plan_is_onnxruntimes_own(cuda, tmp_path, monkeypatch):
    import onnxruntime
    from totoc import _gpu

    if not hasattr(onnxruntime, "_get_nvidia_dll_paths"):
        pytest.fail(f"onnxruntime {onnxruntime.__version__} has no _get_nvidia_dll_paths to compare with")
    # the function reads the build's CUDA version from this module global (a parameter "for testability")
    monkeypatch.setattr(onnxruntime, "cuda_version", cuda)
    theirs = [Path(*p) for p in onnxruntime._get_nvidia_dll_paths(False, True, True)]
    ours = [lib.path.relative_to(tmp_path) for lib in _gpu.plan(tmp_path, cuda)]
    assert ours == theirs


def test_a_cpu_build_needs_nothing(tmp_path):
    from totoc import _gpu

    assert _gpu.plan(tmp_path, "") == []
    assert _gpu.cuda_version(tmp_path / "onnxruntime") == ""


def fake_gpu_site(root: Path, cuda: str, present: list[str]) -> Path:
    """A site-packages with an onnxruntime-gpu built for `cuda` and the NVIDIA wheels' files named in `present`."""
    capi = root / "onnxruntime" / "capi"
    capi.mkdir(parents=True)
    (capi / "build_and_package_info.py").write_text(f"package_name = 'onnxruntime-gpu'\ncuda_version = '{cuda}'\n")
    lib = capi / "libonnxruntime.so.1.31.1"
    lib.write_bytes(b"")
    for rel in present:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"")
    return lib


CU12 = [
    "nvidia/cublas/lib/libcublasLt.so.12",
    "nvidia/cublas/lib/libcublas.so.12",
    "nvidia/curand/lib/libcurand.so.10",
    "nvidia/cuda_runtime/lib/libcudart.so.12",
    "nvidia/cudnn/lib/libcudnn.so.9",
]


def test_preload_loads_the_wheels_libraries_in_order(tmp_path, monkeypatch):
    from totoc import _gpu, _runtime

    lib = fake_gpu_site(tmp_path, "12.8", CU12)
    plan = _runtime.gpu_libraries(lib)
    assert [lib.name for lib in plan] == [
        "libcublasLt.so.12", "libcublas.so.12", "libnvrtc.so.12", "libcurand.so.10", "libcufft.so.11",
        "libcudart.so.12", "libcudnn.so.9",
    ]
    assert [lib.wheel for lib in plan if lib.present] == [
        "nvidia-cublas-cu12", "nvidia-cublas-cu12", "nvidia-curand-cu12", "nvidia-cuda-runtime-cu12",
        "nvidia-cudnn-cu12",
    ]
    loads: list[str] = []

    def fake_cdll(name, *a, **kw):
        loads.append(str(name))
        if not Path(name).is_absolute():
            raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(_gpu.ctypes, "CDLL", fake_cdll)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the missing ones (nvrtc, cufft) are optional: no warning
        loaded = _gpu.preload(plan)
    assert loaded == [tmp_path / rel for rel in CU12]
    # by path from the wheels, in order; the absent ones by name on the loader's path, in their place
    assert loads == [
        str(tmp_path / CU12[0]), str(tmp_path / CU12[1]), "libnvrtc.so.12", str(tmp_path / CU12[2]),
        "libcufft.so.11", str(tmp_path / CU12[3]), str(tmp_path / CU12[4]),
    ]
    assert _gpu.library_dirs(plan) == [
        str(tmp_path / "nvidia/cublas/lib"), str(tmp_path / "nvidia/curand/lib"),
        str(tmp_path / "nvidia/cuda_runtime/lib"), str(tmp_path / "nvidia/cudnn/lib"),
    ]


def test_a_missing_required_library_names_its_wheel(tmp_path, monkeypatch):
    from totoc import _gpu, _runtime

    lib = fake_gpu_site(tmp_path, "12.8", [p for p in CU12 if "cudart" not in p])

    def fake_cdll(name, *a, **kw):
        if not Path(name).is_absolute():
            raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(_gpu.ctypes, "CDLL", fake_cdll)
    with pytest.warns(RuntimeWarning, match=r"libcudart\.so\.12 .*nvidia-cuda-runtime-cu12 wheel.*totoc\[gpu\]"):
        _gpu.preload(_runtime.gpu_libraries(lib))


def test_cuda13_uses_the_consolidated_wheel(tmp_path):
    from totoc import _runtime

    lib = fake_gpu_site(tmp_path, "13.0", ["nvidia/cu13/lib/libcublasLt.so.13"])
    plan = _runtime.gpu_libraries(lib)
    assert {lib.wheel for lib in plan} == {"nvidia-cu13", "nvidia-cudnn-cu13"}
    assert plan[0].present and plan[0].path == tmp_path / "nvidia/cu13/lib/libcublasLt.so.13"
    assert "libcufft.so.12" in [lib.name for lib in plan]


def test_the_extras(totoc_module):
    reqs = importlib.metadata.requires("totoc") or []
    assert "onnxruntime>=1.31 ; extra == 'cpu'" in reqs, reqs
    assert "onnxruntime-gpu[cuda,cudnn]>=1.31 ; extra == 'gpu'" in reqs, reqs


def test_the_command_gets_the_cuda_folders(tmp_path, monkeypatch):
    """The `totoc` console script cannot preload (it execs the binary): the wheels' folders go on
    LD_LIBRARY_PATH, before what was there, with the package's library as TOTOC_ORT_LIB."""
    from totoc import _cli, _runtime

    lib = fake_gpu_site(tmp_path, "12.8", CU12)
    monkeypatch.setattr(_runtime, "package_library", lambda: lib)
    env = _cli.environment(["serve"], {"LD_LIBRARY_PATH": "/opt/mine"})
    assert env["TOTOC_ORT_LIB"] == str(lib)
    assert env["LD_LIBRARY_PATH"].split(":") == [
        str(tmp_path / "nvidia/cublas/lib"), str(tmp_path / "nvidia/curand/lib"),
        str(tmp_path / "nvidia/cuda_runtime/lib"), str(tmp_path / "nvidia/cudnn/lib"), "/opt/mine",
    ]
