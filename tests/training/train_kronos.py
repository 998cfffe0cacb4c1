#!/usr/bin/env python3
"""Trains a small Kronos (tokenizer, then predictor) from scratch on the corpus of build_kronos_corpus.py, on CPU,
with upstream's own modules and losses (kronos-finance 0.1.5, `kronos_finance._vendor.kronos_model`; reference venv).

    train_kronos.py --corpus DIR --out DIR [--tok-steps N] [--pred-steps N] [--seed S] [--threads 2]

* **Windows**: WINDOW = LOOKBACK + PREDICT rows of one series' training rows (a series drawn per window: real or
  synthetic with equal chance, then a series with probability ∝ √(its window count), then a uniform start), the six
  columns open, high, low, close, volume, amount. Each window is normalised with the mean and std (ddof 0) of its
  LOOKBACK rows only, x = (x − mean)/(std + 1e-5), and clipped to ±CLIP: the future rows never inform their own
  scaling (upstream #227's leak fix; upstream's finetune/dataset.py used the whole window's statistics).
* **Tokenizer** (`KronosTokenizer`, Tokenizer-2k's shape scaled down: d_model TOK d, 10/10 bits, group_size 5):
  loss = (MSE(z_pre, x) + MSE(z, x) + bsq_loss) / 2, the forward and loss of upstream's finetune/train_tokenizer.py
  (the s1-only and the full-codebook reconstructions, and the BSQ commitment + entropy loss).
* **Predictor** (`Kronos`, mini-shaped: PRED d_model, 4 layers): the trained tokenizer (frozen, eval mode) encodes each
  window (`encode(x, half=True)`), the model runs its own training forward on tokens [0, W−1) with their stamps and
  teacher-forced s1 targets, and the loss is `model.head.compute_loss` against tokens [1, W), as upstream's
  finetune/train_predictor.py.
* Both: AdamW (betas 0.9/0.95, weight decay 0.1) with torch's OneCycleLR (pct_start 0.03, div_factor 10), gradient
  norm clipped (tokenizer 2.0, predictor 3.0): upstream's fine-tuning settings, with from-scratch learning rates.

**Held out** (the corpus' held-out rows: the last 20% of every series, IBM whole), windows inside them, normalised
from their lookback rows as above:
* the tokenizer's reconstruction MSE of the full codebook on the normalised rows (eval mode);
* the predictor's token cross-entropy (s1 + s2, nats) in **inference form** (eval mode, what
  `auto_regressive_inference` computes for the next row: s1 from the causal stack's last row, s2 from the
  dependency layer's un-rotated query emb_s1[true s1] over the window's final-normed states), over the forecast rows
  [LOOKBACK, WINDOW), against the unigram distribution of the training tokens (add-one smoothed) on the same held-out
  tokens; also the teacher-forced training forward's (dropout off) and over all rows.

Writes OUT/predictor and OUT/tokenizer (`save_pretrained`: config.json + model.safetensors, the released layout) and
OUT/training.json (hyperparameters, seeds, loss curves, held-out figures, corpus hashes, machine).
"""

import argparse
import json
import math
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402

LOOKBACK = 64
PREDICT = 32
WINDOW = LOOKBACK + PREDICT
CLIP = 5.0
BATCH = 32
TOK_BATCH = 16  # the tokenizer is per row (causal): 16 windows = 1,536 rows a step

TOKENIZER = {
    "d_in": 6, "d_model": 128, "n_heads": 4, "ff_dim": 256, "n_enc_layers": 4, "n_dec_layers": 4,
    "ffn_dropout_p": 0.0, "attn_dropout_p": 0.0, "resid_dropout_p": 0.0, "s1_bits": 10, "s2_bits": 10,
    "beta": 0.05, "gamma0": 1.0, "gamma": 1.1, "zeta": 0.05, "group_size": 5,
}
PREDICTOR = {
    "s1_bits": 10, "s2_bits": 10, "n_layers": 4, "d_model": 128, "n_heads": 4, "ff_dim": 256,
    "ffn_dropout_p": 0.1, "attn_dropout_p": 0.0, "resid_dropout_p": 0.1, "token_dropout_p": 0.0, "learn_te": True,
}
OPTIM = {
    "tokenizer": {"lr": 2e-3, "clip_grad_norm": 2.0},
    "predictor": {"lr": 2e-3, "clip_grad_norm": 3.0},
    "adamw": {"betas": [0.9, 0.95], "weight_decay": 0.1},
    "one_cycle": {"pct_start": 0.03, "div_factor": 10},
}
HELDOUT_STRIDE = 64
CURVE_POINTS = 50


