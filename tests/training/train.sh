#!/usr/bin/env bash
# Trains the two small models of issue 26 from scratch (a script, never a CI step): builds the corpus, then trains
# Toto 1.0 (train_toto1.py) and Toto 2.0 4m (train_toto2.py) side by side, one CPU thread each, at nice 19, and
# writes each checkpoint with its provenance (training.json) into OUT/toto1-small and OUT/toto2-4m.
#   tests/training/train.sh OUT              # STEPS1 / STEPS2 / SEED override the step counts and the seed
# Copy the results into tests/fixtures/trained/ and refresh SHA256SUMS with tests/training/record.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: tests/training/train.sh OUT}
mkdir -p "$out"
data_python=$(tests/training/setup_data_venv.sh | tail -n 1)
reference_python=$(tests/reference/setup_venv.sh | tail -n 1)
"$data_python" tests/training/build_corpus.py "$out/corpus"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
nice -n 19 "$reference_python" tests/training/train_toto1.py --corpus "$out/corpus" --out "$out/toto1-small" \
  --steps "${STEPS1:-4000}" --seed "${SEED:-26}" > "$out/toto1.log" 2>&1 &
p1=$!
nice -n 19 "$reference_python" tests/training/train_toto2.py --corpus "$out/corpus" --out "$out/toto2-4m" \
  --steps "${STEPS2:-3000}" --seed "${SEED:-26}" > "$out/toto2.log" 2>&1 &
p2=$!
rc=0
wait "$p1" || rc=1
wait "$p2" || rc=1
tail -n 3 "$out/toto1.log" "$out/toto2.log"
exit "$rc"
