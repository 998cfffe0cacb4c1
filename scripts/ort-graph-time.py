#!/usr/bin/env python3
"""Times one totoc graph file in plain ONNX Runtime, outside totoc: a cross-check of `totoc bench`
(docs/precision.md, "Speed and memory"); with --profile, where the time goes per operator type (ONNX Runtime's
own per-node profile; docs/int8.md, "The decode step against its floor").

Loads GRAPH (its external weights beside it) on the CPU provider with totoc's CPU load settings (2 intra-op
threads unless --threads, memory pattern off; `session.x64quantprecision=1` only with --u8u8, as totoc sets it
only on CPUs whose u8·s8 int8 GEMM saturates), feeds inputs of the declared shapes (floats in [0.5, 1), integers
0, `out_index` 15: the last context slot of a 16-slot pass), runs once to warm up and prints the median wall time
of --runs runs. With --profile the runs are profiled instead, and it prints the mean wall time of a run, the nodes
it ran and each operator type's share of the summed kernel time (profiling adds its own cost per node, so read
the shares, not the absolute times).

Needs numpy and onnxruntime 1.31.1 (the venv of `scripts/setup-python-venv.sh test`).

Usage: ort-graph-time.py GRAPH.onnx [--runs 7] [--threads 2] [--u8u8] [--profile]
"""
import argparse
import collections
import json
import os
import tempfile
import time

import numpy as np
import onnxruntime as ort


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("graph")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--u8u8", action="store_true", help="ask for ONNX Runtime's u8·u8 int8 GEMM (TOTOC_INT8_U8U8=1)")
    ap.add_argument("--profile", action="store_true", help="per-operator shares of ONNX Runtime's node profile")
    a = ap.parse_args()
    if a.runs < 1 or a.threads < 1:
        ap.error("--runs and --threads must be at least 1")
    ort.set_default_logger_severity(3)
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.enable_mem_pattern = False
    if a.u8u8:
        so.add_session_config_entry("session.x64quantprecision", "1")
    if a.profile:
        so.enable_profiling = True
        so.profile_file_prefix = os.path.join(tempfile.mkdtemp(prefix="totoc-prof-"), "ort")
    s = ort.InferenceSession(a.graph, so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feed = {}
    for i in s.get_inputs():
        if "int64" in i.type:
            feed[i.name] = np.zeros(i.shape, dtype=np.int64)
        else:
            feed[i.name] = (rng.random(i.shape) * 0.5 + 0.5).astype(np.float32)
    if "out_index" in feed:
        feed["out_index"][:] = 15
    s.run(None, feed)
    times = []
    for _ in range(a.runs):
        t = time.perf_counter()
        s.run(None, feed)
        times.append(time.perf_counter() - t)
    setting = f"{a.threads} threads, u8u8 {'on' if a.u8u8 else 'off'}"
    if not a.profile:
        print(f"{a.graph}: median {sorted(times)[len(times) // 2] * 1e3:.1f} ms over {a.runs} runs, {setting}")
        return
    print_profile(json.load(open(s.end_profiling())), a.runs + 1, f"{a.graph}: {setting}")


def print_profile(events: list, runs: int, title: str) -> None:
    """Each operator type's share of the kernel time of `runs` profiled runs (the first a warm-up)."""
    spent: dict[str, float] = collections.defaultdict(float)
    count: dict[str, int] = collections.defaultdict(int)
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            op = e["args"]["op_name"]
            spent[op] += e["dur"]
            count[op] += 1
    total = sum(spent.values())
    model = sum(e["dur"] for e in events if e.get("name") == "model_run")
    print(f"{title}, {runs} profiled runs (the first a warm-up)")
    print(f"  run {model / runs / 1e3:.2f} ms (profiled), kernels {total / runs / 1e3:.2f} ms, "
          f"{sum(count.values()) // runs} nodes per run")
    print(f"  {'operator':24s} {'ms/run':>8s} {'share':>6s} {'nodes':>6s}")
    for op, d in sorted(spent.items(), key=lambda x: -x[1]):
        print(f"  {op:24s} {d / runs / 1e3:8.3f} {100 * d / total:5.1f}% {count[op] // runs:6d}")


if __name__ == "__main__":
    main()
