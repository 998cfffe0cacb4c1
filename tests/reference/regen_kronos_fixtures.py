#!/usr/bin/env python3
"""Regenerates (or checks) the Kronos golden fixtures under tests/fixtures/kronos/ from upstream Kronos
(kronos-finance 0.1.5) in eval mode.

    regen_kronos_fixtures.py                 # rewrite tests/fixtures/kronos/ (inputs/ excepted)
    regen_kronos_fixtures.py --check         # regenerate into a temp dir and compare (CI; a few seconds)
    regen_kronos_fixtures.py --check --paths # also regenerate the 1,000-path files and compare them

Layout and every field: tests/reference/README.md, "Kronos". Per config: predictor/ and tokenizer/ (config.json +
model.safetensors, make_kronos_checkpoints.py), cases/<case>.json (requests, reference, margins),
cases/<case>.safetensors (the large arrays), and for sampled cases cases/<case>.paths.safetensors (1,000 upstream
paths per series, for totoc's distribution tests).

Inputs: real daily OHLCV rows (tests/fixtures/kronos/inputs/stocks_ohlcv.csv, cut from bokeh-sampledata by
kronos_inputs.py) and seeded synthetic 15-minute bars (so minute and hour vary). **Margins**: a case is accepted only
if every encode z is far from 0 and every decision (greedy: the top-2 logit gap; sampled: the choice under the
recorded noise, and the top-k / top-p cut near it) is far from flipping, both at least MARGIN_FACTOR (100) times the
worst drift kernel_drift.py measured (DRIFT); otherwise the next candidate input is tried (a daily window one
trading day earlier, the next synthetic seed). The chosen candidate and the smallest margins are recorded.

Deterministic: numpy PCG64 weights and inputs, torch on one thread with its kernels pinned (kernels.py), f32 values
in Python's shortest repr, sorted JSON. --check: checkpoints and requests byte-identical; tokens identical; every
other number within TAUS[class]·(unit + |b|) (live_check.py); --only CONFIG/CASE,... and --report as for Toto.
"""

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kernels  # noqa: E402

kernels.pin()  # before anything imports torch: MKL and ATen read their kernel settings once
import kronos_inputs  # noqa: E402
import live_check  # noqa: E402
import make_kronos_checkpoints as make_checkpoints  # noqa: E402
import regen_fixtures as v1  # noqa: E402  (JSON, hashing and perturbation helpers)
from run_kronos_reference import DRIFT, MARGIN_FACTOR  # noqa: E402  (the near-tie margins: docs there)

REPO = os.path.dirname(os.path.dirname(HERE))
FIXTURES = os.path.join(REPO, "tests", "fixtures", "kronos")
INPUTS = os.path.join(FIXTURES, "inputs", "stocks_ohlcv.csv")
PATHS = 1000  # upstream paths per series of a sampled case
MAX_CANDIDATES = 60
QUANTILES = [0.1, 0.5, 0.9]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- inputs


def stocks():
    """ticker -> {"date": [...], "open": [...], ...} from the committed extract (values as written there)."""
    out = {}
    with open(INPUTS) as f:
        head = f.readline().strip().split(",")
        for line in f:
            row = dict(zip(head, line.strip().split(",")))
            d = out.setdefault(row["ticker"], {k: [] for k in head[1:]})
            d["date"].append(row["date"])
            for k in head[2:]:
                d[k].append(float(row[k]))
    return out


def daily(ticker, n, h, columns=("open", "high", "low", "close", "volume")):
    """A spec of a daily series: the n trading days before the last h of the extract, moved one day earlier per
    candidate; its future stamps are the real next trading days."""
    return {"kind": "daily", "ticker": ticker, "n": n, "h": h, "columns": list(columns)}


def intraday(seed, n, h, columns=("open", "high", "low", "close", "volume", "amount"), zulu=False):
    """A spec of a synthetic 15-minute series (09:30-15:45 on weekdays) from PCG64(seed + candidate)."""
    return {"kind": "intraday", "seed": seed, "n": n, "h": h, "columns": list(columns), "zulu": zulu}


