"""The C++ back end: every kernel it renders compiles, and gives the interpreter's results.

Until the runtime exists these tests run compiled kernels with a small runner of their own
(:func:`run_compiled`): storage per the plan, kernels through ``CppKernels.call``, externs
through PyTorch. Shapes stay small: CI has two cores.
"""

from __future__ import annotations

import glob
import math
import os
import platform
from pathlib import Path

import pytest
import sympy

torch = pytest.importorskip("torch")

from fir.backends.cache import Cache  # noqa: E402
from fir.backends.cpp import (  # noqa: E402
    DIVISION_BY_ZERO,
    BuildError,
    CompilerNotFound,
    CppKernels,
    build_program,
)
from fir.backends.cpp import ops as cpp_ops  # noqa: E402
from fir.backends.cpp.emit import Emitter  # noqa: E402
from fir.backends.plan import ExternStep, KernelStep, ProgramPlan, plan_module  # noqa: E402
from fir.backends.plan.instructions import PLAN_OPS, missing_handlers  # noqa: E402
from fir.backends.plan.lowering import LOWERINGS  # noqa: E402
from fir.ir.dtypes import DType  # noqa: E402
from fir.ir.graph import Literal  # noqa: E402
from fir.ir.interpreter import resolve_callee, run_graph  # noqa: E402
from fir.ir.ops import OPS  # noqa: E402
from fir.ir.parser import parse_module  # noqa: E402
from fir.passes.pipeline import parse_pipeline  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # one cache for the whole session: equal sources compile once
    root = tmp_path_factory.getbasetemp() / "fir-cache"
    monkeypatch.setenv("FIR_CACHE_DIR", str(root))


# ---------------------------------------------------------------------------------------------
# a small runner: what backends/runtime.py will do, for these tests only


class KernelError(Exception):
    def __init__(self, code: int, value: int, message: str) -> None:
        super().__init__(f"{message} (value {value})")
        self.code, self.value = code, value


def _dim(d: object, env: dict[str, int]) -> int:
    if isinstance(d, int):
        return d
    e = sympy.sympify(d)
    return int(e.subs({s: env[s.name] for s in e.free_symbols}))


def _bind(plan: ProgramPlan, inputs: list[torch.Tensor]) -> dict[str, int]:
    env: dict[str, int] = {}
    for b, x in zip(plan.inputs, inputs):
        for d, n in zip(b.type.shape, x.shape):
            if isinstance(d, sympy.Symbol):
                env[d.name] = int(n)
    return env


def run_compiled(
    plan: ProgramPlan, kernels: CppKernels, inputs: list[torch.Tensor]
) -> list[torch.Tensor]:
    env = _bind(plan, inputs)
    storages: dict[int, torch.Tensor] = {}  # storage number -> bytes
    for b, x in zip(plan.inputs, inputs):
        assert b.type.layout is None, "the runner takes contiguous inputs"
        storages[b.storage] = x.contiguous().clone().reshape(-1).view(torch.uint8)
    for s in plan.storages.values():
        if s.number not in storages:
            n = max(_dim(s.elements, env), 1) * s.itemsize
            storages[s.number] = torch.full((n,), 0xFF, dtype=torch.uint8)  # NaN-ish garbage

    def view(name: str) -> torch.Tensor:
        b = plan.buffers[name]
        flat = storages[b.storage].view(b.type.dtype.to_torch())
        shape = [_dim(d, env) for d in b.type.shape]
        strides = [_dim(d, env) for d in b.type.strides]
        return torch.as_strided(flat, shape, strides, _dim(b.type.offset, env))

    for step in plan.steps:
        if isinstance(step, KernelStep):
            k = step.plan
            ptrs = [storages[plan.buffers[a.name].storage].data_ptr() for a in k.args]
            code, value = kernels.call(k.name, ptrs, [env[s] for s in k.sizes])
            if code:
                raise KernelError(code, value, plan.errors.get(code, "integer division by zero"))
        elif isinstance(step, ExternStep):
            node = step.node

            def conv(v: object) -> object:
                if hasattr(v, "type") and hasattr(v, "name") and v.name in plan.buffers:
                    return view(v.name)
                if isinstance(v, list):
                    return [conv(x) for x in v]
                if isinstance(v, DType):
                    return v.to_torch()
                return getattr(v, "value", v)

            out = resolve_callee(node.callee)(
                *[conv(a) for a in node.args], **{k: conv(v) for k, v in node.kwargs.items()}
            )
            outs = list(out) if isinstance(out, (list, tuple)) else [out]
            for r, o in zip(node.results, outs):
                view(r.name).copy_(o)
    return [view(n).clone() for n in plan.outputs]


def compile_module(text: str, pipeline: str = "fusion") -> list[tuple[ProgramPlan, CppKernels]]:
    module = parse_pipeline(pipeline).run(parse_module(text, "<test>"))
    return [(p, build_program(p)) for p in plan_module(module)], module


def random_inputs(graph: object, seed: int = 0, sizes: dict[str, int] | None = None) -> list:
    g = torch.Generator().manual_seed(seed)
    out = []
    for a in graph.args:  # type: ignore[attr-defined]
        shape = [_dim(d, sizes or {}) for d in a.type.shape]
        dt = a.type.dtype
        if dt.is_float:
            x = torch.randn(shape, generator=g, dtype=torch.float64).to(dt.to_torch())
        elif dt.is_bool:
            x = torch.rand(shape, generator=g) > 0.5
        else:
            x = torch.randint(0, 7, shape, generator=g, dtype=dt.to_torch())
        out.append(x)
    return out


def check_against_interpreter(
    text: str,
    inputs: list[torch.Tensor] | None = None,
    sizes: dict[str, int] | None = None,
    rtol: float = 1e-5,
    atol: float = 1e-5,
) -> list[str]:
    """Compile every function of ``text``, run it, compare with the interpreter; return the
    C++ sources."""
    module = parse_pipeline("fusion").run(parse_module(text, "<test>"))
    reference = parse_module(text, "<test>")
    sources = []
    for plan, ref_g in zip(plan_module(module), reference.funcs):
        kernels = build_program(plan)
        sources.append(kernels.source or "")
        xs = inputs if inputs is not None else random_inputs(ref_g, sizes=sizes)
        want = run_graph(ref_g, [x.clone() for x in xs])
        got = run_compiled(plan, kernels, [x.clone() for x in xs])
        for w, o, name in zip(want, got, plan.outputs):
            assert o.dtype == w.dtype, name
            assert o.shape == w.shape, name
            torch.testing.assert_close(
                o, w, rtol=rtol, atol=atol, equal_nan=True, msg=lambda m, n=name: f"%{n}: {m}"
            )
    return sources


# ---------------------------------------------------------------------------------------------
# the tables cover the IR


