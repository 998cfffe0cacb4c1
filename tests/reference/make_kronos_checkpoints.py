#!/usr/bin/env python3
"""Random-weight Kronos checkpoints in the released layout: a predictor and a tokenizer directory.

    make_kronos_checkpoints.py --config NAME --out DIR [--seed S]
        writes DIR/predictor/{config.json,model.safetensors} and DIR/tokenizer/{config.json,model.safetensors}

The layout is what upstream's `save_pretrained` writes (PyTorchModelHubMixin, huggingface_hub 0.36): `config.json`
holds the `__init__` keyword arguments of `Kronos` / `KronosTokenizer` as `json.dumps(cfg, sort_keys=True,
indent=2)` (no trailing newline), `model.safetensors` every parameter and every *persistent* buffer, without
metadata: the rotary `inv_freq` of every attention layer (the dependency layer's included), the tokenizer's
`tokenizer.bsq.basis` (int64 [s1+s2], 2^(K-1)..2^0) and `tokenizer.bsq.group_basis` (int64 [group_size]), and the
unused `post_quant_embed_pre`. `regen_kronos_fixtures.py` checks, for every committed config, that these bytes equal
what `save_pretrained` writes for modules holding the same tensors (`same_as_save_pretrained`).

Values are a pure function of (config, seed), the same bytes on every CPU: tensor t of part p (0 predictor,
1 tokenizer), in the modules' registration order, draws `Generator(PCG64(SeedSequence([seed, p, t]))).random(shape)`
(uniform f64 in [0, 1), a pure integer-to-double conversion) and maps u in f64, rounded once to f32:
* Linear weights and biases: (2u - 1)/sqrt(fan_in) (torch's default Linear scale; biases are non-zero);
* embeddings (emb_s1, emb_s2, the five time tables, learn_te false included): (2u - 1) sqrt(3/d), variance 1/d
  as upstream's init (normal(0, d^-1/2)); with learn_te false the tables are saved Parameters that upstream's init
  overwrites, so they are random, never sinusoids;
* RMSNorm weights: 1 + 0.35 (2u - 1);
* no draws: `inv_freq` = f32(1 / f32(10000 ** e)), e = f32(arange(0, hd, 2)) / f32(hd), the power computed in f64
  and rounded once. That is what torch computes with the pinned kernels (ATen's baseline build: std::pow in f32,
  correctly rounded) and, for the head dims of the committed configs (8-24), with AVX2 and AVX-512 too; torch's
  vectorised pow differs by an ulp at some entries of hd 52 and 208 (`torch_inv_freq_agrees` reports it). It is not
  the correctly rounded 1/10000^(2j/hd) (the exponent is rounded to f32 first), so a host that recomputes it in f64
  gets other last bits: load it.

Configs (CONFIGS): four tiny committed ones (d 32-64, 2 layers) that cover 10/10, 4/4, 5/5 and 6/6 bits,
learn_te false and tokenizer group_size 4 and 5, plus `small` (Kronos-small + Tokenizer-base shapes) and `mini`
(Kronos-mini + Tokenizer-2k shapes) for the benchmark, never committed. Windows (max_context) are not in the
config: they are predictor arguments, set per case (the request's params.max_context).

Needs numpy and safetensors only (no torch).
"""

import argparse
import json
import math
import os
import sys
from collections import OrderedDict

import numpy as np

PARTS = ("predictor", "tokenizer")

# Kronos-small's dropouts (ffn, attn, resid, token): eval mode must switch them off, so the tiny configs keep them
SMALL_DROPOUT = (0.25, 0.1, 0.25, 0.1)


def predictor_config(bits, layers, d, heads, ff, learn_te=True, dropout=SMALL_DROPOUT):
    """`Kronos.__init__`'s keyword arguments (what save_pretrained writes to config.json)."""
    ffn, attn, resid, token = dropout
    return {
        "s1_bits": bits,
        "s2_bits": bits,
        "n_layers": layers,
        "d_model": d,
        "n_heads": heads,
        "ff_dim": ff,
        "ffn_dropout_p": ffn,
        "attn_dropout_p": attn,
        "resid_dropout_p": resid,
        "token_dropout_p": token,
        "learn_te": learn_te,
    }


