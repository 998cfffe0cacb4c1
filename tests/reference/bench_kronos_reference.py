#!/usr/bin/env python3
"""Times upstream Kronos (kronos-finance 0.1.5) eval-mode inference on CPU, and a KV-cached plain-torch loop over the
same upstream modules in the same run: the baselines `totoc bench` compares Kronos engines with.

    bench_kronos_reference.py --predictor DIR --tokenizer DIR [--mini-predictor DIR --mini-tokenizer DIR]
                              [--runs 3] [--threads 2] [--cases a,b]

Checkpoints: `make_kronos_checkpoints.py --config small` (Kronos-small + Tokenizer-base shapes) for --predictor /
--tokenizer, `--config mini` (Kronos-mini + Tokenizer-2k) for the mini row. Loaded strictly, `.eval()`, float32,
CPU, `torch.set_num_threads(--threads)`, the CPU's own kernels (nothing pinned). Inputs: seeded synthetic 15-minute
OHLCV bars with amount (kronos_inputs.bars), so every stamp feature varies.

Cases (`KronosPredictor(max_context).predict` / `predict_batch`, verbose False, torch.manual_seed(0) before each):
* greedy_392_120: 392 + 120, one series, top_k 1;
* s1_392_120: 392 + 120, one series, sample_count 1 (T 1, top_p 0.9: predict's defaults);
* s8_392_120: the same with sample_count 8;
* batch8_392_120: predict_batch of 8 series x (392 + 120), sample_count 1;
* s1_400_120: 400 + 120: the window slides at steps 113-119 (7 full-window steps);
* mini_2000_48: 2,000 + 48 on the mini checkpoint, max_context 2048 (needs --mini-*), sample_count 1.
max_context is 512 except for the mini row.

The cached loop (`cached_inference`, swapped in for `auto_regressive_inference` under the same `predict` call, so
the host work is upstream's in both): encode all N rows; a prefill over the window (upstream's own blocks, causal
SDPA) keeping each layer's K (after RoPE) and V and the dependency layer's K/V of the final-normed states; then one
token per step at its absolute position (RoPE of that position from the loaded inv_freq, unmasked SDPA over the
written cache slots); once the window slides (N + i > max_context) a full recompute at positions 0..W-1 every step;
s2 from the unscaled emb_s1[s1] query over the dependency cache, no RoPE (one query: upstream's rotation is the
identity), no mask (eval); the final decode as upstream. Its tokens (the final decode window) must equal upstream's
on the greedy case (exit 1 otherwise); every case reports whether they do and the largest forecast difference.

stdout is exactly one JSON object (everything else goes to stderr):
    {"predictor", "tokenizer", "mini_predictor", "mini_tokenizer", "threads", "runs",
     "versions": {"python", "torch", "kronos-finance"},
     "cases": {NAME: {"context", "horizon", "series", "sample_count", "max_context", "slid_steps",
                      "upstream": {"median_ms", "min_ms", "runs_ms"}, "cached": {...},
                      "speedup": upstream median / cached median,
                      "ms_per_candle_per_path": {"upstream", "cached"},
                      "tokens_identical": bool, "max_abs_forecast_diff": float}
               or {"skipped": why}},
     "peak_rss_mb", "rss_after_load_mb", "peak_rss_cases_mb", "ok": bool}
"""

import argparse
import contextlib
import gc
import json
import os
import platform
import resource
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kronos_inputs  # noqa: E402

# name -> (context, horizon, series, sample_count, max_context, greedy, mini)
CASES = {
    "greedy_392_120": (392, 120, 1, 1, 512, True, False),
    "s1_392_120": (392, 120, 1, 1, 512, False, False),
    "s8_392_120": (392, 120, 1, 8, 512, False, False),
    "batch8_392_120": (392, 120, 8, 1, 512, False, False),
    "s1_400_120": (400, 120, 1, 1, 512, False, False),
    "mini_2000_48": (2000, 48, 1, 1, 2048, False, True),
}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- the cached loop


