#!/usr/bin/env bash
# Creates (or reuses) a small venv with the official `onnx` package, used only to run
# onnx.checker.check_model(full_check=True) on exported graphs. Kept apart from the toto-ts venv, whose numpy pin
# conflicts with onnx's. Prints the venv's python path.
set -euo pipefail
venv=${TOTOC_ONNX_VENV:-$HOME/.cache/totoc/onnx-venv}
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import onnx; assert onnx.__version__ == '1.23.2'" 2>/dev/null; then
  echo "$venv/bin/python"; exit 0
fi
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q onnx==1.23.2 >&2
echo "$venv/bin/python"