def tokenizer_config(bits, d, heads, ff, enc, dec, group_size):
    """`KronosTokenizer.__init__`'s keyword arguments; the BSQ loss weights are the published tokenizers' values."""
    return {
        "d_in": 6,
        "d_model": d,
        "n_heads": heads,
        "ff_dim": ff,
        "n_enc_layers": enc,
        "n_dec_layers": dec,
        "ffn_dropout_p": 0.0,
        "attn_dropout_p": 0.0,
        "resid_dropout_p": 0.0,
        "s1_bits": bits,
        "s2_bits": bits,
        "beta": 0.05,
        "gamma0": 1.0,
        "gamma": 1.1,
        "zeta": 0.05,
        "group_size": group_size,
    }


# name -> {"predictor", "tokenizer", "seed", "committed", "what"}
CONFIGS = OrderedDict(
    [
        (
            "k10",
            {
                "predictor": predictor_config(10, 2, 32, 2, 64),
                "tokenizer": tokenizer_config(10, 32, 2, 64, 3, 3, 4),
                "seed": 3001,
                "committed": True,
                "what": "10/10 bits (vocabulary 1024, the published size), group_size 4",
            },
        ),
        (
            "k4",
            {
                "predictor": predictor_config(4, 2, 48, 4, 96),
                "tokenizer": tokenizer_config(4, 32, 2, 64, 3, 2, 4),
                "seed": 3002,
                "committed": True,
                "what": "4/4 bits (vocabulary 16), 4 heads of 12; tokenizer d 32 != d 48, 2 encoder blocks and 1 decoder block",
            },
        ),
        (
            "k5g5",
            {
                "predictor": predictor_config(5, 2, 40, 2, 80),
                "tokenizer": tokenizer_config(5, 40, 2, 80, 3, 3, 5),
                "seed": 3003,
                "committed": True,
                "what": "5/5 bits, tokenizer group_size 5 (Tokenizer-2k's), d 40 (dependency heads of 10)",
            },
        ),
        (
            "k6te",
            {
                "predictor": predictor_config(6, 2, 64, 4, 128, learn_te=False),
                "tokenizer": tokenizer_config(6, 32, 4, 64, 3, 3, 4),
                "seed": 3004,
                "committed": True,
                "what": "6/6 bits, learn_te false (the `..._embed.emb.weight` tables), tokenizer d 32 != d 64",
            },
        ),
        (
            "small",
            {
                "predictor": predictor_config(10, 8, 512, 8, 1024),
                "tokenizer": tokenizer_config(10, 256, 4, 512, 4, 4, 4),
                "seed": 3005,
                "committed": False,
                "what": "Kronos-small + Tokenizer-base shapes (24,741,376 + 3,958,042 parameters); benchmarks only",
            },
        ),
        (
            "mini",
            {
                "predictor": predictor_config(10, 4, 256, 4, 512, dropout=(0.2, 0.0, 0.2, 0.0)),
                "tokenizer": tokenizer_config(10, 256, 4, 512, 4, 4, 5),
                "seed": 3006,
                "committed": False,
                "what": "Kronos-mini + Tokenizer-2k shapes (4,108,032 + 3,958,042 parameters); benchmarks only",
            },
        ),
    ]
)


def _linear(out, name, o, i, bias=True):
    out.append((name + ".weight", (o, i), "linear", i))
    if bias:
        out.append((name + ".bias", (o,), "linear", i))


