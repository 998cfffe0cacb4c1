"""Where the package finds ONNX Runtime: the installed `onnxruntime` package when nothing says otherwise, and a
RuntimeMissing that says `pip install 'totoc[cpu]'` when there is none. Each case runs in a fresh interpreter (a
process loads ONNX Runtime once)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

LOAD = """
import json, sys
{prelude}
import totoc
try:
    eng = totoc.Engine(sys.argv[1])
except totoc.TotocError as e:
    print(json.dumps({{"error": type(e).__name__, "message": str(e)}}))
else:
    f = eng.forecast([[1.0, 2.0, 3.0, 4.0]], 2)
    print(json.dumps({{"runtime": totoc.runtime(), "shape": list(f.mean.shape)}}))
"""


def run(engine_dir: Path, tmp_path: Path, prelude: str = "", **env_overrides: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("TOTOC_ORT_LIB", "ORT_DYLIB_PATH", "TOTOC_ORT_DIR")}
    env["HOME"] = str(tmp_path)  # no ~/.cache/totoc/onnxruntime
    env.update(env_overrides)
    p = subprocess.run(
        [sys.executable, "-c", LOAD.format(prelude=prelude), str(engine_dir)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_the_installed_onnxruntime_package_is_found(engine_dir, tmp_path):
    import importlib.util

    spec = importlib.util.find_spec("onnxruntime")
    assert spec is not None, "the test venv has the onnxruntime package (scripts/setup-python-venvs.sh)"
    out = run(engine_dir, tmp_path)
    lib = Path(out["runtime"]["library"])
    assert lib.parent == Path(spec.submodule_search_locations[0]) / "capi", lib
    assert out["runtime"]["source"] == "the installed onnxruntime package"
    assert out["shape"] == [1, 2]


def test_an_explicit_setting_wins_over_the_package(engine_dir, tmp_path, ort_lib):
    out = run(engine_dir, tmp_path, TOTOC_ORT_LIB=ort_lib)
    assert out["runtime"]["library"] == ort_lib and out["runtime"]["source"] == "$TOTOC_ORT_LIB"


def test_no_onnxruntime_anywhere_says_how_to_install_it(engine_dir, tmp_path):
    # the package made unimportable, as if it were not installed
    out = run(engine_dir, tmp_path, prelude="sys.modules['onnxruntime'] = None")
    assert out["error"] == "RuntimeMissing", out
    assert "pip install 'totoc[cpu]'" in out["message"] and "not found" in out["message"], out["message"]


def test_a_broken_library_is_runtime_missing(engine_dir, tmp_path):
    bad = tmp_path / "libonnxruntime.so.1.31.1"
    bad.write_bytes(b"not a library")
    out = run(engine_dir, tmp_path, TOTOC_ORT_LIB=str(bad))
    assert out["error"] == "RuntimeMissing", out
    assert "could not be loaded" in out["message"] and str(bad) in out["message"], out["message"]


@pytest.mark.parametrize("env", [{}, {"TOTOC_ORT_LIB": "/nonexistent/libonnxruntime.so"}])
def test_import_needs_no_runtime(env, tmp_path):
    """`import totoc` loads nothing: ONNX Runtime is loaded with the first engine."""
    e = {**os.environ, **env}
    p = subprocess.run([sys.executable, "-c", "import totoc; print(totoc.runtime(), totoc.__version__)"],
                       capture_output=True, text=True, env=e, cwd=tmp_path, timeout=60)
    assert p.returncode == 0 and p.stdout.startswith("None "), p.stderr
