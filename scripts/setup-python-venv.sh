#!/usr/bin/env bash
# Creates (or reuses) the venvs of the Python package (python/), cached under ~/.cache/totoc and rebuilt when their
# pinned requirements change. Prints the tool's path on stdout's last line.
#   build   maturin and zig (PyPI's ziglang): prints the maturin executable. `maturin build --zig` links the
#           extension module against glibc 2.28 (manylinux_2_28) whatever this machine's glibc is.
#   test    numpy, pytest and onnxruntime (the package finds ONNX Runtime there first): prints its python. The
#           totoc wheel is installed into it by the caller, each run (scripts/test.sh), so the tests see only the
#           installed package.
#   compat  the drop-in tests' venv (python/tests/compat/): a venv of the reference venv's base Python layered
#           over the reference venv (tests/reference/setup_venv.sh: torch, toto-ts, toto-2, pytest) by a .pth
#           file, plus onnxruntime (--no-deps: the reference venv's numpy stays); prints its python. The totoc
#           wheel is installed into it by the caller, as for `test`.
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
  compat)
    venv=${TOTOC_COMPAT_VENV:-$HOME/.cache/totoc/compat-venv}
    reqs="$here/python/tests/compat/requirements.txt"
    ref=$("$here/tests/reference/setup_venv.sh" | tail -n 1)
    # `python -m venv --system-site-packages` run by a venv's python layers over the base interpreter's
    # site-packages, not the venv's: the reference venv's site-packages is added by a .pth file instead (after
    # this venv's own, so the totoc wheel installed here wins).
    ref_site=$("$ref" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    want=$(cat "$reqs" <(echo "$ref_site") | sha256sum | cut -d' ' -f1)
    if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.requirements.sha256" 2>/dev/null)" = "$want" ]; then
      echo "$venv/bin/python"
      exit 0
    fi
    echo "setting up $venv (over $ref_site)" >&2
    rm -rf "$venv"
    "$("$ref" -c 'import sys; print(sys._base_executable)')" -m venv "$venv"
    site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    echo "$ref_site" >"$site/_totoc_reference_venv.pth"
    "$venv/bin/python" -m pip install -q --no-deps -r "$reqs" >&2
    echo "$want" >"$venv/.requirements.sha256"
    echo "$venv/bin/python"
    exit 0
    ;;
  *)
    echo "usage: $0 build|test|compat" >&2
    exit 2
    ;;
esac
exec "$here/scripts/cached-venv.sh" "$venv" "$reqs" "$tool"
