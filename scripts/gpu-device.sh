#!/usr/bin/env bash
# The device side of a GPU run on a lent machine without Rust or network; scripts/gpu-pack.sh makes what it reads.
# It runs from the repository checkout the device tool copies there (the current directory), from the call folder
# the tool carried (so that the checkout needs no copy of it):
#
#   bash .gpu/callN/gpu-device.sh stage .gpu/callN          copy the folder's payload parts into the stage and check
#                                                           their sha256; print the machine (GPU, driver, CUDA libs)
#   bash .gpu/callN/gpu-device.sh run .gpu/callN [ARGS...]  stage, then join and unpack the parts, unpack the app
#                                                           (totoc and the branch's scripts), run `totoc doctor`,
#                                                           scripts/gpu-smoke.sh --targets cuda ARGS, then toto-ts
#                                                           eager on the same GPU (tests/reference/bench_reference.py)
#   bash scripts/gpu-device.sh --dry-run DIR [ARGS...]      `run` on a machine without a GPU: the CPU stands in
#                                                           (gpu-smoke.sh --dry-run), the eager timing is skipped
#
# TOTOC_SMOKE_TIMEOUT (default 600) and TOTOC_EAGER_TIMEOUT (120) bound the smoke and the eager timing (seconds).
# The stage (${TOTOC_GPU_STAGE:-$HOME/totoc-gpu-stage}) lives outside the checkout, so parts carried by earlier calls
# stay while the machine is warm (the device tool keeps it 30 s after a call). A rerun after a fix carries a new
# app alone (gpu-pack.sh --app-only): the run uses the newest app.tar.xz of its own folder.
# Results go to $OUT (at most 8 files come back): device.log (this script's steps and times), facts.txt, doctor.txt,
# smoke.log (gpu-smoke's steps), table.md (its table), smoke-files.tar.gz (results.jsonl, verify-*, bench-*, build-*,
# forecast-*), eager.json and eager.log (toto-ts eager on the GPU; its ratios to each engine end table.md).
set -uo pipefail
shopt -s nullglob

mode=${1:-}
dir=${2:-}
[ $# -ge 2 ] && shift 2
case "$mode" in stage | run | --dry-run) ;; *)
  sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
  ;;
esac
[ -d "$dir" ] || { echo "gpu-device: $dir is not a folder (the call folder the device tool carried)" >&2; exit 2; }
[ -f scripts/gpu-smoke.sh ] || { echo "gpu-device: run me from the totoc checkout's root" >&2; exit 2; }
dir=$(cd "$dir" && pwd)
stage=${TOTOC_GPU_STAGE:-${HOME:-/root}/totoc-gpu-stage}
out=${OUT:-$stage/out}
mkdir -p "$stage" "$out"
log="$out/device.log"
t0=$(date +%s)
say() { echo "== $(date -u +%T) (+$(($(date +%s) - t0)) s) $*" | tee -a "$log" >&2; }

# The parts of this call's folder into the stage; every staged part checked against the pack's SHA256SUMS.
stage_parts() {
  cp "$dir"/SHA256SUMS "$stage/SHA256SUMS"
  local p
  for p in "$dir"/part.*; do
    [ -e "$p" ] || continue
    cp "$p" "$stage/"
    say "staged $(basename "$p") ($(stat -c %s "$p") bytes)"
  done
  (cd "$stage" && grep ' part\.' SHA256SUMS | sha256sum -c --ignore-missing --quiet) ||
    { say "a staged part does not match SHA256SUMS (a broken copy): carry it again"; return 1; }
  local want have
  want=$(grep -c ' part\.' "$stage/SHA256SUMS")
  local staged=("$stage"/part.*)
  say "stage holds ${#staged[@]} of $want parts: ${staged[*]##*/}"
}

