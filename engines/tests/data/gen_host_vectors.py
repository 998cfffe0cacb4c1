#!/usr/bin/env python3
"""Regenerates the torch test vectors of the engines' host math (scaler, rope, mixture).

Run with the toto-ts reference venv (tests/reference/setup_venv.sh):
    ~/.cache/totoc/reference-venv/bin/python engines/tests/data/gen_host_vectors.py

Writes, next to this script:
* scaler.json  - toto's CausalPatchStdMeanScaler run the way TotoForecaster runs it (left zero-pad,
                 prefix_length = padded context length, the whole grown series re-scaled after every
                 appended patch): per-patch loc/scale and the scaled values the backbone embeds.
* rope.json    - TimeAwareRotaryEmbedding (rotary-embedding-torch 0.8.6) tables as toto computes them:
                 inv_freq, cos/sin per position and distinct frequency, xPos scale per (pos - centre).
* mixture.json - MixtureSameFamily(Categorical(softmax probs), StudentT) under AffineTransformed: the
                 de-normalised, extreme-value-replaced mean; and torch.quantile of sample sets.

f32 values are stored as 8-hex-digit IEEE bit patterns so that the Rust tests compare bits.
"""

import json
import os

import numpy as np
import torch

torch.set_grad_enabled(False)
torch.set_num_threads(1)
HERE = os.path.dirname(os.path.abspath(__file__))
F32 = np.float32


def hexs(a):
    a = np.ascontiguousarray(np.asarray(a, dtype=np.float32)).reshape(-1)
    return "".join(f"{x:08x}" for x in a.view(np.uint32))


