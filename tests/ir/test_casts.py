"""One ``cast`` on every back end (docs/ops.md, cast): a float converts to a signed integer
type rounding toward zero and saturating at the type's range, NaN to 0; to u8 through that
int64 conversion, keeping the low 8 bits (PyTorch's rule for u8). The interpreter is the
oracle; the C++, LLVM and Triton (its interpreter without a GPU) programs must give the same
bits on the values where C++'s and LLVM's own conversions are undefined.
"""

from __future__ import annotations

import math
import os

import pytest

torch = pytest.importorskip("torch")

from fir.backends.compile import compile_function  # noqa: E402
from fir.ir.dtypes import DType  # noqa: E402
from fir.ir.interpreter import run_graph  # noqa: E402
from fir.ir.parser import parse_module  # noqa: E402
from fir.passes.pipeline import parse_pipeline  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

NAN, INF = math.nan, math.inf
# out of every range, at the edges of them, in range, and the values no conversion defines
SPECIAL = [
    1e20, -1e20, NAN, INF, -INF, -1.5, -0.5, 0.7, 127.9, 128.0, -128.0, -129.5, 255.9, 256.0,
    300.7, -200.2, 32767.5, 32768.0, -32769.0, 3e9, -3e9, 2147483520.0, 2.0**31, -(2.0**31),
    2.0**63, -(2.0**63), 9.2e18,
]  # fmt: skip
INTS = ("i8", "i16", "i32", "i64", "u8")
# by the rule: what each target gives for some of them
EXPECTED = {
    ("i32", 1e20): 2**31 - 1,
    ("i32", -1e20): -(2**31),
    ("i64", NAN): 0,
    ("i8", INF): 127,
    ("i8", -INF): -128,
    ("i8", 300.7): 127,
    ("u8", -1.5): 255,
    ("u8", 300.7): 44,
    ("u8", NAN): 0,
    ("u8", INF): 255,
    ("u8", -0.5): 0,
    ("i64", 2.0**63): 2**63 - 1,
    ("i64", -(2.0**63)): -(2**63),
    ("i16", 32768.0): 32767,
}


def program(src: str) -> str:
    n = len(SPECIAL)
    results = ", ".join(f"{t}[{n}]" for t in INTS)
    lines = [f"func @casts(%x: {src}[{n}]) -> ({results}) {{"]
    for t in INTS:
        lines.append(f"  %to_{t} = cast %x : {t}[{n}]")
    lines.append("  return " + ", ".join(f"%to_{t}" for t in INTS))
    lines.append("}")
    return "\n".join(lines) + "\n"


def literal_program() -> str:
    """Casts of constants, which back ends (and their compilers) fold at compile time."""
    n = 4
    lines = [f"func @literals(%x: f32[{n}]) -> (i32[{n}], i64[{n}], u8[{n}], i8[{n}]) {{"]
    body = [
        ("a", "i32", "1e20 : f32"),
        ("b", "i64", "nan : f64"),
        ("c", "u8", "-1.5 : f64"),
        ("d", "i8", "-inf : f32"),
    ]
    for name, t, lit in body:
        lines += [
            f"  %{name} = pointwise : {t}[{n}] over (i0 < {n}) {{",
            "    %0 = load %x[i0]",
            f"    %c = constant {lit}",
            f"    %1 = cast %c : {t}",
            f"    %2 = cast %0 : {t}",
            "    %3 = add %1, %2",
            "    yield %3",
            "  }",
        ]
    lines.append("  return %a, %b, %c, %d")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _inputs(src: str) -> list:
    return [torch.tensor(SPECIAL, dtype=torch.float64).to(getattr(torch, src))]


def test_the_interpreter_follows_the_rule() -> None:
    g = parse_module(program("f64"), "<casts>").funcs[0]
    xs = _inputs("float64")
    for t, out in zip(INTS, run_graph(g, [x.clone() for x in xs])):
        _check_rule(t, xs[0], out)
    from fir.ir.interpreter import cast_scalar  # what a back end folds a literal cast to

    assert cast_scalar(-1.5, DType.U8) == 255 and cast_scalar(NAN, DType.I32) == 0


