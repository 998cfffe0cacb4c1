"""Pins the CPU kernels the reference (torch) computes with, so the golden fixtures are reproducible on any x86-64.

Why: the same torch code lands on different fp32 roundings on different CPUs. torch's fp32 matmuls on x86 are MKL
sgemm, whose code path (AVX2, AVX-512, AMX...) is picked by CPUID; ATen's own vectorised kernels (softmax, norms,
reductions, elementwise) are picked by torch's CPU capability (DEFAULT, AVX2, AVX512). An Intel AVX-512/AMX machine
moved a toto-ts output by 1.5e-6 against fixtures made on an AMD AVX2 machine, past the old 1e-6 check.

The pinned setting ("pinned", what every script uses unless told otherwise):
* ``MKL_CBWR=COMPATIBLE,STRICT``: MKL's Conditional Numerical Reproducibility branch meant to give the same results
  on every x86-64 processor (Intel or AMD) with SSE2, whatever its newer instruction sets; STRICT makes it
  independent of the arrays' alignment too;
* ``ATEN_CPU_CAPABILITY=default``: ATen's non-vectorised build of its CPU kernels, compiled for baseline x86-64. Its
  ``Vectorized<float>`` keeps 8 lanes of 32 bytes (as AVX2's), so reduction orders are AVX2's;
* one thread everywhere (``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``, ``torch.set_num_threads(1)``), so no reduction is
  split by the core count; ``MKL_DYNAMIC=FALSE``.
What computes what (``MKL_VERBOSE=1``, ``ONEDNN_VERBOSE=1``): toto-ts's and toto-2's CPU forwards call MKL ``SGEMM``,
``SGEMM_BATCH`` and ``SDOT`` and no oneDNN primitive; ATen's elementwise float ops go through MKL's VML where torch
has an MKL binding. One of them is not pinned by CBWR: ``torch.sqrt`` (toto's scalers) is VML ``vsSqrt``, which is
not correctly rounded (1,240 of 6,144 test values differ from IEEE sqrt here) and gives other last bits under an
emulated CPU (qemu) while exp, log, tanh, erf, sin, cos and the GEMMs stay bitwise. So the pinned check is
near-bitwise across CPUs, and the tolerances (live_check.py, measured by kernel_drift.py) are the backstop.

``TOTOC_REFERENCE_KERNELS=<name>`` picks another setting from ``SETTINGS`` instead; ``kernel_drift.py`` uses that to
measure how far each setting moves the outputs. ``pin()`` must run before ``import torch``: MKL and ATen read these
variables once, at their first call.
"""

import functools
import os
import platform
import subprocess
import sys

_THREADS = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "MKL_DYNAMIC": "FALSE"}

# name -> environment (None = leave the variable unset, i.e. the library picks by CPUID)
SETTINGS = {
    "pinned": {"MKL_CBWR": "COMPATIBLE,STRICT", "ATEN_CPU_CAPABILITY": "default"},
    "native": {"MKL_CBWR": None, "ATEN_CPU_CAPABILITY": None},
    "cbwr-only": {"MKL_CBWR": "COMPATIBLE", "ATEN_CPU_CAPABILITY": None},
    "aten-default": {"MKL_CBWR": None, "ATEN_CPU_CAPABILITY": "default"},
    "aten-avx2": {"MKL_CBWR": None, "ATEN_CPU_CAPABILITY": "avx2"},
    "mkl-avx2": {"MKL_CBWR": None, "ATEN_CPU_CAPABILITY": None, "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    "mkl-avx": {"MKL_CBWR": "AVX", "ATEN_CPU_CAPABILITY": None},
}
# variables a setting owns: cleared unless the setting names them
_OWNED = ("MKL_CBWR", "ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS")

_pinned_name = None


def pin():
    """Sets the kernel environment of TOTOC_REFERENCE_KERNELS (default "pinned"); returns its name.

    Refuses to run once torch is imported: the libraries would already have read their variables."""
    global _pinned_name
    name = os.environ.get("TOTOC_REFERENCE_KERNELS", "pinned")
    if name not in SETTINGS:
        sys.exit(f"TOTOC_REFERENCE_KERNELS={name!r} is not a kernel setting; use one of {', '.join(SETTINGS)}")
    if "torch" in sys.modules and _pinned_name != name:
        raise RuntimeError("kernels.pin() must run before `import torch` (MKL and ATen read their settings once)")
    for k in _OWNED:
        os.environ.pop(k, None)
    for k, v in SETTINGS[name].items():
        if v is not None:
            os.environ[k] = v
    os.environ.update(_THREADS)
    _pinned_name = name
    return name


def setting():
    return _pinned_name or os.environ.get("TOTOC_REFERENCE_KERNELS", "pinned")


def describe_setting():
    """The setting's name and the variables it sets, for provenance.json."""
    env = {k: v for k, v in SETTINGS[setting()].items() if v is not None}
    return {"setting": setting(), "env": dict(env, **_THREADS)}


def cpu_summary():
    """CPU model and the SIMD flags that pick kernels (MKL, ATen, ONNX Runtime's MLAS), from /proc/cpuinfo."""
    model, flags = platform.processor() or "unknown", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, val = line.partition(":")
                key = key.strip()
                if key == "model name":
                    model = val.strip()
                elif key == "flags":
                    flags = set(val.split())
                    break
    except OSError:
        pass
    picks = ["sse4_2", "avx", "fma", "avx2", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile"]
    return model, [f for f in picks if f in flags]


def mkl_branch():
    """MKL's version line and CNR branch as MKL_VERBOSE reports them for one sgemm (a child process: MKL_VERBOSE is
    read once and would flood this one's stderr)."""
    code = "import torch; torch.set_num_threads(1); a = torch.ones(8, 8); (a @ a).sum()"
    env = dict(os.environ, MKL_VERBOSE="1")
    try:
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unknown ({e})"
    lines = [l for l in (out.stdout + out.stderr).splitlines() if l.startswith("MKL_VERBOSE")]
    cnr = next((w for l in lines for w in l.split() if w.startswith("CNR:")), "CNR:?")
    head = lines[0].replace("MKL_VERBOSE ", "") if lines else "no MKL_VERBOSE output"
    return f"{cnr} ({head})"


@functools.lru_cache(maxsize=None)
def describe():
    """One paragraph for the test log: which machine and which kernels computed the reference. Computed once per
    process (it starts a child torch for MKL's branch, and test_live_checks.py runs the check eight times)."""
    import torch

    model, flags = cpu_summary()
    return (
        f"reference kernels: setting {setting()!r}; CPU {model} ({' '.join(flags)}); "
        f"torch {torch.__version__} capability {torch.backends.cpu.get_cpu_capability()}; "
        f"MKL {mkl_branch()}; threads {torch.get_num_threads()}"
    )
