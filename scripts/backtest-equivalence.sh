#!/usr/bin/env bash
# "Does compiling change my backtest?" at base size: a real daily price series (AAPL closes, trading days, from
# tests/fixtures/data/stocks_long.csv), WINDOWS rolling windows of horizon 5 one trading day apart, mean
# forecasts, through fp32, fp16-emulation and int8 CPU engines of a base-size random-weight Toto 1.0 checkpoint,
# beside toto-ts 0.2.0 eager on the same windows in the same invocation. Passes when totoc reports that the fp32
# engine's backtest MAE equals toto-ts's within 1e-4 relative; prints the whole report (fp16 and int8 beside it).
#
# Usage: scripts/backtest-equivalence.sh [WORK=/tmp/totoc-backtest-equivalence] [WINDOWS=200]
# (the checkpoint and engines are kept in WORK and reused; THREADS=N sets CPU threads, default all cores)
set -euo pipefail
work=$(realpath -m "${1:-/tmp/totoc-backtest-equivalence}")
windows=${2:-200}
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

ckpt=$work/base-ckpt
if [ ! -f "$ckpt/model.safetensors" ]; then
  say "making a base-size random checkpoint (tests/reference/make_checkpoints.py --config base)"
  "$python" tests/reference/make_checkpoints.py --config base --out "$ckpt" >&2
fi
for p in fp32 fp16 int8; do
  if [ ! -f "$work/engine-$p/manifest.json" ]; then
    say "export + build-engine ($p)"
    "$totoc" export --checkpoint "$ckpt" --config configs/toto-base-backtest.yaml --precision "$p" \
      --out "$work/bundle-$p" --force >&2
    "$totoc" build-engine --artifacts "$work/bundle-$p" --out "$work/engine-$p" --force >&2
  fi
done

# One series: AAPL's daily closes (trading days; the calendar is inferred as weekdays).
awk -F, 'NR == 1 || $1 == "AAPL"' tests/fixtures/data/stocks_long.csv >"$work/aapl.csv"

say "totoc backtest: $windows windows, fp32 / fp16 / int8 against toto-ts eager"
"$totoc" backtest --engine fp32="$work/engine-fp32" --engine fp16="$work/engine-fp16" \
  --engine int8="$work/engine-int8" --input "$work/aapl.csv" --horizon 5 --windows "$windows" --step 1 \
  --context 512 --reference-checkpoint "$ckpt" --reference-python "$python" --threads "$threads" \
  --output "$work/cv.csv" --metrics "$work/metrics.csv" --plot "$work/backtest.svg" | tee "$work/report.txt"

if grep -q "verdict: fp32's backtest MAE equals the reference's within 1e-4 relative" "$work/report.txt"; then
  say "PASS: the fp32 engine's backtest MAE equals toto-ts eager's within 1e-4 relative"
else
  say "FAIL: the fp32 engine's backtest MAE is not within 1e-4 relative of toto-ts eager's (report above)"
  exit 1
fi
