#!/usr/bin/env python3
"""Tests of the live reference checks themselves: a change on purpose must fail them, by far, naming what moved.

For each check (toto-ts: regen_fixtures.py, toto-2: regen_toto2_fixtures.py) and each perturbation of
regen_fixtures.PERTURBATIONS — one weight of layer 0 x (1 + 1e-3), the last context point + 1e-3 x its series' σ, the
seed + 1 (toto-ts: the sampling seed of a sampled case; toto-2, which has no sampling: the checkpoint's seed) — the
check of one case must exit 1 with a failure that names the case's file and a reference quantity, at |diff|/tolerance
>= 10. Run by scripts/test.sh after the live checks (~40 s); prints one line per test and "N passed, N failed".
"""

import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import regen_fixtures as v1  # noqa: E402  (pins the kernels before torch is imported)
import regen_toto2_fixtures as v2  # noqa: E402

MIN_RATIO = 10.0
# check -> (module, committed root, perturbation -> the case it runs on)
CASES = {
    "toto-ts": (v1, v1.FIXTURES, {"weight": "tiny/mean_1v", "input": "tiny/mean_1v", "seed": "tiny/sampled_2v"}),
    "toto-2": (v2, v2.FIXTURES, {"weight": "4m/single_1v", "input": "4m/single_1v", "seed": "4m/single_1v"}),
}
RATIO = re.compile(r"\|diff\|/tolerance ([0-9.e+-]+)")


def run_one(check, perturb):
    mod, root, cases = CASES[check]
    case = cases[perturb]
    rc, failures, _ = mod.check(root, only={case}, perturb=perturb)
    config, name = case.split("/")
    file_part = f"{config}/cases/{name}.json"
    problems = []
    if rc != 1:
        problems.append(f"the check passed (exit {rc})")
    named = [f for f in failures if file_part in f and "reference." in f]
    if not named:
        problems.append(f"no failure names {file_part} and a reference quantity: {failures}")
    ratios = [float(m.group(1)) for f in named for m in [RATIO.search(f)] if m]
    worst = max(ratios, default=0.0)
    if worst < MIN_RATIO:
        problems.append(f"|diff|/tolerance {worst:.3g} < {MIN_RATIO:g}")
    return problems, worst, named[0] if named else ""


def main():
    passed = failed = 0
    for check in CASES:
        for perturb, what in v1.PERTURBATIONS.items():
            if check == "toto-2" and perturb == "seed":
                what = "the checkpoint's seed + 1"
            t0 = time.time()
            problems, worst, message = run_one(check, perturb)
            took = time.time() - t0
            if problems:
                failed += 1
                print(f"FAIL {check} {perturb} ({what}): {'; '.join(problems)}")
            else:
                passed += 1
                print(f"ok   {check} {perturb} ({what}): fails at |diff|/tolerance {worst:.3g} ({took:.1f}s)")
                print(f"       {message[:300]}")
    print(f"live checks: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
