#!/usr/bin/env bash
# Creates (or reuses) the venvs of the Python package (python/), cached under ~/.cache/totoc and rebuilt when their
# pinned requirements change. Prints the tool's path on stdout's last line.
#   build   maturin and zig (PyPI's ziglang): prints the maturin executable. `maturin build --zig` links the
#           extension module against glibc 2.28 (manylinux_2_28) whatever this machine's glibc is.
#   test    numpy, pytest and onnxruntime (the package finds ONNX Runtime there first): prints its python. The
#           totoc wheel is installed into it by the caller, each run (scripts/test.sh), so the tests see only the
#           installed package.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
case "${1:-}" in
  build)
    venv=${TOTOC_MATURIN_VENV:-$HOME/.cache/totoc/maturin-venv}
    reqs="$here/python/requirements-build.txt"
    tool=bin/maturin
    ;;
  test)
    venv=${TOTOC_PYTEST_VENV:-$HOME/.cache/totoc/pytest-venv}
    reqs="$here/python/tests/requirements.txt"
    tool=bin/python
    ;;
  *)
    echo "usage: $0 build|test" >&2
    exit 2
    ;;
esac
exec "$here/scripts/cached-venv.sh" "$venv" "$reqs" "$tool"
