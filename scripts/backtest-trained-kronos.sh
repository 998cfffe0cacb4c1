#!/usr/bin/env bash
# The Kronos trained here (tests/fixtures/trained/kronos-1m; docs/training.md, "Kronos") backtested on the held-out
# daily candles of the corpus it was trained on (tests/training/build_kronos_corpus.py; bokeh-sampledata's AAPL,
# GOOG, IBM, MSFT, split-adjusted): the last 20% of each stock's rows (IBM: all of them, it is held out whole), 50
# windows per stock one grid step (STEP=5 trading days) apart, H = 20, context 256, scored on `close`, beside the
# Toto 2.0 4m trained here (tests/fixtures/trained/toto2-4m, reading close) and the naive baselines. Upstream
# Kronos (kronos-finance 0.1.5, reference venv) runs every window as the reference.
#
# `totoc backtest`'s --samples and --reference-mode hold for the whole invocation, so the three views are three
# reports on the same table and windows:
#   1. greedy Kronos + Toto 2.0, upstream in eval mode on every window (the MAE verdict over the windows without a
#      flagged near-tie, the flagged ones listed: upstream's greedy top-2 logit gap or encoded |z| below 100x the
#      measured kernel drift; more than 2% flagged fails the verdict);
#   2. greedy Kronos + Toto 2.0, upstream as from_pretrained leaves it (training mode): each metric's difference;
#   3. Kronos with 32 paths (configs/trained-kronos-1m-paths32.yaml): CRPS, coverage, calibration (no
#      reference: sampled references are two estimates of one distribution, report 1 holds the verdict); then the
#      calibration's coverage and PIT figures recomputed from the paths it wrote (--write-samples) and compared
#      with its metric rows.
#
# A stock whose held-out rows are too few for WINDOWS windows after a 256-row context (GOOG: 430 held-out rows,
# 31 windows) gets the rows just before its held-out part as the lookback of its earliest windows: every forecast
# step still lies in held-out rows, only those windows' contexts reach into training rows (printed below).
#
# Usage: scripts/backtest-trained-kronos.sh [WORK=/tmp/totoc-backtest-trained-kronos]
#   TOTOC_BIN=path   a totoc binary to use (default: build this tree's release binary)
#   PROFILE=debug    build the debug binary instead of release
#   THREADS=N        CPU threads for engines and reference (default: all cores); WINDOWS, STEP as above
#   REPORTS="1 3"    which of the three reports to run (default: all three)
# The engines and the table are kept in WORK and reused.
set -euo pipefail
work=$(realpath -m "${1:-/tmp/totoc-backtest-trained-kronos}")
windows=${WINDOWS:-50}
step=${STEP:-5}
horizon=20
context=256
cd "$(dirname "$0")/.."
mkdir -p "$work"
say() { echo "== $*" >&2; }
reports=" ${REPORTS:-1 2 3} "
wants() { [[ $reports == *" $1 "* ]]; }

ref_python=${TOTOC_REFERENCE_PYTHON:-$HOME/.cache/totoc/reference-venv/bin/python}
data_python=${TOTOC_TRAIN_DATA_PYTHON:-$HOME/.cache/totoc/train-data-venv/bin/python}
[ -x "$data_python" ] || data_python=$(tests/training/setup_data_venv.sh | tail -n 1)
TOTOC_ORT_LIB=${TOTOC_ORT_LIB:-$(scripts/fetch-onnxruntime.sh)}
export TOTOC_ORT_LIB
if [ -n "${TOTOC_BIN:-}" ]; then
  totoc=$TOTOC_BIN
elif [ "${PROFILE:-release}" = debug ]; then
  cargo build -q -p totoc
  totoc=${CARGO_TARGET_DIR:-target}/debug/totoc
else
  cargo build --release -q -p totoc
  totoc=${CARGO_TARGET_DIR:-target}/release/totoc
fi
threads=${THREADS:-$(nproc)}

# The engines: the trained Kronos (its own profile: 4 paths; greedy is the same engine), the 32-path profile, Toto 2.0.
build() { # NAME CONFIG [extra export flags]
  local name=$1 config=$2
  shift 2
  if [ ! -f "$work/engine-$name/manifest.json" ]; then
    say "export + build-engine: $name ($config)"
    "$totoc" export --config "$config" --out "$work/bundle-$name" --force "$@" >&2
    "$totoc" build-engine --artifacts "$work/bundle-$name" --out "$work/engine-$name" --force >&2
  fi
}
kronos=tests/fixtures/trained/kronos-1m
build kronos configs/trained-kronos-1m.yaml --checkpoint "$kronos/predictor" --tokenizer "$kronos/tokenizer"
build kronos32 configs/trained-kronos-1m-paths32.yaml --checkpoint "$kronos/predictor" --tokenizer "$kronos/tokenizer"
build toto2 configs/trained-toto2-4m.yaml --checkpoint tests/fixtures/trained/toto2-4m

# The held-out table, from the corpus script (split-adjusted OHLCV; amount left out: Kronos derives it by upstream's
# rule, as the corpus did).
table=$work/heldout-ohlcv.csv
say "held-out table: build_kronos_corpus.py -> $table"
"$data_python" tests/training/build_kronos_corpus.py "$work/corpus" >/dev/null
"$data_python" - "$work/corpus/kronos_corpus.npz" "$table" "$windows" "$step" "$horizon" "$context" <<'PY'
import sys
import numpy as np

