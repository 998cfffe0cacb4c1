#!/usr/bin/env bash
# GPU smoke test of totoc's CUDA and TensorRT targets, fp32 and fp16, on a machine with an NVIDIA GPU.
#
#   scripts/gpu-smoke.sh [--work DIR] [--base-checkpoint DIR] [--runs N] [--targets cuda,tensorrt]
#                        [--precisions fp32,fp16] [--tensorrt-version V] [--skip-install] [--profile release|debug]
#                        [--totoc BIN] [--python PY]
#   scripts/gpu-smoke.sh --dry-run [...]   # no install, no GPU: the CPU steps and the table, for testing
#
# On a GPU machine without Rust or network: build totoc elsewhere and pass it with --totoc; unpack onnxruntime-gpu's
# onnxruntime/capi/*.so* somewhere, point TOTOC_ORT_LIB at its libonnxruntime.so.1.31.1 and pass --skip-install;
# --python names a Python with numpy and safetensors whose site-packages hold the nvidia-* CUDA/cuDNN wheels
# (PyTorch's, for instance).
#
# What it does:
#  1. installs what the GPU providers load from PyPI into <work>/venv: onnxruntime-gpu 1.31.1 (its CUDA 13 build
#     and its TensorRT 10 provider), the CUDA 13 runtime, cuBLAS, cuRAND, cuDNN 9 (nvidia-* wheels) and the
#     TensorRT 10 libraries (tensorrt-cu13-libs, from pypi.nvidia.com), and points LD_LIBRARY_PATH at them;
#  2. builds totoc and runs `totoc doctor` (which must find the GPU and call the targets ready);
#  3. exports the tiny fixture (fp32 + fp16, with its golden toto-ts cases) and a base-size random checkpoint
#     (fp32 + fp16, configs/bench-dedicated.yaml) — making the latter with tests/reference/make_checkpoints.py
#     unless --base-checkpoint is given;
#  4. builds, for each target and precision, an engine with CUDA graphs off and one with them on (TensorRT: one
#     shared engine per graph kind without CUDA graphs, one engine per bucket with them), verifies the tiny ones
#     against toto-ts (`totoc verify`) and benchmarks the base ones (`totoc bench`); a failed build, bench or
#     forecast is recorded and the run goes on (the table names the failures; the script then exits non-zero);
#  5. Toto 2.0: exports the 4m trained here (tests/fixtures/trained/toto2-4m, configs/trained-toto2-4m.yaml's
#     profile with bench's horizon, with its golden toto-2 cases), builds each target and precision (CUDA graphs off
#     and on), verifies and benchmarks it; a target the 2.0 family does not build is recorded as skipped with the
#     reason `build-engine` gives; a 2.0 TensorRT or CUDA-graph build (never run on a GPU before) that fails is recorded as "build failed" and the
#     run goes on to the table, then exits non-zero;
#  6. prints one table: latency per forecast and per decode step, CUDA graph replay on/off, fp16 error vs fp32.
#
# --dry-run exercises the argument handling and every CPU step (export, the CPU fp32 and fp16-emulation engines,
# verify, bench, the fp16-vs-fp32 comparison and the table) without installing anything; scripts/test.sh runs it.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; }

work=${TOTOC_SMOKE_DIR:-$HOME/.cache/totoc/gpu-smoke}
base_ckpt=""
runs=5
targets="cuda,tensorrt"
precisions="fp32,fp16"
trt_version="10.16.1.11"
skip_install=0
dry_run=0
profile=release
totoc_bin=""
python_arg=""
while [ $# -gt 0 ]; do
  case "$1" in
    --work) work=$2; shift 2 ;;
    --base-checkpoint) base_ckpt=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --targets) targets=$2; shift 2 ;;
    --precisions) precisions=$2; shift 2 ;;
    --tensorrt-version) trt_version=$2; shift 2 ;;
    --skip-install) skip_install=1; shift ;;
    --profile) profile=$2; shift 2 ;;
    --totoc) totoc_bin=$2; shift 2 ;;
    --python) python_arg=$2; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "gpu-smoke: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$runs" in '' | *[!0-9]*) echo "gpu-smoke: --runs needs a positive integer, got '$runs'" >&2; exit 2 ;; esac