def series_request(spec, candidate, case):
    """The request of one series spec for a candidate (before the case's sampling and window fields)."""
    n, h = spec["n"], spec["h"]
    if spec["kind"] == "daily":
        d = STOCKS[spec["ticker"]]
        end = len(d["date"]) - candidate
        start = end - h - n
        assert start >= 0, f"{spec['ticker']}: not enough rows for candidate {candidate}"
        stamps = [f"{x}T00:00:00" for x in d["date"][start:end]]
        # the extract has no amount: a daily series that gives one uses volume x close, to the cent
        d = dict(d, amount=[round(v * c, 2) for v, c in zip(d["volume"], d["close"])])
        values = {c: d[c][start : start + n] for c in spec["columns"]}
        ident = spec["ticker"]
    else:
        dts, cols = kronos_inputs.bars(spec["seed"] + candidate, n + h)
        stamps = [kronos_inputs.stamp_text(x, spec["zulu"]) for x in dts]
        values = {c: cols[c][:n] for c in spec["columns"]}
        ident = f"bars{spec['seed'] + candidate}"
    return {
        "id": ident,
        "columns": spec["columns"],
        "target": [values[c] for c in spec["columns"]],
        "timestamps": stamps[:n],
        "future_timestamps": stamps[n:],
        "horizon": h,
        "seed": case.get("seed", 7),
        "params": {"max_context": case["max_context"], "clip": case.get("clip", 5.0)},
    }


def case_requests(case, candidate):
    reqs = []
    for i, spec in enumerate(case["series"]):
        r = series_request(spec, candidate, case)
        if case["call"] == "ragged":
            r["seed"] = case.get("seed", 7) + i
        r["samples"] = case.get("samples", 0)
        if r["samples"]:
            r["quantiles"] = QUANTILES
            for k in ("temperature", "top_k", "top_p"):
                if k in case:
                    r[k] = case[k]
        reqs.append(r)
    return reqs


STOCKS = stocks()

# config -> case -> spec. call: predict (one series), predict_batch (one upstream call, equal lengths), ragged (one
# predict call per series, each seeded with its own request seed).
CASES = {
    "k10": {
        # no slide (64 + 16 <= 128)
        "greedy_daily": {"call": "predict", "series": [daily("GOOG", 64, 16)], "max_context": 128},
        # encode over all 150 rows, window the last 64: every step a full slid window
        "window_cut": {"call": "predict", "series": [daily("AAPL", 150, 12)], "max_context": 64},
        # 56 + 16 > 64: steps 0-8 grow the window, steps 9-15 slide (upstream's 400 + 120 pattern)
        "slide": {"call": "predict", "series": [daily("MSFT", 56, 16)], "max_context": 64},
        "topp_t07": {"call": "predict", "series": [daily("IBM", 48, 8)], "max_context": 64, "samples": 3,
                     "temperature": 0.7, "top_p": 0.9, "seed": 11},
    },
    "k4": {
        "greedy_intraday": {"call": "predict", "series": [intraday(401, 80, 24)], "max_context": 96},
        # `Z` stamps: the wall clock as written
        "topk5": {"call": "predict", "series": [intraday(421, 60, 8, zulu=True)], "max_context": 64, "samples": 1,
                  "top_k": 5, "seed": 12},
        "unfiltered": {"call": "predict", "series": [daily("MSFT", 50, 8)], "max_context": 48, "samples": 1,
                       "temperature": 1.0, "top_p": 1.0, "seed": 13},
        "samples4": {"call": "predict", "series": [daily("GOOG", 40, 8)], "max_context": 64, "samples": 4,
                     "temperature": 1.0, "top_p": 0.9, "seed": 14},
        # three lengths and horizons; OHLC only (volume = amount = 0, zero-std columns), 15-minute bars, daily
        "ragged": {"call": "ragged", "max_context": 48, "series": [
            daily("GOOG", 30, 6), intraday(441, 70, 12), daily("AAPL", 45, 9, columns=("open", "high", "low", "close"))
        ]},
        # one upstream predict_batch call; IBM gives amount without volume (upstream zeroes both)
        "batch": {"call": "predict_batch", "max_context": 64, "series": [
            daily("GOOG", 40, 8), daily("AAPL", 40, 8), daily("IBM", 40, 8, columns=("open", "high", "low", "close",
                                                                                   "amount"))
        ]},
    },
    "k5g5": {
        # columns in another order; clip 2 cuts real values
        "greedy_daily": {"call": "predict", "max_context": 48, "clip": 2.0,
                         "series": [daily("IBM", 60, 12, columns=("close", "open", "volume", "high", "low"))]},
        "topp_t07": {"call": "predict", "series": [intraday(501, 50, 8)], "max_context": 64, "samples": 1,
                     "temperature": 0.7, "top_p": 0.9, "seed": 15},
    },
    "k6te": {
        "greedy_intraday": {"call": "predict", "series": [intraday(601, 100, 16)], "max_context": 64},
    },
}


