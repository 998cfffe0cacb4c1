#!/usr/bin/env python3
"""Runs toto-2 2.0.0's `Toto2Model.forecast` on one forecast request and records what the
Rust side checks against.

The oracle call is `Toto2Model.forecast({"target", "target_mask", "series_ids"}, horizon,
decode_block_size=B)` with every other argument at its default: has_missing_values=True,
no quantile cap (quantile_real_cap_k 0), no scaler fallback (scaler_fallback_min_obs 0).
`decode_block_size` is None for the single pass (what the leaderboards run) or the
profile's `decode_block` in points.

totoc's two deliberate departures are applied here, before the call, exactly as the Rust
host applies them, so the reference sees the same context:
* the context is left-truncated to a multiple of the patch (32 points), as the
  reference's GluonTS wrapper does (`Toto2GluonTSModel.instance_splitter`); a context
  shorter than one patch is an error;
* missing points in the last context patch are forward-filled from the last observed
  point before them (a point with none before it becomes 0.0), as the GluonTS wrapper's
  default `imputation_internal="ffill"` does. forecast() forces the last context patch
  to "observed", so without this it would use a missing point's placeholder as a real
  value (0, or NaN if the caller passed NaN).
Every other missing point is passed as 0.0 with target_mask False.

Request JSON (the format the Rust CLI reads): {"target": [[float|null, ...], ...],
"id_mask": [int, ...] (optional, default all 0), "horizon": int}.

Output (the "reference" object of a fixture case; see tests/reference/README.md, Toto 2.0):
    quantiles [9][V][H] (real units, knots 0.1..0.9, sorted as forecast() returns them);
    median [V][H] (= quantiles[4]); blocks [{raw [9][V][b*P] (the head's outputs in asinh
    space, knot order, before sinh/sort), loc [V], scale [V] (the scaler statistics that
    de-normalise the block)}] one per forecast() iteration; meta {...}.

Usage: run_toto2_reference.py --checkpoint DIR --request REQ.json [--decode-block B] [--out OUT.json]
"""

import argparse
import json
import math
import sys
import warnings

import numpy as np
import torch

# gluonts (imported by toto2) nags about orjson on import; nothing else is silenced
warnings.filterwarnings("ignore", message="Using `json`-module for json-handling")

KNOTS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]


def log(*a):
    print(*a, file=sys.stderr)


def load_model(checkpoint_dir):
    """Toto2Model.from_pretrained(dir, strict=True) (a local dir; a sharded index is read too), CPU, f32, eval,
    plus a tensor-by-tensor comparison with the files: the state dict must be exactly the checkpoint."""
    import glob
    import os

    from safetensors.numpy import load_file
    from toto2 import Toto2Model

    model = Toto2Model.from_pretrained(checkpoint_dir, strict=True).to(torch.float32).eval()
    on_disk = {}
    for f in sorted(glob.glob(os.path.join(checkpoint_dir, "*.safetensors"))):
        on_disk.update(load_file(f))
    state = model.state_dict()
    assert set(on_disk) == set(state), f"checkpoint/model key mismatch: {set(on_disk) ^ set(state)}"
    for k, v in on_disk.items():
        assert np.array_equal(state[k].numpy(), v), f"tensor {k} was not loaded"
    return model


