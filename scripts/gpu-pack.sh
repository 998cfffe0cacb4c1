#!/usr/bin/env bash
# Packs what a GPU run needs for a lent machine reached only through the device tool (no Rust, no network there;
# each call carries the checkout plus at most 64 MiB), in call folders for scripts/gpu-device.sh.
#
#   scripts/gpu-pack.sh --out DIR [--totoc BIN] [--part-mib 25] [--keep-sm 90] [--no-eager] [--app-only]
#
#   --out DIR      a folder inside the checkout the device tool sends, ignored by git (e.g. /work/main/.gpu, with
#                  /.gpu/ in that checkout's .git/info/exclude); its call* folders are replaced
#   --totoc BIN    the totoc binary to carry (default target/release/totoc: build it with `cargo build --release -p totoc`)
#   --part-mib N   the largest part (MiB): what one call can carry beside the checkout (64 MiB less its tracked files)
#   --keep-sm N    the GPU architecture whose CUDA kernels are kept (90: H100/H200; scripts/gpu-prune-fatbin.py)
#   --no-eager     leave out toto-ts and the wheels it imports (the eager timing on the GPU)
#   --app-only     only a new app (totoc and the branch's scripts) in a new call folder, for a rerun after a fix
#
# The payload (split into parts, one call folder each): onnxruntime-gpu 1.31.1's libonnxruntime, its CUDA provider
# with only sm_N kernels, its shared and TensorRT provider libraries, and toto-ts 0.2.0 with the wheels it imports
# that the GPU image lacks (gluonts, pydantic, ...). The app (in the last folder): totoc and every file this branch
# changed against main (the device's checkout is main's). xz, because the device unpacks with Python's tarfile (its
# image may have no zstd). Each folder holds gpu-device.sh and SHA256SUMS. TensorRT's libraries are not packed:
# PyPI's tensorrt-cu13-libs is a stub that downloads from pypi.nvidia.com (unreachable here), and they are over 1 GB.
set -euo pipefail
shopt -s nullglob
cd "$(dirname "$0")/.."
repo=$(pwd)

out=""
totoc=target/release/totoc
part_mib=25
keep_sm=90
eager=1
app_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out | --totoc | --part-mib | --keep-sm)
      [ $# -ge 2 ] || { echo "gpu-pack: $1 needs a value (see --help)" >&2; exit 2; } ;;
  esac
  case "$1" in
    --out) out=$2; shift 2 ;;
    --totoc) totoc=$2; shift 2 ;;
    --part-mib) part_mib=$2; shift 2 ;;
    --keep-sm) keep_sm=$2; shift 2 ;;
    --no-eager) eager=0; shift ;;
    --app-only) app_only=1; shift ;;
    -h | --help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-pack: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || { echo "gpu-pack: --out DIR is required (see --help)" >&2; exit 2; }
