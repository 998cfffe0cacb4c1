"""The `totoc` command installed with the wheel: a console script that execs the binary shipped in the package,
pointed at the installed onnxruntime. `totoc serve` started through it is the binary itself (no interpreter in
between), so SIGTERM and SIGINT reach the server's own handlers: it drains and exits 0."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest


def script() -> Path:
    return Path(sys.executable).parent / "totoc"


def clean_env() -> dict[str, str]:
    """This environment without an explicit ONNX Runtime: the script must find the package's."""
    return {k: v for k, v in os.environ.items() if k not in ("TOTOC_ORT_LIB", "ORT_DYLIB_PATH", "TOTOC_ORT_DIR")}


def test_the_script_runs_the_shipped_binary(totoc_module):
    from totoc import _cli

    exe = _cli.binary()
    assert exe.is_file() and os.access(exe, os.X_OK), exe
    assert script().is_file(), "the wheel installs the `totoc` console script"
    p = subprocess.run([str(script()), "--version"], capture_output=True, text=True, timeout=60, env=clean_env())
    assert p.returncode == 0, p.stderr
    assert totoc_module.__version__ in p.stdout


def test_the_environment_points_at_the_installed_onnxruntime(totoc_module, tmp_path):
    from totoc import _cli, _runtime

    lib = _runtime.package_library()
    assert lib is not None, "the test venv has onnxruntime"
    env = _cli.environment([], {"PATH": "/bin"})
    assert env["TOTOC_ORT_LIB"] == str(lib)
    assert "LD_LIBRARY_PATH" not in env, "the CPU onnxruntime has no CUDA libraries to add"
    # an explicit choice wins, as it does for totoc.Engine
    assert _cli.environment([], {"TOTOC_ORT_LIB": "/x.so"})["TOTOC_ORT_LIB"] == "/x.so"
    assert _cli.environment([], {"ORT_DYLIB_PATH": "/y.so"}).get("TOTOC_ORT_LIB") is None
    assert _cli.environment(["forecast", "--ort-lib", "/z.so"], {}).get("TOTOC_ORT_LIB") is None


def read_addr(proc: subprocess.Popen, kind: str) -> str:
    line = proc.stdout.readline()
    prefix = f"totoc serve: {kind} "
    assert line.startswith(prefix), f"expected {prefix!r}, got {line!r}"
    return line[len(prefix):].strip()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_serve_through_the_script_stops_on_a_signal(engine_dir, tmp_path, sig):
    from totoc import _cli, _runtime

    log = tmp_path / "serve.log"
    with open(log, "w") as err:
        proc = subprocess.Popen(
            [str(script()), "serve", "--engine", str(engine_dir), "--addr", "127.0.0.1:0", "--grpc-addr",
             "127.0.0.1:0", "--threads", "1"],
            stdout=subprocess.PIPE, stderr=err, text=True, env={**clean_env(), "RUST_LOG": "info"},
        )
    try:
        http = read_addr(proc, "http")
        read_addr(proc, "grpc")
        # the process is the binary itself (exec'd), with the package's ONNX Runtime loaded
        assert Path(f"/proc/{proc.pid}/exe").resolve() == _cli.binary().resolve()
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://{http}/v2/health/ready", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        maps = Path(f"/proc/{proc.pid}/maps").read_text()
        assert str(_runtime.package_library()) in maps, "the server runs the installed onnxruntime"
        body = json.dumps({"target": [[float(i % 7) for i in range(64)]], "horizon": 8}).encode()
        req = urllib.request.Request(f"http://{http}/v1/forecast", data=body, headers={"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            assert r.status == 200
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text()
    assert "shutting down" in text and "stopped" in text, text