facts() {
  {
    echo "date: $(date -u +%FT%TZ)"
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap,clocks.sm,clocks.max.sm --format=csv 2>&1
    nvidia-smi 2>&1 | grep -m1 "CUDA Version"
    grep -m1 "model name" /proc/cpuinfo
    echo "cpus: $(nproc)"
    python3 - <<'PY' 2>&1
import glob, os, sys, sysconfig
site = sysconfig.get_paths()["purelib"]
print("python", sys.version.split()[0], sys.executable, "site", site)
try:
    import torch
    print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(),
          "gpu", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")
except Exception as e:  # the facts are informative; the smoke checks what it needs
    print("torch:", e)
for lib in sorted(glob.glob(site + "/nvidia/**/lib", recursive=True)):
    names = sorted(os.listdir(lib))
    print("lib", lib, " ".join(n for n in names if n.startswith(("libcudnn.so", "libcublasLt.so", "libcudart.so",
                                                                 "libcurand.so", "libcublas.so", "libnvinfer"))))
PY
    echo "TensorRT on the machine: $({ ldconfig -p | grep -o 'libnvinfer\.so[^ ]*'; find /usr /opt -name 'libnvinfer.so*' 2>/dev/null; } | sort -u | tr '\n' ' ')"
  } >"$out/facts.txt"
  cat "$out/facts.txt" >&2
}

say "mode $mode, folder $dir, stage $stage"
if [ "$mode" = stage ]; then
  stage_parts || exit 1
  facts
  exit 0
fi

