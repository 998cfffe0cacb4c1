#!/usr/bin/env bash
# Runs `totoc forecast` (and `totoc verify`) on every input of tests/fixtures/data and the tiny golden requests with
# two totoc binaries, on the same engines, and diffs what they wrote: a change to the shared request / tables seam
# must leave every output of the existing families byte-identical.
#
#   scripts/forecast-outputs-diff.sh BEFORE_TOTOC AFTER_TOTOC WORKDIR [--without-model]
#
# BEFORE_TOTOC builds the engines (a tiny Toto 1.0 engine with its golden cases, the trained Toto 2.0 4m engine);
# each binary then writes, per input file and flag set, stdout, stderr (without the timing summary line, which
# varies) and the exit status into WORKDIR/before and WORKDIR/after; the script prints `diff -r` of the two and
# exits 1 when they differ. Outputs are compared as written (bytes), unless --without-model: then the `model`
# field / column the forecast outputs gained in response format 5, and the provenance fields of JSON responses of
# format 6 (`engine_sha256`, `sampler`), and only they, are taken out of both runs' outputs
# before the diff — JSON Lines through jq, CSV through python3's csv module, Parquet decoded (schema, metadata,
# rows) by PYARROW_PYTHON (default ~/.cache/totoc/data-venv/bin/python) — so everything else must be identical.
# Needs TOTOC_ORT_LIB (or the --ort-lib default).
set -euo pipefail
if [ $# -lt 3 ]; then
  sed -n 2,15p "$0" >&2
  exit 2
fi
before=$(realpath "$1")
after=$(realpath "$2")
work=$(realpath -m "$3")
strip=${4:-}
pyarrow=${PYARROW_PYTHON:-$HOME/.cache/totoc/data-venv/bin/python}
root=$(cd "$(dirname "$0")/.." && pwd)
data="$root/tests/fixtures/data"
mkdir -p "$work"

engines="$work/engines"
if [ ! -d "$engines/toto1/engine" ]; then
  mkdir -p "$engines/toto1" "$engines/toto2"
  "$before" export --checkpoint "$root/tests/fixtures/tiny/checkpoint" --config "$root/configs/tiny.yaml" \
    --golden "$root/tests/fixtures/tiny/cases" --out "$engines/toto1/bundle" >/dev/null 2>&1
  "$before" build-engine --artifacts "$engines/toto1/bundle" --out "$engines/toto1/engine" >/dev/null 2>&1
  "$before" export --checkpoint "$root/tests/fixtures/trained/toto2-4m" \
    --config "$root/tests/fixtures/toto2/profiles.yaml" --golden "$root/tests/fixtures/trained/toto2-4m-cases" \
    --out "$engines/toto2/bundle" >/dev/null 2>&1
  "$before" build-engine --artifacts "$engines/toto2/bundle" --out "$engines/toto2/engine" >/dev/null 2>&1
fi

# The tiny golden cases' requests, one per line (the golden comparisons run through `totoc verify` below too).
requests="$work/golden_requests.jsonl"
python3 - "$root/tests/fixtures/tiny/cases" "$requests" <<'PY'
import json, pathlib, sys
cases = sorted(pathlib.Path(sys.argv[1]).glob("*.json"))
with open(sys.argv[2], "w") as out:
    for c in cases:
        out.write(json.dumps(json.loads(c.read_text())["request"]) + "\n")
PY

# name|engine|input|flags
cases=()
for f in "$data"/*.csv "$data"/*.parquet "$data"/*.jsonl "$requests"; do
  b=$(basename "$f")
  for e in toto1 toto2; do
    cases+=("$e-$b-jsonl|$e|$f|--horizon 5 --output-format jsonl")
    cases+=("$e-$b-csv|$e|$f|--horizon 5 --output-format csv")
    cases+=("$e-$b-parquet|$e|$f|--horizon 5 --output-format parquet")
  done
  cases+=("toto1-$b-sampled|toto1|$f|--horizon 4 --samples 8 --seed 3 --write-samples --output-format jsonl")
  cases+=("toto1-$b-quantiles-csv|toto1|$f|--horizon 4 --samples 16 --quantiles 0.05,0.5,0.95 --output-format csv")
  cases+=("toto1-$b-continuous|toto1|$f|--horizon 3 --calendar continuous --output-format jsonl")
  cases+=("toto1-$b-weekdays|toto1|$f|--horizon 3 --calendar weekdays --output-format jsonl")
  cases+=("toto1-$b-newyork|toto1|$f|--horizon 3 --timezone America/New_York --output-format jsonl")
  cases+=("toto1-$b-strict|toto1|$f|--horizon 3 --strict-context --output-format jsonl")
done

# Takes the `model` field / column out of one output (see the usage).
without_model() {
  local out=$1 flags=$2
  case "$flags" in
    *jsonl*) jq -c 'del(.model, .engine_sha256, .sampler)' "$out" >"$out.kept" ;;
    *csv*) python3 -c '
import csv, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
keep = [i for i, n in enumerate(rows[0]) if n != "model"]
w = csv.writer(sys.stdout, lineterminator="\n")
for r in rows:
    w.writerow([r[i] for i in keep])' "$out" >"$out.kept" ;;
    *parquet*) "$pyarrow" -c '
import sys, pyarrow.parquet as pq
t = pq.read_table(sys.argv[1])
if "model" in t.column_names:
    t = t.drop(["model"])
print(t.schema.remove_metadata(), dict(t.schema.metadata or {}))
meta = pq.read_metadata(sys.argv[1]).metadata or {}
print({k: v for k, v in meta.items() if k != b"ARROW:schema"})  # the Arrow schema is printed above, decoded
for r in t.to_pylist():
    print(r)' "$out" >"$out.kept" ;;
  esac
  mv "$out.kept" "$out"
}

run_all() {
  local bin=$1 out=$2
  rm -rf "$out"
  mkdir -p "$out"
  for c in "${cases[@]}"; do
    IFS='|' read -r name e input flags <<<"$c"
    local dest="$out/$name"
    set +e
    # $flags is a list of flags, split on purpose
    # shellcheck disable=SC2086
    "$bin" forecast --engine "$engines/$e/engine" --input "$input" $flags >"$dest.out" 2>"$dest.err"
    echo $? >"$dest.rc"
    set -e
    grep -v '^forecast [0-9]* series' "$dest.err" >"$dest.err.kept" || true
    mv "$dest.err.kept" "$dest.err"
    if [ "$strip" = --without-model ] && [ -s "$dest.out" ]; then
      without_model "$dest.out" "$flags"
    fi
  done
  for e in toto1 toto2; do
    "$bin" verify --engine "$engines/$e/engine" >"$out/verify-$e.out" 2>&1 || true
    # verify prints its run time; the comparisons are what must not change
    sed -i -E 's/[0-9]+(\.[0-9]+)? ?(ms|s)\b/<time>/g' "$out/verify-$e.out"
  done
}

run_all "$before" "$work/before"
run_all "$after" "$work/after"
n=$(find "$work/before" -name '*.out' | wc -l)
if diff -r "$work/before" "$work/after"; then
  echo "identical: $n outputs (${#cases[@]} forecasts, 2 verify runs) of $before and $after"
else
  echo "DIFFERENT (see above): $n outputs of $before and $after"
  exit 1
fi
