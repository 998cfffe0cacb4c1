"""Cases that need a process of their own, run as a script by test_process.py (each prints one JSON line):

* ``fork ENGINE``: the parent loads an engine (as gunicorn ``--preload`` does), then the same worker code runs in
  a ``fork`` pool, which must raise ``TotocError`` at once (also when the fork happens while another thread of the
  parent is forecasting, which left the child's engine locked), and in a ``spawn`` pool, which must forecast; a
  new ``Engine`` in a forked child must raise too. A script because ``spawn`` workers import their code from the
  main module's file, as in users' programs.
* ``interrupt ENGINE``: SIGINT sent to this process while ``forecast``, ``predict_df`` and ``cross_validation``
  run long calls: each must stop with ``KeyboardInterrupt`` soon after, and the engine must forecast afterwards.
  Its own process, so that a signal arriving late cannot interrupt pytest.
* ``long ENGINE``: one series of 10^7 points (``strict_context=False``): the peak memory the call adds, and what
  it reports, against the forecast of its last ``max_context`` points. A fresh process, so that its peak RSS is
  this call's.

Importing this file does nothing (pytest's ``--doctest-modules`` imports it).
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import resource
import signal
import sys
import threading
import time
from typing import Any, Callable

import numpy as np

import totoc

# --- fork / spawn ----------------------------------------------------------------------------------------------

#: This process's engine (a pool worker loads it in its initializer unless it already has one).
ENGINE: totoc.Engine | None = None

#: What the parent's and the workers' engines run with: more than one thread, so that ONNX Runtime's pool has
#: worker threads, which a forked child does not get.
THREADS = 2


def load(path: str) -> None:
    """A pool's initializer: the engine of this process, loaded once."""
    global ENGINE
    if ENGINE is None:
        ENGINE = totoc.Engine(path, threads=THREADS)


def work(x: np.ndarray) -> dict[str, Any]:
    """What every worker runs, whatever the start method."""
    assert ENGINE is not None
    try:
        return {"mean": ENGINE.forecast(x, horizon=8).mean.tolist()}
    except totoc.TotocError as e:
        return {"error": type(e).__name__, "message": str(e), "closed": ENGINE.closed}


def pooled(method: str, path: str, x: np.ndarray, timeout: float) -> dict[str, Any]:
    """``work(x)`` in a one-worker pool of ``method``, timed from the pool's start."""
    start = time.monotonic()
    with mp.get_context(method).Pool(1, initializer=load, initargs=(path,)) as pool:
        try:
            out = pool.apply_async(work, (x,)).get(timeout=timeout)
        except mp.TimeoutError:
            out = {"timeout": timeout}
    out["seconds"] = time.monotonic() - start
    return out


def new_engine(path: str, conn: Any) -> None:
    """In a forked child: load another engine."""
    start = time.monotonic()
    try:
        totoc.Engine(path, threads=THREADS)
        conn.send({"loaded": True})
    except totoc.TotocError as e:
        conn.send({"error": type(e).__name__, "message": str(e), "seconds": time.monotonic() - start})


def forked_new_engine(path: str, timeout: float) -> dict[str, Any]:
    ours, theirs = mp.Pipe()
    child = mp.get_context("fork").Process(target=new_engine, args=(path, theirs))
    start = time.monotonic()
    child.start()
    out = ours.recv() if ours.poll(timeout) else {"timeout": timeout}
    out["seconds_in_parent"] = time.monotonic() - start
    child.join(5)
    if child.is_alive():
        child.kill()
        child.join()
    return out


def fork_case(path: str) -> dict[str, Any]:
    load(path)
    assert ENGINE is not None
    x = (10 + np.sin(np.arange(200) / 9)).astype(np.float32)[None]
    out = {
        "parent": work(x),
        "fork": pooled("fork", path, x, timeout=5),
        "fork_new_engine": forked_new_engine(path, timeout=5),
        "spawn": pooled("spawn", path, x, timeout=300),
    }
    # Forked while another thread of the parent is inside a forecast: the child's copy of the engine's lock stays
    # held for ever (without the process check, the child's call waits on it and never returns).
    many = (10 + np.cumsum(np.random.default_rng(1).normal(size=(16, 2, 256)), axis=2)).astype(np.float32)
    busy = threading.Thread(target=lambda: ENGINE.forecast(many, horizon=64, samples=64))
    busy.start()
    time.sleep(0.5)
    out["busy_was_running"] = busy.is_alive()  # as the pool forks its worker, right after
    out["fork_while_busy"] = pooled("fork", path, x, timeout=5)
    busy.join()
    out["parent_after"] = work(x)
    return out


