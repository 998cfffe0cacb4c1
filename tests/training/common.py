"""Shared pieces of the training scripts (train_toto1.py, train_toto2.py): the corpus, the window sampler,
provenance, the loss-curve log and the `--verify-training` comparison. Runs in the reference venv (numpy, torch)."""

import hashlib
import json
import os
import platform
import subprocess
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def load_series(npz_path):
    """(ids, [float64 arrays]) of a corpus file written by build_corpus.py."""
    z = np.load(npz_path)
    vals, off = z["values"], z["offsets"]
    return list(z["ids"]), [vals[off[i] : off[i + 1]] for i in range(len(off) - 1)]


class WindowSampler:
    """Random windows of a given length from the training series.

    A series is eligible for a window length if it has at least that many points; among the eligible ones a series
    is drawn with probability proportional to sqrt(number of windows it holds) (long high-frequency series do not
    swamp the short monthly ones), then a uniform start. NaN (missing) points come back as 0 with mask False.
    """

    def __init__(self, series, rng):
        self.series = series
        self.lengths = np.array([len(s) for s in series])
        self.rng = rng

    def sample(self, batch, length):
        ok = np.flatnonzero(self.lengths >= length)
        w = np.sqrt(self.lengths[ok] - length + 1.0)
        pick = self.rng.choice(ok, size=batch, p=w / w.sum())
        out = np.zeros((batch, length), dtype=np.float64)
        for b, i in enumerate(pick):
            start = int(self.rng.integers(0, self.lengths[i] - length + 1))
            out[b] = self.series[i][start : start + length]
        mask = np.isfinite(out)
        return np.where(mask, out, 0.0), mask


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine():
    import torch

    return {
        "cpu": cpu_name(),
        "logical_cpus": os.cpu_count(),
        "load_average_at_start": os.getloadavg(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "git_commit": subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True,
                                     text=True).stdout.strip(),
    }


class Curve:
    """The loss curve: every step's loss is kept; a line is printed every `every` steps."""

    def __init__(self, every, total):
        self.losses, self.every, self.total, self.t0 = [], every, total, time.time()

    def add(self, step, loss, lr):
        self.losses.append(float(loss))
        if (step + 1) % self.every == 0 or step == 0:
            recent = float(np.mean(self.losses[-self.every :]))
            el = time.time() - self.t0
            print(f"step {step + 1}/{self.total} loss {recent:.4f} lr {lr:.2e} {el:.0f}s", flush=True)

    def summary(self, points=100):
        """The mean loss over consecutive chunks (at most `points` of them), for provenance."""
        n = len(self.losses)
        k = max(1, n // points)
        return [{"steps": [i + 1, min(i + k, n)], "mean_loss": round(float(np.mean(self.losses[i : i + k])), 6)}
                for i in range(0, n, k)]


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.write("\n")


def compare_first_steps(recorded, rerun, rtol):
    """--verify-training: every re-run step's loss within rtol (relative) of the recorded one. Returns 0/1."""
    worst = 0.0
    for i, (a, b) in enumerate(zip(recorded, rerun)):
        rel = abs(a - b) / max(abs(a), 1e-12)
        worst = max(worst, rel)
        print(f"step {i + 1}: recorded {a:.7f} re-run {b:.7f} relative diff {rel:.2e}")
    ok = len(rerun) == len(recorded) and worst <= rtol
    print(f"verify-training: {len(rerun)} steps, worst relative diff {worst:.2e} (tolerance {rtol:.0e}): "
          + ("OK" if ok else "FAILED"))
    return 0 if ok else 1


def provenance(args, *, model, config, parameters, hyperparameters, loss, optimizer, wall, machine_info, curve,
               heldout, verify_steps, verify_rtol, **own):
    """training.json of a run: the fields both training scripts record, plus each script's `own` ones."""
    corpus = json.load(open(os.path.join(args.corpus, "corpus.json")))
    prov = {
        "model": model,
        "script": f"tests/training/{os.path.basename(args.script)}",
        "config": config,
        "parameters": parameters,
        "hyperparameters": hyperparameters,
        "loss": loss,
        "optimizer": optimizer,
        "seed": args.seed,
        "steps": args.steps,
        "wall_time_s": round(wall, 1),
        "machine": machine_info,
        "load_average_at_end": os.getloadavg(),
        "data": {"corpus_files": corpus["files"], "counts": corpus["counts"], "packages": corpus["packages"],
                 "split": corpus["split"]},
        "first_step_losses": curve.losses[:verify_steps],
        "final_loss_mean_last_100": float(np.mean(curve.losses[-100:])),
        "heldout_loss": heldout,
        "loss_curve": curve.summary(),
        "verify": {"steps": verify_steps, "rtol": verify_rtol, "batches": "verify_batches.npz"},
    }
    prov.update(own)
    return prov


def main(doc, script, train, verify, default_steps, out_help, lr_help, argv=None):
    """The command line both training scripts share: train from a corpus, or --verify-training DIR."""
    import argparse

    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", help="directory written by build_corpus.py")
    ap.add_argument("--out", help=out_help)
    ap.add_argument("--steps", type=int, default=default_steps)
    ap.add_argument("--seed", type=int, default=26)
    ap.add_argument("--lr", type=float, default=None, help=lr_help)
    ap.add_argument("--verify-training", metavar="DIR", help="re-run the first steps of DIR's run and compare")
    a = ap.parse_args(argv)
    a.script = script
    if a.verify_training:
        return verify(a.verify_training)
    if not a.corpus:
        ap.error("--corpus is required to train")
    return train(a)
