#!/usr/bin/env bash
# Creates (or reuses) the small venv that converts statsmodels datasets into the data-format fixtures
# (tests/data/convert.py) and writes benchmark tables: statsmodels, pandas, pyarrow (~150 MB once); and holds the
# hash-pinned packages installed without their dependencies (requirements-nodeps.txt: backtesting.py's sample
# market data, read by the real-data calendar tests through TOTOC_DATA_PYTHON).
# Prints the venv's python path on stdout's last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${TOTOC_DATA_VENV:-$HOME/.cache/totoc/data-venv}
python=$("$here/../../scripts/cached-venv.sh" "$venv" "$here/requirements.txt" | tail -n 1)
# The no-deps packages, reinstalled when their pinned file changes (or when the venv was rebuilt).
stamp="$venv/.nodeps.sha256"
want=$(sha256sum "$here/requirements-nodeps.txt" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  "$python" -m pip install -q --no-deps --require-hashes -r "$here/requirements-nodeps.txt" >&2
  echo "$want" >"$stamp"
fi
echo "$python"