def _rope_at(rotary, q, k, pos):
    """upstream's RotaryPositionalEmbedding applied at absolute position `pos` (one query and key)."""
    import torch

    t = torch.tensor([pos], dtype=rotary.inv_freq.dtype)
    freqs = torch.einsum("i,j->ij", t, rotary.inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[None, None], emb.sin()[None, None]
    return q * cos + rotary._rotate_half(q) * sin, k * cos + rotary._rotate_half(k) * sin


def _heads(x, n):
    b, s, d = x.shape
    return x.view(b, s, n, d // n).transpose(1, 2)


def _merge(x):
    b, n, s, hd = x.shape
    return x.transpose(1, 2).contiguous().view(b, s, n * hd)


class Cache:
    """Per layer K (after RoPE) and V, and the dependency layer's K/V, for `rows` rows and `slots` positions."""

    def __init__(self, model, rows, slots):
        import torch

        d, nh = model.d_model, model.n_heads
        self.kv = [
            (torch.empty(rows, nh, slots, d // nh), torch.empty(rows, nh, slots, d // nh)) for _ in model.transformer
        ]
        self.dep = (torch.empty(rows, 4, slots, d // 4), torch.empty(rows, 4, slots, d // 4))
        self.len = 0


def _dep_kv(model, cache, hidden, at):
    ca = model.dep_layer.cross_attn
    n = hidden.shape[1]
    cache.dep[0][:, :, at : at + n] = _heads(ca.k_proj(hidden), 4)
    cache.dep[1][:, :, at : at + n] = _heads(ca.v_proj(hidden), 4)


def prefill(model, s1, s2, stamp, cache):
    """The window's tokens at positions 0..W-1 through upstream's blocks, filling the cache; returns h_last
    [rows, d] (final-normed)."""
    import torch.nn.functional as F

    x = model.embedding([s1, s2]) + model.time_emb(stamp)
    w = x.shape[1]
    for layer, (kc, vc) in zip(model.transformer, cache.kv):
        a = layer.self_attn
        h = layer.norm1(x)
        q, k, v = _heads(a.q_proj(h), a.n_heads), _heads(a.k_proj(h), a.n_heads), _heads(a.v_proj(h), a.n_heads)
        q, k = a.rotary(q, k)
        kc[:, :, :w], vc[:, :, :w] = k, v
        x = x + a.out_proj(_merge(F.scaled_dot_product_attention(q, k, v, is_causal=True)))
        x = x + layer.ffn(layer.norm2(x))
    x = model.norm(x)
    _dep_kv(model, cache, x, 0)
    cache.len = w
    return x[:, -1]


def step(model, s1, s2, stamp, cache):
    """One token per row at position cache.len; appends to the cache; returns h_last [rows, d]."""
    import torch.nn.functional as F

    p = cache.len
    x = model.embedding([s1, s2]) + model.time_emb(stamp)
    for layer, (kc, vc) in zip(model.transformer, cache.kv):
        a = layer.self_attn
        h = layer.norm1(x)
        q, k, v = _heads(a.q_proj(h), a.n_heads), _heads(a.k_proj(h), a.n_heads), _heads(a.v_proj(h), a.n_heads)
        q, k = _rope_at(a.rotary, q, k, p)
        kc[:, :, p : p + 1], vc[:, :, p : p + 1] = k, v
        # the query is the newest position: it sees every written slot, no mask
        x = x + a.out_proj(_merge(F.scaled_dot_product_attention(q, kc[:, :, : p + 1], vc[:, :, : p + 1])))
        x = x + layer.ffn(layer.norm2(x))
    x = model.norm(x)
    _dep_kv(model, cache, x, p)
    cache.len = p + 1
    return x[:, -1]


def s2_logits(model, h_last, s1, cache):
    """decode_s2 for the last row only: the dependency layer's 4 heads, query emb_s1[s1] unscaled, keys and values
    the cached final-normed states, no RoPE, no mask."""
    import torch.nn.functional as F

    ca = model.dep_layer.cross_attn
    q = _heads(ca.q_proj(model.embedding.emb_s1(s1)), 4)
    w = cache.len
    attn = ca.out_proj(_merge(F.scaled_dot_product_attention(q, cache.dep[0][:, :, :w], cache.dep[1][:, :, :w])))
    return model.head.proj_s2(model.dep_layer.norm(h_last[:, None] + attn))[:, -1]


def cached_inference(tokenizer, model, x, x_stamp, y_stamp, max_context, pred_len, clip=5, T=1.0, top_k=0,
                     top_p=0.99, sample_count=5, verbose=False):
    """`auto_regressive_inference`'s signature and result, with an exact KV cache (module docs)."""
    import numpy as np
    import torch

    from kronos_finance._vendor.kronos_model.kronos import sample_from_logits

    with torch.no_grad():
        x = torch.clip(x, -clip, clip)
        x = x.unsqueeze(1).repeat(1, sample_count, 1, 1).reshape(-1, x.size(1), x.size(2))
        x_stamp = x_stamp.unsqueeze(1).repeat(1, sample_count, 1, 1).reshape(-1, x_stamp.size(1), x_stamp.size(2))
        y_stamp = y_stamp.unsqueeze(1).repeat(1, sample_count, 1, 1).reshape(-1, y_stamp.size(1), y_stamp.size(2))
        s1, s2 = tokenizer.encode(x, half=True)
        n, rows = x.size(1), x.size(0)
        stamps = torch.cat([x_stamp, y_stamp], dim=1)
        gen1 = s1.new_empty(rows, pred_len)
        gen2 = s2.new_empty(rows, pred_len)
        cache = Cache(model, rows, max_context)
        all1, all2 = torch.cat([s1, gen1], dim=1), torch.cat([s2, gen2], dim=1)
        for i in range(pred_len):
            length = n + i
            if i == 0 or length > max_context:
                lo = max(0, length - max_context)
                h = prefill(model, all1[:, lo:length], all2[:, lo:length], stamps[:, lo:length], cache)
            else:
                j = length - 1
                h = step(model, all1[:, j : j + 1], all2[:, j : j + 1], stamps[:, j : j + 1], cache)
            pre = sample_from_logits(model.head.proj_s1(h), temperature=T, top_k=top_k, top_p=top_p)
            post = sample_from_logits(s2_logits(model, h, pre, cache), temperature=T, top_k=top_k, top_p=top_p)
            all1[:, length], all2[:, length] = pre[:, 0], post[:, 0]
        total = n + pred_len
        lo = max(0, total - max_context)
        z = tokenizer.decode([all1[:, lo:total].contiguous(), all2[:, lo:total].contiguous()], half=True)
        z = z.reshape(-1, sample_count, z.size(1), z.size(2))
        return np.mean(z.cpu().numpy(), axis=1)


# ----------------------------------------------------------------------------- running


def proc_status_mb(field):
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return round(int(line.split()[1]) / 1024.0, 1)
    except OSError:
        pass
    return None


def reset_peak_rss():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def inputs(series, n, h):
    """`series` (DataFrame, x_timestamp, y_timestamp) of n + h synthetic 15-minute bars."""
    import pandas as pd

    out = []
    for b in range(series):
        stamps, cols = kronos_inputs.bars(9000 + b, n + h)
        df = pd.DataFrame({k: v[:n] for k, v in cols.items()})
        out.append((df, pd.Series(pd.to_datetime(stamps[:n])), pd.Series(pd.to_datetime(stamps[n:]))))
    return out


@contextlib.contextmanager
def capture_decode(tokenizer, into):
    """Records the tokens the final decode gets (upstream's and the cached loop's), nothing else."""
    def decode(x, half=False):
        into.append([t.clone() for t in x])
        return type(tokenizer).decode(tokenizer, x, half=half)

    tokenizer.decode = decode
    try:
        yield
    finally:
        del tokenizer.decode


@contextlib.contextmanager
def swapped(fn):
    """`auto_regressive_inference` replaced by fn for the duration (None: upstream's)."""
    import kronos_finance._vendor.kronos_model.kronos as kmod

    orig = kmod.auto_regressive_inference
    if fn is not None:
        kmod.auto_regressive_inference = fn
    try:
        yield
    finally:
        kmod.auto_regressive_inference = orig


def run_case(pair, name, runs):
    import numpy as np
    import torch

    from kronos_finance._vendor.kronos_model import KronosPredictor

    n, h, series, s, max_context, greedy, _ = CASES[name]
    model, tokenizer = pair
    pred = KronosPredictor(model, tokenizer, device="cpu", max_context=max_context)
    data = inputs(series, n, h)
    kw = dict(pred_len=h, T=1.0, top_k=1 if greedy else 0, top_p=0.9, sample_count=s, verbose=False)

    def once(fn, tokens):
        torch.manual_seed(0)
        with swapped(fn), capture_decode(tokenizer, tokens):
            t0 = time.perf_counter()
            if series == 1:
                df, x_ts, y_ts = data[0]
                out = [pred.predict(df, x_ts, y_ts, **kw)]
            else:
                out = pred.predict_batch([d[0] for d in data], [d[1] for d in data], [d[2] for d in data], **kw)
            ms = (time.perf_counter() - t0) * 1e3
        return ms, np.stack([o.to_numpy() for o in out])

    result = {"context": n, "horizon": h, "series": series, "sample_count": s, "max_context": max_context,
              "slid_steps": sum(1 for i in range(h) if n + i > max_context), "greedy": greedy}
    outs, toks = {}, {}
    for label, fn in (("upstream", None), ("cached", cached_inference)):
        times = []
        for r in range(runs):
            toks[label] = []
            ms, outs[label] = once(fn, toks[label])
            times.append(ms)
            log(f"{name} {label} run {r + 1}: {ms:.0f} ms")
        result[label] = {"median_ms": round(statistics.median(times), 3), "min_ms": round(min(times), 3),
                         "runs_ms": [round(t, 3) for t in times]}
    same = all(torch.equal(a, b) for a, b in zip(toks["upstream"][-1], toks["cached"][-1]))
    result["tokens_identical"] = bool(same)
    result["max_abs_forecast_diff"] = float(np.abs(outs["upstream"] - outs["cached"]).max())
    result["speedup"] = round(result["upstream"]["median_ms"] / result["cached"]["median_ms"], 3)
    candles = h * s * series
    result["ms_per_candle_per_path"] = {k: round(result[k]["median_ms"] / candles, 3) for k in ("upstream", "cached")}
    return result


def bench(a, names):
    from importlib.metadata import version

    import torch

    import run_kronos_reference as runner

    torch.set_num_threads(a.threads)
    pairs = {False: runner.load(a.predictor, a.tokenizer)}
    if a.mini_predictor and a.mini_tokenizer:
        pairs[True] = runner.load(a.mini_predictor, a.mini_tokenizer)
    gc.collect()
    rss_loaded = proc_status_mb("VmRSS")
    hwm_reset = reset_peak_rss()
    log("warm-up: one short predict")
    from kronos_finance._vendor.kronos_model import KronosPredictor

    df, x_ts, y_ts = inputs(1, 64, 8)[0]
    KronosPredictor(*pairs[False], device="cpu").predict(df, x_ts, y_ts, pred_len=8, verbose=False)
    cases, ok = {}, True
    for name in names:
        if CASES[name][6] and True not in pairs:
            cases[name] = {"skipped": "needs --mini-predictor and --mini-tokenizer (make_kronos_checkpoints.py "
                           "--config mini)"}
            continue
        cases[name] = run_case(pairs[CASES[name][6]], name, a.runs)
        if CASES[name][5] and not cases[name]["tokens_identical"]:
            ok = False
            log(f"{name}: the cached loop's greedy tokens differ from upstream's")
    return {
        "predictor": os.path.abspath(a.predictor),
        "tokenizer": os.path.abspath(a.tokenizer),
        "mini_predictor": a.mini_predictor and os.path.abspath(a.mini_predictor),
        "mini_tokenizer": a.mini_tokenizer and os.path.abspath(a.mini_tokenizer),
        "threads": a.threads,
        "runs": a.runs,
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "kronos-finance": version("kronos-finance")},
        "cases": cases,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
        "rss_after_load_mb": rss_loaded,
        "peak_rss_cases_mb": proc_status_mb("VmHWM") if hwm_reset else None,
        "ok": ok,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--predictor", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--mini-predictor")
    ap.add_argument("--mini-tokenizer")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma list of {', '.join(CASES)}")
    a = ap.parse_args(argv)
    names = [c for c in a.cases.split(",") if c]
    for c in names:
        if c not in CASES:
            ap.error(f"unknown case {c!r}")
    if a.runs < 1:
        ap.error("--runs must be >= 1")
    real_stdout = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):  # keep stdout for the JSON only
        result = bench(a, names)
    real_stdout.write(json.dumps(result, sort_keys=True) + "\n")
    real_stdout.flush()
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
