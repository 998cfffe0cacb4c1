#!/usr/bin/env bash
# Fetches libonnxruntime (CPU) from the PyPI onnxruntime wheel for this machine's architecture (Linux x86_64 or
# aarch64): ort's own download CDN is unreachable here, and PyPI is where every CI and build machine can reach.
# Installs into ${TOTOC_ORT_DIR:-~/.cache/totoc/onnxruntime/<version>} and prints the library path.
#   ORT_VERSION   the onnxruntime version (default 1.31.1, the one totoc is built for)
#   TOTOC_ARCH    x86_64 or aarch64 (default: uname -m), e.g. to fetch for an image of the other architecture
set -euo pipefail
version=${ORT_VERSION:-1.31.1}
arch=${TOTOC_ARCH:-$(uname -m)}
case "$arch" in
  x86_64 | amd64) arch=x86_64 ;;
  aarch64 | arm64) arch=aarch64 ;;
  *) echo "fetch-onnxruntime.sh: no onnxruntime wheel for architecture $arch (Linux x86_64 and aarch64 are supported)" >&2; exit 2 ;;
esac
dest=${TOTOC_ORT_DIR:-$HOME/.cache/totoc/onnxruntime/$version}
lib="$dest/libonnxruntime.so.$version"
stamp="$dest/.arch"
if [ -f "$lib" ] && [ "$(cat "$stamp" 2>/dev/null || echo x86_64)" = "$arch" ]; then echo "$lib"; exit 0; fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
platforms=()
for tag in manylinux_2_28 manylinux_2_27 manylinux_2_17 manylinux2014; do platforms+=(--platform "${tag}_$arch"); done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 "${platforms[@]}" \
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
echo "$arch" > "$dest.partial/.arch"
rm -rf "$dest"; mv "$dest.partial" "$dest"
echo "$lib"
