#!/usr/bin/env bash
# ABAB benchmark of two builds of totoc: `totoc bench` run by the base build (A) and the new build (B) in turn,
# A B A B ..., on the same engine, then an A/A' pass (the base build against itself, interleaved the same way) that
# measures how far two runs of one binary drift apart on this machine. A workload's B/A ratio is the median of its
# per-round ratios; the verdict says whether it lies inside the min-max spread of the A/A' ratios.
#
# Usage: scripts/abab-bench.sh [--base REV] [--new REV | --new-bin PATH] [--rounds N] [--engine DIR] [--out DIR]
#                              [--model base|tiny] [--runs N] [--threads N] [--warmup N]
#   --base REV      base revision (default: HEAD); built in a git worktree under target/abab/
#   --new REV       new revision (default: the working tree, built here)
#   --new-bin PATH  an already built new binary instead of --new
#   --rounds N      ABAB rounds, and A/A' rounds (default 5)
#   --engine DIR    the engine bundle both binaries time (default: one made here, see --model)
#   --out DIR       where report.md and report.json go (default: target/abab)
#   --model M       the engine made without --engine: `base` (default; a base-size random Toto 1.0 checkpoint made
#                   by tests/reference/make_checkpoints.py, exported with configs/bench-dedicated.yaml, the bench
#                   engine of scripts/gpu-smoke.sh) or `tiny` (the fixture of scripts/demo.sh: fast, but it serves
#                   only the workloads that fit configs/tiny.yaml)
#   --runs N        timed runs per workload in each `totoc bench` (its --runs; default 5)
#   --threads N     CPU intra-op threads (bench's --threads; default: bench's own, the physical cores)
#   --warmup N      untimed `totoc bench --runs 1` passes of each binary before the rounds (default 1; page cache,
#                   CPU frequency; their output is kept in raw/ but not counted)
#
# The base (and --new) revision's worktree stays in target/abab/tree-<sha> for the next run (remove it with
# `git worktree remove target/abab/tree-<sha>`). Builds share one Cargo target directory (target/abab/target, dependencies built once); each binary is copied
# out after its build (target/abab/bin/). Engine bundles are versioned: when the new binary cannot load the engine
# the base binary built, each binary gets its own engine (made the same way) and the report says so. Needs ONNX
# Runtime (TOTOC_ORT_LIB, default: scripts/fetch-onnxruntime.sh) and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

base_rev=HEAD
new_rev=""
new_bin=""
rounds=5
engine=""
out=target/abab
model=base
runs=5
threads=""
warmup=1
while [ $# -gt 0 ]; do
  case $1 in
    --base) base_rev=$2; shift 2 ;;
    --new) new_rev=$2; shift 2 ;;
    --new-bin) new_bin=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --engine) engine=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "abab-bench: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ -n "$new_rev" ] && [ -n "$new_bin" ]; then
  echo "abab-bench: give --new or --new-bin, not both" >&2
  exit 2
fi
case $model in base | tiny) ;; *) echo "abab-bench: --model is base or tiny" >&2; exit 2 ;; esac
[ "$rounds" -ge 1 ] 2>/dev/null || { echo "abab-bench: --rounds must be a positive integer" >&2; exit 2; }

say() { echo "== $*" >&2; }
work=target/abab
mkdir -p "$work/bin" "$out"
export CARGO_TARGET_DIR="$root/$work/target"
TOTOC_ORT_LIB=${TOTOC_ORT_LIB:-$(scripts/fetch-onnxruntime.sh)}
export TOTOC_ORT_LIB

# build_rev REV NAME: the release binary of REV, built in a worktree, copied to $work/bin/NAME; prints its path
build_rev() {
  local rev=$1 name=$2 sha tree
  sha=$(git rev-parse --verify "$rev^{commit}")
  tree="$work/tree-${sha:0:12}"
  if [ ! -d "$tree" ]; then
    git worktree add --detach "$tree" "$sha" >&2
  fi
  say "building $rev (${sha:0:12}) in $tree"
  (cd "$tree" && cargo build --release -q -p totoc) >&2
  cp "$CARGO_TARGET_DIR/release/totoc" "$work/bin/$name"
  echo "$work/bin/$name"
}

a_bin=$(build_rev "$base_rev" base)
a_desc="$base_rev ($(git rev-parse --short "$base_rev"))"
if [ -n "$new_bin" ]; then
  b_bin=$new_bin
  b_desc="binary $new_bin"
elif [ -n "$new_rev" ]; then
  b_bin=$(build_rev "$new_rev" new)
  b_desc="$new_rev ($(git rev-parse --short "$new_rev"))"
else
  say "building the working tree"
  cargo build --release -q -p totoc >&2
  cp "$CARGO_TARGET_DIR/release/totoc" "$work/bin/new"
  b_bin=$work/bin/new
  b_desc="working tree ($(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ', modified'))"
fi

