"""Fixtures of the drop-in tests (totoc.compat), run in the venv layered over the reference venv
(scripts/setup-python-venv.sh compat: torch, toto-ts 0.2.0, toto-2 2.0.0, kronos-finance 0.1.5), against the
installed wheel.

Each test calls toto-ts / toto-2 as their users do, and the drop-in the same way, on the repository's fixtures:
the tiny Toto 1.0 checkpoint (tests/fixtures/tiny) and the 4m Toto 2.0 random-weight checkpoint (regenerated
from its seed by tests/reference/make_toto2_checkpoints.py), exported and built with the `totoc` command.

Environment: TOTOC_BIN (the `totoc` binary; default target/debug/totoc, or under $CARGO_TARGET_DIR).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[3]
TINY_CHECKPOINT = REPO / "tests/fixtures/tiny/checkpoint"
TINY_CASES = REPO / "tests/fixtures/tiny/cases"
TOTO2_CASES = REPO / "tests/fixtures/toto2/4m/cases"
# One intra-op thread, as the pure tests: the comparisons do not depend on the partitioning.
THREADS = 1

# gluonts (imported by toto-ts) warns about orjson on import; nothing else is silenced
warnings.filterwarnings("ignore", message=".*orjson.*")


def totoc_bin() -> Path:
    given = os.environ.get("TOTOC_BIN")
    if given:
        return Path(given)
    return Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target") / "debug" / "totoc"


def run(*args: str) -> None:
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        pytest.fail(f"{' '.join(map(str, args))} failed ({p.returncode}):\n{p.stderr}")


def build_engine(work: Path, checkpoint: Path, config: Path, *export_args: object) -> Path:
    """`totoc export` (with `export_args`, e.g. a Kronos model's `--tokenizer DIR`) and `totoc build-engine`."""
    bin_ = totoc_bin()
    if not bin_.is_file():
        pytest.fail(f"no totoc binary at {bin_}: build it (`cargo build -p totoc`) or set TOTOC_BIN")
    run(bin_, "export", "--checkpoint", checkpoint, "--config", config, "--out", work / "bundle", *export_args)
    run(bin_, "build-engine", "--artifacts", work / "bundle", "--out", work / "engine")
    return work / "engine"


def toto2_profile(name: str, variates: int, context: int, horizon: int, decode_block: int | None) -> str:
    block = f"\n    decode_block: {decode_block}" if decode_block else ""
    return (
        f"profiles:\n  - name: {name}\n    batch: 2\n    variates: {variates}\n    context: {context}\n"
        f"    horizon: {horizon}{block}\n"
    )


@pytest.fixture(scope="session")
def totoc_module():
    import totoc

    assert "site-packages" in totoc.__file__, totoc.__file__  # the installed wheel, not the source tree
    return totoc


@pytest.fixture(scope="session")
def toto1_engine(totoc_module, tmp_path_factory):
    work = tmp_path_factory.mktemp("tiny")
    path = build_engine(work, TINY_CHECKPOINT, REPO / "configs/tiny.yaml")
    eng = totoc_module.Engine(path, threads=THREADS)
    yield eng
    eng.close()


@pytest.fixture(scope="session")
def toto_ts_model():
    """toto-ts's backbone of the tiny checkpoint, loaded as users load a local checkpoint."""
    import torch
    from toto.model.toto import Toto

    torch.set_num_threads(THREADS)
    return Toto.load_from_checkpoint(str(TINY_CHECKPOINT), map_location="cpu", strict=True).to(torch.float32).eval()


@pytest.fixture(scope="session")
def toto2_checkpoint(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("toto2") / "ckpt-4m"
    run(sys.executable, REPO / "tests/reference/make_toto2_checkpoints.py", "--config", "4m", "--out", out)
    return out


@pytest.fixture(scope="session")
def toto2_engines(totoc_module, toto2_checkpoint, tmp_path_factory):
    """Two 4m engines: one pass (no decode_block) and block decoding of 64 points."""
    engines = {}
    for name, block in (("single", None), ("block64", 64)):
        work = tmp_path_factory.mktemp(name)
        config = work / "profiles.yaml"
        config.write_text(toto2_profile(name, 4, 512, 336, block))
        engines[block] = totoc_module.Engine(build_engine(work, toto2_checkpoint, config), threads=THREADS)
    yield engines
    for eng in engines.values():
        eng.close()


@pytest.fixture(scope="session")
def toto2_model(toto2_checkpoint):
    import torch
    from toto2 import Toto2Model

    torch.set_num_threads(THREADS)
    return Toto2Model.from_pretrained(str(toto2_checkpoint)).eval()


def case(directory: Path, name: str) -> dict:
    return json.loads((directory / f"{name}.json").read_text())


def within_golden_tolerance(actual: np.ndarray, reference: np.ndarray, sigma: np.ndarray, what: str) -> float:
    """totoc's acceptance bound against the references (engines::compare::Tolerance::default):
    |Δ| <= 1e-4·σ_v + 1e-6·|ref|, σ_v the variate's context standard deviation (ddof 0), broadcast over the last
    axis ``[..., V, H]``. Returns the worst |Δ|/tolerance."""
    actual, reference = np.asarray(actual, np.float64), np.asarray(reference, np.float64)
    assert actual.shape == reference.shape, (what, actual.shape, reference.shape)
    tol = 1e-4 * sigma[..., :, None] + 1e-6 * np.abs(reference)
    ratio = np.abs(actual - reference) / np.maximum(tol, 1e-30)
    worst = float(ratio.max())
    assert worst <= 1.0, f"{what}: |Δ| up to {worst:.2f}x the tolerance 1e-4·σ + 1e-6·|ref|"
    return worst


def context_sigma(values: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """Per-variate population standard deviation of the observed context points (engines::compare)."""
    out = np.zeros(values.shape[:-1])
    for idx in np.ndindex(values.shape[:-1]):
        x = values[idx][observed[idx]].astype(np.float64)
        out[idx] = x.std() if len(x) >= 2 else 0.0
    return out


def ks_statistic(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sample Kolmogorov–Smirnov D = sup |F_a − F_b| (engines/tests/support/ks.rs)."""
    a, b = np.sort(a), np.sort(b)
    x = np.concatenate([a, b])
    fa = np.searchsorted(a, x, side="right") / len(a)
    fb = np.searchsorted(b, x, side="right") / len(b)
    return float(np.abs(fa - fb).max())


def ks_critical(n: int, m: int, alpha: float = 0.01) -> float:
    """Asymptotic critical D at level alpha: c(α)·sqrt((n+m)/(n·m)), c(α) = sqrt(−ln(α/2)/2)."""
    return float(np.sqrt(-np.log(alpha / 2) / 2) * np.sqrt((n + m) / (n * m)))


def check_samples(ours: np.ndarray, theirs: np.ndarray, what: str) -> dict:
    """The per-step KS test of Toto 1.0's sampled fixtures (engines/tests/support/ks.rs `check_samples`) on paths
    ``[V, H, S]``: every step passes at a family-wise α = 0.01 (Bonferroni over V·H steps), at most
    max(3, V·H/16) steps reject at the per-step α = 0.01, and every step's sample mean is within 4.5 standard
    errors of the reference's."""
    assert ours.shape == theirs.shape, (what, ours.shape, theirs.shape)
    v, h, s = ours.shape
    steps = v * h
    rejections, worst_z = 0, 0.0
    for vi in range(v):
        for t in range(h):
            a, b = ours[vi, t].astype(np.float64), theirs[vi, t].astype(np.float64)
            d = ks_statistic(a, b)
            family = ks_critical(s, s, 0.01 / steps)
            assert d <= family, f"{what}: variate {vi}, t={t}: KS D={d:.3f} > {family:.3f} (family-wise α=0.01)"
            rejections += d > ks_critical(s, s)
            se = np.sqrt((a.var(ddof=1) + b.var(ddof=1)) / s)
            worst_z = max(worst_z, abs(a.mean() - b.mean()) / max(se, 1e-12))
    assert rejections <= max(3, steps // 16), f"{what}: {rejections} of {steps} steps reject at α=0.01"
    assert worst_z < 4.5, f"{what}: sample means differ by {worst_z:.2f} standard errors"
    return {"rejections": rejections, "worst_z": worst_z}
