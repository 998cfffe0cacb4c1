#!/usr/bin/env bash
# Commits a training run's results as the fixtures: copies OUT/toto1-small and OUT/toto2-4m (written by train.sh)
# into tests/fixtures/trained/, the corpus' held-out table beside them, and rewrites tests/fixtures/trained/SHA256SUMS,
# which the integration test `trained` checks (a changed file fails it).
#   tests/training/record.sh OUT
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: tests/training/record.sh OUT}
dst=tests/fixtures/trained
for m in toto1-small toto2-4m; do
  rm -rf "${dst:?}/$m"
  mkdir -p "$dst/$m"
  cp "$out/$m"/{config.json,model.safetensors,training.json,verify_batches.npz} "$dst/$m/"
done
cp "$out/corpus/heldout.csv" "$out/corpus/corpus.json" "$dst/"
(cd "$dst" && sha256sum heldout.csv corpus.json toto1-small/* toto2-4m/* > SHA256SUMS)
cat "$dst/SHA256SUMS"
