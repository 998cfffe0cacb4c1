#!/usr/bin/env python3
"""Trains a Toto 2.0 at the published 4m architecture from scratch around toto-2 2.0.0's own model class (issue 26).

toto-2 2.0.0 ships the model (`toto2.Toto2Model`) and inference only: no loss and no training loop. This script
writes them, around the unmodified model class and its own `forward`:

**Model.** `Toto2Model(Toto2ModelConfig(**CONFIG))` with the published 4m config (d_model 256, d_ff 688, 4 heads,
4 layers T T T V, patch 32, eps 1e-4; `tests/reference/make_toto2_checkpoints.py` CONFIGS["4m"]), toto-2's own
initialisation (unit-scaled: unit-variance weights; the residual tau buffers from toto-2's rule), seeded.

**Inputs (what forecast() feeds, as one training sample).** A window of C + N*32 points of one series (C, the
context, drawn per step from {64, 128, 256, 384, 512}, probabilities 0.1, 0.15, 0.25, 0.2, 0.3; N future patches
drawn from 1..4, uniform). `forward(target, target_mask, cpm_mask, series_ids)` gets the whole window as
`target`, `target_mask` = the point is observed (not NaN), `cpm_mask` = True on the context and False on the N
future patches, `series_ids` = 0. So the future patches enter as forecast()'s mask tokens (zero values, missing
flag 1) and toto-2's causal scaler, run on `target_mask & cpm_mask`, gives the future positions the statistics of
the last context point: the loc/scale forecast() de-normalises the forecast with.

**Loss (written here).** The output at patch position i predicts patch i + 1 (forecast() reads
`x[-(N+1):-1]`), so the predictions of the N future patches are `quantiles[:, :, 0, C/32-1 : C/32+N-1, :]`
([9 knots, batch, N, 32], in the model's asinh space). Their targets are the true future values in the same
space, `z = asinh((y - loc) / scale)` with the forward's own loc/scale at those positions. The loss is the mean
pinball (quantile) loss over the 9 knots q in {0.1, ..., 0.9} and every observed future point:
`pinball_q(z, yhat_q) = max(q (z - yhat_q), (q - 1) (z - yhat_q))`; missing future points are masked out. (The
quantiles of asinh(z) are asinh of the quantiles of z, so minimising it in asinh space targets the same
quantiles.) No other term: the context patches' own next-patch outputs are not trained, because their targets
would be scaled with statistics that include those targets.

**Optimizer.** `unit_scaling.optim.AdamW` (the u-muP learning-rate scaling toto-2's unit-scaled layers are built
for: weights get lr / sqrt(fan_in), biases and readouts lr), base lr 0.08 (the best held-out loss of a 400-step
sweep over {0.005, 0.02, 0.08}: 0.135, 0.086, 0.079), betas 0.9/0.999, weight decay 0, with toto-ts's `WarmupStableDecayLR` schedule
(linear warm-up 200 steps, stable, 1-sqrt decay over the last 30% to lr/100); gradient-norm clip 1.0; batch 32;
one CPU thread.

Writes the checkpoint in the `Datadog/Toto-2.0-*` layout (`config.json`, `model.safetensors` F32, the names
`make_toto2_checkpoints.py` lists, checked) and `training.json` / `verify_batches.npz` as train_toto1.py does.

Usage (reference venv python):
    train_toto2.py --corpus CORPUS_DIR --out DIR [--steps N] [--seed S] [--lr LR]
    train_toto2.py --verify-training DIR
"""

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "reference"))

import numpy as np  # noqa: E402

import common  # noqa: E402
import make_toto2_checkpoints  # noqa: E402

CONFIG = make_toto2_checkpoints.CONFIGS["4m"][0]
KNOTS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
HPARAMS = {
    "batch": 32,
    "contexts": [64, 128, 256, 384, 512],
    "context_probs": [0.1, 0.15, 0.25, 0.2, 0.3],
    "future_patches": [1, 2, 3, 4],
    "lr": 0.08,
    "min_lr_fraction": 0.01,
    "weight_decay": 0.0,
    "warmup_steps": 200,
    "decay_fraction": 0.3,
    "clip_grad_norm": 1.0,
    "threads": 1,
}
VERIFY_STEPS = 5
VERIFY_RTOL = 1e-3


