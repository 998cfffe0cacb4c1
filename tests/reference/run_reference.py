#!/usr/bin/env python3
"""Runs toto-ts 0.2.0 on one forecast request, exactly as a user would, and records
everything the Rust side checks against.

How toto-ts prepares the context (verified in toto-ts 0.2.0 source and by running it):

* Padding (`TotoForecaster.forecast` -> `toto/data/util/dataset.py pad_array`): the series
  of length T is LEFT-padded with zeros to T_pad = ceil(T / stride) * stride (stride ==
  patch_size P). The padding_mask is padded the same way, i.e. with False. The id_mask is
  left-padded with each variate's LEFTMOST id (`pad_id_mask`). When T is a multiple of P
  nothing is added. A context shorter than one patch becomes one patch.
* `scaling_prefix_length` = the length of the PADDED context, T_pad (forecaster.py:
  `scaling_prefix_length = inputs.shape[-1]` after `pad_array`). So the global statistics
  that clamp the causal scale cover padded positions [0, T_pad), i.e. the whole context;
  the left pad and the nulls carry weight 0 (padding_mask False) so they do not count.
  It stays T_pad for every decode step (appended predictions never enter the global stats).
* Missing points (null in the request) are fed as 0.0 with padding_mask False. padding_mask
  is used ONLY by the scaler (weights); the model still sees the point, as
  (0 - loc_patch) / scale_patch, where loc/scale are the patch statistics. The same holds
  for the left zero-pad: a pad position inside a patch that also holds real points is fed
  as -loc/scale (not 0); a patch made only of padding has loc 0, scale sqrt(0.1), so it is
  fed as zeros. Padded/missing patches are attended to like any other patch.
* Horizon H is rounded up to ceil(H / P) * P; there are ceil(H / P) backbone calls (step 0
  = prefill of the T_pad context, steps >= 1 = one new patch each, KV cache), and the
  output is cropped to the first H steps.
* Each step predicts the next patch from the distribution's last P time steps, and
  de-normalises it with the scaler loc/scale of the LAST INPUT patch (the patch scaler
  repeats the statistic of each patch's last time step over the patch). At decode step n
  the scaler is recomputed over the whole grown series (context + n*P predictions, each
  appended with padding_mask True and the id of the last context step) with the same
  prefix length T_pad.

Request JSON (shared with the Rust CLI):
    {"target": [[float|null, ...], ...],   # [V][T], null = missing
     "id_mask": [int, ...],                 # optional, [V], default all 0
     "horizon": int, "samples": int,       # samples 0/absent -> mean path only
     "quantiles": [float], "seed": int}

Output (the "reference" object of a fixture case; see tests/reference/README.md):
    mean [V][H]; steps [{df, loc, scale, weights [V][P][K] (normalised units),
    scaler_loc [V], scaler_scale [V], patches [V][T_pad] (step 0) or [V][P]}];
    samples [N][V][H] or null; quantiles {str(q): [V][H]} or null; meta {...}.

Usage: run_reference.py --checkpoint DIR --request REQ.json [--out OUT.json] [--threads 1]
"""

import argparse
import json
import sys
import warnings

import numpy as np
import torch

# gluonts (imported by toto-ts) nags about orjson on import; nothing else is silenced
warnings.filterwarnings("ignore", message="Using `json`-module for json-handling")


def log(*a):
    print(*a, file=sys.stderr)


def load_model(checkpoint_dir):
    """Toto.load_from_checkpoint(dir) (what from_pretrained(dir) ends up calling), CPU, f32,
    eval. strict=True plus an explicit tensor-by-tensor comparison: from_pretrained's
    strict=False would silently leave a mis-named tensor random."""
    from safetensors.numpy import load_file
    from toto.model.toto import Toto

    model = Toto.load_from_checkpoint(checkpoint_dir, map_location="cpu", strict=True)
    model = model.to(torch.float32).eval()
    state = model.state_dict()
    on_disk = Toto._map_state_dict_keys(load_file(f"{checkpoint_dir}/model.safetensors"), False)
    assert set(on_disk) == set(state), f"checkpoint/model key mismatch: {set(on_disk) ^ set(state)}"
    for k, v in on_disk.items():
        assert np.array_equal(state[k].numpy(), v), f"tensor {k} was not loaded"
    return model


def build_inputs(request):
    """MaskedTimeseries [V][T] from a request (unbatched, as a user would pass it)."""
    from toto.data.util.dataset import MaskedTimeseries

    target = request["target"]
    v = len(target)
    t = len(target[0])
    assert v >= 1 and t >= 1 and all(len(row) == t for row in target), "target must be [V][T], T >= 1"
    series = np.zeros((v, t), dtype=np.float32)
    mask = np.zeros((v, t), dtype=bool)
    for i, row in enumerate(target):
        for j, x in enumerate(row):
            if x is not None:
                series[i, j] = np.float32(x)
                mask[i, j] = True
    ids = request.get("id_mask") or [0] * v
    assert len(ids) == v
    id_mask = torch.tensor(ids, dtype=torch.int32)[:, None].expand(v, t).contiguous()
    return MaskedTimeseries(
        series=torch.from_numpy(series),
        padding_mask=torch.from_numpy(mask),
        id_mask=id_mask,
        # never reach the model; present because the forecaster carries them
        timestamp_seconds=torch.zeros((v, t), dtype=torch.int64),
        time_interval_seconds=torch.full((v,), 60, dtype=torch.int64),
    )