def log(*a):
    print(*a, flush=True)


class Corpus:
    """The series of kronos_corpus.npz: training windows sampled at random, held-out windows on a grid."""

    def __init__(self, path, rng):
        z = np.load(path)
        off = z["offsets"]
        self.ids = [str(x) for x in z["ids"]]
        self.values = [z["values"][off[i] : off[i + 1]] for i in range(len(self.ids))]
        self.stamps = [z["stamps"][off[i] : off[i + 1]] for i in range(len(self.ids))]
        self.cuts = [int(c) for c in z["cuts"]]
        self.synthetic = [bool(s) for s in z["synthetic"]]
        self.rng = rng
        self.groups = []
        for synth in (False, True):
            ok = [i for i in range(len(self.ids)) if self.synthetic[i] == synth and self.cuts[i] >= WINDOW]
            w = np.sqrt(np.array([self.cuts[i] - WINDOW + 1.0 for i in ok]))
            self.groups.append((ok, w / w.sum()))

    def sample(self, batch):
        """(x [B, W, 6] f32 normalised, stamps [B, W, 5] f32) of random training windows."""
        xs, st = [], []
        for _ in range(batch):
            ok, p = self.groups[int(self.rng.integers(0, 2))]
            i = ok[int(self.rng.choice(len(ok), p=p))]
            s = int(self.rng.integers(0, self.cuts[i] - WINDOW + 1))
            xs.append(normalise(self.values[i][s : s + WINDOW]))
            st.append(self.stamps[i][s : s + WINDOW])
        return np.stack(xs).astype(np.float32), np.stack(st).astype(np.float32)

    def heldout(self):
        """{"stocks": (x, stamps, [(id, start)]), "synthetic": ...}: windows inside the held-out rows."""
        out = {}
        for name, synth in (("stocks", False), ("synthetic", True)):
            xs, st, where = [], [], []
            for i in range(len(self.ids)):
                if self.synthetic[i] != synth:
                    continue
                n = len(self.values[i])
                for s in range(self.cuts[i], n - WINDOW + 1, HELDOUT_STRIDE if not synth else 2 * HELDOUT_STRIDE):
                    xs.append(normalise(self.values[i][s : s + WINDOW]))
                    st.append(self.stamps[i][s : s + WINDOW])
                    where.append((self.ids[i], s))
            out[name] = (np.stack(xs).astype(np.float32), np.stack(st).astype(np.float32), where)
        return out


def normalise(rows):
    """A window normalised with its LOOKBACK rows' statistics only (no future leak), clipped to ±CLIP."""
    look = rows[:LOOKBACK].astype(np.float32)
    mean = look.mean(axis=0)
    std = look.std(axis=0)
    return np.clip((rows.astype(np.float32) - mean) / (std + 1e-5), -CLIP, CLIP)


def one_cycle(opt, steps, lr):
    import torch

    return torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, **OPTIM["one_cycle"])


def adamw(params, lr):
    import torch

    return torch.optim.AdamW(params, lr=lr, betas=tuple(OPTIM["adamw"]["betas"]),
                             weight_decay=OPTIM["adamw"]["weight_decay"])


def tokenizer_loss(tok, x):
    """Upstream's finetune/train_tokenizer.py loss: (MSE(z_pre, x) + MSE(z, x) + bsq_loss) / 2."""
    import torch.nn.functional as F

    (z_pre, z), bsq_loss, _, _ = tok(x)
    recon_pre = F.mse_loss(z_pre, x)
    recon_all = F.mse_loss(z, x)
    return (recon_pre + recon_all + bsq_loss) / 2, recon_all


def curve(values):
    """CURVE_POINTS chunk means of a per-step series."""
    v = np.asarray(values, np.float64)
    return [float(c.mean()) for c in np.array_split(v, min(CURVE_POINTS, len(v))) if len(c)]