def build(seed, steps, lr):
    import torch
    import unit_scaling.optim
    from toto.model.scheduler import WarmupStableDecayLR
    from toto2 import Toto2Model
    from toto2.configuration import Toto2ModelConfig

    torch.manual_seed(seed)
    model = Toto2Model(Toto2ModelConfig(**CONFIG))
    model.train()
    opt = unit_scaling.optim.AdamW(model.parameters(), lr=lr, weight_decay=HPARAMS["weight_decay"],
                                   allow_non_unit_scaling_params=True)
    decay = int(steps * HPARAMS["decay_fraction"])
    # WarmupStableDecayLR returns absolute lrs for every group; keep u-muP's per-group scale by scheduling a
    # multiplier on each group's own lr instead.
    base = [g["lr"] for g in opt.param_groups]
    sched = WarmupStableDecayLR(opt, warmup_steps=HPARAMS["warmup_steps"],
                                stable_steps=steps - HPARAMS["warmup_steps"] - decay, decay_steps=decay,
                                min_lr=HPARAMS["min_lr_fraction"], base_lr=1.0)
    return model, opt, sched, base


def set_lrs(opt, sched, base):
    """Each group's lr = its u-muP-scaled base lr x the schedule's factor (the scheduler runs on factor 1.0)."""
    f = sched.get_last_lr()[0]
    for g, b in zip(opt.param_groups, base):
        g["lr"] = b * f
    return f


def loss_fn(model, series, mask, context, n_future):
    """The mean pinball loss of the N future patches (see the module docstring)."""
    import torch

    p = CONFIG["patch_size"]
    y = torch.from_numpy(np.ascontiguousarray(series, dtype=np.float32))[:, None, :]
    tm = torch.from_numpy(np.ascontiguousarray(mask))[:, None, :]
    cpm = torch.ones_like(tm)
    cpm[..., context:] = False
    ids = torch.zeros((y.shape[0], 1), dtype=torch.int64)
    q, loc, scale = model(y, tm, cpm, ids)  # q: [9, B, 1, S, P]
    s_ctx = context // p
    pred = q[:, :, 0, s_ctx - 1 : s_ctx - 1 + n_future, :]  # [9, B, N, P]
    fut = slice(context, context + n_future * p)
    z = torch.asinh((y[:, 0, fut] - loc[:, 0, fut]) / scale[:, 0, fut]).reshape(y.shape[0], n_future, p)
    valid = tm[:, 0, fut].reshape(y.shape[0], n_future, p).to(z.dtype)
    z = torch.where(valid > 0, z, torch.zeros_like(z))
    u = z[None] - pred
    k = torch.tensor(KNOTS, dtype=z.dtype)[:, None, None, None]
    pin = torch.maximum(k * u, (k - 1) * u)
    return (pin * valid[None]).sum() / (valid.sum() * len(KNOTS)).clamp_min(1.0)


def train_step(model, opt, sched, base, s, m, c, n):
    import torch

    set_lrs(opt, sched, base)
    opt.zero_grad(set_to_none=True)
    loss = loss_fn(model, s, m, c, n)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), HPARAMS["clip_grad_norm"])
    opt.step()
    sched.step()
    return float(loss.detach())


def draw(sampler, rng):
    c = int(rng.choice(HPARAMS["contexts"], p=HPARAMS["context_probs"]))
    n = int(rng.choice(HPARAMS["future_patches"]))
    s, m = sampler.sample(HPARAMS["batch"], c + n * CONFIG["patch_size"])
    return c, n, s.astype(np.float32), m


def checkpoint_tensors(model):
    want = {n: s for n, s, _, _ in make_toto2_checkpoints.tensor_shapes(CONFIG)}
    sd = model.state_dict()
    extra = set(sd) - set(want)
    assert not any(k in dict(model.named_parameters()) for k in extra), extra
    out = {k: np.array(sd[k].detach().cpu().numpy(), dtype=np.float32, order="C") for k in want}
    for k, shape in want.items():
        assert out[k].shape == tuple(shape), (k, out[k].shape, shape)
    return out, sorted(extra)


def val_loss(model, heldout, seed):
    """Mean pinball loss on fixed held-out windows: context 512, 1 future patch, 64 windows."""
    import torch

    rng = np.random.Generator(np.random.PCG64(seed))
    s, m = common.WindowSampler(heldout, rng).sample(64, 512 + CONFIG["patch_size"])
    model.eval()
    with torch.no_grad():
        v = float(loss_fn(model, s.astype(np.float32), m, 512, 1))
    model.train()
    return v


