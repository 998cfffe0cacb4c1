#!/usr/bin/env python3
"""The int8 kernel comparison behind totoc's int8 layout (docs/int8.md, "int8 engines").

Builds the base Toto 1.0 model's 48 transformer matmuls (12 layers of wQKV 768x2304, wO 768x768, MLP 768x6144
and 3072x768; random weights, a few outlier activation channels) as one ONNX chain per variant and times it with
ONNX Runtime's CPU provider, 2 threads:

  fp32    MatMul
  nbits   com.microsoft MatMulNBits, bits 8, 16-value blocks (--block), accuracy_level 4 (totoc's `role:blocks`
          kernel; its first int8 layout used 128-value blocks)
  int8    totoc's layout: per-row uint8 activation codes (QuantizeLinear, zero point 128) x per-column int8
          weights through MatMulInteger, scaled back by the row's and the column's scales

For each M (rows per call) it prints the median time, the speed against fp32, the chain's RMS error against fp32,
and `row dependence`: max |row 0 of an M-row call - the same row computed alone| over the fp32 output's RMS, which
must be 0 for a kernel whose result for a row does not depend on the other rows packed into the call.

Usage (a venv with onnxruntime==1.31.1, onnx and numpy):
    python scripts/int8-kernels.py [--rows 1,8,64,256] [--runs 7] [--block 16]
"""

import argparse
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

LAYERS, D, F = 12, 768, 3072
# (K, N, width kept for the next matmul)
SHAPES = [s for _ in range(LAYERS) for s in [(D, 3 * D, D), (D, D, D), (D, 2 * F, F), (F, D, D)]]


def weights(seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32) for k, n, _ in SHAPES]


def nbits_codes(w, block=16):
    k, n = w.shape
    wb = w.T.reshape(n, k // block, block).astype(np.float64)
    s = (np.abs(wb).max(-1) / 127).astype(np.float32)
    q = np.clip(np.rint(wb / s[..., None].astype(np.float64)), -127, 127).astype(np.int32) + 128
    return q.astype(np.uint8), s.reshape(-1)


def column_codes(w):
    s = (np.abs(w).max(0) / 127).astype(np.float32)
    return np.clip(np.rint(w / s.astype(np.float64)), -127, 127).astype(np.int8), s


def chain(variant, rows, ws, block=16):
    nodes, inits = [], []
    const = {
        "zero": np.array([0], np.int64),
        "one_i": np.array([1], np.int64),
        "last": np.array([-1], np.int64),
        "inv127": np.array(1 / 127, np.float32),
        "floor": np.array(1e-30, np.float32),
        "one": np.array(1.0, np.float32),
        "zp": np.array(128, np.uint8),
    }
    inits += [numpy_helper.from_array(v, k) for k, v in const.items()]
    x = "x"
    for i, ((k, n, keep), w) in enumerate(zip(SHAPES, ws)):
        y = f"y{i}"
        if variant == "fp32":
            inits.append(numpy_helper.from_array(w, f"w{i}"))
            nodes.append(helper.make_node("MatMul", [x, f"w{i}"], [y]))
        elif variant == "nbits":
            q, s = nbits_codes(w, block)
            inits += [numpy_helper.from_array(q, f"q{i}"), numpy_helper.from_array(s, f"s{i}")]
            nodes.append(helper.make_node("MatMulNBits", [x, f"q{i}", f"s{i}"], [y], domain="com.microsoft",
                                          K=k, N=n, bits=8, block_size=block, accuracy_level=4))
        else:
            q, s = column_codes(w)
            inits += [numpy_helper.from_array(q, f"q{i}"), numpy_helper.from_array(s, f"s{i}")]
            nodes += [
                helper.make_node("Abs", [x], [f"a{i}"]),
                helper.make_node("ReduceMax", [f"a{i}", "last"], [f"m{i}"], keepdims=1),
                helper.make_node("Max", [f"m{i}", "floor"], [f"mf{i}"]),
                helper.make_node("Mul", [f"mf{i}", "inv127"], [f"rs{i}"]),
                helper.make_node("Div", [x, f"rs{i}"], [f"u{i}"]),
                helper.make_node("QuantizeLinear", [f"u{i}", "one", "zp"], [f"c{i}"]),
                helper.make_node("MatMulInteger", [f"c{i}", f"q{i}", "zp"], [f"acc{i}"]),
                helper.make_node("Cast", [f"acc{i}"], [f"f{i}"], to=TensorProto.FLOAT),
                helper.make_node("Mul", [f"f{i}", f"rs{i}"], [f"r{i}"]),
                helper.make_node("Mul", [f"r{i}", f"s{i}"], [y]),
            ]
        if keep < n:
            inits.append(numpy_helper.from_array(np.array([keep], np.int64), f"keep{i}"))
            nodes.append(helper.make_node("Slice", [y, "zero", f"keep{i}", "one_i"], [f"z{i}"]))
            y = f"z{i}"
        x = y
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, D])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, [rows, D])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 10
    return model


def session(model):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = 2
    so.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="1,8,64,256")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--block", type=int, default=16, help="MatMulNBits's weight block (a power of two, 16-256)")
    args = ap.parse_args()
    ws = weights()
    rng = np.random.default_rng(1)
    print(f"onnxruntime {ort.__version__}, 2 threads, median of {args.runs} runs")
    print(f"{'rows':>5} {'variant':>7} {'ms':>9} {'vs fp32':>8} {'rms error':>10} {'row dependence':>15}")
    for rows in [int(r) for r in args.rows.split(",")]:
        x = rng.standard_normal((rows, D)).astype(np.float32)
        x[:, 5] *= 20.0  # outlier channels, as trained transformers have
        x[:, 77] *= -15.0
        ref, base = None, None
        for variant in ["fp32", "nbits", "int8"]:
            s = session(chain(variant, rows, ws, args.block))
            out = s.run(None, {"x": x})[0]
            s.run(None, {"x": x})
            times = []
            for _ in range(args.runs):
                t = time.perf_counter()
                s.run(None, {"x": x})
                times.append(time.perf_counter() - t)
            ms = float(np.median(times)) * 1e3
            if variant == "fp32":
                ref, base = out, ms
            alone = session(chain(variant, 1, ws, args.block)).run(None, {"x": x[:1]})[0] if rows > 1 else out[:1]
            err = np.sqrt(((out - ref) ** 2).mean() / (ref**2).mean())
            dep = float(np.abs(alone - out[:1]).max() / np.sqrt((ref**2).mean()))
            print(f"{rows:>5} {variant:>7} {ms:>9.2f} {base / ms:>7.2f}x {err:>10.4f} {dep:>15.2e}", flush=True)


if __name__ == "__main__":
    main()
