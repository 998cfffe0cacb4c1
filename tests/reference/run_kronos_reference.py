#!/usr/bin/env python3
"""Runs upstream Kronos (kronos-finance 0.1.5, `kronos_finance._vendor.kronos_model`) on Kronos requests and records
what totoc's engine is checked against, without changing what upstream computes.

Loading (`load`): modules built from each directory's config.json, the safetensors state dict loaded with
`strict=True` (upstream's `from_pretrained` is not strict), `.eval()` (upstream's `KronosPredictor` never calls it:
training mode samples with live dropout and a causal dependency layer; totoc reproduces eval mode), then every
tensor compared with the file.

The call is upstream's own `KronosPredictor(model, tokenizer, device="cpu", max_context, clip).predict(...)` (or
`predict_batch`), `verbose=False`, after `torch.manual_seed(request seed)`. A request (the Kronos request JSON of
tests/reference/README.md, "Kronos") maps to it as:
* `target` rows named by `columns` become DataFrame columns (f64, as parsed from the JSON); upstream derives a
  missing volume / amount itself;
* `timestamps` / `future_timestamps` become `x_timestamp` / `y_timestamp` Series of their wall clock as written (a
  `Z` or `+HH:MM` suffix and fractional seconds are dropped before pandas sees them: Kronos reads minute, hour,
  weekday, day and month as written);
* `samples: 0` is one greedy path: T 1, top_k 1, sample_count 1; `samples: N` is sample_count N with the request's
  `temperature` (default 1), `top_k` (default 0) and `top_p` (default 0.9);
* `params.max_context` (default 512) and `params.clip` (default 5) are the predictor's arguments.

Recording (`Recorder`), by wrapping, never replacing, what upstream calls: the normalised context passed to
`auto_regressive_inference`; `tokenizer.encode`'s tokens and its `quant_embed` output z (the pre-sign value of each
bit); every `sample_from_logits` call's logits (s1 then s2 each step, every row) and choice; every
`torch.multinomial` call's noise: on CPU, multinomial(p, 1) is argmax(p / E) with E ~ Exp(1) drawn by
`exponential_` over the whole [rows, V] tensor from the global generator. The wrapper saves the generator state,
lets multinomial draw, replays the draw from the saved state into a private generator and checks that the replay
consumed exactly what multinomial consumed and that argmax(p / E) is multinomial's choice, row by row; E is then
recorded as drawn (f32). `tokenizer.decode`'s per-path rows, the mean `auto_regressive_inference` returns and
`predict`'s de-normalised frame are recorded too, and every derived number is checked bitwise against upstream's:
the normalisation statistics reproduce the context upstream was fed and the frame it returned.

Usage: run_kronos_reference.py --predictor DIR --tokenizer DIR --request REQ.json [--request ...]
       [--call predict|predict_batch|ragged] [--out OUT.json] [--arrays OUT.safetensors]
"""

import argparse
import json
import os
import re
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
COLUMNS = ("open", "high", "low", "close", "volume", "amount")
DEFAULT_COLUMNS = COLUMNS
KRONOS = "kronos_finance._vendor.kronos_model"
STAMP = re.compile(r"^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})?$")


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def f32(x):
    """A float's f32 value as a Python float (shortest repr reads back to the same f32)."""
    return float(np.float32(x))


def f32_list(a):
    return np.asarray(a, dtype=np.float32).tolist()


# ----------------------------------------------------------------------------- loading


def load(predictor_dir, tokenizer_dir):
    """(Kronos, KronosTokenizer) built from config.json, loaded strictly, in eval mode, checked tensor by tensor."""
    import torch
    from safetensors.torch import load_file

    from kronos_finance._vendor.kronos_model import Kronos, KronosTokenizer

    out = []
    for d, cls in ((predictor_dir, Kronos), (tokenizer_dir, KronosTokenizer)):
        with open(os.path.join(d, "config.json")) as f:
            module = cls(**json.load(f))
        on_disk = load_file(os.path.join(d, "model.safetensors"))
        module.load_state_dict(on_disk, strict=True)
        module.eval()
        state = module.state_dict()
        assert set(state) == set(on_disk), f"{d}: stored tensors != the module's ({set(state) ^ set(on_disk)})"
        for k, v in on_disk.items():
            assert torch.equal(state[k], v), f"{d}: tensor {k} was not loaded"
        assert not any(m.training for m in module.modules()), f"{d}: a module is still in training mode"
        out.append(module)
    p, t = out
    assert p.s1_bits == p.s2_bits == t.s1_bits == t.s2_bits, "s1/s2 bits differ between or within the checkpoints"
    return p, t


