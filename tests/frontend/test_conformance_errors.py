"""Errors and PyTorch fallbacks that PyTorch's own Inductor tests found (issue 26), one small
repro per cause: each failed on 2480ada.

* sizes PyTorch writes with its own sympy functions (``FloorDiv`` of ``x.chunk(4)`` under
  dynamic shapes, ``Max(1, s - 1)`` of a backward graph) are rewritten into FIR's index forms;
* an int argument (a split size, a storage offset) is a size the program takes by name
  (``sizes (s1)``), not a reason to fall back or to fail on the next call;
* a masked load's indirect index is checked only where its mask holds (``cat`` of a nearest
  upsample read the upsample's index for the other input's points);
* a violated ``torch._check`` raises a RuntimeError, as eager does.
"""

from __future__ import annotations

import warnings

import pytest
import sympy
import torch
import torch._dynamo
import torch._dynamo.config
from fir.ir.errors import FirError
from fir.ir.interpreter import run_graph
from fir.ir.parser import parse_module
from fir.ir.printer import print_module
from fir.ir.symbolic import FloorDiv, Modulo, size_symbol
from torch.utils._sympy import functions as tf


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _compile(fn, backend: str = "cpp", **kw):
    return torch.compile(fn, backend="fir", options={"backend": backend}, **kw)


def _no_fallback():
    """Fail the test on any warning: a graph that runs with PyTorch warns."""
    return warnings.catch_warnings(action="error")


# -- 1. PyTorch's sympy functions as FIR index expressions


def test_torch_size_functions_become_fir_forms():
    from fir.frontend.sizes import UnsupportedSize, to_fir_expr

    s = sympy.Symbol("s5", integer=True, positive=True)
    f = size_symbol("s5")
    assert to_fir_expr(tf.FloorDiv(s + 3, 4)) == FloorDiv(f + 3, 4)
    assert to_fir_expr(tf.CeilDiv(s, 4)) == FloorDiv(f + 3, 4)
    assert to_fir_expr(tf.ModularIndexing(s, 2, 8)) == Modulo(FloorDiv(f, 2), 8)
    assert to_fir_expr(tf.PythonMod(s, 3)) == Modulo(f, 3)
    assert to_fir_expr(tf.Max(1, s - 1)) == sympy.Max(1, f - 1)
    assert to_fir_expr(tf.Min(s, 7)) == sympy.Min(f, 7)
    assert to_fir_expr(tf.FloorDiv(s, -2)) == FloorDiv(-f, 2)
    for v in range(1, 20):  # same values as PyTorch's, including a negative divisor
        for e in (tf.FloorDiv(s + 3, 4), tf.ModularIndexing(s, 2, 3), tf.FloorDiv(s, -2)):
            assert to_fir_expr(e).subs(f, v) == e.subs(s, v)
    with pytest.raises(UnsupportedSize, match="u0"):
        to_fir_expr(sympy.Symbol("u0", integer=True) + 1)


def test_chunk_under_dynamic_shapes():
    """``x.chunk(4)`` of a dynamic size: its chunk size is ``(s + 3) // 4``."""

    def f(x):
        return x.chunk(4)

    opt = _compile(f, fullgraph=True)
    with _no_fallback():
        for n in (4, 8, 12, 44):
            x = torch.randn(n)
            for a, b in zip(opt(x), f(x), strict=True):
                assert torch.equal(a, b)


def test_backward_with_max_size():
    """The backward graph of ``a[..., :-1, :]`` under dynamic shapes has a stride
    ``Max(1, s - 1)`` and a size ``s`` that only appears as ``s - 1``."""

    def fn(a):
        return a[..., :-1, :].contiguous()

    with torch._dynamo.config.patch(assume_static_by_default=False), _no_fallback():
        opt = _compile(fn)
        for shape in ([1, 2, 16, 4], [1, 3, 5, 4]):
            a = torch.randn(shape, requires_grad=True)
            b = a.detach().clone().requires_grad_()
            out = opt(a)
            out.sum().backward()
            fn(b).sum().backward()
            assert torch.equal(out, fn(b))
            assert torch.equal(a.grad, b.grad)


# -- 2 and 5. int arguments as sizes


