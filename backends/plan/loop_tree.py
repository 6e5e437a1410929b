"""A kernel plan's flat instruction list as a loop tree, for the renderers that choose how to
write a loop nest (the C++ and llvm back ends): every ``loop``…``end`` pair becomes a
:class:`Loop` holding its body, and the few questions both ask of a tree (its instructions in
order, the loops perfectly nested in one, what an instruction defines and reads)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sympy
from fir.ir.symbolic import stride
from fir.ir.types import Dim

from . import instructions as ins


@dataclass
class Loop:
    """``for var in [0, size)`` and its body. ``parallel``: the loop a kernel is split across
    threads on; a nest runs them as its schedule says (:mod:`.loop_nest`)."""

    var: str
    size: Dim
    reduction: bool
    body: list[Item] = field(default_factory=list)
    parallel: bool = False


Item = ins.Instr | Loop


def loop_tree(instrs: list[ins.Instr]) -> list[Item]:
    """Nest the flat list: every ``loop``…``end`` pair becomes a :class:`Loop`."""
    root: list[Item] = []
    stack: list[list[Item]] = [root]
    for i in instrs:
        if isinstance(i, ins.LoopBegin):
            lp = Loop(i.var, i.size, i.reduction, parallel=i.parallel)
            stack[-1].append(lp)
            stack.append(lp.body)
        elif isinstance(i, ins.LoopEnd):
            stack.pop()
        else:
            stack[-1].append(i)
    if len(stack) != 1:
        raise ValueError("unbalanced loop/end in a kernel plan")
    return root


def walk(items: list[Item]) -> list[ins.Instr]:
    """Every instruction under ``items``, loops flattened, in order."""
    out: list[ins.Instr] = []
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


def defines(i: ins.Instr) -> tuple[str, ...]:
    if isinstance(i, (ins.Load, ins.Compute, ins.Constant, ins.IndexValue)):
        return (i.dst,)
    if isinstance(i, ins.CheckIndex):
        return (i.symbol,)
    if isinstance(i, ins.AccResult):
        return i.dsts
    return ()


def uses(i: ins.Instr) -> set[str]:
    """Value names (and indirect symbols) an instruction reads."""
    out: set[str] = set()
    for attr in ("index", "rindex"):
        e = getattr(i, attr, None)
        if e is not None and not isinstance(e, int):
            out |= {s.name for s in sympy.sympify(e).free_symbols}
    if isinstance(i, ins.Load) and i.mask is not None:
        out.add(i.mask)
    if isinstance(i, ins.Compute):
        out |= {a for a in i.args if isinstance(a, str)}
    if isinstance(i, ins.CheckIndex):
        out.add(i.src)
        if i.mask is not None:
            out.add(i.mask)
    if isinstance(i, (ins.Accumulate, ins.Store)) and isinstance(i.value, str):
        out.add(i.value)
    if isinstance(i, ins.AccResult):
        out.add(i.acc)
    return out


def positive(size: Dim) -> bool:
    """Whether a loop of ``size`` surely runs at least once."""
    if isinstance(size, int):
        return size > 0
    return bool(sympy.sympify(size).is_positive)


def hoist(items: list[Item], var: str, per_lane: set[str]) -> tuple[list[ins.Instr], list[Item]]:
    """Split the body of loop ``var`` into what does not depend on ``var`` (run once before the
    loop) and the rest. ``per_lane``: values that already vary with ``var``. Stores,
    accumulations and nested loops stay."""
    varying = set(per_lane) | {var}
    out: list[ins.Instr] = []
    rest: list[Item] = []
    for it in items:
        if isinstance(
            it, (ins.Load, ins.Compute, ins.Constant, ins.IndexValue, ins.CheckIndex)
        ) and not (uses(it) & varying):
            out.append(it)
            continue
        rest.append(it)
        if not isinstance(it, Loop):
            varying |= set(defines(it))
    return out, rest


def step(index: Any, var: str) -> Any:
    """How far ``index`` moves when loop ``var`` moves by one (0: not at all; None: not
    affine in it)."""
    if isinstance(index, int):
        return 0
    same = [s for s in sympy.sympify(index).free_symbols if s.name == var]
    return stride(index, same[0]) if same else 0


def walks_columns(x: str, reductions: list[Loop]) -> bool:
    """The loads of these reduction loops step by one along pointwise loop ``x`` more often
    than along their innermost reduction variable: a column reduction (``x.sum(0)``), which a
    renderer runs over a block of outputs side by side, the reduction loop outside."""
    score = 0
    for lp in reductions:
        r = chain(lp)[-1].var
        for i in walk(lp.body):
            if isinstance(i, ins.Load):
                if step(i.index, r) == 1:
                    score -= 1
                elif step(i.index, x) == 1:
                    score += 1
    return score > 0


def column_segments(inner: Loop) -> tuple[list[list[Item]], set[str], set[str]]:
    """The body of a column reduction's output loop cut into segments (each reduction loop
    alone, the straight-line code between them together); the values the straight-line
    segments make; and those made in one segment and read in another, which a renderer that
    runs each segment over a block of outputs keeps in per-block arrays."""
    segments: list[list[Item]] = []
    for it in inner.body:
        if isinstance(it, Loop) or not segments or isinstance(segments[-1][-1], Loop):
            segments.append([it])
        else:
            segments[-1].append(it)
    made: dict[str, int] = {}
    crossing: set[str] = set()
    for k, seg in enumerate(segments):
        for i in walk(seg):
            crossing |= {u for u in uses(i) if u in made and made[u] != k}
            if not isinstance(seg[0], Loop):
                made.update((d, k) for d in defines(i))
    return segments, set(made), crossing
