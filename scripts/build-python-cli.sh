#!/usr/bin/env bash
# Builds the `totoc` command for the Python wheel, linked as the wheel's extension module is: by zig, against
# glibc 2.28 (manylinux_2_28), so the wheel's one platform tag holds for both. Copies it to python/totoc/bin/totoc
# (ignored by git), where maturin picks it up as package data and the `totoc` console script (python/totoc/_cli.py)
# execs it.
#   scripts/build-python-cli.sh [--profile dev|release] [--target x86_64-unknown-linux-gnu|aarch64-unknown-linux-gnu]
#   scripts/build-python-cli.sh --reuse BINARY
# Needs the build venv (scripts/setup-python-venv.sh build: maturin and ziglang); dev builds are stripped of debug
# info (the wheel would carry ~300 MB of it). Honours CARGO_TARGET_DIR. A zig build is checked to need no glibc
# symbol newer than 2.28.
# --reuse copies an already built `totoc` (e.g. target/debug/totoc) instead: no compile, but the binary needs this
# machine's glibc, so the wheel's manylinux_2_28 tag is not true of it. scripts/test.sh uses it for the dev wheel
# it tests on this machine (compiling the command's dependencies once more for zig's target would cost minutes of
# CI); release wheels (.github/workflows/artifacts.yml) never do.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
profile=dev
reuse=
triple=x86_64-unknown-linux-gnu
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) profile=$2; shift 2 ;;
    --target) triple=$2; shift 2 ;;
    --reuse) reuse=$2; shift 2 ;;
    *) echo "usage: $0 [--profile dev|release] [--target TRIPLE] | --reuse BINARY" >&2; exit 2 ;;
  esac
done
out="$here/python/totoc/bin/totoc"
mkdir -p "$(dirname "$out")"
if [ -n "${reuse:-}" ]; then
  rm -f "$out"
  objcopy --strip-debug "$reuse" "$out" 2>/dev/null || cp "$reuse" "$out"
  chmod +x "$out"
  echo "$out"
  exit 0
fi
maturin=$("$here/scripts/setup-python-venv.sh" build | tail -n 1)
venv_bin=$(dirname "$maturin")
target_dir=$(realpath -m "${CARGO_TARGET_DIR:-$here/target}")
zig_target="${triple%%-*}-linux-gnu.2.28"
wrappers="$target_dir/zig-cli/$triple"
mkdir -p "$wrappers"
# The same wrappers maturin writes for `--zig` (cargo-zigbuild's): `maturin zig cc|c++|ar` running PyPI's zig.
for tool in cc c++ ar ranlib; do
  flags=()
  case "$tool" in cc|c++) flags=(-- -g -fno-sanitize=all -target "$zig_target") ;; esac
  cat >"$wrappers/$tool" <<WRAP
#!/bin/sh
export CARGO_ZIGBUILD_ZIG_COMMAND="$venv_bin/python3" CARGO_ZIGBUILD_ZIG_COMMAND_ARGS='-m ziglang'
exec "$maturin" zig $tool ${flags[*]} "\$@"
WRAP
  chmod +x "$wrappers/$tool"
done
upper=$(echo "$triple" | tr 'a-z-' 'A-Z_')
lower=${triple//-/_}
export "CARGO_TARGET_${upper}_LINKER=$wrappers/cc" "CC_${lower}=$wrappers/cc" "CXX_${lower}=$wrappers/c++" \
  "AR_${lower}=$wrappers/ar" "RANLIB_${lower}=$wrappers/ranlib"
cargo build --manifest-path "$here/Cargo.toml" -p totoc --bin totoc --profile "$profile" --target "$triple" >&2
built="$target_dir/$triple/$([ "$profile" = dev ] && echo debug || echo "$profile")/totoc"
# the manylinux_2_28 promise: no versioned glibc symbol newer than 2.28
# (readelf reads any architecture's dynamic symbols, so the aarch64 build is checked too)
if command -v readelf >/dev/null; then
  newest=$(readelf --dyn-syms -W "$built" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -n 1)
  if [ -n "$newest" ] && [ "$(printf '%s\n2.28\n' "$newest" | sort -V | tail -n 1)" != 2.28 ]; then
    echo "$built needs glibc $newest > 2.28: not linked by zig for manylinux_2_28" >&2
    exit 1
  fi
fi
rm -f "$out"
if [ "$profile" = dev ]; then
  objcopy --strip-debug "$built" "$out" 2>/dev/null || cp "$built" "$out"
else
  cp "$built" "$out"
fi
chmod +x "$out"
echo "$out"
