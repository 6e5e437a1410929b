"""A member's loop variables in terms of its kernel's loops.

A kernel runs one loop nest: the loops of its *primary* member (its reduction, else its first
node), in the order that member's schedule gives, named ``x0, x1, …`` (pointwise) and ``r0, r1,
…`` (reduction). Every member computes the elements the kernel's iteration numbers say (the IR's
rule: a member's iterations are numbered in the order its own loops run), so each member
variable is a function of the kernel variables:

* loops of equal sizes correspond one to one: a variable is renamed, and a *merged* loop
  (``[i0, i1] < 2048``) gives its variables by division and remainder;
* otherwise the kernel's position is linearised and cut again into the member's loops;
* a squeezed variable (a loop of size 1 left out of the schedule) is 0.

Division and remainder are what a merged loop means, but they would cost every access a
division: an affine index in which the merged variables appear with the strides of a
contiguous block (``64*i0 + i1`` for ``[i0, i1]`` of sizes 32, 64) is rewritten to the kernel
variable itself (``x0``). ``reorder`` merges loops only when every affine access is contiguous
across them, so this is the common case.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import sympy
from fir.ir.graph import Loop, LoopNode
from fir.ir.symbolic import FloorDiv, Modulo, index_var, simplify_index
from fir.ir.types import Dim, dims_mul

Expr = Any  # a sympy expression or an int


@dataclass(frozen=True)
class KLoop:
    """A loop of the kernel: its variable (``x0``, ``r1``), trip count, and whether it is a
    reduction loop."""

    var: sympy.Symbol
    size: Dim
    reduction: bool


@dataclass(frozen=True)
class Group:
    """Member variables run by one loop: one variable, or several merged (outermost first)."""

    vars: tuple[sympy.Symbol, ...]
    sizes: tuple[Dim, ...]

    @property
    def size(self) -> Dim:
        return dims_mul(self.sizes)


def scheduled_groups(n: LoopNode) -> tuple[list[Group], list[Group], list[sympy.Symbol]]:
    """The pointwise and reduction loops of ``n`` as they run, and its squeezed variables."""
    sizes = dict(n.ranges + n.reduction_ranges)
    if n.schedule is None:
        pw = [Group((v,), (s,)) for v, s in n.ranges]
        red = [Group((v,), (s,)) for v, s in n.reduction_ranges]
        return pw, red, []

    def groups(loops: Sequence[Loop]) -> list[Group]:
        return [Group(tuple(lp.vars), tuple(sizes[v] for v in lp.vars)) for lp in loops]

    pw, red = groups(n.schedule.loops), groups(n.schedule.reduction)
    seen = {v for g in pw + red for v in g.vars}
    squeezed = [v for v in sizes if v not in seen]
    return pw, red, squeezed


def kernel_loops(primary: LoopNode) -> list[KLoop]:
    """The kernel's loops: the primary member's scheduled loops, renamed ``x*`` and ``r*``."""
    pw, red, _ = scheduled_groups(primary)
    out = [KLoop(index_var(f"x{k}"), g.size, False) for k, g in enumerate(pw)]
    out += [KLoop(index_var(f"r{k}"), g.size, True) for k, g in enumerate(red)]
    return out


@dataclass
class VarMap:
    """How a member's variables come from the kernel's: ``exprs`` gives every member variable
    as an expression of the kernel variables; ``groups`` says which merged groups are run by a
    single kernel variable (for the affine rewrite)."""

    exprs: dict[sympy.Symbol, Expr]
    groups: list[tuple[Group, sympy.Symbol]]
    ranges: dict[sympy.Symbol, Dim]  # kernel variable -> trip count, for simplification
    # the kernel's variables stand in as stand-ins while substituting: a member's ``r0`` and
    # the kernel's ``r0`` are the same name, and one must not be mistaken for the other
    final: dict[sympy.Symbol, sympy.Symbol] = field(default_factory=dict)

    def apply(self, e: Expr) -> Expr:
        """``e`` (an index over the member's variables) over the kernel's variables."""
        if isinstance(e, int):
            return e
        e = sympy.sympify(e)
        for group, k in self.groups:
            e = _merge_affine(e, group, k)
        e = e.xreplace({v: sympy.sympify(x) for v, x in self.exprs.items()})
        out: Expr = simplify_index(e, self.ranges)  # a sympy expression: ``e`` is one
        if isinstance(out, sympy.Integer):
            return int(out)
        return out.xreplace(self.final)

    def kernel_var(self, v: sympy.Symbol) -> sympy.Symbol | None:
        """The kernel variable that member variable ``v`` is, when it is one."""
        e = self.exprs.get(v)
        return self.final.get(e) if isinstance(e, sympy.Symbol) else None

    def kernel_loop_of(self, v: sympy.Symbol) -> sympy.Symbol | None:
        """The one kernel variable that member variable ``v`` is part of: ``v`` itself, or a
        merged loop that runs ``v`` with its neighbours (``v`` is then ``x % n`` or ``x // n``
        of it). None when ``v`` is squeezed or spread over several kernel variables."""
        e = self.exprs.get(v)
        if e is None:
            return None
        syms = sympy.sympify(e).free_symbols
        if len(syms) != 1:
            return None
        return self.final.get(next(iter(syms)))


def map_member(member: LoopNode, loops: Sequence[KLoop], full_domain: bool) -> VarMap:
    """The variables of ``member`` in terms of ``loops``. ``full_domain``: a pointwise member
    that runs over the whole reduction domain of a reduction kernel (its loops split into the
    kernel's pointwise part, then its reduction part)."""
    pw, red, squeezed = scheduled_groups(member)
    stand_in = {lp.var: sympy.Dummy(lp.var.name, integer=True, nonnegative=True) for lp in loops}
    loops = [KLoop(stand_in[lp.var], lp.size, lp.reduction) for lp in loops]
    xloops = [lp for lp in loops if not lp.reduction]
    rloops = [lp for lp in loops if lp.reduction]
    exprs: dict[sympy.Symbol, Expr] = {v: sympy.Integer(0) for v in squeezed}
    merged: list[tuple[Group, sympy.Symbol]] = []
    ranges = {lp.var: lp.size for lp in loops}
    final = {d: v for v, d in stand_in.items()}
    if member.is_reduction:
        _map_groups(pw, xloops, exprs, merged, ranges)
        _map_groups(red, rloops, exprs, merged, ranges)
    elif full_domain:
        outer, inner = _split_groups(pw, dims_mul(lp.size for lp in xloops))
        if outer is not None:
            _map_groups(outer, xloops, exprs, merged, ranges)
            _map_groups(inner, rloops, exprs, merged, ranges)
        else:  # a loop is cut across the boundary: go through the position
            _map_groups(pw, xloops + rloops, exprs, merged, ranges)
    else:
        _map_groups(pw, xloops, exprs, merged, ranges)
    return VarMap(exprs, merged, ranges, final)


def _split_groups(groups: list[Group], numel: Dim) -> tuple[list[Group] | None, list[Group]]:
    prefix: Dim = 1
    for k, g in enumerate(groups):
        if _equal(prefix, numel):
            return groups[:k], groups[k:]
        prefix = dims_mul((prefix, g.size))
    if _equal(prefix, numel):
        return groups, []
    return None, []


def _map_groups(
    groups: list[Group],
    kloops: list[KLoop],
    exprs: dict[sympy.Symbol, Expr],
    merged: list[tuple[Group, sympy.Symbol]],
    ranges: dict[sympy.Symbol, Dim],
) -> None:
    # a merged loop of the member runs its variables row-major: what matters is the variables
    # in order, cut where the kernel's loops are cut
    groups = [Group((v,), (s,)) for g in groups for v, s in zip(g.vars, g.sizes)]
    runs = _matching_runs(groups, kloops)
    if runs is None:
        # different cuts of the same iterations: the whole position, cut again
        runs = [(groups, kloops)]
    for run_m, run_k in runs:
        vars_ = tuple(v for g in run_m for v in g.vars)
        sizes = tuple(s for g in run_m for s in g.sizes)
        if len(run_k) == 1:  # member loops merged into one kernel loop (or one for one)
            group = Group(vars_, sizes)
            _unmerge(group, run_k[0].var, exprs)
            if len(vars_) > 1:
                merged.append((group, run_k[0].var))
            continue
        position = linear_index([(k.var, k.size) for k in run_k])
        _unmerge(Group(vars_, sizes), position, exprs)


def _matching_runs(
    groups: list[Group], kloops: list[KLoop]
) -> list[tuple[list[Group], list[KLoop]]] | None:
    """Cut both loop lists into consecutive runs of equal trip counts (a run is one loop on at
    least one side), or None when the sizes do not allow it."""
    runs: list[tuple[list[Group], list[KLoop]]] = []
    i = j = 0
    while i < len(groups) and j < len(kloops):
        run_m, run_k = [groups[i]], [kloops[j]]
        pm, pk = groups[i].size, kloops[j].size
        i, j = i + 1, j + 1
        while not _equal(pm, pk):
            if not (isinstance(pm, int) and isinstance(pk, int)):
                return None
            if pm < pk and i < len(groups):
                pm *= groups[i].size
                run_m.append(groups[i])
                i += 1
            elif pk < pm and j < len(kloops):
                pk *= kloops[j].size
                run_k.append(kloops[j])
                j += 1
            else:
                return None
        if len(run_m) > 1 and len(run_k) > 1:
            return None
        runs.append((run_m, run_k))
    if i < len(groups) or j < len(kloops):
        return None
    return runs


def _unmerge(g: Group, q: Expr, exprs: dict[sympy.Symbol, Expr]) -> None:
    """The variables of group ``g`` from the position ``q`` in it (row-major)."""
    if len(g.vars) == 1:
        exprs[g.vars[0]] = q
        return
    stride: Expr = sympy.Integer(1)
    for k in range(len(g.vars) - 1, -1, -1):
        e = FloorDiv(q, stride) if stride != 1 else q
        if k > 0:
            e = Modulo(e, g.sizes[k])
        exprs[g.vars[k]] = e
        stride = stride * g.sizes[k]


def _merge_affine(e: Expr, g: Group, k: sympy.Symbol) -> Expr:
    """Rewrite the terms of ``e`` in ``g``'s variables to ``c * k`` when they are ``c *
    (contiguous position in g)``; leave ``e`` alone otherwise."""
    if len(g.vars) < 2 or not (e.free_symbols & set(g.vars)):
        return e
    coeffs: dict[sympy.Symbol, Expr] = {}
    rest: list[Expr] = []
    # expanded, so that each term holds one variable: a row-major position over symbolic sizes
    # stays factored (``s1*(4*i0 + i1) + i2``), where known sizes would have distributed
    for term in sympy.Add.make_args(sympy.expand(e)):
        hit = term.free_symbols & set(g.vars)
        if not hit:
            rest.append(term)
            continue
        if len(hit) != 1:
            return e
        (v,) = hit
        c = sympy.simplify(term / v)
        if c.free_symbols & set(g.vars) or not c.is_number and not _over_sizes(c):
            return e
        coeffs[v] = coeffs.get(v, 0) + c
    base = coeffs.get(g.vars[-1])
    if base is None:
        return e
    stride: Expr = sympy.Integer(1)
    for v, s in zip(reversed(g.vars), reversed(g.sizes)):
        want = sympy.expand(base * stride)
        if sympy.expand(coeffs.get(v, 0) - want) != 0:
            return e
        stride = stride * s
    return sympy.Add(*rest, base * k)


def _over_sizes(c: Expr) -> bool:
    """Whether ``c`` is an expression over size symbols only (no loop or indirect symbol)."""
    return all(s.is_positive for s in c.free_symbols)


@lru_cache(maxsize=4096)
def _equal_cached(a: Any, b: Any) -> bool:
    return sympy.expand(sympy.sympify(a) - sympy.sympify(b)) == 0


def _equal(a: Dim, b: Dim) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return _equal_cached(a, b)


def linear_index(vars_sizes: Sequence[tuple[sympy.Symbol, Dim]]) -> Expr:
    """Row-major position of ``vars`` in a block of the given sizes."""
    e: Expr = sympy.Integer(0)
    for v, s in vars_sizes:
        e = e * s + v
    return e
