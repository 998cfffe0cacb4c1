#!/usr/bin/env bash
# Creates (or reuses) the small venv whose packages are the oracles of the backtest metrics
# (backtest/tests/oracle.rs runs tests/metrics/oracle.py with it): fev 0.10.0 and utilsforecast 0.2.17, pinned.
# Prints the venv's python path on stdout's last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../../scripts/cached-venv.sh" "${TOTOC_METRICS_VENV:-$HOME/.cache/totoc/metrics-venv}" "$here/requirements.txt"
