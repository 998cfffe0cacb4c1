"""One Engine shared by Python threads: the same results as serial calls, and the GIL released during the engine's
work (a pure-Python thread keeps counting meanwhile)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np


def workloads() -> list[tuple[np.ndarray | list, dict]]:
    rng = np.random.default_rng(11)
    walk = lambda *shape: (10 + np.cumsum(rng.normal(size=shape), axis=-1)).astype(np.float32)  # noqa: E731
    return [
        (walk(1, 120), dict(horizon=32)),
        (walk(3, 2, 90), dict(horizon=16, samples=32, seed=4)),
        ([walk(4, 60), walk(1, 200), walk(2, 30)], dict(horizon=40)),
        (walk(2, 100), dict(horizon=24, samples=64, quantiles=[0.05, 0.95], seed=9)),
    ]


def fields(f) -> list[np.ndarray]:
    return [x for x in (f.mean, f.quantiles, f.samples) if x is not None]


def test_four_threads_get_the_serial_results(engine):
    jobs = workloads()
    serial = [fields(engine.forecast(t, **kw)) for t, kw in jobs]
    # each thread runs every workload, starting at a different one, three times over
    def worker(k: int) -> list[tuple[int, list[np.ndarray]]]:
        out = []
        for rep in range(3):
            for j in range(len(jobs)):
                i = (j + k + rep) % len(jobs)
                t, kw = jobs[i]
                out.append((i, fields(engine.forecast(t, **kw))))
        return out

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(worker, range(4)))
    assert sum(len(r) for r in results) == 4 * 3 * len(jobs)
    for per_thread in results:
        for i, got in per_thread:
            for a, b in zip(got, serial[i], strict=True):
                np.testing.assert_array_equal(a, b, strict=True)


def test_the_gil_is_released_during_the_engine_call(engine):
    """A pure-Python counter runs while the main thread is inside `forecast`.

    If the call held the GIL, the counter could only run in the one switch interval (5 ms) before the call
    began, a small share of a call this long; it runs for most of it instead (the engine uses one of the two
    cores, the counter the other).
    """
    x = (10 + np.cumsum(np.random.default_rng(2).normal(size=(1, 2, 128)), axis=2)).astype(np.float32)
    kw = dict(horizon=64, samples=256, seed=1)
    engine.forecast(x, **kw)  # the graphs are loaded: the call below is engine work only

    count = 0
    stop = False

    def spin() -> None:
        nonlocal count
        while not stop:
            count += 1

    t = threading.Thread(target=spin)
    t.start()
    time.sleep(0.2)
    # the counter's rate while the main thread sleeps (GIL free)
    c0, t0 = count, time.perf_counter()
    time.sleep(0.2)
    rate = (count - c0) / (time.perf_counter() - t0)
    calls = 0
    start, before = time.perf_counter(), count
    while time.perf_counter() - start < 0.5 or calls < 2:
        engine.forecast(x, **kw)
        calls += 1
    during, elapsed = count - before, time.perf_counter() - start
    stop = True
    t.join()
    share = during / (rate * elapsed)
    print(f"counter: {during} increments in {elapsed:.3f} s of {calls} engine calls "
          f"({share:.0%} of its rate alone, {rate:.0f}/s)")
    assert during > 0
    # held, it could run ~5 ms per call at most
    assert share > 0.1, f"the counter ran {share:.1%} of the time: the GIL looks held during forecast"