def test_every_elementwise_op_has_an_entry() -> None:
    # every op is written by the table, or lowered to ops it writes (backends/plan/lowering.py)
    scalar = {name for name, spec in OPS.items() if spec.scalar}
    assert scalar - set(cpp_ops.OPS) - set(LOWERINGS) == set()
    assert set(cpp_ops.OPS) - scalar == PLAN_OPS
    assert set(cpp_ops.CASTS) == set(DType)
    assert set(cpp_ops.CTYPE) == set(DType) == set(cpp_ops.STORAGE)


def test_every_reduction_kind_has_an_accumulator() -> None:
    from fir.ir.accumulators import KINDS, state

    for kind in KINDS:
        for dt in DType:
            comps = state(kind, dt)
            names = [f"acc{x}" for x in cpp_ops.SUFFIXES.get(kind, ("",))]
            assert len(names) == len(comps)
            assert all(cpp_ops.start_value(c) for c in comps)
            assert cpp_ops.update(kind, dt, names, "v", "i").endswith((";", "}"))
            assert cpp_ops.combine(kind, dt, names, [n + "_o" for n in names]).endswith((";", "}"))


def test_every_instruction_is_handled() -> None:
    # the loop tree consumes loop/end (nest.loop_tree): the walk handles every other kind
    assert missing_handlers(Emitter, loops=False) == []


def test_accumulator_updates_are_written_from_the_shared_steps() -> None:
    # fir.ir.accumulators.update's steps, each read once written into its reader
    argmax = cpp_ops.update("argmax", DType.F32, ["s", "s_i"], "v", "i")
    assert argmax == "if (v > s || (fir_isnan(v) && !fir_isnan(s)) || s_i < 0) { s = v; s_i = i; }"
    # an integer is never NaN: no test of it
    argmax = cpp_ops.update("argmax", DType.I32, ["s", "s_i"], "v", "i")
    assert argmax == "if (v > s || s_i < 0) { s = v; s_i = i; }"
    names = ["m", "q", "n"]
    assert cpp_ops.update("welford", DType.F32, names, "v", "i") == (
        "{ n = n + 1; const auto d = v - m; m = m + d / n; q = q + d * (v - m); }"
    )
    assert cpp_ops.update("welford", DType.F32, names, "v", "i", "inv") == (
        "{ const auto d = v - m; m = m + d * inv; q = q + d * (v - m); }"
    )
    assert cpp_ops.update("sum", DType.I8, ["s"], "v", "i") == "s = fir_wadd(s, int64_t(v));"
    assert cpp_ops.update("any", DType.F32, ["s"], "v", "i") == "s = s || fir_truth(v);"


def test_inline_operands_group_as_written() -> None:
    level = cpp_ops.BINDING

    def text(op: str, *parts: tuple[str, int]) -> str:
        return cpp_ops.inline(op, parts, False)[0]

    assert text("mul", ("a + b", level["add"]), ("c", 0)) == "(a + b) * c"
    assert text("add", ("a * b", level["mul"]), ("c", 0)) == "a * b + c"
    assert text("sub", ("a - b", level["sub"]), ("c - d", level["sub"])) == "a - b - (c - d)"
    assert text("neg", ("-a", level["neg"])) == "-(-a)"
    assert text("logical_or", ("a && b", level["logical_and"]), ("c < d", level["lt"])) == (
        "(a && b) || c < d"  # as GCC's -Wparentheses asks
    )
    assert text("where", ("p ? a : b", level["where"]), ("c", 0), ("d", 0)) == "(p ? a : b) ? c : d"
    # a call needs no parentheses inside; an integer's add wraps (a call), its floor is itself
    assert (
        cpp_ops.inline("add", [("a + b", level["add"]), ("c", 0)], True)[0] == "fir_wadd(a + b, c)"
    )
    assert cpp_ops.inline("floor", [("a + b", level["add"])], True) == ("a + b", level["add"])


# ---------------------------------------------------------------------------------------------
# examples and typical programs agree with the interpreter

EXAMPLES = sorted(glob.glob(str(ROOT / "examples" / "*.fir")))
EXAMPLES += sorted(glob.glob(str(ROOT / "examples" / "imported" / "*.fir")))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: os.path.relpath(p, ROOT / "examples"))
def test_example(path: str) -> None:
    check_against_interpreter(Path(path).read_text(), rtol=1e-4, atol=1e-5)


