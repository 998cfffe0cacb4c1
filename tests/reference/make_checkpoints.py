#!/usr/bin/env python3
"""Random-weight Toto 1.0 checkpoints in the released Hugging Face layout.

Writes `<out>/config.json` (exactly the `Toto.__init__` keyword arguments of the
released Toto-Open-Base-1.0 config.json) and `<out>/model.safetensors` (F32,
`__metadata__ = {"format": "pt"}`), with the SwiGLU tensors under the names the
released (xFormers-trained) checkpoint uses: `...mlp.0.w12.{weight,bias}` and
`...mlp.0.w3.{weight,bias}` (toto-ts `Toto._map_state_dict_keys` renames them to
`mlp.0.*` / `mlp.2.*` when xFormers is absent).

Weights are drawn from numpy's PCG64 generator (uniform draws only), not from
torch: `Generator.random()` is a pure integer-to-double conversion, so the
checkpoint bytes are the same on every CPU and every torch build. Linear layers
follow torch's default init scale (weight and bias ~ U(-1/sqrt(fan_in),
1/sqrt(fan_in))), so biases are non-zero; RMSNorm scales are 1 + 0.2 z with z
uniform of unit variance (non-trivial, always positive).

This script needs numpy and safetensors only (no torch), so it is cheap to
import from the fixture generator.

Usage:
    make_checkpoints.py --config NAME --out DIR [--seed S]
    make_checkpoints.py --all --out-root DIR        # every committed config
"""

import argparse
import json
import os
import sys
from collections import OrderedDict

import numpy as np

SCALER_CLS = "<class 'model.scaler.CausalPatchStdMeanScaler'>"
MIXTURE_CLS = "<class 'model.distribution.MixtureOfStudentTsOutput'>"


def _config(patch, embed, layers, heads, mlp, every_n, space_first, k):
    """A config.json dict with exactly the Toto.__init__ keys (doc §2)."""
    return {
        "patch_size": patch,
        "stride": patch,
        "embed_dim": embed,
        "num_layers": layers,
        "num_heads": heads,
        "mlp_hidden_dim": mlp,
        "dropout": 0.1,
        "spacewise_every_n_layers": every_n,
        "spacewise_first": space_first,
        "scaler_cls": SCALER_CLS,
        "output_distribution_classes": [MIXTURE_CLS],
        "output_distribution_kwargs": {"k_components": k},
        "use_memory_efficient_attention": True,
        "stabilize_with_global": True,
        "scale_factor_exponent": 10.0,
    }


# name -> (config, default seed). Layer pattern in the comment (T time-wise, S space-wise).
CONFIGS = OrderedDict(
    [
        ("tiny", (_config(16, 64, 4, 4, 128, 4, False, 4), 1001)),  # [T,T,T,S]
        ("tiny_spacefirst", (_config(16, 64, 4, 4, 128, 2, True, 4), 1002)),  # [S,T,S,T]
        ("tiny_alltime", (_config(16, 64, 3, 4, 128, -1, False, 4), 1003)),  # [T,T,T]
        ("tiny64", (_config(64, 32, 2, 2, 64, 2, False, 3), 1004)),  # [T,S]
        # Toto-Open-Base-1.0 (151,306,080 parameters): benchmarks only, never committed.
        ("base", (_config(64, 768, 12, 12, 3072, 12, False, 24), 1005)),  # [T x 11, S]
    ]
)
COMMITTED = ["tiny", "tiny_spacefirst", "tiny_alltime", "tiny64"]


