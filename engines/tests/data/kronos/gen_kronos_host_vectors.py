#!/usr/bin/env python3
"""Regenerates the test vectors of Kronos's host numerics (engines/src/kronos/) from the reference stack.

Run with the reference venv (tests/reference/setup_venv.sh; kronos-finance 0.1.5, torch 2.7, numpy 1.26.4,
pandas 2.2.3):
    ~/.cache/totoc/reference-venv/bin/python engines/tests/data/kronos/gen_kronos_host_vectors.py

Upstream is `kronos_finance._vendor.kronos_model.kronos` (`k:` below = its line numbers). torch runs under the
reference harness's pinned kernels (tests/reference/kernels.py: ATEN_CPU_CAPABILITY=default, one thread), as the
golden fixtures do. Writes, next to this script:
* stats.json   - KronosPredictor.predict's normalisation (k:538-545, 554): np.mean / np.std over axis 0 of the f32
                 [N, 6] matrix (Fortran-ordered, as `.values.astype(np.float32)` makes it: each column is one
                 contiguous numpy reduction), (x - mean) / (std + 1e-5) clipped, and pred * (std + 1e-5) + mean.
                 The columns are regenerated in the Rust tests from `seed` and `kinds` (see `column` below), so
                 only the results are stored.
* amount.json  - the derived `amount` column (k:529-530): volume * df[price_cols].mean(axis=1) in pandas f64,
                 then `.astype(np.float32)` (f64 and f32 bits).
* paths.json   - auto_regressive_inference's mean of the sample paths (k:463-465: np.mean over axis 1 of
                 [B, S, W, 6] f32) and the de-normalised last H rows (k:514, 554).
* stamps.json  - calc_time_stamps (k:470-477) of single stamps parsed by pd.to_datetime: minute, hour, weekday,
                 day, month.
* sampler.json - sample_from_logits (k:371-384) with torch.manual_seed(noise_seed): the choice, the Exp(1) noise E
                 that torch.multinomial drew (the same generator state, `exponential_` over the [1, V] tensor) at
                 the tokens the filter keeps, how many it keeps, and the SHA-256 of the probabilities multinomial
                 sampled from (f32 little-endian) so the Rust softmax is checked bit for bit. Logits are
                 regenerated in the Rust tests from the case parameters (see `logits` below).
* philox.json  - numpy's Philox (4x64-10) raw outputs, the known answers for totoc's own noise stream, and E of
                 that stream for a few keys.

Every f32 is stored as 8 hex digits of its IEEE bits, every f64 as 16.
The script asserts, for every sampled draw, that argmax(p / E) equals torch's choice (multinomial on CPU is that
argmax) and that no tie of logits straddles a top-p cut (the order of ties is kernel-dependent; the Rust sampler
documents its own rule for them).
"""

import hashlib
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "..", "tests", "reference"))
import kernels  # noqa: E402

KERNELS = kernels.pin()

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from kronos_finance._vendor.kronos_model.kronos import (  # noqa: E402
    calc_time_stamps,
    sample_from_logits,
    top_k_top_p_filtering,
)

torch.set_grad_enabled(False)
torch.set_num_threads(1)
F32 = np.float32
M64 = (1 << 64) - 1


def hex32(a):
    a = np.ascontiguousarray(np.asarray(a, dtype=np.float32)).reshape(-1)
    return "".join(f"{x:08x}" for x in a.view(np.uint32))


def hex64(a):
    a = np.ascontiguousarray(np.asarray(a, dtype=np.float64)).reshape(-1)
    return "".join(f"{x:016x}" for x in a.view(np.uint64))


def dump(name, obj):
    path = os.path.join(HERE, name)
    with open(path, "w") as f:
        json.dump(obj, f, separators=(",", ":"), sort_keys=True)
        f.write("\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


# ------------------------------------------------------------------------------------------ shared inputs
class SplitMix:
    """SplitMix64; mirrored by `SplitMix` in engines/src/kronos/testdata.rs."""

    def __init__(self, seed):
        self.s = seed & M64

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & M64
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)

    def unit(self):
        """f64 in [0, 1) with 53 random bits (exact)."""
        return (self.next() >> 11) * 2.0**-53

    def bell(self):
        """A bell-shaped f64 in (-2, 2): the sum of four units minus 2, added in this order."""
        return ((self.unit() + self.unit()) + (self.unit() + self.unit())) - 2.0