# ----------------------------------------------------------------------------- requests


def wall_clock(stamp):
    """A request stamp's wall clock as written (pandas Timestamp, naive)."""
    import pandas as pd

    m = STAMP.match(stamp)
    if not m:
        raise ValueError(f"timestamp {stamp!r} is not YYYY-MM-DDTHH:MM:SS[.fff][Z|+HH:MM]")
    return pd.Timestamp(f"{m.group(1)}T{m.group(2)}{m.group(3) or ''}")


def sampling(req):
    """(T, top_k, top_p, sample_count) of upstream's call for a request (module docs)."""
    n = int(req.get("samples", 0))
    if n == 0:
        assert not any(k in req for k in ("temperature", "top_k", "top_p")), "sampling controls need samples > 0"
        return 1.0, 1, 0.9, 1
    return float(req.get("temperature", 1.0)), int(req.get("top_k", 0)), float(req.get("top_p", 0.9)), n


def window_params(req):
    p = req.get("params", {})
    return int(p.get("max_context", 512)), float(p.get("clip", 5.0))


def frame(req):
    """(df, x_timestamp, y_timestamp) upstream's predict takes for a request."""
    import pandas as pd

    cols = req.get("columns", list(DEFAULT_COLUMNS))
    target = req["target"]
    assert len(cols) == len(target), "columns and target rows differ in number"
    n = len(req["timestamps"])
    assert all(len(r) == n for r in target), "every target row needs one value per timestamp"
    assert len(req["future_timestamps"]) == req["horizon"], "future_timestamps must have horizon stamps"
    df = pd.DataFrame({c: np.asarray(r, dtype=np.float64) for c, r in zip(cols, target)})
    x_ts = pd.Series([wall_clock(s) for s in req["timestamps"]])
    y_ts = pd.Series([wall_clock(s) for s in req["future_timestamps"]])
    return df, x_ts, y_ts


def fed_rows(df):
    """The [N, 6] f32 rows predict normalises, derived as upstream derives them (kronos.py:525-538), and what was
    derived."""
    df = df.copy()
    derived = {"volume": "given", "amount": "given"}
    if "volume" not in df.columns:
        df["volume"] = 0.0
        df["amount"] = 0.0
        derived = {"volume": "zero", "amount": "zero"}
    if "amount" not in df.columns:
        df["amount"] = df["volume"] * df[list(COLUMNS[:4])].mean(axis=1)
        derived["amount"] = "volume x mean(open, high, low, close)"
    return df[list(COLUMNS)].values.astype(np.float32), derived


def stamp_features(x_ts, y_ts):
    """[N + H, 5] int32: minute, hour, weekday (Mon = 0), day, month of every context and future stamp."""
    import pandas as pd

    ts = pd.concat([x_ts, y_ts], ignore_index=True)
    return np.stack([ts.dt.minute, ts.dt.hour, ts.dt.weekday, ts.dt.day, ts.dt.month], axis=1).astype(np.int32)


def statistics(x):
    """predict's normalisation statistics (kronos.py:542): f32 mean and std (ddof 0) per column over all N rows."""
    return np.mean(x, axis=0), np.std(x, axis=0)


# ----------------------------------------------------------------------------- recording


