#!/usr/bin/env python3
"""Golden cases of the Kronos trained here (train_kronos.py): upstream's own eval-mode `predict` on held-out windows
of the corpus, recorded in the format of the Kronos reference fixtures (tests/reference/README.md, "Kronos";
engines/src/kronos/golden.rs reads them, `totoc export --golden` bundles them and `build-engine` verifies them).

    make_kronos_golden.py --checkpoint DIR --corpus CORPUS_DIR --out CASES_DIR --provenance FILE   (reference venv)
    make_kronos_golden.py --check --checkpoint DIR --corpus CORPUS_DIR --out CASES_DIR

`--check` regenerates every committed case (its recorded candidate) into a temporary directory and compares it with
the committed one as the Kronos fixture check does (regen_kronos_fixtures.compare_case: requests byte-identical,
tokens exact, every other number within that check's per-class tolerances); a few seconds.

DIR holds predictor/ and tokenizer/ (config.json + model.safetensors); CORPUS_DIR is what build_kronos_corpus.py
wrote. Each case is cut from the held-out rows only (the last 20% of a series, or IBM, held out whole), written with
`run_kronos_reference.run` (the strict loader, eval mode, the recording hooks and their bitwise self-checks) under
the pinned kernels (tests/reference/kernels.py), one torch thread.

**Near-ties.** Trained logits can be nearly tied, and a quantizer input z can sit near 0; a kernel drift could then
flip a token and the engine's exact token check would fail on rounding, not on a bug. A candidate window is
therefore accepted only if every encode z and every decision keeps MARGIN_FACTOR (100) times the measured kernel
drift (regen_kronos_fixtures.DRIFT: greedy, the top-1 − top-2 logit gap; sampled, the choice under the recorded
noise and the top-p cut; z, min |z| / (z_unit + |z|)); a rejected candidate (the window one row earlier is tried
next) is listed in the provenance file with its margins, and each accepted case's smallest margins are recorded.
"""

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "reference"))
import kernels  # noqa: E402

kernels.pin()  # before torch is imported
import regen_fixtures as v1  # noqa: E402  (dumps, hashing)
import regen_kronos_fixtures as rk  # noqa: E402  (margins: DRIFT, MARGIN_FACTOR, margin_report, accepted)

MAX_CANDIDATES = 40
QUANTILES = [0.1, 0.5, 0.9]

# name -> spec. `start`: the first context row, counted from the series' first held-out row (candidate k moves the
# window k rows earlier, never before the held-out rows); `columns`: the request's columns (stocks give no amount:
# upstream derives it as the corpus did, volume x mean(open, high, low, close)).
STOCK_COLUMNS = ["open", "high", "low", "close", "volume"]
FX_COLUMNS = ["open", "high", "low", "close", "volume", "amount"]
CASES = {
    # IBM, held out whole: 80 + 16 fills the 96-row window exactly (no slide)
    "ibm_greedy": {"series": "IBM", "start": 2000, "n": 80, "h": 16, "max_context": 96, "columns": STOCK_COLUMNS},
    # MSFT's last 20%: 96 context rows in a 96-row window, every step after the first slides
    "msft_slide": {"series": "MSFT", "start": 400, "n": 96, "h": 24, "max_context": 96, "columns": STOCK_COLUMNS},
    # AAPL's last 20%: four sampled paths (T 1, top_p 0.9 = upstream predict's defaults) and their mean
    "aapl_sampled": {"series": "AAPL", "start": 300, "n": 64, "h": 8, "max_context": 96, "columns": STOCK_COLUMNS,
                     "samples": 4, "temperature": 1.0, "top_p": 0.9, "seed": 7},
    # synthetic FX hours stamped in UTC: the context crosses the 2024-11-03 DST change (the Sunday open moves from
    # 21:00 to 22:00 UTC); held-out row 936 of fx1 is the 2024-11-03 17:00 New York open
    "fx_dst": {"series": "fx1", "start": 936 - 60, "n": 96, "h": 24, "max_context": 96, "columns": FX_COLUMNS},
}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


class Corpus:
    def __init__(self, path):
        z = np.load(path)
        off = z["offsets"]
        self.index = {str(s): i for i, s in enumerate(z["ids"])}
        self.values = [z["values"][off[i] : off[i + 1]] for i in range(len(off) - 1)]
        self.text = [z["stamp_text"][off[i] : off[i + 1]] for i in range(len(off) - 1)]
        self.cuts = [int(c) for c in z["cuts"]]


def request(corpus, name, spec, candidate):
    i = corpus.index[spec["series"]]
    s = corpus.cuts[i] + spec["start"] - candidate
    n, h = spec["n"], spec["h"]
    assert s >= corpus.cuts[i], f"{name}: candidate {candidate} reaches into the training rows"
    assert s + n + h <= len(corpus.values[i]), f"{name}: the window runs past the series"
    cols = ["open", "high", "low", "close", "volume", "amount"]
    rows = corpus.values[i][s : s + n]
    # f32 values (shortest repr): upstream reads f64 from JSON, totoc f32; the same numbers either way
    target = [[float(np.float32(v)) for v in rows[:, cols.index(c)]] for c in spec["columns"]]
    req = {
        "id": spec["series"],
        "columns": spec["columns"],
        "target": target,
        "timestamps": [str(t) for t in corpus.text[i][s : s + n]],
        "future_timestamps": [str(t) for t in corpus.text[i][s + n : s + n + h]],
        "horizon": h,
        "seed": spec.get("seed", 7),
        "samples": spec.get("samples", 0),
        "params": {"max_context": spec["max_context"], "clip": 5.0},
    }
    if req["samples"]:
        req["quantiles"] = QUANTILES
        for k in ("temperature", "top_k", "top_p"):
            if k in spec:
                req[k] = spec[k]
    return req, s


