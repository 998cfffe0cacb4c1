#!/usr/bin/env bash
# Creates (or reuses) the small venv that converts statsmodels datasets into the data-format fixtures
# (tests/data/convert.py) and writes benchmark tables: statsmodels, pandas, pyarrow (~150 MB once).
# Prints the venv's python path on stdout's last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../../scripts/cached-venv.sh" "${TOTOC_DATA_VENV:-$HOME/.cache/totoc/data-venv}" "$here/requirements.txt"