# ----------------------------------------------------------------------------- generation


def margin_report(margins):
    """The smallest margins of a case over its series, and their ratio to MARGIN_FACTOR x DRIFT (>= 1: accepted)."""
    z = min(m["z"] for m in margins)
    dec = min(min(m["s1"], m["s2"]) for m in margins)
    return {
        "z": z,
        "decision": dec,
        "z_over_drift": z / DRIFT["z"],
        "decision_over_drift": dec / DRIFT["logits"],
        "series": [{k: m[k] for k in ("z", "s1", "s2")} for m in margins],
    }


def accepted(report):
    return report["z_over_drift"] >= MARGIN_FACTOR and report["decision_over_drift"] >= MARGIN_FACTOR


def generate_case(model, tokenizer, config, name, case, candidate=None, perturb=None):
    """(requests, reference, arrays, margin report, candidate). candidate None: search from 0 for the first one
    whose margins are accepted; else regenerate that one (the check), whatever its margins."""
    import run_kronos_reference as runner

    kind, size = v1.parse_perturb(perturb)
    tries = [candidate] if candidate is not None else range(MAX_CANDIDATES)
    for k in tries:
        reqs = case_requests(case, k)
        fed = [v1.perturb_request(r, kind, size) if i == 0 else r for i, r in enumerate(reqs)]
        ref, arrays, margins = runner.run(model, tokenizer, case["call"], fed)
        report = margin_report(margins)
        if candidate is not None or accepted(report):
            return reqs, ref, arrays, report, k
        log(f"  {config}/{name}: candidate {k} rejected (z {report['z_over_drift']:.3g}x, decisions "
            f"{report['decision_over_drift']:.3g}x the drift; need {MARGIN_FACTOR}x)")
    raise RuntimeError(f"{config}/{name}: no candidate in {MAX_CANDIDATES} has margins of {MARGIN_FACTOR}x the drift")


def paths_arrays(model, tokenizer, reqs):
    import run_kronos_reference as runner

    return {f"series.{b}.paths": runner.run_paths(model, tokenizer, r, PATHS) for b, r in enumerate(reqs)}


def write_arrays(arrays, path):
    from safetensors.numpy import save_file

    save_file(arrays, path)


def committed_candidates(root):
    """config/case -> the candidate the committed fixtures chose (the check regenerates exactly those)."""
    out = {}
    for config, cases in CASES.items():
        for name in cases:
            p = os.path.join(root, config, "cases", name + ".json")
            if os.path.exists(p):
                with open(p) as f:
                    out[f"{config}/{name}"] = json.load(f)["candidate"]
    return out