def train_tokenizer(tok, corpus, steps):
    import torch

    cfg = OPTIM["tokenizer"]
    opt = adamw(tok.parameters(), cfg["lr"])
    sched = one_cycle(opt, steps, cfg["lr"])
    losses, recon = [], []
    tok.train()
    t0 = time.time()
    for step in range(steps):
        x, _ = corpus.sample(TOK_BATCH)
        loss, rec = tokenizer_loss(tok, torch.from_numpy(x))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(tok.parameters(), cfg["clip_grad_norm"])
        opt.step()
        sched.step()
        losses.append(float(loss))
        recon.append(float(rec))
        if step % 50 == 0 or step == steps - 1:
            log(f"tokenizer step {step}: loss {loss:.4f} recon {rec:.4f} ({time.time() - t0:.0f}s)")
    tok.eval()
    return {"loss": curve(losses), "recon_mse": curve(recon), "first_loss": losses[0],
            "final_loss_mean_last_50": float(np.mean(losses[-50:])), "seconds": time.time() - t0}


def encode(tok, x):
    import torch

    with torch.no_grad():
        s1, s2 = tok.encode(torch.from_numpy(x), half=True)
    return s1, s2


def train_predictor(model, tok, corpus, steps):
    import torch

    cfg = OPTIM["predictor"]
    opt = adamw(model.parameters(), cfg["lr"])
    sched = one_cycle(opt, steps, cfg["lr"])
    losses, l1, l2 = [], [], []
    model.train()
    t0 = time.time()
    for step in range(steps):
        x, st = corpus.sample(BATCH)
        s1, s2 = encode(tok, x)
        stamp = torch.from_numpy(st)
        logits = model(s1[:, :-1], s2[:, :-1], stamp[:, :-1], use_teacher_forcing=True, s1_targets=s1[:, 1:])
        loss, ce1, ce2 = model.head.compute_loss(logits[0], logits[1], s1[:, 1:], s2[:, 1:])
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["clip_grad_norm"])
        opt.step()
        sched.step()
        losses.append(float(loss))
        l1.append(float(ce1))
        l2.append(float(ce2))
        if step % 50 == 0 or step == steps - 1:
            log(f"predictor step {step}: loss {loss:.4f} (s1 {ce1:.3f}, s2 {ce2:.3f}) ({time.time() - t0:.0f}s)")
    model.eval()
    return {"loss": curve(losses), "ce_s1": curve(l1), "ce_s2": curve(l2), "first_loss": losses[0],
            "final_loss_mean_last_50": float(np.mean(losses[-50:])), "seconds": time.time() - t0}


def inference_logits(model, s1, s2, stamp):
    """Eval-mode s1 and s2 logits of every next row as auto_regressive_inference computes them for the window's
    last row: s1 = the s1 head of the causal stack (decode_s1); s2 = proj_s2(RMSNorm(h_t + CrossAttn(emb_s1[s1 of
    row t+1], H[0..t]))) with the query un-rotated (upstream's q_len = 1 RoPE is the identity) and, for row t, only
    the states up to t (the window ended there at inference)."""
    import torch
    import torch.nn.functional as F

    with torch.no_grad():
        s1_logits, h = model.decode_s1(s1[:, :-1], s2[:, :-1], stamp[:, :-1])
        ca = model.dep_layer.cross_attn
        b, t, d = h.shape
        q = ca.q_proj(model.embedding.emb_s1(s1[:, 1:])).view(b, t, ca.n_heads, ca.head_dim).transpose(1, 2)
        k = ca.k_proj(h).view(b, t, ca.n_heads, ca.head_dim).transpose(1, 2)
        v = ca.v_proj(h).view(b, t, ca.n_heads, ca.head_dim).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        s2_logits = model.head.cond_forward(model.dep_layer.norm(h + ca.out_proj(a)))
    return s1_logits, s2_logits


def check_inference_form(model, s1, s2, stamp):
    """The s2 logits of inference_logits equal upstream's decode_s2 on a window cut at that row (a few rows)."""
    import torch

    _, s2_logits = inference_logits(model, s1[:1], s2[:1], stamp[:1])
    for t in (0, LOOKBACK - 1, WINDOW - 2):
        with torch.no_grad():
            _, h = model.decode_s1(s1[:1, : t + 1], s2[:1, : t + 1], stamp[:1, : t + 1])
            ref = model.decode_s2(h, s1[:1, t + 1 : t + 2])[:, -1]  # upstream's [B, 1] query
        err = float((ref - s2_logits[:, t]).abs().max())
        assert err < 1e-4, f"inference-form s2 logits differ from decode_s2 at row {t} by {err}"


