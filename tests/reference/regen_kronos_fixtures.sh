#!/usr/bin/env bash
# Regenerates tests/fixtures/kronos/ from kronos-finance 0.1.5 (upstream Kronos in eval mode), or, with --check,
# verifies the committed fixtures against a fresh regeneration (CI, a few seconds; --check --paths also regenerates
# the 1,000-path files). Extra args go to regen_kronos_fixtures.py. The reference venv is created or extended on
# first use (see setup_venv.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
py=$("$here/setup_venv.sh" | tail -n 1)
exec "$py" "$here/regen_kronos_fixtures.py" "$@"
