"""The plan lowering (``backends/plan/lowering.py``): the composite ops it writes with primitive
ones give, on every back end, what the reference interpreter (eager PyTorch) gives.

Inputs mix random values with the hard ones: zeros of both signs, NaN, infinities, negative
divisors, the integer extremes (``INT_MIN // -1`` wraps, as torch's does), and ties for
argmax/argmin. The C++ and llvm back ends run on the CPU, Triton in its interpreter
(``TRITON_INTERPRET=1``, set by conftest.py) or on the GPU.
"""

from __future__ import annotations

import math
import os

import pytest

torch = pytest.importorskip("torch")

from fir.backends.compile import compile_function  # noqa: E402
from fir.backends.plan.instructions import Compute  # noqa: E402
from fir.backends.plan.lowering import LOWERINGS, lower_instrs  # noqa: E402
from fir.ir.dtypes import DType  # noqa: E402
from fir.ir.errors import KernelZeroDivisionError  # noqa: E402
from fir.ir.graph import Literal  # noqa: E402
from fir.ir.interpreter import run_graph  # noqa: E402
from fir.ir.parser import parse_module  # noqa: E402
from fir.passes.pipeline import parse_pipeline  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

GPU = torch.cuda.is_available()
BACKENDS = ["cpp", "llvm"]
try:
    import triton  # noqa: F401

    if GPU or os.environ.get("TRITON_INTERPRET") == "1":
        BACKENDS.append("triton")
except ImportError:  # pragma: no cover - Triton is optional on a CPU machine
    pass

N = 96  # elements of every input: a few blocks of Triton's, a vector loop and its remainder


def _floats(dtype: torch.dtype, seed: int, divisor: bool = False) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(N, generator=g, dtype=torch.float64) * 6).to(dtype)
    special = [0.0, -0.0, math.nan, math.inf, -math.inf, 1.0, -1.0, 0.5, -2.5, 3.0, 1e-30, 7.0]
    x[: len(special)] = torch.tensor(special, dtype=dtype)
    if divisor:  # a permutation of the specials against the dividend's, and exact multiples
        x[: len(special)] = torch.tensor(special[3:] + special[:3], dtype=dtype)
        x[20:30] = torch.tensor([2.0, -2.0, 0.5, -0.5, 3.0, -3.0, 1.5, -1.5, 7.0, -7.0])
    return x


def _ints(dtype: torch.dtype, seed: int, divisor: bool = False) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    info = torch.iinfo(dtype)
    low, high = (1, 9) if divisor else (max(info.min, -1000), min(info.max, 1000))
    x = torch.randint(low, high, (N,), generator=g, dtype=torch.int64)
    if divisor and info.min < 0:
        signs = torch.randint(0, 2, (N,), generator=g) * 2 - 1
        x = x * signs
        x[:4] = torch.tensor([-1, -1, 1, -7])
    if not divisor:
        x[:6] = torch.tensor([info.min, info.max, 0, info.min, -1 if info.min < 0 else 1, 7])
    return x.to(dtype)


def _inputs(dtype: DType, seed: int) -> list[torch.Tensor]:
    t = dtype.to_torch()
    if dtype.is_float:
        return [_floats(t, seed), _floats(t, seed + 1, divisor=True)]
    return [_ints(t, seed), _ints(t, seed + 1, divisor=True)]


def _compile(text: str, backend: str) -> object:
    pipeline = "cuda" if backend == "triton" else "fusion"
    module = parse_pipeline(pipeline).run(parse_module(text, "<test>"))
    device = ("cuda" if GPU else "cpu") if backend == "triton" else None
    return compile_function(module.funcs[0], backend, device=device)


def _check(text: str, inputs: list[torch.Tensor], backend: str, tol: float = 0.0) -> None:
    reference = parse_module(text, "<test>").funcs[0]
    want = run_graph(reference, [x.clone() for x in inputs])
    program = _compile(text, backend)
    device = "cuda" if backend == "triton" and GPU else "cpu"
    got = program(*[x.clone().to(device) for x in inputs])  # type: ignore[operator]
    for w, o in zip(want, got):
        assert o.dtype == w.dtype
        # exact but for ``tol``: every op here is correctly rounded, or a composition of such
        # ops that the interpreter's own kernels compute the same way
        torch.testing.assert_close(o.cpu(), w, rtol=tol, atol=tol, equal_nan=True)


def _program(op: str, dtype: DType, rhs: str = "%b") -> str:
    t = f"{dtype.value}[{N}]"
    result = "bool" if op in ("isinf", "isfinite") else dtype.value
    args = "%a" if rhs == "" else f"%a, {rhs}"
    return (
        f"func @f(%a: {t}, %b: {t}) -> ({result}[{N}]) {{\n"
        f"  %y = {op} {args} : {result}[{N}]\n"
        "  return %y\n}\n"
    )


