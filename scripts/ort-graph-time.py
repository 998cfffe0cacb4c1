#!/usr/bin/env python3
"""Times one totoc graph file in plain ONNX Runtime, outside totoc: a cross-check of `totoc bench`
(docs/precision.md, "Speed and memory").

Loads GRAPH (its external weights beside it) on the CPU provider with totoc's CPU load settings (2 intra-op
threads unless --threads, memory pattern off, `session.x64quantprecision` for int8 graphs), feeds inputs of the
declared shapes (floats in [0.5, 1), integers 0, `out_index` 15: the last context slot of a 16-slot pass), runs
once to warm up and prints the median wall time of --runs runs.

Needs numpy and onnxruntime 1.31.1 (the venv of `scripts/setup-python-venv.sh test`).

Usage: ort-graph-time.py GRAPH.onnx [--runs 7] [--threads 2]
"""
import argparse
import time

import numpy as np
import onnxruntime as ort


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("graph")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.enable_mem_pattern = False
    if ".int8." in a.graph:
        so.add_session_config_entry("session.x64quantprecision", "1")
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
    print(f"{a.graph}: median {sorted(times)[len(times) // 2] * 1e3:.1f} ms over {a.runs} runs, {a.threads} threads")


if __name__ == "__main__":
    main()
