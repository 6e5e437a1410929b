"""Which f16 loads and stores of a vectorised loop the C++ renderer converts a block at a time.
How the loops run (order, vectorised or not, tiles, column blocks, lanes) is the schedule's
(:mod:`fir.backends.plan.schedule`); this is how one kind of loop is written.
"""

from __future__ import annotations

from typing import Any

import sympy
from fir.backends.plan.instructions import Instr, Load, Store
from fir.backends.plan.loop_tree import Item, defines, uses, walk
from fir.ir.dtypes import DType

from .cexpr import stride


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
