"""``totoc.export`` and ``totoc.build_engine``: ``totoc export`` and ``totoc build-engine`` from Python.

Both run the command's own code (the same checks, files, up-to-date skip and messages) with the GIL released, and
return the directory they wrote, so the steps chain::

    import totoc

    bundle = totoc.export("checkpoints/toto-base", "configs/toto-base.yaml", "bundle")
    engine = totoc.build_engine(bundle, "engine", target="cpu")
    with totoc.Engine(engine) as eng:
        ...

Progress: without ``progress=``, each step is logged at INFO on the ``totoc`` logger (``logging.basicConfig(
level=logging.INFO)`` shows it), notes and the closing summary at INFO. With
``progress=fn``, ``fn(Progress(...))`` is called for each event instead. A job cannot stop half-way: an exception
``fn`` raises (or a Ctrl-C) is raised once the job returns, and ``fn`` is not called again before.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Callable, NamedTuple, Sequence, Union

from . import _native, _runtime
from .errors import RuntimeMissing

__all__ = ["export", "build_engine", "Progress"]

PathLike = Union[str, "os.PathLike[str]"]

log = logging.getLogger("totoc")


class Progress(NamedTuple):
    """One progress event of ``export`` / ``build_engine``.

    Attributes:
        kind: ``"total"`` (the number of graphs is known: ``total``), ``"step"`` (one graph written or built:
            ``message`` says which, ``done`` of ``total``), ``"note"`` (a message that is no step: why a bundle is
            rebuilt, a bucket left out of the memory budget) or ``"done"`` (the command's closing summary).
        message: the line ``totoc`` prints for it.
        done: the steps done so far.
        total: the steps in all (0 until ``"total"``).
    """

    kind: str
    message: str
    done: int
    total: int


def _forwarder(progress: Callable[[Progress], object] | None) -> Callable[[str, str, int, int], None]:
    if progress is None:

        def to_log(kind: str, message: str, done: int, total: int) -> None:
            if kind != "total":
                log.info("%s", message)

        return to_log
    if not callable(progress):
        from .errors import InvalidInput

        raise InvalidInput(f"progress={progress!r} is not callable; give a function taking a totoc.Progress, or None")

    def to_callback(kind: str, message: str, done: int, total: int) -> None:
        progress(Progress(kind, message, done, total))

    return to_callback


def export(
    checkpoint: PathLike,
    config: PathLike,
    out: PathLike,
    *,
    profiles: Sequence[str] = (),
    precisions: Sequence[str] = ("fp32",),
    opset: int = 24,
    force: bool = False,
    golden: PathLike | None = None,
    int8_roles: str | None = None,
    tokenizer: PathLike | None = None,
    progress: Callable[[Progress], object] | None = None,
) -> Path:
    """Exports a Toto checkpoint to a bundle of ONNX graphs, as ``totoc export`` does; returns ``out``.

    Args:
        checkpoint: the checkpoint directory (Hugging Face layout: ``config.json``, ``model.safetensors``);
            ``--checkpoint``.
        config: the profiles YAML, e.g. ``configs/toto-base.yaml``; ``--config``.
        out: the bundle directory, written atomically; ``--out``. A bundle there exported from the same inputs
            and intact is kept as it is (the summary says so); one from other inputs is replaced.
        profiles: only these profiles of the config (default: all); ``--profile``.
        precisions: ``"fp32"``, ``"fp16"`` and/or ``"int8"`` graphs; ``--precision``.
        opset: 24 (ONNX Runtime >= 1.31) or 18 (older runtimes, TensorRT < 10.15); ``--opset``.
        force: replace a non-empty ``out`` that is not a bundle; ``--force``.
        golden: golden toto-ts cases to carry in the bundle (for ``totoc verify``); ``--golden``.
        int8_roles: the matmuls int8 graphs run in int8, ``"all"`` or a comma list of ``qkv``, ``out_proj``,
            ``fc1``, ``fc2``, each optionally ``:blocks`` (16-value blocks instead of per row; default: the model
            family's set, chosen on a trained model); ``--int8-roles``.
        tokenizer: the model's tokenizer checkpoint directory, for a model exported with its tokenizer (its
            config names it as ``model.tokenizer``; refused for models without one); ``--tokenizer``.
        progress: called with a :class:`Progress` for each graph written; default: the ``totoc`` logger.

    Raises:
        InvalidInput: a missing checkpoint or config, an unknown profile or precision, a checkpoint that is not
            the config's model.
        BundleIntegrity: a damaged bundle in the way.
        TotocError: anything else (``out`` cannot be written, ...).

    Example::

        >>> import totoc
        >>> totoc.export("/no/checkpoint", "configs/tiny.yaml", "bundle")
        Traceback (most recent call last):
        ...
        totoc.errors.InvalidInput: checkpoint /no/checkpoint: no such directory; give a Hugging Face checkpoint directory (config.json and model.safetensors)
    """
    return Path(
        _native.export(
            os.fspath(checkpoint),
            os.fspath(config),
            os.fspath(out),
            profiles=list(profiles),
            precisions=list(precisions),
            opset=opset,
            force=force,
            golden=None if golden is None else os.fspath(golden),
            int8_roles=int8_roles,
            tokenizer=None if tokenizer is None else os.fspath(tokenizer),
            progress=_forwarder(progress),
        )
    )


def build_engine(
    artifacts: PathLike,
    out: PathLike,
    *,
    target: str = "cpu",
    device: int = 0,
    cuda_graph: bool = False,
    precision: str | None = None,
    graphs: str | None = None,
    threads: int | None = None,
    profiles: Sequence[str] = (),
    memory_budget: int | str | None = None,
    force: bool = False,
    ort_lib: PathLike | None = None,
    progress: Callable[[Progress], object] | None = None,
) -> Path:
    """Builds an engine for one target from an export bundle, as ``totoc build-engine`` does; returns ``out``.

    ONNX Runtime is found as :class:`totoc.Engine` finds it (``ort_lib``, ``$TOTOC_ORT_LIB``, the installed
    ``onnxruntime`` package, ...); the build checks every graph by running it.

    Args:
        artifacts: the export bundle (from :func:`export`); ``--artifacts``.
        out: the engine directory, written atomically; ``--out``. An engine there built from the same inputs and
            intact is kept as it is.
        target: ``"cpu"``, ``"cuda"`` or ``"tensorrt"``; ``--target``.
        device: the GPU ordinal (cuda, tensorrt); ``--device``.
        cuda_graph: capture each graph as a CUDA graph; ``--cuda-graph``.
        precision: which of the bundle's precisions (default: fp32 if it has it); ``--precision``.
        graphs: ``"per-bucket"`` or ``"shared"`` sessions (default: shared for tensorrt); ``--graphs``.
        threads: the CPU threads recorded in the engine (default: physical cores); ``--threads``.
        profiles: only these profiles (default: all); ``--profile``.
        memory_budget: bytes, or a size such as ``"8G"``; buckets that cannot fit are left out with a note;
            ``--memory-budget``.
        force: replace a non-empty ``out`` that is not an engine; ``--force``.
        ort_lib: the ONNX Runtime library to build with; ``--ort-lib``.
        progress: called with a :class:`Progress` for each graph built; default: the ``totoc`` logger.

    Raises:
        InvalidInput: an unknown target, precision or graph form, a memory budget it cannot read.
        BundleIntegrity: ``artifacts`` is missing, damaged or not an export bundle.
        RuntimeMissing: no ONNX Runtime library.
        TotocError: anything else.

    Example::

        >>> import totoc
        >>> totoc.build_engine("bundle", "engine", target="gpu")
        Traceback (most recent call last):
        ...
        totoc.errors.InvalidInput: unknown target "gpu": give cpu, cuda or tensorrt
    """
    lib = _runtime.resolve(ort_lib)
    try:
        return Path(
            _native.build_engine(
                os.fspath(artifacts),
                os.fspath(out),
                target=target,
                device=device,
                cuda_graph=cuda_graph,
                precision=precision,
                graphs=graphs,
                threads=threads,
                profiles=list(profiles),
                memory_budget=memory_budget,
                force=force,
                ort_lib=None if lib is None else os.fspath(lib),
                progress=_forwarder(progress),
            )
        )
    except RuntimeMissing as e:
        raise RuntimeMissing(_runtime.failure_message(str(e))) from None