class Recorder:
    """Wraps what upstream calls (module docs) for the duration of a `with`; `calls` holds one record per
    `auto_regressive_inference` call."""

    def __init__(self, model, tokenizer):
        self.model, self.tokenizer = model, tokenizer
        self.calls = []

    def __enter__(self):
        import torch

        kmod = sys.modules[KRONOS + ".kronos"]
        self._saved = (kmod.auto_regressive_inference, kmod.sample_from_logits, torch.multinomial)
        orig_ar, orig_sample, orig_mn = self._saved
        cur = {}

        def ar(tokenizer, model, x, x_stamp, y_stamp, max_context, pred_len, clip, T, top_k, top_p, sample_count,
               verbose):
            rec = {"x": x.clone(), "x_stamp": x_stamp.clone(), "y_stamp": y_stamp.clone(), "draws": [],
                   "windows": [], "args": (max_context, pred_len, clip, T, top_k, top_p, sample_count)}
            self.calls.append(rec)
            cur["rec"] = rec
            out = orig_ar(tokenizer, model, x, x_stamp, y_stamp, max_context, pred_len, clip, T, top_k, top_p,
                          sample_count, verbose)
            rec["preds"] = np.array(out, copy=True)
            return out

        def sample(logits, temperature=1.0, top_k=None, top_p=None, sample_logits=True):
            draw = {"logits": logits.detach().clone(), "noise": None}
            cur["rec"]["draws"].append(draw)
            cur["draw"] = draw
            choice = orig_sample(logits, temperature=temperature, top_k=top_k, top_p=top_p,
                                 sample_logits=sample_logits)
            draw["choice"] = choice.detach().clone()
            return choice

        def multinomial(probs, num_samples, replacement=False, **kw):
            assert num_samples == 1 and not replacement and not kw, "upstream draws one sample per row"
            state = torch.get_rng_state()
            choice = orig_mn(probs, num_samples)
            replay = torch.Generator()
            replay.set_state(state)
            noise = torch.empty_like(probs).exponential_(1, generator=replay)
            assert torch.equal(replay.get_state(), torch.get_rng_state()), "multinomial drew other than one Exp(1) per entry"
            assert torch.equal(torch.argmax(probs / noise, dim=-1, keepdim=True), choice), "argmax(p/E) != multinomial"
            cur["draw"]["noise"] = noise
            return choice

        def encode(x, half=False):
            tokens = type(self.tokenizer).encode(self.tokenizer, x, half=half)
            cur["rec"]["encode"] = [t.clone() for t in tokens]
            return tokens

        def decode(x, half=False):
            rows = type(self.tokenizer).decode(self.tokenizer, x, half=half)
            cur["rec"]["decode_in"] = [t.clone() for t in x]
            cur["rec"]["decode_out"] = rows.detach().clone()
            return rows

        def decode_s1(s1_ids, s2_ids, stamp=None, padding_mask=None):
            assert padding_mask is None
            cur["rec"]["windows"].append(int(s1_ids.shape[1]))
            return type(self.model).decode_s1(self.model, s1_ids, s2_ids, stamp, padding_mask)

        def quant_hook(module, inputs, output):
            cur["rec"]["z"] = output.detach().clone()

        kmod.auto_regressive_inference = ar
        kmod.sample_from_logits = sample
        torch.multinomial = multinomial
        self.tokenizer.encode, self.tokenizer.decode, self.model.decode_s1 = encode, decode, decode_s1
        self._hook = self.tokenizer.quant_embed.register_forward_hook(quant_hook)
        return self

    def __exit__(self, *exc):
        import torch

        kmod = sys.modules[KRONOS + ".kronos"]
        kmod.auto_regressive_inference, kmod.sample_from_logits, torch.multinomial = self._saved
        del self.tokenizer.encode, self.tokenizer.decode, self.model.decode_s1
        self._hook.remove()
        return False


# ----------------------------------------------------------------------------- margins


def decision_margin(logits, temperature, top_k, top_p, choice, noise):
    """How robust one draw's choice is to a drift of the logits, as r = X·T / (2(1 + max|logit|)): a drift of m·(1 +
    |logit|) in every logit (the live check's measure) cannot change the choice while m < r. X is the smallest of
    (in units of logits/T, or probability for top-p's cut): the gap between the chosen score logit/T − log E and the
    best other kept one; the chosen token's distance from being filtered out; the distance from being let in of
    every filtered token that would otherwise win. Greedy (top_k = 1): r = (top-1 − top-2 logit)/(2(1 + max|l|))."""
    import torch

    from kronos_finance._vendor.kronos_model.kronos import top_k_top_p_filtering

    lt = logits / temperature  # f32, as upstream
    filtered = lt.clone()[None]
    if top_k > 0 or top_p < 1.0:  # as sample_from_logits: the filter returns None when it has nothing to do
        filtered = top_k_top_p_filtering(filtered, top_k=top_k, top_p=top_p)
    kept = torch.isfinite(filtered[0]).numpy()
    lt64 = lt.double().numpy()
    e64 = noise.double().numpy() if noise is not None else np.ones_like(lt64)
    score = lt64 - np.log(e64)
    assert kept[choice], "the choice was filtered out"
    gaps = []
    others = np.flatnonzero(kept & (np.arange(len(lt64)) != choice))
    if len(others) and noise is not None:
        gaps.append(score[choice] - score[others].max())
    rivals = np.flatnonzero(~kept & (score > score[choice])) if noise is not None else np.flatnonzero(~kept)
    order = np.sort(lt64)[::-1]
    if top_k > 0:
        if top_k < len(lt64):
            gaps.append(lt64[choice] - order[top_k])  # the (k+1)-th would overtake the choice
        if len(rivals):
            gaps.append(order[top_k - 1] - lt64[rivals].max())
    elif top_p < 1.0:
        sorted_lt, idx = torch.sort(lt, descending=True)
        cum = torch.cumsum(torch.softmax(sorted_lt, dim=-1), dim=-1).double().numpy()
        pos = np.empty(len(lt64), dtype=np.int64)
        pos[idx.numpy()] = np.arange(len(lt64))
        if pos[choice] > 0:
            gaps.append(float(np.float32(top_p)) - cum[pos[choice] - 1])
        for j in rivals:
            gaps.append(cum[pos[j] - 1] - float(np.float32(top_p)))
    gap = min(gaps) if gaps else float("inf")
    return gap * temperature / (2.0 * (1.0 + float(np.abs(logits.double().numpy()).max())))