PROGRAMS: dict[str, str] = {
    "softmax": """
func @f(%x: f32[33, 70]) -> (f32[33, 70]) {
  %y = softmax %x {dim = 1} : f32[33, 70]
  return %y
}""",
    "layer_norm": """
func @f(%x: f32[9, 3, 40], %w: f32[40], %b: f32[40]) -> (f32[9, 3, 40]) {
  %y = layer_norm %x, %w, %b {normalized_shape = [40], eps = 1e-05} : f32[9, 3, 40]
  return %y
}""",
    "rms_norm": """
func @f(%x: f32[20, 130], %w: f32[130]) -> (f32[20, 130]) {
  %sq = mul %x, %x : f32[20, 130]
  %ms = mean %sq {dims = [1], keepdim = true} : f32[20, 1]
  %e = add %ms, 1e-06 : f32[20, 1]
  %r = rsqrt %e : f32[20, 1]
  %n = mul %x, %r : f32[20, 130]
  %y = mul %n, %w : f32[20, 130]
  return %y
}""",
    "residual_rms_norm": """
func @f(%x: f32[20, 64], %res: f32[20, 64], %w: f32[64]) -> (f32[20, 64], f32[20, 64]) {
  %h = add %x, %res : f32[20, 64]
  %sq = mul %h, %h : f32[20, 64]
  %ms = mean %sq {dims = [1], keepdim = true} : f32[20, 1]
  %e = add %ms, 1e-06 : f32[20, 1]
  %r = rsqrt %e : f32[20, 1]
  %n = mul %h, %r : f32[20, 64]
  %y = mul %n, %w : f32[20, 64]
  return %h, %y
}""",
    "transpose_add": """
func @f(%x: f32[96, 96], %y: f32[96, 96]) -> (f32[96, 96]) {
  %t = transpose %y {dim0 = 0, dim1 = 1} : f32[96, 96]
  %z = add %x, %t : f32[96, 96]
  return %z
}""",
    "transpose_add_rect": """
func @f(%x: f32[70, 130], %y: f32[130, 70]) -> (f32[70, 130]) {
  %t = transpose %y {dim0 = 0, dim1 = 1} : f32[70, 130]
  %z = add %x, %t : f32[70, 130]
  return %z
}""",
    "sum_dim0": """
func @f(%x: f32[50, 70]) -> (f32[70]) {
  %s = sum %x {dims = [0]} : f32[70]
  return %s
}""",
    "softmax_dim0": """
func @f(%x: f32[37, 150]) -> (f32[37, 150]) {
  %y = softmax %x {dim = 0} : f32[37, 150]
  return %y
}""",
    "sum_middle": """
func @f(%x: f32[3, 17, 40]) -> (f32[3, 40], f32[3, 40]) {
  %s = sum %x {dims = [1]} : f32[3, 40]
  %m = max %x {dims = [1]} : f32[3, 40]
  return %s, %m
}""",
    "bn_relu_residual": """
func @f(%x: f32[4, 8, 6, 6], %w: f32[8], %b: f32[8], %rm: f32[8], %rv: f32[8], %res: f32[4, 8, 6, 6]) -> (f32[4, 8, 6, 6]) {
  %bn = batch_norm %x, %w, %b, %rm, %rv {eps = 1e-05} : f32[4, 8, 6, 6]
  %a = add %bn, %res : f32[4, 8, 6, 6]
  %y = relu %a : f32[4, 8, 6, 6]
  return %y
}""",
    "pointwise_chain_f16": """
func @f(%x: f32[64, 48]) -> (f16[64, 48]) {
  %a = add %x, 1.0 : f32[64, 48]
  %b = mul %a, 2.0 : f32[64, 48]
  %c = relu %b : f32[64, 48]
  %d = mul %c, 0.5 : f32[64, 48]
  %y = cast %d : f16[64, 48]
  return %y
}""",
    "softmax_f16": """
func @f(%x: f16[12, 100]) -> (f16[12, 100]) {
  %y = softmax %x {dim = 1} : f16[12, 100]
  return %y
}""",
    "rms_norm_bf16": """
func @f(%x: bf16[12, 100], %w: bf16[100]) -> (bf16[12, 100]) {
  %sq = mul %x, %x : bf16[12, 100]
  %ms = mean %sq {dims = [1], keepdim = true} : bf16[12, 1]
  %e = add %ms, 1e-06 : bf16[12, 1]
  %r = rsqrt %e : bf16[12, 1]
  %n = mul %x, %r : bf16[12, 100]
  %y = mul %n, %w : bf16[12, 100]
  return %y
}""",
    "gelu_both": """
func @f(%x: f32[16, 80], %b: f32[80]) -> (f32[16, 80], f32[16, 80]) {
  %h = add %x, %b : f32[16, 80]
  %y = gelu %h : f32[16, 80]
  %z = gelu %h {approximate = "tanh"} : f32[16, 80]
  return %y, %z
}""",
    "reductions": """
func @f(%x: f32[6, 45]) -> (i64[6], i64[6], f32[6], f32[6], f32[6], f32[6], bool[6]) {
  %am = argmax %x {dim = 1} : i64[6]
  %an = argmin %x {dim = 1} : i64[6]
  %v = var %x {dims = [1]} : f32[6]
  %p = prod %x {dims = [1]} : f32[6]
  %mx = max %x {dims = [1]} : f32[6]
  %mn = min %x {dims = [1]} : f32[6]
  %g = gt %x, 1.5 : bool[6, 45]
  %an2 = any %g {dims = [1]} : bool[6]
  return %am, %an, %v, %p, %mx, %mn, %an2
}""",
    "full_reduction": """
func @f(%x: f32[40, 50]) -> (f32[], i64[], f32[]) {
  %s = sum %x : f32[]
  %a = argmax %x : i64[]
  %m, %m2, %n = welford %x : f32[], f32[], f32[]
  return %s, %a, %m2
}""",
    "pad_cat": """
func @f(%x: f32[6, 40], %y: f32[6, 24]) -> (f32[6, 68], f32[6, 46]) {
  %c = cat %x, %y {dim = 1} : f32[6, 64]
  %p = pad %c {pad = [2, 2], value = -1.5} : f32[6, 68]
  %q = pad %x {pad = [3, 3]} : f32[6, 46]
  return %p, %q
}""",
    "embedding": """
func @f(%w: f32[50, 48], %ids: i64[7, 3]) -> (f32[7, 3, 48]) {
  %e = embedding %w, %ids : f32[7, 3, 48]
  return %e
}""",
    "cross_entropy": """
func @f(%x: f32[16, 37], %t: i64[16]) -> (f32[]) {
  %y = cross_entropy %x, %t : f32[]
  return %y
}""",
}

INDEX_INPUTS = {"embedding": (1, 50), "cross_entropy": (1, 37)}  # input index, bound


def _inputs_for(name: str, text: str) -> list[torch.Tensor]:
    graph = parse_module(text, "<test>").funcs[0]
    xs = random_inputs(graph, seed=1)
    if name in INDEX_INPUTS:
        k, bound = INDEX_INPUTS[name]
        g = torch.Generator().manual_seed(2)
        xs[k] = torch.randint(0, bound, xs[k].shape, generator=g)
    return xs


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program(name: str) -> None:
    text = PROGRAMS[name]
    tol = 1e-2 if "16" in name else 1e-4
    check_against_interpreter(text, _inputs_for(name, text), rtol=tol, atol=tol)


# ---------------------------------------------------------------------------------------------
# every elementwise op, on every dtype it takes, with special values: one program per dtype


def _special(dtype: DType, n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if dtype.is_float:
        special = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -3.5]
        special += [1e-40, 1e30, -1e30, 100.0, -100.0, 0.75, 7.0, -0.999]
        rest = torch.randn(n - len(special), generator=g, dtype=torch.float64) * 3
        x = torch.cat([torch.tensor(special, dtype=torch.float64), rest])
        return x[torch.randperm(n, generator=g)].to(dtype.to_torch())
    if dtype.is_bool:
        return torch.rand(n, generator=g) > 0.5
    info = torch.iinfo(dtype.to_torch())
    special = [info.min, info.max, -1, 0, 1, 2, -2, 7, -7, info.min + 1]
    special = [v for v in special if info.min <= v <= info.max]
    rest = torch.randint(max(info.min, -100), min(info.max, 100), (n - len(special),), generator=g)
    x = torch.cat([torch.tensor(special), rest])
    return x[torch.randperm(n, generator=g)].to(dtype.to_torch())