def prepare_context(request, patch):
    """The departures of the module docs: (values [V][T'], observed [V][T'], meta) for the kept context."""
    target = request["target"]
    v, t = len(target), len(target[0])
    assert v >= 1 and all(len(row) == t for row in target), "target must be [V][T]"
    kept = (t // patch) * patch
    if kept == 0:
        raise ValueError(f"context of {t} points is shorter than one patch; Toto 2.0 needs at least {patch}")
    values = np.zeros((v, kept), dtype=np.float32)
    observed = np.zeros((v, kept), dtype=bool)
    filled = []
    for i, row in enumerate(target):
        last, fill = None, []
        for x in row:  # forward fill over the whole given context (GluonTS imputes before splitting)
            last = x if x is not None else last
            fill.append(0.0 if last is None else last)
        n = 0
        for j in range(kept):
            x = row[t - kept + j]
            if x is not None:
                values[i, j], observed[i, j] = np.float32(x), True
            elif j >= kept - patch:
                values[i, j] = np.float32(fill[t - kept + j])
                n += 1
        filled.append(n)
    meta = {"context_given": t, "context_used": kept, "last_patch_filled": filled}
    return values, observed, meta


class Recorder:
    """Wraps the scaler and the output head: per forecast() iteration, the statistics that de-normalise the
    block (the scaler's loc/scale at the block's first point) and the head's raw outputs (asinh space)."""

    @classmethod
    def on(cls, model):
        """The model's recorder (installed once), emptied."""
        rec = getattr(model, "_totoc_recorder", None) or cls(model)
        rec.scales, rec.raw = [], []
        return rec

    def __init__(self, model):
        self.scales, self.raw = [], []
        scaler_fwd, head_fwd = model.scaler.forward, model.output_head.forward
        model._totoc_recorder = self

        def scaler(data, mask=None):
            out = scaler_fwd(data, mask)
            self.scales.append((out[1].detach().clone(), out[2].detach().clone()))
            return out

        def head(embeddings, q=None):
            out = head_fwd(embeddings, q)
            self.raw.append(out.detach().clone())
            return out

        model.scaler.forward, model.output_head.forward = scaler, head


def f32(a):
    """Nested lists of Python floats that are exactly the float32 values."""
    a = np.asarray(a, dtype=np.float32)
    assert np.isfinite(a).all(), "non-finite value in reference output"
    return a.tolist()


def run(model, request, decode_block=None):
    """Runs one request; returns the reference dict (JSON-ready, float32 values)."""
    p = model.config.patch_size
    values, observed, meta = prepare_context(request, p)
    v, kept = values.shape
    horizon = int(request["horizon"])
    ids = request.get("id_mask") or [0] * v
    inputs = {
        "target": torch.from_numpy(values)[None],
        "target_mask": torch.from_numpy(observed)[None],
        "series_ids": torch.tensor(ids, dtype=torch.long)[None],
    }
    rec = Recorder.on(model)
    with torch.no_grad():
        q = model.forecast(inputs, horizon, decode_block_size=decode_block)
    assert q.shape == (9, 1, v, horizon), q.shape
    q = q[:, 0].numpy()
    n = math.ceil(horizon / p)
    block = min(decode_block // p, n) if decode_block else n
    sizes = [min(block, n - s) for s in range(0, n, block)]
    assert len(rec.scales) == len(sizes) == len(rec.raw), (len(rec.scales), sizes, len(rec.raw))
    blocks = []
    for i, (b, (loc, scale), raw) in enumerate(zip(sizes, rec.scales, rec.raw)):
        start = kept + sum(sizes[:i]) * p  # first point of the block
        assert raw.shape == (9, 1, v, b, p), raw.shape
        blocks.append(
            {
                "raw": f32(raw[:, 0].reshape(9, v, b * p).numpy()),
                "loc": f32(loc[0, :, start].numpy()),
                "scale": f32(scale[0, :, start].numpy()),
            }
        )
    assert np.all(np.diff(q, axis=0) >= 0), "quantiles are not sorted"
    meta.update(
        {
            "num_variates": v,
            "patch_size": p,
            "decode_block": decode_block,
            "num_patches": n,
            "blocks": sizes,
            "knots": KNOTS,
        }
    )
    return {"quantiles": f32(q), "median": f32(q[4]), "blocks": blocks, "meta": meta}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--request", required=True)
    ap.add_argument("--decode-block", type=int, default=None, help="decode_block_size in points (block decoding)")
    ap.add_argument("--out", help="write the reference JSON here (default: stdout)")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    with open(a.request) as f:
        request = json.load(f)
    ref = run(load_model(a.checkpoint), request, a.decode_block)
    text = json.dumps(ref, sort_keys=True, separators=(",", ":")) + "\n"
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