def column(seed, kind, n):
    """f32 column `kind` of length n: every value is an f64 expression rounded once to f32."""
    r = SplitMix(seed)
    out = []
    for i in range(n):
        if kind == 0:  # prices around 100
            v = 100.0 + 10.0 * (r.unit() - 0.5)
        elif kind == 1:  # a large offset with a small spread: cancellation in x - mean
            v = 3.0e6 + 1000.0 * r.bell()
        elif kind == 2:  # tiny values
            v = 1.0e-3 * r.bell()
        elif kind == 3:  # a constant whose f32 sum is not exact (std is not 0)
            v = 0.1
        elif kind == 4:  # zeros (a missing volume): std 0
            v = 0.0
        elif kind == 5:  # volume-like, every 7th row 0
            v = 0.0 if i % 7 == 0 else 1.0e6 * r.unit()
        elif kind == 6:  # negative, tiny relative spread
            v = -2.5e4 + 0.01 * r.bell()
        elif kind == 7:  # wide range: 16 orders of magnitude, both signs
            v = (r.unit() - 0.5) * 2.0 ** (int(r.next() % 64) - 24)
        else:
            raise ValueError(kind)
        out.append(v)
    return np.array(out, dtype=np.float64).astype(F32)


# ------------------------------------------------------------------------------------------ normalisation
def upstream_stats(x, clip):
    """k:542-545 on the f32 [N, 6] matrix x (Fortran order, as upstream's .values.astype(np.float32))."""
    assert x.flags["F_CONTIGUOUS"]
    x_mean, x_std = np.mean(x, axis=0), np.std(x, axis=0)
    xn = (x - x_mean) / (x_std + 1e-5)
    xn = np.clip(xn, -clip, clip)
    return x_mean, x_std, xn


def stats_cases():
    lengths = list(range(1, 301)) + [392, 512, 2000, 8192, 8193, 20000]
    full = {1, 2, 3, 7, 8, 9, 16, 17, 64, 127, 128, 129, 255, 256, 257, 392}
    cases = []
    for n in lengths:
        seed = 1000 + n
        kinds = [(n + c) % 8 for c in range(6)]
        if n in (392, 2000):
            kinds = [0, 1, 2, 3, 4, 5]
        cols = [column(seed * 16 + c, k, n) for c, k in enumerate(kinds)]
        x = np.asfortranarray(np.stack(cols, axis=1))
        clip = 2.5 if n % 5 == 0 else 5
        mean, std, xn = upstream_stats(x, clip)
        case = {"n": n, "seed": seed, "kinds": kinds, "clip": clip, "mean": hex32(mean), "std": hex32(std)}
        if n in full:
            case["normalized"] = hex32(np.ascontiguousarray(xn))  # row-major [N][6]
            h = 7
            r = SplitMix(seed ^ 0x5EED)
            preds = np.array([[3.0 * r.bell() for _ in range(6)] for _ in range(h)], dtype=np.float64).astype(F32)
            case["preds_seed"] = seed ^ 0x5EED
            case["denormalized"] = hex32(preds * (std + 1e-5) + mean)  # k:554
        cases.append(case)
    # the stats of a column are those of numpy's reduction of that column alone
    x = np.asfortranarray(np.stack([column(7, 1, 300)] * 6, axis=1))
    assert np.array_equal(np.mean(x, axis=0).view(np.uint32), np.repeat(np.mean(x[:, 0]), 6).view(np.uint32))
    return {"cases": cases}


# ------------------------------------------------------------------------------------------ amount
PRICE = ["open", "high", "low", "close"]


def upstream_frame(df):
    """k:524-538: the column rules and the f32 matrix."""
    df = df.copy()
    if "volume" not in df.columns:
        df["volume"] = 0.0
        df["amount"] = 0.0
    if "amount" not in df.columns and "volume" in df.columns:
        df["amount"] = df["volume"] * df[PRICE].mean(axis=1)
    return df, df[PRICE + ["volume", "amount"]].values.astype(np.float32)


