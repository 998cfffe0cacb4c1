#!/usr/bin/env bash
# Runs every test of totoc: formatting and lints, Rust unit + integration tests (against the committed toto-ts
# golden fixtures, through ONNX Runtime CPU), the official ONNX checker on exported graphs, and the live check
# that the committed fixtures still match what toto-ts 0.2.0 (Toto 1.0), toto-2 2.0.0 (Toto 2.0) and kronos-finance
# 0.1.5 (Kronos) produce.
#
# Installs what it needs under ~/.cache/totoc: the ONNX Runtime library (PyPI wheel), a small venv with `onnx`,
# a small venv with the tritonclient[http,grpc] clients (the `serve` tests drive the server with them) and KServe's
# time-series types with pydantic (the KServe time-series tests validate with them), a small venv
# with fev and utilsforecast (the oracles of the backtest metrics, backtest/tests/oracle.rs), the toto-ts
# reference venv (~3.3 GB download once), the toto-2 and kronos-finance wheels on top of it, the data venv
# (statsmodels, pandas, pyarrow, bokeh-sampledata; backtesting.py's sample data for the real-data calendar tests)
# that checks the public-data fixtures and the training-data venv (tests/training/setup_data_venv.sh) that
# rebuilds the trained models' corpus (skip the live checks with TOTOC_SKIP_LIVE_REFERENCE=1).
set -euo pipefail
cd "$(dirname "$0")/.."

# Which machine this log comes from: CI machines differ (AMD AVX2, AMD AVX-512, Intel AVX-512 + AMX), and the SIMD
# flags pick ONNX Runtime's MLAS kernels, MKL's code path and torch's ATen kernels.
echo "== CPU: $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')," \
  "$(nproc) cores; kernel-picking flags:" \
  "$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -xE 'sse4_2|avx|fma|avx2|avx512f|avx512_vnni|avx_vnni|avx512_bf16|avx512_fp16|amx_tile|amx_int8' | tr '\n' ' ')"
target_dir=$(realpath -m "${CARGO_TARGET_DIR:-target}")
mkdir -p "$target_dir"
# The disk this run builds on: a CI machine's free space varies, and a full disk fails tests far from the cause.
echo "== disk: $(df -h --output=avail "$target_dir" | tail -n 1 | tr -d ' ') free for $target_dir;" \
  "CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-unset}, CARGO_PROFILE_DEV_DEBUG=${CARGO_PROFILE_DEV_DEBUG:-unset}"
# What the temp folder holds before the run: a test that leaves files there fills the disk of a machine that keeps
# it, run after run (checked at the end).
tmp_root=$(realpath -m "${TMPDIR:-/tmp}")
# The integration tests' shared fixtures used to stay behind as tempfile's `.tmpXXXXXX` folders
# holding an export bundle (~50 MB each, five a run; now common::shared_fixture_dir): remove what earlier runs left
# (an hour old or more, ours).
stale=$(find "$tmp_root" -mindepth 1 -maxdepth 1 -type d -name '.tmp??????' -user "$(id -u)" -mmin +60 \
  -exec test -f '{}/bundle/manifest.json' ';' -print 2>/dev/null || true)
if [ -n "$stale" ]; then
  echo "== removing $(printf '%s\n' "$stale" | wc -l) test fixture folders earlier runs left in $tmp_root" \
    "($(printf '%s\n' "$stale" | xargs -d '\n' du -sch 2>/dev/null | tail -n 1 | cut -f1))"
  printf '%s\n' "$stale" | xargs -d '\n' rm -rf
fi
tmp_before=$(find "$tmp_root" -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | sort)
if [ "${TOTOC_SKIP_LIVE_REFERENCE:-0}" != 1 ]; then
  echo "== reference kernels (torch's CPU capability and MKL's branch, native and as the live checks pin them)"
  reference_python=$(tests/reference/setup_venv.sh | tail -n 1)
  # `totoc backtest --reference-checkpoint`'s test runs the eager reference through it
  TOTOC_REFERENCE_PYTHON=$reference_python
  export TOTOC_REFERENCE_PYTHON
  for setting in native pinned; do
    TOTOC_REFERENCE_KERNELS=$setting "$reference_python" -c \
      'import sys; sys.path.insert(0, "tests/reference"); import kernels; kernels.pin(); print(kernels.describe())'
  done
