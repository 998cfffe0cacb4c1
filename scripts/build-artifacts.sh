#!/usr/bin/env bash
# Builds the release artifacts of one profile config: what CI (.github/workflows/artifacts.yml) and the Dockerfile
# run. From the checkpoint the config names (its `model:` block), it exports every profile, builds the engine for
# --target, runs `totoc verify` on it (golden toto-ts cases) and `totoc bundle verify` on both bundles, writes
# `totoc bundle info --json` of each, and a SHA256SUMS over everything under OUT.
#
#   scripts/build-artifacts.sh --config configs/toto-base.yaml --checkpoint-root DIR --out DIR
#                              [--target cpu|cuda|tensorrt] [--totoc BIN] [--skip-verify]
#
# The config's `model.checkpoint` (and `model.golden`, `model.tokenizer`) are looked up as paths relative to the repository root
# first, then under --checkpoint-root (e.g. `Datadog/Toto-Open-Base-1.0` under the directory CI restored or
# downloaded checkpoints into). Output:
#   OUT/<config>/export/            export bundle (manifest.json + manifest.sha256 + graphs + weights)
#   OUT/<config>/engine-<target>/   engine bundle
#   OUT/<config>/*.info.json        `totoc bundle info --json` of each
#   OUT/SHA256SUMS                  sha256 of every file under OUT (check: cd OUT && sha256sum -c SHA256SUMS)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

config="" ckroot="" out="" target=cpu totoc="${TOTOC:-totoc}" skip_verify=0
die() { echo "build-artifacts: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config=${2:?--config needs a file}; shift 2 ;;
    --checkpoint-root) ckroot=${2:?--checkpoint-root needs a directory}; shift 2 ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --target) target=${2:?--target needs cpu, cuda or tensorrt}; shift 2 ;;
    --totoc) totoc=${2:?--totoc needs a binary}; shift 2 ;;
    --skip-verify) skip_verify=1; shift ;;
    *) die "unknown argument $1 (see the header of $0)" ;;
  esac
done
[ -n "$config" ] && [ -n "$out" ] || die "--config and --out are required"
[ -f "$config" ] || die "no config file $config"
case "$target" in cpu|cuda|tensorrt) ;; *) die "--target must be cpu, cuda or tensorrt, not $target" ;; esac

# One key of the config's `model:` block (plain `key: value` lines, as configs/*.yaml write them).
model_key() {
  awk -v key="$1" '/^model:/ {m = 1; next} m && /^[^ #]/ {m = 0}
    m && $1 == key ":" {print $2; exit}' "$config"
}
# A path named by the config: relative to the repository, else under --checkpoint-root.
resolve() {
  if [ -e "$root/$1" ]; then echo "$root/$1"
  elif [ -n "$ckroot" ] && [ -e "$ckroot/$1" ]; then echo "$ckroot/$1"
  else return 1; fi
}
checkpoint_name=$(model_key checkpoint)
[ -n "$checkpoint_name" ] || die "$config has no model.checkpoint: add a model: block (generation, checkpoint)"
checkpoint=$(resolve "$checkpoint_name") ||
  die "checkpoint $checkpoint_name of $config not found in the repository or under --checkpoint-root '${ckroot}'"
# a model exported with its tokenizer names that checkpoint too (`model.tokenizer`)
tokenizer_args=()
tokenizer_name=$(model_key tokenizer)
if [ -n "$tokenizer_name" ]; then
  tokenizer=$(resolve "$tokenizer_name") ||
    die "tokenizer $tokenizer_name of $config not found in the repository or under --checkpoint-root '${ckroot}'"
  tokenizer_args=(--tokenizer "$tokenizer")
fi
golden_args=()
golden_name=$(model_key golden)
if [ -n "$golden_name" ]; then
  golden=$(resolve "$golden_name") || die "golden cases $golden_name of $config not found"
  golden_args=(--golden "$golden")
elif [ "$skip_verify" = 0 ]; then
  die "$config names no model.golden: totoc verify needs golden cases (tests/reference/run_reference.py), or pass --skip-verify"
fi

name=$(basename "$config" .yaml)
dir="$out/$name"
mkdir -p "$dir"
echo "== $name: export from $checkpoint"
"$totoc" export --checkpoint "$checkpoint" "${tokenizer_args[@]}" --config "$config" --out "$dir/export" \
  "${golden_args[@]}"
"$totoc" bundle verify "$dir/export"
echo "== $name: build the $target engine"
"$totoc" build-engine --artifacts "$dir/export" --out "$dir/engine-$target" --target "$target"
"$totoc" bundle verify "$dir/engine-$target"
if [ "$skip_verify" = 0 ]; then
  echo "== $name: verify the engine against its golden cases"
  "$totoc" verify --engine "$dir/engine-$target"
fi
"$totoc" bundle info --json "$dir/export" >"$dir/export.info.json"
"$totoc" bundle info --json "$dir/engine-$target" >"$dir/engine-$target.info.json"

echo "== SHA256SUMS"
sums=$(mktemp)
(cd "$out" && find . -type f ! -name SHA256SUMS -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) >"$sums"
mv "$sums" "$out/SHA256SUMS"
echo "build-artifacts: $name: $(wc -l <"$out/SHA256SUMS") files in $out (SHA256SUMS)"
