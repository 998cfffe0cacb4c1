#!/usr/bin/env bash
# The calendar-inference benchmark: session inference (tables::calendar::infer) on SERIES one-minute weekday series
# of 30,240 rows each, timed in a release build (tables/examples/bench_calendar.rs). Prints the cold first series
# and the total.
#
# Usage: scripts/bench-calendar.sh [SERIES=5000]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run --release -q -p tables --example bench_calendar -- "${1:-5000}"
