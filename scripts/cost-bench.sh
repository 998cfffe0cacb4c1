#!/usr/bin/env bash
# The cost model against the clock (issue 36, "cost in seconds"), on the tiny Toto 1.0 engine and on a base-size
# one: `totoc bench cost` warms each engine up (which measures every graph's rate, as `totoc serve` does before it
# is ready), prints the rates, then for each request its estimate (graph runs, row-steps, seconds), whether
# `totoc serve` would admit it under its default deadline (30 s), and for an admitted one the time it takes alone
# (the median of --runs) beside its estimate. It exits 1 if an admitted request took more than 2× its estimate.
#
# Usage: scripts/cost-bench.sh [--model tiny|base|both] [--threads N] [--runs N] [--work DIR]
#   --model    which engines (default both). base: a base-size random Toto 1.0 checkpoint
#              (tests/reference/make_checkpoints.py --config base, 151M parameters) exported with
#              configs/toto-base.yaml (the wide profile: 8 series × 4 variates, context 4096, horizon 336, 256
#              samples; 22 bucket graphs) — the export and engine build take a few minutes, the warm-up ~1–2 min
#   --threads  CPU intra-op threads (default: the engine's own, the physical cores)
#   --runs     timed runs of each admitted request (default 3)
#   --work     where the checkpoint, bundles and engines go (default target/cost-bench; reused when present)
# Requests: tiny — its default ladder (1 and 8 series, 1 and 4 variates, mean forecasts and 256 sample paths at
# horizon 160, and 4 and 16 series of the latter); base — mean forecasts of 1 and 8 series, the README's
# tritonclient call (1 series, horizon 336, 100 samples), 256 samples of 1 series, and the issue's class-5 request
# (4 variates, horizon 336, 256 samples) of 1, 4 and 8 series. Needs ONNX Runtime (TOTOC_ORT_LIB, default:
# scripts/fetch-onnxruntime.sh) and, for base, a Python with numpy and safetensors (the reference venv).
set -euo pipefail
cd "$(dirname "$0")/.."

model=both
threads=()
runs=3
work=target/cost-bench
while [ $# -gt 0 ]; do
  case $1 in
    --model) model=$2; shift 2 ;;
    --threads) threads=(--threads "$2"); shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "cost-bench: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case $model in tiny | base | both) ;; *) echo "cost-bench: --model is tiny, base or both" >&2; exit 2 ;; esac

say() { echo "== $*" >&2; }
TOTOC_ORT_LIB=${TOTOC_ORT_LIB:-$(scripts/fetch-onnxruntime.sh)}
export TOTOC_ORT_LIB
say "building totoc (release)"
cargo build --release -q --bin totoc
totoc=target/release/totoc
mkdir -p "$work"
status=0

if [ "$model" != base ]; then
  if [ ! -f "$work/tiny-engine/manifest.json" ]; then
    say "tiny: export + build-engine"
    $totoc export --checkpoint tests/fixtures/tiny/checkpoint --config configs/tiny.yaml --out "$work/tiny-bundle" --force >&2
    $totoc build-engine --artifacts "$work/tiny-bundle" --out "$work/tiny-engine" --force >&2
  fi
  say "tiny: totoc bench cost"
  $totoc bench cost --engine "$work/tiny-engine" --runs "$runs" "${threads[@]}" || status=1
fi

if [ "$model" != tiny ]; then
  if [ ! -f "$work/base-engine/manifest.json" ]; then
    python=python3
    for v in "${TOTOC_PYTHON:-}" ~/.cache/totoc/reference-venv/bin/python ~/.cache/totoc/onnx-venv/bin/python; do
      if [ -n "$v" ] && [ -x "$v" ] && "$v" -c 'import numpy, safetensors' 2>/dev/null; then python=$v; break; fi
    done
    if [ ! -f "$work/base-ckpt/model.safetensors" ]; then
      say "base: a base-size random checkpoint (tests/reference/make_checkpoints.py, $python)"
      "$python" tests/reference/make_checkpoints.py --config base --out "$work/base-ckpt" >&2
    fi
    say "base: export (configs/toto-base.yaml) + build-engine"
    $totoc export --checkpoint "$work/base-ckpt" --config configs/toto-base.yaml --out "$work/base-bundle" --force >&2
    $totoc build-engine --artifacts "$work/base-bundle" --out "$work/base-engine" --force >&2
  fi
  say "base: totoc bench cost"
  $totoc bench cost --engine "$work/base-engine" --runs "$runs" "${threads[@]}" \
    --request 1x1x336x0 --request 8x1x336x0 --request 1x1x336x100 --request 1x1x336x256 \
    --request 1x4x336x256 --request 4x4x336x256 --request 8x4x336x256 || status=1
fi
exit $status
