#!/usr/bin/env bash
# Creates (or reuses) a small venv with the Open Inference Protocol's standard Python clients,
# tritonclient[http,grpc], used by the `serve` integration tests (tests/serve/test_tritonclient.py) to drive
# `totoc serve` exactly as users' tooling does. Prints the venv's python path.
set -euo pipefail
venv=${TOTOC_SERVE_VENV:-$HOME/.cache/totoc/serve-venv}
version=2.73.0
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "
import tritonclient, tritonclient.http, tritonclient.grpc, importlib.metadata as m
assert m.version('tritonclient') == '$version'" 2>/dev/null; then
  echo "$venv/bin/python"; exit 0
fi
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q "tritonclient[http,grpc]==$version" >&2
echo "$venv/bin/python"