BACKENDS = ["cpp", "llvm", "triton"]


def _compile(text: str, backend: str) -> object:
    # conftest.py sets TRITON_INTERPRET=1 where there is no GPU
    if backend == "triton" and os.environ.get("TRITON_INTERPRET") != "1":
        assert torch.cuda.is_available(), "no GPU and no TRITON_INTERPRET=1"
    pipeline = "cuda" if backend == "triton" else "fusion"
    module = parse_pipeline(pipeline).run(parse_module(text, "<casts>"))
    return compile_function(module.funcs[0], backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("src", ["float32", "float64", "float16"])
def test_every_backend_casts_as_the_interpreter(backend: str, src: str) -> None:
    fir_src = {"float32": "f32", "float64": "f64", "float16": "f16"}[src]
    text = program(fir_src)
    xs = _inputs(src)
    want = run_graph(parse_module(text, "<casts>").funcs[0], [x.clone() for x in xs])
    prog = _compile(text, backend)
    device = getattr(prog, "device", "cpu")
    got = prog(*[x.to(device) for x in xs])
    for t, w, o in zip(INTS, want, got):
        o = o.cpu()
        assert o.dtype == w.dtype
        bad = [(v, a, b) for v, a, b in zip(xs[0].tolist(), o.tolist(), w.tolist()) if a != b]
        assert not bad, f"{backend} {src} -> {t}: (value, got, interpreter) {bad}"
        _check_rule(t, xs[0], o)


def _check_rule(target: str, xs: torch.Tensor, out: torch.Tensor) -> None:
    """The rule's own values (:data:`EXPECTED`), where the source dtype holds the value."""
    got = dict(zip(SPECIAL, out.tolist()))
    held = xs.double().tolist()
    for (t, value), want in EXPECTED.items():
        exact = math.isnan(value) or held[SPECIAL.index(value)] == value
        if t == target and exact:
            assert got[value] == want, (target, value, got[value], want)


@pytest.mark.parametrize("backend", ["interp", *BACKENDS])
def test_casts_of_literals_follow_the_rule(backend: str) -> None:
    text = literal_program()
    x = torch.zeros(4, dtype=torch.float32)
    g = parse_module(text, "<casts>").funcs[0]
    if backend == "interp":
        got = run_graph(g, [x])
    else:
        prog = _compile(text, backend)
        got = [t.cpu() for t in prog(x.to(getattr(prog, "device", "cpu")))]
    assert [t.tolist() for t in got] == [[2**31 - 1] * 4, [0] * 4, [255] * 4, [-128] * 4]


def test_an_integer_becomes_a_float_as_torch_converts_it() -> None:
    # ir.dtypes.int_to_float (what an inlined masked load's integer `other` becomes) against
    # torch.tensor(v, dtype=...): ties to even from the integer within int64, f16 and bf16
    # through f32, a double past int64, infinity past the dtype's range
    import random

    from fir.ir.dtypes import int_to_float

    rng = random.Random(0)
    values = [0, 1, -1, 2**24 + 1, 2**24 + 3, -(2**53) - 1, 65519, 65520, 2**63 - 1, -(2**63)]
    values += [2**80, -(2**80) - 12345, 2**1100]
    for _ in range(3000):
        v = rng.randint(-(1 << rng.randint(0, 200)), 1 << rng.randint(0, 200))
        values.append(v)
    for dtype in (DType.F16, DType.BF16, DType.F32, DType.F64):
        for v in values:
            try:
                want = torch.tensor(v, dtype=dtype.to_torch()).item()
            except (OverflowError, RuntimeError):
                continue  # past what torch takes (a double's range)
            assert int_to_float(v, dtype) == want, (dtype, v)
