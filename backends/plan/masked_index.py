"""A masked load's index simplified where its mask holds.

A load under a mask reads memory only where the mask is true (every renderer keeps it so, and
:mod:`.bounds` does not check it for that reason). Where the mask bounds a loop variable, as
the pieces of a ``cat`` are (``x2 < 64`` reads the first half of the last dimension,
``x2 >= 64`` the second), the index can be simplified with that narrower range: a floor
division or a modulo that holds the piece's offset folds away. With a symbolic size those are
divisions by the size at every element: a dynamic Llama's rotary embedding read its rotated
half at ``128*floordiv(64*s*x1 + 64*x0 + x2, 64*s) + mod(x2, 64) + 2048*mod(x0 +
floordiv(x2, 64), s) + 64``, which is ``2048*x0 + 128*x1 + x2 + 64`` where ``x2 < 64``: 0.79 ms
a layer against 0.13 for the static graph on a 2-core Xeon at 256 tokens.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sympy
from fir.ir.graph import Literal
from fir.ir.symbolic import FloorDiv, Modulo, simplify_index
from fir.ir.types import Dim

from .indexing import KLoop
from .instructions import Compute, IndexValue, Instr

# comparisons of a loop variable with an integer: the bounds (lowest, past the highest) they
# give it, by op, for the literal c on the right; ``_FLIPPED`` for c on the left
_BOUND = {
    "lt": lambda c: (None, c),
    "le": lambda c: (None, c + 1),
    "ge": lambda c: (c, None),
    "gt": lambda c: (c + 1, None),
}
_FLIPPED = {"lt": "gt", "le": "ge", "ge": "le", "gt": "lt"}


def refine(index: Any, mask: str, defs: Mapping[str, Instr], loops: Sequence[KLoop]) -> Any:
    """``index`` simplified for the elements where ``mask`` (a value of ``defs``) is true, or
    ``index`` itself where the mask bounds no loop variable or nothing folds."""
    if isinstance(index, int) or not isinstance(index, sympy.Basic):
        return index
    ranges: dict[sympy.Symbol, Dim] = {lp.var: lp.size for lp in loops}
    spans: dict[sympy.Symbol, tuple[Any, Any]] = {}
    if not _collect(mask, defs, ranges, spans, depth=0):
        return index
    shifted = index
    fresh: dict[sympy.Symbol, sympy.Expr] = {}
    narrowed = dict(ranges)
    for v, (lo, hi) in spans.items():
        lo = lo or 0
        hi = ranges[v] if hi is None else _least(hi, ranges[v])
        if isinstance(hi, int) and hi - lo <= 0:
            return index  # no element reads here: leave it as it is
        # a named symbol, not a Dummy: the same load simplifies once (simplify_index's cache)
        w = sympy.Symbol(f"{v.name}__masked", integer=True, nonnegative=True)
        shifted = shifted.xreplace({v: w + lo})
        fresh[w] = v - lo
        del narrowed[v]
        narrowed[w] = hi - lo
    out = simplify_index(shifted, narrowed)
    if isinstance(out, sympy.Basic):
        out = sympy.expand(out.xreplace(fresh))
    return out if _divisions(out) < _divisions(index) else index


def _collect(
    mask: str,
    defs: Mapping[str, Instr],
    ranges: Mapping[sympy.Symbol, Dim],
    spans: dict[sympy.Symbol, tuple[Any, Any]],
    depth: int,
) -> bool:
    """Add to ``spans`` the bounds that ``mask`` (a comparison of a loop variable with an
    integer, or an ``and`` of such masks) gives; False where it gives none."""
    i = defs.get(mask)
    if not isinstance(i, Compute) or depth > 8:
        return False
    if i.op == "and":
        found = [_collect(a, defs, ranges, spans, depth + 1) for a in i.args if isinstance(a, str)]
        return any(found)
    if i.op not in _BOUND or len(i.args) != 2:
        return False
    a, b = i.args
    op = i.op
    if isinstance(a, Literal):
        a, b, op = b, a, _FLIPPED[op]
    if not isinstance(a, str) or not isinstance(b, Literal):
        return False
    c = b.value
    if isinstance(c, bool) or not isinstance(c, int):
        return False
    var = defs.get(a)
    if not isinstance(var, IndexValue) or var.index not in ranges:
        return False
    lo, hi = _BOUND[op](c)
    old_lo, old_hi = spans.get(var.index, (None, None))
    if lo is not None and old_lo is not None:
        lo = max(lo, old_lo)
    if hi is not None and old_hi is not None:
        hi = min(hi, old_hi)
    lo = lo if lo is not None else old_lo
    hi = hi if hi is not None else old_hi
    if lo is not None and lo < 0:
        lo = None
    spans[var.index] = (lo, hi)
    return True


def _least(a: Any, b: Dim) -> Any:
    """The smaller of an integer bound and a loop's size (the bound where the size is symbolic:
    it holds whatever the size)."""
    return min(a, b) if isinstance(b, int) else a


def _divisions(e: Any) -> int:
    if not isinstance(e, sympy.Basic):
        return 0
    return sum(isinstance(x, (FloorDiv, Modulo)) for x in sympy.preorder_traversal(e))
