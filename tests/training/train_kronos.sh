#!/usr/bin/env bash
# Trains the small Kronos of issue 35 from scratch (a script, never a CI step): builds the corpus
# (build_kronos_corpus.py, data venv), then trains the tokenizer and the predictor (train_kronos.py, reference venv)
# on ONE torch thread at nice 19, and writes OUT/corpus, OUT/kronos-mini/{predictor,tokenizer,training.json}
# (recorded as tests/fixtures/trained/kronos-1m) and OUT/train.log.
#   tests/training/train_kronos.sh OUT        # TOK_STEPS / PRED_STEPS / SEED override the step counts and the seed
# One thread, not two: on the shared 2-core build machine two OpenMP threads spin against the other jobs and a
# tokenizer step took 1-3 s instead of 0.08 s (docs/training.md, "Kronos").
# Then tests/training/record_kronos.sh OUT writes the golden cases (make_kronos_golden.py) and copies it all in.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: tests/training/train_kronos.sh OUT}
mkdir -p "$out"
data_python=$(tests/training/setup_data_venv.sh | tail -n 1)
reference_python=$(tests/reference/setup_venv.sh | tail -n 1)
"$data_python" tests/training/build_kronos_corpus.py "$out/corpus"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
nice -n 19 "$reference_python" tests/training/train_kronos.py --corpus "$out/corpus" --out "$out/kronos-mini" \
  --tok-steps "${TOK_STEPS:-600}" --pred-steps "${PRED_STEPS:-600}" --seed "${SEED:-35}" --threads 1 \
  2>&1 | tee "$out/train.log"
