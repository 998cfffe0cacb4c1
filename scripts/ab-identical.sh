#!/usr/bin/env bash
# Do two builds of totoc produce the same bytes? Runs the demo's pipeline (tiny Toto 1.0 fixture: export with
# golden cases, CPU engine, verify, a sampled forecast; an fp16 export and its CPU emulation engine), and the same
# for the Toto 2.0 4m random-weight checkpoint (tests/reference/make_toto2_checkpoints.py, quantile forecast),
# with binary A and binary B into separate directories and compares every file byte for byte, and the forecasts'
# numbers exactly (JSON fields that hold wall-clock timings are left out). A refactor that claims "behaviour
# unchanged" passes this.
#
# Usage: scripts/ab-identical.sh A_BIN B_BIN [WORK_DIR]   (e.g. target/abab/bin/base target/abab/bin/new)
# Needs ONNX Runtime (TOTOC_ORT_LIB, default: scripts/fetch-onnxruntime.sh) and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi
a_bin=$(realpath "$1")
b_bin=$(realpath "$2")
work=${3:-target/ab-identical}
TOTOC_ORT_LIB=${TOTOC_ORT_LIB:-$(scripts/fetch-onnxruntime.sh)}
export TOTOC_ORT_LIB
rm -rf "$work"
mkdir -p "$work"
python3 - "$work/request.json" <<'PY'
import json, math, sys
t = range(120)
req = {"target": [[round(50 + 10 * math.sin(i / 6) + 0.1 * i, 3) for i in t],
                  [None if i % 17 == 0 else round(5 + math.cos(i / 6), 3) for i in t]],
       "id_mask": [0, 0], "horizon": 24, "samples": 64, "quantiles": [0.1, 0.5, 0.9], "seed": 42}
json.dump(req, open(sys.argv[1], "w"))
PY
python3 - "$work/request2.json" <<'PY'
import json, math, sys
t = range(600)
req = {"target": [[round(50 + 10 * math.sin(i / 9) + 0.05 * i, 3) for i in t],
                  [None if i % 23 == 0 else round(5 + math.cos(i / 7), 3) for i in t]],
       "id_mask": [0, 0], "horizon": 96, "quantiles": [0.1, 0.25, 0.5, 0.9]}
json.dump(req, open(sys.argv[1], "w"))
PY
ref_python=${TOTOC_REFERENCE_PYTHON:-$HOME/.cache/totoc/reference-venv/bin/python}
[ -x "$ref_python" ] || ref_python=python3
"$ref_python" tests/reference/make_toto2_checkpoints.py --config 4m --out "$work/toto2-4m"
for side in a b; do
  bin=$a_bin
  [ "$side" = b ] && bin=$b_bin
  d=$work/$side
  mkdir -p "$d"
  "$bin" export --checkpoint tests/fixtures/tiny/checkpoint --config configs/tiny.yaml \
    --golden tests/fixtures/tiny/cases --precision fp32 --precision fp16 --out "$d/bundle" --force 2>"$d/export.log"
  "$bin" build-engine --artifacts "$d/bundle" --target cpu --out "$d/engine" --force 2>"$d/build.log"
  "$bin" build-engine --artifacts "$d/bundle" --target cpu --fp16 --out "$d/engine-fp16" --force 2>"$d/build16.log"
  "$bin" verify --engine "$d/engine" >"$d/verify.txt"
  "$bin" verify --engine "$d/engine-fp16" >"$d/verify-fp16.txt"
  "$bin" forecast --engine "$d/engine" --input "$work/request.json" --output "$d/forecast.json" 2>"$d/forecast.log"
  "$bin" forecast --engine "$d/engine-fp16" --input "$work/request.json" --output "$d/forecast-fp16.json" \
    2>"$d/forecast16.log"
  "$bin" export --checkpoint "$work/toto2-4m" --config tests/fixtures/toto2/profiles.yaml \
    --golden tests/fixtures/toto2/4m/cases --out "$d/bundle2" --force 2>"$d/export2.log"
  "$bin" build-engine --artifacts "$d/bundle2" --target cpu --out "$d/engine2" --force 2>"$d/build2.log"
  "$bin" verify --engine "$d/engine2" >"$d/verify2.txt"
  "$bin" forecast --engine "$d/engine2" --input "$work/request2.json" --output "$d/forecast2.json" \
    2>"$d/forecast2.log"
done
fail=0
for tree in bundle engine engine-fp16 bundle2 engine2; do
  if diff -r "$work/a/$tree" "$work/b/$tree" >"$work/diff-$tree.txt"; then
    echo "identical: $tree ($(find "$work/a/$tree" -type f | wc -l) files)"
  else
    echo "DIFFERENT: $tree (see $work/diff-$tree.txt)"
    fail=1
  fi
done
for f in verify.txt verify-fp16.txt verify2.txt; do
  if cmp -s "$work/a/$f" "$work/b/$f"; then echo "identical: $f ($(wc -l <"$work/a/$f") lines)"; else
    echo "DIFFERENT: $f"
    diff "$work/a/$f" "$work/b/$f" | head -n 20
    fail=1
  fi
done
for f in forecast.json forecast-fp16.json forecast2.json; do
  if python3 - "$work/a/$f" "$work/b/$f" <<'PY'; then echo "identical numbers: $f"; else fail=1; fi
import json, sys
def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if "second" not in k and "time" not in k and "_ms" not in k}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v
a, b = (strip(json.load(open(p))) for p in sys.argv[1:])
if a != b:
    print(f"DIFFERENT: {sys.argv[1]} vs {sys.argv[2]}")
    sys.exit(1)
PY
  done
exit $fail
