"""The ``totoc`` command of the wheel: a console script that execs the ``totoc`` binary shipped in the package
(``totoc/bin/totoc``), pointed at this environment's ONNX Runtime.

Why a binary and not the CLI inside the extension module: ``os.execv`` replaces this Python process with the
binary, so the command is exactly the one the release archives ship — its own signal handling (``totoc serve``
drains on SIGTERM / SIGINT, received directly, with no interpreter in between), exit codes, stdin/stdout and
memory — and the extension module stays free of the server, plotting and CLI code. The binary is linked by zig
against glibc 2.28, as the extension module is, so the wheel's ``manylinux_2_28`` tag holds for both
(``scripts/build-python-cli.sh``).

Before the exec: ``$TOTOC_ORT_LIB`` is set to the ``onnxruntime`` / ``onnxruntime-gpu`` package's library (unless
``$TOTOC_ORT_LIB`` or ``$ORT_DYLIB_PATH`` is set already, or ``--ort-lib`` is given: those win, as they do for
``totoc.Engine``), and for onnxruntime-gpu the folders of its CUDA / cuDNN wheels go first on ``LD_LIBRARY_PATH``
(a preload in this process would not survive the exec).
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

__all__ = ["main", "binary", "environment"]


def binary() -> Path:
    """The ``totoc`` binary of this package."""
    return Path(__file__).resolve().parent / "bin" / "totoc"


def environment(argv: list[str], env: dict[str, str]) -> dict[str, str]:
    """``env`` with this environment's ONNX Runtime for the command given ``argv`` (its arguments)."""
    from . import _gpu, _runtime

    env = dict(env)
    if env.get("TOTOC_ORT_LIB") or env.get("ORT_DYLIB_PATH") or any(
        a == "--ort-lib" or a.startswith("--ort-lib=") for a in argv
    ):
        return env
    with warnings.catch_warnings():
        # both distributions installed: say so on stderr, the command goes on (as totoc.Engine does)
        warnings.simplefilter("always")
        try:
            lib = _runtime.package_library()
        except Exception as e:  # an onnxruntime too old: the command's own search may still find one
            print(f"totoc: {e}", file=sys.stderr)
            lib = None
    if lib is None:
        return env
    env["TOTOC_ORT_LIB"] = str(lib)
    dirs = _gpu.library_dirs(_runtime.gpu_libraries(lib))
    if dirs:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(dirs + [p for p in [env.get("LD_LIBRARY_PATH", "")] if p])
    return env


def main() -> None:
    """Runs the ``totoc`` command with this process's arguments (never returns)."""
    exe = binary()
    if not os.access(exe, os.X_OK):
        sys.exit(
            f"totoc: this installation has no totoc binary ({exe} is missing): it was built without "
            "scripts/build-python-cli.sh. Reinstall the wheel from PyPI / the release, or use the release archive's "
            "`totoc`"
        )
    argv = sys.argv[1:]
    env = environment(argv, dict(os.environ))
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(exe, [str(exe), *argv], env)


if __name__ == "__main__":
    main()
