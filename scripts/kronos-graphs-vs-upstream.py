#!/usr/bin/env python3
"""Every Kronos graph of a totoc export bundle against upstream's torch modules in eval mode (a dev check).

Loads the predictor and tokenizer strictly into kronos-finance 0.1.5's `Kronos` / `KronosTokenizer`, calls
`.eval()`, and runs one random series of N normalised rows (with random stamps) for H steps, teacher-forced with
upstream's greedy tokens: encode; then each step through the bundle's prefill (first step), decode (while the
window grows) or recompute (once it slides) graph and the refine graph, against upstream's `decode_s1` /
`decode_s2` over the same window; then the final window through detokenize against `tokenizer.decode`. It prints
one JSON line: the greedy choices that differ (must be 0), the smallest |z| (the encode margin) and the worst
relative error (max |Δ| / max |ref|) of z, s1 and s2 logits, h_last and the decoded rows.

Usage (the reference venv's python, with onnxruntime==1.31.1 importable, e.g. `pip install --target DIR
onnxruntime==1.31.1` and PYTHONPATH=DIR):
    scripts/kronos-graphs-vs-upstream.py --predictor P --tokenizer T --bundle B --profile NAME --rows N \
        --horizon H [--seed S]
The bundle's profile needs 1-row buckets of every kind and encode/prefill/detokenize slots covering N and the
window (e.g. `family: {window: 64, rows: [1]}` with batch 1 and samples 0).
"""

import argparse
import json
import os

import numpy as np
import onnxruntime as ort
import torch
from kronos_finance._vendor.kronos_model import Kronos, KronosTokenizer
from safetensors.torch import load_file

ap = argparse.ArgumentParser()
for a in ["--predictor", "--tokenizer", "--bundle", "--profile"]:
    ap.add_argument(a, required=True)
ap.add_argument("--rows", type=int, required=True)
ap.add_argument("--horizon", type=int, required=True)
ap.add_argument("--seed", type=int, default=0)
args = ap.parse_args()
N, H = args.rows, args.horizon
torch.manual_seed(args.seed)
rng = np.random.default_rng(args.seed)


def load(cls, d):
    m = cls(**json.load(open(os.path.join(d, "config.json"))))
    m.load_state_dict(load_file(os.path.join(d, "model.safetensors")), strict=True)
    return m.eval()


model, tok = load(Kronos, args.predictor), load(KronosTokenizer, args.tokenizer)
manifest = json.load(open(os.path.join(args.bundle, "manifest.json")))
prof = [p for p in manifest["kronos_profiles"] if p["profile"]["name"] == args.profile][0]
T = prof["window"]
so = ort.SessionOptions()
so.intra_op_num_threads = 2
sessions = {}


def graph(kind, slots):
    """The 1-row bucket of `kind` with the fewest slots >= `slots` (decode and refine: the window)."""
    cands = [g for g in prof["graphs"] if g["bucket"]["kind"] == kind and g["bucket"]["rows"] == 1
             and (g["bucket"]["slots"] >= slots or kind in ("decode", "refine"))]
    g = min(cands, key=lambda g: g["bucket"]["slots"])
    if g["file"] not in sessions:
        sessions[g["file"]] = ort.InferenceSession(os.path.join(args.bundle, g["file"]), so,
                                                   providers=["CPUExecutionProvider"])
    s = sessions[g["file"]]
    return s, g["bucket"]["slots"], [o.name for o in s.get_outputs()]


worst = {}


def rel(name, got, ref):
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    worst[name] = max(worst.get(name, 0.0), np.max(np.abs(got - ref)) / max(np.max(np.abs(ref)), 1e-30))


def pad(a, n):
    w = [(0, 0)] * a.ndim
    w[1] = (0, n - a.shape[1])
    return np.pad(a, w)


