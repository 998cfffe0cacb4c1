#!/usr/bin/env bash
# Creates (or reuses) a small venv with the Open Inference Protocol's standard Python clients,
# tritonclient[http,grpc], used by the `serve` integration tests (tests/serve/test_tritonclient.py) to drive
# `totoc serve` exactly as users' tooling does, plus KServe's time-series types and pydantic
# (tests/serve/requirements-kserve.txt, hash-pinned, installed without dependencies) that
# tests/serve/test_kserve_timeseries.py validates `POST /v1/timeseries/forecast` with. Prints the venv's python
# path.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${TOTOC_SERVE_VENV:-$HOME/.cache/totoc/serve-venv}
version=2.73.0
if ! { [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "
import tritonclient, tritonclient.http, tritonclient.grpc, importlib.metadata as m
assert m.version('tritonclient') == '$version'" 2>/dev/null; }; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q "tritonclient[http,grpc]==$version" >&2
fi
# The no-deps packages, reinstalled when their pinned file changes (or when the venv was rebuilt).
reqs="$here/../tests/serve/requirements-kserve.txt"
stamp="$venv/.kserve.sha256"
want=$(sha256sum "$reqs" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  "$venv/bin/python" -m pip install -q --no-deps --require-hashes -r "$reqs" >&2
  echo "$want" >"$stamp"
fi
echo "$venv/bin/python"
