#!/usr/bin/env bash
# The Python package's benchmarks in one invocation (python/benchmarks/bench_python.py; not a test): the binding's
# per-call overhead against the engine's own calls (tiny and base-size engines), the toto-ts drop-in against
# toto-ts eager (base-size random checkpoint), the toto-2 drop-in against toto-2 eager (22m random checkpoint), then
# `Engine.predict_df` against `totoc forecast` on 1,000 series × 512 points (scripts/bench-python.py, the trained
# Toto 1.0 engine; in the test venv, whose numpy 2 / pandas 3 / pyarrow the table path needs).
#
#   scripts/bench-python.sh [--wheel WHEEL] [--work DIR] [-- bench_python.py options: --reps N --eager-reps N ...]
#
# Makes the random-weight checkpoints (tests/reference/make_checkpoints.py --config base,
# make_toto2_checkpoints.py --config 22m), exports and builds their CPU engines with target/release/totoc
# (configs/bench-dedicated.yaml, configs/toto2-22m.yaml, configs/tiny.yaml), installs WHEEL (default: a release
# wheel built here with maturin) into the compat venv (scripts/setup-python-venv.sh compat: torch, toto-ts, toto-2)
# and runs the benchmark there. Prints the CPU and Markdown tables on stdout. Work files: DIR (default
# target/bench-python), reused when present.
set -euo pipefail
cd "$(dirname "$0")/.."
work=target/bench-python
wheel=
while [ $# -gt 0 ]; do
  case "$1" in
    --wheel) wheel=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "usage: $0 [--wheel WHEEL] [--work DIR] [-- bench_python.py options]" >&2; exit 2 ;;
  esac
done
mkdir -p "$work"
target_dir=$(realpath -m "${CARGO_TARGET_DIR:-target}")
say() { echo "bench-python: $*" >&2; }
if [ ! -x "$target_dir/release/totoc" ]; then
  say "building target/release/totoc"
  cargo build --release -p totoc >&2
fi
bin=$target_dir/release/totoc
ref=$(tests/reference/setup_venv.sh | tail -n 1)
[ -f "$work/base-ckpt/model.safetensors" ] || "$ref" tests/reference/make_checkpoints.py --config base --out "$work/base-ckpt" >&2
[ -f "$work/t2-22m/config.json" ] || "$ref" tests/reference/make_toto2_checkpoints.py --config 22m --out "$work/t2-22m" >&2
engine() { # NAME CHECKPOINT CONFIG
  if [ ! -f "$work/$1-engine/manifest.json" ]; then
    say "export + build-engine $1"
    "$bin" export --checkpoint "$2" --config "$3" --out "$work/$1-bundle" --force >&2
    "$bin" build-engine --artifacts "$work/$1-bundle" --target cpu --out "$work/$1-engine" --force >&2
  fi
}
engine tiny tests/fixtures/tiny/checkpoint configs/tiny.yaml
engine base "$work/base-ckpt" configs/bench-dedicated.yaml
engine t2-22m "$work/t2-22m" configs/toto2-22m.yaml
if [ -z "$wheel" ]; then
  maturin=$(scripts/setup-python-venv.sh build | tail -n 1)
  say "building a release wheel"
  rm -rf "$work/wheels"
  PATH="$(dirname "$maturin"):$PATH" "$maturin" build --manifest-path python/Cargo.toml --release --zig \
    --compatibility manylinux_2_28 --out "$work/wheels" >&2
  wheel=$(ls "$work"/wheels/totoc-*.whl)
fi
python=$(scripts/setup-python-venv.sh compat | tail -n 1)
"$python" -m pip install -q --force-reinstall --no-deps "$wheel" >&2
work=$(realpath "$work")
cd "$work"  # the installed wheel, not the source tree
"$python" "$OLDPWD/python/benchmarks/bench_python.py" --tiny-engine "$work/tiny-engine" \
  --base-engine "$work/base-engine" --base-checkpoint "$work/base-ckpt" --toto2-engine "$work/t2-22m-engine" \
  --toto2-checkpoint "$work/t2-22m" "$@"
cd "$OLDPWD"
engine trained-toto1 tests/fixtures/trained/toto1-small configs/trained-toto1-small.yaml
tables_python=$(scripts/setup-python-venv.sh test | tail -n 1)
"$tables_python" -m pip install -q --force-reinstall --no-deps "$wheel" >&2
cd "$work"
TOTOC_BIN=$bin "$tables_python" "$OLDPWD/scripts/bench-python.py" --engine "$work/trained-toto1-engine" --runs 5
