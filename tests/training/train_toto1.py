#!/usr/bin/env python3
"""Trains a small Toto 1.0 from scratch with toto-ts 0.2.0's own fine-tuning module (issue 26).

What runs, all of it toto-ts's code except the data feeding:
* the model: `toto.model.lightning_module.TotoForFinetuning(**config)`, which builds a fresh `TotoBackbone` from
  the config below (no hub weights; toto-ts's default torch init, seeded);
* the loss: `TotoForFinetuning._train_or_val_step(batch, is_train=True)`, i.e. toto-ts's `CombinedLoss`
  (0.575 x the mixture's negative log-likelihood + 0.425 x Barron's robust loss (alpha 0, delta 0.1) on its mean),
  on the scaled next-patch targets, masked by the padding mask;
* the optimizer and schedule: `TotoForFinetuning.configure_optimizers()`: AdamW (betas 0.9/0.999, eps 1e-7,
  weight decay 0.01) with toto-ts's `WarmupStableDecayLR` (linear warm-up, stable, 1-sqrt decay to min_lr).
The loop is ours instead of Lightning's Trainer (one process, one CPU thread, no callbacks): each step draws a
batch, calls the module's training step, clips the gradient norm at 1.0, steps the optimizer and the scheduler.
Batches are `CausalMaskedTimeseries` as toto-ts's fine-tuning datamodule makes them: a window of C + P points,
input_slice [0, C), target_slice [P, C + P) (every patch predicts the next), one variate, id 0. The context C of a
step is drawn from {128, 256, 384, 512} (probabilities 0.15, 0.2, 0.25, 0.4), windows from `common.WindowSampler`.

The checkpoint is written in the released Hugging Face layout (`config.json` with exactly the `Toto.__init__` keys,
`model.safetensors` F32 with the xFormers-era names `mlp.0.w12` / `mlp.0.w3`), the layout `totoc export` and
`Toto.from_pretrained` read; `training.json` beside it holds the provenance (data, steps, loss curve, seed, wall
time, CPU, torch version), `verify_batches.npz` the exact inputs of the first steps.

Usage (reference venv python, tests/reference/setup_venv.sh):
    train_toto1.py --corpus CORPUS_DIR --out DIR [--steps N] [--seed S]     # train (CORPUS_DIR: build_corpus.py)
    train_toto1.py --verify-training DIR     # re-run the first steps from DIR's provenance, compare the losses
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

SCALER_CLS = "<class 'model.scaler.CausalPatchStdMeanScaler'>"
MIXTURE_CLS = "<class 'model.distribution.MixtureOfStudentTsOutput'>"
# The small config: patch 16, D 128, 4 layers (T T T S), 4 heads, SwiGLU 384, 8 Student-T components.
CONFIG = {
    "patch_size": 16,
    "stride": 16,
    "embed_dim": 128,
    "num_layers": 4,
    "num_heads": 4,
    "mlp_hidden_dim": 384,
    "dropout": 0.1,
    "spacewise_every_n_layers": 4,
    "spacewise_first": False,
    "scaler_cls": SCALER_CLS,
    "output_distribution_classes": [MIXTURE_CLS],
    "output_distribution_kwargs": {"k_components": 8},
    "use_memory_efficient_attention": True,
    "stabilize_with_global": True,
    "scale_factor_exponent": 10.0,
}
HPARAMS = {
    "batch": 32,
    "contexts": [128, 256, 384, 512],
    "context_probs": [0.15, 0.2, 0.25, 0.4],
    "lr": 1e-3,
    "min_lr": 1e-5,
    "weight_decay": 0.01,
    "warmup_steps": 200,
    "decay_fraction": 0.3,
    "clip_grad_norm": 1.0,
    "threads": 1,
}
VERIFY_STEPS = 5
VERIFY_RTOL = 1e-3


def build_module(seed, steps):
    import torch
    from toto.model.lightning_module import TotoForFinetuning

    torch.manual_seed(seed)
    kwargs = dict(CONFIG)
    kwargs["use_memory_efficient_attention"] = False  # no xFormers here (toto-ts forces the same at load)
    decay = int(steps * HPARAMS["decay_fraction"])
    module = TotoForFinetuning(
        lr=HPARAMS["lr"],
        min_lr=HPARAMS["min_lr"],
        weight_decay=HPARAMS["weight_decay"],
        warmup_steps=HPARAMS["warmup_steps"],
        stable_steps=steps - HPARAMS["warmup_steps"] - decay,
        decay_steps=decay,
        **kwargs,
    )
    module.train()
    opt = module.configure_optimizers()
    return module, opt["optimizer"], opt["lr_scheduler"]["scheduler"]


def make_batch(series, mask, context):
    """A CausalMaskedTimeseries as toto-ts's fine-tuning datamodule builds it (one variate)."""
    import torch
    from toto.data.util.dataset import CausalMaskedTimeseries

    p = CONFIG["patch_size"]
    x = torch.from_numpy(np.ascontiguousarray(series, dtype=np.float32))[:, None, :]
    m = torch.from_numpy(np.ascontiguousarray(mask))[:, None, :]
    b, _, t = x.shape
    return CausalMaskedTimeseries(
        series=x,
        padding_mask=m,
        id_mask=torch.zeros((b, 1, t), dtype=torch.int64),
        timestamp_seconds=torch.zeros((b, 1, t), dtype=torch.int64),
        time_interval_seconds=torch.ones((b, 1), dtype=torch.int64),
        input_slice=slice(0, context),
        target_slice=slice(p, context + p),
    )