def z_margin(z):
    """min |z| / (unit + |z|) over every row and bit, unit = the RMS of z: a drift of m·(unit + |z|) (the live
    check's measure) flips no bit while m is below it."""
    z = np.asarray(z, dtype=np.float64)
    unit = float(np.sqrt(np.mean(z * z)))
    return float(np.min(np.abs(z) / (unit + np.abs(z)))), unit


# The drift the margins are held against (m = |a - b| / (unit + |b|), live_check.py): the worst kernel_drift.py
# measured over the kernel settings and two qemu-emulated CPUs (tests/reference/kernel_drift_kronos.json: z 1.19e-6
# under cbwr-only, logits 5.6e-7 under aten-default and native), rounded up to one digit. A golden case keeps every z
# and decision at MARGIN_FACTOR x these (regen_kronos_fixtures.py, make_kronos_golden.py); a backtest window below
# it is a flagged near-tie (backtest_kronos_reference.py).
MARGIN_FACTOR = 100
DRIFT = {"z": 2e-6, "logits": 6e-7}


class MarginProbe:
    """Keeps, for the duration of a `with`, what the margins of one greedy predict call need and nothing more: each
    `sample_from_logits` call's logits and choice, and the encoded context's z (`quant_embed`'s output; upstream
    encodes once per call). Wraps, never replaces: the forecast is upstream's own, bit for bit. Lighter than the
    Recorder (no multinomial replay), so a timed call keeps its time; `margins` is computed after the call."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.draws, self.z = [], None

    def __enter__(self):
        kmod = sys.modules[KRONOS + ".kronos"]
        self._saved = orig = kmod.sample_from_logits

        def sample(logits, temperature=1.0, top_k=None, top_p=None, sample_logits=True):
            choice = orig(logits, temperature=temperature, top_k=top_k, top_p=top_p, sample_logits=sample_logits)
            self.draws.append((logits.detach().clone(), choice.detach().clone()))
            return choice

        def quant_hook(module, inputs, output):
            if self.z is None:
                self.z = output.detach().clone()

        kmod.sample_from_logits = sample
        self._hook = self.tokenizer.quant_embed.register_forward_hook(quant_hook)
        return self

    def __exit__(self, *exc):
        sys.modules[KRONOS + ".kronos"].sample_from_logits = self._saved
        self._hook.remove()
        return False

    def margins(self, T, top_k, top_p, window):
        """The call's smallest margins in units of DRIFT, as margin_report (regen_kronos_fixtures.py) reads them:
        `z` = min |z| / (unit + |z|) over the encoded context rows the predictor reads / DRIFT["z"]; `decision` = the
        smallest decision margin over every s1 and s2 draw and row / DRIFT["logits"] (greedy: the top-1 - top-2 logit
        gap). The rows read are the last `window` (`max_context`) of the context: step i reads tokens
        [max(0, L - window), L), L = N + i, so an earlier row's token never reaches the forecast and a bit of it
        that flips cannot change one (upstream still encodes every row, for the normalisation's sake)."""
        assert self.z is not None and self.draws, "the probe saw no encode or no draw"
        decision = min(
            decision_margin(logits[r], T, top_k, top_p, int(choice[r, 0]), None)
            for logits, choice in self.draws
            for r in range(logits.shape[0])
        )
        read = self.z[:, -window:, :] if window > 0 else self.z
        return {"z": z_margin(read.numpy())[0] / DRIFT["z"], "decision": decision / DRIFT["logits"]}


# ----------------------------------------------------------------------------- running


def predictor_for(model, tokenizer, req):
    from kronos_finance._vendor.kronos_model import KronosPredictor

    max_context, clip = window_params(req)
    return KronosPredictor(model, tokenizer, device="cpu", max_context=max_context, clip=clip)


def run_call(model, tokenizer, call, requests):
    """Runs upstream once (predict / predict_batch) or once per request (ragged) under a Recorder; returns
    [(record, frame values) per call]."""
    import torch

    out = []
    groups = [requests] if call == "predict_batch" else [[r] for r in requests]
    assert call in ("predict", "predict_batch", "ragged") and (call != "predict" or len(requests) == 1)
    for group in groups:
        first = group[0]
        T, top_k, top_p, s = sampling(first)
        for r in group[1:]:
            assert (sampling(r), window_params(r), r["horizon"], r["seed"]) == (
                (T, top_k, top_p, s), window_params(first), first["horizon"], first["seed"]
            ), "predict_batch takes one horizon, seed, window and sampling setting"
        pred = predictor_for(model, tokenizer, first)
        frames = [frame(r) for r in group]
        with Recorder(model, tokenizer) as rec:
            torch.manual_seed(int(first["seed"]))
            if call == "predict_batch":
                dfs = pred.predict_batch([f[0] for f in frames], [f[1] for f in frames], [f[2] for f in frames],
                                         pred_len=first["horizon"], T=T, top_k=top_k, top_p=top_p, sample_count=s,
                                         verbose=False)
            else:
                df, x_ts, y_ts = frames[0]
                dfs = [pred.predict(df, x_ts, y_ts, pred_len=first["horizon"], T=T, top_k=top_k, top_p=top_p,
                                    sample_count=s, verbose=False)]
        assert len(rec.calls) == 1, "one auto_regressive_inference per predict call"
        out.append((rec.calls[0], [d.to_numpy() for d in dfs], group, frames))
    return out


def series_reference(req, fr, rec, b, out_values):
    """(reference JSON, arrays, margins) of series b of one recorded call."""
    max_context, pred_len, clip, T, top_k, top_p, s = rec["args"]
    rows = slice(b * s, (b + 1) * s)
    x, derived = fed_rows(fr[0])
    mean, std = statistics(x)
    x_norm = np.clip((x - mean) / (std + 1e-5), -clip, clip)
    assert np.array_equal(rec["x"][b].numpy(), x_norm), "the statistics do not reproduce upstream's context"
    n, h = x.shape[0], pred_len
    # encode: every sample row of the series holds the same tokens and z (upstream encodes each copy)
    enc = [t[rows].numpy() for t in rec["encode"]]
    z = rec["z"][rows].numpy()
    for t in enc + [z]:
        assert all(np.array_equal(t[0], t[i]) for i in range(s)), "the sample copies encode differently"
    draws = rec["draws"]
    assert len(draws) == 2 * h, f"{len(draws)} draws for horizon {h}"
    # the five stamp features of every row, as upstream fed them (minute, hour, weekday, day, month)
    stamps = np.concatenate([rec["x_stamp"][b * s].numpy(), rec["y_stamp"][b * s].numpy()]).astype(np.int32)
    assert np.array_equal(stamps, stamp_features(fr[1], fr[2])), "stamp features"
    arrays = {"x": x, "x_norm": x_norm.astype(np.float32), "z": np.ascontiguousarray(z[0]), "stamps": stamps}
    sampled = int(req.get("samples", 0)) > 0
    tokens, margins = {}, {}
    for k, name in enumerate(("s1", "s2")):
        ds = draws[k::2]
        arrays[f"{name}_logits"] = np.stack([d["logits"][rows].numpy() for d in ds])  # [H, S, V]
        if sampled:
            arrays[f"{name}_noise"] = np.stack([d["noise"][rows].numpy() for d in ds])
        tokens[name] = np.stack([d["choice"][rows, 0].numpy() for d in ds], axis=1).tolist()  # [S][H]
        margins[name] = min(
            decision_margin(d["logits"][r], T, top_k, top_p, int(d["choice"][r, 0]), d["noise"][r] if sampled else None)
            for d in ds
            for r in range(rows.start, rows.stop)
        )
    margins["z"], z_unit = z_margin(arrays["z"])
    # the generated tokens are the tokens upstream decoded at the end (its last min(N + H, max_context))
    w = min(n + h, max_context)
    for k, name in enumerate(("s1", "s2")):
        full = np.concatenate([enc[k], np.asarray(tokens[name])], axis=1)
        assert np.array_equal(rec["decode_in"][k][rows].numpy(), full[:, n + h - w:]), "decode window"
    paths_norm = rec["decode_out"][rows].numpy()[:, -h:, :]
    mean_norm = rec["preds"][b, -h:, :]
    assert np.array_equal(np.mean(paths_norm, axis=0), mean_norm), "the mean is not upstream's"
    assert np.array_equal((mean_norm * (std + 1e-5) + mean).astype(np.float32), out_values), "de-normalisation"
    paths = (paths_norm * (std + 1e-5) + mean).astype(np.float32)
    windows = [min(n + i, max_context) for i in range(h)]
    assert rec["windows"] == windows, f"windows {rec['windows']} != {windows}"
    ref = {
        "stats": {"mean": f32_list(mean), "std": f32_list(std)},
        "encode": {"s1": enc[0][0].tolist(), "s2": enc[1][0].tolist()},
        "tokens": tokens,
        "paths_norm": f32_list(paths_norm),
        "paths": f32_list(paths),
        "mean_norm": f32_list(mean_norm),
        "output": f32_list(out_values),
        "meta": {
            "rows": n,
            "horizon": h,
            "sample_count": s,
            "temperature": T,
            "top_k": top_k,
            "top_p": top_p,
            "max_context": max_context,
            "clip": clip,
            "derived": derived,
            "windows": windows,
            "slid_steps": sum(1 for i in range(h) if n + i > max_context),
            "decode_window": w,
            "vocab": int(arrays["s1_logits"].shape[-1]),
            "z_unit": f32(z_unit),
        },
    }
    return ref, arrays, margins


def run(model, tokenizer, call, requests):
    """The reference of one case: ({"series": [...]}, {"series.B.NAME": array}, [margins per series])."""
    series, arrays, margins = [], {}, []
    b_all = 0
    for rec, values, group, frames in run_call(model, tokenizer, call, requests):
        for b, (req, fr) in enumerate(zip(group, frames)):
            ref, arr, mar = series_reference(req, fr, rec, b, values[b])
            series.append(ref)
            margins.append(mar)
            arrays.update({f"series.{b_all}.{k}": np.ascontiguousarray(v) for k, v in arr.items()})
            b_all += 1
    return {"series": series}, arrays, margins


def run_paths(model, tokenizer, req, count):
    """`count` sampled paths of one request from one upstream predict(sample_count=count) call (seeded with the
    request's seed): each path's decoded rows, de-normalised as predict de-normalises the mean. [count, H, 6] f32."""
    req = dict(req, samples=count)
    (rec, _, _, frames), = run_call(model, tokenizer, "predict", [req])
    x, _ = fed_rows(frames[0][0])
    mean, std = statistics(x)
    rows = rec["decode_out"].numpy()[:, -req["horizon"]:, :]
    return np.ascontiguousarray((rows * (std + 1e-5) + mean).astype(np.float32))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--predictor", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--request", action="append", required=True, help="a request JSON (repeat for several)")
    ap.add_argument("--call", default="predict", choices=["predict", "predict_batch", "ragged"])
    ap.add_argument("--out", help="reference JSON (default: stdout)")
    ap.add_argument("--arrays", help="also write the large arrays here (safetensors)")
    a = ap.parse_args(argv)
    sys.path.insert(0, HERE)
    import kernels

    kernels.pin()
    import torch

    torch.set_num_threads(1)
    model, tokenizer = load(a.predictor, a.tokenizer)
    requests = []
    for path in a.request:
        with open(path) as f:
            requests.append(json.load(f))
    ref, arrays, margins = run(model, tokenizer, a.call, requests)
    text = json.dumps({"reference": ref, "margins": margins}, sort_keys=True)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    else:
        print(text)
    if a.arrays:
        from safetensors.numpy import save_file

        save_file(arrays, a.arrays)
    return 0


if __name__ == "__main__":
    sys.exit(main())