def generate(out_root, work, only=None, perturb=None, candidates=None, paths=True, paths_sha=None):
    """Writes the fixtures under out_root (checkpoint files under work first); `candidates` (config/case ->
    candidate) regenerates those inputs instead of searching; `paths` False skips the 1,000-path files, and
    provenance.json then carries their digests from `paths_sha` (config/case -> sha256; the check verifies the
    committed files against them)."""
    import torch

    import run_kronos_reference as runner

    torch.set_num_threads(1)
    prov = {
        "generator": "tests/reference/regen_kronos_fixtures.py",
        "oracle": "kronos-finance 0.1.5 KronosPredictor.predict / predict_batch, eval mode, strict load, CPU, "
        "torch.manual_seed(request seed) before each call",
        "versions": {
            "python": platform.python_version(),
            "kronos-finance": v1._pkg_version("kronos-finance"),
            "torch": torch.__version__,
            "numpy": np.__version__,
            "pandas": v1._pkg_version("pandas"),
            "safetensors": v1._pkg_version("safetensors"),
        },
        "kernels": kernels.describe_setting(),
        "torch_threads": 1,
        "margins": {"factor": MARGIN_FACTOR, "drift": DRIFT},
        "inputs": {"stocks_ohlcv.csv": v1.sha256_file(INPUTS), "intraday": "kronos_inputs.bars(seed), synthetic"},
        "checkpoints": {},
        "cases": {},
    }
    kind, size = v1.parse_perturb(perturb)
    for config, cases in CASES.items():
        names = [c for c in cases if only is None or f"{config}/{c}" in only]
        if not names:
            continue
        t0 = time.time()
        c = make_checkpoints.CONFIGS[config]
        dirs = make_checkpoints.write_checkpoint(config, os.path.join(work, config))
        entry = {"seed": c["seed"], "what": c["what"]}
        for part in make_checkpoints.PARTS:
            os.makedirs(os.path.join(out_root, config, part), exist_ok=True)
            files = {}
            for file in ("config.json", "model.safetensors"):
                shutil.copyfile(os.path.join(dirs[part], file), os.path.join(out_root, config, part, file))
                files[file] = v1.sha256_file(os.path.join(dirs[part], file))
            files["parameters"] = make_checkpoints.parameter_count(make_checkpoints.specs_of(config)[part])
            entry[part] = files
        prov["checkpoints"][config] = entry
        with tempfile.TemporaryDirectory(dir=work) as tmp:
            bad = make_checkpoints.same_as_save_pretrained(config, dirs, tmp)
        assert not bad, f"not the layout save_pretrained writes: {bad}"
        if kernels.setting() == "pinned":
            assert not make_checkpoints.torch_inv_freq_agrees(config), f"{config}: inv_freq differs from torch's"
        model, tokenizer = runner.load(dirs["predictor"], dirs["tokenizer"])
        if kind == "weight":
            perturb_weight(model, size)
        os.makedirs(os.path.join(out_root, config, "cases"), exist_ok=True)
        for name in names:
            key = f"{config}/{name}"
            case = cases[name]
            reqs, ref, arrays, report, k = generate_case(
                model, tokenizer, config, name, case, (candidates or {}).get(key), perturb
            )
            base = os.path.join(out_root, config, "cases", name)
            doc = {"call": case["call"], "candidate": k, "requests": reqs, "reference": ref, "margins": report}
            with open(base + ".json", "w") as f:
                f.write(v1.dumps(doc))
            write_arrays(arrays, base + ".safetensors")
            sha = None
            if case.get("samples", 0) and paths:
                write_arrays(paths_arrays(model, tokenizer, reqs), base + ".paths.safetensors")
                sha = v1.sha256_file(base + ".paths.safetensors")
            elif case.get("samples", 0):
                sha = (paths_sha or {}).get(key)
            prov["cases"][key] = {
                "request_sha256": v1.sha256_bytes(v1.dumps(reqs).encode()),
                "reference_sha256": v1.sha256_bytes(v1.dumps(ref).encode()),
                "arrays_sha256": v1.sha256_file(base + ".safetensors"),
                "paths_sha256": sha,
                "candidate": k,
                "min_margin_over_drift": {"z": report["z_over_drift"], "decision": report["decision_over_drift"]},
            }
        log(f"kronos {config}: {len(names)} cases in {time.time() - t0:.1f}s")
    if only is None:
        with open(os.path.join(out_root, "provenance.json"), "w") as f:
            f.write(json.dumps(prov, sort_keys=True, indent=2) + "\n")
    return prov


# ----------------------------------------------------------------------------- perturbations (test_live_checks.py)

