#!/usr/bin/env bash
# The data-path benchmark: SERIES x POINTS hourly points in one long Parquet table (unique_id, ds, y; synthetic,
# tests/data/make_bench_table.py) forecast through ENGINE into a Parquet table. Prints totoc's summary line: series/s
# and the share of wall time spent outside the engine (reading, checking, writing).
#
# Usage: scripts/bench-data.sh ENGINE [SERIES=1000] [POINTS=512] [HORIZON=64]
set -euo pipefail
engine=$(realpath "${1:?usage: scripts/bench-data.sh ENGINE [SERIES] [POINTS] [HORIZON]}")
series=${2:-1000}
points=${3:-512}
horizon=${4:-64}
cd "$(dirname "$0")/.."
python=$(tests/data/setup_venv.sh | tail -n 1)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$python" tests/data/make_bench_table.py "$tmp/series.parquet" --series "$series" --points "$points" >&2
cargo build --release -q -p totoc
TOTOC_ORT_LIB=${TOTOC_ORT_LIB:-$(scripts/fetch-onnxruntime.sh)}
export TOTOC_ORT_LIB
target/release/totoc forecast --engine "$engine" --input "$tmp/series.parquet" --horizon "$horizon" \
  --output "$tmp/forecasts.parquet"
