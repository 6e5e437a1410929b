"""Dynamic shapes through ``torch.compile(backend="fir")``: graphs with symbolic sizes import
as symbolic FIR, compile once, and the compiled program (C++ kernels that take the sizes as
arguments) runs for every size. Dynamo passes each size symbol as a graph input too; FIR reads
sizes from the tensors' shapes and drops those inputs (``ImportReport.dropped_inputs``)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import sympy

torch = pytest.importorskip("torch")
F = torch.nn.functional

from fir.frontend.dynamo import COMPILED  # noqa: E402
from fir.ir.symbolic import FloorDiv, Modulo, simplify_index, size_symbol  # noqa: E402

LENGTHS = (5, 9, 17, 33)


def block(x: Any, w: Any, g: Any) -> Any:
    """A transformer-ish block: layer norm, an MLP with gelu, rms norm, a softmax over the
    sequence and a mean over it."""
    h = F.layer_norm(x, (x.shape[-1],))
    h = F.gelu(h @ w) + x
    h = F.rms_norm(h, (h.shape[-1],), g)
    return torch.softmax(h, dim=1) + h.mean(dim=1, keepdim=True)


def run_lengths(compiled: Callable[..., Any], mark: bool = False) -> tuple[list[Any], list[str]]:
    """Call ``compiled`` at every sequence length; return the FIR graphs compiled meanwhile and
    FIR's warnings (a fallback to PyTorch warns)."""
    torch.manual_seed(0)
    w, g = torch.randn(16, 16), torch.randn(16)
    start = len(COMPILED)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in LENGTHS:
            x = torch.randn(2, n, 16)
            if mark:
                torch._dynamo.mark_dynamic(x, 1)
            torch.testing.assert_close(compiled(x, w, g), block(x, w, g), rtol=1e-4, atol=1e-4)
    said = [str(c.message) for c in caught if "fir" in str(c.message)]
    return COMPILED[start:], said


def _symbolic(graph: Any) -> bool:
    func = graph.module.funcs[0]
    return any(not isinstance(d, int) for a in func.args for d in a.type.shape)


def test_dynamic_true_compiles_once_for_every_length() -> None:
    torch._dynamo.reset()
    graphs, said = run_lengths(torch.compile(block, backend="fir", dynamic=True))
    assert not said
    assert len(graphs) == 1
    (g,) = graphs
    assert g.program is not None and _symbolic(g)
    assert g.report.dropped_inputs  # Dynamo's size inputs, dropped at the call


def test_a_marked_dynamic_length_compiles_once() -> None:
    torch._dynamo.reset()
    graphs, said = run_lengths(torch.compile(block, backend="fir"), mark=True)
    assert not said
    assert len(graphs) == 1 and graphs[0].program is not None and _symbolic(graphs[0])


def test_automatic_dynamic_recompiles_once_then_serves_every_length() -> None:
    # Dynamo compiles the first length statically, then once with a symbolic length after the
    # size changes; that second program runs the three remaining lengths
    torch._dynamo.reset()
    graphs, said = run_lengths(torch.compile(block, backend="fir"))
    assert not said
    assert len(graphs) == 2
    static, dynamic = graphs
    assert not _symbolic(static) and _symbolic(dynamic)
    assert dynamic.program is not None


def test_the_division_identity_simplifies_with_symbolic_sizes() -> None:
    import sympy

    x0 = sympy.Symbol("x0", integer=True, nonnegative=True)
    s, t = size_symbol("s1"), size_symbol("s2")
    # what a reshape of a reshape leaves: the fusion check compares this with t*x0
    e = t * (s * FloorDiv(x0, s) + Modulo(x0, s))
    assert sympy.expand(simplify_index(e, {x0: 2 * s}) - t * x0) == 0
    assert simplify_index(64 * FloorDiv(x0, 64) + Modulo(x0, 64) + 3, {x0: 1000}) == x0 + 3


