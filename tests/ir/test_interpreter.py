"""The reference interpreter against eager PyTorch: examples, every op, loop-level semantics."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from fir.ir import ops as fir_ops  # noqa: E402
from fir.ir.errors import InterpreterError  # noqa: E402
from fir.ir.graph import Module  # noqa: E402
from fir.ir.interpreter import run_graph, run_module  # noqa: E402
from fir.ir.parser import parse_file, parse_module  # noqa: E402
from fir.ir.printer import print_module  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

_DT = {
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.float32: "f32",
    torch.float64: "f64",
    torch.int8: "i8",
    torch.int16: "i16",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.uint8: "u8",
    torch.bool: "bool",
}


def ty(t: torch.Tensor) -> str:
    """The FIR type of a tensor: ``f32[2, 3]``."""
    return f"{_DT[t.dtype]}[{', '.join(str(d) for d in t.shape)}]"


def run(src: str, *inputs: torch.Tensor) -> list[torch.Tensor]:
    return run_module(parse_module(textwrap.dedent(src)), list(inputs))


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=gen(seed)).to(dtype)


def one_op(
    op: str, inputs: list[torch.Tensor], operands: str, out: torch.Tensor, attrs: str = ""
) -> str:
    """A one-op tensor-level function whose result type is that of ``out``."""
    args = ", ".join(f"%a{k}: {ty(x)}" for k, x in enumerate(inputs))
    attrs = f" {{{attrs}}}" if attrs else ""
    return (
        f"func @f({args}) -> ({ty(out)}) {{\n"
        f"  %y = {op} {operands}{attrs} : {ty(out)}\n"
        f"  return %y\n}}\n"
    )


def all_args(n: int) -> str:
    return ", ".join(f"%a{k}" for k in range(n))


# ---------------------------------------------------------------------------------------------
# examples


def _ex_rms_norm():
    x, w = randn(32, 64, seed=1), randn(64, seed=2)
    ref = x * torch.rsqrt((x * x).mean(1, keepdim=True) + 1e-6) * w
    return [x, w], [ref]


def _ex_softmax():
    x = randn(32, 64, seed=3) * 4
    return [x], [torch.softmax(x, 1)]


def _ex_layer_norm():
    x, w, b = randn(32, 64, seed=4) * 3 + 1, randn(64, seed=5), randn(64, seed=6)
    return [x, w, b], [F.layer_norm(x, (64,), w, b, 1e-5)]


def _ex_cross_entropy():
    logits = randn(32, 10, seed=7) * 2
    target = torch.randint(0, 10, (32,), generator=gen(8))
    ref = F.cross_entropy(logits, target)
    return [logits, target], [ref, ref]


def _ex_gelu_mlp():
    x = randn(32, 64, seed=9)
    w1, b1 = randn(128, 64, seed=10) / 8, randn(128, seed=11)
    w2, b2 = randn(64, 128, seed=12) / 11, randn(64, seed=13)
    g = randn(64, seed=14)
    h = x @ w1.T + b1
    a = 0.5 * h * (1 + torch.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h**3)))
    r = a @ w2.T + b2 + x
    return [x, w1, b1, w2, b2, g], [F.layer_norm(r, (64,), g, None, 1e-5)]


def _ex_loop_level():
    ids = torch.randint(0, 100, (32,), generator=gen(15))
    table, x = randn(100, 64, seed=16), randn(32, 64, seed=17)
    emb = table[ids] + x
    ss = (emb * emb).sum(1)
    out = F.pad(emb, (2, 2)) * torch.rsqrt(ss / 64 + 1e-6)[:, None]
    return [ids, table, x], [emb, ss, out]


EXAMPLE_CASES = {
    "rms_norm": _ex_rms_norm,
    "softmax": _ex_softmax,
    "layer_norm": _ex_layer_norm,
    "cross_entropy": _ex_cross_entropy,
    "gelu_mlp": _ex_gelu_mlp,
    "loop_level": _ex_loop_level,
}


def test_every_example_has_a_reference():
    assert sorted(p.stem for p in EXAMPLES.glob("*.fir")) == sorted(EXAMPLE_CASES)


@pytest.mark.parametrize("name", sorted(EXAMPLE_CASES))
def test_example_prints_canonically(name):
    path = EXAMPLES / f"{name}.fir"
    assert print_module(parse_file(path)) == path.read_text()


@pytest.mark.parametrize("name", sorted(EXAMPLE_CASES))
def test_example_verifies(name):
    from fir.ir.verifier import verify_module

    verify_module(parse_file(EXAMPLES / f"{name}.fir"))


@pytest.mark.parametrize("name", sorted(EXAMPLE_CASES))
def test_example_matches_eager(name):
    inputs, refs = EXAMPLE_CASES[name]()
    outs = run_module(parse_file(EXAMPLES / f"{name}.fir"), inputs)
    assert len(outs) == len(refs)
    for out, ref in zip(outs, refs):
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


def test_loop_level_example_has_every_feature():
    g = parse_file(EXAMPLES / "loop_level.fir").funcs[0]
    opcodes = {op.opcode for n in g.nodes for op in n.body.ops}
    assert {"indirect", "load"} <= opcodes
    assert any(n.reduction for n in g.nodes) and any(n.reduction is None for n in g.nodes)
    assert any(op.mask is not None for n in g.nodes for op in n.body.ops)


# ---------------------------------------------------------------------------------------------
# elementwise ops, at tensor level and in loop bodies (one shared table)

_POS = torch.linspace(0.1, 0.9, 16)
_MIXED = torch.tensor(
    [-2.5, -1.5, -0.5, -0.0, 0.0, 0.5, 1.5, 2.5, 3.7, -3.7, 1.0, -1.0, 7.2, -0.2, 0.3, 2.0]
)
_INTS = torch.tensor([-7, -6, -5, -1, 0, 1, 2, 3, 5, 6, 7, 9, -9, 11, -13, 100], dtype=torch.int32)
_DIVISORS = torch.tensor([2, -2, 3, -3, 5, 1, -1, 4, 7, -7, 3, 2, 5, -4, 6, 9], dtype=torch.int32)

UNARY_REF = {
    "rsqrt": lambda x: 1 / torch.sqrt(x),
    "sigmoid": lambda x: 1 / (1 + torch.exp(-x)),
    "reciprocal": lambda x: 1 / x,
    "exp2": lambda x: 2.0**x,
    "square": lambda x: x * x,
    "relu": lambda x: torch.where(x > 0, x, torch.zeros_like(x)),
    "neg": lambda x: -x,
}


def _unary_input(op: str, dtype: torch.dtype) -> torch.Tensor:
    if dtype == torch.int32:
        return _INTS.clone()
    if op in fir_ops.UNARY_FLOAT:
        return _POS + 1 if op == "acosh" else _POS.clone()
    return _MIXED.clone()


def _unary_ref(op: str, x: torch.Tensor) -> torch.Tensor:
    return UNARY_REF.get(op, getattr(torch, op))(x)


UNARY_CASES = [(op, torch.float32) for op in fir_ops.UNARY_FLOAT + fir_ops.UNARY_NUMERIC] + [
    (op, torch.int32) for op in fir_ops.UNARY_NUMERIC
]


def _loop_program(op: str, inputs: list[torch.Tensor], out: torch.Tensor) -> str:
    n = out.numel()
    args = ", ".join(f"%a{k}: {ty(x)}" for k, x in enumerate(inputs))
    loads = "\n".join(f"    %{k} = load %a{k}[i0]" for k in range(len(inputs)))
    operands = ", ".join(f"%{k}" for k in range(len(inputs)))
    r = len(inputs)
    return (
        f"func @f({args}) -> ({ty(out)}) {{\n"
        f"  %y = pointwise : {ty(out)} over (i0 < {n}) {{\n{loads}\n"
        f"    %{r} = {op} {operands}\n    yield %{r}\n  }}\n"
        f"  return %y\n}}\n"
    )


def _check_both_levels(
    op: str, inputs: list[torch.Tensor], ref: torch.Tensor, exact: bool = False
) -> None:
    tol = {"rtol": 0, "atol": 0} if exact else {}
    (t,) = run(one_op(op, inputs, all_args(len(inputs)), ref), *inputs)
    torch.testing.assert_close(t, ref, equal_nan=True, **tol)
    (loop,) = run(_loop_program(op, inputs, ref), *inputs)
    torch.testing.assert_close(loop, ref, equal_nan=True, **tol)


@pytest.mark.parametrize("op,dtype", UNARY_CASES, ids=lambda v: str(v).removeprefix("torch."))
def test_unary(op, dtype):
    x = _unary_input(op, dtype)
    _check_both_levels(op, [x], _unary_ref(op, x))


def test_round_is_half_to_even():
    x = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, 0.49])
    (y,) = run(one_op("round", [x], "%a0", x), x)
    assert y.tolist() == [0.0, 2.0, 2.0, -0.0, -2.0, 0.0]


@pytest.mark.parametrize("op", fir_ops.UNARY_TO_BOOL_FLOAT)
def test_float_predicates(op):
    x = torch.tensor([1.0, -0.0, 0.0, float("nan"), float("inf"), -float("inf"), -2.0, 3.0])
    _check_both_levels(op, [x], getattr(torch, op)(x), exact=True)


def test_logical_and_bitwise_not():
    b = torch.tensor([True, False, True, False])
    _check_both_levels("logical_not", [b], ~b, exact=True)
    _check_both_levels("bitwise_not", [_INTS], ~_INTS, exact=True)
    _check_both_levels("bitwise_not", [b], ~b, exact=True)


def _py(fn, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.tensor([fn(x, y) for x, y in zip(a.tolist(), b.tolist())], dtype=a.dtype)


BINARY_CASES = [
    ("add", torch.float32, lambda a, b: a + b),
    ("sub", torch.float32, lambda a, b: a - b),
    ("mul", torch.float32, lambda a, b: a * b),
    ("maximum", torch.float32, torch.maximum),
    ("minimum", torch.float32, torch.minimum),
    ("floordiv", torch.float32, lambda a, b: torch.floor(a / b)),
    ("mod", torch.float32, lambda a, b: a - torch.floor(a / b) * b),
    ("add", torch.int32, lambda a, b: a + b),
    ("sub", torch.int32, lambda a, b: a - b),
    ("mul", torch.int32, lambda a, b: a * b),
    ("maximum", torch.int32, torch.maximum),
    ("minimum", torch.int32, torch.minimum),
    ("floordiv", torch.int32, lambda a, b: _py(lambda x, y: x // y, a, b)),  # Python semantics
    ("mod", torch.int32, lambda a, b: _py(lambda x, y: x % y, a, b)),
    ("div", torch.float32, lambda a, b: a / b),
    ("pow", torch.float32, lambda a, b: torch.exp(b * torch.log(a))),
    ("atan2", torch.float32, torch.atan2),
    ("hypot", torch.float32, lambda a, b: torch.sqrt(a * a + b * b)),
    ("fmod", torch.float32, lambda a, b: _py(math.fmod, a, b)),
    ("copysign", torch.float32, torch.copysign),
    ("bitwise_and", torch.int32, lambda a, b: a & b),
    ("bitwise_or", torch.int32, lambda a, b: a | b),
    ("bitwise_xor", torch.int32, lambda a, b: a ^ b),
    ("shl", torch.int32, lambda a, b: _py(lambda x, y: x << y, a, b)),
    ("shr", torch.int32, lambda a, b: _py(lambda x, y: x >> y, a, b)),
]


def _binary_inputs(op: str, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    if dtype == torch.int32:
        if op in ("shl", "shr"):
            return _INTS.clone(), torch.arange(16, dtype=torch.int32) % 6
        return _INTS.clone(), _DIVISORS.clone()
    if op == "pow":
        return _POS * 3, _MIXED.clone()
    return _MIXED.clone() * 1.3, torch.tensor(
        [2.0, -2.0, 0.75, -0.75, 1.5, 3.0, -3.0, 0.4, 2.5, 1.1, -1.1, 5.0, -0.6, 0.9, -2.2, 1.0]
    )


@pytest.mark.parametrize("op,dtype,ref", BINARY_CASES, ids=lambda v: str(v).removeprefix("torch."))
def test_binary(op, dtype, ref):
    a, b = _binary_inputs(op, dtype)
    _check_both_levels(op, [a, b], ref(a, b), exact=dtype == torch.int32)


@pytest.mark.parametrize("op", fir_ops.BINARY_LOGICAL)
def test_logical(op):
    a = torch.tensor([True, True, False, False])
    b = torch.tensor([True, False, True, False])
    ref = {"logical_and": a & b, "logical_or": a | b, "logical_xor": a ^ b}[op]
    _check_both_levels(op, [a, b], ref, exact=True)


@pytest.mark.parametrize("op", fir_ops.COMPARE)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_compare(op, dtype):
    a = torch.tensor([1, 2, 3, 4, 5, 6]).to(dtype)
    b = torch.tensor([1, 3, 2, 4, 6, 5]).to(dtype)
    ref = {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b}[op]
    _check_both_levels(op, [a, b], ref, exact=True)


def test_where():
    c = torch.tensor([True, False, True, False])
    a, b = torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([-1.0, -2.0, -3.0, -4.0])
    _check_both_levels("where", [c, a, b], torch.where(c, a, b), exact=True)


def test_every_elementwise_op_is_tested():
    tested = {op for op, _ in UNARY_CASES} | {op for op, _, _ in BINARY_CASES}
    tested |= set(fir_ops.UNARY_TO_BOOL_FLOAT + fir_ops.BINARY_LOGICAL + fir_ops.COMPARE)
    tested |= {"where", "logical_not", "bitwise_not", "cast"}
    assert set(fir_ops.scalar_ops()) <= tested


def test_literal_operands_take_the_tensor_dtype():
    x = torch.arange(6, dtype=torch.int32)
    src = """
    func @f(%x: i32[6], %y: f16[6]) -> (i32[6], f16[6], bool[6], f16[6]) {
      %a = mul %x, 3 : i32[6]
      %b = add %y, 0.1 : f16[6]
      %c = lt 2, %x : bool[6]
      %d = where %c, %y, -1.0 : f16[6]
      return %a, %b, %c, %d
    }
    """
    y = torch.linspace(-1, 1, 6).half()
    a, b, c, d = run(src, x, y)
    assert a.dtype == torch.int32 and b.dtype == torch.float16 and d.dtype == torch.float16
    assert torch.equal(a, x * 3)
    assert torch.equal(b, y + 0.1)
    assert torch.equal(c, x > 2)
    assert torch.equal(d, torch.where(x > 2, y, -1.0))


def test_integer_division_by_zero_is_an_error():
    a = torch.tensor([1, 2], dtype=torch.int32)
    b = torch.tensor([1, 0], dtype=torch.int32)
    with pytest.raises(InterpreterError, match="division by zero"):
        run(one_op("floordiv", [a, b], "%a0, %a1", a), a, b)
    with pytest.raises(InterpreterError, match="division by zero"):
        run(_loop_program("mod", [a, b], a), a, b)


def test_cast():
    x = torch.tensor([-1.7, -0.2, 0.0, 0.6, 2.9])
    for dtype in (torch.int32, torch.bool, torch.float16):
        ref = x.to(dtype)
        src = f"""
        func @f(%x: f32[5]) -> ({ty(ref)}, {ty(ref)}) {{
          %a = cast %x : {ty(ref)}
          %b = pointwise : {ty(ref)} over (i0 < 5) {{
            %0 = load %x[i0]
            %1 = cast %0 : {_DT[dtype]}
            yield %1
          }}
          return %a, %b
        }}
        """
        a, b = run(src, x)
        assert torch.equal(a, ref) and torch.equal(b, ref)


# ---------------------------------------------------------------------------------------------
# reduced precision: computed in the IR dtype, like eager


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_reduced_precision_matches_eager_bitwise(dtype):
    x = randn(8, 16, seed=20, dtype=dtype)
    dt = _DT[dtype]
    src = f"""
    func @f(%x: {dt}[8, 16]) -> ({dt}[8, 16], {dt}[8], {dt}[8, 16]) {{
      %a = mul %x, 1.7 : {dt}[8, 16]
      %b = exp %a : {dt}[8, 16]
      %s = reduction sum : {dt}[8] over (i0 < 8; r0 < 16) {{
        %0 = load %x[16*i0 + r0]
        %1 = mul %0, %0
        yield %1
      }}
      %p = pointwise : {dt}[8, 16] over (i0 < 8, i1 < 16) {{
        %0 = load %x[16*i0 + i1]
        %1 = mul %0, 1.7
        %2 = exp %1
        yield %2
      }}
      return %b, %s, %p
    }}
    """
    b, s, p = run(src, x)
    assert b.dtype == s.dtype == p.dtype == dtype
    torch.testing.assert_close(b, torch.exp(x * 1.7), rtol=0, atol=0)
    torch.testing.assert_close(p, torch.exp(x * 1.7), rtol=0, atol=0)
    torch.testing.assert_close(s, (x * x).sum(1), rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------
# tensor-level reductions, views, composites


X3 = randn(3, 4, 5, seed=30)
B3 = X3 > 0.3

REDUCTION_CASES = [
    ("sum", X3, "dims = [0, 2]", lambda x: x.sum((0, 2))),
    ("sum", X3, "dims = []", lambda x: x),
    ("sum", X3.to(torch.int32), "dims = [1]", lambda x: x.sum(1, dtype=torch.int32)),
    (
        "prod",
        X3,
        "dims = [1, 2], keepdim = true",
        lambda x: x.prod(2, keepdim=True).prod(1, keepdim=True),
    ),
    ("max", X3, "dims = [-1], keepdim = true", lambda x: x.amax(-1, keepdim=True)),
    ("min", X3, "", lambda x: x.amin()),
    ("any", B3, "dims = [1]", lambda x: x.any(1)),
    ("all", B3, "dims = [0, 1]", lambda x: x.all(1).all(0)),
    ("mean", X3, "dims = [0, 2]", lambda x: x.mean((0, 2))),
    ("logsumexp", X3, "dims = [1]", lambda x: torch.log(torch.exp(x).sum(1))),
    (
        "var",
        X3,
        "dims = [1], correction = 0",
        lambda x: ((x - x.mean(1, keepdim=True)) ** 2).mean(1),
    ),
    ("std", X3, "dims = [1, 2]", lambda x: x.std((1, 2))),
    ("argmax", X3, "dim = 1", lambda x: x.argmax(1)),
    ("argmin", X3, "", lambda x: x.argmin()),
    ("argmax", X3, "dim = 2, keepdim = true", lambda x: x.argmax(2, keepdim=True)),
]


@pytest.mark.parametrize(
    "op,x,attrs,ref", REDUCTION_CASES, ids=lambda v: v if isinstance(v, str) else ""
)
def test_tensor_reduction(op, x, attrs, ref):
    expected = ref(x)
    (y,) = run(one_op(op, [x], "%a0", expected, attrs), x)
    torch.testing.assert_close(y, expected)


def test_var_mean_has_two_results():
    x = X3
    v, m = torch.var_mean(x, 2, keepdim=True)
    src = f"""
    func @f(%x: {ty(x)}) -> ({ty(v)}, {ty(m)}) {{
      %v, %m = var_mean %x {{dims = [2], keepdim = true}} : {ty(v)}, {ty(m)}
      return %v, %m
    }}
    """
    got_v, got_m = run(src, x)
    torch.testing.assert_close(got_v, v)
    torch.testing.assert_close(got_m, m)


X34 = randn(3, 1, 4, seed=31)
M46 = randn(4, 6, seed=32)

VIEW_CASES = [
    ("permute", [X3], "dims = [2, 0, 1]", lambda x: x.permute(2, 0, 1)),
    ("transpose", [X3], "dim0 = 0, dim1 = -1", lambda x: x.transpose(0, 2)),
    ("slice", [X3], "dim = 2, start = 1, end = 5, step = 2", lambda x: x[:, :, 1:5:2]),
    ("slice", [X3], "dim = 1, start = -3", lambda x: x[:, -3:]),
    ("select", [X3], "dim = 1, index = -1", lambda x: x[:, -1]),
    ("squeeze", [X34], "dims = [1]", lambda x: x.squeeze(1)),
    ("squeeze", [X34], "", lambda x: x.squeeze()),
    ("unsqueeze", [X3], "dim = 0", lambda x: x.unsqueeze(0)),
    ("unsqueeze", [X3], "dim = -1", lambda x: x.unsqueeze(-1)),
    ("expand", [X34], "", lambda x: x.expand(2, 3, 5, 4)),
    ("reshape", [X3], "", lambda x: x.reshape(12, 5)),
    (
        "as_strided",
        [M46],
        "strides = [6, 2], offset = 1",
        lambda x: x.as_strided((3, 3), (6, 2), 1),
    ),
    ("cat", [X3, X3 * 2], "dim = 1", lambda x, y: torch.cat([x, y], 1)),
    ("pad", [X3], "pad = [1, 2, 0, 1], value = -1.0", lambda x: F.pad(x, (1, 2, 0, 1), value=-1.0)),
    ("pad", [X3], "pad = [-1, 1]", lambda x: F.pad(x, (-1, 1))),
]


@pytest.mark.parametrize(
    "op,inputs,attrs,ref", VIEW_CASES, ids=lambda v: v if isinstance(v, str) else ""
)
def test_view_ops(op, inputs, attrs, ref):
    expected = ref(*inputs)
    (y,) = run(one_op(op, inputs, all_args(len(inputs)), expected, attrs), *inputs)
    torch.testing.assert_close(y, expected, rtol=0, atol=0)


def test_as_strided_out_of_storage_is_an_error():
    x = M46
    out = torch.zeros(3, 3)
    with pytest.raises(InterpreterError, match="out of bounds"):
        run(one_op("as_strided", [x], "%a0", out, "strides = [9, 3], offset = 1"), x)


_N = randn(6, 8, seed=40)
_W8, _B8 = randn(8, seed=41), randn(8, seed=42)
_C = randn(4, 3, 5, seed=43)
_W3, _B3 = randn(3, seed=44), randn(3, seed=45)
_RM, _RV = randn(3, seed=46), torch.rand(3, generator=gen(47)) + 0.5
_G = randn(2, 4, 3, seed=48)
_W4, _B4 = randn(4, seed=49), randn(4, seed=50)
_LOGITS = randn(6, 5, seed=51)
_TARGET = torch.tensor([0, 4, 1, 2, 1, 3])
_CW = torch.rand(5, generator=gen(52)) + 0.5
_TABLE = randn(10, 4, seed=53)
_IDS = torch.tensor([[1, 9], [0, 3], [3, 3]])
_A, _Bm = randn(2, 3, 4, seed=54), randn(4, 5, seed=55)
_MASK = _N > 0.5


def _rms(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def _gelu(x):
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


COMPOSITE_CASES = [
    ("softmax", [_N], "%a0", "dim = 1", lambda: torch.exp(_N) / torch.exp(_N).sum(1, keepdim=True)),
    (
        "log_softmax",
        [_N],
        "%a0",
        "dim = -1",
        lambda: _N - torch.log(torch.exp(_N).sum(1, keepdim=True)),
    ),
    (
        "layer_norm",
        [_N],
        "%a0, none, none",
        "normalized_shape = [8]",
        lambda: (
            (_N - _N.mean(1, keepdim=True))
            / torch.sqrt(_N.var(1, correction=0, keepdim=True) + 1e-5)
        ),
    ),
    (
        "layer_norm",
        [_N, _W8, _B8],
        "%a0, %a1, %a2",
        "normalized_shape = [8], eps = 0.001",
        lambda: F.layer_norm(_N, (8,), _W8, _B8, 1e-3),
    ),
    (
        "rms_norm",
        [_N, _W8],
        "%a0, %a1",
        "normalized_shape = [8]",
        lambda: _rms(_N, _W8, torch.finfo(torch.float32).eps),
    ),
    (
        "rms_norm",
        [_N],
        "%a0, none",
        "normalized_shape = [8], eps = 0.1",
        lambda: _rms(_N, 1.0, 0.1),
    ),
    (
        "batch_norm",
        [_C, _W3, _B3, _RM, _RV],
        "%a0, %a1, %a2, %a3, %a4",
        "eps = 1e-05",
        lambda: (_C - _RM[:, None]) / torch.sqrt(_RV[:, None] + 1e-5) * _W3[:, None] + _B3[:, None],
    ),
    (
        "group_norm",
        [_G, _W4, _B4],
        "%a0, %a1, %a2",
        "num_groups = 2",
        lambda: F.group_norm(_G, 2, _W4, _B4, 1e-5),
    ),
    ("gelu", [_N], "%a0", "", lambda: _gelu(_N)),
    (
        "gelu",
        [_N],
        "%a0",
        'approximate = "tanh"',
        lambda: 0.5 * _N * (1 + torch.tanh(math.sqrt(2 / math.pi) * (_N + 0.044715 * _N**3))),
    ),
    ("silu", [_N], "%a0", "", lambda: _N * torch.sigmoid(_N)),
    ("mish", [_N], "%a0", "", lambda: _N * torch.tanh(torch.log1p(torch.exp(_N)))),
    (
        "softplus",
        [_N],
        "%a0",
        "beta = 2.0, threshold = 1.0",
        lambda: torch.where(2 * _N > 1, _N, torch.log1p(torch.exp(2 * _N)) / 2),
    ),
    ("hardswish", [_N * 4], "%a0", "", lambda: _N * 4 * torch.clamp(_N * 4 + 3, 0, 6) / 6),
    ("hardsigmoid", [_N * 4], "%a0", "", lambda: torch.clamp(_N * 4 + 3, 0, 6) / 6),
    ("leaky_relu", [_N], "%a0", "negative_slope = 0.2", lambda: torch.where(_N > 0, _N, 0.2 * _N)),
    ("elu", [_N], "%a0", "alpha = 0.5", lambda: torch.where(_N > 0, _N, 0.5 * torch.expm1(_N))),
    ("hardtanh", [_N], "%a0", "min_val = -0.5, max_val = 0.5", lambda: _N.clamp(-0.5, 0.5)),
    ("dropout", [_N], "%a0", "p = 0.3", lambda: _N),
    ("clamp", [_N], "%a0", "min = -0.25", lambda: torch.maximum(_N, torch.tensor(-0.25))),
    (
        "cross_entropy",
        [_LOGITS, _TARGET],
        "%a0, %a1",
        'ignore_index = 1, label_smoothing = 0.1, reduction = "sum"',
        lambda: F.cross_entropy(
            _LOGITS, _TARGET, ignore_index=1, label_smoothing=0.1, reduction="sum"
        ),
    ),
    (
        "cross_entropy",
        [_LOGITS, _TARGET, _CW],
        "%a0, %a1, %a2",
        'reduction = "none"',
        lambda: -torch.log_softmax(_LOGITS, 1)[torch.arange(6), _TARGET] * _CW[_TARGET],
    ),
    (
        "nll_loss",
        [_LOGITS, _TARGET, _CW],
        "%a0, %a1, %a2",
        "",
        lambda: -(_LOGITS[torch.arange(6), _TARGET] * _CW[_TARGET]).sum() / _CW[_TARGET].sum(),
    ),
    ("embedding", [_TABLE, _IDS], "%a0, %a1", "", lambda: _TABLE[_IDS]),
    (
        "gather",
        [_N, torch.tensor([[7, 0], [1, 1], [2, 3], [0, 0], [5, 6], [4, 4]])],
        "%a0, %a1",
        "dim = 1",
        lambda: torch.stack(
            [
                _N[0, [7, 0]],
                _N[1, [1, 1]],
                _N[2, [2, 3]],
                _N[3, [0, 0]],
                _N[4, [5, 6]],
                _N[5, [4, 4]],
            ]
        ),
    ),
    ("index_select", [_N, torch.tensor([5, 0, 5])], "%a0, %a1", "dim = 0", lambda: _N[[5, 0, 5]]),
    ("matmul", [_A, _Bm], "%a0, %a1", "", lambda: torch.einsum("bik,kj->bij", _A, _Bm)),
    (
        "addmm",
        [_B8, _N.T.contiguous(), _N],
        "%a0, %a1, %a2",
        "beta = 0.5, alpha = 2.0",
        lambda: 0.5 * _B8 + 2.0 * (_N.T @ _N),
    ),
    ("linear", [_N, randn(3, 8, seed=56)], "%a0, %a1", "", lambda: _N @ randn(3, 8, seed=56).T),
    (
        "linear",
        [_N, randn(3, 8, seed=56), randn(3, seed=57)],
        "%a0, %a1, %a2",
        "",
        lambda: _N @ randn(3, 8, seed=56).T + randn(3, seed=57),
    ),
    ("masked_fill", [_N, _MASK], "%a0, %a1, -1.0", "", lambda: torch.where(_MASK, -1.0, _N)),
]


@pytest.mark.parametrize(
    "op,inputs,operands,attrs,ref",
    COMPOSITE_CASES,
    ids=lambda v: v if isinstance(v, str) and v.isidentifier() else "",
)
def test_composite_ops(op, inputs, operands, attrs, ref):
    expected = ref()
    (y,) = run(one_op(op, inputs, operands, expected, attrs), *inputs)
    torch.testing.assert_close(y, expected, rtol=1e-5, atol=1e-5)


def test_index_out_of_range_in_tensor_ops_is_an_error():
    bad = torch.tensor([[1, 10]])
    with pytest.raises(InterpreterError, match="out of bounds"):
        run(one_op("embedding", [_TABLE, bad], "%a0, %a1", torch.zeros(1, 2, 4)), _TABLE, bad)
    t = torch.tensor([0, 5, 1, 2, 1, 3])
    with pytest.raises(InterpreterError, match="out of bounds"):
        run(one_op("cross_entropy", [_LOGITS, t], "%a0, %a1", torch.tensor(0.0)), _LOGITS, t)


def test_creation_ops():
    src = """
    func @f() -> (f32[2, 3], i64[3], f32[4], f32[2, 2], bool[2]) {
      %a = full 2.5 : f32[2, 3]
      %b = arange {start = 2, end = 11, step = 3} : i64[3]
      %c = arange {end = 2.0, step = 0.5} : f32[4]
      %d = constant {value = [[1, 2], [3.5, -4]]} : f32[2, 2]
      %e = constant {value = [true, false]} : bool[2]
      return %a, %b, %c, %d, %e
    }
    """
    a, b, c, d, e = run(src)
    assert torch.equal(a, torch.full((2, 3), 2.5))
    assert torch.equal(b, torch.tensor([2, 5, 8]))
    assert torch.equal(c, torch.tensor([0.0, 0.5, 1.0, 1.5]))
    assert torch.equal(d, torch.tensor([[1.0, 2.0], [3.5, -4.0]]))
    assert torch.equal(e, torch.tensor([True, False]))


def test_extern_calls():
    a, b = randn(4, 3, seed=60), randn(3, 5, seed=61)
    src = """
    func @f(%a: f32[4, 3], %b: f32[3, 5]) -> (f32[4, 5], f32[4, 5], f64[4]) {
      %m = extern "aten.mm.default"(%a, %b) : f32[4, 5]
      %s = extern "aten._softmax.default"(%m, 1, false) : f32[4, 5]
      %t = extern "aten.sum.dim_IntList"(%a, [1], false, dtype = f64) : f64[4]
      return %m, %s, %t
    }
    """
    m, s, t = run(src, a, b)
    torch.testing.assert_close(m, a @ b)
    torch.testing.assert_close(s, torch.softmax(a @ b, 1))
    torch.testing.assert_close(t, a.double().sum(1))
    with pytest.raises(InterpreterError, match="unknown extern"):
        run(
            'func @f(%a: f32[2]) -> (f32[2]) {\n  %y = extern "aten.no_such_op.default"(%a) : f32[2]\n  return %y\n}\n',
            a[0, :2],
        )


def test_wrong_result_type_is_an_error():
    x = randn(3, 4)
    with pytest.raises(InterpreterError, match="shape"):
        run(one_op("sum", [x], "%a0", torch.zeros(4), "dims = [1]"), x)


# ---------------------------------------------------------------------------------------------
# loop level

X_RED = randn(6, 20, seed=70)


def _welford_ref(x):
    mean = x.mean(1)
    return [mean, ((x - mean[:, None]) ** 2).sum(1), torch.full((6,), 20.0)]


LOOP_REDUCTIONS = [
    ("sum", "f32[6]", "", lambda x: [x.sum(1)]),
    ("prod", "f32[6]", "", lambda x: [x.prod(1)]),
    ("max", "f32[6]", "", lambda x: [x.amax(1)]),
    ("min", "f32[6]", "", lambda x: [x.amin(1)]),
    ("argmax", "i64[6]", "", lambda x: [x.argmax(1)]),
    ("argmin", "i64[6]", "", lambda x: [x.argmin(1)]),
    ("any", "bool[6]", "gt", lambda x: [(x > 1.2).any(1)]),
    ("welford", "f32[6], f32[6], f32[6]", "", _welford_ref),
]


@pytest.mark.parametrize(
    "kind,types,pred,ref", LOOP_REDUCTIONS, ids=lambda v: v if isinstance(v, str) else ""
)
def test_loop_reduction(kind, types, pred, ref):
    x = X_RED * 0.3 + 1 if kind == "prod" else X_RED
    results = "%m, %m2, %c" if kind == "welford" else "%y"
    body = "%1 = gt %0, 1.2\n        yield %1" if pred else "yield %0"
    src = f"""
    func @f(%x: f32[6, 20]) -> ({types}) {{
      {results} = reduction {kind} : {types} over (i0 < 6; r0 < 4, r1 < 5) {{
        %0 = load %x[20*i0 + 5*r0 + r1]
        {body}
      }}
      return {results}
    }}
    """
    outs = run(src, x)
    expected = ref(x)
    assert len(outs) == len(expected)
    for got, want in zip(outs, expected):
        torch.testing.assert_close(got, want)


def test_reduction_with_pointwise_ranges_of_rank_two():
    x = randn(3, 4, 5, seed=71)
    src = """
    func @f(%x: f32[3, 4, 5]) -> (f32[3, 5]) {
      %y = reduction max : f32[3, 5] over (i0 < 3, i1 < 5; r0 < 4) {
        %0 = load %x[20*i0 + 5*r0 + i1]
        yield %0
      }
      return %y
    }
    """
    (y,) = run(src, x)
    torch.testing.assert_close(y, x.amax(1))


def test_index_expressions_with_floordiv_mod_min_max():
    x = randn(4, 6, seed=72)
    src = """
    func @f(%x: f32[4, 6]) -> (f32[24], f32[8]) {
      %t = pointwise : f32[24] over (i0 < 24) {
        %0 = load %x[6*mod(i0, 4) + floordiv(i0, 4)]
        yield %0
      }
      %c = pointwise : f32[8] over (i0 < 8) {
        %0 = load %x[max(i0 - 2, 0) + min(i0, 5)]
        yield %0
      }
      return %t, %c
    }
    """
    t, c = run(src, x)
    assert torch.equal(t, x.T.reshape(24))
    flat = x.reshape(-1)
    assert torch.equal(c, torch.stack([flat[max(i - 2, 0) + min(i, 5)] for i in range(8)]))


def test_index_op_and_constant():
    src = """
    func @f() -> (f32[3, 4]) {
      %y = pointwise : f32[3, 4] over (i0 < 3, i1 < 4) {
        %0 = index 4*i0 + i1 : f32
        %1 = constant 0.5 : f32
        %2 = mul %0, %1
        yield %2
      }
      return %y
    }
    """
    (y,) = run(src)
    assert torch.equal(y, torch.arange(12.0).reshape(3, 4) * 0.5)


def test_strided_argument():
    y = randn(4, 6, seed=73)
    z = randn(3, 4, seed=74)
    src = """
    func @f(%y: f32[4, 6] strided [1, 4], %z: f32[3, 4] strided [8, 2] offset 5) -> (f32[4, 6], f32[3, 4], f32[3, 4]) {
      %a = pointwise : f32[4, 6] over (i0 < 4, i1 < 6) {
        %0 = load %y[i0 + 4*i1]
        yield %0
      }
      %b = pointwise : f32[3, 4] over (i0 < 3, i1 < 4) {
        %0 = load %z[8*i0 + 2*i1 + 5]
        yield %0
      }
      %c = mul %z, 2.0 : f32[3, 4]
      return %a, %b, %c
    }
    """
    a, b, c = run(src, y, z)
    assert torch.equal(a, y) and torch.equal(b, z) and torch.equal(c, z * 2)


def test_strided_node_result_is_placed_through_its_layout():
    x = randn(4, 6, seed=75)
    src = """
    func @f(%x: f32[4, 6]) -> (f32[4, 6] strided [1, 4], f32[24]) {
      %t = pointwise : f32[4, 6] strided [1, 4] over (i0 < 4, i1 < 6) {
        %0 = load %x[6*i0 + i1]
        yield %0
      }
      %f = pointwise : f32[24] over (i0 < 24) {
        %0 = load %t[i0]
        yield %0
      }
      return %t, %f
    }
    """
    t, f = run(src, x)
    assert torch.equal(t, x)
    assert torch.equal(f, x.T.reshape(24))  # column-major storage


def test_tensor_level_result_read_by_a_loop_node():
    x = randn(4, 6, seed=76)
    src = """
    func @f(%x: f32[4, 6]) -> (f32[6, 4]) {
      %t = transpose %x {dim0 = 0, dim1 = 1} : f32[6, 4]
      %y = pointwise : f32[6, 4] over (i0 < 6, i1 < 4) {
        %0 = load %t[4*i0 + i1]
        %1 = add %0, 1.0
        yield %1
      }
      return %y
    }
    """
    (y,) = run(src, x)
    assert torch.equal(y, x.T + 1)


SYMBOLIC = """
func @f(%x: f32[s0, 8], %z: f32[2*s0]) -> (f32[s0], f32[s0, 8], f32[s0], f32[2*s0]) {
  %s = reduction sum : f32[s0] over (i0 < s0; r0 < 8) {
    %0 = load %x[8*i0 + r0]
    yield %0
  }
  %n = pointwise : f32[s0, 8] over (i0 < s0, i1 < 8) {
    %0 = load %x[8*i0 + i1]
    %1 = load %s[i0]
    %2 = div %0, %1
    yield %2
  }
  %t = sum %x {dims = [1]} : f32[s0]
  %r = pointwise : f32[2*s0] over (i0 < 2*s0) {
    %0 = load %z[2*s0 - i0 - 1]
    yield %0
  }
  return %s, %n, %t, %r
}
"""


@pytest.mark.parametrize("n", [3, 5])
def test_symbolic_sizes(n):
    x, z = randn(n, 8, seed=77) + 3, randn(2 * n, seed=78)
    s, nrm, t, r = run(SYMBOLIC, x, z)
    torch.testing.assert_close(s, x.sum(1))
    torch.testing.assert_close(nrm, x / x.sum(1, keepdim=True))
    torch.testing.assert_close(t, x.sum(1))
    assert torch.equal(r, z.flip(0))


def test_symbolic_size_mismatch_is_an_error():
    with pytest.raises(InterpreterError, match="shape"):
        run(SYMBOLIC, randn(3, 8), randn(7))


def test_masked_loads_pad_and_cat():
    a, b = randn(4, 6, seed=79), randn(4, 4, seed=80)
    src = """
    func @f(%a: f32[4, 6], %b: f32[4, 4]) -> (f32[4, 10], f32[4, 9]) {
      %c = pointwise : f32[4, 10] over (i0 < 4, i1 < 10) {
        %0 = index i1 : i64
        %1 = lt %0, 6
        %2 = load %a[6*i0 + i1] if %1 else 0.0
        %3 = ge %0, 6
        %4 = load %b[4*i0 + i1 - 6] if %3 else 0.0
        %5 = where %1, %2, %4
        yield %5
      }
      %p = pointwise : f32[4, 9] over (i0 < 4, i1 < 9) {
        %0 = index i1 - 1 : i64
        %1 = ge %0, 0
        %2 = lt %0, 6
        %3 = logical_and %1, %2
        %4 = load %a[6*i0 + i1 - 1] if %3 else -inf
        yield %4
      }
      return %c, %p
    }
    """
    c, p = run(src, a, b)
    assert torch.equal(c, torch.cat([a, b], 1))
    assert torch.equal(p, F.pad(a, (1, 2), value=-math.inf))


EMBED = """
func @f(%ids: i64[4], %w: f32[10, 3]) -> (f32[4, 3]) {
  %y = pointwise : f32[4, 3] over (i0 < 4, i1 < 3) {
    %0 = load %ids[i0]
    %1 = indirect %0 < 10
    %2 = load %w[3*%1 + i1]
    yield %2
  }
  return %y
}
"""


def test_indirect_load():
    w, ids = randn(10, 3, seed=81), torch.tensor([9, 0, 4, 4])
    (y,) = run(EMBED, ids, w)
    assert torch.equal(y, w[ids])


@pytest.mark.parametrize("bad", [10, -1])
def test_indirect_out_of_bounds_is_an_error(bad):
    w, ids = randn(10, 3, seed=81), torch.tensor([9, 0, bad, 4])
    with pytest.raises(
        InterpreterError, match=rf"indirect index %1 = {bad} is out of bounds \[0, 10\)"
    ):
        run(EMBED, ids, w)


def test_masked_indirect_index_is_not_checked():
    lp, t = randn(4, 10, seed=82), torch.tensor([3, -100, 9, -100])
    src = """
    func @f(%lp: f32[4, 10], %t: i64[4]) -> (f32[4]) {
      %y = pointwise : f32[4] over (i0 < 4) {
        %0 = load %t[i0]
        %1 = ne %0, -100
        %2 = indirect %0 < 10
        %3 = load %lp[10*i0 + %2] if %1 else 0.0
        %4 = neg %3
        yield %4
      }
      return %y
    }
    """
    (y,) = run(src, lp, t)
    assert torch.equal(y, torch.tensor([-lp[0, 3], 0.0, -lp[2, 9], 0.0]))


def test_load_out_of_bounds_is_an_error():
    x = randn(8)
    src = """
    func @f(%x: f32[8]) -> (f32[8]) {
      %y = pointwise : f32[8] over (i0 < 8) {
        %0 = load %x[i0 + 1]
        yield %0
      }
      return %y
    }
    """
    with pytest.raises(
        InterpreterError, match=r"reads element 8, outside its storage of 8"
    ) as info:
        run(src, x)
    assert info.value.loc is not None and info.value.loc.line == 4


def test_ranges_must_cover_the_result():
    x = randn(8)
    src = """
    func @f(%x: f32[8]) -> (f32[8]) {
      %y = pointwise : f32[8] over (i0 < 4) {
        %0 = load %x[i0]
        yield %0
      }
      return %y
    }
    """
    with pytest.raises(InterpreterError, match="cover 4 elements"):
        run(src, x)


def test_large_loop_softmax():
    x = randn(1024, 1024, seed=90)
    src = """
    func @softmax(%x: f32[1024, 1024]) -> (f32[1024, 1024]) {
      %m = reduction max : f32[1024] over (i0 < 1024; r0 < 1024) {
        %0 = load %x[1024*i0 + r0]
        yield %0
      }
      %s = reduction sum : f32[1024] over (i0 < 1024; r0 < 1024) {
        %0 = load %x[1024*i0 + r0]
        %1 = load %m[i0]
        %2 = sub %0, %1
        %3 = exp %2
        yield %3
      }
      %y = pointwise : f32[1024, 1024] over (i0 < 1024, i1 < 1024) {
        %0 = load %x[1024*i0 + i1]
        %1 = load %m[i0]
        %2 = sub %0, %1
        %3 = exp %2
        %4 = load %s[i0]
        %5 = div %3, %4
        yield %5
      }
      return %y
    }
    """
    (y,) = run(src, x)
    torch.testing.assert_close(y, torch.softmax(x, 1))


# ---------------------------------------------------------------------------------------------
# bad inputs

ADD = """
func @f(%x: f32[2, 3], %y: f32[3]) -> (f32[2, 3]) {
  %z = add %x, %y : f32[2, 3]
  return %z
}
"""


@pytest.mark.parametrize(
    "inputs,message",
    [
        (lambda: [torch.zeros(2, 3)], r"takes 2 input\(s\)"),
        (lambda: [torch.zeros(2, 3), torch.zeros(3, dtype=torch.float64)], "dtype f32"),
        (lambda: [torch.zeros(2, 3), torch.zeros(4)], "shape"),
        (lambda: [torch.zeros(2, 3), torch.zeros(1, 3)], "rank"),
        (lambda: [torch.zeros(2, 3), [1.0, 2.0, 3.0]], "torch.Tensor"),
    ],
)
def test_bad_inputs(inputs, message):
    with pytest.raises(InterpreterError, match=message):
        run(ADD, *inputs())


def test_run_module_picks_functions():
    m = parse_module(ADD + ADD.replace("@f", "@g").replace("add", "sub"))
    x, y = randn(2, 3), randn(3)
    assert torch.equal(run_module(m, [x, y], "g")[0], x - y)
    assert torch.equal(run_module(m, [x, y])[0], x + y)
    assert torch.equal(run_graph(m.funcs[1], [x, y])[0], x - y)
    with pytest.raises(InterpreterError, match="no function"):
        run_module(m, [x, y], "h")


def test_outputs_do_not_alias_inputs():
    x = randn(3)
    (y,) = run("func @f(%x: f32[3]) -> (f32[3]) {\n  return %x\n}\n", x)
    y.add_(1)
    assert not torch.equal(x, y)


# ---------------------------------------------------------------------------------------------
# Run-time faults keep the kind of exception eager PyTorch raises; the node is named once


def _without_locations(src: str) -> Module:
    """The module of ``src`` with no source locations, as the FX importer builds them."""
    m = parse_module(textwrap.dedent(src))
    for g in m.funcs:
        for n in g.nodes:
            n.loc = None
            for op in n.body.ops if getattr(n, "body", None) is not None else ():
                op.loc = None
    return m


@pytest.mark.parametrize("located", [True, False])
def test_indirect_out_of_bounds_is_an_index_error_naming_node_buffer_value_bound(
    located: bool,
) -> None:
    from fir.ir.errors import InterpreterIndexError

    w, ids = randn(10, 3, seed=81), torch.tensor([9, 0, 12, 4])
    m = parse_module(EMBED) if located else _without_locations(EMBED)
    with pytest.raises(IndexError) as info:
        run_module(m, [ids, w])
    e = info.value
    assert isinstance(e, InterpreterIndexError) and isinstance(e, InterpreterError)
    assert isinstance(e, RuntimeError)  # eager gather/scatter raise RuntimeError
    assert e.message == (
        "%y = pointwise: %2 = load %w[3*%1 + i1]: indirect index %1 = 12 is out of bounds "
        "[0, 10) for %w (f32[10, 3]) at (i0=2, i1=0)"
    )
    assert (e.loc is not None) == located


@pytest.mark.parametrize("located", [True, False])
def test_integer_division_by_zero_is_a_zero_division_error(located: bool) -> None:
    from fir.ir.errors import InterpreterZeroDivisionError

    a = torch.tensor([1, 2], dtype=torch.int32)
    b = torch.tensor([1, 0], dtype=torch.int32)
    src = _loop_program("floordiv", [a, b], a)
    m = parse_module(src) if located else _without_locations(src)
    with pytest.raises(ZeroDivisionError) as info:
        run_module(m, [a, b])
    e = info.value
    assert isinstance(e, InterpreterZeroDivisionError) and isinstance(e, RuntimeError)
    assert e.message == (
        "%y = pointwise: %2 = floordiv %0, %1: integer division by zero: %1 is 0 at (i0=1)"
    )
    # tensor level: the operand and the element
    with pytest.raises(InterpreterZeroDivisionError) as info:
        run(one_op("mod", [a, b], "%a0, %a1", a), a, b)
    assert info.value.message == "%y = mod: integer division by zero: %a1 is 0 at [1]"
    # user code written for eager PyTorch (RuntimeError: ZeroDivisionError) still catches it
    try:
        run(one_op("floordiv", [a, b], "%a0, %a1", a), a, b)
    except RuntimeError as caught:
        assert "integer division by zero" in str(caught)
    else:
        raise AssertionError("no error")


def test_tensor_level_index_errors_name_the_operand_and_dimension() -> None:
    x, idx = randn(2, 4), torch.tensor([[0, 5], [1, 2]])
    src = one_op("gather", [x, idx], "%a0, %a1", randn(2, 2), "dim = 1")
    with pytest.raises(IndexError) as info:
        run(src, x, idx)
    assert info.value.message == (
        "%y = gather: index 5 is out of bounds [0, 4) for dimension 1 of %a0 (f32[2, 4])"
    )
    w, ids = randn(4, 3), torch.tensor([1, 9])
    with pytest.raises(IndexError, match=r"index 9 is out of bounds \[0, 4\) for the rows of %a0"):
        run(one_op("embedding", [w, ids], "%a0, %a1", randn(2, 3)), w, ids)


def test_load_outside_storage_is_an_index_error() -> None:
    src = """
    func @f(%x: f32[8]) -> (f32[8]) {
      %y = pointwise : f32[8] over (i0 < 8) {
        %0 = load %x[i0 + 1]
        yield %0
      }
      return %y
    }
    """
    with pytest.raises(IndexError) as info:
        run(src, randn(8))
    assert info.value.message == (
        "%y = pointwise: %0 = load %x[i0 + 1]: reads element 8, outside its storage of 8 "
        "element(s) (%x: f32[8]), at (i0=7)"
    )


def test_other_run_time_errors_stay_plain_interpreter_errors() -> None:
    with pytest.raises(InterpreterError) as info:
        run(ADD, torch.zeros(2, 3), torch.zeros(4))
    assert not isinstance(info.value, (IndexError, ZeroDivisionError, MemoryError))


@pytest.mark.parametrize(
    "body,message",
    [
        (
            "%y = full 1.0 : f32[99999999999999]",
            "%y = full: cannot allocate %y (f32[99999999999999]): 363.8 TiB "
            "(399999999999996 bytes)",
        ),
        (
            "%y = pointwise : f32[99999999999999] over (i0 < 99999999999999) {\n"
            "    %0 = load %x[0]\n    yield %0\n  }",
            "%y = pointwise: cannot allocate 727.6 TiB (799999999999992 bytes) while computing "
            "%y (f32[99999999999999], 363.8 TiB (399999999999996 bytes))",
        ),
    ],
)
def test_a_buffer_too_large_to_allocate_is_a_memory_error(body: str, message: str) -> None:
    from fir.ir.errors import InterpreterMemoryError

    # sizes beyond any address space: no allocator grants them, whatever its overcommit policy
    src = f"func @f(%x: f32[4]) -> (f32[]) {{\n  {body}\n  %s = sum %y : f32[]\n  return %s\n}}\n"
    with pytest.raises(MemoryError) as info:
        run(src, randn(4))
    e = info.value
    assert isinstance(e, InterpreterMemoryError) and isinstance(e, InterpreterError)
    assert e.message == message and e.loc is not None and e.loc.line == 2


def test_format_bytes() -> None:
    from fir.ir.errors import format_bytes

    assert format_bytes(0) == "0 bytes"
    assert format_bytes(1023) == "1023 bytes"
    assert format_bytes(1024) == "1.0 KiB (1024 bytes)"
    assert format_bytes(1048575) == "1.0 MiB (1048575 bytes)"
    assert format_bytes(399999999996) == "372.5 GiB (399999999996 bytes)"
