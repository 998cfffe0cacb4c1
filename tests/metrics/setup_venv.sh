#!/usr/bin/env bash
# Creates (or reuses) the small venv whose packages are the oracles of the backtest metrics
# (backtest/tests/oracle.rs runs tests/metrics/oracle.py with it): fev 0.10.0 and utilsforecast 0.2.17, pinned.
# Prints the venv's python path on stdout's last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${TOTOC_METRICS_VENV:-$HOME/.cache/totoc/metrics-venv}
stamp="$venv/.requirements.sha256"
want=$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "$venv/bin/python"; exit 0
fi
echo "setting up the metrics venv in $venv" >&2
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip >&2
"$venv/bin/python" -m pip install -q -r "$here/requirements.txt" >&2
echo "$want" > "$stamp"
echo "$venv/bin/python"