case "$part_mib" in '' | *[!0-9]* | 0) echo "gpu-pack: --part-mib needs a positive integer, got '$part_mib'" >&2; exit 2 ;; esac
[ -x "$totoc" ] || { echo "gpu-pack: $totoc is not an executable (cargo build --release -p totoc)" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
if git -C "$out" rev-parse --is-inside-work-tree >/dev/null 2>&1 && ! git -C "$out" check-ignore -q "$out"; then
  echo "gpu-pack: $out is not ignored by git: add it to the checkout's .git/info/exclude (else it travels as untracked files and counts twice)" >&2
  exit 2
fi
cache=${TOTOC_GPU_PACK_CACHE:-$HOME/.cache/totoc/gpu-pack}
mkdir -p "$cache"
say() { echo "== $(date -u +%T) $*" >&2; }

# The app: totoc and the files this branch changed against main, as the device's checkout lacks them.
pack_app() {
  local dest=$1 tmp
  tmp=$(mktemp -d "$cache/app.XXXXXX")
  cp "$totoc" "$tmp/totoc"
  strip "$tmp/totoc" 2>/dev/null || true
  mkdir -p "$tmp/overlay"
  git -C "$repo" diff --name-only --diff-filter=d main -- | while read -r f; do
    mkdir -p "$tmp/overlay/$(dirname "$f")"
    cp "$repo/$f" "$tmp/overlay/$f"
  done
  tar -C "$tmp" -cf - totoc overlay | xz -9 -T2 >"$dest"
  rm -rf "$tmp"
  say "app $(basename "$dest"): $(stat -c %s "$dest") bytes (overlay: $(git -C "$repo" diff --name-only --diff-filter=d main -- | tr '\n' ' '))"
}

if [ "$app_only" = 1 ]; then
  calls=("$out"/call*)
  call="$out/call$((${#calls[@]} + 1))"
  mkdir -p "$call"
  stamp=$(date -u +%Y%m%d%H%M%S)
  pack_app "$call/app-$stamp.tar.xz"
  cp scripts/gpu-device.sh "$call/"
  (cd "$call" && sha256sum app-*.tar.xz >SHA256SUMS)
  # the stage's SHA256SUMS is copied from each call folder: keep the payload's lines in it
  grep -E ' (part\.|payload\.tar\.xz$)' "$out/call1/SHA256SUMS" >>"$call/SHA256SUMS"
  say "rerun folder $call ($(du -sb "$call" | cut -f1) bytes): bash ${call#"$(dirname "$out")/"}/gpu-device.sh run ${call#"$(dirname "$out")/"} [SMOKE ARGS]"
  exit 0
fi

# ----------------------------------------------------------------------------------------- the payload
# It depends on --keep-sm and --no-eager only: made once (xz -9e of 360 MB takes minutes) and kept in the cache.
ort_version=1.31.1
cached_payload="$cache/payload-ort$ort_version-sm$keep_sm-eager$eager.tar.xz"
work=$(mktemp -d "$cache/pack.XXXXXX")
trap 'rm -rf "$work"' EXIT

make_payload() {
  local whl_dir="$cache/onnxruntime-gpu-$ort_version" payload="$work/payload"
  local wheels=("$whl_dir"/onnxruntime_gpu-*.whl)
  if [ ${#wheels[@]} = 0 ]; then
    say "downloading onnxruntime-gpu==$ort_version (255 MB)"
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 \
      --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 -d "$whl_dir" "onnxruntime-gpu==$ort_version" >&2
    wheels=("$whl_dir"/onnxruntime_gpu-*.whl)
  fi
  mkdir -p "$payload/ort"
  python3 - "${wheels[0]}" "$payload/ort" <<'PY'
import os, sys, zipfile
whl, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(whl) as z:
    for n in z.namelist():
        base = os.path.basename(n)
        if n.startswith("onnxruntime/capi/libonnxruntime") and ".so" in base:
            with z.open(n) as src, open(os.path.join(dest, base), "wb") as dst:
                dst.write(src.read())
PY
  say "pruning the CUDA provider to sm_$keep_sm"
  python3 scripts/gpu-prune-fatbin.py "$payload/ort/libonnxruntime_providers_cuda.so" "$payload/ort/cuda.so" \
    --keep-sm "$keep_sm"
  mv "$payload/ort/cuda.so" "$payload/ort/libonnxruntime_providers_cuda.so"
  chmod +x "$payload/ort"/*.so*
  if [ "$eager" = 1 ]; then
    # toto-ts and what it imports, at the reference venv's versions (tests/reference/requirements.txt); the GPU
    # image has torch, numpy, pandas, einops, jaxtyping, lightning, transformers, safetensors, toolz, not these
    mkdir -p "$payload/wheels"
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      -d "$payload/wheels" toto-ts==0.2.0 gluonts==0.16.2 pydantic==2.14.4 pydantic_core==2.50.5 \
      typing_inspection==0.4.5 annotated_types==0.8.0 rotary-embedding-torch==0.8.6 dill==0.3.8 >&2
  fi
  say "compressing the payload (xz -9e)"
  tar -C "$payload" -cf - . | xz -9e -T2 >"$cached_payload.partial"
  mv "$cached_payload.partial" "$cached_payload"
  rm -rf "$payload"
}
[ -f "$cached_payload" ] || make_payload
cp "$cached_payload" "$work/payload.tar.xz"

rm -rf "$out"/call*
(cd "$work" && split -b "${part_mib}M" -d -a 2 payload.tar.xz part.)
parts=("$work"/part.*)
sums="$work/SHA256SUMS"
(cd "$work" && sha256sum payload.tar.xz part.* >"$sums")
i=0
for p in "${parts[@]}"; do
  i=$((i + 1))
  mkdir -p "$out/call$i"
  mv "$p" "$out/call$i/"
  cp scripts/gpu-device.sh "$out/call$i/"
done
pack_app "$out/call$i/app-0.tar.xz"
for d in "$out"/call*; do
  cp "$sums" "$d/SHA256SUMS"
  for a in "$d"/app-*.tar.xz; do (cd "$d" && sha256sum "$(basename "$a")" >>SHA256SUMS); done
done
say "payload $(stat -c %s "$work/payload.tar.xz") bytes in ${#parts[@]} parts of <= $part_mib MiB"
rel=$(basename "$out")
for d in "$out"/call*; do
  n=$(basename "$d")
  verb=stage
  [ "$n" = "call$i" ] && verb=run
  echo "$n: $(du -sb "$d" | cut -f1) bytes; carry [\"$rel/$n\"], command: bash $rel/$n/gpu-device.sh $verb $rel/$n"
done
