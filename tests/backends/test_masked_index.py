"""backends/plan/masked_index.py: a masked load's index simplified where its mask holds, and the
same element wherever the mask holds (checked point by point); a mask that bounds no loop
variable leaves the index alone."""

from __future__ import annotations

import itertools

import sympy
from fir.backends.plan.indexing import KLoop
from fir.backends.plan.instructions import Compute, IndexValue, Instr
from fir.backends.plan.masked_index import refine
from fir.ir.dtypes import DType
from fir.ir.graph import Literal
from fir.ir.symbolic import FloorDiv, Modulo, index_var, size_symbol

x0, x1, x2 = (index_var(f"x{k}") for k in range(3))
s = size_symbol("s27")
LOOPS = [KLoop(x0, s, False), KLoop(x1, 16, False), KLoop(x2, 128, False)]
# a dynamic Llama's rotary embedding: the rotated half of the last dimension (a cat's piece)
ROTATED = (
    128 * FloorDiv(64 * s * x1 + 64 * x0 + x2, 64 * s)
    + Modulo(x2, 64)
    + 2048 * Modulo(x0 + FloorDiv(x2, 64), s)
    + 64
)


def compare(name: str, var: sympy.Symbol, op: str, c: int) -> dict[str, Instr]:
    return {
        f"{name}_i": IndexValue(f"{name}_i", var, DType.I64),
        name: Compute(name, op, (f"{name}_i", Literal(c)), DType.BOOL),
    }


def holds(defs: dict[str, Instr], mask: str, at: dict[sympy.Symbol, int]) -> bool:
    i = defs[mask]
    assert isinstance(i, Compute)
    if i.op == "and":
        return all(holds(defs, a, at) for a in i.args if isinstance(a, str))
    a, b = i.args
    if isinstance(a, Literal):  # the literal on the left: c < x is x > c
        a, b = b, a
        op = {"lt": "gt", "le": "ge", "ge": "le", "gt": "lt"}[i.op]
    else:
        op = i.op
    v = defs[str(a)]
    assert isinstance(v, IndexValue) and isinstance(b, Literal)
    x, c = at[v.index], b.value
    return {"lt": x < c, "le": x <= c, "ge": x >= c, "gt": x > c}[op]


def same_where_the_mask_holds(
    index: sympy.Expr, got: sympy.Expr, defs: dict[str, Instr], mask: str, size: int
) -> int:
    checked = 0
    for a, b, c in itertools.product(range(size), range(0, 16, 5), range(128)):
        at = {x0: a, x1: b, x2: c}
        if holds(defs, mask, at):
            point = {**at, s: size}
            assert int(index.subs(point)) == int(got.subs(point)), at
            checked += 1
    return checked


def test_the_rotated_half_of_a_dynamic_rotary_is_affine_under_its_mask() -> None:
    defs = compare("m", x2, "lt", 64)
    got = refine(ROTATED, "m", defs, LOOPS)
    assert sympy.expand(got - (2048 * x0 + 128 * x1 + x2 + 64)) == 0
    assert same_where_the_mask_holds(ROTATED, got, defs, "m", 3) > 0


def test_a_lower_bound_shifts_the_variable() -> None:
    """The second piece of a cat (``x2 >= 64``) reads ``x2 - 64`` of its input."""
    index = 64 * Modulo(x0 + FloorDiv(x2 - 64, 64), s) + Modulo(x2 - 64, 64) + 8 * x1
    defs = compare("m", x2, "ge", 64)
    got = refine(index, "m", defs, LOOPS)
    assert not got.atoms(FloorDiv, Modulo)
    assert same_where_the_mask_holds(index, got, defs, "m", 3) > 0


def test_a_padding_window_of_two_comparisons() -> None:
    """``constant_pad_nd``'s mask: ``x2 >= 1 and x2 < 101`` (an ``and`` of two comparisons,
    the literal on either side)."""
    index = 100 * x0 + Modulo(x2 - 1, 100) + 100 * FloorDiv(x2 - 1, 100)
    defs = {
        **compare("lo", x2, "ge", 1),
        "hi_i": IndexValue("hi_i", x2, DType.I64),
        "hi": Compute("hi", "gt", (Literal(101), "hi_i"), DType.BOOL),
        "m": Compute("m", "and", ("lo", "hi"), DType.BOOL),
    }
    got = refine(index, "m", defs, LOOPS)
    assert sympy.expand(got - (100 * x0 + x2 - 1)) == 0
    assert same_where_the_mask_holds(index, got, defs, "m", 2) > 0


def test_a_mask_that_bounds_no_loop_variable_leaves_the_index() -> None:
    defs: dict[str, Instr] = {
        "v": Compute("v", "gt", ("data", Literal(0)), DType.BOOL),  # a value, not an index
        **compare("m", x2, "lt", 0),  # no element: nothing to simplify for
    }
    assert refine(ROTATED, "v", defs, LOOPS) is ROTATED
    assert refine(ROTATED, "m", defs, LOOPS) is ROTATED
    assert refine(ROTATED, "missing", defs, LOOPS) is ROTATED
