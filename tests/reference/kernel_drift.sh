#!/usr/bin/env bash
# Measures the reference outputs' drift under every CPU kernel setting against the committed (pinned) fixtures and
# prints the docs/guide.md table (tests/reference/kernel_drift.py; ~10 min). Extra args go to kernel_drift.py.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
py=$("$here/setup_venv.sh" | tail -n 1)
exec "$py" "$here/kernel_drift.py" "$@"
