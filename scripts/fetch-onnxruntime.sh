#!/usr/bin/env bash
# Fetches libonnxruntime (CPU) from the PyPI onnxruntime wheel: ort's own download CDN is unreachable here.
# Installs into ${TOTOC_ORT_DIR:-~/.cache/totoc/onnxruntime/<version>} and prints the library path.
set -euo pipefail
version=${ORT_VERSION:-1.31.1}
dest=${TOTOC_ORT_DIR:-$HOME/.cache/totoc/onnxruntime/$version}
lib="$dest/libonnxruntime.so.$version"
if [ -f "$lib" ]; then echo "$lib"; exit 0; fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  -d "$tmp" "onnxruntime==$version" >&2
whl=$(ls "$tmp"/onnxruntime-*.whl)
python3 - "$whl" "$tmp/x" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for n in z.namelist():
        if n.startswith("onnxruntime/capi/libonnxruntime") and ".so" in n:
            z.extract(n, sys.argv[2])
PY
mkdir -p "$dest.partial"
cp "$tmp"/x/onnxruntime/capi/libonnxruntime* "$dest.partial/"
ln -sf "libonnxruntime.so.$version" "$dest.partial/libonnxruntime.so.1"
ln -sf "libonnxruntime.so.$version" "$dest.partial/libonnxruntime.so"
rm -rf "$dest"; mv "$dest.partial" "$dest"
echo "$lib"