def amount_cases():
    r = SplitMix(42)
    rows = []
    for i in range(400):  # prices with cents as a CSV holds them, integer volumes
        base = 1 + r.next() % 500000
        cents = [base + r.next() % 2000 for _ in range(4)]
        vol = r.next() % 10**9
        rows.append([c / 100.0 for c in cents] + [float(vol)])
    # wide values, signed zeros, and values whose f32 rounding of the amount is close to a tie
    w = SplitMix(43)
    special = []
    for i in range(60):
        vals = []
        for _ in range(5):
            mant = w.unit() - 0.5
            e = int(w.next() % 80) - 30
            vals.append(math.ldexp(mant, e))
        special.append(vals)
    special += [[-0.0, -0.0, -0.0, -0.0, 5.0], [0.0, -0.0, 0.0, -0.0, 3.0], [1.0, 2.0, 3.0, 4.0, -0.0],
                [1e300, 1e300, -1e300, 1e-300, 1.0], [0.1, 0.2, 0.3, 0.4, 0.7]]
    out = {}
    for name, data in [("cents", rows), ("special", special)]:
        a = np.array(data, dtype=np.float64)
        df = pd.DataFrame(a, columns=PRICE + ["volume"])
        df2, x = upstream_frame(df)
        amount = df2["amount"].to_numpy(dtype=np.float64)
        out[name] = {"rows": len(data), "amount64": hex64(amount), "amount32": hex32(x[:, 5])}
        if name == "special":
            out[name]["inputs"] = hex64(a)  # row-major [rows][o, h, l, c, v]
    # no volume: volume and amount are 0 even when amount is given (k:526-528)
    df = pd.DataFrame({"open": [1.0, 2.0], "high": [1.5, 2.5], "low": [0.5, 1.5], "close": [1.2, 2.2],
                       "amount": [7.0, 8.0]})
    _, x = upstream_frame(df)
    assert np.all(x[:, 4:] == 0)
    out["cents_seed"] = 42
    return out


# ------------------------------------------------------------------------------------------ path mean
def paths_cases():
    cases = []
    for b, s, w, h in [(1, 1, 12, 10), (1, 2, 12, 10), (1, 3, 12, 10), (1, 5, 9, 9), (1, 8, 12, 10),
                       (1, 16, 12, 10), (1, 100, 12, 10), (1, 1000, 6, 4), (3, 4, 12, 10)]:
        seed = 7000 + 31 * s + b
        r = SplitMix(seed)
        z = np.array([3.0 * r.bell() for _ in range(b * s * w * 6)], dtype=np.float64).astype(F32)
        z = z.reshape(b * s, w, 6)  # the decoded rows of every (series, path) row, series-major (k:392-394)
        preds = z.reshape(-1, s, w, 6)  # k:463
        preds = np.mean(preds, axis=1)  # k:465
        preds = preds[:, -h:, :]  # k:514
        stats = []
        den = []
        for i in range(b):
            mean = np.array([column(seed + i, 0, 1)[0] * (c + 1) for c in range(6)], dtype=F32)
            std = np.array([abs(column(seed + 100 + i, 2, 1)[0]) * 10.0**c for c in range(6)], dtype=F32)
            std[4] = 0.0  # a zero-volume column: pred * 1e-5 + mean
            stats.append((mean, std))
            den.append(preds[i] * (std + 1e-5) + mean)  # k:655
        cases.append({"series": b, "paths": s, "window": w, "horizon": h, "seed": seed,
                      "mean_std": [[hex32(m), hex32(sd)] for m, sd in stats],
                      "mean": hex32(preds), "denormalized": hex32(np.stack(den))})
    return {"cases": cases}


# ------------------------------------------------------------------------------------------ stamps
STAMPS = [
    "2017-04-19T09:00:00", "2017-04-19 09:30:00", "2017-04-19", "2017-04-19T23:59", "2017-04-19T23:59:59.999999",
    "2017-04-19T09:00:00Z", "2017-04-19T23:30:00-05:00", "2017-04-19T00:15:00+05:30", "2017-04-19T09:00:00.5+01:00",
    "2000-02-29T12:00:00", "1900-03-01T00:00:00", "2100-02-28T13:14:15", "1970-01-01T00:00:00",
    "1969-12-31T23:59:59", "2024-12-31T23:59:59", "2025-01-01T00:00:00", "1677-09-22T00:00:00",
    "2262-04-10T00:00:00", "2023-06-04T10:05:00", "2023-06-05T10:05:00", "2023-06-10T10:05:00",
    "2001-09-09T01:46:40", "2038-01-19T03:14:07", "2016-02-29T16:00:00.123Z", "1999-12-31T23:59:59+14:00",
]


