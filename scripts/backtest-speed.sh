#!/usr/bin/env bash
# Backtest speed at base size: 1 series × WINDOWS windows (context 512, horizon 64, one step apart; AAPL's daily
# closes) through a base-size random-weight Toto 1.0 fp32 CPU engine as one packed workload, on the mean path and
# with 64 sample paths, each against a loop of toto-ts 0.2.0 eager forecasts over the same windows in the same
# invocation (target: ≥ 10× faster); then the engine's packed throughput on 500 independent series of 512 points
# (`totoc forecast`, the same engine, horizon 64) against the backtest's windows/s (target: within 1.25×).
# Then Kronos (issue 35): a Kronos-small-shaped random checkpoint (tests/reference/make_kronos_checkpoints.py
# --config small, configs/kronos-small.yaml), one series (GOOG's daily candles from backtesting.py in the data
# venv, read there, never copied) × KRONOS_WINDOWS windows (default 200) 5 apart, context 256, H 20, greedy,
# against a loop of upstream kronos-finance 0.1.5 `predict` calls in eval mode over the same windows in the same
# invocation (target: ≥ 10×), with the report's speed bound (issue 34's, measured on the engine: the most any
# engine could beat upstream by here). KRONOS=0 skips it; TOTO=0 skips the Toto 1.0 runs.
#
# Usage: scripts/backtest-speed.sh [WORK=/tmp/totoc-backtest-speed] [WINDOWS=500]
# REFERENCE_WINDOWS=M runs toto-ts on M of the windows only (its time per window is what is compared);
# THREADS=N sets CPU threads for totoc and toto-ts alike (default all cores).
set -euo pipefail
work=$(realpath -m "${1:-/tmp/totoc-backtest-speed}")
windows=${2:-500}
cd "$(dirname "$0")/.."
mkdir -p "$work"
say() { echo "== $*" >&2; }

python=$(tests/reference/setup_venv.sh | tail -n 1)
TOTOC_ORT_LIB=${TOTOC_ORT_LIB:-$(scripts/fetch-onnxruntime.sh)}
export TOTOC_ORT_LIB
# TOTOC_BIN: a totoc binary to use instead of building this tree's release binary
if [ -n "${TOTOC_BIN:-}" ]; then
  totoc=$TOTOC_BIN
else
  cargo build --release -q -p totoc
  totoc=${CARGO_TARGET_DIR:-target}/release/totoc
fi
threads=${THREADS:-$(nproc)}
ref_windows=()
if [ -n "${REFERENCE_WINDOWS:-}" ]; then ref_windows=(--reference-windows "$REFERENCE_WINDOWS"); fi

if [ "${TOTO:-1}" != 0 ]; then
ckpt=$work/base-ckpt
if [ ! -f "$ckpt/model.safetensors" ]; then
  say "making a base-size random checkpoint (tests/reference/make_checkpoints.py --config base)"
  "$python" tests/reference/make_checkpoints.py --config base --out "$ckpt" >&2
fi
engine=$work/engine-fp32
if [ ! -f "$engine/manifest.json" ]; then
  say "export + build-engine (fp32)"
  "$totoc" export --checkpoint "$ckpt" --config configs/toto-base-backtest.yaml --out "$work/bundle" --force >&2
  "$totoc" build-engine --artifacts "$work/bundle" --out "$engine" --force >&2
fi
awk -F, 'NR == 1 || $1 == "AAPL"' tests/fixtures/data/stocks_long.csv >"$work/aapl.csv"

for samples in 0 64; do
  say "backtest: 1 series × $windows windows, context 512, horizon 64, samples $samples, vs a toto-ts loop"
  "$totoc" backtest --engine fp32="$engine" --input "$work/aapl.csv" --horizon 64 --windows "$windows" --step 1 \
    --context 512 --samples "$samples" --reference-checkpoint "$ckpt" --reference-python "$python" \
    "${ref_windows[@]}" --threads "$threads" 2>&1 | tee "$work/backtest-s$samples.txt" |
    grep -E "windows/s|s per window|x the reference" >&2