def layer_types(cfg):
    """'T'/'S' per layer, as toto-ts `Transformer._get_layer_types`."""
    n, every = cfg["num_layers"], cfg["spacewise_every_n_layers"]
    if every == -1:
        return ["T"] * n
    assert n % every == 0
    block = ["T"] * (every - 1)
    block = (["S"] + block) if cfg["spacewise_first"] else (block + ["S"])
    return block * (n // every)


def tensor_shapes(cfg):
    """(checkpoint name, shape) in a fixed order; names as in the released checkpoint."""
    d, p, h = cfg["embed_dim"], cfg["patch_size"], cfg["mlp_hidden_dim"]
    k = cfg["output_distribution_kwargs"]["k_components"]
    out = [
        ("model.patch_embed.projection.weight", (d, p)),
        ("model.patch_embed.projection.bias", (d,)),
    ]
    for i in range(cfg["num_layers"]):
        pre = f"model.transformer.layers.{i}."
        out += [
            (pre + "norm1.scale", (d,)),
            (pre + "norm2.scale", (d,)),
            (pre + "attention.wQKV.weight", (3 * d, d)),
            (pre + "attention.wQKV.bias", (3 * d,)),
            (pre + "attention.wO.weight", (d, d)),
            (pre + "attention.wO.bias", (d,)),
            (pre + "mlp.0.w12.weight", (2 * h, d)),
            (pre + "mlp.0.w12.bias", (2 * h,)),
            (pre + "mlp.0.w3.weight", (d, h)),
            (pre + "mlp.0.w3.bias", (d,)),
        ]
    out += [("model.unembed.weight", (d * p, d)), ("model.unembed.bias", (d * p,))]
    for head in ["df", "loc_proj", "scale_proj", "mixture_weights"]:
        out += [
            (f"model.output_distribution.{head}.weight", (k, d)),
            (f"model.output_distribution.{head}.bias", (k,)),
        ]
    return out


def make_tensors(cfg, seed):
    """name -> float32 C-contiguous array, deterministic in (cfg, seed)."""
    rng = np.random.Generator(np.random.PCG64(seed))
    fan_in = {}
    tensors = OrderedDict()
    for name, shape in tensor_shapes(cfg):
        u = rng.random(shape)  # float64 in [0, 1), platform independent
        if name.endswith(".scale"):  # RMSNorm scale: 1 + 0.2 * (unit-variance uniform)
            vals = 1.0 + 0.2 * np.sqrt(3.0) * (2.0 * u - 1.0)
        else:
            if name.endswith(".weight"):
                fan_in[name[: -len(".weight")]] = shape[1]
            bound = 1.0 / np.sqrt(fan_in[name.rsplit(".", 1)[0]])
            vals = bound * (2.0 * u - 1.0)
        tensors[name] = np.ascontiguousarray(vals.astype(np.float32))
    return tensors


def write_checkpoint(name, out_dir, seed=None):
    """Writes config.json + model.safetensors for config `name` into out_dir; returns the dir."""
    from safetensors.numpy import save_file

    cfg, default_seed = CONFIGS[name]
    seed = default_seed if seed is None else seed
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        f.write(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    tensors = make_tensors(cfg, seed)
    path = os.path.join(out_dir, "model.safetensors")
    save_file(dict(tensors), path + ".partial", metadata={"format": "pt"})
    os.replace(path + ".partial", path)
    return out_dir


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", choices=list(CONFIGS))
    ap.add_argument("--out", help="checkpoint directory to write (with --config)")
    ap.add_argument("--seed", type=int, default=None, help="PCG64 seed (default: fixed per config)")
    ap.add_argument("--all", action="store_true", help=f"write every committed config: {', '.join(COMMITTED)}")
    ap.add_argument("--out-root", help="with --all: writes OUT_ROOT/<config>/")
    a = ap.parse_args(argv)
    if a.all == bool(a.config):
        ap.error("give exactly one of --config or --all")
    if a.config:
        if not a.out:
            ap.error("--config needs --out")
        write_checkpoint(a.config, a.out, a.seed)
        print(a.out)
    else:
        if not a.out_root:
            ap.error("--all needs --out-root")
        for name in COMMITTED:
            print(write_checkpoint(name, os.path.join(a.out_root, name), a.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