[ "$runs" -ge 1 ] || { echo "gpu-smoke: --runs needs a positive integer, got '$runs'" >&2; exit 2; }
case "$profile" in release | debug) ;; *) echo "gpu-smoke: --profile is release or debug, got '$profile'" >&2; exit 2 ;; esac
IFS=, read -r -a target_list <<<"$targets"
IFS=, read -r -a precision_list <<<"$precisions"
for t in "${target_list[@]}"; do
  case "$t" in cuda | tensorrt) ;; *) echo "gpu-smoke: unknown target '$t' (cuda, tensorrt)" >&2; exit 2 ;; esac
done
for p in "${precision_list[@]}"; do
  case "$p" in fp32 | fp16) ;; *) echo "gpu-smoke: unknown precision '$p' (fp32, fp16)" >&2; exit 2 ;; esac
done
if [ "$dry_run" = 1 ]; then
  # the CPU stands in for the GPU targets: fp32, and fp16 as its emulation
  target_list=(cpu)
fi

say() { echo "== $(date +%T) $*" >&2; }
mkdir -p "$work"
results="$work/results.jsonl"
: >"$results"

# ---------------------------------------------------------------------------------------------- 1. install
venv="$work/venv"
ort_version=1.31.1
pip_args=(onnxruntime-gpu=="$ort_version" nvidia-cuda-runtime nvidia-cublas nvidia-curand nvidia-cudnn-cu13
  numpy safetensors)