done

say "packed throughput: 500 independent series of 512 points, horizon 64 (totoc forecast)"
"$python" - "$work/series500.csv" <<'PY'
import math, sys
with open(sys.argv[1], "w") as f:
    f.write("unique_id,ds,y\n")
    for s in range(500):
        for t in range(512):
            y = 100 + 0.05 * t + 10 * math.sin(2 * math.pi * t / 24 + s) + ((s * 7919 + t * 104729) % 1000) / 500
            f.write(f"s{s},{t},{y:.4f}\n")
PY
"$totoc" forecast --engine "$engine" --input "$work/series500.csv" --horizon 64 --threads "$threads" \
  --output "$work/forecast500.csv" 2>&1 | tee "$work/forecast500.txt" | grep -E "series/s" >&2

# The figures: the backtest's windows/s (mean path) against the packed series/s.
bt=$(grep -oE '[0-9.]+ windows/s' "$work/backtest-s0.txt" | head -n 1 | cut -d' ' -f1)
fc=$(grep -oE '[0-9.]+ series/s' "$work/forecast500.txt" | head -n 1 | cut -d' ' -f1)
for s in 0 64; do
  echo "samples $s: $(grep -E 'x the reference' "$work/backtest-s$s.txt")"
done
python3 -c "import sys; b, f = float(sys.argv[1]), float(sys.argv[2]); print(f'backtest {b} windows/s vs packed {f} series/s: {f / b:.2f}x (target <= 1.25x)')" "$bt" "$fc"
fi

if [ "${KRONOS:-1}" != 0 ]; then
  kwindows=${KRONOS_WINDOWS:-200}
  kck=$work/kronos-small-ckpt
  if [ ! -f "$kck/predictor/model.safetensors" ]; then
    say "making a Kronos-small-shaped random checkpoint (tests/reference/make_kronos_checkpoints.py --config small)"
    "$python" tests/reference/make_kronos_checkpoints.py --config small --out "$kck" >&2
  fi
  kengine=$work/kronos-engine
  if [ ! -f "$kengine/manifest.json" ]; then
    say "Kronos export + build-engine (configs/kronos-small.yaml)"
    "$totoc" export --checkpoint "$kck/predictor" --tokenizer "$kck/tokenizer" --config configs/kronos-small.yaml \
      --out "$work/kronos-bundle" --force >&2
    "$totoc" build-engine --artifacts "$work/kronos-bundle" --out "$kengine" --force >&2
  fi
  data_python=$(tests/data/setup_venv.sh | tail -n 1)
  "$data_python" - "$work/goog.csv" <<'PY'
import importlib.util, os, sys
src = os.path.join(importlib.util.find_spec("backtesting").submodule_search_locations[0], "test", "GOOG.csv")
with open(src) as f, open(sys.argv[1], "w") as out:
    next(f)
    out.write("ds,open,high,low,close,volume\n")
    out.writelines(f)
PY
  say "Kronos backtest: 1 series × $kwindows windows (step 5), context 256, H 20, greedy, vs upstream eval predict"
  "$totoc" backtest --engine kronos="$kengine" --input "$work/goog.csv" --target-columns close --horizon 20 \
    --windows "$kwindows" --step 5 --context 256 --samples 0 --reference-checkpoint "$kck/predictor" \
    --reference-tokenizer "$kck/tokenizer" --reference-python "$python" "${ref_windows[@]}" --threads "$threads" \
    2>&1 | tee "$work/backtest-kronos.txt" | grep -E "windows/s|s per window|x the reference|x the bound|verdict" >&2
  echo "kronos greedy: $(grep -E 'x the reference' "$work/backtest-kronos.txt") (target >= 10x)"
  # the bound (issue 34's: full-pass tokens at the engine's prefill throughput + cached-step bytes over the read
  # bandwidth): how far the engine is from it, and the most any engine could beat upstream by here
  echo "kronos bound: $(grep -E 'x the bound' "$work/backtest-kronos.txt")"
fi
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | \
  sed 's/^ *//'), $(nproc) cores"