def stamp_cases():
    out = []
    for s in STAMPS:
        ts = pd.Series(pd.to_datetime([s]))
        f = calc_time_stamps(ts).values.astype(np.float32)[0]  # minute, hour, weekday, day, month
        out.append({"stamp": s, "features": [int(v) for v in f]})
    return {"cases": out}


# ------------------------------------------------------------------------------------------ sampler
def logits(seed, vocab, scale, hot, ties):
    """f32 logits: scale * bell per token, `hot` tokens raised by up to 6, then `ties` tokens set to the max."""
    r = SplitMix(seed)
    v = [scale * r.bell() for _ in range(vocab)]
    for _ in range(hot):
        i = r.next() % vocab
        v[i] = v[i] + 6.0 * r.unit()
    x = np.array(v, dtype=np.float64).astype(F32)
    top = x.max()
    for _ in range(ties):
        x[r.next() % vocab] = top
    return x


SETTINGS = [
    # name, temperature, top_k, top_p
    ("t0.7_top_p0.9", 0.7, 0, 0.9),
    ("top_k5", 1.0, 5, 0.9),
    ("t1_unfiltered", 1.0, 0, 1.0),
    ("greedy", 1.0, 1, 1.0),
    ("t1.3_top_p0.99", 1.3, 0, 0.99),
    ("t0.5_top_k40", 0.5, 40, 0.5),
]


def sampler_cases():
    cases = []
    n = 0
    for name, t, top_k, top_p in SETTINGS:
        draws = 14 if name != "t1_unfiltered" else 10
        for d in range(draws):
            vocab = [1024, 1024, 1024, 256, 16, 4, 2, 1024][d % 8]
            scale = [1.5, 3.0, 0.8, 2.0][d % 4]
            hot = [0, 3, 12][d % 3]
            ties = 3 if (name == "greedy" and d % 2 == 0) else 0
            seed = 9000 + 97 * n
            noise_seed = 123 + n
            n += 1
            x = logits(seed, vocab, scale, hot, ties)
            xt = torch.from_numpy(x.copy())[None]
            torch.manual_seed(noise_seed)
            choice = int(sample_from_logits(xt.clone(), temperature=t, top_k=top_k, top_p=top_p,
                                            sample_logits=True).item())
            torch.manual_seed(noise_seed)
            e = torch.empty_like(xt).exponential_(1)
            # what multinomial sampled from (k:372-377)
            y = xt / t
            if top_k > 0 or top_p < 1.0:
                y = top_k_top_p_filtering(y.clone(), top_k=top_k, top_p=top_p)
            p = F.softmax(y, dim=-1)
            assert int(torch.argmax(p / e, dim=-1)) == choice, (name, d)
            kept = torch.nonzero(y[0] > -math.inf).flatten().numpy()
            if top_k == 0 and top_p < 1.0:
                # no tie straddles the cut: the kept set does not depend on the order of ties
                cut = (x / F32(t))[kept].min() if len(kept) else None
                assert np.sum((x / F32(t)) == cut) == np.sum((x / F32(t))[kept] == cut), (name, d)
            cases.append({
                "setting": name, "temperature": t, "top_k": top_k, "top_p": top_p,
                "vocab": vocab, "scale": scale, "hot": hot, "ties": ties, "seed": seed,
                "noise_seed": noise_seed, "choice": choice, "kept": int(len(kept)),
                "noise": hex32(e[0].numpy()[kept]),
                "probs_sha256": hashlib.sha256(np.ascontiguousarray(p[0].numpy(), dtype="<f4").tobytes()).hexdigest(),
            })
    return {"cases": cases, "edges": sampler_edges(), "kernels": kernels.describe_setting()}


