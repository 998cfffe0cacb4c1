#!/usr/bin/env bash
# The main job on a fresh machine, CPU only: fetch ONNX Runtime, build totoc, and for each of the two small models
# trained here (tests/fixtures/trained/{toto1-small,toto2-4m}, released HF layouts; docs/training.md): export it
# with its reference's golden cases, build the ONNX Runtime CPU engine, verify it against toto-ts / toto-2, and
# forecast the bundled weekly CO2 series with a chart.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${TOTOC_DEMO_DIR:-target/demo}

echo "== fetching ONNX Runtime (PyPI onnxruntime wheel, cached in ~/.cache/totoc)"
TOTOC_ORT_LIB=$(scripts/fetch-onnxruntime.sh)
export TOTOC_ORT_LIB
echo "== building totoc"
cargo build --release --quiet
totoc=target/release/totoc

# Both small models trained here (docs/training.md), each exported with the golden cases of its reference, built
# for ONNX Runtime CPU, verified and run on the bundled weekly Mauna Loa CO2 series (52 weeks ahead, with a chart).
for model in toto1-small toto2-4m; do
  case $model in
    toto1-small) ref="toto-ts 0.2.0" forecast_args=(--samples 64 --seed 7) ;;
    toto2-4m) ref="toto-2 2.0.0" forecast_args=() ;;
  esac
  echo "== $model: totoc export (tests/fixtures/trained/$model, with $ref golden cases)"
  $totoc export --checkpoint "tests/fixtures/trained/$model" --config "configs/trained-$model.yaml" \
    --golden "tests/fixtures/trained/$model-cases" --out "$work/$model.bundle" --force
  echo "== $model: totoc build-engine (ONNX Runtime CPU)"
  $totoc build-engine --artifacts "$work/$model.bundle" --target cpu --out "$work/$model.engine" --force
  echo "== $model: totoc verify (against the $ref outputs carried by the bundle)"
  $totoc verify --engine "$work/$model.engine"
  echo "== $model: totoc forecast (weekly CO2, 52 weeks, quantiles 0.1/0.5/0.9, chart)"
  $totoc forecast --engine "$work/$model.engine" --input tests/fixtures/data/co2_wide.csv --horizon 52 \
    "${forecast_args[@]}" --quantiles 0.1,0.5,0.9 --output "$work/$model.json" --plot "$work/$model-co2.png"
  python3 - "$work/$model.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
point = "mean" if "mean" in r else "median"
q = {f"{x['q']}": x["values"][0] for x in r["quantiles"]}
print(f"profile {r['profile']}, engine {r['engine']}, from {r['timestamps'][0]}")
print(f"  {point}[:6] = {[round(x, 2) for x in r[point][0][:6]]}")
print(f"  p10[:6]  = {[round(x, 2) for x in q['0.1'][:6]]}")
print(f"  p90[:6]  = {[round(x, 2) for x in q['0.9'][:6]]}")
PY
done
echo "== done: bundles, engines, forecasts and charts in $work (MODEL.bundle, MODEL.engine, MODEL.json, MODEL-co2.png)"