# The Python for make_checkpoints.py (numpy + safetensors): the first of totoc's venvs that has both.
python=python3
for v in "${TOTOC_PYTHON:-}" ~/.cache/totoc/reference-venv/bin/python ~/.cache/totoc/onnx-venv/bin/python \
  ~/.cache/totoc/data-venv/bin/python; do
  if [ -n "$v" ] && [ -x "$v" ] && "$v" -c 'import numpy, safetensors' 2>/dev/null; then python=$v; break; fi
done

if [ "$model" = base ]; then context=512; else context=128; fi
# make_engine BIN DIR: exports the --model checkpoint with BIN and builds its CPU engine in DIR
make_engine() {
  local bin=$1 dir=$2 ckpt config golden=()
  if [ "$model" = base ]; then
    ckpt=$work/base-ckpt
    if [ ! -f "$ckpt/model.safetensors" ]; then
      say "making a base-size random checkpoint (tests/reference/make_checkpoints.py, $python)"
      "$python" tests/reference/make_checkpoints.py --config base --out "$ckpt" >&2
    fi
    config=configs/bench-dedicated.yaml
  else
    ckpt=tests/fixtures/tiny/checkpoint
    config=configs/tiny.yaml
    golden=(--golden tests/fixtures/tiny/cases)
  fi
  say "export + build-engine ($model) with $bin into $dir"
  "$bin" export --checkpoint "$ckpt" --config "$config" "${golden[@]}" --out "$dir/bundle" --force >&2
  "$bin" build-engine --artifacts "$dir/bundle" --target cpu --out "$dir/engine" --force >&2
}

# loads BIN DIR: whether BIN loads the engine in DIR and forecasts with it (one short mean forecast)
request=$work/probe-request.json
python3 - "$request" <<'PY'
import json, math, sys
json.dump({"target": [[100 + 10 * math.sin(t / 5) for t in range(64)]], "horizon": 8}, open(sys.argv[1], "w"))
PY
loads() {
  "$1" forecast --engine "$2" --input "$request" --output "$work/probe-forecast.json" >"$work/probe.log" 2>&1
}

engine_note="one engine for both binaries"
if [ -n "$engine" ]; then
  a_engine=$engine
  b_engine=$engine
else
  make_engine "$a_bin" "$work/engine-a"
  a_engine=$work/engine-a/engine
  b_engine=$a_engine
fi
if ! loads "$a_bin" "$a_engine"; then
  echo "abab-bench: the base binary cannot forecast with $a_engine:" >&2
  cat "$work/probe.log" >&2
  exit 1
fi
if ! loads "$b_bin" "$b_engine"; then
  why=$(grep -m 1 -i 'error\|format\|version' "$work/probe.log" || tail -n 1 "$work/probe.log")
  [ -n "$engine" ] && { echo "abab-bench: the new binary cannot load --engine $engine: $why" >&2; exit 1; }
  say "the new binary cannot load the base binary's engine ($why): building one engine per binary"
  make_engine "$b_bin" "$work/engine-b"
  b_engine=$work/engine-b/engine
  engine_note="one engine per binary, made the same way (the new binary could not load the base binary's: $why)"
  loads "$b_bin" "$b_engine" || { cat "$work/probe.log" >&2; exit 1; }
fi

raw=$work/raw
rm -rf "$raw"
mkdir -p "$raw"
bench_flags=(--context "$context" --no-rss)
[ -n "$threads" ] && bench_flags+=(--threads "$threads")
# bench TAG BIN ENGINE [RUNS]: one `totoc bench` (--runs RUNS, default --runs of this script), its JSON in
# $raw/TAG.json and its table in $raw/TAG.txt
bench() {
  say "bench $1"
  "$2" bench --engine "$1=$3" --runs "${4:-$runs}" "${bench_flags[@]}" --json "$raw/$1.json" >"$raw/$1.txt" 2>"$raw/$1.err" || {
    cat "$raw/$1.err" >&2
    exit 1
  }
}
for r in $(seq 1 "$warmup"); do
  bench "warmupA$r" "$a_bin" "$a_engine" 1
  bench "warmupB$r" "$b_bin" "$b_engine" 1
done
load_before=$(cut -d ' ' -f 1-3 /proc/loadavg 2>/dev/null || echo unknown)
for r in $(seq 1 "$rounds"); do
  bench "A$r" "$a_bin" "$a_engine"
  bench "B$r" "$b_bin" "$b_engine"
done
for r in $(seq 1 "$rounds"); do
  bench "AA$r" "$a_bin" "$a_engine"
  bench "AAp$r" "$a_bin" "$a_engine"
done

