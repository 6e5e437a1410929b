"""Loop orders from access strides: the analysis behind ``reorder`` (and the reordering ``fuse``
does to unlock a fusion).

For a loop node, every access (each load, and the write of each result) has a *stride* per loop
variable: how far in the buffer's storage one step of that loop moves it (0: the access does not
depend on the loop, a broadcast). From those:

* **Order.** Loops of size 1 are dropped (squeezed). The others are sorted, innermost last, by
  pairwise votes, after Inductor's ``pick_loop_order``: loop ``a`` goes inside loop ``b`` when
  the accesses that move less along ``a`` than along ``b`` (an access that does not move along
  ``b`` votes for ``a``) outweigh the others. Unlike Inductor's, a vote weighs the elements the
  access touches, so a few small broadcast parameters do not outvote the tensors a node
  streams; a tie keeps the order of the node's ``over`` ranges. So the loop with stride 1 for
  the most data is innermost. Pointwise and reduction loops are ordered separately
  (reduction loops stay inside).
* **Merging.** Two neighbouring loops (outer ``o``, inner ``i``) merge when every access is
  contiguous across them, ``stride(o) == stride(i) * size(i)``, and affine in both (no
  ``floordiv``/``mod`` of them); merging repeats, so a contiguous 8192 x 4096 pointwise node
  becomes one loop of 33,554,432.
* **Tiling hint.** When the accesses disagree on the loop they are contiguous along (a transpose:
  one access moves by 1 along ``i0``, another along ``i1``), a 2-D tile over those two loops lets
  both be read in contiguous runs; the hint names the loops and says which accesses want which.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from fir.ir.graph import Loop, LoopNode, LoopSchedule
from fir.ir.types import Dim, dims_mul

from ..analysis.deps import _write_access
from .fusion_graph import hint


@dataclass
class Access:
    """One access of a node: what it touches (``%x``, or ``%y`` for a write) and its index over
    the node's own loop variables."""

    label: str
    index: Any
    write: bool

    def coefficients(self) -> dict[Any, Any]:
        """The coefficient of each loop variable the index is affine in; a variable inside a
        ``floordiv``, ``mod``, ``min``, ``max`` or a product of variables maps to None."""
        return _coefficients(self.index)

    def stride(self, var: Any, variables: list[Any]) -> int:
        """How far one step of ``var`` moves the access (size symbols set to their hint): the
        coefficient of an affine index, else the first step from the origin."""
        if isinstance(self.index, int):
            return 0
        coeffs = self.coefficients()
        if var not in coeffs:
            return 0
        c = coeffs[var]
        if c is not None:
            return abs(hint(c)) if not isinstance(c, int) else abs(c)
        base = {v: 0 for v in variables}
        step = dict(base)
        step[var] = 1
        delta = self.index.xreplace(step) - self.index.xreplace(base)
        return abs(hint(delta)) if not isinstance(delta, int) else abs(delta)

    def affine_in(self, var: Any) -> bool:
        if isinstance(self.index, int):
            return True
        coeffs = self.coefficients()
        return var not in coeffs or coeffs[var] is not None


@functools.lru_cache(maxsize=16384)
def _coefficients(index: Any) -> dict[Any, Any]:
    """Loop variable -> its coefficient in ``index`` (None where ``index`` is not affine in it).
    The same index recurs across nodes: cached."""
    out: dict[Any, Any] = {}
    if isinstance(index, int):
        return out
    import sympy
    from fir.ir.symbolic import FloorDiv, Modulo

    expr = sympy.expand(index)
    nonaffine: set[Any] = set()
    for f in expr.atoms(FloorDiv, Modulo, sympy.Min, sympy.Max):
        nonaffine |= {v for v in f.free_symbols if _is_loop_var(v)}
    for term in sympy.Add.make_args(expr):
        factors = sympy.Mul.make_args(term)
        loops = [f for f in factors if _is_loop_var(f)]
        if len(loops) > 1:  # a product of loop variables
            nonaffine |= set(loops)
        elif loops:
            var = loops[0]
            coeff = sympy.Mul(*[f for f in factors if f is not var])
            out[var] = out.get(var, 0) + coeff
    for v in nonaffine:
        out[v] = None
    return out


def _is_loop_var(x: Any) -> bool:
    # loop variables are non-negative integer symbols; size symbols are positive ones
    return bool(getattr(x, "is_Symbol", False) and x.is_nonnegative and not x.is_positive)


def accesses(n: LoopNode) -> list[Access]:
    """The node's loads (but those through an indirect index, which have no stride) and the
    writes of its results, each distinct one once."""
    from fir.ir.symbolic import is_indirect

    assert n.body is not None
    out: list[Access] = []
    seen: set[Any] = set()
    for op in n.body.loads():
        index = op.index
        assert index is not None  # every load has one (the verifier's rule)
        if not isinstance(index, int) and any(is_indirect(s) for s in index.free_symbols):
            continue
        assert op.buffer is not None
        key = (op.buffer.name, index)
        if key not in seen:
            seen.add(key)
            out.append(Access(f"%{op.buffer.name}", index, False))
    sizes = tuple(s for _, s in n.ranges)
    variables = tuple(v for v, _ in n.ranges)
    for r in n.results:
        t = r.type
        index, _ = _write_access(sizes, variables, t.dtype, t.shape, t.layout)
        out.append(Access(f"%{r.name}", index, True))
    return out


