"""Fixtures of the Python package's tests: the tiny engine (exported and built with the `totoc` command) and the
command itself, to compare with.

Run against an installed wheel, never the source tree: scripts/test.sh installs the wheel into a fresh venv and
runs pytest from a temporary directory with `--import-mode=importlib`, so `python/totoc/` is not importable.

Environment: TOTOC_BIN (the `totoc` binary; default target/debug/totoc, or under $CARGO_TARGET_DIR),
TOTOC_TEST_ENGINE (an existing tiny engine to use instead of building one).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
TINY_CHECKPOINT = REPO / "tests/fixtures/tiny/checkpoint"
TINY_CONFIG = REPO / "configs/tiny.yaml"
CASES = REPO / "tests/fixtures/tiny/cases"

# Every engine of these tests runs ONNX Runtime with one intra-op thread, and so does every `totoc` command they
# compare with: the counter thread of the GIL test gets the other core, and the comparisons run the same kernels
# with the same partitioning.
THREADS = 1


def totoc_bin() -> Path:
    given = os.environ.get("TOTOC_BIN")
    if given:
        return Path(given)
    target = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")
    return target / "debug" / "totoc"


def run_totoc(*args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    bin_ = totoc_bin()
    if not bin_.is_file():
        pytest.fail(f"no totoc binary at {bin_}: build it (`cargo build -p totoc`) or set TOTOC_BIN")
    p = subprocess.run([str(bin_), *args], capture_output=True, text=True, timeout=600)
    if ok and p.returncode != 0:
        pytest.fail(f"totoc {' '.join(args)} failed ({p.returncode}):\n{p.stderr}")
    return p


@pytest.fixture(scope="session")
def totoc_module():
    import totoc

    # the installed wheel, not the source tree
    assert "site-packages" in totoc.__file__, totoc.__file__
    return totoc


@pytest.fixture(scope="session")
def engine_dir(tmp_path_factory) -> Path:
    given = os.environ.get("TOTOC_TEST_ENGINE")
    if given:
        return Path(given)
    work = tmp_path_factory.mktemp("tiny")
    run_totoc("export", "--checkpoint", str(TINY_CHECKPOINT), "--config", str(TINY_CONFIG), "--out", str(work / "bundle"))
    run_totoc("build-engine", "--artifacts", str(work / "bundle"), "--out", str(work / "engine"))
    return work / "engine"


@pytest.fixture(scope="session")
def engine(totoc_module, engine_dir):
    eng = totoc_module.Engine(engine_dir, threads=THREADS)
    yield eng
    eng.close()


@pytest.fixture(scope="session")
def ort_lib(engine, totoc_module) -> str:
    """The ONNX Runtime library this process loaded: the `totoc` commands of the tests load the same one."""
    rt = totoc_module.runtime()
    assert rt is not None
    return rt["library"]


def cli_forecast(engine_dir: Path, ort_lib: str, requests: list[dict], tmp: Path) -> list[dict]:
    """`totoc forecast` of `requests` (JSON Lines, one engine call), its responses with the sample paths."""
    inp, out = tmp / "requests.jsonl", tmp / "responses.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in requests))
    run_totoc(
        "forecast", "--engine", str(engine_dir), "--input", str(inp), "--output", str(out), "--write-samples",
        "--threads", str(THREADS), "--ort-lib", ort_lib,
    )
    return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]


def as_json_target(x: np.ndarray) -> list[list[float | None]]:
    """A `[V, T]` float32 array as a request's `target` (NaN → null), each value exactly its f32."""
    return [[None if np.isnan(v) else float(v) for v in row] for row in np.asarray(x, dtype=np.float32)]


def f32(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


def python_executable() -> str:
    return sys.executable


TOTO2_CHECKPOINT = REPO / "tests/fixtures/trained/toto2-4m"
TOTO2_CONFIG = REPO / "configs/trained-toto2-4m.yaml"


@pytest.fixture(scope="session")
def engine2_dir(tmp_path_factory) -> Path:
    """A Toto 2.0 engine: the 4m checkpoint trained in this repository (tests/fixtures/trained), exported and built
    with the `totoc` command as tests/integration/trained.rs does."""
    work = tmp_path_factory.mktemp("toto2")
    run_totoc(
        "export", "--checkpoint", str(TOTO2_CHECKPOINT), "--config", str(TOTO2_CONFIG), "--out", str(work / "bundle")
    )
    run_totoc("build-engine", "--artifacts", str(work / "bundle"), "--out", str(work / "engine"))
    return work / "engine"


@pytest.fixture(scope="session")
def engine2(totoc_module, engine_dir, engine, engine2_dir):
    # after the Toto 1.0 engine: the first engine loaded sets the process's thread pool (THREADS)
    eng = totoc_module.Engine(engine2_dir, threads=THREADS)
    yield eng
    eng.close()