# The tensor whose largest-magnitude weight the weight perturbation scales: the s1 head moves one logit of every step.
PERTURBED_WEIGHT = "head.proj_s1.weight"


def perturb_weight(model, size):
    import torch

    p = dict(model.named_parameters())[PERTURBED_WEIGHT]
    with torch.no_grad():
        flat = p.view(-1)
        i = int(flat.abs().argmax())
        flat[i] *= 1.0 + size
    log(f"perturbed {PERTURBED_WEIGHT}[{i}] x (1 + {size:g})")


# ----------------------------------------------------------------------------- check

# τ per quantity class (live_check.py): SAFETY_FACTOR (4) x the worst drift kernel_drift.py measured over the kernel
# settings and two qemu-emulated CPUs, rounded up (tests/reference/kernel_drift_kronos.json; worst: z 1.19e-6
# cbwr-only, logits 5.6e-7 aten-default, rows 2.2e-7 aten-default, stats and noise 0 everywhere: for those τ is one
# f32 ulp, 2^-23 ≈ 1.2e-7, rounded up, so another CPU's numpy may round a last bit differently).
TAUS = {
    "stats": 2e-7,  # normalisation mean/std and the fed rows (numpy; units: the column's std + 1e-5)
    "z": 5e-6,  # encode z (units: the series' z RMS)
    "logits": 3e-6,  # s1 and s2 logits of every step and row (unit 1)
    "rows": 9e-7,  # decoded rows, normalised (unit 1) and de-normalised (units: the column's std + 1e-5)
    "noise": 2e-7,  # the recorded Exp(1) noise (relative)
}
TOKENS = "tokens"  # exact: a differing token fails with |diff|/tolerance inf


class TokenTally(live_check.Tally):
    """A Tally that also holds exact quantities (tokens: a differing one fails with |diff|/tolerance inf) and
    whole arrays (the worst element of each goes through `add`, the others over τ are counted)."""

    def __init__(self, taus):
        super().__init__(taus)
        self.tokens = []  # (path, regenerated, committed) of the first differing token of each token list
        self.tokens_over = 0
        self.extra_over = 0  # array elements over τ besides each array's worst

    def token_list(self, path, a, b):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            raise live_check.Mismatch(f"{path}: length differs")
        diff = np.argwhere(a != b)
        if len(diff):
            i = tuple(int(v) for v in diff[0])
            self.tokens.append((f"{path}{list(i)}", int(a[i]), int(b[i])))
            self.tokens_over += len(diff)

    def add_array(self, cls, path, a, b, unit):
        """Every element of b (committed) against a (regenerated); unit broadcasts against b."""
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        unit = np.broadcast_to(np.asarray(unit, np.float64), b64.shape)
        m = np.abs(a64 - b64) / (unit + np.abs(b64))
        i = np.unravel_index(int(np.argmax(m)), b64.shape) if m.size else None
        if i is None:
            return
        self.add(cls, f"{path}{[int(v) for v in i]}", float(a64[i]), float(b64[i]), float(unit[i]))
        self.extra_over += int((m > self.taus[cls]).sum()) - (1 if m[i] > self.taus[cls] else 0)

    def merge(self, other):
        super().merge(other)
        self.tokens += other.tokens
        self.tokens_over += other.tokens_over
        self.extra_over += other.extra_over

    def failure(self):
        if self.tokens:
            path, a, b = self.tokens[0]
            return (f"{path} ({TOKENS}): {a!r} (regenerated) vs {b!r} (committed), |diff|/tolerance inf "
                    f"(tokens are exact); {self.tokens_over} token(s) differ")
        bad = super().failure()
        if bad and self.extra_over:
            bad += f" (and {self.extra_over} more array element(s))"
        return bad

    def ratio(self):
        if self.tokens:
            return float("inf"), self.tokens[0][0]
        return super().ratio()


# array name -> (class, unit): "col" the column's std + 1e-5, "z" the series' z RMS, "one" 1, "zero" relative
ARRAYS = {
    "x": ("stats", "col"),
    "x_norm": ("rows", "one"),
    "z": ("z", "z"),
    "s1_logits": ("logits", "one"),
    "s2_logits": ("logits", "one"),
    "s1_noise": ("noise", "zero"),
    "s2_noise": ("noise", "zero"),
    "paths": ("rows", "col"),
}