npz, out, windows, step, horizon, context = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
d = np.load(npz)
need = context + horizon + (windows - 1) * step  # rows from the first window's context to the last forecast step
with open(out, "w") as f:
    f.write("unique_id,ds,open,high,low,close,volume\n")
    for i, sid in enumerate(d["ids"]):
        if sid not in ("AAPL", "GOOG", "IBM", "MSFT"):
            continue
        a, b, cut = int(d["offsets"][i]), int(d["offsets"][i + 1]), int(d["cuts"][i])
        held = b - a - cut
        fit = (held - context - horizon) // step + 1 if held >= context + horizon else 0
        first = min(a + cut, b - need)
        note = "" if first >= a + cut else (
            f"; its held-out rows fit {fit} windows, so its first {windows - fit} windows' contexts reach "
            f"{a + cut - first} rows into its training rows (every forecast step is held out)")
        print(f"{sid}: {held} held-out rows ({d['stamp_text'][a + cut][:10]} .. {d['stamp_text'][b - 1][:10]}), "
              f"table rows {b - first}{note}", file=sys.stderr)
        for r in range(first, b):
            o, h, lo, c, v = map(float, d["values"][r, :5])
            f.write(f"{sid},{d['stamp_text'][r][:10]},{o!r},{h!r},{lo!r},{c!r},{v!r}\n")
PY

# max_context 96: the trained model's window, given explicitly (the reference also gets the window the engine
# resolved when none is given: the engine's admission writes it into each window's request).
common=(--input "$table" --target-columns close --horizon "$horizon" --windows "$windows" --step "$step"
  --context "$context" --threads "$threads" --param max_context=96)
reference=(--reference-checkpoint "$kronos/predictor" --reference-tokenizer "$kronos/tokenizer"
  --reference-python "$ref_python")

if wants 1; then
say "1/3 totoc backtest: greedy Kronos + Toto 2.0 4m, upstream eval on every window"
"$totoc" backtest --engine kronos-greedy="$work/engine-kronos" --engine toto2-4m="$work/engine-toto2" "${common[@]}" \
  "${reference[@]}" --samples 0 --reference-mode eval --output "$work/greedy.csv" --metrics "$work/greedy-metrics.csv" \
  | tee "$work/report-greedy.txt"
fi

if wants 2; then
say "2/3 totoc backtest: greedy Kronos + Toto 2.0 4m, upstream in training mode (differences, no verdict)"
"$totoc" backtest --engine kronos-greedy="$work/engine-kronos" --engine toto2-4m="$work/engine-toto2" "${common[@]}" \
  "${reference[@]}" --samples 0 --reference-mode train --metrics "$work/train-metrics.csv" | tee "$work/report-train.txt"
fi

if wants 3; then
# --samples reaches only the engines that draw paths: the Toto 2.0 engine runs beside with its quantiles.
say "3/3 totoc backtest: Kronos with 32 paths + Toto 2.0 4m, calibration"
"$totoc" backtest --engine kronos-32paths="$work/engine-kronos32" --engine toto2-4m="$work/engine-toto2" \
  "${common[@]}" --samples 32 --output "$work/paths.csv" --write-samples \
  --metrics "$work/paths-metrics.csv" --plot "$work/paths.svg" | tee "$work/report-paths.txt"

# The calibration figures of report 3 recomputed from its paths (the mid-rank PIT of each actual among the paths,
# docs/formats.md "Backtest metrics"): each must equal its metric row exactly.
say "calibration of report 3 recomputed from $work/paths.csv"
"$data_python" - "$work/paths.csv" "$work/paths-metrics.csv" <<'PY'
import csv
import math
import sys

rows = list(csv.DictReader(open(sys.argv[1])))
metrics = {(r["model"], r["metric"]): float(r["value"]) for r in csv.DictReader(open(sys.argv[2]))
           if r["scope"] == "overall"}
labels = sorted({k.rsplit("-sample-", 1)[0] for k in rows[0] if "-sample-" in k})
same = True
for label in labels:
    m = sum(1 for k in rows[0] if k.startswith(label + "-sample-"))
    us = []
    for r in (r for r in rows if r["y"] != ""):
        y, xs = float(r["y"]), [float(r[f"{label}-sample-{i}"]) for i in range(m)]
        us.append((sum(x < y for x in xs) + 0.5 * sum(x == y for x in xs)) / m)
    n = len(us)
    got = {"pit_points": float(n)}
    for level in (50, 80, 90, 95):
        got[f"path_coverage_{level}"] = sum(0.5 - level / 200 <= u <= 0.5 + level / 200 for u in us) / n
    bins = [0] * 10
    for u in us:
        bins[min(math.floor(u * 10), 9)] += 1
    got.update({f"pit_{k / 10:.1f}-{(k + 1) / 10:.1f}": bins[k] / n for k in range(10)})
    differ = [f"{k}: {v!r} vs report {metrics.get((label, k))!r}" for k, v in got.items() if metrics.get((label, k)) != v]
    same &= not differ
    print(f"{label}: {m} paths, {n} points, coverage "
          + ", ".join(f"{lv}% {got[f'path_coverage_{lv}']:.4f}" for lv in (50, 80, 90, 95))
          + ("; equal to the report's rows" if not differ else "; DIFFERENT: " + "; ".join(differ)))
sys.exit(0 if same else 1)
PY
fi