def _op_program(dtype: DType) -> tuple[str, list[torch.Tensor]]:
    from fir.ir import ops as ir_ops

    n = 64
    floats = dtype.is_float
    ints = not floats and not dtype.is_bool
    unary = list(ir_ops.UNARY_FLOAT + ir_ops.UNARY_TO_BOOL_FLOAT) if floats else []
    unary += ir_ops.UNARY_NUMERIC if not dtype.is_bool else []
    unary += ["logical_not"] + (["bitwise_not"] if not floats else [])
    binary = list(ir_ops.BINARY_NUMERIC) if not dtype.is_bool else []
    binary += ir_ops.BINARY_FLOAT if floats else []
    binary += ir_ops.BINARY_INT if not floats else []
    binary += ir_ops.BINARY_LOGICAL + ir_ops.COMPARE
    t = dtype.value
    lines, outs = [], []
    for k, op in enumerate(unary + binary + ["where"]):
        spec = OPS[op]
        to_bool = ir_ops.UNARY_TO_BOOL_FLOAT + ir_ops.BINARY_LOGICAL + ir_ops.COMPARE
        result = "bool" if op in to_bool + ["logical_not"] else t
        if op in unary:
            args = "%a"
        elif op == "where":
            args = "%c, %a, %b"
        elif op in ("floordiv", "mod") and ints:
            args = "%a, %d"  # a divisor without zeros (zero: test_integer_division_by_zero)
        elif op in ("shl", "shr"):
            args = "%a, %s"
        else:
            args = "%a, %b"
        assert spec.scalar
        lines.append(f"  %y{k} = {op} {args} : {result}[{n}]")
        outs.append((f"%y{k}", f"{result}[{n}]"))
    a, b = _special(dtype, n, 1), _special(dtype, n, 2)
    c = torch.rand(n, generator=torch.Generator().manual_seed(3)) > 0.5
    d = torch.where(b == 0, torch.ones_like(b), b) if ints else b
    s = torch.arange(-3, n - 3).to(dtype.to_torch()) if ints else b
    params = f"%a: {t}[{n}], %b: {t}[{n}], %c: bool[{n}], %d: {t}[{n}], %s: {t}[{n}]"
    text = (
        f"func @ops({params}) -> ({', '.join(ty for _, ty in outs)}) {{\n"
        + "\n".join(lines)
        + f"\n  return {', '.join(name for name, _ in outs)}\n}}\n"
    )
    return text, [a, b, c, d, s]


@pytest.mark.parametrize("dtype", list(DType), ids=str)
def test_every_elementwise_op(dtype: DType) -> None:
    text, inputs = _op_program(dtype)
    tol = {DType.F16: 1e-3, DType.BF16: 8e-3, DType.F32: 2e-6, DType.F64: 1e-12}.get(dtype, 0)
    check_against_interpreter(text, inputs, rtol=tol, atol=tol)


