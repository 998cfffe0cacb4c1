#!/usr/bin/env bash
# One-off (not CI, ~15 min): runs totoc's CPU-sensitive tests as other x86-64 CPUs would, under Debian's qemu-user
# (`qemu-x86_64 -cpu MODEL`, apt package qemu-user): its CPUID steers ONNX Runtime's MLAS kernels and glibc's libm
# variants as that CPU's would. qemu's TCG has no AVX-512, so AVX-512/AMX CPUs cannot be emulated.
#   scripts/qemu-cpus.sh [MODEL ...]     # default: Haswell-v4 (AVX2 + FMA) Nehalem-v1 (SSE4.2, no FMA)
# Prints, per CPU: the engines' unit tests (the bit-for-bit host numerics against torch: scaler, mixture mean,
# quantiles, RoPE), and the ONNX Runtime equivalence tests on the tiny fixtures with their margins (worst
# |Δ|/tolerance against toto-ts per case, buckets and packing against the 1e-6 bound).
# The "CPUs" table of docs/guide.md.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v qemu-x86_64 >/dev/null || { echo "needs qemu-x86_64: apt-get install qemu-user" >&2; exit 1; }
TOTOC_ORT_LIB=$(scripts/fetch-onnxruntime.sh)
export TOTOC_ORT_LIB
exes=$(cargo test -p engines --lib --test equivalence --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable"):
        print(m["target"]["name"] + "=" + m["executable"])')
unit=$(echo "$exes" | grep '^engines=' | cut -d= -f2)
equiv=$(echo "$exes" | grep '^equivalence=' | cut -d= -f2)
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(Haswell-v4 Nehalem-v1)
echo "host: $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(ldd --version | head -n 1)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/libm-probe" scripts/libm-probe.c -lm
for cpu in native "${models[@]}"; do
  run=()
  [ "$cpu" = native ] || run=(qemu-x86_64 -cpu "$cpu")
  echo "== $cpu"
  "${run[@]}" "$work/libm-probe" "$work/libm-$cpu.bin" 2>/dev/null
  python3 - "$work/libm-native.bin" "$work/libm-$cpu.bin" <<'PY'
import sys
names = ["exp", "log", "pow", "sin", "cos", "expf", "logf", "powf", "sinf", "cosf"]
a, b = (open(p, "rb").read() for p in sys.argv[1:])
n = len(a) // 8 // len(names)
out = []
for k, name in enumerate(names):
    lo = k * n * 8
    diff = sum(a[lo + 8 * i : lo + 8 * i + 8] != b[lo + 8 * i : lo + 8 * i + 8] for i in range(n))
    out.append(f"{name} {diff}")
print(f"glibc libm results that differ from the host's (of {n} each): " + ", ".join(out))
PY
  (cd engines && "${run[@]}" "$unit" 2>&1) | grep -E '^test result' | sed 's/^/unit tests (host numerics): /'
  (cd engines && "${run[@]}" "$equiv" --nocapture --test-threads 1 2>&1) |
    grep -E 'worst \|Δ\|/tolerance|of the 1e-6|^test result' | grep -v "TCG doesn't" | sort -u
done
