#!/usr/bin/env python3
"""Measures how far each CPU kernel setting moves the reference outputs from the committed (pinned) fixtures, and
prints the README table: live check x quantity class x kernel setting -> worst drift, tolerance, drift/tolerance,
totoc's own tolerance and how much tighter the live check is.

    tests/reference/kernel_drift.sh                      # every setting of kernels.SETTINGS, both checks (~10 min)
    tests/reference/kernel_drift.sh --settings native,mkl-avx2

Each setting runs `regen_fixtures.py --check` and `regen_toto2_fixtures.py --check` in a child process with
TOTOC_REFERENCE_KERNELS=<setting> (the child pins its kernels before importing torch) and reads the worst drift per
class from their --report. The drift of a number is |a - b| / (unit + |b|) (live_check.py). The tolerance τ of
each class is in the check scripts (TAUS); the last lines say what SAFETY_FACTOR x the worst drift would be, so a
measurement on a new CPU shows at once whether a τ is too tight.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kernels  # noqa: E402
import live_check  # noqa: E402

CHECKS = {"toto-ts": "regen_fixtures.py", "toto-2": "regen_toto2_fixtures.py"}
# what totoc's own tests hold the same numbers to against the fixtures (engines/src/golden.rs,
# engines/tests/toto2_equivalence.rs)
TOTOC_TOL = {
    ("toto-ts", "scaled"): "1e-4 + 1e-6·|ref| (mixture parameters; patches: not compared)",
    ("toto-ts", "series"): "1e-4·σ + 1e-6·|ref|",
    ("toto-ts", "samples"): "by distribution (KS), not per value",
    ("toto-2", "scaled"): "1e-4 + 1e-6·|ref|",
    ("toto-2", "series"): "1e-4·σ + 1e-6·|ref| (median, quantiles); 1e-6·|ref| (scaler statistics)",
}


def run(check, setting, out):
    env = dict(os.environ, TOTOC_REFERENCE_KERNELS=setting)
    cmd = [sys.executable, os.path.join(HERE, CHECKS[check]), "--check", "--report", out]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if not os.path.exists(out):
        sys.exit(f"{check} under {setting}: no report (exit {p.returncode}):\n{p.stderr[-2000:]}")
    with open(out) as f:
        return json.load(f)["classes"]


def round_up(x):
    """x rounded up to one significant digit (a tolerance constant)."""
    if x <= 0:
        return 0.0
    e = 10 ** math.floor(math.log10(x))
    return math.ceil(x / e - 1e-9) * e


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--settings", default=",".join(kernels.SETTINGS), help="comma-separated kernel settings")
    ap.add_argument("--json", help="also write every measurement here")
    a = ap.parse_args(argv)
    settings = a.settings.split(",")
    for s in settings:
        if s not in kernels.SETTINGS:
            sys.exit(f"unknown setting {s!r}; use {', '.join(kernels.SETTINGS)}")
    model, flags = kernels.cpu_summary()
    rows, worst = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for setting in settings:
            for check in CHECKS:
                print(f"running {check} under {setting} ...", file=sys.stderr, flush=True)
                classes = run(check, setting, os.path.join(tmp, f"{check}-{setting}.json"))
                for cls, r in classes.items():
                    rows.append((check, cls, setting, r))
                    if setting != "pinned":
                        worst[(check, cls)] = max(worst.get((check, cls), 0.0), r["worst"])
    print(f"CPU: {model} ({' '.join(flags)}); command: tests/reference/kernel_drift.sh --settings {a.settings}\n")
    print("| live check | quantity | kernel setting | worst drift | drift/τ | τ | totoc's own tolerance | τ tol / totoc tol (worst) |")
    print("|---|---|---|---|---|---|---|---|")
    for check, cls, setting, r in sorted(rows, key=lambda x: (x[0], x[1], settings.index(x[2]))):
        ratio = "n/a" if r["live_over_totoc"] is None else f"{r['live_over_totoc']:.2g}"
        print(
            f"| {check} | {cls} | {setting} | {r['worst']:.2e} | {r['worst'] / r['tau']:.2f} | {r['tau']:g} "
            f"| {TOTOC_TOL[(check, cls)]} | {ratio} |"
        )
    print(f"\nτ = {live_check.SAFETY_FACTOR} x the worst drift over the settings, rounded up:")
    for (check, cls), w in sorted(worst.items()):
        print(f"  {check} {cls}: worst {w:.3g} -> τ {round_up(live_check.SAFETY_FACTOR * w):g}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump([{"check": c, "class": k, "setting": s, **r} for c, k, s, r in rows], f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
