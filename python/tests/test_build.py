"""`totoc.export` and `totoc.build_engine`: the `totoc export` / `totoc build-engine` code from Python — the same
bundle files, an engine that forecasts bit for bit as the CLI-built one, progress to a callback or the logger, the
errors as totoc exceptions, and the GIL released while they run."""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import THREADS, TINY_CHECKPOINT, TINY_CONFIG, run_totoc


def file_hashes(bundle: Path) -> dict[str, str]:
    return {f["path"]: f["sha256"] for f in json.loads((bundle / "manifest.json").read_text())["files"]}


@pytest.fixture(scope="module")
def built(totoc_module, tmp_path_factory, ort_lib):
    """An export and an engine made from Python, with the progress events of each."""
    work = tmp_path_factory.mktemp("pybuild")
    events: dict[str, list] = {"export": [], "build": []}
    bundle = totoc_module.export(TINY_CHECKPOINT, TINY_CONFIG, work / "bundle", progress=events["export"].append)
    engine = totoc_module.build_engine(
        bundle, work / "engine", threads=THREADS, ort_lib=ort_lib, progress=events["build"].append
    )
    return work, bundle, engine, events


def test_export_writes_the_cli_bundle(built, tmp_path):
    work, bundle, _, events = built
    assert bundle == work / "bundle"
    run_totoc("export", "--checkpoint", str(TINY_CHECKPOINT), "--config", str(TINY_CONFIG), "--out", str(tmp_path / "cli"))
    assert file_hashes(bundle) == file_hashes(tmp_path / "cli")
    kinds = [e.kind for e in events["export"]]
    assert kinds[0] == "total" and kinds[-1] == "done", kinds
    steps = [e for e in events["export"] if e.kind == "step"]
    assert len(steps) == events["export"][0].total > 0
    assert [e.done for e in steps] == list(range(1, len(steps) + 1))
    assert steps[0].message.startswith(f"[1/{len(steps)}] wrote ")
    assert events["export"][-1].message.startswith("exported 2 toto-1.0 profile(s)")


def test_int8_roles_reach_the_manifest_as_the_cli_writes_them(totoc_module, tmp_path):
    bundle = totoc_module.export(
        TINY_CHECKPOINT, TINY_CONFIG, tmp_path / "py", precisions=["int8"], int8_roles="fc1, qkv"
    )
    run_totoc("export", "--checkpoint", str(TINY_CHECKPOINT), "--config", str(TINY_CONFIG), "--out",
              str(tmp_path / "cli"), "--precision", "int8", "--int8-roles", "qkv,fc1")
    assert json.loads((bundle / "manifest.json").read_text())["inputs"]["int8_plan"] == "qkv,fc1"
    assert file_hashes(bundle) == file_hashes(tmp_path / "cli")


def test_the_built_engine_forecasts_as_the_cli_built_one(built, engine, totoc_module, ort_lib):
    _, _, engine_path, events = built
    steps = [e for e in events["build"] if e.kind == "step"]
    assert steps and "built and checked" in steps[-1].message
    assert events["build"][-1].message.startswith("built toto-1.0 cpu engine")
    x = (10 + np.cumsum(np.random.default_rng(5).normal(size=(3, 2, 90)), axis=2)).astype(np.float32)
    with totoc_module.Engine(engine_path, threads=THREADS, ort_lib=ort_lib) as mine:
        a = mine.forecast(x, horizon=24, samples=16, seed=3)
    b = engine.forecast(x, horizon=24, samples=16, seed=3)
    for got, want in ((a.mean, b.mean), (a.quantiles, b.quantiles), (a.samples, b.samples)):
        np.testing.assert_array_equal(got, want, strict=True)


def test_up_to_date_is_skipped_and_said(built, totoc_module, ort_lib, caplog):
    work, bundle, engine_path, _ = built
    before = (engine_path / "manifest.json").stat().st_mtime_ns
    with caplog.at_level(logging.INFO, logger="totoc"):
        totoc_module.export(TINY_CHECKPOINT, TINY_CONFIG, bundle)
        totoc_module.build_engine(bundle, engine_path, threads=THREADS, ort_lib=ort_lib)
    lines = [r.getMessage() for r in caplog.records if r.name == "totoc"]
    assert any("is up to date" in line and "skipped the export" in line for line in lines), lines
    assert any("is up to date" in line and "skipped the build" in line for line in lines), lines
    assert (engine_path / "manifest.json").stat().st_mtime_ns == before


def test_progress_goes_to_the_totoc_logger_by_default(totoc_module, tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="totoc"):
        totoc_module.export(TINY_CHECKPOINT, TINY_CONFIG, tmp_path / "b", profiles=["small"])
    lines = [r.getMessage() for r in caplog.records if r.name == "totoc"]
    assert any(" wrote " in line for line in lines), lines
    assert lines[-1].startswith("exported 1 toto-1.0 profile(s)"), lines


