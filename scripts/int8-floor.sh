#!/usr/bin/env bash
# The Toto 1.0 int8 decode step against its floor (the time to stream its weights once) on THIS CPU, with the
# evidence of where the rest goes (docs/int8.md, "The decode step against its floor"; issue 26 asks for 1.1× on
# an Intel AVX-512/AMX machine). Makes the random-weight base checkpoint, exports it with every matmul int8
# (`--int8-roles all`: the layout the floor goal is about), with the default int8 roles, and fp32, builds the
# three CPU engines, then:
#   1. `totoc bench` with totoc's int8 GEMM choice (VNNI/AMX u8·s8 where exact), all three engines;
#   2. the same with TOTOC_INT8_U8U8=1 (ONNX Runtime's u8·u8 GEMM forced: what totoc did on every x86 CPU before);
#   3. ONNX Runtime's per-node profile of the one-row decode graph of the all-int8 engine, both ways
#      (scripts/ort-graph-time.py --profile).
# Each bench prints the CPU, the bandwidth it measured and "decode step ... = N× the floor". Minutes, not CI.
#
# Usage: scripts/int8-floor.sh [WORK_DIR]   (default target/int8-floor; TOTOC_BIN default target/release/totoc)
# Needs ONNX Runtime (TOTOC_ORT_LIB, default: scripts/fetch-onnxruntime.sh), the reference venv (made by
# tests/reference/setup_venv.sh) and the Python test venv (scripts/setup-python-venv.sh test).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
work=${1:-target/int8-floor}
bin=$(realpath "${TOTOC_BIN:-target/release/totoc}")
[ -x "$bin" ] || { echo "no totoc binary at $bin: cargo build --release, or set TOTOC_BIN" >&2; exit 2; }
TOTOC_ORT_LIB=${TOTOC_ORT_LIB:-$(scripts/fetch-onnxruntime.sh)}
export TOTOC_ORT_LIB
ref=$(tests/reference/setup_venv.sh | tail -n 1)
prof=$(scripts/setup-python-venv.sh test | tail -n 1)
mkdir -p "$work"
[ -d "$work/base-ckpt" ] || "$ref" tests/reference/make_checkpoints.py --config base --out "$work/base-ckpt" >&2
export_one() { # NAME EXTRA-ARGS...
  local name=$1
  shift
  "$bin" export --checkpoint "$work/base-ckpt" --config configs/toto-base.yaml --out "$work/b-$name" "$@" >&2
}
export_one all --precision int8 --int8-roles all
export_one default --precision int8
export_one fp32 --precision fp32
for name in all default fp32; do
  precision=int8
  [ "$name" = fp32 ] && precision=fp32
  "$bin" build-engine --artifacts "$work/b-$name" --precision "$precision" --out "$work/e-$name" >&2
done
engines=(--engine "int8-all=$work/e-all" --engine "int8-default=$work/e-default" --engine "fp32=$work/e-fp32")
echo "== totoc bench, totoc's int8 GEMM choice"
"$bin" bench "${engines[@]}" --runs 5 --no-rss
echo "== totoc bench, TOTOC_INT8_U8U8=1 (u8·u8 GEMM forced)"
TOTOC_INT8_U8U8=1 "$bin" bench "${engines[@]}" --runs 5 --no-rss
graph="$work/e-all/default.decode.n1.t69.int8.onnx"
echo "== per-node profile of $graph"
"$prof" scripts/ort-graph-time.py "$graph" --profile --runs 30
"$prof" scripts/ort-graph-time.py "$graph" --profile --runs 30 --u8u8
