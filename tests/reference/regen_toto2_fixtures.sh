#!/usr/bin/env bash
# Regenerates tests/fixtures/toto2/ from toto-2 2.0.0 (or, with --check, verifies the committed fixtures against a
# fresh regeneration; CI runs this next to regen_fixtures.sh --check). Extra args go to regen_toto2_fixtures.py.
# The reference venv is created or extended on first use (see setup_venv.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
py=$("$here/setup_venv.sh" | tail -n 1)
exec "$py" "$here/regen_toto2_fixtures.py" "$@"
