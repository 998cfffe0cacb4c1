#!/usr/bin/env bash
# Creates (or reuses) the toto-ts reference venv under ~/.cache/totoc/reference-venv.
# toto-ts pulls a CUDA torch (~3.3 GB download, ~4 min); there is no CPU-only torch on PyPI.
# Prints the venv's python path on stdout's last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${TOTOC_REFERENCE_VENV:-$HOME/.cache/totoc/reference-venv}
stamp="$venv/.requirements.sha256"
want=$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "$venv/bin/python"; exit 0
fi
echo "setting up the toto-ts reference venv in $venv (downloads ~3.3 GB once)" >&2
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip >&2
"$venv/bin/python" -m pip install -q -r "$here/requirements.txt" >&2
echo "$want" > "$stamp"
echo "$venv/bin/python"
