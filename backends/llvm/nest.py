"""The plan's flat instruction list as a loop tree, and the facts that choose how the llvm
renderer writes a loop nest: which loop the stores walk contiguously (it goes innermost), and
whether a reduction walks memory along its outputs (``x.sum(0)``: then a block of outputs is
accumulated side by side, the reduction loop outside)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sympy
from fir.backends.plan.index_text import stride
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


@dataclass
class Loop:
    begin: LoopBegin
    body: list[Item] = field(default_factory=list)

    @property
    def var(self) -> str:
        return self.begin.var


Item = Instr | Loop


def loop_tree(instrs: list[Instr]) -> list[Item]:
    """Every ``loop``…``end`` pair of the flat list as a :class:`Loop` holding its body."""
    root: list[Item] = []
    stack = [root]
    for i in instrs:
        if isinstance(i, LoopBegin):
            lp = Loop(i)
            stack[-1].append(lp)
            stack.append(lp.body)
        elif isinstance(i, LoopEnd):
            stack.pop()
        else:
            stack[-1].append(i)
    assert len(stack) == 1, "unbalanced loop/end in a kernel plan"
    return root


def walk(items: list[Item]) -> list[Instr]:
    """The instructions under ``items``, loops flattened, in order."""
    out: list[Instr] = []
    for it in items:
        out += walk(it.body) if isinstance(it, Loop) else [it]
    return out


def chain(lp: Loop) -> list[Loop]:
    """``lp`` and the loops of its kind perfectly nested in it."""
    out = [lp]
    while len(out[-1].body) == 1 and isinstance(out[-1].body[0], Loop):
        inner = out[-1].body[0]
        if inner.begin.reduction != lp.begin.reduction:
            break
        out.append(inner)
    return out


def has_loops(items: list[Item]) -> bool:
    return any(isinstance(it, Loop) for it in items)


def defines(i: Instr) -> tuple[str, ...]:
    if isinstance(i, (Load, Compute, Constant, IndexValue)):
        return (i.dst,)
    if isinstance(i, CheckIndex):
        return (i.symbol,)
    if isinstance(i, AccResult):
        return i.dsts
    return ()


def uses(i: Instr) -> set[str]:
    """The value names and index symbols ``i`` reads."""
    out: set[str] = set()
    for attr in ("index", "rindex"):
        e = getattr(i, attr, None)
        if e is not None and not isinstance(e, int):
            out |= {s.name for s in sympy.sympify(e).free_symbols}
    if isinstance(i, Load) and i.mask is not None:
        out.add(i.mask)
    if isinstance(i, Compute):
        out |= {a for a in i.args if isinstance(a, str)}
    if isinstance(i, CheckIndex):
        out.add(i.src)
    if isinstance(i, (Accumulate, Store)) and isinstance(i.value, str):
        out.add(i.value)
    return out


def step(index: Any, var: str) -> Any:
    """How far ``index`` moves when loop ``var`` moves by one (0: not at all; None: not
    affine in it)."""
    if isinstance(index, int):
        return 0
    same = [s for s in sympy.sympify(index).free_symbols if s.name == var]
    return stride(index, same[0]) if same else 0


def stores_contiguous(items: list[Item], var: str) -> bool:
    """Every store under ``items`` steps by one element along ``var`` (and there is one)."""
    stores = [i for i in walk(items) if isinstance(i, Store)]
    return bool(stores) and all(step(s.index, var) == 1 for s in stores)


def walks_columns(x: str, reductions: list[Loop]) -> bool:
    """The loads of these reduction loops step by one along pointwise loop ``x`` more often
    than along their innermost reduction variable: a column reduction."""
    score = 0
    for lp in reductions:
        r = chain(lp)[-1].var
        for i in walk(lp.body):
            if isinstance(i, Load):
                if step(i.index, r) == 1:
                    score -= 1
                elif step(i.index, x) == 1:
                    score += 1
    return score > 0