def array_unit(kind, series):
    if kind == "col":
        return np.asarray(series["stats"]["std"], np.float64) + 1e-5
    if kind == "z":
        return series["meta"]["z_unit"]
    return 1.0 if kind == "one" else 1e-30


def compare_arrays(t, a, b, series_refs, label):
    """Every element of the committed arrays b against the regenerated a (same names, shapes, dtypes)."""
    if sorted(a) != sorted(b):
        raise live_check.Mismatch(f"{label}: array names differ ({sorted(set(a) ^ set(b))})")
    for key in sorted(b):
        x, y = a[key], b[key]
        if x.shape != y.shape or x.dtype != y.dtype:
            raise live_check.Mismatch(f"{label}:{key}: shape/dtype {x.shape} {x.dtype} vs {y.shape} {y.dtype}")
        _, s, name = key.split(".")
        path = f"reference.arrays.{key}"
        if name == "stamps":  # integers: exact
            if not np.array_equal(x, y):
                raise live_check.Mismatch(f"{path}{np.argwhere(x != y)[0].tolist()}: stamp features differ")
            continue
        cls, kind = ARRAYS[name]
        t.add_array(cls, path, x, y, array_unit(kind, series_refs[int(s)]))


def compare_series(t, a, b, path):
    """One series' reference JSON: tokens and meta exact (z_unit by class), every other number by class."""
    if sorted(a) != sorted(b):
        raise live_check.Mismatch(f"{path}: keys differ")
    col_unit = [s + 1e-5 for s in b["stats"]["std"]]
    for key in sorted(b):
        if key in ("encode", "tokens"):
            if sorted(a[key]) != sorted(b[key]):
                raise live_check.Mismatch(f"{path}.{key}: keys differ")
            for part in sorted(b[key]):
                t.token_list(f"{path}.{key}.{part}", a[key][part], b[key][part])
        elif key == "meta":
            ma, mb = dict(a["meta"]), dict(b["meta"])
            za, zb = ma.pop("z_unit"), mb.pop("z_unit")
            if ma != mb:
                raise live_check.Mismatch(f"{path}.meta: {ma} (regenerated) vs {mb} (committed)")
            t.add("z", f"{path}.meta.z_unit", za, zb, zb)
        else:
            for p, idx, x, y in live_check.numbers(a[key], b[key], f"{path}.{key}"):
                if key == "stats":  # {mean, std}[column]
                    t.add("stats", p, x, y, col_unit[idx[0]])
                elif key in ("paths_norm", "mean_norm"):
                    t.add("rows", p, x, y, 1.0)
                elif key in ("paths", "output"):  # [..][H][column]; totoc's: 1e-4·σ + 1e-6·|ref|
                    # (a zero-std column, e.g. a missing volume, comes back as pred·1e-5: no σ to compare with)
                    c, sd = idx[-1], b["stats"]["std"][idx[-1]]
                    t.add("rows", p, x, y, col_unit[c], 1e-4 * sd + 1e-6 * abs(y) if sd > 0 else None)
                else:
                    raise live_check.Mismatch(f"{p}: a number outside the compared outputs")


def compare_case(cn, co, arrays_n, arrays_o, label):
    t = TokenTally(TAUS)
    if cn["call"] != co["call"] or v1.dumps(cn["requests"]) != v1.dumps(co["requests"]):
        raise live_check.Mismatch("requests: not byte-identical")
    sa, sb = cn["reference"]["series"], co["reference"]["series"]
    if len(sa) != len(sb):
        raise live_check.Mismatch("reference.series: length differs")
    for i, (x, y) in enumerate(zip(sa, sb)):
        compare_series(t, x, y, f"reference.series[{i}]")
    compare_arrays(t, arrays_n, arrays_o, sb, label)
    return t


def load_arrays(path):
    from safetensors.numpy import load_file

    return load_file(path)


