#!/usr/bin/env bash
# The learned-model accuracy table of issue 26, measured with totoc itself: export -> build-engine -> one
# `totoc backtest` of both trained models on the held-out series (monthly, H = 12, 4 non-overlapping windows, the
# last 48 months of each series, context 512) -> tests/training/accuracy.py's table.
#   tests/training/evaluate.sh WORK [CHECKPOINTS]    # CHECKPOINTS: default tests/fixtures/trained
# TOTOC_BIN picks the binary (default target/release/totoc); THREADS the engines' threads (default 2).
set -euo pipefail
cd "$(dirname "$0")/../.."
work=${1:?usage: tests/training/evaluate.sh WORK [CHECKPOINTS]}
ckpts=${2:-tests/fixtures/trained}
totoc=${TOTOC_BIN:-target/release/totoc}
threads=${THREADS:-2}
mkdir -p "$work"
for m in toto1-small toto2-4m; do
  cfg=configs/trained-$m.yaml
  "$totoc" export --checkpoint "$ckpts/$m" --config "$cfg" --out "$work/$m.bundle" --force
  "$totoc" build-engine --artifacts "$work/$m.bundle" --out "$work/$m.engine" --threads "$threads" --force
done
set -x
"$totoc" backtest --engine toto1-small="$work/toto1-small.engine" --engine toto2-4m="$work/toto2-4m.engine" \
  --input tests/fixtures/trained/heldout.csv --horizon 12 --windows 4 --step 12 --context 512 --season 12 \
  --metrics "$work/metrics.csv" --output "$work/cv.csv"
set +x
python3 tests/training/accuracy.py "$work/metrics.csv" | tee "$work/accuracy.md"
