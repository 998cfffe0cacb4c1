#!/usr/bin/env python3
"""Where one totoc graph spends its time, per operator type: ONNX Runtime's own per-node profile, outside totoc
(docs/int8.md, "The decode step against its floor").

Loads GRAPH (its external weights beside it) on the CPU provider with totoc's CPU load settings (2 intra-op
threads unless --threads, memory pattern off; `session.x64quantprecision=1` only with --u8u8, as totoc sets it only
on CPUs whose u8·s8 GEMM saturates), feeds inputs of the declared shapes (floats in [0.5, 1), integers 0,
`out_index` 15), runs --runs times after a warm-up with `enable_profiling` and prints the mean wall time of a run,
the number of nodes it ran, and each operator type's share of the summed kernel time. Profiling adds its own cost
per node, so the shares are what to read, not the absolute times.

Needs numpy and onnxruntime (the venv of `scripts/setup-python-venv.sh test`).

Usage: ort-node-profile.py GRAPH.onnx [--runs 30] [--threads 2] [--u8u8]
"""
import argparse
import collections
import json
import os
import tempfile

import numpy as np
import onnxruntime as ort


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("graph")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--u8u8", action="store_true", help="ask for ONNX Runtime's u8·u8 int8 GEMM (TOTOC_INT8_U8U8=1)")
    a = ap.parse_args()
    if a.runs < 1 or a.threads < 1:
        ap.error("--runs and --threads must be at least 1")
    ort.set_default_logger_severity(3)
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.enable_mem_pattern = False
    if a.u8u8:
        so.add_session_config_entry("session.x64quantprecision", "1")
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
    for _ in range(a.runs + 1):
        s.run(None, feed)
    events = json.load(open(s.end_profiling()))
    runs = a.runs + 1
    spent: dict[str, float] = collections.defaultdict(float)
    count: dict[str, int] = collections.defaultdict(int)
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            op = e["args"]["op_name"]
            spent[op] += e["dur"]
            count[op] += 1
    total = sum(spent.values())
    model = sum(e["dur"] for e in events if e.get("name") == "model_run")
    print(f"{a.graph}: {a.threads} threads, u8u8 {'on' if a.u8u8 else 'off'}, {runs} runs (the first a warm-up)")
    print(f"  run {model / runs / 1e3:.2f} ms (profiled), kernels {total / runs / 1e3:.2f} ms, "
          f"{sum(count.values()) // runs} nodes per run")
    print(f"  {'operator':24s} {'ms/run':>8s} {'share':>6s} {'nodes':>6s}")
    for op, d in sorted(spent.items(), key=lambda x: -x[1]):
        print(f"  {op:24s} {d / runs / 1e3:8.3f} {100 * d / total:5.1f}% {count[op] // runs:6d}")


if __name__ == "__main__":
    main()