fi

echo "== fetching ONNX Runtime"
TOTOC_ORT_LIB=$(scripts/fetch-onnxruntime.sh)
export TOTOC_ORT_LIB
echo "== setting up the ONNX checker venv"
TOTOC_ONNX_PYTHON=$(scripts/setup-onnx-checker.sh)
export TOTOC_ONNX_PYTHON
echo "== setting up the tritonclient venv"
TOTOC_SERVE_PYTHON=$(scripts/setup-serve-venv.sh)
export TOTOC_SERVE_PYTHON
echo "== setting up the metrics oracle venv (fev 0.10.0, utilsforecast 0.2.17)"
TOTOC_METRICS_PYTHON=$(tests/metrics/setup_venv.sh | tail -n 1)
export TOTOC_METRICS_PYTHON
echo "== setting up the data venv (public datasets; backtesting.py's market data for the calendar tests)"
TOTOC_DATA_PYTHON=$(tests/data/setup_venv.sh | tail -n 1)
export TOTOC_DATA_PYTHON
# Tests that need one of these venvs fail instead of skipping when it is missing.
export TOTOC_STRICT_TESTS=1

echo "== shell scripts: shellcheck, gpu-smoke argument handling"
shellcheck=$(scripts/setup-shellcheck.sh)
"$shellcheck" scripts/*.sh tests/reference/*.sh tests/metrics/*.sh tests/data/*.sh tests/training/*.sh
for bad in "--runs 0" "--runs x" "--targets cpu" "--precisions fp8" "--profile fast" "--nope"; do
  # shellcheck disable=SC2086 # each case is several words on purpose
  if scripts/gpu-smoke.sh --dry-run $bad >/dev/null 2>&1; then echo "gpu-smoke accepted '$bad'" >&2; exit 1; fi
done
# the GPU run's packing for a lent machine: its argument checks (the pack itself downloads 255 MB), the fatbin pruning
for bad in "" "--out" "--out . --part-mib 0" "--out . --totoc /nonexistent" "--out . --nope"; do
  # shellcheck disable=SC2086 # each case is several words on purpose
  if scripts/gpu-pack.sh $bad >/dev/null 2>&1; then echo "gpu-pack accepted '$bad'" >&2; exit 1; fi
done
python3 tests/scripts/test_gpu_prune_fatbin.py

echo "== cargo fmt / clippy"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings

echo "== cargo test"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --workspace 2>&1 | tee "$log"
read -r passed failed ignored < <(awk '/^test result:/ {
    for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed;?$/) p += $i; if ($(i+1) ~ /^failed;?$/) f += $i; if ($(i+1) ~ /^ignored;?$/) g += $i }
  } END { print p + 0, f + 0, g + 0 }' "$log")

echo "== Python package: a dev wheel (maturin, abi3, for this machine) in a venv of its own, pytest"
python_start=$SECONDS
maturin=$(scripts/setup-python-venv.sh build | tail -n 1)
test_python=$(scripts/setup-python-venv.sh test | tail -n 1)
python_work=$(mktemp -d)
trap 'rm -f "$log"; rm -rf "$python_work"' EXIT
# The extension module builds into the workspace's target directory for this machine's target, linked by the
# system's linker (`--compatibility linux`: a wheel only this machine installs), so its dependencies are mostly the
# units the tests above compiled. Release wheels are linked by zig against glibc 2.28 (`maturin build --zig
# --compatibility manylinux_2_28`, the artifacts workflow); building that here compiled every dependency once more
# for zig's explicit target triple, ~55 s of a cold CI run more than this (measured 2026-11-29), for no code path
# the tests could tell apart.
# The `totoc` command of the wheel (package data in python/totoc/bin/; the console script execs it): the debug
# binary built above, reused, for the same reason.
scripts/build-python-cli.sh --reuse "$target_dir/debug/totoc" \
  2>"$python_work/build-cli.log" >/dev/null || {
  tail -n 40 "$python_work/build-cli.log" >&2
  exit 1
}
"$maturin" build --manifest-path python/Cargo.toml --profile dev --compatibility linux \
  --out "$python_work/wheels" 2>"$python_work/build.log" || {
  tail -n 40 "$python_work/build.log" >&2
  exit 1
}
"$test_python" -m pip install -q --force-reinstall --no-deps "$python_work"/wheels/totoc-*.whl
echo "built and installed $(basename "$python_work"/wheels/totoc-*.whl)"
# From an empty directory, so that only the installed package is importable (the tests check it); with the
# package's own doctests. A failing test or no test at all (pytest's exit 5) fails the script.
tests_dir=$PWD/python/tests
# The drop-in tests (python/tests/compat) need torch, toto-ts and toto-2: they run below, in the layered venv.
(cd "$python_work" && TOTOC_BIN="$target_dir/debug/totoc" "$test_python" -m pytest -p no:cacheprovider -ra --durations=8 \
  --doctest-modules --pyargs totoc "$tests_dir" --ignore="$tests_dir/compat") 2>&1 | tee "$python_work/pytest.log"
# The drop-ins (totoc.compat) against toto-ts and toto-2 called as their users call them: the same wheel in a venv
# layered over the reference venv (scripts/setup-python-venv.sh compat). Skipped with the live reference checks
# (TOTOC_SKIP_LIVE_REFERENCE=1: no reference venv).
if [ "${TOTOC_SKIP_LIVE_REFERENCE:-0}" = 1 ]; then
  echo "python drop-in tests skipped (TOTOC_SKIP_LIVE_REFERENCE=1)"
  : >"$python_work/pytest-compat.log"
else
  compat_python=$(scripts/setup-python-venv.sh compat | tail -n 1)
  "$compat_python" -m pip install -q --force-reinstall --no-deps "$python_work"/wheels/totoc-*.whl
  (cd "$python_work" && TOTOC_BIN="$target_dir/debug/totoc" "$compat_python" -m pytest -p no:cacheprovider -ra --durations=8 \
    --rootdir "$tests_dir/compat" "$tests_dir/compat") 2>&1 | tee "$python_work/pytest-compat.log"
fi
read -r py_passed py_failed py_skipped < <(tail -q -n 1 "$python_work/pytest.log" "$python_work/pytest-compat.log" | awk '{
    for (i = 1; i < NF; i++) { w = $(i+1); sub(/[,;]$/, "", w)
      if (w == "passed") p += $i; if (w == "failed" || w == "errors" || w == "error") f += $i; if (w == "skipped") s += $i }
  } END { print p + 0, f + 0, s + 0 }')
passed=$((passed + py_passed))
failed=$((failed + py_failed))
ignored=$((ignored + py_skipped))
echo "python package: $py_passed passed, $py_failed failed, $py_skipped skipped (with the drop-in tests); $((SECONDS - python_start)) s"

# The gpu-smoke dry run beside the live checks: they pin one thread everywhere (tests/reference/kernels.py), so
# the dry run has the other core (about a minute saved on 2 cores); its table is printed after them. Its latency
# figures say nothing here (the CPU stands in for the GPU); only its pass/fail counts.
echo "== gpu-smoke dry run started (the CPU steps of scripts/gpu-smoke.sh; the GPU steps need a GPU): printed below"
smoke=$(mktemp -d)
scripts/gpu-smoke.sh --dry-run --profile debug --runs 1 --work "$smoke" >"$smoke/out" 2>"$smoke/log" &
smoke_pid=$!
trap 'kill "$smoke_pid" 2>/dev/null || true; rm -f "$log"; rm -rf "$python_work" "$smoke"' EXIT

if [ "${TOTOC_SKIP_LIVE_REFERENCE:-0}" = 1 ]; then
  echo "== live reference checks skipped (TOTOC_SKIP_LIVE_REFERENCE=1)"
else
  echo "== live reference check: regenerate fixtures with toto-ts and compare"
  tests/reference/regen_fixtures.sh --check
  echo "== data fixtures: convert the statsmodels and bokeh-sampledata datasets again and compare"
  "$TOTOC_DATA_PYTHON" tests/data/convert.py --check tests/fixtures/data
  echo "== Kronos inputs: extract the OHLCV rows from bokeh-sampledata again and compare"
  "$TOTOC_DATA_PYTHON" tests/reference/kronos_inputs.py --check
  echo "== live reference check (Toto 2.0): regenerate fixtures with toto-2 and compare"
  tests/reference/regen_toto2_fixtures.sh --check
  echo "== live reference check (Kronos): regenerate fixtures with kronos-finance (eval mode) and compare"
  tests/reference/regen_kronos_fixtures.sh --check
  echo "== training corpora: rebuild them from the pip packages' data sets and compare (tests/training/build_corpus.py, build_kronos_corpus.py)"
  train_data_python=$(tests/training/setup_data_venv.sh | tail -n 1)
  "$train_data_python" tests/training/build_corpus.py --check tests/fixtures/trained
  "$train_data_python" tests/training/build_kronos_corpus.py --check tests/fixtures/trained
  echo "== trained Kronos: regenerate its golden cases with kronos-finance (eval mode) and compare"
  kronos_corpus=$(mktemp -d)
  "$train_data_python" tests/training/build_kronos_corpus.py "$kronos_corpus" >/dev/null
  "$reference_python" tests/training/make_kronos_golden.py --check --checkpoint tests/fixtures/trained/kronos-1m \
    --corpus "$kronos_corpus" --out tests/fixtures/trained/kronos-1m-cases || { rm -rf "$kronos_corpus"; exit 1; }
  rm -rf "$kronos_corpus"
  echo "== trained checkpoints: re-run the first training steps with toto-ts / toto-2 and compare the losses"
  "$reference_python" tests/training/train_toto1.py --verify-training tests/fixtures/trained/toto1-small
  "$reference_python" tests/training/train_toto2.py --verify-training tests/fixtures/trained/toto2-4m
  echo "== the live checks fail on a perturbed weight, input or seed (|diff|/tolerance >= 10)"
  live_log=$(mktemp)
  "$reference_python" tests/reference/test_live_checks.py 2>"$live_log" | tee -a "$log" || {
    tail -n 40 "$live_log" >&2
    exit 1
  }
  rm -f "$live_log"
  read -r live_passed live_failed < <(awk '/^live checks:/ { print $3, $5 }' "$log")
  passed=$((passed + live_passed))
  failed=$((failed + live_failed))
fi
echo "== gpu-smoke dry run"
if ! wait "$smoke_pid"; then
  tail -n 40 "$smoke/log" >&2
  rm -rf "$smoke"
  echo "gpu-smoke dry run failed" >&2
  exit 1
fi
tail -n 8 "$smoke/out"
rm -rf "$smoke"
echo "== the temp folder: what this run left in $tmp_root"
rm -f "$log"
rm -rf "$python_work"
left_mib=0
while IFS= read -r entry; do
  # pytest keeps its three newest base folders (pytest-of-USER) and removes older ones itself
  case $entry in "" | pytest-of-*) continue ;; esac
  mib=$(du -sm "$tmp_root/$entry" 2>/dev/null | cut -f1)
  echo "left in the temp folder: $entry (${mib:-0} MiB)"
  left_mib=$((left_mib + ${mib:-0}))
done < <(comm -13 <(printf '%s\n' "$tmp_before") \
  <(find "$tmp_root" -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | sort))
# Other processes may write there too, so a little is tolerated; a test's leaked engine or bundle is not.
if [ "$left_mib" -gt 20 ]; then
  echo "this run left $left_mib MiB in $tmp_root: a test does not remove its files" >&2
  exit 1
fi
echo "== all tests passed ($(du -sh "$target_dir" | cut -f1) in $target_dir," \
  "$(df -h --output=avail "$target_dir" | tail -n 1 | tr -d ' ') free)"
echo "totoc: $passed passed, $failed failed, $ignored skipped"
