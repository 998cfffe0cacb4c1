#!/usr/bin/env python3
"""Measures how far each CPU kernel setting moves the reference outputs from the committed (pinned) fixtures, and
prints the docs/guide.md table: live check x quantity class x kernel setting -> worst drift, tolerance,
drift/tolerance, totoc's own tolerance and how much tighter the live check is.

    tests/reference/kernel_drift.sh                      # every setting of kernels.SETTINGS, both checks (~10 min)
    tests/reference/kernel_drift.sh --settings native,mkl-avx2
    tests/reference/kernel_drift.sh --settings pinned --emulate Haswell-v4,Nehalem-v1   # other CPUs (~40 min)
    tests/reference/kernel_drift.sh --checks kronos --json tests/reference/kernel_drift_kronos.json   # one check

Each setting runs `regen_fixtures.py --check`, `regen_toto2_fixtures.py --check` and `regen_kronos_fixtures.py
--check` (or those --checks names) in a child process with
TOTOC_REFERENCE_KERNELS=<setting> (the child pins its kernels before importing torch) and reads the worst drift per
class from their --report. The drift of a number is |a - b| / (unit + |b|) (live_check.py). The tolerance τ of
each class is in the check scripts (TAUS); the last lines say what SAFETY_FACTOR x the worst drift would be, so a
measurement on a new CPU shows at once whether a τ is too tight.

--emulate CPU,...: also run the pinned setting under Debian's qemu-user (`qemu-x86_64 -cpu CPU`, apt package
qemu-user) as another CPU model: its CPUID (vendor, FMA, AVX2) steers MKL, glibc's libm and torch as that CPU's
would. qemu's TCG has no AVX-512, so AVX-512/AMX machines cannot be emulated; they show up when this script runs
on one. Emulation is ~30x slower.
"""

import argparse
import json
import math
import shutil
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kernels  # noqa: E402
import live_check  # noqa: E402

CHECKS = {"toto-ts": "regen_fixtures.py", "toto-2": "regen_toto2_fixtures.py", "kronos": "regen_kronos_fixtures.py"}
# what totoc's own tests hold the same numbers to against the fixtures (engines/src/toto1/golden.rs,
# engines/tests/toto2_equivalence.rs)
TOTOC_TOL = {
    ("toto-ts", "mixture"): "1e-4 + 1e-6·|ref| (patches: not compared)",
    ("toto-ts", "scaler"): "1e-4·σ + 1e-6·|ref|",
    ("toto-ts", "mean"): "1e-4·σ + 1e-6·|ref|",
    ("toto-ts", "samples"): "by distribution (KS), not per value",
    ("toto-2", "knots"): "1e-4 + 1e-6·|ref|",
    ("toto-2", "scaler"): "1e-6·|ref|",
    ("toto-2", "quantiles"): "1e-4·σ + 1e-6·|ref|",
    ("kronos", "stats"): "exact (numpy's pairwise f32 order)",
    ("kronos", "z"): "its sign only (tokens identical)",
    ("kronos", "logits"): "τ from measured drift (engine tests)",
    ("kronos", "rows"): "1e-4·σ + 1e-6·|ref| (de-normalised)",
    ("kronos", "noise"): "replayed as recorded",
}


FLIPPED = []  # checks and settings under which an exact quantity (a Kronos token) changed


def run(check, setting, out):
    """Runs one check under `setting` (a kernels.SETTINGS name, or "qemu:<CPU>" for the pinned setting emulated)."""
    prefix = []
    if setting.startswith("qemu:"):
        prefix = ["qemu-x86_64", "-cpu", setting.split(":", 1)[1]]
        setting = "pinned"
    env = dict(os.environ, TOTOC_REFERENCE_KERNELS=setting)
    cmd = prefix + [sys.executable, os.path.join(HERE, CHECKS[check]), "--check", "--report", out]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if not os.path.exists(out):
        sys.exit(f"{check} under {setting}: no report (exit {p.returncode}):\n{p.stderr[-2000:]}")
    with open(out) as f:
        doc = json.load(f)
    if doc.get("tokens_differ"):  # the Kronos check's tokens: a flip means the fixtures' margins are too small
        FLIPPED.append(f"{check} under {setting}: {doc['tokens_differ']} token(s) differ from the committed fixtures")
    return doc["classes"]


def round_up(x):
    """x rounded up to one significant digit (a tolerance constant)."""
    if x <= 0:
        return 0.0
    e = 10 ** math.floor(math.log10(x))
    return math.ceil(x / e - 1e-9) * e