@dataclass
class Plan:
    """A loop node's chosen schedule and, maybe, a 2-D tiling hint."""

    schedule: LoopSchedule
    tile: tuple[str, str] | None = None
    tile_reason: str = ""


def plan_loops(n: LoopNode, keep_order: bool = False, merge: bool = True) -> Plan:
    """The schedule the strides of ``n``'s accesses ask for. ``keep_order``: keep the order the
    loops run in now (only squeeze and merge), as in a kernel whose nodes must keep agreeing."""
    acc = accesses(n)
    sizes = dict(n.ranges + n.reduction_ranges)
    all_vars = [v for v, _ in n.ranges + n.reduction_ranges]
    strides = [{v: a.stride(v, all_vars) for v in all_vars} for a in acc]
    weights = [_footprint(s, sizes) for s in strides]
    current_pw, current_red = n.scheduled_vars()

    def order(variables: list[Any]) -> list[Any]:
        kept = [v for v in variables if not _is_one(sizes[v])]
        if keep_order:
            return kept
        position = {v: k for k, v in enumerate(kept)}

        def inner_first(a: Any, b: Any) -> int:
            a_votes = sum(
                w for s, w in zip(strides, weights) if s[b] == 0 or (s[a] != 0 and s[a] < s[b])
            )
            b_votes = sum(
                w for s, w in zip(strides, weights) if s[a] == 0 or (s[b] != 0 and s[b] < s[a])
            )
            if a_votes != b_votes:
                return -1 if a_votes > b_votes else 1
            return position[b] - position[a]  # a tie: the later loop stays inside

        inner_to_outer = sorted(kept, key=functools.cmp_to_key(inner_first))
        return list(reversed(inner_to_outer))

    def merged(variables: list[Any]) -> list[Loop]:
        loops: list[list[Any]] = []
        for v in variables:
            if merge and loops and _contiguous(loops[-1][-1], v, sizes, acc, all_vars):
                loops[-1].append(v)
            else:
                loops.append([v])
        return [Loop(tuple(vs), dims_mul(sizes[v] for v in vs)) for vs in loops]

    pw = order(current_pw if keep_order else [v for v, _ in n.ranges])
    red = order(current_red if keep_order else [v for v, _ in n.reduction_ranges])
    plan = Plan(LoopSchedule(merged(pw), merged(red)))
    _tile_hint(plan, pw, acc, strides)
    return plan


def _footprint(strides: dict[Any, int], sizes: dict[Any, Dim]) -> int:
    """How many elements an access touches at most: the product of the sizes of the loops it
    moves along (size symbols at their hints). A vote weighs this much: four per-channel
    parameters of 64 elements (a batch norm's) must not outvote the two 8M-element tensors the
    node streams, which their count alone did (the channel loop went innermost, 4096 apart)."""
    out = 1
    for v, s in strides.items():
        if s != 0:
            size = sizes[v]
            out *= size if isinstance(size, int) else max(1, int(hint(size)))
    return out


def _is_one(size: Dim) -> bool:
    return isinstance(size, int) and size == 1


def _contiguous(
    outer: Any, inner: Any, sizes: dict[Any, Dim], acc: list[Access], all_vars: list[Any]
) -> bool:
    """Whether every access moves across ``outer`` exactly as it would continue along
    ``inner``: one loop over both visits the same addresses in the same order."""
    import sympy

    for a in acc:
        if isinstance(a.index, int):
            continue
        if not (a.affine_in(outer) and a.affine_in(inner)):
            return False
        coeffs = a.coefficients()
        so = coeffs.get(outer, 0)
        si = coeffs.get(inner, 0)
        if sympy.expand(so - si * sizes[inner]) != 0:
            return False
    return True


def _tile_hint(
    plan: Plan, pointwise: list[Any], acc: list[Access], strides: list[dict[Any, int]]
) -> None:
    """Record a 2-D tile when one access is contiguous along the innermost pointwise loop and
    another moves by more than one along it but is contiguous along another loop (a transpose).
    An access that does not move along the innermost loop (a broadcast of a row's value) is
    served from the same element and asks for nothing."""
    if len(pointwise) < 2:
        return
    innermost = pointwise[-1]
    with_inner: list[str] = []
    across: dict[Any, list[str]] = {}
    for a, s in zip(acc, strides):
        label = f"{a.label} ({'written' if a.write else 'read'})"
        if s[innermost] == 1:
            with_inner.append(label)
        elif s[innermost] > 1:
            along = [v for v in pointwise[:-1] if s[v] == 1]
            if along:
                across.setdefault(along[-1], []).append(label)
    if not with_inner or not across:
        return
    other = max(across, key=lambda v: (len(across[v]), pointwise.index(v)))
    plan.tile = (other.name, innermost.name)
    plan.tile_reason = (
        f"contiguous along {other.name}: {', '.join(across[other])}; "
        f"along {innermost.name}: {', '.join(with_inner)}"
    )
