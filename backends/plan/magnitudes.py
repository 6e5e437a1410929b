"""Bounds on the magnitude of a kernel plan's values, by interval arithmetic on magnitudes.

A renderer may write a cheaper form of a function whose argument is known to be small: the
llvm back end's f32 ``sin`` and ``cos`` skip the full-range argument reduction where the
argument is at most ``TRIG_BOUND`` (``sin(x) * 4``: at most 4). The bound is a fact about the
plan's values, computed here once from the instructions, not in the renderer's walk.

A bound is a float, ``inf`` where none is known; NaN never counts against one (a NaN argument
gives NaN in every form).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from fir.ir.graph import Literal

from .instructions import Compute, Constant, Instr, Operand

# a bound on ``|op(...)|`` from bounds on its operands'
MAGNITUDE: dict[str, Callable[[list[float]], float]] = {
    **dict.fromkeys(("sin", "cos", "tanh", "erf", "sigmoid"), lambda m: 1.0),
    "abs": lambda m: m[0],
    "neg": lambda m: m[0],
    "add": sum,
    "sub": sum,
    "mul": math.prod,
    "where": lambda m: max(m[1:]),
    "cast": lambda m: m[0] * (1 + 2**-7),  # rounding to a narrower float may round up
}


def magnitudes(instrs: Iterable[Instr]) -> dict[str, float]:
    """A bound on ``|value|`` for each constant and each float result of an op that gives one
    (:data:`MAGNITUDE`) among ``instrs``, in their order (an operand is defined before it is
    used)."""
    out: dict[str, float] = {}
    for i in instrs:
        if isinstance(i, Constant):
            out[i.dst] = magnitude(i.value, out)
        elif isinstance(i, Compute):
            rule = MAGNITUDE.get(i.op)
            if rule is not None and i.dtype.is_float:
                out[i.dst] = rule([magnitude(a, out) for a in i.args])
    return out


def magnitude(a: Operand, known: dict[str, float]) -> float:
    """A bound on ``|a|``: a finite number literal's own, a named value's in ``known``; inf
    otherwise."""
    if isinstance(a, Literal):
        v = a.value
        if isinstance(v, bool) or not isinstance(v, int | float):
            return math.inf
        return abs(float(v)) if math.isfinite(float(v)) else math.inf
    return known.get(a, math.inf)
