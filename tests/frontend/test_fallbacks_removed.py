"""Graphs of PyTorch's Inductor tests that ran with PyTorch for reasons a user would not accept
(issue 26), one small repro per cause; each fell back (or failed) on the main of 0aba762:

* ``auto_functionalized_v2``: a custom op that writes its arguments (a whole base, a slice of
  one, a strided view of a caller's input, a ``Tensor(a!)[]`` list) is copies of the bases and
  one extern call of the op marked ``mutates``;
* an int input of any sign used as a number (``x * i``), and numbers Python computes from int
  inputs (``round(i / 2 * 123.4567, 1)``): 0-d arguments evaluated at each call;
* sizes Python computes from int inputs and sizes: ``int(s / 6)`` is ``floordiv(s, 6)``;
  ``round(i / 2 + 1)`` is a size parameter the call computes.
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo

BACKENDS = ["cpp", "interp"]


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _compile(fn, backend: str = "cpp", **kw):
    opts = {"backend": backend, "fallback": "never"}
    return torch.compile(fn, backend="fir", options=opts, fullgraph=True, **kw)


def _same(got, want) -> None:
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
    elif isinstance(want, torch.Tensor):
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    else:
        assert got == want


# -- 1. auto_functionalized_v2


@pytest.fixture(scope="module")
def mutating_ops():
    """``firtest_mut::add_into_(Tensor(a!) dst, Tensor src) -> ()`` (``dst += src + 1``) and
    ``firtest_mut::sin_list(Tensor x, Tensor(a!)[] outs) -> Tensor``."""
    lib = torch.library.Library("firtest_mut", "DEF")
    lib.define("add_into_(Tensor(a!) dst, Tensor src) -> ()")
    lib.define("sin_list(Tensor x, Tensor(a!)[] outs) -> Tensor")

    def add_into(dst, src):
        dst.add_(src + 1)

    def sin_list(x, outs):
        for o in outs:
            o.copy_(x.sin())
        return x.cos()

    lib.impl("add_into_", add_into, "CompositeExplicitAutograd")
    lib.impl("add_into_", lambda dst, src: None, "Meta")
    lib.impl("sin_list", sin_list, "CompositeExplicitAutograd")
    lib.impl("sin_list", lambda x, outs: torch.empty_like(x), "Meta")
    yield torch.ops.firtest_mut
    lib._destroy()


@pytest.mark.parametrize("backend", BACKENDS)
def test_mutating_custom_op_whole_base(mutating_ops, backend):
    def f(x):
        full = torch.full([3, 3], 7.0)
        mutating_ops.add_into_.default(full, x)
        return full * full

    x = torch.randn(3, 3)
    _same(_compile(f, backend)(x), f(x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_mutating_custom_op_slice_of_base(mutating_ops, backend):
    def f(x):
        full = torch.full([4, 3], 2.0)
        mutating_ops.add_into_.default(full[1:3], x[:2])
        return full + 1

    x = torch.randn(3, 3)
    _same(_compile(f, backend)(x), f(x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_mutating_custom_op_strided_view_of_input(mutating_ops, backend):
    """The op writes a transposed slice of an input: the input is updated after the call (as
    eager updates it), and the graph's reads of it see the new values."""

    def f(y, x):
        mutating_ops.add_into_.default(y.t()[1:], x[:2])
        return y * 2

    y, x = torch.randn(3, 3), torch.randn(3, 3)
    y_eager = y.clone()
    got = _compile(f, backend)(y, x)
    _same(got, f(y_eager, x))
    _same(y, y_eager)


@pytest.mark.parametrize("backend", BACKENDS)
def test_mutating_custom_op_list_argument(mutating_ops, backend):
    def f(x):
        x = x * 3
        outs = [torch.empty_like(x), torch.empty_like(x)]
        r = mutating_ops.sin_list.default(x, outs)
        return r / 3, outs[0] + outs[1]

    x = torch.randn(5)
    _same(_compile(f, backend)(x), f(x))