FLOATS = [DType.F32, DType.F64]
INTS = [DType.I8, DType.I32, DType.I64, DType.U8]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=str)
@pytest.mark.parametrize("op", ["floordiv", "mod"])
def test_floor_division_and_remainder(op: str, dtype: DType, backend: str) -> None:
    _check(_program(op, dtype), _inputs(dtype, 1), backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("dtype", "divisor"),
    [(DType.F32, "2.0"), (DType.F32, "-0.75"), (DType.F64, "-3.0")]
    + [(d, v) for d in (DType.I32, DType.I64, DType.I8) for v in ("-1", "3", "-4")]
    + [(DType.U8, "5")],
    ids=str,
)
@pytest.mark.parametrize("op", ["floordiv", "mod"])
def test_floor_division_by_a_literal(op: str, dtype: DType, divisor: str, backend: str) -> None:
    _check(_program(op, dtype, divisor), _inputs(dtype, 2), backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ["floordiv", "mod"])
def test_an_integer_zero_divisor_is_reported(op: str, backend: str) -> None:
    a, b = _inputs(DType.I32, 3)
    b[17] = 0
    program = _compile(_program(op, DType.I32), backend)
    device = "cuda" if backend == "triton" and GPU else "cpu"
    with pytest.raises(KernelZeroDivisionError):
        program(a.to(device), b.to(device))  # type: ignore[operator]
        program.synchronize()  # type: ignore[attr-defined]  # a GPU reports at the next call


UNARY = ["sigmoid", "rsqrt", "reciprocal", "square", "relu", "sign", "isinf", "isfinite"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [DType.F32, DType.F64, DType.F16], ids=str)
@pytest.mark.parametrize("op", UNARY)
def test_unary_float_ops(op: str, dtype: DType, backend: str) -> None:
    inputs = [_floats(torch.float32, 4).to(dtype.to_torch())] * 2
    # exp and sqrt are libm's (vecmath's, numpy's) and torch's own: an ulp apart where torch's
    # vectorised kernels round otherwise; f16 rounds once more (Triton's interpreter computes
    # exp in numpy's f32, which can land the f16 result one f16 ulp, 2**-10 relative, away)
    tol = 1e-3 if dtype is DType.F16 else (1e-6 if op in ("sigmoid", "rsqrt") else 0.0)
    _check(_program(op, dtype, rhs=""), inputs, backend, tol)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [DType.I8, DType.I32, DType.I64, DType.U8], ids=str)
@pytest.mark.parametrize("op", ["square", "relu", "sign"])
def test_unary_integer_ops(op: str, dtype: DType, backend: str) -> None:
    _check(_program(op, dtype, rhs=""), [_ints(dtype.to_torch(), 5)] * 2, backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=str)