def check(model, tokenizer, corpus, out, names):
    """Regenerates each committed case's candidate and compares (exit 0 / 1)."""
    import live_check
    import run_kronos_reference as runner

    failures = []
    total = rk.TokenTally(rk.TAUS)
    for name in names:
        base = os.path.join(out, name)
        with open(base + ".json") as f:
            committed = json.load(f)
        req, _ = request(corpus, name, CASES[name], committed["candidate"])
        ref, arrays, _ = runner.run(model, tokenizer, "predict", [req])
        fresh = {"call": "predict", "requests": [req], "reference": ref}
        same = v1.dumps(ref) == v1.dumps(committed["reference"])
        live_check.judge(f"kronos-1m-cases/{name}", lambda: rk.compare_case(
            fresh, committed, arrays, rk.load_arrays(base + ".safetensors"), name), same, total, failures)
    if failures:
        print("\nTRAINED KRONOS GOLDEN CHECK FAILED:\n  " + "\n  ".join(failures), file=sys.stderr)
        return 1
    print(f"trained kronos golden check passed ({len(names)} cases)")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--provenance", help="where the provenance file goes (required unless --check; not in --out: "
                    "every *.json there is read as a case)")
    ap.add_argument("--only", help="comma-separated case names")
    ap.add_argument("--check", action="store_true", help="regenerate the committed cases and compare")
    a = ap.parse_args(argv)
    if not a.check and not a.provenance:
        ap.error("--provenance FILE is required (e.g. tests/fixtures/trained/kronos-1m/golden-provenance.json)")

    import torch

    import run_kronos_reference as runner

    torch.set_num_threads(1)
    t0 = time.time()
    model, tokenizer = runner.load(os.path.join(a.checkpoint, "predictor"), os.path.join(a.checkpoint, "tokenizer"))
    corpus = Corpus(os.path.join(a.corpus, "kronos_corpus.npz"))
    os.makedirs(a.out, exist_ok=True)
    prov = {
        "generator": "tests/training/make_kronos_golden.py",
        "oracle": "kronos-finance 0.1.5 KronosPredictor.predict, eval mode, strict load, CPU, "
        "torch.manual_seed(request seed) before each call",
        "versions": {"python": platform.python_version(), "kronos-finance": v1._pkg_version("kronos-finance"),
                     "torch": torch.__version__, "numpy": np.__version__, "pandas": v1._pkg_version("pandas")},
        "kernels": kernels.describe_setting(),
        "torch_threads": 1,
        "margins": {"factor": rk.MARGIN_FACTOR, "drift": rk.DRIFT},
        "checkpoint": {f"{p}/{f}": v1.sha256_file(os.path.join(a.checkpoint, p, f))
                       for p in ("predictor", "tokenizer") for f in ("config.json", "model.safetensors")},
        "corpus": {"kronos_corpus.npz": v1.sha256_file(os.path.join(a.corpus, "kronos_corpus.npz"))},
        "cases": {},
    }
    names = [n for n in CASES if not a.only or n in a.only.split(",")]
    if a.check:
        return check(model, tokenizer, corpus, a.out, names)
    for name in names:
        spec = CASES[name]
        rejected = []
        for k in range(MAX_CANDIDATES):
            req, start = request(corpus, name, spec, k)
            ref, arrays, margins = runner.run(model, tokenizer, "predict", [req])
            report = rk.margin_report(margins)
            if rk.accepted(report):
                break
            near = {"candidate": k, "first_row": start, "z_over_drift": report["z_over_drift"],
                    "decision_over_drift": report["decision_over_drift"]}
            rejected.append(near)
            log(f"  {name}: candidate {k} rejected as a near-tie (z {report['z_over_drift']:.3g}x, decisions "
                f"{report['decision_over_drift']:.3g}x the drift; need {rk.MARGIN_FACTOR}x)")
        else:
            raise RuntimeError(f"{name}: no candidate in {MAX_CANDIDATES} keeps {rk.MARGIN_FACTOR}x the drift")
        base = os.path.join(a.out, name)
        doc = {"call": "predict", "candidate": k, "requests": [req], "reference": ref, "margins": report}
        with open(base + ".json", "w") as f:
            f.write(v1.dumps(doc))
        rk.write_arrays(arrays, base + ".safetensors")
        prov["cases"][name] = {
            "series": spec["series"], "first_row": start, "rows": spec["n"], "horizon": spec["h"],
            "candidate": k, "rejected_near_ties": rejected,
            "min_margin_over_drift": {"z": report["z_over_drift"], "decision": report["decision_over_drift"]},
            "request_sha256": v1.sha256_bytes(v1.dumps([req]).encode()),
            "reference_sha256": v1.sha256_bytes(v1.dumps(ref).encode()),
            "arrays_sha256": v1.sha256_file(base + ".safetensors"),
        }
        log(f"{name}: candidate {k} (rows {start}..{start + spec['n']} of {spec['series']}), margins z "
            f"{report['z_over_drift']:.3g}x, decisions {report['decision_over_drift']:.3g}x the drift; "
            f"{len(rejected)} near-tie candidate(s) rejected")
    if not a.only:
        with open(a.provenance, "w") as f:
            f.write(json.dumps(prov, sort_keys=True, indent=2) + "\n")
    log(f"wrote {len(names)} cases to {a.out} in {time.time() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
