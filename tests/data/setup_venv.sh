#!/usr/bin/env bash
# Creates (or reuses) the small venv that converts statsmodels datasets into the data-format fixtures
# (tests/data/convert.py) and writes benchmark tables: statsmodels, pandas, pyarrow (~150 MB once).
# Prints the venv's python path on stdout's last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${TOTOC_DATA_VENV:-$HOME/.cache/totoc/data-venv}
stamp="$venv/.requirements.sha256"
want=$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "$venv/bin/python"; exit 0
fi
echo "setting up the data venv in $venv" >&2
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip >&2
"$venv/bin/python" -m pip install -q -r "$here/requirements.txt" >&2
echo "$want" > "$stamp"
echo "$venv/bin/python"