def test_an_exception_of_the_callback_is_raised_after_the_job(totoc_module, tmp_path):
    calls = []

    def boom(event):
        calls.append(event)
        if event.kind == "step":
            raise KeyError("from the callback")

    with pytest.raises(KeyError, match="from the callback"):
        totoc_module.export(TINY_CHECKPOINT, TINY_CONFIG, tmp_path / "b", progress=boom)
    # not called again once it raised; the export itself ran to its end (a job cannot stop half-way)
    assert [e.kind for e in calls] == ["total", "step"]
    assert (tmp_path / "b" / "manifest.json").is_file()


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda t, p: t.export(p / "none", TINY_CONFIG, p / "o"), "InvalidInput", "no such directory"),
        (lambda t, p: t.export(TINY_CHECKPOINT, p / "none.yaml", p / "o"), "InvalidInput", "no such file"),
        (lambda t, p: t.export(TINY_CHECKPOINT, TINY_CONFIG, p / "o", profiles=["nope"]), "InvalidInput",
         "unknown profile `nope`"),
        (lambda t, p: t.export(TINY_CHECKPOINT, TINY_CONFIG, p / "o", precisions=["bf16"]), "InvalidInput",
         "fp32, fp16 or int8"),
        (lambda t, p: t.export(TINY_CHECKPOINT, TINY_CONFIG, p / "o", opset=17), "InvalidInput",
         "opset 17 is not supported"),
        (lambda t, p: t.export(TINY_CHECKPOINT, TINY_CONFIG, p / "o", progress=3), "InvalidInput", "not callable"),
        (lambda t, p: t.export(TINY_CHECKPOINT, TINY_CONFIG, p / "o", int8_roles="qkv,mlp"), "InvalidInput",
         '"mlp" is not an int8 role'),
        (lambda t, p: t.export(TINY_CHECKPOINT, TINY_CONFIG, p / "o", tokenizer=p / "none"), "InvalidInput",
         "tokenizer"),
        (lambda t, p: t.export(TINY_CHECKPOINT, TINY_CONFIG, p / "o", tokenizer=TINY_CHECKPOINT), "InvalidInput",
         "has no tokenizer checkpoint; remove --tokenizer"),
        (lambda t, p: t.build_engine(p / "none", p / "o"), "BundleIntegrity", "none"),
        (lambda t, p: t.build_engine(p, p / "o", target="gpu"), "InvalidInput", "cpu, cuda or tensorrt"),
        (lambda t, p: t.build_engine(p, p / "o", graphs="one"), "InvalidInput", "per-bucket or shared"),
        (lambda t, p: t.build_engine(p, p / "o", memory_budget="lots"), "InvalidInput", "lots"),
        (lambda t, p: t.build_engine(p, p / "o", threads=0), "InvalidInput", "`threads` is 0"),
    ],
)
def test_errors_are_totoc_exceptions(totoc_module, tmp_path, call, error, words):
    with pytest.raises(getattr(totoc_module, error)) as e:
        call(totoc_module, tmp_path)
    assert words in str(e.value)


def test_a_tampered_bundle_is_refused(built, totoc_module, tmp_path, ort_lib):
    import shutil

    _, bundle, _, _ = built
    copy = tmp_path / "bundle"
    shutil.copytree(bundle, copy)
    graph = next(copy.glob("*.onnx"))
    graph.write_bytes(graph.read_bytes() + b"\0")
    with pytest.raises(totoc_module.BundleIntegrity, match="integrity check"):
        totoc_module.build_engine(copy, tmp_path / "engine", ort_lib=ort_lib)


def test_the_gil_is_released_during_a_build(built, totoc_module, tmp_path, ort_lib):
    """A pure-Python counter keeps counting while the main thread builds an engine (the job takes the GIL only for each
    progress call)."""
    _, bundle, _, _ = built
    count, stop = [0], threading.Event()

    def counter():
        while not stop.is_set():
            count[0] += 1

    t = threading.Thread(target=counter)
    t.start()
    time.sleep(0.05)
    try:
        start, before = time.perf_counter(), count[0]
        totoc_module.build_engine(bundle, tmp_path / "engine", threads=THREADS, ort_lib=ort_lib, progress=lambda e: None)
        seconds, counted = time.perf_counter() - start, count[0] - before
    finally:
        stop.set()
        t.join()
    # the counter's own rate, with the main thread idle
    before = count[0]
    stop.clear()
    t = threading.Thread(target=counter)
    t.start()
    time.sleep(0.2)
    stop.set()
    t.join()
    rate = (count[0] - before) / 0.2
    # held for the whole build, the counter would get only the switch intervals; released, most of its rate
    assert counted > 0.3 * rate * seconds, (counted, rate, seconds)