load_after=$(cut -d ' ' -f 1-3 /proc/loadavg 2>/dev/null || echo unknown)
cpu=$(grep -m 1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //' || true)
[ -n "$cpu" ] || cpu=$(uname -m)
python3 - "$raw" "$rounds" "$out" "$cpu" "$(nproc)" "$a_desc" "$b_desc" "$engine_note" "$a_engine" "$b_engine" \
  "$runs" "$context" "$load_before" "$load_after" "$warmup" <<'PY'
import json, os, statistics, sys

(raw, rounds, out, cpu, nproc, a_desc, b_desc, engine_note, a_engine, b_engine, runs, context, load_before,
 load_after, warmup) = sys.argv[1:]
rounds = int(rounds)


def medians(tag):
    """Workload -> median ms of one bench run (None where the engine cannot run the workload)."""
    doc = json.load(open(os.path.join(raw, tag + ".json")))
    if "workloads" in doc:  # Toto 1.0 engines
        return {name: w["median_ms"].get(tag) for name, w in doc["workloads"].items()}
    # Toto 2.0 engines: one row per engine; the single-series latency, and the throughput as ms per series
    row = doc["engines"][0]
    thr = row.get("throughput_series_per_s")
    return {"single_h336": row.get("single_h336_ms"), "throughput_ms_per_series": 1e3 / thr if thr else None}


runs_of = {tag: medians(tag) for tag in
           [f"{p}{r}" for r in range(1, rounds + 1) for p in ("A", "B", "AA", "AAp")]}
workloads = list(runs_of["A1"])


def ratios(num, den, w):
    out = []
    for r in range(1, rounds + 1):
        x, y = runs_of[f"{num}{r}"].get(w), runs_of[f"{den}{r}"].get(w)
        if x is not None and y is not None and y > 0:
            out.append(x / y)
    return out


def med(xs):
    return statistics.median(xs) if xs else None


def f(x, fmt):
    return "-" if x is None else format(x, fmt)


rows = []
for w in workloads:
    a = [runs_of[f"A{r}"].get(w) for r in range(1, rounds + 1)]
    b = [runs_of[f"B{r}"].get(w) for r in range(1, rounds + 1)]
    ba = ratios("B", "A", w)
    aa = ratios("AAp", "AA", w)
    ratio = med(ba)
    lo, hi = (min(aa), max(aa)) if aa else (None, None)
    if ratio is None:
        verdict = "not run (the engine cannot serve this workload)"
    elif lo is None:
        verdict = "no A/A' spread"
    elif lo <= ratio <= hi:
        verdict = "within A/A spread"
    else:
        verdict = "B faster (outside A/A spread)" if ratio < lo else "B slower (outside A/A spread)"
    rows.append({"workload": w, "median_a_ms": med([x for x in a if x is not None]),
                 "median_b_ms": med([x for x in b if x is not None]), "b_over_a": ratio, "b_over_a_rounds": ba,
                 "aa_min": lo, "aa_max": hi, "aa_rounds": aa, "verdict": verdict,
                 "a_ms_rounds": a, "b_ms_rounds": b})

lines = [
    "# ABAB benchmark: totoc bench, base (A) vs new (B)",
    "",
    f"- CPU: {cpu} ({nproc} logical CPUs); load average (1, 5, 15 min) {load_before} before, {load_after} after",
    f"- A: {a_desc}",
    f"- B: {b_desc}",
    f"- engine: {a_engine}" + ("" if a_engine == b_engine else f" (A), {b_engine} (B)") + f"; {engine_note}",
    f"- {warmup} untimed warm-up pass(es) of each binary, then {rounds} rounds of A B interleaved, "
    f"then {rounds} rounds of A A' (base against itself); "
    f"each `totoc bench --runs {runs} --context {context} --no-rss`",
    "- median A / B: median over rounds of each round's median; B/A: median over rounds of the per-round ratios; "
    "A/A' spread: min-max of the per-round A'/A ratios",
    "",
    "| workload | median A ms | median B ms | B/A | A/A' spread | verdict |",
    "|---|---:|---:|---:|---:|---|",
]
for r in rows:
    spread = "-" if r["aa_min"] is None else f"{r['aa_min']:.3f}–{r['aa_max']:.3f}"
    lines.append(f"| {r['workload']} | {f(r['median_a_ms'], '.2f')} | {f(r['median_b_ms'], '.2f')} | "
                 f"{f(r['b_over_a'], '.3f')} | {spread} | {r['verdict']} |")
report = "\n".join(lines) + "\n"
os.makedirs(out, exist_ok=True)
open(os.path.join(out, "report.md"), "w").write(report)
json.dump({"cpu": cpu, "nproc": int(nproc), "a": a_desc, "b": b_desc, "engine_a": a_engine, "engine_b": b_engine,
           "engine_note": engine_note, "loadavg_before": load_before, "loadavg_after": load_after,
           "rounds": rounds, "warmup": int(warmup), "runs": int(runs), "context": int(context),
           "workloads": rows, "raw_medians_ms": runs_of},
          open(os.path.join(out, "report.json"), "w"), indent=2)
print(report, end="")
print(f"(written to {os.path.join(out, 'report.md')} and report.json; raw bench output in {raw})")
PY