# ------------------------------------------------------------------------------------------------- run
stage_parts || exit 1
want=$(grep -c ' part\.' "$stage/SHA256SUMS")
staged=("$stage"/part.*)
have=${#staged[@]}
[ "$have" = "$want" ] || { say "only $have of $want parts are staged (the machine went back between calls?): carry the missing ones"; exit 1; }
pkg="$stage/pkg"
payload_sum=$(awk '$2 == "payload.tar.xz" {print $1}' "$stage/SHA256SUMS")
if [ "$(cat "$pkg/.sha256" 2>/dev/null)" != "$payload_sum" ]; then
  say "joining $want parts"
  cat "${staged[@]}" >"$stage/payload.tar.xz" # the glob sorts part.00, part.01, ...
  (cd "$stage" && grep ' payload\.tar\.xz$' SHA256SUMS | sha256sum -c --quiet) ||
    { say "the joined payload does not match SHA256SUMS"; exit 1; }
  rm -rf "$pkg"
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$stage/payload.tar.xz" "$pkg" ||
    { say "unpacking the payload failed"; exit 1; }
  echo "$payload_sum" >"$pkg/.sha256"
  rm -f "$stage/payload.tar.xz"
  say "unpacked: $(cd "$pkg" && find . -type f | sort | tr '\n' ' ')"
fi
apps=("$dir"/app*.tar.xz)
app=""
[ ${#apps[@]} -gt 0 ] && app=${apps[-1]}
[ -n "$app" ] || { say "no app*.tar.xz in $dir: the run call carries the app (gpu-pack.sh)"; exit 1; }
(cd "$dir" && grep " $(basename "$app")\$" SHA256SUMS | sha256sum -c --quiet) || { say "$app does not match SHA256SUMS"; exit 1; }
rm -rf "$stage/app"
python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$app" "$stage/app" ||
  { say "unpacking $app failed"; exit 1; }
# the branch's versions of the scripts the run uses (the checkout the tool copies is the lead's, without them)
(cd "$stage/app/overlay" && find . -type f) | while read -r f; do mkdir -p "$(dirname "$f")"; cp "$stage/app/overlay/$f" "$f"; done
totoc="$stage/app/totoc"
chmod +x "$totoc"
say "app $(basename "$app"): $("$totoc" --version 2>&1)"

if [ "$mode" = --dry-run ]; then
  export TOTOC_ORT_LIB=${TOTOC_ORT_LIB:-$(scripts/fetch-onnxruntime.sh)}
  smoke_args=(--dry-run)
else
  export TOTOC_ORT_LIB="$pkg/ort/libonnxruntime.so.1.31.1"
  smoke_args=(--skip-install --targets cuda)
fi
facts
say "totoc doctor"
# the provider libraries' folders, as gpu-smoke.sh sets them (the smoke sets its own; this is for doctor alone)
site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
nvlibs=$({ find "$site/nvidia" -maxdepth 2 -type d -name lib 2>/dev/null || true; } | tr '\n' ':')
LD_LIBRARY_PATH="$nvlibs${LD_LIBRARY_PATH:-}" "$totoc" doctor >"$out/doctor.txt" 2>&1
cat "$out/doctor.txt" >&2

say "gpu-smoke ${smoke_args[*]} $*"
work="$stage/smoke"
# a rerun's table and tarball show this run's files only (the bundles, engines and base checkpoint stay)
rm -f "$work"/verify-*.txt "$work"/bench-*.json "$work"/bench-*.txt "$work"/build-*.txt "$work"/forecast-*.json
# bounded, so that a hang still leaves time for the logs, the eager timing and the tarball to come back
timeout "${TOTOC_SMOKE_TIMEOUT:-600}" scripts/gpu-smoke.sh "${smoke_args[@]}" --python python3 --totoc "$totoc" \
  --work "$work" "$@" >"$out/table.md" 2> >(tee "$out/smoke.log" >&2)
smoke_rc=$?
cat "$out/table.md"
say "gpu-smoke exited $smoke_rc"
(cd "$work" && tar czf "$out/smoke-files.tar.gz" --ignore-failed-read results.jsonl doctor.json request.json \
  toto2-request.json verify-*.txt bench-*.json bench-*.txt build-*.txt forecast-*.json) || true

if [ "$mode" = run ] && [ -d "$pkg/wheels" ]; then
  say "toto-ts eager on the GPU (bench_reference.py --device cuda)"
  pysite="$stage/site"
  if [ ! -d "$pysite" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$pysite" "$pkg"/wheels/*.whl \
      >>"$out/eager.log" 2>&1 || say "installing toto-ts's wheels failed (eager.log)"
  fi
  PYTHONPATH="$pysite" timeout "${TOTOC_EAGER_TIMEOUT:-120}" python3 tests/reference/bench_reference.py --checkpoint "$work/base-ckpt" \
    --device cuda --runs 5 >"$out/eager.json" 2>>"$out/eager.log" || say "toto-ts eager failed (eager.log)"
  tail -n 8 "$out/eager.log" >&2
  # toto-ts eager over each CUDA engine, per workload (the same base checkpoint, context and horizon)
  echo >>"$out/table.md"
  python3 - "$out/eager.json" "$work" <<'PY' | tee -a "$out/table.md" || true
import glob, json, os, sys
eager = json.load(open(sys.argv[1]))
print(f"toto-ts eager on {eager['device']} (torch {eager['versions']['torch']}), median ms; totoc engines x faster:")
names = list(eager["cases"])
print("| engine | " + " | ".join(names) + " |")
print("|---|" + "---|" * len(names))
print("| toto-ts eager | " + " | ".join(f"{eager['cases'][n]['median_ms']:.1f}" for n in names) + " |")
for path in sorted(glob.glob(os.path.join(sys.argv[2], "bench-cuda-*.json"))):
    label = os.path.basename(path)[6:-5]
    doc = json.load(open(path))
    cells = []
    for n in names:
        ms = doc.get("workloads", {}).get(n, {}).get("median_ms", {}).get(label)
        cells.append("n/a" if ms is None else f"{ms:.2f} ({eager['cases'][n]['median_ms'] / ms:.0f}x)")
    print(f"| {label} | " + " | ".join(cells) + " |")
PY
fi
say "done (smoke exit $smoke_rc)"
exit "$smoke_rc"
