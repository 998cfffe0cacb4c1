#!/usr/bin/env python3
"""Random-weight Toto 2.0 checkpoints in the Hugging Face layout of `Datadog/Toto-2.0-*`.

Writes `<out>/config.json` (every field of toto-2 2.0.0's `Toto2ModelConfig`, as
`PyTorchModelHubMixin` saves it) and either `<out>/model.safetensors` or, with
`--shards N`, `model-0000i-of-0000N.safetensors` plus `model.safetensors.index.json`
(the sharded layout `Toto2Model._from_pretrained` also reads). Tensors are F32 with
`__metadata__ = {"format": "pt"}`, named as in the released checkpoints.

The values are a pure function of (config, seed), bit for bit, on any CPU, and the
Rust side regenerates them identically (`exporter::toto2::synth`), so no weights are
committed, only their digest (`weights_sha256`, below). Each tensor t (in
`tensor_shapes` order) draws from its own SplitMix64 stream:

    state_t  = mix64(seed * 2^32 + t)                 (python ints, mod 2^64)
    z_i      = mix64(state_t + (i + 1) * 0x9E3779B97F4A7C15)   i = 0, 1, ... (element index)
    u_i      = (z_i >> 11) * 2^-53                      f64 in [0, 1)
    mix64(z) = SplitMix64's finaliser: z ^= z >> 30; z *= 0xBF58476D1CE4E5B9;
               z ^= z >> 27; z *= 0x94D049BB133111EB; z ^= z >> 31

and maps u to its value in f64, rounded once to f32:
* weights (u-μP: the forward pass multiplies by 1/sqrt(fan_in)): unit variance,
  sqrt(3) (2u - 1); readouts (the head's linear2 and skip_proj, scaled by 1/fan_in)
  sqrt(fan_in) sqrt(3) (2u - 1) so the head's output is O(1);
* biases: 0.5 (2u - 1) / s with s the layer's forward scale, so each bias moves its
  output by up to +-0.5;
* attn_tau / mlp_tau: 0.2 + 1.3 u (the released rule gives 0.2-1.0);
* attn._pds.per_dim_scale: 2u - 1 (softplus(p)/ln 2 between 0.45 and 1.9).
Every constant the exporter folds (1/sqrt(fan_in), 1/fan_in, the per-dim scale,
tau/sqrt(1+tau^2)) therefore changes the output.

`weights_sha256`: sha256 over the tensors in `tensor_shapes` order, each as its name
(UTF-8), a NUL byte, then its little-endian f32 bytes.

Needs numpy and safetensors only (no torch).

Usage:
    make_toto2_checkpoints.py --config NAME --out DIR [--shards N] [--seed S]
"""

import argparse
import hashlib
import json
import math
import os
import sys
from collections import OrderedDict

import numpy as np

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def _config(d, ff, heads, layers, eps, groups=None, group_size=None, variate_first=False, mlp_bias=False):
    """A config.json dict with every `Toto2ModelConfig` field (derived ones included, as saved)."""
    groups = groups or heads
    return {
        "patch_size": 32,
        "d_model": d,
        "num_heads": heads,
        "num_layers": layers,
        "layer_group_size": group_size or layers,
        "num_variate_layers_per_group": 1,
        "variate_layer_first": variate_first,
        "dropout_p": 0.0,
        "norm_eps": eps,
        "attn_bias": True,
        "mlp_bias": mlp_bias,
        "num_output_patches": 1,
        "pre_norm": True,
        "d_ff": ff,
        "qk_dim": 64,
        "v_dim": 64,
        "num_groups": groups,
        "heads_per_group": heads // groups,
        "residual_mult": 0.75,
        "residual_attn_ratio": 5.136215466577748,
        "qk_norm": False,
        "norm_include_weight": False,
        "qk_norm_include_weight": False,
        "per_dim_scale": True,
        "use_xpos": True,
    }


# name -> (config, default seed). The 4m/22m/313m configs are the published ones (toto2-model.md §1).
CONFIGS = OrderedDict(
    [
        ("4m", (_config(256, 688, 4, 4, 1e-4), 2001)),
        ("22m", (_config(512, 1368, 8, 6, 1e-4), 2002)),
        ("313m", (_config(1024, 2736, 16, 24, 1e-4), 2003)),
        # Shrunk, and exercising what the released sizes do not: grouped-query attention (4 query heads on
        # 2 key/value groups), two layer groups with the variate layer first, MLP biases, eps 5e-4.
        ("small", (_config(128, 96, 4, 4, 5e-4, groups=2, group_size=2, variate_first=True, mlp_bias=True), 2004)),
    ]
)


def is_variate_layer(cfg, i):
    """`VariateTimeTransformerDecoder._if_variate_layer`."""
    g, n = cfg["layer_group_size"], cfg["num_variate_layers_per_group"]
    if cfg["variate_layer_first"]:
        return i % g < n
    return i % g >= g - n


def layer_types(cfg):
    """'T' (time) / 'V' (variate) per layer."""
    return "".join("V" if is_variate_layer(cfg, i) else "T" for i in range(cfg["num_layers"]))