x = np.clip(rng.standard_normal((N, 6)).astype(np.float32), -5, 5)
stamps = np.stack([rng.integers(0, 60, N + H), rng.integers(0, 24, N + H), rng.integers(0, 7, N + H),
                   rng.integers(1, 32, N + H), rng.integers(1, 13, N + H)], -1).astype(np.int64)

with torch.no_grad():
    ref1, ref2 = tok.encode(torch.from_numpy(x)[None], half=True)
    z = tok.embed(torch.from_numpy(x)[None])
    for layer in tok.encoder:
        z = layer(z)
    ref_z = tok.quant_embed(z)[0].numpy()
sess, slots, _ = graph("encode", N)
s1, s2, z = sess.run(None, {"values": pad(x[None], slots)})
tokens_differ = int((s1[0, :N] != ref1[0].numpy()).sum() + (s2[0, :N] != ref2[0].numpy()).sum())
rel("z", z[0, :N], ref_z)
t1, t2 = list(ref1[0].numpy()), list(ref2[0].numpy())

caches, flips = None, tokens_differ
for i in range(H):
    L = N + i
    start = max(0, L - T)
    w = L - start
    with torch.no_grad():
        l1, hidden = model.decode_s1(torch.tensor(t1[start:L])[None], torch.tensor(t2[start:L])[None],
                                     torch.from_numpy(stamps[start:L].astype(np.float32))[None])
        ref_l1 = l1[0, -1].numpy()
        pick1 = int(np.argmax(ref_l1))
        ref_l2 = model.decode_s2(hidden, torch.tensor([[pick1]]))[0, -1].numpy()
        pick2 = int(np.argmax(ref_l2))
    if caches is None or L > T:
        kind = "prefill" if L <= T else "recompute"
        sess, slots, names = graph(kind, w)
        out = dict(zip(names, sess.run(None, {
            "s1": pad(np.array([t1[start:L]], np.int64), slots), "s2": pad(np.array([t2[start:L]], np.int64), slots),
            "stamps": pad(stamps[None, start:L], slots), "last": np.array([w - 1], np.int64)})))
        caches = {k: v for k, v in out.items() if "cache" in k} if kind == "prefill" else None
        length = w
    else:
        sess, _, names = graph("decode", T)
        feed = {"s1": np.array([[t1[L - 1]]], np.int64), "s2": np.array([[t2[L - 1]]], np.int64),
                "stamps": stamps[None, L - 1:L], "write_pos": np.array([L - 1], np.int64)}
        feed.update({k.replace("_out", ""): v for k, v in caches.items()})
        out = dict(zip(names, sess.run(None, feed)))
        caches = {k: v for k, v in out.items() if "cache" in k}
        length = L
    rel("s1 logits", out["s1_logits"][0], ref_l1)
    rel("h_last", out["h_last"][0], hidden[0, -1].numpy())
    flips += int(np.argmax(out["s1_logits"][0]) != pick1)
    sess, _, names = graph("refine", T)
    r = sess.run(None, {"s1": np.array([pick1], np.int64), "h_last": out["h_last"],
                        "dep_k_cache": out["dep_k_cache_out"], "dep_v_cache": out["dep_v_cache_out"],
                        "length": np.array([length], np.int64)})[0]
    rel("s2 logits", r[0], ref_l2)
    flips += int(np.argmax(r[0]) != pick2)
    t1.append(pick1)
    t2.append(pick2)

n = min(N + H, T)
d1, d2 = np.array([t1[-n:]], np.int64), np.array([t2[-n:]], np.int64)
with torch.no_grad():
    ref_rows = tok.decode([torch.from_numpy(d1), torch.from_numpy(d2)], half=True)[0].numpy()
sess, slots, _ = graph("detokenize", n)
rel("decoded rows", sess.run(None, {"s1": pad(d1, slots), "s2": pad(d2, slots)})[0][0, :n], ref_rows)
print(json.dumps({"rows": N, "horizon": H, "window": T, "choices that differ": flips,
                  "min |z|": float(np.min(np.abs(ref_z))), **{k: float(f"{v:.3g}") for k, v in worst.items()}}))