# --- SIGINT ----------------------------------------------------------------------------------------------------


def interrupted(call: Callable[[], Any], after: float) -> dict[str, Any]:
    """Runs ``call`` in this (the main) thread while another thread sends SIGINT to this process after ``after``
    seconds: whether ``KeyboardInterrupt`` came out of the call, and how long after the signal."""
    sent: list[float] = []

    def send() -> None:
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(after, send)
    start = time.monotonic()
    timer.start()
    try:
        call()
        outcome = "returned"
    except KeyboardInterrupt:
        outcome = "KeyboardInterrupt"
    end = time.monotonic()
    try:
        timer.join()
        time.sleep(0.2)  # a signal sent after the call returned is raised here
    except KeyboardInterrupt:
        outcome += ", then KeyboardInterrupt after it"
    return {
        "outcome": outcome,
        "ran": end - start,
        "after_signal": end - sent[0] if sent else None,
        # The timer thread needs the GIL to send the signal: late by more than a switch interval or two only if
        # the call held the GIL.
        "signal_late": sent[0] - start - after if sent else None,
    }


def interrupt_case(path: str) -> dict[str, Any]:
    import pandas as pd

    eng = totoc.Engine(path, threads=1)
    rng = np.random.default_rng(5)
    small = (10 + np.cumsum(rng.normal(size=(1, 100)))).astype(np.float32)[None]
    want = eng.forecast(small, horizon=8, samples=16, seed=1).mean

    def table(n_series: int, length: int) -> pd.DataFrame:
        return pd.DataFrame({
            "unique_id": np.repeat([f"s{i}" for i in range(n_series)], length),
            "ds": np.tile(pd.date_range("2024-01-01", periods=length, freq="h"), n_series),
            "y": 10 + np.cumsum(rng.normal(size=n_series * length)),
        })

    # Each call runs for 10 s or more on the tiny engine of a dev build (many series and windows, long horizons,
    # sample paths), almost all of it in the engine: the signal, sent 2 s in (after the table is read, which
    # has no graph runs to check at), finds it there.
    many = (10 + np.cumsum(rng.normal(size=(512, 2, 256)), axis=2)).astype(np.float32)
    series, windows = table(1000, 300), table(64, 600)
    calls: dict[str, Callable[[], Any]] = {
        "forecast": lambda: eng.forecast(many, horizon=160, samples=16, seed=3),
        "predict_df": lambda: eng.predict_df(series, prediction_length=160, samples=16, seed=3),
        "cross_validation": lambda: eng.cross_validation(windows, h=32, n_windows=8, samples=64, seed=3),
    }
    out: dict[str, Any] = {}
    for name, call in calls.items():
        out[name] = interrupted(call, after=2.0)
        # the engine still forecasts, and gives what it gave before
        out[name]["then"] = bool(np.array_equal(eng.forecast(small, horizon=8, samples=16, seed=1).mean, want))
    return out


# --- a long series ---------------------------------------------------------------------------------------------


def peak_rss() -> int:
    """This process's peak resident memory so far, bytes."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def long_case(path: str) -> dict[str, Any]:
    eng = totoc.Engine(path, threads=1)
    keep = eng.info["max_context"]
    n = 10_000_000
    # Filled in slices, so that making it needs no temporary as large as itself (the peak stays its size).
    x = np.empty((1, n), dtype=np.float32)
    for i in range(0, n, 1_000_000):
        x[0, i : i + 1_000_000] = 10 + np.sin(np.arange(i, min(n, i + 1_000_000)) / 50.0)
    x[0, : n // 2 : 7] = np.nan  # missing points in the part the engine leaves out
    recent = np.ascontiguousarray(x[:, -keep:])
    want = eng.forecast(recent, horizon=16)  # the graphs are loaded: the call below adds only its own memory
    before = peak_rss()
    got = eng.forecast(x, horizon=16)
    extra = peak_rss() - before
    return {
        "points": n,
        "max_context": keep,
        "extra_peak_bytes": extra,
        "input_bytes": x.nbytes,
        "context_used": int(got.context_used),
        "context_truncated": bool(got.context_truncated),
        "recent_context_used": int(want.context_used),
        "recent_context_truncated": bool(want.context_truncated),
        "same_forecast": bool(np.array_equal(got.mean, want.mean)),
    }


CASES = {"fork": fork_case, "interrupt": interrupt_case, "long": long_case}

if __name__ == "__main__":
    case, engine_path = sys.argv[1], sys.argv[2]
    print(json.dumps(CASES[case](engine_path)), flush=True)
