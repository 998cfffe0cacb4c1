#!/usr/bin/env bash
# Commits a Kronos training run (train_kronos.sh OUT) as the fixtures: writes its golden cases with upstream
# (make_kronos_golden.py, reference venv), copies the checkpoint and training.json into
# tests/fixtures/trained/kronos-1m/, the cases into tests/fixtures/trained/kronos-1m-cases/, the corpus file beside
# them, and rewrites tests/fixtures/trained/SHA256SUMS (checked by the integration test `trained`).
#   tests/training/record_kronos.sh OUT
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: tests/training/record_kronos.sh OUT}
dst=tests/fixtures/trained
reference_python=$(tests/reference/setup_venv.sh | tail -n 1)
rm -rf "${dst:?}/kronos-1m" "${dst:?}/kronos-1m-cases"
mkdir -p "$dst/kronos-1m/predictor" "$dst/kronos-1m/tokenizer" "$dst/kronos-1m-cases"
for part in predictor tokenizer; do
  cp "$out/kronos-mini/$part"/{config.json,model.safetensors} "$dst/kronos-1m/$part/"
done
cp "$out/kronos-mini/training.json" "$dst/kronos-1m/"
cp "$out/corpus/kronos-corpus.json" "$dst/"
"$reference_python" tests/training/make_kronos_golden.py --checkpoint "$dst/kronos-1m" --corpus "$out/corpus" \
  --out "$dst/kronos-1m-cases" --provenance "$dst/kronos-1m/golden-provenance.json"
(cd "$dst" && sha256sum heldout.csv corpus.json toto1-small/* toto2-4m/* kronos-corpus.json kronos-1m/*.json \
  kronos-1m/predictor/* kronos-1m/tokenizer/* kronos-1m-cases/* > SHA256SUMS)
cat "$dst/SHA256SUMS"