def train(args):
    import torch
    from safetensors.numpy import save_file

    torch.set_num_threads(HPARAMS["threads"])
    if args.lr is not None:
        HPARAMS["lr"] = args.lr
    _, series = common.load_series(os.path.join(args.corpus, "train.npz"))
    _, heldout = common.load_series(os.path.join(args.corpus, "heldout.npz"))
    rng = np.random.Generator(np.random.PCG64(args.seed))
    sampler = common.WindowSampler(series, rng)
    model, opt, sched, base = build(args.seed, args.steps, HPARAMS["lr"])
    nparams = sum(p.numel() for p in model.parameters())
    print(f"toto2-4m: {nparams} parameters, {args.steps} steps, batch {HPARAMS['batch']}, lr {HPARAMS['lr']}",
          flush=True)
    info = common.machine()
    curve = common.Curve(50, args.steps)
    vb = {}
    val = [{"step": 0, "heldout_loss": val_loss(model, heldout, 7)}]
    t0 = time.time()
    for step in range(args.steps):
        c, n, s, m = draw(sampler, rng)
        if step < VERIFY_STEPS:
            vb[f"series_{step}"], vb[f"mask_{step}"] = s, m
            vb[f"context_{step}"], vb[f"future_{step}"] = np.int64(c), np.int64(n)
        f = sched.get_last_lr()[0]
        curve.add(step, train_step(model, opt, sched, base, s, m, c, n), f * HPARAMS["lr"])
        if (step + 1) % max(1, args.steps // 5) == 0:
            val.append({"step": step + 1, "heldout_loss": val_loss(model, heldout, 7)})
            print(f"  held-out loss {val[-1]['heldout_loss']:.4f}", flush=True)
    wall = time.time() - t0
    if args.out is None:
        return 0
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        f.write(json.dumps(CONFIG, indent=2, sort_keys=True) + "\n")
    tensors, extra = checkpoint_tensors(model)
    save_file(tensors, os.path.join(args.out, "model.safetensors"), metadata={"format": "pt"})
    np.savez_compressed(os.path.join(args.out, "verify_batches.npz"), **vb)
    prov = common.provenance(
        args,
        model="Toto 2.0 (toto-2 2.0.0), published 4m architecture, trained from scratch",
        config=CONFIG,
        parameters=nparams,
        hyperparameters=HPARAMS,
        loss="mean pinball loss over the 9 knots on the future (mask-token) patches, in toto-2's asinh space"
             " (train_toto2.py docstring)",
        optimizer="unit_scaling.optim.AdamW (u-muP lr scaling) + toto-ts WarmupStableDecayLR as a factor;"
                  " grad-norm clip 1.0",
        wall=wall,
        machine_info=info,
        curve=curve,
        heldout=val,
        verify_steps=VERIFY_STEPS,
        verify_rtol=VERIFY_RTOL,
        state_dict_entries_not_saved=extra,
    )
    common.write_json(os.path.join(args.out, "training.json"), prov)
    print(f"wrote {args.out}: {args.steps} steps in {wall:.0f}s, final loss {prov['final_loss_mean_last_100']:.4f}")
    return 0


def verify(ckpt_dir):
    import torch

    torch.set_num_threads(1)
    prov = json.load(open(os.path.join(ckpt_dir, "training.json")))
    assert prov["config"] == CONFIG, "the script's config changed"
    hp = prov["hyperparameters"]
    assert {k: v for k, v in hp.items() if k != "lr"} == {k: v for k, v in HPARAMS.items() if k != "lr"}
    z = np.load(os.path.join(ckpt_dir, "verify_batches.npz"))
    model, opt, sched, base = build(prov["seed"], prov["steps"], hp["lr"])
    losses = []
    for step in range(prov["verify"]["steps"]):
        losses.append(train_step(model, opt, sched, base, z[f"series_{step}"], z[f"mask_{step}"],
                                 int(z[f"context_{step}"]), int(z[f"future_{step}"])))
    return common.compare_first_steps(prov["first_step_losses"], losses, prov["verify"]["rtol"])


def main(argv=None):
    return common.main(__doc__, __file__, train, verify, 3000,
                       "checkpoint directory to write (none: a dry run, e.g. for the lr sweep)",
                       "base lr (default: HPARAMS['lr'])", argv)


if __name__ == "__main__":
    sys.exit(main())
