#!/usr/bin/env python3
"""The learned-model accuracy table (issue 26) from `totoc backtest --metrics` rows (CSV).

Per model: the geometric mean over the held-out series of their MASE (scope `series`, MASE with the seasonal-naive
scale, the mean over the series' windows), the fraction of series whose MASE is below the seasonal naive's, the
overall MASE, WQL and 80% interval coverage (scope `overall`, fev's pooled-per-cutoff definitions) and fev's
skill score (MASE) against the seasonal naive. The goal: geometric-mean MASE below the seasonal naive's and better on >= 50% of the series.

Usage: accuracy.py METRICS.csv [--markdown]     (standard library only)
"""

import csv
import math
import sys
from collections import defaultdict


def main(argv):
    path = argv[0]
    series = defaultdict(dict)  # model -> id -> mase
    overall = defaultdict(dict)  # model -> metric -> value
    with open(path) as f:
        for r in csv.DictReader(f):
            if r["scope"] == "series" and r["metric"] == "mase":
                series[r["model"]][r["unique_id"]] = float(r["value"])
            elif r["scope"] == "overall":
                overall[r["model"]][r["metric"]] = float(r["value"])
    base = series["seasonal_naive"]
    ids = sorted(base)
    rows = []
    for model in [m for m in series if m not in ("naive", "seasonal_naive")] + ["naive", "seasonal_naive"]:
        m = series[model]
        common = [i for i in ids if i in m and m[i] > 0 and base[i] > 0]
        gm = math.exp(sum(math.log(m[i]) for i in common) / len(common))
        better = sum(m[i] < base[i] for i in common)
        o = overall[model]
        rows.append((model, len(common), gm, better, o.get("mase"), o.get("wql"), o.get("coverage_80"),
                     o.get("skill_mase")))
    gm_base = [r for r in rows if r[0] == "seasonal_naive"][0][2]

    def f(x, d=3):
        return "—" if x is None else f"{x:.{d}f}"

    print("| model | series | geometric-mean MASE | series better than seasonal naive | overall MASE | overall WQL"
          " | 80% coverage | fev skill (MASE) | goal |")
    print("|---|---|---|---|---|---|---|---|---|")
    for model, n, gm, better, mase, wql, cov, sm in rows:
        if model in ("naive", "seasonal_naive"):
            goal = "baseline" if model == "seasonal_naive" else ""
            frac = "—" if model == "seasonal_naive" else f"{better} of {n} ({100 * better / n:.0f}%)"
        else:
            ok = gm < gm_base and better >= n / 2
            goal = "met ✓" if ok else "missed ✗"
            frac = f"{better} of {n} ({100 * better / n:.0f}%)"
        print(f"| {model} | {n} | {f(gm)} | {frac} | {f(mase)} | {f(wql, 4)} | {f(cov)} | {f(sm)} | {goal} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