def _block(out, prefix, d, heads, ff):
    """A TransformerBlock's tensors in registration order (norm1, self_attn, norm2, ffn)."""
    out.append((prefix + ".norm1.weight", (d,), "norm", d))
    for p in ("q_proj", "k_proj", "v_proj", "out_proj"):
        _linear(out, f"{prefix}.self_attn.{p}", d, d)
    out.append((prefix + ".self_attn.rotary.inv_freq", (d // heads // 2,), "inv_freq", d // heads))
    out.append((prefix + ".norm2.weight", (d,), "norm", d))
    for p, o, i in (("w1", ff, d), ("w3", ff, d), ("w2", d, ff)):
        _linear(out, f"{prefix}.ffn.{p}", o, i, bias=False)


def predictor_tensors(cfg):
    """(name, shape, kind, fan_in or head dim) of every stored tensor of `Kronos`, in registration order."""
    d, v1, v2 = cfg["d_model"], 2 ** cfg["s1_bits"], 2 ** cfg["s2_bits"]
    out = [
        ("embedding.emb_s1.weight", (v1, d), "embedding", d),
        ("embedding.emb_s2.weight", (v2, d), "embedding", d),
    ]
    _linear(out, "embedding.fusion_proj", d, 2 * d)
    table = "" if cfg["learn_te"] else ".emb"  # FixedEmbedding keeps its table in .emb
    for name, rows in (("minute", 60), ("hour", 24), ("weekday", 7), ("day", 32), ("month", 13)):
        out.append((f"time_emb.{name}_embed{table}.weight", (rows, d), "embedding", d))
    for i in range(cfg["n_layers"]):
        _block(out, f"transformer.{i}", d, cfg["n_heads"], cfg["ff_dim"])
    out.append(("norm.weight", (d,), "norm", d))
    for p in ("q_proj", "k_proj", "v_proj", "out_proj"):
        _linear(out, f"dep_layer.cross_attn.{p}", d, d)
    out.append(("dep_layer.cross_attn.rotary.inv_freq", (d // 4 // 2,), "inv_freq", d // 4))  # always 4 heads
    out.append(("dep_layer.norm.weight", (d,), "norm", d))
    _linear(out, "head.proj_s1", v1, d)
    _linear(out, "head.proj_s2", v2, d)
    return out


def tokenizer_tensors(cfg):
    """(name, shape, kind, fan_in / head dim / size) of every stored tensor of `KronosTokenizer`."""
    d, k, g = cfg["d_model"], cfg["s1_bits"] + cfg["s2_bits"], cfg["group_size"]
    out = []
    _linear(out, "embed", d, cfg["d_in"])
    _linear(out, "head", cfg["d_in"], d)
    for i in range(cfg["n_enc_layers"] - 1):
        _block(out, f"encoder.{i}", d, cfg["n_heads"], cfg["ff_dim"])
    for i in range(cfg["n_dec_layers"] - 1):
        _block(out, f"decoder.{i}", d, cfg["n_heads"], cfg["ff_dim"])
    _linear(out, "quant_embed", k, d)
    _linear(out, "post_quant_embed_pre", d, cfg["s1_bits"])
    _linear(out, "post_quant_embed", d, k)
    out.append(("tokenizer.bsq.basis", (k,), "basis", k))
    out.append(("tokenizer.bsq.group_basis", (g,), "basis", g))
    return out


def validate(name, pcfg, tcfg):
    """The shape rules upstream asserts or silently needs; a config breaking one is a bug here."""
    for part, c in (("predictor", pcfg), ("tokenizer", tcfg)):
        hd = c["d_model"] // c["n_heads"]
        assert c["d_model"] % c["n_heads"] == 0 and hd % 2 == 0, f"{name} {part}: head dim must be even"
    assert pcfg["d_model"] % 4 == 0 and (pcfg["d_model"] // 4) % 2 == 0, f"{name}: the 4 dependency heads"
    assert pcfg["s1_bits"] == pcfg["s2_bits"] == tcfg["s1_bits"] == tcfg["s2_bits"], f"{name}: bits must agree"
    assert (tcfg["s1_bits"] + tcfg["s2_bits"]) % tcfg["group_size"] == 0, f"{name}: group_size must divide the bits"


def inv_freq(hd):
    """The rotary buffer as torch's `RotaryPositionalEmbedding(hd)` computes it (see the module docs)."""
    e = np.arange(0, hd, 2).astype(np.float32) / np.float32(hd)
    p = (10000.0 ** e.astype(np.float64)).astype(np.float32)
    return (np.float32(1.0) / p).astype(np.float32)


def make_tensors(specs, seed, part):
    """name -> C-contiguous array (f32, or int64 for the BSQ bases), deterministic in (specs, seed, part)."""
    tensors = OrderedDict()
    for t, (name, shape, kind, n) in enumerate(specs):
        if kind == "inv_freq":
            tensors[name] = inv_freq(n)
        elif kind == "basis":
            tensors[name] = (2 ** np.arange(n - 1, -1, -1)).astype(np.int64)
        else:
            u = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, part, t]))).random(shape)
            if kind == "linear":
                vals = (2.0 * u - 1.0) / math.sqrt(n)
            elif kind == "embedding":
                vals = (2.0 * u - 1.0) * math.sqrt(3.0 / n)
            elif kind == "norm":
                vals = 1.0 + 0.35 * (2.0 * u - 1.0)
            else:
                raise ValueError(kind)
            tensors[name] = np.ascontiguousarray(vals, dtype=np.float32)
        assert tensors[name].shape == tuple(shape), name
    return tensors


def parameter_count(specs):
    """Parameters as upstream counts them (buffers excluded)."""
    return sum(int(np.prod(s)) for _, s, kind, _ in specs if kind not in ("inv_freq", "basis"))


def specs_of(name):
    c = CONFIGS[name]
    return {"predictor": predictor_tensors(c["predictor"]), "tokenizer": tokenizer_tensors(c["tokenizer"])}


def config_json(cfg):
    """config.json's bytes as save_pretrained writes them."""
    return json.dumps(cfg, sort_keys=True, indent=2)


def write_checkpoint(name, out_dir, seed=None):
    """Writes out_dir/predictor and out_dir/tokenizer of config `name`; returns {part: dir}."""
    from safetensors.numpy import save_file

    c = CONFIGS[name]
    validate(name, c["predictor"], c["tokenizer"])
    seed = c["seed"] if seed is None else seed
    dirs = {}
    for p, part in enumerate(PARTS):
        d = os.path.join(out_dir, part)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "config.json"), "w") as f:
            f.write(config_json(c[part]))
        tensors = make_tensors(specs_of(name)[part], seed, p)
        path = os.path.join(d, "model.safetensors")
        save_file(dict(tensors), path + ".partial")
        os.replace(path + ".partial", path)
        dirs[part] = d
    return dirs


def same_as_save_pretrained(name, dirs, tmp):
    """Builds upstream's modules from config.json, loads the tensors strictly, runs `save_pretrained` into `tmp`
    and returns the files that are not byte-identical (empty: the layout is the released one). Needs torch."""
    import torch
    from safetensors.torch import load_file

    from kronos_finance._vendor.kronos_model import Kronos, KronosTokenizer

    bad = []
    for part, cls in (("predictor", Kronos), ("tokenizer", KronosTokenizer)):
        with open(os.path.join(dirs[part], "config.json")) as f:
            module = cls(**json.load(f))
        module.load_state_dict(load_file(os.path.join(dirs[part], "model.safetensors")), strict=True)
        with torch.no_grad():
            module.save_pretrained(os.path.join(tmp, part))
        for file in ("config.json", "model.safetensors"):
            with open(os.path.join(dirs[part], file), "rb") as a, open(os.path.join(tmp, part, file), "rb") as b:
                if a.read() != b.read():
                    bad.append(f"{name}/{part}/{file}")
    return bad


def torch_inv_freq_agrees(name):
    """The head dims of config `name` whose inv_freq torch (as this process's kernels compute it) gives other bits
    than `inv_freq` (empty: the same). Needs torch."""
    from kronos_finance._vendor.kronos_model.module import RotaryPositionalEmbedding

    dims = sorted({n for specs in specs_of(name).values() for _, _, kind, n in specs if kind == "inv_freq"})
    return [hd for hd in dims if not np.array_equal(RotaryPositionalEmbedding(hd).inv_freq.numpy(), inv_freq(hd))]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", choices=list(CONFIGS), required=True)
    ap.add_argument("--out", required=True, help="directory to write predictor/ and tokenizer/ into")
    ap.add_argument("--seed", type=int, default=None, help="generator seed (default: fixed per config)")
    a = ap.parse_args(argv)
    dirs = write_checkpoint(a.config, a.out, a.seed)
    specs = specs_of(a.config)
    for part in PARTS:
        print(f"{dirs[part]} parameters={parameter_count(specs[part])} tensors={len(specs[part])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
