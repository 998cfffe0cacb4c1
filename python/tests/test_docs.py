"""The examples in the docstrings run on the tiny engine and give the shapes their comments say."""

from __future__ import annotations

import re
import textwrap

import numpy as np


def examples(doc: str) -> list[str]:
    """The code blocks after an ``Example...::`` line."""
    blocks = []
    for m in re.finditer(r"Example[^\n]*::\n\n((?:[ \t]+[^\n]*\n|\n)+)", doc):
        blocks.append(textwrap.dedent(m.group(1)))
    return blocks


def run(block: str, ns: dict) -> int:
    """Runs `block` line by line; a line `EXPR  # RESULT: ...` (or `# RESULT` alone) must give RESULT. Returns how
    many results were checked."""
    checked = 0
    exec(compile(block, "<docstring>", "exec"), ns)
    for line in block.splitlines():
        code, _, comment = line.partition("#")
        want = comment.split(":")[0].strip()
        if code.strip() and want.startswith("(") and "=" not in code:
            got = eval(code.strip(), ns)
            shown = ", ".join(map(str, got)) if isinstance(got, tuple) and isinstance(got[0], tuple) else str(got)
            assert shown == want, f"{code.strip()} gave {shown}, the docstring says {want}"
            checked += 1
    return checked


def test_the_engine_examples_run(totoc_module, engine_dir, engine):
    ns = {"np": np, "totoc": totoc_module, "eng": engine}
    blocks = examples(totoc_module.Engine.__doc__) + examples(totoc_module.Engine.forecast.__doc__)
    assert len(blocks) == 2
    # each in a namespace of its own (the first closes the engine it opens)
    checked = sum(run(b.replace('"engine"', repr(str(engine_dir))), dict(ns)) for b in blocks)
    assert checked == 3
