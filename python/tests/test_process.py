"""An engine and its process: after ``fork()`` (an error at once instead of a hang, a ``spawn`` pool of the same code
forecasts), Ctrl-C during a long call (``KeyboardInterrupt`` within a second), and a long history (only the points
the engine keeps are copied). Each case runs in a process of its own (process_cases.py says why)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

CASES = Path(__file__).with_name("process_cases.py")
FIX = "load the engine in the worker (spawn / forkserver)"


def run_case(case: str, engine_dir: Path, timeout: float = 600) -> dict[str, Any]:
    p = subprocess.run(
        [sys.executable, str(CASES), case, str(engine_dir)], capture_output=True, text=True, timeout=timeout
    )
    if p.returncode != 0:
        pytest.fail(f"process_cases.py {case} exited {p.returncode}:\n{p.stderr[-4000:]}")
    out = json.loads(p.stdout.strip().splitlines()[-1])
    print(json.dumps(out, indent=1))
    return out


def test_a_forked_child_gets_an_error_and_a_spawn_pool_forecasts(engine_dir):
    r = run_case("fork", engine_dir)
    assert "mean" in r["parent"], r["parent"]
    # the engine the parent loaded, used by the same code in a fork pool's worker
    fork = r["fork"]
    assert fork.get("error") == "TotocError", fork
    assert FIX in fork["message"] and "forked from it" in fork["message"], fork["message"]
    assert fork["closed"] is True
    assert fork["seconds"] < 5, fork
    # a new engine in a forked child
    new = r["fork_new_engine"]
    assert new.get("error") == "TotocError", new
    assert FIX in new["message"], new["message"]
    assert new["seconds"] < 5 and new["seconds_in_parent"] < 5, new
    # forked while another thread was forecasting (the engine's lock held): the same error, not a hang
    busy = r["fork_while_busy"]
    assert r["busy_was_running"] is True
    assert busy.get("error") == "TotocError" and FIX in busy["message"], busy
    assert busy["seconds"] < 5, busy
    # the same code in a spawn pool forecasts, as the parent does, before and after
    assert r["spawn"].get("mean") == r["parent"]["mean"], r["spawn"]
    assert r["parent_after"] == r["parent"]


@pytest.mark.parametrize("call", ["forecast", "predict_df", "cross_validation"])
def test_ctrl_c_stops_a_long_call_within_a_second(engine_dir, interrupt_results, call):
    r = interrupt_results[call]
    assert r["outcome"] == "KeyboardInterrupt", r
    # the call released the GIL: the thread that sends the signal ran on time
    assert r["signal_late"] < 0.5, r
    assert r["after_signal"] < 1.0, r
    assert r["then"] is True, "the engine no longer forecasts as before the interrupted call"


@pytest.fixture(scope="module")
def interrupt_results(engine_dir) -> dict[str, Any]:
    return run_case("interrupt", engine_dir)


def test_a_long_history_is_not_copied(engine_dir):
    r = run_case("long", engine_dir)
    # every point read into the request (8 bytes each) would add 80 MB; the call adds its engine work only
    assert r["extra_peak_bytes"] < 16 * 2**20, r
    assert r["context_truncated"] is True and r["context_used"] == r["max_context"], r
    assert r["recent_context_truncated"] is False and r["recent_context_used"] == r["max_context"], r
    assert r["same_forecast"] is True, r