def sampler_edges():
    """Rows at the edges of the rules, logits given bit for bit: a cumulative sum equal to f32(0.99) (above the
    f64 0.99, not above its f32: torch compares in f32 and keeps the next token), a top token alone over top_p,
    and -inf logits in an unfiltered row."""
    rows = [
        ("cumsum == f32(top_p)", [0x00000000, 0xBE99999A, 0xC0814E0D], 1.0, 0, 0.99),
        ("top token alone over top_p", [0x40A00000, 0x00000000, 0xBF800000, 0x3F800000], 1.0, 0, 0.9),
        ("-inf logits, unfiltered", [0xFF800000, 0x3F000000, 0xFF800000, 0xBF000000, 0x00000000], 1.0, 0, 1.0),
    ]
    out = []
    for n, (name, bits, t, top_k, top_p) in enumerate(rows):
        x = np.array(bits, dtype=np.uint32).view(np.float32)
        xt = torch.from_numpy(x.copy())[None]
        if name.startswith("cumsum"):
            c = torch.cumsum(F.softmax(torch.sort(xt, descending=True)[0], dim=-1), dim=-1)[0].numpy()
            assert c[1] == np.float32(top_p) and float(c[1]) > top_p, c
        torch.manual_seed(500 + n)
        choice = int(sample_from_logits(xt.clone(), temperature=t, top_k=top_k, top_p=top_p, sample_logits=True).item())
        torch.manual_seed(500 + n)
        e = torch.empty_like(xt).exponential_(1)
        y = top_k_top_p_filtering((xt / t).clone(), top_k=top_k, top_p=top_p) if (top_k > 0 or top_p < 1.0) else xt / t
        p = F.softmax(y, dim=-1)
        assert int(torch.argmax(p / e, dim=-1)) == choice, name
        kept = torch.nonzero(y[0] > -math.inf).flatten().numpy()
        out.append({"name": name, "logits": hex32(x), "temperature": t, "top_k": top_k, "top_p": top_p,
                    "choice": choice, "kept": [int(k) for k in kept], "noise": hex32(e[0].numpy()),
                    "probs": hex32(p[0].numpy())})
    return out


# ------------------------------------------------------------------------------------------ philox
def philox_cases():
    r = SplitMix(77)
    raw = []
    for key, counter in [([0, 0], [0, 0, 0, 0]), ([1, 2], [0, 0, 0, 0]), ([M64, M64], [M64, M64, M64, M64 - 1])] + [
        ([r.next(), r.next()], [r.next(), r.next(), r.next(), r.next()]) for _ in range(5)
    ]:
        bg = np.random.Philox(key=np.array(key, dtype=np.uint64), counter=np.array(counter, dtype=np.uint64))
        # numpy increments the counter (with carry) before each block: these are philox(counter + 1, key)
        out = [int(v) for v in bg.random_raw(4)]
        raw.append({"key": [str(k) for k in key], "counter": [str(c) for c in counter],
                    "output": [str(o) for o in out]})
    # totoc's noise stream (engines/src/kronos/noise.rs): key (seed, DOMAIN), counter (index // 4, step, path,
    # draw), word index % 4, E = -ln(((word >> 12) + 0.5) * 2^-52) rounded to f32
    domain = 0x4B524F4E4F53_0001  # "KRONOS" + stream version 1
    stream = []
    for seed, path, step, draw, index in [(0, 0, 0, 0, 0), (7, 0, 0, 0, 1), (7, 0, 0, 1, 1), (7, 3, 119, 1, 1023),
                                          (2**63 + 5, 2**40, 2**33, 0, 514), (1, 1, 1, 0, 6)]:
        counter = [index // 4, step, path, draw]
        c = counter[:]
        # undo numpy's pre-increment: ask for counter - 1 (with borrow)
        for i in range(4):
            c[i] = (c[i] - 1) & M64
            if c[i] != M64:
                break
        bg = np.random.Philox(key=np.array([seed, domain], dtype=np.uint64), counter=np.array(c, dtype=np.uint64))
        word = int(bg.random_raw(4)[index % 4])
        e = np.float32(-math.log(((word >> 12) + 0.5) * 2.0**-52))
        stream.append({"seed": str(seed), "path": str(path), "step": str(step), "draw": draw, "index": index,
                       "e": hex32(e)})
    return {"raw": raw, "stream": stream, "domain": str(domain)}


def main():
    dump("stats.json", stats_cases())
    dump("amount.json", amount_cases())
    dump("paths.json", paths_cases())
    dump("stamps.json", stamp_cases())
    dump("sampler.json", sampler_cases())
    dump("philox.json", philox_cases())


if __name__ == "__main__":
    main()