def current_taus():
    """The τ of every (check, class) as the check scripts define them now."""
    import regen_fixtures
    import regen_kronos_fixtures
    import regen_toto2_fixtures

    return {
        **{("toto-ts", c): t for c, t in regen_fixtures.TAUS.items()},
        **{("toto-2", c): t for c, t in regen_toto2_fixtures.TAUS.items()},
        **{("kronos", c): t for c, t in regen_kronos_fixtures.TAUS.items()},
    }


def render(rows, settings, command):
    """The docs/guide.md table of measured rows, one line per (check, class) and one column per setting, against the
    τ the check scripts define now (a row measured under another τ has its live/totoc ratio rescaled: that ratio is
    proportional to τ)."""
    taus = current_taus()
    model, flags = kernels.cpu_summary()
    print(f"CPU: {model} ({' '.join(flags)}); command: {command}\n")
    by_key = {}
    for r in rows:
        by_key.setdefault((r["check"], r["class"]), {})[r["setting"]] = r
    head = " | ".join(s.replace("qemu:", "qemu ") for s in settings)
    print(f"| live check | quantity | worst drift: {head} | τ | worst drift / τ | totoc's own tolerance | τ tol / totoc tol |")
    print("|---|---|" + "---|" * len(settings) + "---|---|---|---|")
    worst = {}
    for key in sorted(by_key):
        tau = taus[key]
        cells = [f"{by_key[key][s]['worst']:.1e}" if s in by_key[key] else "-" for s in settings]
        w = max(r["worst"] for s, r in by_key[key].items() if s != "pinned")
        worst[key] = w
        ratios = [r["live_over_totoc"] * tau / r["tau"] for r in by_key[key].values() if r["live_over_totoc"]]
        ratio = f"{max(ratios):.2g}" if ratios else "n/a"
        print(f"| {key[0]} | {key[1]} | {' | '.join(cells)} | {tau:g} | {w / tau:.2f} | {TOTOC_TOL[key]} | {ratio} |")
    print(f"\nτ = {live_check.SAFETY_FACTOR} x the worst drift over the settings, rounded up (the check scripts' TAUS):")
    for key, w in sorted(worst.items()):
        want = round_up(live_check.SAFETY_FACTOR * w)
        flag = "" if taus[key] >= want * (1 - 1e-9) else "  <-- TAUS is tighter than this"
        print(f"  {key[0]} {key[1]}: worst {w:.3g} -> τ {want:g} (TAUS: {taus[key]:g}){flag}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--settings", default=",".join(kernels.SETTINGS), help="comma-separated kernel settings")
    ap.add_argument("--checks", default=",".join(CHECKS), help=f"comma-separated live checks ({', '.join(CHECKS)})")
    ap.add_argument("--emulate", default="", help="comma-separated qemu CPU models to run the pinned setting on")
    ap.add_argument("--json", help="also write every measurement here")
    ap.add_argument("--from-json", help="print the table of an earlier --json measurement against today's TAUS")
    a = ap.parse_args(argv)
    if a.from_json:
        with open(a.from_json) as f:
            doc = json.load(f)
        render(doc["rows"], doc["settings"], doc["command"])
        return 0
    settings = a.settings.split(",")
    checks = a.checks.split(",")
    for c in checks:
        if c not in CHECKS:
            sys.exit(f"unknown check {c!r}; use {', '.join(CHECKS)}")
    for s in settings:
        if s not in kernels.SETTINGS:
            sys.exit(f"unknown setting {s!r}; use {', '.join(kernels.SETTINGS)}")
    if a.emulate:
        if shutil.which("qemu-x86_64") is None:
            sys.exit("--emulate needs qemu-x86_64: apt-get install qemu-user")
        settings += [f"qemu:{c}" for c in a.emulate.split(",")]
    emulate = f" --emulate {a.emulate}" if a.emulate else ""
    only = f" --checks {a.checks}" if checks != list(CHECKS) else ""
    command = f"tests/reference/kernel_drift.sh --settings {a.settings}{only}{emulate}"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for setting in settings:
            for check in checks:
                print(f"running {check} under {setting} ...", file=sys.stderr, flush=True)
                classes = run(check, setting, os.path.join(tmp, f"{check}-{setting}.json"))
                for cls, r in classes.items():
                    rows.append({"check": check, "class": cls, "setting": setting, **r})
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"command": command, "settings": settings, "rows": rows}, f, indent=1)
    render(rows, settings, command)
    for line in FLIPPED:
        print(f"FLIPPED: {line}", file=sys.stderr)
    return 1 if FLIPPED else 0


if __name__ == "__main__":
    sys.exit(main())
