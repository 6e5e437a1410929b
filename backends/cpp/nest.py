"""The plan's instruction list as a loop tree, and the facts about it that choose how a loop is
written: what is invariant in a loop (hoisted before it), whether a loop can fail (then it is
never an ``omp simd`` loop: a check leaves the iteration early), whether its memory accesses are
contiguous in its variable (then it is vectorised), and whether a reduction walks memory along
its output dimension (then the loops are interchanged).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sympy
from fir.backends.plan.instructions import (
    AccResult,
    Accumulate,
    CheckIndex,
    Compute,
    Constant,
    IndexValue,
    Instr,
    Load,
    LoopBegin,
    LoopEnd,
    Store,
)
from fir.ir.dtypes import DType
from fir.ir.graph import Literal
from fir.ir.types import Dim

from .cexpr import stride
from .ops import DIVIDES


@dataclass
class Loop:
    var: str
    size: Dim
    reduction: bool
    body: list[Item] = field(default_factory=list)


Item = Instr | Loop


def loop_tree(instrs: list[Instr]) -> list[Item]:
    """Nest the flat list: every ``loop``…``end`` pair becomes a :class:`Loop`."""
    root: list[Item] = []
    stack: list[list[Item]] = [root]
    for i in instrs:
        if isinstance(i, LoopBegin):
            lp = Loop(i.var, i.size, i.reduction)
            stack[-1].append(lp)
            stack.append(lp.body)
        elif isinstance(i, LoopEnd):
            stack.pop()
        else:
            stack[-1].append(i)
    if len(stack) != 1:
        raise ValueError("unbalanced loop/end in a kernel plan")
    return root


def walk(items: list[Item]) -> list[Instr]:
    """Every instruction under ``items``, loops flattened, in order."""
    out: list[Instr] = []
    for it in items:
        if isinstance(it, Loop):
            out += walk(it.body)
        else:
            out.append(it)
    return out


def chain(lp: Loop) -> list[Loop]:
    """``lp`` and the loops perfectly nested in it (each the only item of its parent), of the
    same kind (pointwise or reduction)."""
    out = [lp]
    while (
        len(out[-1].body) == 1
        and isinstance(out[-1].body[0], Loop)
        and out[-1].body[0].reduction == lp.reduction
    ):
        out.append(out[-1].body[0])
    return out


def has_loops(items: list[Item]) -> bool:
    return any(isinstance(it, Loop) for it in items)


def positive(size: Dim) -> bool:
    if isinstance(size, int):
        return size > 0
    return bool(sympy.sympify(size).is_positive)


def defines(i: Instr) -> tuple[str, ...]:
    if isinstance(i, (Load, Compute, Constant, IndexValue)):
        return (i.dst,)
    if isinstance(i, CheckIndex):
        return (i.symbol,)
    if isinstance(i, AccResult):
        return i.dsts
    return ()


def uses(i: Instr) -> set[str]:
    """Value names (and indirect symbols) an instruction reads."""
    out: set[str] = set()
    for attr in ("index", "rindex"):
        e = getattr(i, attr, None)
        if e is not None and not isinstance(e, int):
            out |= {s.name for s in e.free_symbols}
    if isinstance(i, Load) and i.mask is not None:
        out.add(i.mask)
    if isinstance(i, Compute):
        out |= {a for a in i.args if isinstance(a, str)}
    if isinstance(i, CheckIndex):
        out.add(i.src)
    if isinstance(i, (Accumulate, Store)) and isinstance(i.value, str):
        out.add(i.value)
    if isinstance(i, AccResult):
        out.add(i.acc)
    return out


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
        movable = isinstance(it, (Load, Compute, Constant, IndexValue, CheckIndex))
        if movable and not (uses(it) & varying):
            out.append(it)  # type: ignore[arg-type]
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


def walks_columns(x: str, reductions: list[Loop]) -> bool:
    """Whether the loads of these reduction loops are contiguous in the pointwise variable ``x``
    and strided in the innermost reduction variable (``x.sum(0)``): then accumulating a block of
    outputs side by side reads memory in order."""
    v = sympy.Symbol(x, integer=True, nonnegative=True)
    score = 0
    for lp in reductions:
        inner = chain(lp)[-1]
        r = sympy.Symbol(inner.var, integer=True, nonnegative=True)
        for i in walk(lp.body):
            if isinstance(i, Load):
                if _step(i.index, r) == 1:
                    score -= 1
                elif _step(i.index, v) == 1:
                    score += 1
    return score > 0


def _step(index: Any, v: sympy.Symbol) -> Any:
    if isinstance(index, int):
        return 0
    # plan symbols are index_var symbols; match by name so assumptions never matter
    same = {s for s in index.free_symbols if s.name == v.name}
    if not same:
        return 0
    (sym,) = same
    return stride(index, sym)
