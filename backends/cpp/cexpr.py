"""Index expressions (sympy, over loop variables, sizes and indirect indices) as C++ int64
arithmetic.

Every symbol of an index is non-negative: loop variables and sizes by construction, indirect
indices because the kernel checked them against ``[0, bound)`` before using them. So floor
division and modulo by a positive divisor are C++'s ``/`` and ``%`` whenever the dividend is a sum
of non-negative terms; only a dividend that can be negative (``x1 - 2``) needs the
floor-rounding helpers ``fir_idiv`` / ``fir_imod``. Terms print in the order of FIR's own
printer, so the C++ reads like the plan.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fir.backends.plan.index_text import IndexSyntax, nonnegative, print_index, stride

__all__ = ["C_SYNTAX", "c_index", "c_int", "nonnegative", "stride"]


def c_int(v: int) -> str:
    if v == -(2**63):
        return "INT64_MIN"
    return str(v) if -(2**31) <= v < 2**31 else f"INT64_C({v})"


C_SYNTAX = IndexSyntax(
    language="C++",
    integer=lambda v: c_int(v),
    div="/",
    mod="%",
    floor_div="fir_idiv",
    floor_mod="fir_imod",
    minimum="fir_imin",
    maximum="fir_imax",
)


def c_index(e: Any, name: Callable[[str], str]) -> str:
    """``e`` as a C++ expression; ``name`` maps a symbol's name to its C++ identifier."""
    return print_index(e, name, C_SYNTAX)
