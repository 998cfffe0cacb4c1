#!/usr/bin/env python3
"""Golden reference cases for the trained checkpoints: toto-ts 0.2.0 cases for `tests/fixtures/trained/toto1-small`
and toto-2 2.0.0 cases for `tests/fixtures/trained/toto2-4m`, what `scripts/demo.sh`'s `totoc verify` and the
integration test `trained` check the trained engines against.

Cases (`{"request", "reference"}` as in tests/fixtures/<config>/cases, made by tests/reference/run_reference.py's
`run` with the pinned kernels of tests/reference/kernels.py):
* `co2_mean`: the bundled weekly co2 table (tests/fixtures/data/co2_wide.csv, its missing weeks as nulls), H = 52;
* `co2_sampled`: the same, 64 sample paths, quantiles 0.1/0.5/0.9, seed 7;
* `employment_mean`: the last 512 months of the first held-out series (tests/fixtures/trained/heldout.csv), H = 64
  (a full context and four decode steps).
Toto 2.0 cases (`{"request", "options": {"decode_block": null}, "reference"}` as in tests/fixtures/toto2, made by
tests/reference/run_toto2_reference.py's `run`, one pass): `co2` (H = 52) and `employment` (H = 128).

Usage (reference venv python): make_golden.py      (writes tests/fixtures/trained/{toto1-small,toto2-4m}-cases)
"""

import argparse
import csv
import datetime as dt
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "reference"))

import kernels  # noqa: E402

kernels.pin()

import numpy as np  # noqa: E402

import run_reference  # noqa: E402
from regen_fixtures import dumps  # noqa: E402


def co2_target():
    rows = list(csv.DictReader(open(os.path.join(REPO, "tests/fixtures/data/co2_wide.csv"))))
    days = [dt.date.fromisoformat(r["ds"]) for r in rows]
    vals = {d: float(np.float32(float(r["co2"]))) for d, r in zip(days, rows)}
    n = (days[-1] - days[0]).days // 7 + 1
    return [vals.get(days[0] + dt.timedelta(weeks=i)) for i in range(n)]


def employment_target():
    rows = list(csv.DictReader(open(os.path.join(REPO, "tests/fixtures/trained/heldout.csv"))))
    first = rows[0]["unique_id"]
    y = [float(np.float32(float(r["y"]))) if r["y"] else None for r in rows if r["unique_id"] == first]
    return y[-512:]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=os.path.join(REPO, "tests/fixtures/trained"))
    a = ap.parse_args(argv)
    co2 = co2_target()
    cases = {
        "co2_mean": {"target": [co2], "horizon": 52, "samples": 0, "quantiles": [], "seed": 0},
        "co2_sampled": {"target": [co2], "horizon": 52, "samples": 64, "quantiles": [0.1, 0.5, 0.9], "seed": 7},
        "employment_mean": {"target": [employment_target()], "horizon": 64, "samples": 0, "quantiles": [],
                            "seed": 0},
    }
    model = run_reference.load_model(os.path.join(a.root, "toto1-small"))
    out = os.path.join(a.root, "toto1-small-cases")
    os.makedirs(out, exist_ok=True)
    for name, req in cases.items():
        ref = run_reference.run(model, req)
        with open(os.path.join(out, name + ".json"), "w") as f:
            f.write(dumps({"request": req, "reference": ref}))
        print(f"toto1-small/{name}: T={len(req['target'][0])} H={req['horizon']} samples={req['samples']}")

    import run_toto2_reference

    model2 = run_toto2_reference.load_model(os.path.join(a.root, "toto2-4m"))
    out = os.path.join(a.root, "toto2-4m-cases")
    os.makedirs(out, exist_ok=True)
    for name, req in {"co2": {"target": [co2], "horizon": 52},
                      "employment": {"target": [employment_target()], "horizon": 128}}.items():
        ref = run_toto2_reference.run(model2, req, None)
        with open(os.path.join(out, name + ".json"), "w") as f:
            f.write(dumps({"request": req, "options": {"decode_block": None}, "reference": ref}))
        print(f"toto2-4m/{name}: T={len(req['target'][0])} H={req['horizon']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
