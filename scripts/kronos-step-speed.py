#!/usr/bin/env python3
"""Times a Kronos bundle's cached decode step against its read-bandwidth floor (a dev measurement).

A cached decode step is bandwidth-bound: it reads every predictor weight once (Kronos-small: ~94 MB of f32) and its
rows' valid cache slots. This script times, with ONNX Runtime's CPU provider at `--threads` threads:
  * the decode graph of `--rows` rows over write positions `--from`…window−1, its caches bound in place (each
    `*_out` output bound to its input's OrtValue, as an engine runs it);
  * the refine graph on the same caches, and the prefill graph of the bucket that holds `--from` tokens;
  * the machine's read bandwidth: a torch f32 matrix-vector product over 96 MB, at the same threads;
and prints, as JSON, the best of `--rounds` rounds of each (the best round is the least disturbed on a shared
machine), the step's floor (its weight bytes plus the mean valid cache bytes, over the measured bandwidth) and
the ratio.

Usage (the reference venv's python with onnxruntime==1.31.1 importable):
    scripts/kronos-step-speed.py --bundle B [--rows 1] [--from 392] [--threads 2] [--rounds 6] [--spin 0]
The bundle: a Kronos-small-shaped model (tests/reference/make_kronos_checkpoints.py) exported with a profile that
has `rows` among its decode buckets and a prefill bucket of at least `--from` slots.
"""

import argparse
import json
import os
import time

import numpy as np
import onnxruntime as ort
import torch

ap = argparse.ArgumentParser()
ap.add_argument("--bundle", required=True)
ap.add_argument("--rows", type=int, default=1)
ap.add_argument("--from", dest="start", type=int, default=392)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--rounds", type=int, default=6)
ap.add_argument("--spin", default="0", help="session.intra_op.allow_spinning (0 on a shared machine)")
args = ap.parse_args()

prof = json.load(open(os.path.join(args.bundle, "manifest.json")))["kronos_profiles"][0]
T = prof["window"]
so = ort.SessionOptions()
so.intra_op_num_threads = args.threads
so.add_session_config_entry("session.intra_op.allow_spinning", args.spin)


def session(kind, rows, slots=None):
    g = min((g for g in prof["graphs"] if g["bucket"]["kind"] == kind and g["bucket"]["rows"] == rows
             and (slots is None or g["bucket"]["slots"] >= slots)), key=lambda g: g["bucket"]["slots"])
    return ort.InferenceSession(os.path.join(args.bundle, g["file"]), so, providers=["CPUExecutionProvider"]), g


def out_name(name):
    base, _, layer = name.partition(".")
    return f"{base}_out.{layer}" if layer else f"{name}_out"


rng = np.random.default_rng(0)
R, n = args.rows, args.start
pre, g = session("prefill", 1, n)
feed = {"s1": rng.integers(0, 1024, (1, g["bucket"]["slots"])), "s2": rng.integers(0, 1024, (1, g["bucket"]["slots"])),
        "stamps": np.zeros((1, g["bucket"]["slots"], 5), np.int64), "last": np.array([n - 1])}
feed = {k: v.astype(np.int64) for k, v in feed.items()}
prefilled = dict(zip([o.name for o in pre.get_outputs()], pre.run(None, feed)))

dec, g = session("decode", R)
bind = dec.io_binding()
caches = {}
for i in dec.get_inputs():
    if "cache" in i.name:
        row = prefilled[out_name(i.name)]
        caches[i.name] = ort.OrtValue.ortvalue_from_numpy(np.repeat(row, R, axis=0))
cache_bytes = sum(v.numpy().nbytes for v in caches.values())


def step(pos):
    bind.bind_cpu_input("s1", np.full((R, 1), 7, np.int64))
    bind.bind_cpu_input("s2", np.full((R, 1), 9, np.int64))
    bind.bind_cpu_input("stamps", np.zeros((R, 1, 5), np.int64))
    bind.bind_cpu_input("write_pos", np.full((R,), pos, np.int64))
    for name, v in caches.items():
        bind.bind_ortvalue_input(name, v)
        bind.bind_ortvalue_output(out_name(name), v)
    bind.bind_output("s1_logits")
    bind.bind_output("h_last")
    dec.run_with_iobinding(bind)


ref, _ = session("refine", R)
rbind = ref.io_binding()
rbind.bind_cpu_input("s1", np.full((R,), 3, np.int64))
rbind.bind_cpu_input("h_last", np.zeros((R, prefilled["h_last"].shape[1]), np.float32))
rbind.bind_ortvalue_input("dep_k_cache", caches["dep_k_cache"])
rbind.bind_ortvalue_input("dep_v_cache", caches["dep_v_cache"])
rbind.bind_cpu_input("length", np.full((R,), (n + T) // 2, np.int64))
rbind.bind_output("s2_logits")

torch.set_num_threads(args.threads)
W, v = torch.randn(24_000, 1000), torch.randn(1000)
positions = list(range(n, T))
for pos in positions[:3]:
    step(pos)
best = {"decode_ms": 1e9, "refine_ms": 1e9, "prefill_ms": 1e9, "read_GBps": 0.0}
for _ in range(args.rounds):
    t = time.perf_counter()
    for pos in positions:
        step(pos)
    best["decode_ms"] = min(best["decode_ms"], (time.perf_counter() - t) / len(positions) * 1e3)
    t = time.perf_counter()
    for _ in range(20):
        ref.run_with_iobinding(rbind)
    best["refine_ms"] = min(best["refine_ms"], (time.perf_counter() - t) / 20 * 1e3)
    t = time.perf_counter()
    pre.run(None, feed)
    best["prefill_ms"] = min(best["prefill_ms"], (time.perf_counter() - t) * 1e3)
    for _ in range(5):
        t = time.perf_counter()
        W @ v
        best["read_GBps"] = max(best["read_GBps"], W.numel() * 4 / (time.perf_counter() - t) / 1e9)

# what a step must read: each layer's attention and SwiGLU weights, biases and norms, the token fusion, the
# dependency layer's key/value projection, the s1 head (one row of each embedding table aside), and the valid part
# of its rows' caches
with open(os.path.join(args.bundle, "manifest.json")) as f:
    cfg = json.load(f)["model"]["config"]["predictor"]
d, L, ff, v_ = cfg["d_model"], cfg["n_layers"], cfg["ff_dim"], 1 << cfg["s1_bits"]
step_weights = 4 * (L * (4 * d * d + 4 * d + 3 * d * ff + 2 * d) + 2 * d * d + d + 2 * d * d + 2 * d + v_ * d + v_ + d)
mean_valid = (positions[0] + positions[-1] + 2) / 2 / T
floor_ms = (step_weights + cache_bytes * mean_valid) / (best["read_GBps"] * 1e9) * 1e3
print(json.dumps({"rows": R, "window": T, "positions": f"{positions[0]}..{positions[-1]}",
                  "step_weight_MB": round(step_weights / 1e6, 1), "cache_MB": round(cache_bytes / 1e6, 1),
                  **{k: round(v, 3) for k, v in best.items()}, "floor_ms": round(floor_ms, 2),
                  "decode_vs_floor": round(best["decode_ms"] / floor_ms, 2)}))
