"""Bad input raises the right exception, naming the problem (and the fix), and never takes the interpreter down:
each case runs in this process, and the engine still forecasts afterwards."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

GOOD = np.linspace(1, 2, 50, dtype=np.float32)[None]
NAN_ROW = np.full((1, 20), np.nan, dtype=np.float32)


def long(variates: int = 1, nan: tuple[tuple[int, int], ...] = (), value: tuple[int, int, float] | None = None):
    """A series of 600 points, longer than the engine's context (256): the binding copies only its last 256 points
    and checks the others from a scan. ``nan``: (variate, t) from which a variate is NaN to the end; ``value``:
    (variate, t, x) sets one point."""
    x = np.tile((10 + np.sin(np.arange(600) / 9)).astype(np.float32), (variates, 1))
    for v, t in nan:
        x[v, t:] = np.nan
    if value is not None:
        x[value[0], value[1]] = value[2]
    return x


# (description, call, exception class name, message fragment)
BAD = [
    ("strings", lambda e: e.forecast(np.array([["a", "b"]]), 4), "InvalidInput", "dtype <U1"),
    ("objects", lambda e: e.forecast(np.array([[1.0, "x"]], dtype=object), 4), "InvalidInput", "dtype object"),
    ("complex", lambda e: e.forecast(np.ones((1, 5), dtype=np.complex64), 4), "InvalidInput", "dtype complex64"),
    ("a string", lambda e: e.forecast("1,2,3", 4), "InvalidInput", "target is a str"),
    ("a list of strings", lambda e: e.forecast([["a", "b"]], 4), "InvalidInput", "could not convert string"),
    ("1-D", lambda e: e.forecast(np.ones(10), 4), "InvalidInput", "target has 1 dimension(s)"),
    ("4-D", lambda e: e.forecast(np.ones((1, 1, 1, 10)), 4), "InvalidInput", "target has 4 dimension(s)"),
    ("1-D in a list", lambda e: e.forecast([np.ones(10)], 4), "InvalidInput", "series 0 has 1 dimension(s)"),
    ("no variates", lambda e: e.forecast(np.ones((0, 10)), 4), "InvalidInput", "`target` has no variates"),
    ("no points", lambda e: e.forecast(np.ones((1, 0)), 4), "InvalidInput", "variate 0 is empty"),
    ("no series", lambda e: e.forecast(np.ones((0, 1, 10)), 4), "InvalidInput", "target has no series"),
    ("empty list", lambda e: e.forecast([], 4), "InvalidInput", "target is an empty list"),
    ("all NaN", lambda e: e.forecast(NAN_ROW, 4), "InvalidInput",
     "target: variate 0 has no observed point (all null); drop it or give it at least one value"),
    ("all NaN, 2nd series", lambda e: e.forecast([GOOD, NAN_ROW], 4), "InvalidInput",
     "series 1: variate 0 has no observed point"),
    ("infinite", lambda e: e.forecast(np.array([[1.0, np.inf]], dtype=np.float32), 4), "InvalidInput",
     "variate 0, t=1: inf"),
    ("beyond f32", lambda e: e.forecast(np.array([[1.0, 1e39]]), 4), "InvalidInput", "overflows f32"),
    ("horizon 0", lambda e: e.forecast(GOOD, 0), "InvalidInput", "`horizon` is 0; ask for at least one step"),
    ("horizon < 0", lambda e: e.forecast(GOOD, -3), "InvalidInput", "`horizon` is -3; it must be >= 0"),
    ("horizon float", lambda e: e.forecast(GOOD, 2.5), "InvalidInput", "`horizon` must be an integer"),
    ("horizon past the engine", lambda e: e.forecast(GOOD, 1000), "EngineLimit",
     "horizon 1000 exceed this engine's limit of 160; ask for at most 160"),
    ("too many samples", lambda e: e.forecast(GOOD, 4, samples=1000), "EngineLimit",
     "1000 samples exceed this engine's limit of 256"),
    ("too many variates", lambda e: e.forecast(np.ones((5, 10)), 4), "EngineLimit",
     "5 variates exceed this engine's limit of 4"),
    ("quantiles without samples", lambda e: e.forecast(GOOD, 4, quantiles=[0.5]), "InvalidInput",
     "quantiles need sampled paths but `samples` is 0"),
    ("quantile out of range", lambda e: e.forecast(GOOD, 4, samples=8, quantiles=[1.5]), "InvalidInput",
     "quantile 1.5 is outside (0, 1)"),
    ("quantiles not numbers", lambda e: e.forecast(GOOD, 4, samples=8, quantiles="abc"), "InvalidInput",
     "quantiles must be a sequence of levels"),
    ("id_mask length", lambda e: e.forecast(np.ones((2, 10)), 4, id_mask=[0]), "InvalidInput",
     "`id_mask` has 1 ids for 2 variates"),
    ("negative id", lambda e: e.forecast(np.ones((2, 10)), 4, id_mask=[0, -1]), "InvalidInput",
     "id -1 of variate 1 is negative"),
    ("negative seed", lambda e: e.forecast(GOOD, 4, seed=-1), "InvalidInput", "`seed` is -1"),
    ("bool samples", lambda e: e.forecast(GOOD, 4, samples=True), "InvalidInput", "got a bool"),
    # longer than the context: the same errors, in the same order, as when every point is read
    ("infinite among the points left out", lambda e: e.forecast(long(value=(0, 3, np.inf)), 4), "InvalidInput",
     "target: variate 0, t=3: inf (overflows f32, |x| > 3.4e38) is not a finite f32"),
    ("infinite among the points kept", lambda e: e.forecast(long(value=(0, 590, -np.inf)), 4), "InvalidInput",
     "target: variate 0, t=590: -inf"),
    ("all NaN, longer than the context", lambda e: e.forecast(long(nan=((0, 0),)), 4), "InvalidInput",
     "target: variate 0 has no observed point (all null)"),
    ("no recent point", lambda e: e.forecast([GOOD, long(nan=((0, 300),))], 4), "InvalidInput",
     "series 1: variate 0 has no observed point in the last 256 points the engine keeps"),
    ("no recent point, then a variate of NaN", lambda e: e.forecast(long(2, nan=((0, 300), (1, 0))), 4),
     "InvalidInput", "target: variate 1 has no observed point (all null)"),
    ("no recent point and horizon 0", lambda e: e.forecast(long(nan=((0, 300),)), 0), "InvalidInput",
     "`horizon` is 0"),
    ("no recent point and too many samples", lambda e: e.forecast(long(nan=((0, 300),)), 4, samples=1000),
     "EngineLimit", "1000 samples exceed this engine's limit of 256"),
    ("no recent point, strict", lambda e: e.forecast(long(nan=((0, 300),)), 4, strict_context=True),
     "EngineLimit", "the context has 600 points but this engine holds 256 and `strict_context` is set"),
    ("too many variates, strict", lambda e: e.forecast(long(5), 4, strict_context=True), "EngineLimit",
     "5 variates exceed this engine's limit of 4"),
    ("id_mask length, long", lambda e: e.forecast(long(2), 4, id_mask=[0]), "InvalidInput",
     "`id_mask` has 1 ids for 2 variates"),
]


@pytest.mark.parametrize("what, call, cls, fragment", BAD, ids=[b[0] for b in BAD])
def test_bad_input_raises_the_right_exception(engine, totoc_module, what, call, cls, fragment):
    with pytest.raises(getattr(totoc_module, cls)) as info:
        call(engine)
    assert fragment in str(info.value), f"{what}: {info.value}"
    assert isinstance(info.value, totoc_module.TotocError)
    # the engine is still fine
    assert engine.forecast(GOOD, 4).mean.shape == (1, 4)


def test_request_errors_are_value_errors(engine, totoc_module):
    with pytest.raises(ValueError):
        engine.forecast(np.ones(3), 4)
    with pytest.raises(ValueError):
        engine.forecast(GOOD, 1000)


def test_a_closed_engine(totoc_module, engine_dir):
    eng = totoc_module.Engine(engine_dir)
    eng.close()
    with pytest.raises(totoc_module.InvalidInput, match=r"is closed \(Engine.close\(\) was called\); load it again"):
        eng.forecast(GOOD, 4)


def test_a_missing_engine(totoc_module, tmp_path):
    with pytest.raises(totoc_module.BundleIntegrity, match="no such directory; build one with `totoc build-engine"):
        totoc_module.Engine(tmp_path / "nope")


def test_not_an_engine(totoc_module, tmp_path):
    with pytest.raises(totoc_module.BundleIntegrity, match="manifest.json"):
        totoc_module.Engine(tmp_path)


def test_a_tampered_bundle(totoc_module, engine_dir, tmp_path):
    copy = tmp_path / "engine"
    shutil.copytree(engine_dir, copy)
    graph = sorted(copy.glob("*.onnx"))[0]
    with open(graph, "ab") as f:
        f.write(b"\0")
    with pytest.raises(totoc_module.BundleIntegrity) as info:
        totoc_module.Engine(copy)
    msg = str(info.value)
    assert "failed its integrity check" in msg and graph.name in msg, msg


def test_a_bad_memory_budget(totoc_module, engine_dir):
    with pytest.raises(totoc_module.InvalidInput, match="memory size \"lots\""):
        totoc_module.Engine(engine_dir, memory_budget="lots")
    with pytest.raises(totoc_module.InvalidInput, match="exceed the memory budget"):
        totoc_module.Engine(engine_dir, memory_budget=1000)


@pytest.mark.parametrize("at", ["forecast", "predict_df", "cross_validation"])
def test_a_panic_is_a_totoc_error(engine, totoc_module, monkeypatch, at):
    """A Rust panic (a bug) is raised as TotocError, which `except Exception` catches, not as PyO3's
    PanicException (a BaseException). The panic is made by the test hook of dev builds (TOTOC_TEST_PANIC)."""
    from totoc import _native
    from test_table import long_table

    if not getattr(_native, "_TEST_HOOKS", False):
        pytest.skip("a release build: no test hooks")
    calls = {
        "forecast": lambda: engine.forecast(GOOD, 4),
        "predict_df": lambda: engine.predict_df(long_table(), prediction_length=4),
        "cross_validation": lambda: engine.cross_validation(long_table(), h=4, n_windows=2),
    }
    monkeypatch.setenv("TOTOC_TEST_PANIC", at)
    caught = None
    try:
        calls[at]()
    except Exception as e:  # noqa: BLE001 - what a worker loop catches
        caught = e
    assert type(caught) is totoc_module.TotocError, repr(caught)
    message = str(caught)
    assert "internal error in totoc (a bug: please report it with this message)" in message, message
    assert f"TOTOC_TEST_PANIC={at}: a panic a test asked for" in message, message
    monkeypatch.delenv("TOTOC_TEST_PANIC")
    # the engine forecasts as before
    assert calls[at]() is not None
    assert engine.forecast(GOOD, 4).mean.shape == (1, 4)
