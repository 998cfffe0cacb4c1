#!/usr/bin/env bash
# Creates (or reuses) a venv whose packages are pinned by one requirements file, and prints a tool's path in it on
# stdout's last line. The venv is rebuilt from scratch when the requirements file's sha256 changes (the stamp
# `.requirements.sha256` in the venv), so a cached venv never drifts from what the repository pins.
#
#   scripts/cached-venv.sh VENV REQUIREMENTS [TOOL]     # TOOL: a path inside the venv, default bin/python
#
# Every "setup a venv" script of the repository calls this with its own path and requirements.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: scripts/cached-venv.sh VENV REQUIREMENTS [TOOL]" >&2
  exit 2
fi
venv=$1
reqs=$2
tool=${3:-bin/python}
stamp="$venv/.requirements.sha256"
want=$(sha256sum "$reqs" | cut -d' ' -f1)
if [ -x "$venv/$tool" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "$venv/$tool"
  exit 0
fi
echo "setting up $venv ($(basename "$reqs"))" >&2
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip >&2
"$venv/bin/python" -m pip install -q -r "$reqs" >&2
echo "$want" >"$stamp"
echo "$venv/$tool"
