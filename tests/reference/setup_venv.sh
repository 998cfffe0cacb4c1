#!/usr/bin/env bash
# Creates (or reuses) the reference venv under ~/.cache/totoc/reference-venv: toto-ts 0.2.0 (Toto 1.0) and, on top
# of it, toto-2 2.0.0 (Toto 2.0) and kronos-finance 0.1.5 (Kronos).
# toto-ts pulls a CUDA torch (~3.3 GB download, ~4 min); there is no CPU-only torch on PyPI. The Toto 2.0 wheels
# (requirements-toto2.txt, 140 kB) are added without dependencies (they declare Python >= 3.12 but run on 3.11;
# their runtime dependencies all come with toto-ts), so adding them never rebuilds the base venv; so is the Kronos
# wheel (requirements-kronos.txt, --no-deps: its model code's imports all come with toto-ts, checked below).
# Each layer has its own stamp (sha256 of its requirements file). Prints the venv's python on stdout's last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${TOTOC_REFERENCE_VENV:-$HOME/.cache/totoc/reference-venv}
stamp="$venv/.requirements.sha256"
want=$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)
if ! [ -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setting up the toto-ts reference venv in $venv (downloads ~3.3 GB once)" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip >&2
  "$venv/bin/python" -m pip install -q -r "$here/requirements.txt" >&2
  echo "$want" > "$stamp"
fi
stamp2="$venv/.requirements-toto2.sha256"
want2=$(sha256sum "$here/requirements-toto2.txt" | cut -d' ' -f1)
if [ "$(cat "$stamp2" 2>/dev/null)" != "$want2" ]; then
  echo "adding toto-2 2.0.0 to the reference venv in $venv" >&2
  "$venv/bin/python" -m pip install -q --no-deps --ignore-requires-python --only-binary=:all: \
    --require-hashes -r "$here/requirements-toto2.txt" >&2
  "$venv/bin/python" -c "import toto2, dd_unit_scaling" 2>/dev/null
  echo "$want2" > "$stamp2"
fi
stamp3="$venv/.requirements-kronos.sha256"
want3=$(sha256sum "$here/requirements-kronos.txt" | cut -d' ' -f1)
if [ "$(cat "$stamp3" 2>/dev/null)" != "$want3" ]; then
  echo "adding kronos-finance 0.1.5 to the reference venv in $venv" >&2
  "$venv/bin/python" -m pip install -q --no-deps --only-binary=:all: --force-reinstall \
    --require-hashes -r "$here/requirements-kronos.txt" >&2
  # the upstream model code and everything it imports (kronos.py, module.py)
  "$venv/bin/python" -c "import kronos_finance._vendor.kronos_model, torch, numpy, pandas, einops, huggingface_hub, tqdm, safetensors" >&2
  echo "$want3" > "$stamp3"
fi
echo "$venv/bin/python"
