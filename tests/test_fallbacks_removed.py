"""Graphs of PyTorch's Inductor tests that ran with PyTorch for reasons a user would not accept
(issue 26), one small repro per cause; each fell back (or failed) on the main of 0aba762:

* ``auto_functionalized_v2``: a custom op that writes its arguments (a whole base, a slice of
  one, a strided view of a caller's input, a ``Tensor(a!)[]`` list) is copies of the bases and
  one extern call of the op marked ``mutates``;
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
    """``firtest::add_into_(Tensor(a!) dst, Tensor src) -> ()`` (``dst += src + 1``) and
    ``firtest::sin_list(Tensor x, Tensor(a!)[] outs) -> Tensor``."""
    lib = torch.library.Library("firtest", "DEF")
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
    yield torch.ops.firtest
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
    from fir.frontend.backend import COMPILED
    from fir.ir.graph import ExternNode

    def f(x):
        full = torch.full([3], 1.0)
        mutating_ops.add_into_.default(full, x)
        return full * 2

    _compile(f)(torch.randn(3))
    g = COMPILED[-1].module.funcs[0]
    calls = [n for n in g.nodes if isinstance(n, ExternNode)]
    op = [n for n in calls if n.callee == "firtest.add_into_.default"]
    assert len(op) == 1 and op[0].attrs["mutates"] == [0]
    assert not COMPILED[-1].report.fallbacks