def train_step(module, opt, sched, batch):
    import torch

    opt.zero_grad(set_to_none=True)
    loss = module._train_or_val_step(batch, is_train=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(module.parameters(), HPARAMS["clip_grad_norm"])
    opt.step()
    sched.step()
    return float(loss.detach())


def draw(sampler, rng):
    c = int(rng.choice(HPARAMS["contexts"], p=HPARAMS["context_probs"]))
    s, m = sampler.sample(HPARAMS["batch"], c + CONFIG["patch_size"])
    return c, s.astype(np.float32), m


def checkpoint_tensors(module):
    """The state dict under the released names; checked against make_checkpoints.py's list (names and shapes)."""
    import make_checkpoints

    out = {}
    for k, v in module.model.state_dict().items():
        if k.endswith("rotary_emb.freqs"):
            continue
        k = "model." + k
        for a, b in [(".mlp.0.weight", ".mlp.0.w12.weight"), (".mlp.0.bias", ".mlp.0.w12.bias"),
                     (".mlp.2.weight", ".mlp.0.w3.weight"), (".mlp.2.bias", ".mlp.0.w3.bias")]:
            if k.endswith(a):
                k = k[: -len(a)] + b
        out[k] = v.detach().to("cpu").contiguous().numpy().astype(np.float32)
    want = dict(make_checkpoints.tensor_shapes(CONFIG))
    assert set(out) == set(want), (set(out) ^ set(want))
    for k, shape in want.items():
        assert out[k].shape == tuple(shape), (k, out[k].shape, shape)
    return out


def val_loss(module, heldout, seed):
    """Mean toto-ts validation loss (last 96 targets masked in, toto-ts's _prediction_mask) on fixed held-out
    windows of 512 + 16 points."""
    import torch

    rng = np.random.Generator(np.random.PCG64(seed))
    s, m = common.WindowSampler(heldout, rng).sample(64, 512 + CONFIG["patch_size"])
    module.eval()
    with torch.no_grad():
        v = float(module._train_or_val_step(make_batch(s.astype(np.float32), m, 512), is_train=False))
    module.train()
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
    module, opt, sched = build_module(args.seed, args.steps)
    nparams = sum(p.numel() for p in module.parameters())
    print(f"toto1-small: {nparams} parameters, {args.steps} steps, batch {HPARAMS['batch']}", flush=True)
    info = common.machine()
    curve = common.Curve(50, args.steps)
    vb = {}
    val = [{"step": 0, "heldout_loss": val_loss(module, heldout, 7)}]
    t0 = time.time()
    for step in range(args.steps):
        c, s, m = draw(sampler, rng)
        if step < VERIFY_STEPS:
            vb[f"series_{step}"], vb[f"mask_{step}"], vb[f"context_{step}"] = s, m, np.int64(c)
        lr = sched.get_last_lr()[0]
        curve.add(step, train_step(module, opt, sched, make_batch(s, m, c)), lr)
        if (step + 1) % max(1, args.steps // 5) == 0:
            val.append({"step": step + 1, "heldout_loss": val_loss(module, heldout, 7)})
            print(f"  held-out loss {val[-1]['heldout_loss']:.4f}", flush=True)
    wall = time.time() - t0
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        f.write(json.dumps(CONFIG, indent=2, sort_keys=True) + "\n")
    save_file(checkpoint_tensors(module), os.path.join(args.out, "model.safetensors"), metadata={"format": "pt"})
    np.savez_compressed(os.path.join(args.out, "verify_batches.npz"), **vb)
    prov = common.provenance(
        args,
        model="Toto 1.0 (toto-ts 0.2.0), trained from scratch",
        config=CONFIG,
        parameters=nparams,
        hyperparameters=HPARAMS,
        loss="toto-ts CombinedLoss via TotoForFinetuning._train_or_val_step (0.575 NLL + 0.425 robust)",
        optimizer="TotoForFinetuning.configure_optimizers: AdamW + WarmupStableDecayLR; grad-norm clip 1.0",
        wall=wall,
        machine_info=info,
        curve=curve,
        heldout=val,
        verify_steps=VERIFY_STEPS,
        verify_rtol=VERIFY_RTOL,
    )
    common.write_json(os.path.join(args.out, "training.json"), prov)
    print(f"wrote {args.out}: {args.steps} steps in {wall:.0f}s, final loss {prov['final_loss_mean_last_100']:.4f}")
    return 0


def verify(ckpt_dir):
    import torch

    torch.set_num_threads(1)
    prov = json.load(open(os.path.join(ckpt_dir, "training.json")))
    assert prov["config"] == CONFIG, "the script's config changed"
    assert {k: v for k, v in prov["hyperparameters"].items() if k != "lr"} == {
        k: v for k, v in HPARAMS.items() if k != "lr"
    }, "the script's hyperparameters changed"
    HPARAMS["lr"] = prov["hyperparameters"]["lr"]
    z = np.load(os.path.join(ckpt_dir, "verify_batches.npz"))
    module, opt, sched = build_module(prov["seed"], prov["steps"])
    losses = []
    for step in range(prov["verify"]["steps"]):
        b = make_batch(z[f"series_{step}"], z[f"mask_{step}"], int(z[f"context_{step}"]))
        losses.append(train_step(module, opt, sched, b))
    return common.compare_first_steps(prov["first_step_losses"], losses, prov["verify"]["rtol"])


def main(argv=None):
    def train_checked(a):
        if not a.out:
            sys.exit("--out is required to train")
        return train(a)

    return common.main(__doc__, __file__, train_checked, verify, 4000, "checkpoint directory to write",
                       "peak lr (default: HPARAMS['lr'])", argv)


if __name__ == "__main__":
    import warnings

    warnings.filterwarnings("ignore", message=".*self.log.*")
    warnings.filterwarnings("ignore", message=".*trainer.*")
    sys.exit(main())