@pytest.mark.parametrize("rhs", ["%b", "2.5", "nan"])
@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_and_minimum_propagate_nan(op: str, rhs: str, dtype: DType, backend: str) -> None:
    if not dtype.is_float and rhs != "%b":
        rhs = "3"
    _check(_program(op, dtype, rhs), _inputs(dtype, 6), backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", INTS, ids=str)
@pytest.mark.parametrize("rhs", ["%b", "3", "70"])
@pytest.mark.parametrize("op", ["shl", "shr"])
def test_shifts_by_any_amount(op: str, rhs: str, dtype: DType, backend: str) -> None:
    # amounts of %b from -8 to 8: negative, in range and, for i8 and u8, the width itself
    _check(_program(op, dtype, rhs), _inputs(dtype, 7), backend)


# ---------------------------------------------------------------------------------------------
# the lowering itself


def _sigmoid_then_mod() -> list:
    return [
        Compute("s", "sigmoid", ("x",), DType.F32),
        Compute("m", "mod", ("s", Literal(2.0)), DType.F32),
    ]


def test_a_native_op_is_left_alone_and_others_are_decomposed() -> None:
    from fir.backends.plan.instructions import Load

    head = [Load("x", "buf", 0, DType.F32)]
    out = lower_instrs(head + _sigmoid_then_mod(), native={"sigmoid"})
    ops = [i.op for i in out if isinstance(i, Compute)]
    assert ops[0] == "sigmoid" and "mod" not in ops and "fmod" in ops
    # the names the plan had stay the results
    assert [i.dst for i in out if isinstance(i, Compute) and i.dst in ("s", "m")] == ["s", "m"]
    out = lower_instrs(head + _sigmoid_then_mod(), native=set())
    ops = [i.op for i in out if isinstance(i, Compute)]
    assert not set(ops) & set(LOWERINGS), ops
    assert "exp" in ops and "fmod" in ops
    # a test of the op and its operands' dtype (llvm: a native f32 sigmoid, no f64 one)
    out = lower_instrs(head + _sigmoid_then_mod(), native=lambda op, d: d is DType.F64)
    assert "sigmoid" not in [i.op for i in out if isinstance(i, Compute)]


def test_each_renderer_declares_what_it_writes() -> None:
    from fir.backends.cpp.ops import NATIVE_OPS as CPP
    from fir.backends.llvm.render import native
    from fir.backends.triton.ops import NATIVE_OPS as TRITON

    # every lowered op is decomposed for these renderers, except llvm's vectorised f32 sigmoid
    # and their one-instruction maximum and minimum (llvm's: a NaN test, a compare, a select)
    # and shifts (llvm's: the amount's range tested, a shift by an amount in range)
    assert not (set(LOWERINGS) - {"maximum", "minimum", "shl", "shr"}) & (CPP | TRITON)
    assert native("sigmoid", DType.F32) and native("sigmoid", DType.F16)
    assert not native("sigmoid", DType.F64) and not native("floordiv", DType.F32)


# ---------------------------------------------------------------------------------------------
# merges of reduction states (fir.ir.accumulators.merge): lanes, threads, tl.reduce


def _reduce_program(dtype: DType, dim: int) -> str:
    t = dtype.value
    rows, cols = 8, 300
    out = cols if dim == 0 else rows
    w = f"{t}[{out}]"
    welford = (
        f"  %m, %m2, %n = welford %x {{dims = [{dim}]}} : {w}, {w}, {w}\n" if dtype.is_float else ""
    )
    results = "%am, %an, %m, %m2, %n" if dtype.is_float else "%am, %an"
    types = f"i64[{out}], i64[{out}]" + (f", {w}" * 3 if dtype.is_float else "")
    return (
        f"func @f(%x: {t}[{rows}, {cols}]) -> ({types}) {{\n"
        f"  %am = argmax %x {{dim = {dim}}} : i64[{out}]\n"
        f"  %an = argmin %x {{dim = {dim}}} : i64[{out}]\n"
        f"{welford}  return {results}\n}}\n"
    )


def _ties(dtype: DType) -> torch.Tensor:
    g = torch.Generator().manual_seed(7)
    # few distinct values: every row and column has ties for its largest and smallest
    x = torch.randint(-2, 3, (8, 300), generator=g).to(dtype.to_torch())
    if dtype.is_float:
        x[1, 57] = x[1, 203] = math.nan  # two NaNs: the first wins both
        x[2, 250] = math.nan  # late in its row: after the lanes' first block
        x[3, :] = 1e10  # large (welford of an infinity is NaN where torch's mean is inf)
        x[4, 9] = -1e10
        x[:, 100] = math.nan  # a column of NaNs
    else:
        info = torch.iinfo(dtype.to_torch())
        x[1, 57] = x[1, 203] = info.max
        x[2, 250] = info.min
    return x


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("dtype", [DType.F32, DType.F64, DType.I32, DType.U8], ids=str)
def test_argmax_argmin_and_welford_merges(dtype: DType, dim: int, backend: str) -> None:
    # welford's mean and M2 round differently with each merge order: close, not equal
    text = _reduce_program(dtype, dim)
    x = _ties(dtype)
    reference = parse_module(text, "<test>").funcs[0]
    want = run_graph(reference, [x.clone()])
    device = "cuda" if backend == "triton" and GPU else "cpu"
    got = _compile(text, backend)(x.clone().to(device))  # type: ignore[operator]
    # the mean's and M2's rounding error grows with the largest magnitude they sum (a column
    # with 1e10 and -1e10 loses its small values in f32 in any order; each order loses others,
    # and a GPU's merge order is not the interpreter's): a bound of a few ulps of that magnitude
    # per element summed, and none for the indices and the counts
    big = x.abs().nan_to_num(0.0).amax(dim).double() if dtype.is_float else None
    for k, (w, o) in enumerate(zip(want, got)):
        if k < 2 or k == 4 or big is None:
            torch.testing.assert_close(o.cpu(), w, rtol=0, atol=0, equal_nan=True)
            continue
        eps = torch.finfo(x.dtype).eps * x.shape[dim] * 4
        bound = eps * (big if k == 2 else big * big * x.shape[dim]) + 1e-6
        err = (o.cpu().double() - w.double()).abs()
        both_nan = o.cpu().isnan() & w.isnan()
        assert bool(((err <= bound) | both_nan).all()), (k, float((err - bound).max()))
