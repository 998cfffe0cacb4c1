#!/usr/bin/env bash
# Soak test of `totoc serve` (not a CI step; CI runs the 60-second variant on the tiny engine, the integration test
# serve_ops::soak_60_seconds_on_the_tiny_engine). Mixed valid/invalid traffic at 2 x RATE requests/s during the
# warm-up (the first third, at most 60 s), RATE until half-time and 2 x RATE for the second half, with the shadow engine on;
# checks 0 crashes, 0 wrong answers, only documented status codes, and end RSS <= RSS after the warm-up + 5%
# (start/warm/end/peak printed).
#
#   scripts/soak-serve.sh ENGINE REQUESTS.json RATE [DURATION_S]
#
# RATE: the capacity `totoc bench serve --engine ENGINE` measures (requests/s at its best concurrency), so the run
# covers 1x and 2x capacity. REQUESTS.json: a JSON list of valid /v1/forecast requests (e.g. the `request` of each
# tests/fixtures/tiny/cases/*.json for the tiny engine). DURATION_S defaults to 600. TOTOC (default target/release/
# totoc) names the binary; SOAK_LOG a file for the server's log; SOAK_WORKERS the client's concurrent requests
# (default 16; a slow engine at 2x RATE needs more, or requests wait in the client: its `client_backlog` count).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 3 ]; then
  echo "usage: scripts/soak-serve.sh ENGINE REQUESTS.json RATE [DURATION_S]" >&2
  exit 2
fi
exec python3 scripts/soak_serve.py --totoc "${TOTOC:-target/release/totoc}" --engine "$1" --requests "$2" \
  --rate "$3" --duration-s "${4:-600}" --workers "${SOAK_WORKERS:-16}" --shadow