def check(committed_root, only=None, perturb=None, report=None, paths=False):
    """Regenerates (the committed candidates) and compares; returns (exit code, [failures], merged Tally)."""
    failures = []
    total = TokenTally(TAUS)
    log(kernels.describe())
    with tempfile.TemporaryDirectory(prefix="totoc-kronos-fixtures-") as tmp:
        new_root = os.path.join(tmp, "fixtures")
        work = os.path.join(tmp, "work")
        os.makedirs(work)
        with open(os.path.join(committed_root, "provenance.json")) as f:
            committed_paths = {k: c.get("paths_sha256") for k, c in json.load(f)["cases"].items()}
        generate(new_root, work, only, perturb, committed_candidates(committed_root), paths, committed_paths)
        rel_files = set()
        for root_dir in (new_root, committed_root):
            for d, _, files in os.walk(root_dir):
                for f in files:
                    rel_files.add(os.path.relpath(os.path.join(d, f), root_dir))
        # inputs/ belongs to kronos_inputs.py (checked against bokeh-sampledata by its own --check)
        rel_files = {r for r in rel_files if not r.startswith("inputs" + os.sep)}
        if only is not None:
            rel_files = {r for r in rel_files if case_key(r) in only}
        if not paths:
            rel_files = {r for r in rel_files if not r.endswith(".paths.safetensors")}
            check_paths_committed(committed_root, only, failures)
        for rel in sorted(rel_files):
            new, old = os.path.join(new_root, rel), os.path.join(committed_root, rel)
            if not os.path.exists(old):
                failures.append(f"{rel}: missing from the committed fixtures")
                continue
            if not os.path.exists(new):
                failures.append(f"{rel}: committed but no longer generated (stale)")
                continue
            with open(new, "rb") as f:
                nb = f.read()
            with open(old, "rb") as f:
                ob = f.read()
            if rel == "provenance.json":
                check_provenance(json.loads(nb), json.loads(ob), failures)
                print(f"{'bit-identical' if nb == ob else 'differs (hashes only)':>14}  kronos/{rel}")
            elif "/cases/" not in rel:  # checkpoint files
                print(f"{'bit-identical' if nb == ob else 'DIFFERENT':>14}  kronos/{rel}")
                if nb != ob:
                    failures.append(f"{rel}: checkpoint file is not byte-identical")
            elif rel.endswith(".paths.safetensors"):
                with open(os.path.join(committed_root, rel.replace(".paths.safetensors", ".json"))) as f:
                    refs = json.load(f)["reference"]["series"]
                live_check.judge(f"kronos/{rel}", lambda: compare_paths(load_arrays(new), load_arrays(old), refs, rel),
                                 nb == ob, total, failures)
            elif rel.endswith(".json"):
                base_n, base_o = new[: -len(".json")], old[: -len(".json")]
                cn, co = json.loads(nb), json.loads(ob)
                same = nb == ob and file_bytes(base_n + ".safetensors") == file_bytes(base_o + ".safetensors")
                live_check.judge(
                    f"kronos/{rel}",
                    lambda: compare_case(cn, co, load_arrays(base_n + ".safetensors"),
                                         load_arrays(base_o + ".safetensors"), rel),
                    same,
                    total,
                    failures,
                )
    if report:
        live_check.write_report(report, "kronos", total)
        with open(report) as f:
            doc = json.load(f)
        doc["tokens_differ"] = total.tokens_over  # kernel_drift.py: no kernel setting may flip a token
        with open(report, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
    if failures:
        print("\nKRONOS FIXTURE CHECK FAILED:", file=sys.stderr)
        for f in failures:
            print("  " + f, file=sys.stderr)
        print("regenerate with tests/reference/regen_kronos_fixtures.sh if the change is intended", file=sys.stderr)
        return 1, failures, total
    print("kronos fixture check passed")
    return 0, failures, total


def file_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def case_key(rel):
    """config/case of a fixture file's relative path (None for checkpoint files and provenance)."""
    parts = rel.split(os.sep)
    if len(parts) != 3 or parts[1] != "cases":
        return None
    return f"{parts[0]}/{parts[2].split('.')[0]}"


def check_paths_committed(root, only, failures):
    """Without --paths: every sampled case has its paths file, with the digest provenance.json records."""
    with open(os.path.join(root, "provenance.json")) as f:
        prov = json.load(f)
    for config, cases in CASES.items():
        for name, case in cases.items():
            key = f"{config}/{name}"
            if (only is not None and key not in only) or not case.get("samples", 0):
                continue
            p = os.path.join(root, config, "cases", name + ".paths.safetensors")
            if not os.path.exists(p):
                failures.append(f"{key}: the 1,000-path file is missing")
            elif v1.sha256_file(p) != prov["cases"].get(key, {}).get("paths_sha256"):
                failures.append(f"{key}: the 1,000-path file is not the one provenance.json records")


def compare_paths(a, b, series_refs, rel):
    """1,000 upstream paths per series: each path within τ_rows·(std + 1e-5 + |b|) of the committed one, except that
    a path whose tokens flipped on other kernels (no margins are enforced over 1,000 random paths) may differ: at
    most 1% of them."""
    t = TokenTally(TAUS)
    if sorted(a) != sorted(b):
        raise live_check.Mismatch(f"{rel}: array names differ")
    for key in sorted(b):
        x, y = a[key].astype(np.float64), b[key].astype(np.float64)
        if x.shape != y.shape:
            raise live_check.Mismatch(f"{rel}:{key}: shape differs")
        unit = array_unit("col", series_refs[int(key.split(".")[1])])
        per_path = (np.abs(x - y) / (unit + np.abs(y))).reshape(x.shape[0], -1).max(axis=1)
        flipped = per_path > TAUS["rows"]
        if flipped.sum() > 0.01 * x.shape[0]:
            raise live_check.Mismatch(f"{rel}:{key}: {int(flipped.sum())} of {x.shape[0]} paths differ beyond τ "
                                      "(at most 1% may flip a token)")
        kept = np.where(flipped, -1.0, per_path)
        i = int(np.argmax(kept))
        t.add("rows", f"reference.paths.{key}[{i}]", float(per_path[i]), 0.0, 1.0)
    return t


def check_provenance(pn, po, failures):
    if pn["versions"] != po["versions"]:
        log(f"note: versions differ: regenerated {pn['versions']} vs committed {po['versions']}")
    if pn["checkpoints"] != po["checkpoints"]:
        failures.append("provenance.json: checkpoints differ")
    for k in sorted(set(pn["cases"]) | set(po["cases"])):
        if pn["cases"].get(k, {}).get("request_sha256") != po["cases"].get(k, {}).get("request_sha256"):
            failures.append(f"provenance.json: cases.{k}.request_sha256 differs")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare a fresh regeneration with the committed fixtures")
    ap.add_argument("--paths", action="store_true", help="--check: also regenerate and compare the 1,000 paths")
    ap.add_argument("--out", default=FIXTURES, help="fixture root (default: tests/fixtures/kronos)")
    ap.add_argument("--report", help="--check: also write the worst drift per quantity class as JSON here")
    ap.add_argument("--only", help="--check: only these cases, comma-separated CONFIG/CASE (e.g. k10/slide)")
    a = ap.parse_args(argv)
    t0 = time.time()
    only = a.only and set(a.only.split(","))
    if a.check:
        rc, _, _ = check(a.out, only=only, report=a.report, paths=a.paths)
        log(f"kronos check took {time.time() - t0:.1f}s")
        return rc
    parent = os.path.dirname(os.path.abspath(a.out))
    os.makedirs(a.out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".kronos-fixtures-", dir=parent)
    try:
        work = os.path.join(tmp, "work")
        os.makedirs(work)
        generate(os.path.join(tmp, "fixtures"), work)
        for name in list(CASES) + ["provenance.json"]:
            dst = os.path.join(a.out, name)
            if os.path.isdir(dst):
                shutil.rmtree(dst)
            os.replace(os.path.join(tmp, "fixtures", name), dst)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log(f"wrote {a.out} in {time.time() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