trt_args=(--extra-index-url https://pypi.nvidia.com tensorrt-cu13-libs=="$trt_version")
if [ "$dry_run" = 1 ]; then
  say "dry run: would install into $venv: pip install ${pip_args[*]}; pip install ${trt_args[*]}"
  ort_lib=${TOTOC_ORT_LIB:-$(scripts/fetch-onnxruntime.sh)}
  python=python3
else
  if [ "$skip_install" = 0 ]; then
    say "installing the GPU runtime from PyPI into $venv"
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q --upgrade pip >&2
    "$venv/bin/python" -m pip install -q "${pip_args[@]}" >&2
    if [[ " ${target_list[*]} " == *" tensorrt "* ]]; then
      "$venv/bin/python" -m pip install -q "${trt_args[@]}" >&2
    fi
  fi
  python=${python_arg:-$venv/bin/python}
  if [ "$skip_install" = 1 ] && [ -z "$python_arg" ] && [ ! -x "$python" ]; then python=python3; fi
  site=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  ort_lib="$site/onnxruntime/capi/libonnxruntime.so.$ort_version"
  # --skip-install with TOTOC_ORT_LIB: an onnxruntime-gpu library unpacked by hand (a machine without network)
  if [ "$skip_install" = 1 ] && [ -n "${TOTOC_ORT_LIB:-}" ]; then ort_lib=$TOTOC_ORT_LIB; fi
  [ -f "$ort_lib" ] || { echo "gpu-smoke: $ort_lib missing: install onnxruntime-gpu==$ort_version" >&2; exit 1; }
  # every pip-installed CUDA / cuDNN / TensorRT library directory, for the providers' dlopen
  # (without TensorRT there is no tensorrt_libs: find then exits 1, which must not end the script)
  lib_dirs=$({ find "$site/nvidia" "$site/tensorrt_libs" -maxdepth 2 -type d -name lib 2>/dev/null || true; } | tr '\n' ':')
  [ -d "$site/tensorrt_libs" ] && lib_dirs="$lib_dirs$site/tensorrt_libs:"
  export LD_LIBRARY_PATH="${lib_dirs}${LD_LIBRARY_PATH:-}"
fi
export TOTOC_ORT_LIB="$ort_lib"

# ------------------------------------------------------------------------------------------- 2. totoc, doctor
if [ -n "$totoc_bin" ]; then
  [ -x "$totoc_bin" ] || { echo "gpu-smoke: --totoc $totoc_bin is not an executable file" >&2; exit 2; }
  totoc=$totoc_bin
else
  say "building totoc ($profile)"
  if [ "$profile" = release ]; then cargo build --release -q; else cargo build -q; fi
  totoc="target/$profile/totoc"
fi
say "totoc doctor"
"$totoc" doctor --json >"$work/doctor.json"
"$totoc" doctor >&2
if [ "$dry_run" = 0 ]; then
  for t in "${target_list[@]}"; do
    "$python" - "$work/doctor.json" "$t" <<'PY' || exit 1
import json, sys
doc, target = json.load(open(sys.argv[1])), sys.argv[2]
v = next(v for v in doc["verdicts"] if v["target"] == target)
if not v["ready"]:
    sys.exit(f"gpu-smoke: totoc doctor says {target} is not available here:\n  " + "\n  ".join(v["notes"]))
PY
  done
fi

# ------------------------------------------------------------------------------------------------ 3. export
precision_flags=()
for p in "${precision_list[@]}"; do precision_flags+=(--precision "$p"); done
tiny_bundle="$work/tiny-bundle"
say "exporting the tiny fixture (${precisions}) with its golden cases"
"$totoc" export --checkpoint tests/fixtures/tiny/checkpoint --config configs/tiny.yaml --out "$tiny_bundle" \
  --golden tests/fixtures/tiny/cases --force "${precision_flags[@]}" >&2
if [ "$dry_run" = 1 ]; then
  # the CPU stands in with the tiny model: a bench on the sampled profile's shapes
  bench_ckpt=tests/fixtures/tiny/checkpoint
  bench_config=configs/tiny.yaml
  bench_context=128
else
  if [ -z "$base_ckpt" ]; then
    base_ckpt="$work/base-ckpt"
    if [ ! -f "$base_ckpt/model.safetensors" ]; then
      say "making a base-size random checkpoint (tests/reference/make_checkpoints.py)"
      "$python" tests/reference/make_checkpoints.py --config base --out "$base_ckpt" >&2
    fi
  fi
  bench_ckpt=$base_ckpt
  bench_config=configs/bench-dedicated.yaml
  bench_context=512
fi
bench_bundle="$work/bench-bundle"
say "exporting $bench_ckpt ($bench_config, ${precisions})"
"$totoc" export --checkpoint "$bench_ckpt" --config "$bench_config" --out "$bench_bundle" --force \
  "${precision_flags[@]}" >&2

# ----------------------------------------------------------------------------- 4. engines, verify, bench
# One forecast request for the fp16-vs-fp32 comparison, from the bench context.
request="$work/request.json"
"$python" - "$request" "$bench_context" <<'PY'
import json, math, sys
n = int(sys.argv[2])
# one variate: every profile of configs/bench-dedicated.yaml holds one
series = [[1000 + 50 * math.sin(2 * math.pi * t / 48) + 7 * math.sin(t * 1.7) for t in range(n)]]
json.dump({"target": series, "horizon": 64}, open(sys.argv[1], "w"))
PY

# build_one TARGET PRECISION GRAPH(on|off) -> engine label; records verify, bench and forecast results. A failed
# build, bench or forecast is recorded (and its stderr kept in build-*.txt) and the run goes on to the next engine:
# on a lent GPU every later row is worth having.
build_one() {
  local target=$1 precision=$2 graph=$3
  local label="$target-$precision-graph-$graph"
  local flags=(--target "$target" --precision "$precision" --force)
  [ "$graph" = on ] && flags+=(--cuda-graph)
  # TensorRT captures one CUDA graph per engine: with graphs on, one engine per bucket
  [ "$target" = tensorrt ] && [ "$graph" = on ] && flags+=(--graphs per-bucket)
  say "engine $label"
  local verify_ok=pass bench_ok=ok
  if ! "$totoc" build-engine --artifacts "$tiny_bundle" --out "$work/engines/tiny-$label" "${flags[@]}" \
    2> >(tee "$work/build-$label.txt" >&2); then
    verify_ok="build failed"
  elif ! "$totoc" verify --engine "$work/engines/tiny-$label" >"$work/verify-$label.txt"; then
    verify_ok=FAIL
  fi
  say "$label: verify $verify_ok"
  if ! { "$totoc" build-engine --artifacts "$bench_bundle" --out "$work/engines/bench-$label" "${flags[@]}" \
    2> >(tee "$work/build-bench-$label.txt" >&2) &&
    "$totoc" bench --engine "$label=$work/engines/bench-$label" --runs "$runs" --context "$bench_context" --no-rss \
      --json "$work/bench-$label.json" >"$work/bench-$label.txt" &&
    "$totoc" forecast --engine "$work/engines/bench-$label" --input "$request" \
      --output "$work/forecast-$label.json"
  }; then
    bench_ok=failed
    say "$label: the bench engine's build, bench or forecast failed (build-bench-$label.txt, bench-$label.txt)"
  fi
  printf '{"label": "%s", "target": "%s", "precision": "%s", "graph": "%s", "verify": "%s", "bench": "%s"}\n' \
    "$label" "$target" "$precision" "$graph" "$verify_ok" "$bench_ok" >>"$results"
}

mkdir -p "$work/engines"
for t in "${target_list[@]}"; do
  graphs=(off on)
  [ "$t" = cpu ] && graphs=(off)
  for p in "${precision_list[@]}"; do
    for g in "${graphs[@]}"; do build_one "$t" "$p" "$g"; done
  done
done

# ------------------------------------------------------------------------------------------------ 5. Toto 2.0
t2_bundle="$work/toto2-bundle"
say "exporting the trained Toto 2.0 4m (${precisions}) with its golden toto-2 cases"
# configs/trained-toto2-4m.yaml's profile, with `totoc bench`'s horizon (336) so that every workload runs
t2_config="$work/toto2-profiles.yaml"
printf 'profiles:\n  - {name: smoke, batch: 16, variates: 1, context: 512, horizon: 336}\n' >"$t2_config"
# the throughput workload's series: toto-2's leaderboard count on a GPU, a handful for the dry run
t2_series=1000
[ "$dry_run" = 1 ] && t2_series=16
"$totoc" export --checkpoint tests/fixtures/trained/toto2-4m --config "$t2_config" \
  --golden tests/fixtures/trained/toto2-4m-cases --out "$t2_bundle" --force "${precision_flags[@]}" >&2
t2_request="$work/toto2-request.json"
"$python" - "$t2_request" <<'PY'
import json, math, sys
# within configs/trained-toto2-4m.yaml's profile: one variate, 512 points, horizon 128
series = [[1000 + 50 * math.sin(2 * math.pi * t / 48) + 7 * math.sin(t * 1.7) for t in range(512)]]
json.dump({"target": series, "horizon": 128}, open(sys.argv[1], "w"))
PY
# build_toto2 TARGET PRECISION GRAPH(on|off): verify against toto-2, bench, forecast; a target the family refuses
# is "skipped"
build_toto2() {
  local target=$1 precision=$2 graph=$3
  local label="toto2-$target-$precision-graph-$graph" engine="$work/engines/toto2-$target-$precision-graph-$graph"
  local flags=(--target "$target" --precision "$precision" --force)
  [ "$graph" = on ] && flags+=(--cuda-graph)
  # TensorRT captures one CUDA graph per engine: with graphs on, one engine per bucket
  [ "$target" = tensorrt ] && [ "$graph" = on ] && flags+=(--graphs per-bucket)
  say "engine $label"
  if ! "$totoc" build-engine --artifacts "$t2_bundle" --out "$engine" "${flags[@]}" 2>"$work/build-$label.txt"; then
    if grep -q "not built for Toto 2.0" "$work/build-$label.txt"; then
      say "$label skipped: $(head -n 1 "$work/build-$label.txt")"
      printf '{"label": "%s", "target": "%s", "precision": "%s", "graph": "%s", "verify": "skipped", "model": "toto-2.0"}\n' \
        "$label" "$target" "$precision" "$graph" >>"$results"
      return
    fi
    cat "$work/build-$label.txt" >&2
    # never run on a GPU before this: a failed TensorRT or CUDA-graph build is recorded and the run goes on
    if [[ $target == tensorrt || $graph == on ]]; then
      printf '{"label": "%s", "target": "%s", "precision": "%s", "graph": "%s", "verify": "build failed", "model": "toto-2.0"}\n' \
        "$label" "$target" "$precision" "$graph" >>"$results"
      return
    fi
    exit 1
  fi
  local verify_ok=pass bench_ok=ok
  "$totoc" verify --engine "$engine" >"$work/verify-$label.txt" || verify_ok=FAIL
  say "$label: verify $verify_ok"
  if ! { "$totoc" bench --engine "$label=$engine" --runs "$runs" --context 512 --no-rss \
    --throughput-series "$t2_series" --json "$work/bench-$label.json" >"$work/bench-$label.txt" &&
    "$totoc" forecast --engine "$engine" --input "$t2_request" --output "$work/forecast-$label.json"
  }; then
    bench_ok=failed
    say "$label: bench or forecast failed (bench-$label.txt)"
  fi
  printf '{"label": "%s", "target": "%s", "precision": "%s", "graph": "%s", "verify": "%s", "bench": "%s", "model": "toto-2.0"}\n' \
    "$label" "$target" "$precision" "$graph" "$verify_ok" "$bench_ok" >>"$results"
}
for t in "${target_list[@]}"; do
  graphs=(off on)
  [ "$t" = cpu ] && graphs=(off)
  for p in "${precision_list[@]}"; do
    for g in "${graphs[@]}"; do build_toto2 "$t" "$p" "$g"; done
  done
done

# ---------------------------------------------------------------------------------------------- 6. table
"$python" - "$work" "$results" "$request" "$dry_run" "$t2_request" <<'PY'
import json, os, statistics, sys
work, results, request, dry = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
rows = [json.loads(l) for l in open(results) if l.strip()]
def sigmas(path):
    return [statistics.pstdev([x for x in s if x is not None]) for s in json.load(open(path))["target"]]
sigma_of = {"toto-1.0": sigmas(request), "toto-2.0": sigmas(sys.argv[5])}

def forecast(label):
    # Toto 1.0 forecasts a mean, Toto 2.0 a median
    doc = json.load(open(os.path.join(work, f"forecast-{label}.json")))
    return doc["mean"] if "mean" in doc else doc["median"]

def bench(label):
    path = os.path.join(work, f"bench-{label}.json")
    if not os.path.exists(path):
        return None, None
    doc = json.load(open(path))
    eng = doc["engines"][0]
    if "workloads" in doc:
        per_call = {name: w["median_ms"].get(label) for name, w in doc["workloads"].items()}
    else:
        # Toto 2.0's bench: one series at the bench horizon (ms) and a throughput workload (series/s)
        per_call = {k[:-3]: v for k, v in eng.items() if k.endswith("_ms") and v is not None}
        if eng.get("throughput_series_per_s"):
            per_call["throughput series/s"] = eng["throughput_series_per_s"]
    return eng, per_call

print("| model | target | precision | CUDA graph | verify vs reference | forecast latency (ms, median) |"
      " decode step (ms) | prefill (ms) | fp16 vs fp32: max \\|Δ\\|/σ |")
print("|---|---|---|---|---|---|---|---|---|")
for r in rows:
    model = r.get("model", "toto-1.0")
    sigma = sigma_of[model]
    if r["verify"] == "skipped":
        print(f"| {model} | {r['target']} | {r['precision']} | {r['graph']} | not built for this family yet |"
              " | | | |")
        continue
    if r["verify"] == "build failed":
        print(f"| {model} | {r['target']} | {r['precision']} | {r['graph']} | build failed: "
              f"build-{r['label']}.txt | | | | |")
        continue
    eng, calls = bench(r["label"])
    if eng is None or r.get("bench") == "failed":
        print(f"| {model} | {r['target']} | {r['precision']} | {r['graph']} | {r['verify']} | bench or forecast "
              f"failed: build-bench-{r['label']}.txt, bench-{r['label']}.txt | | | |")
        continue
    shown = ", ".join(f"{k} {v:.1f}" for k, v in calls.items() if v is not None) or "n/a"
    err = ""
    if r["precision"] == "fp16":
        ref = next((x for x in rows if x["target"] == r["target"] and x["precision"] == "fp32"
                    and x["graph"] == r["graph"] and x.get("model", "toto-1.0") == model
                    and x["verify"] not in ("skipped", "build failed") and x.get("bench") != "failed"), None)
        if ref:
            a, b = forecast(r["label"]), forecast(ref["label"])
            err = "%.1e" % max(abs(x - y) / max(sigma[v], 1e-12)
                               for v in range(len(a)) for x, y in zip(a[v], b[v]))
    fmt = lambda v: "n/a" if v is None else f"{v:.2f}"
    print(f"| {model} | {r['target']} | {r['precision']} | {r['graph']} | {r['verify']} | {shown} |"
          f" {fmt(eng.get('decode_step_ms'))} | {fmt(eng.get('prefill_ms'))} | {err} |")
if dry:
    print("\n(dry run: the CPU stands in for the GPU targets, fp16 as its emulation; the GPU paths did not run)")
if any(r["verify"] not in ("pass", "skipped") or r.get("bench") == "failed" for r in rows):
    sys.exit("gpu-smoke: an engine failed to build or failed `totoc verify` (see build-*.txt and verify-*.txt "
             "in " + work + ")")
PY
say "done: results in $work"