def tensor_shapes(cfg):
    """(name, shape, kind, forward scale) in a fixed order; kind in weight/readout/bias/tau/pds."""
    d, p, ff, h, g = cfg["d_model"], cfg["patch_size"], cfg["d_ff"], cfg["num_heads"], cfg["num_groups"]
    qk, v = cfg["qk_dim"], cfg["v_dim"]
    q = 9 * p * cfg["num_output_patches"]
    out = []

    def linear(prefix, o, i, bias, readout=False):
        s = 1.0 / i if readout else 1.0 / math.sqrt(i)
        out.append((prefix + ".weight", (o, i), "readout" if readout else "weight", s))
        if bias:
            out.append((prefix + ".bias", (o,), "bias", s))

    linear("patch_proj.linear1", 4 * d, 2 * p, True)
    linear("patch_proj.linear2", d, 4 * d, True)
    linear("patch_proj.skip_proj", d, 2 * p, True)
    for i in range(cfg["num_layers"]):
        pre = f"transformer.layers.{i}."
        out.append((pre + "attn_tau", (), "tau", 1.0))
        out.append((pre + "mlp_tau", (), "tau", 1.0))
        linear(pre + "attn.in_proj", qk * h + qk * g + v * g, d, cfg["attn_bias"])
        linear(pre + "attn.out_proj", d, v * h, cfg["attn_bias"])
        if cfg["per_dim_scale"]:
            out.append((pre + "attn._pds.per_dim_scale", (qk,), "pds", 1.0))
        linear(pre + "ffn.fc1", 2 * ff, d, cfg["mlp_bias"])
        linear(pre + "ffn.fc2", d, ff, cfg["mlp_bias"])
    head = "output_head.param_projection.proj."
    linear(head + "linear1", 4 * d, d, True)
    linear(head + "linear2", q, 4 * d, True, readout=True)
    linear(head + "skip_proj", q, d, True, readout=True)
    return out


def mix64(z):
    """SplitMix64's finaliser on python ints (mod 2^64)."""
    z &= MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def uniforms(state, n):
    """u_i for i in [0, n): SplitMix64 outputs of `state`, as f64 in [0, 1)."""
    with np.errstate(over="ignore"):
        z = np.uint64(state) + np.uint64(GOLDEN) * np.arange(1, n + 1, dtype=np.uint64)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * (2.0**-53)


def make_tensors(cfg, seed):
    """name -> float32 C-contiguous array, deterministic in (cfg, seed)."""
    tensors = OrderedDict()
    for t, (name, shape, kind, s) in enumerate(tensor_shapes(cfg)):
        n = int(np.prod(shape, dtype=np.int64))
        u = uniforms(mix64(seed * (1 << 32) + t), n).reshape(shape)
        if kind == "weight":
            vals = math.sqrt(3.0) * (2.0 * u - 1.0)
        elif kind == "readout":
            vals = math.sqrt(shape[1]) * math.sqrt(3.0) * (2.0 * u - 1.0)
        elif kind == "bias":
            vals = 0.5 * (2.0 * u - 1.0) / s
        elif kind == "tau":
            vals = 0.2 + 1.3 * u
        else:
            vals = 2.0 * u - 1.0
        # np.array keeps 0-d scalars 0-d (ascontiguousarray would make them [1])
        tensors[name] = np.array(np.asarray(vals, dtype=np.float64), dtype=np.float32, order="C")
        assert tensors[name].shape == tuple(shape)
    return tensors


def weights_sha256(tensors):
    h = hashlib.sha256()
    for name, a in tensors.items():
        h.update(name.encode() + b"\0")
        h.update(np.asarray(a, dtype="<f4").tobytes(order="C"))
    return h.hexdigest()


def parameter_count(cfg):
    return sum(int(np.prod(s, dtype=np.int64)) for n, s, k, _ in tensor_shapes(cfg) if k != "tau")


def write_checkpoint(name, out_dir, seed=None, shards=1):
    """Writes the checkpoint of config `name`; returns (dir, weights_sha256)."""
    from safetensors.numpy import save_file

    cfg, default_seed = CONFIGS[name]
    seed = default_seed if seed is None else seed
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        f.write(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    tensors = make_tensors(cfg, seed)
    names = list(tensors)
    if shards <= 1:
        files = {"model.safetensors": names}
    else:
        per = math.ceil(len(names) / shards)
        files = {
            f"model-{k + 1:05d}-of-{shards:05d}.safetensors": names[k * per : (k + 1) * per] for k in range(shards)
        }
    for file, part in files.items():
        path = os.path.join(out_dir, file)
        save_file({n: tensors[n] for n in part}, path + ".partial", metadata={"format": "pt"})
        os.replace(path + ".partial", path)
    if shards > 1:
        index = {
            "metadata": {"total_size": sum(a.nbytes for a in tensors.values())},
            "weight_map": {n: f for f, part in files.items() for n in part},
        }
        with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
            f.write(json.dumps(index, indent=2, sort_keys=True) + "\n")
    return out_dir, weights_sha256(tensors)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", choices=list(CONFIGS), required=True)
    ap.add_argument("--out", required=True, help="checkpoint directory to write")
    ap.add_argument("--seed", type=int, default=None, help="generator seed (default: fixed per config)")
    ap.add_argument("--shards", type=int, default=1, help="write N safetensors shards plus an index")
    a = ap.parse_args(argv)
    out, digest = write_checkpoint(a.config, a.out, a.seed, a.shards)
    print(f"{out} weights_sha256={digest} parameters={parameter_count(CONFIGS[a.config][0])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