def cross_entropy(logits, targets):
    import torch.nn.functional as F

    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none").view(
        targets.shape)


def unigram(tok, corpus, batches, vocab):
    """Add-one smoothed unigram log-probabilities of the training tokens (s1, s2) of `batches` × BATCH windows."""
    c1, c2 = np.ones(vocab), np.ones(vocab)
    for _ in range(batches):
        x, _ = corpus.sample(BATCH)
        s1, s2 = encode(tok, x)
        c1 += np.bincount(s1.numpy().ravel(), minlength=vocab)
        c2 += np.bincount(s2.numpy().ravel(), minlength=vocab)
    return np.log(c1 / c1.sum()), np.log(c2 / c2.sum()), int(c1.sum() - vocab)


def evaluate(model, tok, heldout, uni1, uni2):
    """Held-out figures per group: tokenizer reconstruction MSE, predictor cross-entropy vs the unigram."""
    import torch
    import torch.nn.functional as F

    out = {}
    for name, (x, st, where) in heldout.items():
        xt = torch.from_numpy(x)
        stamp = torch.from_numpy(st)
        with torch.no_grad():
            (z_pre, z), _, _, _ = tok(xt)
        s1, s2 = encode(tok, x)
        l1, l2 = inference_logits(model, s1, s2, stamp)
        ce1, ce2 = cross_entropy(l1, s1[:, 1:]), cross_entropy(l2, s2[:, 1:])
        # the teacher-forced training forward, dropout off (train mode keeps the dependency layer causal)
        model.train()
        for m in model.modules():
            if isinstance(m, torch.nn.Dropout):
                m.eval()
        with torch.no_grad():
            t1, t2 = model(s1[:, :-1], s2[:, :-1], stamp[:, :-1], use_teacher_forcing=True, s1_targets=s1[:, 1:])
        model.eval()
        tf1, tf2 = cross_entropy(t1, s1[:, 1:]), cross_entropy(t2, s2[:, 1:])
        u1 = torch.from_numpy(-uni1[s1[:, 1:].numpy()])
        u2 = torch.from_numpy(-uni2[s2[:, 1:].numpy()])
        fc = slice(LOOKBACK - 1, WINDOW - 1)  # targets of rows LOOKBACK .. WINDOW-1

        def pair(a, b, sl):
            return float(a[:, sl].mean()), float(b[:, sl].mean())

        res = {"windows": len(where), "series": sorted({w[0] for w in where}),
               "tokenizer_recon_mse": float(F.mse_loss(z, xt)),
               "tokenizer_recon_mse_s1_only": float(F.mse_loss(z_pre, xt))}
        for label, sl in (("forecast_rows", fc), ("all_rows", slice(None))):
            m1, m2 = pair(ce1, ce2, sl)
            f1, f2 = pair(tf1, tf2, sl)
            g1, g2 = pair(u1, u2, sl)
            res[label] = {"model_inference": {"s1": m1, "s2": m2, "sum": m1 + m2},
                          "model_teacher_forced": {"s1": f1, "s2": f2, "sum": f1 + f2},
                          "unigram": {"s1": g1, "s2": g2, "sum": g1 + g2},
                          "ratio_inference_to_unigram": (m1 + m2) / (g1 + g2),
                          "ratio_teacher_forced_to_unigram": (f1 + f2) / (g1 + g2)}
        out[name] = res
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True, help="the directory build_kronos_corpus.py wrote")
    ap.add_argument("--out", required=True)
    ap.add_argument("--tok-steps", type=int, default=600)
    ap.add_argument("--pred-steps", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=35)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)

    import torch

    from kronos_finance._vendor.kronos_model import Kronos, KronosTokenizer

    torch.set_num_threads(a.threads)
    t_start = time.time()
    machine = common.machine()
    corpus_npz = os.path.join(a.corpus, "kronos_corpus.npz")
    corpus = Corpus(corpus_npz, np.random.Generator(np.random.PCG64(a.seed)))
    heldout = corpus.heldout()

    torch.manual_seed(a.seed)
    tok = KronosTokenizer(**TOKENIZER)
    tok_log = train_tokenizer(tok, corpus, a.tok_steps)

    torch.manual_seed(a.seed + 1)
    model = Kronos(**PREDICTOR)
    pred_log = train_predictor(model, tok, corpus, a.pred_steps)

    x, st, _ = heldout["stocks"]
    s1, s2 = encode(tok, x[:1])
    check_inference_form(model, s1, s2, torch.from_numpy(st[:1]))
    uni1, uni2, uni_tokens = unigram(tok, corpus, 64, 2 ** PREDICTOR["s1_bits"])
    held = evaluate(model, tok, heldout, uni1, uni2)

    os.makedirs(a.out, exist_ok=True)
    with torch.no_grad():
        tok.save_pretrained(os.path.join(a.out, "tokenizer"))
        model.save_pretrained(os.path.join(a.out, "predictor"))
    files = {}
    for part in ("predictor", "tokenizer"):
        for f in ("config.json", "model.safetensors"):
            files[f"{part}/{f}"] = common.sha256_file(os.path.join(a.out, part, f))
    with open(os.path.join(a.corpus, "kronos-corpus.json")) as f:
        corpus_json = json.load(f)
    doc = {
        "generator": "tests/training/train_kronos.py",
        "upstream": "kronos-finance 0.1.5 (kronos_finance._vendor.kronos_model = shiyu-coder/Kronos 67b630e): "
        "KronosTokenizer / Kronos modules, the tokenizer forward + BSQ loss and head.compute_loss",
        "seed": a.seed,
        "seeds": {"numpy_windows": f"PCG64({a.seed})", "torch_tokenizer_init": a.seed,
                  "torch_predictor_init": a.seed + 1},
        "tokenizer_config": TOKENIZER,
        "predictor_config": PREDICTOR,
        "parameters": {"tokenizer": sum(p.numel() for p in tok.parameters()),
                       "predictor": sum(p.numel() for p in model.parameters())},
        "windows": {"lookback": LOOKBACK, "predict": PREDICT, "rows": WINDOW, "clip": CLIP, "batch": BATCH,
                    "tokenizer_batch": TOK_BATCH,
                    "normalisation": "mean/std (ddof 0) of the lookback rows only, (x - mean)/(std + 1e-5), clipped",
                    "sampling": "real or synthetic 1:1, then a series with p ~ sqrt(windows), uniform start",
                    "heldout_stride": {"stocks": HELDOUT_STRIDE, "synthetic": 2 * HELDOUT_STRIDE}},
        "optimizer": OPTIM,
        "steps": {"tokenizer": a.tok_steps, "predictor": a.pred_steps},
        "tokenizer_training": tok_log,
        "predictor_training": pred_log,
        "heldout": held,
        "unigram": {"training_tokens_counted": uni_tokens, "smoothing": "add-one",
                    "windows": f"64 x {BATCH} training windows"},
        "goals": {"ce_ratio_at_most": 0.9, "tokenizer_recon_mse_at_most": 0.1},
        "corpus": {"kronos-corpus.json": common.sha256_file(os.path.join(a.corpus, "kronos-corpus.json")),
                   "files": corpus_json["files"], "package_files_sha256": corpus_json["package_files_sha256"],
                   "packages": corpus_json["packages"]},
        "files": files,
        "machine": dict(machine, load_average_at_end=os.getloadavg()),
        "seconds": time.time() - t_start,
        "threads_note": "torch threads as given (--threads); 1 on the shared 2-core machine, where 2 OpenMP threads "
        "made a tokenizer step 1-3 s instead of 0.08 s",
    }
    with open(os.path.join(a.out, "training.json"), "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    for name, r in held.items():
        fr = r["forecast_rows"]
        log(f"held-out {name} ({r['windows']} windows): tokenizer recon MSE {r['tokenizer_recon_mse']:.4f}; "
            f"CE s1+s2 {fr['model_inference']['sum']:.3f} vs unigram {fr['unigram']['sum']:.3f} "
            f"(ratio {fr['ratio_inference_to_unigram']:.3f}; "
            f"teacher-forced {fr['ratio_teacher_forced_to_unigram']:.3f})")
    log(f"done in {time.time() - t_start:.0f}s -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