class StepRecorder:
    """Wraps TotoBackbone.forward (what TotoForecaster calls once per AR step) and records,
    for the newest predicted patch, the mixture parameters in normalised units, the scaler
    loc/scale that de-normalise it, and the scaled input patches the backbone embedded."""

    def __init__(self, backbone):
        self.backbone = backbone
        self.orig = backbone.forward
        self.steps = []
        self.enabled = False
        backbone.forward = self._forward
        backbone._totoc_step_recorder = self

    def _forward(self, inputs, input_padding_mask, id_mask, kv_cache=None, scaling_prefix_length=None, **kw):
        kv_len = int(kv_cache.current_len(0)) if kv_cache is not None else 0
        out = self.orig(
            inputs=inputs,
            input_padding_mask=input_padding_mask,
            id_mask=id_mask,
            kv_cache=kv_cache,
            scaling_prefix_length=scaling_prefix_length,
            **kw,
        )
        if self.enabled:
            self._record(out, inputs, input_padding_mask, kv_len, scaling_prefix_length)
        return out

    def _record(self, out, inputs, padding_mask, kv_len, prefix_length):
        assert inputs.shape[0] == 1, "recording supports batch 1 (mean path)"
        p = self.backbone.patch_embed.stride
        distr = out.distribution  # MixtureSameFamily(Categorical, StudentT), normalised units
        comp = distr.component_distribution
        last = lambda t: t[0, :, -p:, :].detach().numpy().astype(np.float32)  # noqa: E731
        # the patch scaler repeats one statistic over each patch: the last P values are equal
        loc_tail, scale_tail = out.loc[0, :, -p:], out.scale[0, :, -p:]
        assert torch.equal(loc_tail, loc_tail[:, -1:].expand_as(loc_tail))
        assert torch.equal(scale_tail, scale_tail[:, -1:].expand_as(scale_tail))
        # the scaled input the backbone embedded at this step (same call as backbone.backbone)
        scaled, _, _ = self.backbone.scaler(
            inputs, weights=torch.ones_like(inputs), padding_mask=padding_mask, prefix_length=prefix_length
        )
        self.steps.append(
            {
                "df": last(comp.df),
                "loc": last(comp.loc),
                "scale": last(comp.scale),
                # Categorical(probs=softmax(logits)) renormalises; these are the probs its mean uses
                "weights": last(distr.mixture_distribution.probs),
                "scaler_loc": out.loc[0, :, -1].numpy().astype(np.float32),
                "scaler_scale": out.scale[0, :, -1].numpy().astype(np.float32),
                "patches": scaled[0, :, p * kv_len :].numpy().astype(np.float32),
            }
        )


def f32(a):
    """Nested lists of Python floats that are exactly the float32 values."""
    a = np.asarray(a, dtype=np.float32)
    assert np.isfinite(a).all(), "non-finite value in reference output"
    return a.tolist()


def quantile_key(q):
    return repr(float(q))


def run(model, request):
    """Runs one request; returns the reference dict (JSON-ready, float32 values)."""
    from toto.inference.forecaster import TotoForecaster

    backbone = model.model
    rec = getattr(backbone, "_totoc_step_recorder", None) or StepRecorder(backbone)
    forecaster = TotoForecaster(backbone)
    inputs = build_inputs(request)
    horizon = int(request["horizon"])
    n = int(request.get("samples") or 0)
    p = backbone.patch_embed.stride
    v, t = inputs.series.shape

    # 1. mean path (num_samples=None), recording every backbone call
    rec.steps, rec.enabled = [], True
    with torch.no_grad():
        fc = forecaster.forecast(inputs, prediction_length=horizon, num_samples=None, use_kv_cache=True)
    rec.enabled = False
    mean = fc.mean[0].numpy()
    assert mean.shape == (v, horizon)
    steps = rec.steps
    assert len(steps) == -(-horizon // p)

    ref = {
        "mean": f32(mean),
        "steps": [{k: f32(x) for k, x in s.items()} for s in steps],
        "samples": None,
        "quantiles": None,
        "meta": {
            "num_variates": v,
            "context_len": t,
            "patch_size": p,
            "padded_context_len": -(-t // p) * p,
            "left_pad": -(-t // p) * p - t,
            "scaling_prefix_length": -(-t // p) * p,
            "num_steps": len(steps),
            "rounded_horizon": len(steps) * p,
            "k_components": int(steps[0]["df"].shape[-1]),
        },
    }

    # 2. sampled path: one sample batch of n trajectories (samples_per_batch = n)
    if n > 0:
        torch.manual_seed(int(request.get("seed") or 0))
        with torch.no_grad():
            fs = forecaster.forecast(
                inputs, prediction_length=horizon, num_samples=n, samples_per_batch=n, use_kv_cache=True
            )
        samples = fs.samples[0]  # [V][H][N]
        assert samples.shape == (v, horizon, n)
        ref["samples"] = f32(samples.permute(2, 0, 1).numpy())
        ref["quantiles"] = {
            quantile_key(q): f32(fs.quantile(float(q))[0].numpy()) for q in request.get("quantiles") or []
        }
    return ref


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--request", required=True)
    ap.add_argument("--out", help="write the reference JSON here (default: stdout)")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    with open(a.request) as f:
        request = json.load(f)
    ref = run(load_model(a.checkpoint), request)
    text = json.dumps(ref, sort_keys=True, separators=(",", ":")) + "\n"
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
