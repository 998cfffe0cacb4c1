#!/usr/bin/env bash
# The main job on a fresh machine, CPU only: fetch ONNX Runtime, build totoc, export the bundled tiny Toto
# checkpoint (random weights in the real HF layout) with its toto-ts golden cases, build the ONNX Runtime CPU
# engine, verify it against toto-ts, and print a forecast.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${TOTOC_DEMO_DIR:-target/demo}

echo "== fetching ONNX Runtime (PyPI onnxruntime wheel, cached in ~/.cache/totoc)"
TOTOC_ORT_LIB=$(scripts/fetch-onnxruntime.sh)
export TOTOC_ORT_LIB
echo "== building totoc"
cargo build --release --quiet
totoc=target/release/totoc

echo "== totoc export"
$totoc export --checkpoint tests/fixtures/tiny/checkpoint --config configs/tiny.yaml \
  --golden tests/fixtures/tiny/cases --out "$work/bundle" --force
echo "== totoc build-engine (ONNX Runtime CPU)"
$totoc build-engine --artifacts "$work/bundle" --target cpu --out "$work/engine" --force
echo "== totoc verify (against toto-ts 0.2.0 golden outputs carried by the bundle)"
$totoc verify --engine "$work/engine"
echo "== totoc forecast (2 variates, 64 sample paths, quantiles)"
python3 - "$work/request.json" <<'PY'
import json, math, sys
t = range(120)
req = {"target": [[round(50 + 10 * math.sin(i / 6) + 0.1 * i, 3) for i in t],
                  [None if i % 17 == 0 else round(5 + math.cos(i / 6), 3) for i in t]],
       "id_mask": [0, 0], "horizon": 24, "samples": 64, "quantiles": [0.1, 0.5, 0.9], "seed": 42}
json.dump(req, open(sys.argv[1], "w"))
PY
$totoc forecast --engine "$work/engine" --input "$work/request.json" --output "$work/forecast.json"
python3 - "$work/forecast.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"profile {r['profile']}, engine {r['engine']}")
for v, mean in enumerate(r["mean"]):
    q = {f"{x['q']}": x["values"][v] for x in r["quantiles"]}
    print(f"variate {v}: mean[:6] = {[round(x, 3) for x in mean[:6]]}")
    print(f"           p10[:6]  = {[round(x, 3) for x in q['0.1'][:6]]}")
    print(f"           p90[:6]  = {[round(x, 3) for x in q['0.9'][:6]]}")
PY
echo "== done: bundle in $work/bundle, engine in $work/engine, forecast in $work/forecast.json"