@pytest.mark.parametrize("backend", ["cpp", "llvm"])
def test_split_with_changing_int(backend):
    def f(x, s):
        return torch.split(x, s, -1)

    opt = _compile(f, backend, dynamic=True)
    with _no_fallback():
        for n, s in ((10, 5), (12, 4), (10, 3), (11, 4)):
            x = torch.randn(2, n)
            for a, b in zip(opt(x, s), f(x, s), strict=True):
                assert torch.equal(a, b)


def test_storage_offset_input():
    """An input view with a symbolic storage offset: the offset is a size symbol Dynamo passes
    as an int."""

    def fn(x):
        return x[16:32]

    opt = _compile(fn, fullgraph=True)
    x = torch.randn(1024)
    with _no_fallback():
        for start in (0, 128, 200):
            assert torch.equal(opt(x[start:]), x[start + 16 : start + 32])


def test_int_that_may_be_negative_is_a_number():
    """``x * i`` with an int ``i`` of any sign: no size (FIR's sizes are positive) but a 0-d
    argument of the program (tests/frontend/test_fallbacks_removed.py has more)."""

    def fn(x, i):
        return x * i

    opt = _compile(fn, dynamic=True)
    with _no_fallback():
        assert torch.equal(opt(torch.ones(3), -7), torch.full((3,), -7.0))


def test_size_parameters_round_trip_and_run():
    text = (
        "func @f(%x: f32[2, s0]) sizes (s1) -> (f32[2, s1]) {\n"
        "  %a = slice %x {dim = 1, start = 0, end = s1} : f32[2, s1]\n"
        "  return %a\n"
        "}\n"
    )
    m = parse_module(text)
    assert print_module(m) == text
    assert print_module(parse_module(print_module(m))) == text
    x = torch.arange(20.0).reshape(2, 10)
    (out,) = run_graph(m.funcs[0], [x], sizes={"s1": 3})
    assert torch.equal(out, x[:, :3])
    with pytest.raises(FirError, match="bound by an argument type"):
        parse_module(text.replace("sizes (s1)", "sizes (s0)"))


# -- 3. a masked load's indirect index


@pytest.mark.parametrize("backend", ["cpp", "llvm"])
def test_upsample_feeding_cat(backend):
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.upsample = torch.nn.UpsamplingNearest2d(scale_factor=2)
            self.conv = torch.nn.Conv2d(8, 5, kernel_size=1)

        def forward(self, x, y):
            return self.conv(torch.cat([self.upsample(x), y], dim=1))

    m = M().eval()
    x, y = torch.randn(2, 3, 6, 13), torch.randn(2, 5, 12, 26)
    with torch.no_grad():
        torch.testing.assert_close(_compile(m, backend)(x, y), m(x, y))


# -- 4. a violated torch._check


def test_violated_check_raises_runtime_error():
    def fn(x):
        z = x.nonzero()
        torch._check(z.size(0) == 4)
        return z + 3

    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        x = torch.tensor([0, 1, 3, 4, 2, 0, 0])
        assert torch.equal(_compile(fn)(x), fn(x))
        with pytest.raises(RuntimeError, match="torch._check"):
            _compile(fn)(torch.tensor([0, 0, 0, 0]))


# -- 8. outputs that are no tensors


def test_size_and_int_outputs():
    """A graph returning a size of its input next to tensors (``x.size(1)``), and one that
    returns a computed size: both compile; the ints come back as eager returns them."""

    def fn(x):
        n = x.size(1)
        return torch.full([1, n], 1.0), n, x * 2

    def g(x):
        return x + 1, x.size(0) * 2 + 1

    with _no_fallback():
        for f in (fn, g):
            opt = _compile(f, dynamic=True)
            for shape in ((1, 22), (3, 7)):
                x = torch.randn(shape)
                got, want = opt(x), f(x)
                assert len(got) == len(want)
                for a, b in zip(got, want, strict=True):
                    if isinstance(b, torch.Tensor):
                        assert torch.equal(a, b)
                    else:
                        assert a == b and isinstance(a, int)


def test_masked_index_check_in_plan_text():
    from fir.backends.plan.instructions import CheckIndex, instr_str

    text = instr_str(CheckIndex("%n0_2", "n0_1", 78, ("x",), 3, "n0_0"))
    assert text == "%n0_2 = check n0_1 < 78 if n0_0 (reads x; error 3)"