def test_mutating_custom_op_is_one_extern_call(mutating_ops):
    """The import: copies of the base, one call of the op marked ``mutates``, no fallback."""
    from fir.frontend.dynamo import COMPILED
    from fir.ir.graph import ExternNode

    def f(x):
        full = torch.full([3], 1.0)
        mutating_ops.add_into_.default(full, x)
        return full * 2

    _compile(f)(torch.randn(3))
    g = COMPILED[-1].module.funcs[0]
    calls = [n for n in g.nodes if isinstance(n, ExternNode)]
    op = [n for n in calls if n.callee == "firtest_mut.add_into_.default"]
    assert len(op) == 1 and op[0].attrs["mutates"] == [0]
    assert not COMPILED[-1].report.fallbacks


# -- 2. int inputs used as numbers; 3. Python arithmetic on them (``operator.truediv``, ``round``)


def _dynamic(fn, backend: str = "cpp"):
    return _compile(fn, backend, dynamic=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_int_input_of_any_sign_is_a_value(backend):
    """``x * i`` with an int ``i``: a 0-d argument, so 0 and negative values are fine."""

    def f(x, i):
        return x * i

    c = _dynamic(f, backend)
    for i in (9132, -5, 0):
        x = torch.randn(3, 1, 1, 1, 1)
        _same(c(x, i), f(x, i))


def test_int_input_with_an_int_tensor():
    def f(x, i):
        return x * i + i

    c = _dynamic(f)
    for i in (7, -3):
        x = torch.arange(4, dtype=torch.int32)
        got = c(x, i)
        assert got.dtype == torch.int32
        _same(got, f(x, i))


def _round_1(x, i):
    return x + round(i / 2 * 123.4567, 1)


def _round_0(x, i):
    return x + round(i / 2 * 123.4567, 0)


def _round_neg(x, i):
    return x + round(i / 2 * 123.4567, -1)


@pytest.mark.parametrize("f", [_round_1, _round_0, _round_neg])
def test_round_of_int_arithmetic_is_a_value(f):
    """``round(i / 2 * 123.4567, n)``: PyTorch's ``RoundDecimal(…IntTrueDiv…)``, evaluated for
    each call as Python evaluates it."""
    c = _dynamic(f)
    for i in (2, 3, -7):
        x = torch.zeros(2)
        _same(c(x, i), f(x, i))


def test_round_of_an_int():
    def f(x, i):
        return x + round(i, 1) + round(i, 0)

    c = _dynamic(f)
    for i in (123, -4):
        x = torch.zeros(2)
        _same(c(x, i), f(x, i))


def test_rounded_int_arithmetic_as_a_size():
    """``x[:round(i / 2 + 1)]``: a size FIR's index forms cannot write is a size parameter the
    call computes (``sizes (d0)``); the slice runs as ``aten.slice_copy`` (never a view of the
    input that a later in-place write would reach)."""

    def f(x, i):
        return x[: round(i / 2 + 1)] + round(i / 2)

    from fir.frontend.dynamo import FALLBACKS

    before = len(FALLBACKS)
    c = torch.compile(f, backend="fir", dynamic=True, fullgraph=True)
    x = torch.zeros(5, dtype=torch.int32)
    for i in range(1, 6):
        _same(c(x, i), f(x, i))
    assert torch.equal(x, torch.zeros(5, dtype=torch.int32))
    assert len(FALLBACKS) == before  # FIR ran the graph


def test_int_of_a_size_quotient_is_a_floor_division():
    """``x.view(int(x.shape[0] / 6), 6)`` under dynamic shapes: ``TruncToInt(IntTrueDiv(s, 6))``
    of a size is ``floordiv(s, 6)``, and ``operator.truediv`` on sizes imports."""
    from fir.frontend.sizes import to_fir_expr
    from fir.ir.symbolic import FloorDiv, size_symbol
    from torch.utils._sympy import functions as tf

    s = __import__("sympy").Symbol("s7", integer=True, positive=True)
    assert to_fir_expr(tf.TruncToInt(tf.IntTrueDiv(s, 6))) == FloorDiv(size_symbol("s7"), 6)
    assert to_fir_expr(tf.CeilToInt(tf.IntTrueDiv(s, 6))) == FloorDiv(size_symbol("s7") + 5, 6)

    def f(x, y):
        x = torch.sum(x.view(int(x.shape[0] / 6), 6), dim=1)
        return torch.gather(x, 0, torch.trunc(y).to(torch.int64))

    c = torch.compile(f, backend="fir")
    y = torch.ones(1, dtype=torch.float64)
    for n in (30, 36, 42):
        x = torch.randn(n)
        _same(c(x, y), f(x, y))
