#!/usr/bin/env bash
# Regenerates tests/fixtures/ from toto-ts 0.2.0 (or, with --check, verifies the committed
# fixtures against a fresh regeneration; this is what CI runs). Extra args go to
# regen_fixtures.py. The reference venv is created on first use (see setup_venv.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
py=$("$here/setup_venv.sh" | tail -n 1)
exec "$py" "$here/regen_fixtures.py" "$@"