@pytest.mark.parametrize("source", list(DType), ids=str)
def test_every_cast(source: DType) -> None:
    n = 64
    targets = list(DType)
    lines = [f"  %y{k} = cast %a : {t.value}[{n}]" for k, t in enumerate(targets)]
    results = ", ".join(f"{t.value}[{n}]" for t in targets)
    names = ", ".join(f"%y{k}" for k in range(len(targets)))
    text = f"func @casts(%a: {source.value}[{n}]) -> ({results}) {{\n" + "\n".join(lines)
    text += f"\n  return {names}\n}}\n"
    a = _special(source, n, 4)
    if source.is_float:  # out-of-range float -> int conversions are undefined in C++ and torch
        a = torch.where(a.isfinite() & (a.abs() < 100), a, torch.zeros_like(a))
    check_against_interpreter(text, [a], rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------
# reductions: NaN, ties, lanes, remainders, threads


def _with_nans(x: torch.Tensor, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = x.clone()
    flat = x.view(-1)
    flat[torch.randint(0, flat.numel(), (max(flat.numel() // 50, 1),), generator=g)] = math.nan
    return x


REDUCE_ALL = """
func @f(%x: f32[R, C]) -> (f32[], f32[], f32[], i64[], i64[], f32[], f32[]) {
  %s = sum %x : f32[]
  %mx = max %x : f32[]
  %mn = min %x : f32[]
  %am = argmax %x : i64[]
  %an = argmin %x : i64[]
  %m, %m2, %n = welford %x : f32[], f32[], f32[]
  return %s, %mx, %mn, %am, %an, %m, %m2
}"""

REDUCE_ROWS = """
func @f(%x: f32[R, C]) -> (f32[R], f32[R], i64[R], i64[R], f32[R], f32[R], f32[R]) {
  %s = sum %x {dims = [1]} : f32[R]
  %mx = max %x {dims = [1]} : f32[R]
  %am = argmax %x {dim = 1} : i64[R]
  %an = argmin %x {dim = 1} : i64[R]
  %m, %m2, %n = welford %x {dims = [1]} : f32[R], f32[R], f32[R]
  %p = prod %x {dims = [1]} : f32[R]
  return %s, %mx, %am, %an, %m, %m2, %p
}"""


@pytest.mark.parametrize("shape", [(3, 7), (5, 16), (4, 33), (300, 130)], ids=str)
@pytest.mark.parametrize("nans", [False, True], ids=["finite", "nan"])
def test_whole_tensor_reductions(shape: tuple[int, int], nans: bool) -> None:
    """(300, 130) is above the grain: the reduction is split among the threads."""
    text = REDUCE_ALL.replace("R", str(shape[0])).replace("C", str(shape[1]))
    x = torch.randn(shape, generator=torch.Generator().manual_seed(5))
    if nans:
        x = _with_nans(x, 6)
    check_against_interpreter(text, [x], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(3, 7), (5, 16), (4, 33), (40, 1000)], ids=str)
@pytest.mark.parametrize("nans", [False, True], ids=["finite", "nan"])
def test_row_reductions(shape: tuple[int, int], nans: bool) -> None:
    text = REDUCE_ROWS.replace("R", str(shape[0])).replace("C", str(shape[1]))
    x = torch.randn(shape, generator=torch.Generator().manual_seed(7)) * 0.1 + 1
    if nans:
        x = _with_nans(x, 8)
    check_against_interpreter(text, [x], rtol=1e-4, atol=1e-4)


def argmax_ties_case() -> tuple[str, list[torch.Tensor]]:
    """Row reductions whose argmax/argmin must take the first of ties, NaN and infinities (the
    same case for every back end's tests). Welford's running mean of a row holding an infinity
    is NaN where the interpreter's two-pass mean is the infinity: welford is left out."""
    text = REDUCE_ROWS.replace("R", "6").replace("C", "50")
    text = text.replace("  %m, %m2, %n = welford %x {dims = [1]} : f32[6], f32[6], f32[6]\n", "")
    text = text.replace("%m, %m2, %p", "%s, %mx, %p")
    x = torch.zeros(6, 50)
    x[0, [3, 20, 37]] = 5.0  # ties in different lanes: the first wins
    x[1] = -math.inf  # all -inf: index 0
    x[2, [40, 9]] = math.nan  # the first NaN wins
    x[3, 49] = 1.0  # in the remainder
    x[4] = math.inf
    x[5, 17] = -1.0
    return text, [x]


def test_argmax_ties_and_infinities_take_the_first() -> None:
    text, inputs = argmax_ties_case()
    check_against_interpreter(text, inputs, rtol=0, atol=0)


def test_whole_tensor_argmax_ties_across_threads() -> None:
    text = REDUCE_ALL.replace("R", "400").replace("C", "100")
    x = torch.zeros(400, 100)
    x[5, 5] = x[390, 7] = x[200, 0] = 3.0
    check_against_interpreter(text, [x], rtol=1e-5, atol=1e-5)


def test_column_reductions_with_every_kind() -> None:
    text = """
func @f(%x: f32[45, 150]) -> (f32[150], f32[150], i64[150], f32[150], f32[150]) {
  %s = sum %x {dims = [0]} : f32[150]
  %mx = max %x {dims = [0]} : f32[150]
  %am = argmax %x {dim = 0} : i64[150]
  %m, %m2, %n = welford %x {dims = [0]} : f32[150], f32[150], f32[150]
  %v = var %x {dims = [0]} : f32[150]
  return %s, %mx, %am, %m2, %v
}"""
    x = _with_nans(torch.randn(45, 150, generator=torch.Generator().manual_seed(9)), 10)
    (source,) = check_against_interpreter(text, [x], rtol=1e-4, atol=1e-4)
    assert "x0b += 64" in source  # interchanged


def test_any_and_all() -> None:
    text = """
func @f(%x: f32[7, 40], %b: bool[7, 40]) -> (bool[7], bool[7], bool[], bool[40]) {
  %a = any %x {dims = [1]} : bool[7]
  %l = all %b {dims = [1]} : bool[7]
  %t = any %b : bool[]
  %c = all %x {dims = [0]} : bool[40]
  return %a, %l, %t, %c
}"""
    x = torch.randn(7, 40)
    x[2] = 0.0
    x[3, :39] = 0.0
    x[:, 5] = 0.0
    b = torch.rand(7, 40) > 0.1
    b[1] = True
    check_against_interpreter(text, [x, b], rtol=0, atol=0)


def test_integer_reductions() -> None:
    text = """
func @f(%x: i32[9, 70], %y: i8[9, 70]) -> (i32[9], i32[9], i64[9], i8[9], i64[70]) {
  %s = sum %x {dims = [1]} : i32[9]
  %m = max %x {dims = [1]} : i32[9]
  %a = argmin %x {dim = 1} : i64[9]
  %p = prod %y {dims = [1]} : i8[9]
  %c = argmax %y {dim = 0} : i64[70]
  return %s, %m, %a, %p, %c
}"""
    g = torch.Generator().manual_seed(11)
    x = torch.randint(-(2**31), 2**31 - 1, (9, 70), generator=g, dtype=torch.int32)
    y = torch.randint(-128, 127, (9, 70), generator=g, dtype=torch.int8)
    check_against_interpreter(text, [x, y], rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------
# symbolic sizes: one library for every size


SYMBOLIC = """
func @f(%x: f32[s0, s1], %w: f32[s1]) -> (f32[s0, s1], f32[s1], f32[s1, s0], f32[]) {
  %sq = mul %x, %x : f32[s0, s1]
  %ms = mean %sq {dims = [1], keepdim = true} : f32[s0, 1]
  %e = add %ms, 1e-06 : f32[s0, 1]
  %r = rsqrt %e : f32[s0, 1]
  %n = mul %x, %r : f32[s0, s1]
  %y = mul %n, %w : f32[s0, s1]
  %c = sum %x {dims = [0]} : f32[s1]
  %t = transpose %x {dim0 = 0, dim1 = 1} : f32[s1, s0]
  %z = exp %t : f32[s1, s0]
  %all = sum %w : f32[]
  return %y, %c, %z, %all
}"""


def test_symbolic_sizes_compile_once() -> None:
    module = parse_pipeline("fusion").run(parse_module(SYMBOLIC, "<test>"))
    (plan,) = plan_module(module)
    kernels = build_program(plan)
    reference = parse_module(SYMBOLIC, "<test>").funcs[0]
    for rows, cols in [(1, 1), (3, 17), (9, 16), (5, 100), (300, 130)]:
        g = torch.Generator().manual_seed(rows * cols)
        xs = [torch.randn(rows, cols, generator=g), torch.randn(cols, generator=g)]
        want = run_graph(reference, xs)
        got = run_compiled(plan, kernels, xs)
        for w, o in zip(want, got):
            torch.testing.assert_close(o, w, rtol=1e-4, atol=1e-4)
    assert " if(" in (kernels.source or "")  # the grain is a run-time test


# ---------------------------------------------------------------------------------------------
# faults: out-of-range indices and integer division by zero are error codes, never crashes


def test_out_of_range_gather_index_is_an_error_code() -> None:
    text = PROGRAMS["embedding"]
    [(plan, kernels)], _ = compile_module(text)
    w = torch.randn(50, 48)
    for bad in (50, -1, 10**12):
        ids = torch.randint(0, 50, (7, 3))
        ids[4, 1] = bad
        with pytest.raises(KernelError) as info:
            run_compiled(plan, kernels, [w, ids])
        assert info.value.value == bad
        assert "out of bounds [0, 50)" in str(info.value)
    ids = torch.randint(0, 50, (7, 3))
    torch.testing.assert_close(run_compiled(plan, kernels, [w, ids])[0], w[ids])


def test_out_of_range_index_in_a_reduction() -> None:
    [(plan, kernels)], _ = compile_module(PROGRAMS["cross_entropy"])
    x, t = torch.randn(16, 37), torch.randint(0, 37, (16,))
    t[9] = 37
    with pytest.raises(KernelError, match="out of bounds"):
        run_compiled(plan, kernels, [x, t])


def test_out_of_range_index_in_a_parallel_kernel() -> None:
    text = """
func @f(%w: f32[1000, 64], %ids: i64[4096]) -> (f32[4096, 64]) {
  %e = embedding %w, %ids : f32[4096, 64]
  return %e
}"""
    [(plan, kernels)], _ = compile_module(text)
    assert "#pragma omp parallel for" in (kernels.source or "")
    ids = torch.randint(0, 1000, (4096,))
    ids[[7, 3000]] = torch.tensor([1000, -5])
    with pytest.raises(KernelError) as info:
        run_compiled(plan, kernels, [torch.randn(1000, 64), ids])
    assert info.value.value in (1000, -5)


def test_integer_division_by_zero_is_an_error_code() -> None:
    text = """
func @f(%a: i64[40], %b: i64[40]) -> (i64[40], i64[40]) {
  %q = floordiv %a, %b : i64[40]
  %r = mod %a, %b : i64[40]
  return %q, %r
}"""
    [(plan, kernels)], _ = compile_module(text)
    a, b = torch.arange(40) - 20, torch.arange(40) % 7 - 3
    with pytest.raises(KernelError) as info:
        run_compiled(plan, kernels, [a, b])
    assert info.value.code == DIVISION_BY_ZERO
    b = torch.where(b == 0, 5, b)
    q, r = run_compiled(plan, kernels, [a, b])
    assert torch.equal(q, torch.div(a, b, rounding_mode="floor"))
    assert torch.equal(r, torch.remainder(a, b))


def test_masked_loads_read_nothing_outside() -> None:
    # pad reads x[i - 3] under a mask: at the borders the address is outside the buffer
    (source,) = check_against_interpreter(PROGRAMS["pad_cat"], rtol=0, atol=0)
    assert " ? x[" in source and " : (-1.5f)" in source


# ---------------------------------------------------------------------------------------------
# the compiler: missing, failing


def test_no_compiler_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-c++"))
    module = parse_pipeline("fusion").run(parse_module(PROGRAMS["softmax"], "<test>"))
    with pytest.raises(CompilerNotFound, match="not on PATH"):
        build_program(plan_module(module)[0], Cache("cpp", tmp_path / "cache"))


def test_compile_error_names_the_source(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    script = tmp_path / "bad-c++"
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "--version" ]; then echo "bad-c++ 1.0"; exit 0; fi\n'
        'echo "kernels.cpp:3:1: error: this compiler always fails" >&2\n'
        "exit 1\n"
    )
    script.chmod(0o755)
    monkeypatch.setenv("CXX", str(script))
    module = parse_pipeline("fusion").run(parse_module(PROGRAMS["softmax"], "<test>"))
    with pytest.raises(BuildError) as info:
        build_program(plan_module(module)[0], Cache("cpp", tmp_path / "cache"))
    message = str(info.value)
    assert "this compiler always fails" in message
    source = next(w for w in message.split() if w.endswith(".cpp"))
    assert Path(source).exists() and 'extern "C"' in Path(source).read_text()
    assert not list((tmp_path / "cache" / "cpp").glob("*.so"))  # nothing half-built is kept


def test_call_checks_its_arguments() -> None:
    [(plan, kernels)], _ = compile_module(PROGRAMS["softmax"])
    with pytest.raises(ValueError, match="takes 2 pointer"):
        kernels.call(plan.kernels()[0].name, [0], [])


# ---------------------------------------------------------------------------------------------
# random tensor programs (tests/tensor_programs.py) agree with eager PyTorch


def test_random_programs_match_eager() -> None:
    import strategies as S
    from tensor_programs import random_program

    for seed in range(12):
        p = random_program(S.RandomChooser(4000 + seed), num_ops=10)
        module = parse_pipeline("fusion").run(parse_module(p.text, "<random>"))
        (plan,) = plan_module(module)
        got = run_compiled(plan, build_program(plan), [x.clone() for x in p.inputs])
        for o, w in zip(got, p.expected):
            torch.testing.assert_close(o, w, rtol=1e-4, atol=1e-4, equal_nan=True, msg=p.text)


def test_a_200_op_chain() -> None:
    lines = ["func @chain(%x: f32[64, 128]) -> (f32[64, 128]) {", "  %v0 = sin %x : f32[64, 128]"]
    for k in range(1, 200):
        op = (
            f"mul %v{k - 1}, 1.01"
            if k % 4 == 1
            else f"add %v{k - 1}, 0.1"
            if k % 4 == 2
            else f"relu %v{k - 1}"
            if k % 4 == 3
            else f"sin %v{k - 1}"
        )
        lines.append(f"  %v{k} = {op} : f32[64, 128]")
    lines += ["  return %v199", "}"]
    (source,) = check_against_interpreter("\n".join(lines), rtol=1e-4, atol=1e-5)
    assert source.count("fir_sin(") == 50


_GUARDED = """
import ctypes, mmap, sys
import torch
sys.path[:0] = [{here!r}, {tests!r}]
from test_cpp_render import compile_module
text = '''
func @f(%x: f32[6, 40]) -> (f32[6, 46]) {{
  %p = pad %x {{pad = [3, 3], value = 0.5}} : f32[6, 46]
  return %p
}}'''
[(plan, kernels)], _ = compile_module(text)
(k,) = plan.kernels()
libc = ctypes.CDLL(None)
page = mmap.PAGESIZE
area = mmap.mmap(-1, 3 * page)
base = ctypes.addressof(ctypes.c_char.from_buffer(area))
for guard in (base, base + 2 * page):  # no access before and after the middle page
    assert libc.mprotect(ctypes.c_void_p(guard), ctypes.c_size_t(page), 0) == 0
x = torch.randn(6, 40)
nbytes = x.numel() * 4
for where in (base + page, base + 2 * page - nbytes):  # at the start, at the end
    ctypes.memmove(where, x.data_ptr(), nbytes)
    out = torch.empty(6, 46)
    assert kernels.call(k.name, [where, out.data_ptr()], []) == (0, 0)
    want = torch.nn.functional.pad(x, (3, 3), value=0.5)
    assert torch.equal(out, want)
print("ok")
"""


def test_masked_loads_never_touch_memory_outside(tmp_path: Path) -> None:
    """The padded input sits against a page the process may not read: a load that ignored its
    mask would kill the process (so the check runs in a child)."""
    import subprocess
    import sys

    env = dict(os.environ)
    script = _GUARDED.format(here=str(Path(__file__).parent), tests=str(Path(__file__).parents[1]))
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


# ---------------------------------------------------------------------------------------------
# names and literals


def test_names_that_clash_with_cpp_or_the_library() -> None:
    text = """
func @f(%int: f32[64, 40], %l: f32[40], %fir_err: f32[64, 40]) -> (f32[64, 40], f32[64, 40], f32[64]) {
  %exp = exp %int : f32[64, 40]
  %args = add %exp, %l : f32[64, 40]
  %x0b = mul %args, %fir_err : f32[64, 40]
  %expf = sum %x0b {dims = [1]} : f32[64]
  return %exp, %x0b, %expf
}
func @g(%x: f32[64]) -> (f32[64]) {
  %expf = exp %x : f32[64]
  return %expf
}"""
    _, source = check_against_interpreter(text, rtol=1e-5, atol=1e-5)
    # a kernel named expf would be what every call of expf in the library binds to
    assert 'extern "C" int64_t fir_kernel_expf(' in source


def test_names_of_namespaces_and_newer_keywords() -> None:
    # OpInfo's std.unbiased imported as a graph whose kernel was named ``std``: the namespace
    text = """
func @f(%std: f32[16, 24], %constexpr: f32[24]) -> (f32[16], f32[16, 24]) {
  %size_t = add %std, %constexpr : f32[16, 24]
  %nullptr = mul %size_t, %size_t : f32[16, 24]
  %std2 = sum %nullptr {dims = [1]} : f32[16]
  return %std2, %size_t
}
func @std(%x: f32[64]) -> (f32[64]) {
  %decltype = exp %x : f32[64]
  return %decltype
}"""
    _, source = check_against_interpreter(text, rtol=1e-5, atol=1e-5)
    assert "int64_t std(" not in source


def test_nested_reduction_loops() -> None:
    text = """
func @f(%x: f32[5, 12, 37]) -> (f32[12], f32[12], f32[12]) {
  %s = sum %x {dims = [0, 2]} : f32[12]
  %m, %m2, %n = welford %x {dims = [0, 2]} : f32[12], f32[12], f32[12]
  return %s, %m, %m2
}"""
    check_against_interpreter(text, rtol=1e-4, atol=1e-4)


def test_literals() -> None:
    from fir.backends.cpp.ops import literal

    assert literal(Literal(1e-05), DType.F32) == "1e-05f"
    assert literal(Literal(0.1), DType.F64) == "0.1"
    assert literal(Literal(2), DType.F32) == "2.0f"
    assert literal(Literal(-2.5), DType.F32) == "(-2.5f)"
    assert literal(Literal(math.inf), DType.F32) == "FIR_INF"
    assert literal(Literal(-math.inf), DType.F64) == "(-double(FIR_INF))"
    assert literal(Literal(math.nan), DType.BF16) == "FIR_NAN"
    assert literal(Literal(1e300), DType.F32) == "FIR_INF"  # beyond float: rounds to infinity
    assert literal(Literal(-(2**63)), DType.I64) == "INT64_MIN"
    assert literal(Literal(2**40), DType.I64) == "int64_t(INT64_C(1099511627776))"
    assert literal(Literal(4), DType.I64) == "int64_t(4)"  # meets an int64_t in fir_wadd(T, T)
    assert literal(Literal(-3), DType.I32) == "int32_t(-3)"
    assert literal(Literal(True), DType.BOOL) == "true"
    assert literal(Literal(0.1), DType.F16, exact=True) == "0.099975586f"  # rounded to f16
    assert literal(Literal(None), DType.F32) == "0.0f"


# ---------------------------------------------------------------------------------------------
# f16 in blocks: the contiguous f16 loads and stores of a vectorised loop convert 16 at a time
# with one F16C instruction (:meth:`KernelWriter.vector_loop`), bit for bit as torch converts


def _all_halves() -> torch.Tensor:
    """Every f16 bit pattern, in order: zeros, subnormals, normals, infinities, NaNs (quiet
    and signalling, with payloads), both signs."""
    return torch.arange(65536, dtype=torch.int32).to(torch.int16).view(torch.float16)


def _edge_floats() -> torch.Tensor:
    """f32 values where rounding to f16 is decided: every f16 value and its f32 neighbours, the
    midpoints between neighbouring f16 values (ties to even) and theirs, the overflow and
    underflow thresholds, f32 subnormals, infinities and NaNs with payloads; both signs."""
    halves = _all_halves()
    finite = halves[torch.isfinite(halves)].to(torch.float32)
    bits = [finite.view(torch.int32).to(torch.int64) + d for d in (-2, -1, 0, 1, 2)]
    positive = halves[:0x7C00].to(torch.float64)
    mids = ((positive[:-1] + positive[1:]) / 2).to(torch.float32).view(torch.int32)
    bits += [mids.to(torch.int64) + d for d in (-1, 0, 1)]
    special = [0x7F800000, 0x7F800001, 0x7FC00000, 0x7FFFFFFF, 0x7FBFFFFF, 0x7F812345]
    special += [0x00000001, 0x007FFFFF, 0x00800000, 0x477FE000, 0x477FEFFF, 0x477FF000]
    special += [0x477FF001, 0x47800000, 0x7F7FFFFF, 0x33000000, 0x33000001, 0x32FFFFFF]
    bits.append(torch.tensor(special, dtype=torch.int64))
    u = torch.cat(bits) & 0x7FFFFFFF
    u = torch.cat([u, u | 0x80000000])
    n = u.numel() // 64 * 64  # torch converts a multiple of its vector length alike
    return (u[:n] - ((u[:n] >> 31) << 32)).to(torch.int32).view(torch.float32)


def _kernels(source: str) -> str:
    """The kernels of a translation unit, without the prelude."""
    return source[source.index("\n// kernel ") :]


def _run(text: str, inputs: list[torch.Tensor]) -> tuple[list[torch.Tensor], str]:
    """The outputs of ``text`` compiled and run, and its kernels' C++."""
    [(plan, kernels)], _ = compile_module(text)
    return run_compiled(plan, kernels, inputs), _kernels(kernels.source or "")


def _bits(x: torch.Tensor) -> torch.Tensor:
    return x.view({2: torch.int16, 4: torch.int32}[x.element_size()])


_TARGETS = ["native"]
if platform.machine() in ("x86_64", "AMD64"):
    _TARGETS += ["-mno-avx512f", "-mno-f16c"]  # F16C 256 bits wide; no F16C: integer code


@pytest.mark.parametrize("target", _TARGETS)
def test_f16_conversions_are_torchs_bit_for_bit(
    target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In blocks (a partial block at the end) and one element at a time (a transposed read, a
    transposed write), on every target the prelude has code for: with AVX-512, with F16C and
    AVX2 only, without F16C."""
    if target != "native":
        monkeypatch.setenv("CXX", f"{os.environ.get('CXX') or 'c++'} {target}")
    halves = _all_halves()
    want = _bits(halves.to(torch.float32))  # torch's vectorised conversion: quiet NaNs
    n = 65536 - 3
    (up,), source = _run(
        f"func @up(%h: f16[{n}]) -> (f32[{n}]) {{\n  %y = cast %h : f32[{n}]\n  return %y\n}}",
        [halves[:n]],
    )
    assert "fir_load_f16_block(" in source
    assert torch.equal(_bits(up), want[:n])
    # tiled (256 x 256): the tile is turned, then read in order; too short for tiles
    # (256 x 100): one element at a time
    for rows, cols, tiled in ((256, 256, True), (256, 100, False)):
        (up,), source = _run(
            f"func @up_t(%h: f16[{rows}, {cols}]) -> (f32[{cols}, {rows}]) {{\n"
            f"  %t = transpose %h {{dim0 = 0, dim1 = 1}} : f16[{cols}, {rows}]\n"
            f"  %y = cast %t : f32[{cols}, {rows}]\n  return %y\n}}",
            [halves[: rows * cols].reshape(rows, cols)],
        )
        assert ("fir_turn<" in source) == tiled and ("fir_from_f16(h[" in source) != tiled
        assert torch.equal(_bits(up), want[: rows * cols].reshape(rows, cols).t())

    floats = _edge_floats()
    want = _bits(floats.to(torch.float16))
    n = floats.numel() - 7
    (down,), source = _run(
        f"func @down(%f: f32[{n}]) -> (f16[{n}]) {{\n  %y = cast %f : f16[{n}]\n  return %y\n}}",
        [floats[:n]],
    )
    assert "fir_store_f16_block(" in source
    assert torch.equal(_bits(down), want[:n])
    rows = floats.numel() // 64
    (down, down_t), source = _run(
        f"""
func @down_t(%f: f32[{rows}, 64]) -> (f16[{rows}, 64], f16[64, {rows}]) {{
  %y = cast %f : f16[{rows}, 64]
  %t = transpose %y {{dim0 = 0, dim1 = 1}} : f16[64, {rows}]
  %u = mul %t, 1.0 : f16[64, {rows}]
  return %y, %u
}}""",
        [floats.reshape(rows, 64)],
    )
    assert "fir_store_f16_block(" not in source  # one store is strided: no vectorised loop
    assert torch.equal(_bits(down), want.reshape(rows, 64))
    assert torch.equal(_bits(down_t), want.reshape(rows, 64).t())


F16_PROGRAMS: dict[str, str] = {
    # the innermost loop of a row, 37 long: two blocks and a partial one
    "rows": """
func @f(%x: f16[7, 37], %w: f16[37]) -> (f16[7, 37]) {
  %a = mul %x, %w : f16[7, 37]
  %y = add %a, 1.0 : f16[7, 37]
  return %y
}""",
    # one parallel loop (above the grain) whose last block is partial; f32 in, f16 out
    "flat": """
func @f(%x: f32[1000, 33]) -> (f16[1000, 33]) {
  %a = add %x, 1.0 : f32[1000, 33]
  %y = cast %a : f16[1000, 33]
  return %y
}""",
    # tiles of 32 along 70: the last tile has a block and a partial block
    "transpose": """
func @f(%x: f16[100, 70], %y: f16[70, 100]) -> (f16[100, 70]) {
  %t = transpose %y {dim0 = 0, dim1 = 1} : f16[100, 70]
  %z = add %x, %t : f16[100, 70]
  return %z
}""",
    # a masked load converts alone; the store still in blocks
    "pad": """
func @f(%x: f16[6, 40]) -> (f16[6, 46]) {
  %q = pad %x {pad = [3, 3], value = 1.5} : f16[6, 46]
  %r = mul %q, 2.0 : f16[6, 46]
  return %r
}""",
    # stores of f64, integer and bool values into f16 buffers
    "other_dtypes": """
func @f(%x: f64[5, 40], %i: i32[5, 40], %b: bool[5, 40]) -> (f16[5, 40], f16[5, 40], f16[5, 40]) {
  %y = cast %x : f16[5, 40]
  %j = cast %i : f16[5, 40]
  %c = cast %b : f16[5, 40]
  return %y, %j, %c
}""",
    # f16 in reductions: the lanes' loads in blocks, the epilogue's loads and stores too
    "softmax": """
func @f(%x: f16[9, 37]) -> (f16[9, 37]) {
  %y = softmax %x {dim = 1} : f16[9, 37]
  return %y
}""",
    "layer_norm": """
func @f(%x: f16[6, 300], %w: f16[300], %b: f16[300]) -> (f16[6, 300]) {
  %y = layer_norm %x, %w, %b {normalized_shape = [300]} : f16[6, 300]
  return %y
}""",
    # reductions of rows and of the whole tensor (lanes: loads in blocks) and of columns
    # (interchanged blocks of 64 outputs: element by element)
    "sum_and_max": """
func @f(%x: f16[40, 70]) -> (f16[40], f16[], f16[70]) {
  %s = sum %x {dims = [1]} : f16[40]
  %m = max %x : f16[]
  %c = sum %x {dims = [0]} : f16[70]
  return %s, %m, %c
}""",
}


@pytest.mark.parametrize("name", sorted(F16_PROGRAMS))
def test_f16_blocks_match_the_interpreter(name: str) -> None:
    text = F16_PROGRAMS[name]
    inputs = _inputs_for(name, text)
    if name == "pad":  # NaN, infinities and subnormals through every path
        inputs[0].view(-1)[:4] = torch.tensor([math.nan, -math.inf, 3e-6, -0.0])
    source = _kernels(check_against_interpreter(text, inputs, rtol=1e-2, atol=1e-2)[0])
    assert "fir_load_f16_block(" in source or "fir_store_f16_block(" in source
    if name in ("rows", "flat", "softmax", "transpose"):  # a length that is not 16k
        assert ", fir_n);" in source


def test_which_f16_loads_and_stores_convert_in_blocks() -> None:
    """Those that step by one element along the loop, except: a masked load (it may not read
    where the mask is false), a load whose value only goes to f16 stores (a copy of its bits), a
    store of such a load, and a store of a value made before the loop."""
    from fir.backends.plan.instructions import Compute, Load, Store
    from fir.backends.plan.schedule import f16_blocks

    x0, x1 = (sympy.Symbol(n, integer=True, nonnegative=True) for n in ("x0", "x1"))
    f16, f32 = DType.F16, DType.F32
    row = 64 * x0 + x1
    items = [
        Load("a", "A", row, f16),  # converted: read by a computation
        Load("b", "B", row, f16),  # a copy only: its bits go to C
        Load("c", "C2", 64 * x1 + x0, f16),  # strided
        Load("m", "M", row, f16, mask="a_pos", other=Literal(0.0)),  # masked
        Compute("s", "add", ("a", "c"), f32),
        Compute("h", "cast", ("s",), f16),
        Store("C", row, "b", f16),  # a copy of bits
        Store("D", row, "h", f16),  # converted
        Store("E", row, "s", f32),  # not f16
        Store("F", 64 * x1 + x0, "h", f16),  # strided
        Store("G", row, "inv", f16),  # made before the loop
        Store("H", row, "m", f16),  # a masked load's value: converted
    ]
    loads, stores = f16_blocks(items, "x1")
    assert [i.dst for i in loads] == ["a"]
    assert [i.buffer for i in stores] == ["D", "H"]


def test_f16_blocks_with_symbolic_sizes() -> None:
    """The block loop of a size known at run time: none, one partial, full ones and a partial
    one, above the grain (split among threads)."""
    text = """
func @f(%x: f16[s0, s1], %w: f16[s1]) -> (f16[s0, s1], f16[s0, s1]) {
  %a = mul %x, %w : f16[s0, s1]
  %y = exp %a : f16[s0, s1]
  %z = softmax %x {dim = 1} : f16[s0, s1]
  return %y, %z
}"""
    module = parse_pipeline("fusion").run(parse_module(text, "<test>"))
    (plan,) = plan_module(module)
    kernels = build_program(plan)
    assert "fir_store_f16_block(" in _kernels(kernels.source or "")
    reference = parse_module(text, "<test>").funcs[0]
    for rows, cols in [(1, 1), (3, 15), (2, 16), (5, 17), (4, 100), (300, 130)]:
        g = torch.Generator().manual_seed(rows + cols)
        xs = [torch.randn(rows, cols, generator=g).half(), torch.randn(cols, generator=g).half()]
        for w, o in zip(run_graph(reference, xs), run_compiled(plan, kernels, xs)):
            torch.testing.assert_close(o, w, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("libmvec", [False, True])
def test_prelude_header_is_c_plus_plus_on_its_own(libmvec: bool, tmp_path: Path) -> None:
    """``backends/cpp/prelude.h`` is a header a C++ compiler reads by itself (the text every
    generated translation unit starts with, kept as a file of its own), with and without the
    vector math library's declarations, under the flags the back end builds with."""
    import subprocess

    from fir.backends.cpp import build
    from fir.backends.cpp.prelude import PRELUDE

    header = Path(build.__file__).with_name("prelude.h")
    assert header.read_text() == PRELUDE and PRELUDE.startswith("// Generated by FIR")
    cxx = build.compiler()
    flags = [f for f in build.flags(build.compiler_identity(tuple(cxx))) if f != "-shared"]
    cmd = [*cxx, *flags, "-fsyntax-only", "-Werror", "-x", "c++", str(header)]
    if libmvec:
        cmd.insert(len(cxx), "-DFIR_LIBMVEC")
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
