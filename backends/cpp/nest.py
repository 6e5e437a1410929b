"""The plan's instruction list as a loop tree, and the facts about it that choose how a loop is
written: what is invariant in a loop (hoisted before it), whether a loop can fail (then it is
never an ``omp simd`` loop: a check leaves the iteration early), whether its memory accesses are
contiguous in its variable (then it is vectorised), and whether a reduction walks memory along
its output dimension (then the loops are interchanged).
"""

from __future__ import annotations

from typing import Any

import sympy
from fir.backends.plan.instructions import (
    CheckIndex,
    Compute,
    Constant,
    IndexValue,
    Instr,
    Load,
    Store,
)
from fir.backends.plan.loop_tree import Item, Loop, defines, uses, walk
from fir.ir.dtypes import DType
from fir.ir.graph import Literal
from fir.ir.types import Dim

from .cexpr import stride
from .ops import DIVIDES


def positive(size: Dim) -> bool:
    if isinstance(size, int):
        return size > 0
    return bool(sympy.sympify(size).is_positive)


def can_fail(i: Instr, int_operands: set[str]) -> bool:
    """An index check, or an integer division whose divisor may be zero."""
    if isinstance(i, CheckIndex):
        return True
    if isinstance(i, Compute) and i.op in DIVIDES:
        a, b = i.args[0], i.args[1]
        integer = (isinstance(a, str) and a in int_operands) or (
            isinstance(b, str) and b in int_operands
        )
        return integer and not (isinstance(b, Literal) and b.value not in (0, None, False))
    return False


def hoist(items: list[Item], var: str, per_lane: set[str]) -> tuple[list[Instr], list[Item]]:
    """Split the body of loop ``var`` into what does not depend on ``var`` (run once before the
    loop) and the rest. ``per_lane``: values that already vary with ``var``. Stores,
    accumulations and nested loops stay."""
    varying = set(per_lane) | {var}
    out: list[Instr] = []
    rest: list[Item] = []
    for it in items:
        if isinstance(it, (Load, Compute, Constant, IndexValue, CheckIndex)) and not (
            uses(it) & varying
        ):
            out.append(it)
            continue
        rest.append(it)
        if not isinstance(it, Loop):
            varying |= set(defines(it))
    return out, rest


def contiguous(items: list[Item], var: str) -> bool:
    """Whether vectorising loop ``var`` over ``items`` is worth forcing: every store steps by one
    element, and no more loads are strided than step by one (a transposed read is a gather,
    which pays while the stores stream)."""
    v = sympy.Symbol(var, integer=True, nonnegative=True)
    unit = strided = 0
    for i in walk(items):
        if isinstance(i, Store) and _step(i.index, v) != 1:
            return False
        if isinstance(i, Load):
            s = _step(i.index, v)
            if s == 1:
                unit += 1
            elif s != 0:
                strided += 1
    return strided <= unit


def f16_blocks(items: list[Item], var: str) -> tuple[list[Load], list[Store]]:
    """The f16 loads and stores of the vectorised loop ``var`` over ``items`` that convert a
    block at a time (:meth:`.loops.KernelWriter.f16_block`): those that step by one element.
    Not a masked load (it must not read where its mask is false), nor one whose value only goes
    to f16 stores (they copy its bits, no conversion); not a store of a value made before the
    loop (its conversion is hoisted with it) or of a loaded f16 value (a copy of bits)."""
    v = sympy.Symbol(var, integer=True, nonnegative=True)
    instrs = walk(items)
    made = {d for i in instrs for d in defines(i)}
    unmasked = {
        i.dst for i in instrs if isinstance(i, Load) and i.dtype is DType.F16 and i.mask is None
    }

    def copy(i: Instr) -> bool:
        return isinstance(i, Store) and i.dtype is DType.F16 and i.value in unmasked

    read = {u for i in instrs if not copy(i) for u in uses(i)}
    loads = [
        i
        for i in instrs
        if isinstance(i, Load) and i.dst in unmasked and i.dst in read and _step(i.index, v) == 1
    ]
    stores = [
        i
        for i in instrs
        if isinstance(i, Store)
        and i.dtype is DType.F16
        and isinstance(i.value, str)
        and i.value in made
        and not copy(i)
        and _step(i.index, v) == 1
    ]
    return loads, stores


def _step(index: Any, v: sympy.Symbol) -> Any:
    if isinstance(index, int):
        return 0
    # plan symbols are index_var symbols; match by name so assumptions never matter
    same = {s for s in index.free_symbols if s.name == v.name}
    if not same:
        return 0
    (sym,) = same
    return stride(index, sym)