def dump(name, obj):
    path = os.path.join(HERE, name)
    with open(path, "w") as f:
        json.dump(obj, f, separators=(",", ":"), sort_keys=True)
        f.write("\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


# ---------------------------------------------------------------------------------------------- scaler
def scaler_case(name, context, patch, appended):
    """context: list of float|None (one variate); appended: list of patches (lists of P floats)."""
    from toto.data.util.dataset import pad_array
    from toto.model.scaler import CausalPatchStdMeanScaler

    sc = CausalPatchStdMeanScaler(
        patch_size=patch, minimum_scale=0.1, stabilize_with_global=True, scale_factor_exponent=10.0
    )
    t = len(context)
    x = np.array([0.0 if v is None else v for v in context], dtype=np.float32)
    m = np.array([v is not None for v in context])
    series = pad_array(torch.from_numpy(x)[None, None], patch)  # [1,1,T_pad], left zero-pad
    mask = pad_array(torch.from_numpy(m)[None, None], patch)
    prefix = series.shape[-1]
    steps = []
    for n in range(len(appended) + 1):
        scaled, loc, scale = sc(series, weights=torch.ones_like(series), padding_mask=mask, prefix_length=prefix)
        s = series.shape[-1] // patch
        loc_p = loc[0, 0].reshape(s, patch)[:, -1]
        scale_p = scale[0, 0].reshape(s, patch)[:, -1]
        if n == 0:
            steps.append({"scaled": hexs(scaled[0, 0]), "loc": hexs(loc_p), "scale": hexs(scale_p)})
        else:
            steps.append(
                {"scaled": hexs(scaled[0, 0, -patch:]), "loc": hexs(loc_p[-1:]), "scale": hexs(scale_p[-1:])}
            )
        if n < len(appended):
            new = torch.tensor(np.array(appended[n], dtype=np.float32))[None, None]
            series = torch.cat([series, new], dim=-1)
            mask = torch.cat([mask, torch.ones_like(new, dtype=torch.bool)], dim=-1)
    return {
        "name": name,
        "patch": patch,
        "context": [None if v is None else hexs([v]) for v in context],
        "appended": [hexs(p) for p in appended],
        "steps": steps,
    }


def scaler_cases():
    rng = np.random.default_rng(20260522)
    cases = []

    def walk(n, level, step):
        return list((level + np.cumsum(rng.standard_normal(n) * step)).astype(np.float32).tolist())

    def patches(k, p, level, spread):
        return [list((level + rng.standard_normal(p) * spread).astype(np.float32).tolist()) for _ in range(k)]

    cases.append(scaler_case("random_walk_P16", walk(200, 1000.0, 5.0), 16, patches(3, 16, 1010.0, 5.0)))
    ctx = walk(150, -40.0, 1.0)
    for i in range(0, 11):
        ctx[i] = None  # leading missing run
    for i in rng.choice(np.arange(11, 150), 25, replace=False):
        ctx[int(i)] = None
    cases.append(scaler_case("missing_points_P16", ctx, 16, patches(2, 16, -40.0, 2.0)))
    cases.append(scaler_case("short_context_P16", walk(5, 3.0, 0.5), 16, patches(2, 16, 3.0, 0.5)))
    cases.append(scaler_case("exact_multiple_P8", walk(64, 0.0, 1.0), 8, patches(2, 8, 0.0, 1.0)))
    cases.append(scaler_case("single_point_P16", [None] * 20 + [7.25] + [None] * 9, 16, patches(2, 16, 7.0, 1.0)))
    cases.append(scaler_case("constant_P16", [5.0] * 40, 16, [[5.0] * 16]))
    cases.append(scaler_case("tiny_values_P16", walk(70, 1e-6, 1e-7), 16, patches(2, 16, 1e-6, 1e-7)))
    # huge level with a big spread: global scale > 3.2e9, so the lower clamp gscale*1e-10 beats 0.1
    big = [None] * 15 + [1.0e12] + list((1.0e12 + rng.standard_normal(48) * 5.0e10).astype(np.float32).tolist())
    cases.append(scaler_case("lower_clamp_P16", big, 16, patches(2, 16, 1.0e12, 5.0e10)))
    # appended patches far outside the context: the causal scale hits the upper clamp gscale*1e10
    cases.append(
        scaler_case("upper_clamp_P16", walk(32, 0.0, 1.0), 16, [[3.0e15, -3.0e15] * 8, [1.0e20] * 16])
    )
    cases.append(scaler_case("base_patch_P64", walk(300, 50.0, 2.0), 64, patches(2, 64, 50.0, 2.0)))
    return cases


# ---------------------------------------------------------------------------------------------- rope
def rope_case(head_dim, max_pos):
    from toto.model.rope import TimeAwareRotaryEmbedding

    r = TimeAwareRotaryEmbedding(head_dim, use_xpos=True, cache_if_possible=True, seq_before_head_dim=False)
    half = head_dim // 2
    seq = torch.arange(max_pos + 1, dtype=torch.float32)
    freqs = r.forward(seq)  # [n, Dh], interleaved
    assert torch.equal(freqs[:, 0::2], freqs[:, 1::2])
    cos = freqs.cos()
    sin = freqs.sin()
    # one prefill call over all positions gives xpos for pos - centre in [-c, max_pos - c]
    c = max_pos // 2
    xpos_all = r.get_scale(seq)
    assert torch.equal(xpos_all[:, :half], xpos_all[:, half:])  # cat(scale, scale): non-interleaved
    # the tables depend on (position, centre) only through pos and pos - centre: check that
    # prefill calls of other lengths and decode calls agree with these two tables
    for s in [s for s in [1, 2, 3, 8, 13, 64, max_pos] if s <= max_pos]:
        sq = torch.arange(s, dtype=torch.float32)
        x = r.get_scale(sq)
        cs = (s - 1) // 2
        assert torch.equal(x, xpos_all[c - cs : c - cs + s]), s
        assert torch.equal(r.forward(sq).cos(), cos[:s])
    for p in [p for p in [1, 2, 3, 7, 8, 63, 64, 65, 150, max_pos] if p <= max_pos]:
        sq = torch.arange(1, dtype=torch.float32) + p  # seq_pos_offset = p
        x = r.get_scale(sq)
        assert torch.equal(x[0], xpos_all[c + p - p // 2]), p
        assert torch.equal(r.forward(sq).sin()[0], sin[p])
    return {
        "head_dim": head_dim,
        "max_pos": max_pos,
        "inv_freq": hexs(r.freqs.detach()),
        "xpos_base": hexs(r.scale),
        "cos": [hexs(row) for row in cos[:, 0::2]],
        "sin": [hexs(row) for row in sin[:, 0::2]],
        "xpos_offset_min": -c,
        "xpos": [hexs(row) for row in xpos_all[:, :half]],
    }


# ---------------------------------------------------------------------------------------------- mixture
def mixture_mean_case(name, k, steps, rng, scaler_loc, scaler_scale, extreme=False):
    from toto.inference.forecaster import TotoForecaster
    from toto.data.util.dataset import replace_extreme_values
    from gluonts.torch.distributions.studentT import StudentT

    f = torch.nn.functional
    eps = torch.finfo(torch.float32).eps
    raw = torch.from_numpy(rng.standard_normal((1, 1, steps, 4, k)).astype(np.float32) * 2)
    df = 2.0 + f.softplus(raw[..., 0, :]).clamp_min(eps)
    loc = raw[..., 1, :] * 3
    scale = f.softplus(raw[..., 2, :]).clamp_min(eps)
    weights = f.softmax(raw[..., 3, :] * 2, dim=-1)
    if extreme:
        df[0, 0, 0, :] = 0.5  # df <= 1: StudentT.mean is NaN -> replaced by 0
        loc[0, 0, 1, :] = 3.0e38  # the de-normalised mean overflows -> replaced by 0
    comp = StudentT(df, loc, scale)
    mix = torch.distributions.MixtureSameFamily(torch.distributions.Categorical(probs=weights), comp)
    sl = torch.full((1, 1, steps), scaler_loc, dtype=torch.float32)
    ss = torch.full((1, 1, steps), scaler_scale, dtype=torch.float32)
    distr = TotoForecaster.create_affine_transformed(mix, sl, ss)
    mean = replace_extreme_values(distr.mean)
    return {
        "name": name,
        "components": k,
        "df": hexs(df),
        "loc": hexs(loc),
        "scale": hexs(scale),
        "weights": hexs(weights),
        "scaler_loc": hexs([scaler_loc]),
        "scaler_scale": hexs([scaler_scale]),
        "mean": hexs(mean),
    }


def quantile_case(n, rows, qs, rng):
    from toto.inference.forecaster import Forecast

    x = torch.from_numpy((rng.standard_normal((1, 1, rows, n)) * 100 + 7).astype(np.float32))
    if n > 3:
        x[0, 0, 0, :3] = x[0, 0, 0, 3]  # ties
    fc = Forecast(mean=x.mean(-1), samples=x)
    return {
        "samples": n,
        "rows": rows,
        "values": hexs(x),  # [rows][n]
        "quantiles": [{"q": q, "values": hexs(fc.quantile(float(q)))} for q in qs],
    }


def main():
    dump("scaler.json", {"cases": scaler_cases()})
    dump("rope.json", {"cases": [rope_case(64, 300), rope_case(16, 64)]})
    rng = np.random.default_rng(7)
    means = [
        mixture_mean_case("k24", 24, 32, rng, 1013.25, 17.5),
        mixture_mean_case("k4", 4, 16, rng, -3.0e-3, 0.25),
        mixture_mean_case("k7", 7, 16, rng, 2.0e6, 4.0e4),
        mixture_mean_case("k24_extreme", 24, 4, rng, 1.0, 2.0, extreme=True),
    ]
    qs = [0.1, 0.5, 0.9, 0.025, 0.975, 0.3333, 0.75]
    quantiles = [quantile_case(n, rows, qs, rng) for n, rows in [(1, 3), (2, 5), (7, 17), (64, 20), (256, 18)]]
    dump("mixture.json", {"means": means, "quantiles": quantiles})


if __name__ == "__main__":
    main()