def test_a_symbolic_factor_of_the_divisor_splits_the_division() -> None:
    """``(t*q + r) // (s*t)`` with ``0 <= r < t`` is ``q // s`` for a symbolic ``t`` too, and
    a multiple of ``t`` holding a division divides out: a dynamic Llama's rotary of its
    repeated keys nested 238 divisions and remainders in one kernel (36 after), 10x the static
    graph's time."""
    import sympy

    x0, x1, x2 = (sympy.Symbol(f"x{k}", integer=True, nonnegative=True) for k in range(3))
    s, t = size_symbol("s1"), size_symbol("s2")
    loops = {x0: s, x1: 16, x2: t}
    a = t * (16 * x0 + x1) + x2
    assert simplify_index(FloorDiv(a, s * t), loops) == FloorDiv(16 * x0 + x1, s)
    assert (
        sympy.expand(simplify_index(Modulo(a, s * t), loops) - (t * Modulo(16 * x0 + x1, s) + x2))
        == 0
    )
    # a quotient with a division in it: t*floordiv(x1, 4) + x2 over t
    assert simplify_index(FloorDiv(t * FloorDiv(x1, 4) + x2, t), loops) == FloorDiv(x1, 4)
    # a remainder that may reach t stays
    assert simplify_index(FloorDiv(a + t, s * t), loops) != FloorDiv(16 * x0 + x1, s)
    for sv in (1, 2, 3):
        for tv in (1, 2, 5):
            for v0 in range(sv):
                for v1 in (0, 7, 15):
                    for v2 in range(tv):
                        at = {x0: v0, x1: v1, x2: v2, s: sv, t: tv}
                        value = tv * (16 * v0 + v1) + v2
                        for op, py in ((FloorDiv, value // (sv * tv)), (Modulo, value % (sv * tv))):
                            got = simplify_index(op(a, s * t), loops).subs(at)
                            got = got.replace(FloorDiv, lambda p, q: p // q)
                            assert int(got.replace(Modulo, lambda p, q: p % q)) == py


def test_a_flattened_row_read_through_a_symbolic_view_is_affine() -> None:
    """[b*s, 3072] read as [b, s, 3072] with a symbolic s: c*q + r with 0 <= r < c divided by
    c*s is q // s. Dynamic GPT-2's GELU read 3072*s*floordiv(3072*x0 + x1, 3072*s) + x1 +
    3072*mod(x0, s): an int64 division per element and no vector loop, 1.4-1.7x the static
    graph on the CPU."""
    import sympy

    x0 = sympy.Symbol("x0", integer=True, nonnegative=True)
    x1 = sympy.Symbol("x1", integer=True, nonnegative=True)
    s, b = size_symbol("s1"), size_symbol("s2")
    loops = {x0: b * s, x1: 3072}
    e = 3072 * s * FloorDiv(3072 * x0 + x1, 3072 * s) + x1 + 3072 * Modulo(x0, s)
    assert simplify_index(e, loops) == 3072 * x0 + x1
    assert simplify_index(Modulo(3072 * x0 + x1, 3072 * s), loops) == x1 + 3072 * Modulo(x0, s)
    # a remainder that may reach the factor is left alone
    wide = {x0: b * s, x1: 4000}
    assert simplify_index(FloorDiv(3072 * x0 + x1, 3072 * s), wide) == FloorDiv(
        3072 * x0 + x1, 3072 * s
    )
    # the values agree with Python's at every point of a small box
    for sv in (1, 2, 3):
        for v0 in range(2 * sv):
            for v1 in (0, 1, 3071):
                at = {x0: v0, x1: v1, s: sv, b: 2}
                want = (3072 * v0 + v1) % (3072 * sv)
                got = simplify_index(Modulo(3072 * x0 + x1, 3072 * s), loops)
                assert int(got.subs(at).replace(Modulo, lambda a, d: a % d)) == want


def test_a_dynamic_rotary_reads_its_rotated_half_without_dividing_by_the_length() -> None:
    """Llama's rotary embedding over a symbolic length: the rotated half (a cat of the two
    halves of the head dimension, read under ``x < 64`` and ``x >= 64``) is read at an affine
    index, with no floor division or modulo by the sequence length at every element
    (backends/plan/masked_index.py), and the results are eager's at every length."""

    def rotary(x: Any, w: Any, cos: Any, sin: Any) -> Any:
        q = (x @ w).view(1, x.shape[0], 4, 16).transpose(1, 2)  # [1, heads, length, 16]
        rotated = torch.cat((-q[..., 8:], q[..., :8]), dim=-1)
        return q * cos + rotated * sin

    torch._dynamo.reset()
    compiled = torch.compile(rotary, backend="fir")
    start = len(COMPILED)
    for n in LENGTHS:  # the length symbolic, the heads and head dimension static (as Llama's)
        torch.manual_seed(n)
        x, w = torch.randn(n, 64), torch.randn(64, 64)
        cos, sin = torch.randn(n, 16), torch.randn(n, 16)
        for t in (x, cos, sin):
            torch._dynamo.mark_dynamic(t, 0)
        torch.testing.assert_close(compiled(x, w, cos, sin), rotary(x, w, cos, sin))
    programs = [c.program for c in COMPILED[start:] if c.program is not None]
    assert len(programs) == 1
    from fir.backends.plan.instructions import Load

    masked = [
        i
        for k in programs[0].plan.kernels()
        for i in k.instrs
        if isinstance(i, Load) and i.mask is not None
    ]
    assert masked
    for i in masked:
        divisions = [
            e for e in sympy.preorder_traversal(i.index) if isinstance(e, (FloorDiv, Modulo))
        ]
        assert not any(e.args[1].free_symbols for e in divisions), i.index
