"""Index expressions as Triton integer arithmetic: the shared printer
(:mod:`fir.backends.plan.index_text`) with Python's ``//`` and ``%`` (which Triton makes
truncating: every dividend they get is non-negative) and the helpers of :mod:`.helpers`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fir.backends.plan.index_text import IndexSyntax, print_index

TRITON_SYNTAX = IndexSyntax(
    language="Triton",
    integer=str,
    div="//",
    mod="%",
    floor_div="fir_idiv",
    floor_mod="fir_imod",
    minimum="tl.minimum",
    maximum="tl.maximum",
)


def t_index(e: Any, name: Callable[[str], str]) -> str:
    """``e`` as a Triton expression; ``name`` maps a symbol's name to its variable."""
    return print_index(e, name, TRITON_SYNTAX)
