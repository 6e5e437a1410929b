"""A literal operand of an f16 or bf16 elementwise op, in the interpreter and the CPU back ends.

A literal takes the op's dtype (docs/language.md): ``add %x, 0.3`` on f16 adds 0.3 rounded to
half, as eager PyTorch on the CPU does with ``x + 0.3``. Eager multiplies and divides by a
trailing Python scalar at f32 instead (``x * 0.3`` is ``x * 0.3f``, rounded once), and the
interpreter, which hands torch the scalar, does the same: :data:`SCALAR_AT_COMPUTE_PRECISION`.
The C++ and LLVM back ends used to keep every trailing literal at f32 (and LLVM every leading
one too): ``mod %x, 0.3`` on f16 differed from the interpreter in half of its elements."""

from __future__ import annotations

import pytest
import torch
from fir.backends.compile import compile_function
from fir.ir.graph import Literal
from fir.ir.interpreter import apply_elementwise, run_graph
from fir.ir.ops import (
    BINARY_FLOAT,
    BINARY_NUMERIC,
    COMPARE,
    SCALAR_IN_OP_DTYPE,
    literal_in_op_dtype,
)
from fir.ir.parser import parse_module
from fir.passes.pipeline import parse_pipeline

OPS = BINARY_NUMERIC + BINARY_FLOAT + COMPARE
DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}


def _inputs(dtype: torch.dtype, n: int = 1024) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.cat([torch.randn(n, generator=g) * 3, torch.randn(n, generator=g) * 0.01]).to(
        dtype
    )


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(((a == b) | (a.isnan() & b.isnan())).all())


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_the_rule_is_the_interpreters(name: str) -> None:
    """For every binary op, a trailing literal after a tensor behaves as the rule says:
    rounded to the dtype, or at f32 (ops whose two readings agree on these inputs prove
    nothing either way and are skipped)."""
    dtype = DTYPES[name]
    x = _inputs(dtype)
    decided = 0
    for op in OPS:
        for value in (0.3, 1.7, 7.77):
            got = apply_elementwise(op, [x, Literal(value)])
            rounded = apply_elementwise(op, [x, torch.tensor(value, dtype=dtype)])
            wide = apply_elementwise(op, [x.float(), torch.tensor(value)])
            wide = wide if wide.dtype == torch.bool else wide.to(dtype)
            if _same(rounded, wide):
                continue
            decided += 1
            assert _same(got, rounded if literal_in_op_dtype(op, 1, True) else wide), (op, value)
    assert decided > 20


def _program(dtype: str, leading: bool) -> tuple[str, list[str]]:
    """One function computing every op with the literal 0.3 leading or trailing."""
    ops = [op for op in OPS if not (leading and op == "floordiv")]
    lines, outs, types = [], [], []
    for k, op in enumerate(ops):
        args = "0.3, %x" if leading else "%x, 0.3"
        rt = "bool" if op in COMPARE else dtype
        lines.append(f"  %y{k} = {op} {args} : {rt}[2048]")
        outs.append(f"%y{k}")
        types.append(f"{rt}[2048]")
    body = "\n".join(lines)
    text = f"func @f(%x: {dtype}[2048]) -> ({', '.join(types)}) {{\n{body}\n  return {', '.join(outs)}\n}}\n"
    return text, ops


@pytest.mark.parametrize("backend", ["cpp", "llvm"])
@pytest.mark.parametrize("leading", [False, True])
@pytest.mark.parametrize("name", sorted(DTYPES))
def test_cpu_back_ends_agree_with_the_interpreter_bit_for_bit(
    backend: str, leading: bool, name: str
) -> None:
    # floordiv with a leading literal is left out: eager's own f16 result there depends on
    # the tensor's length (its vectorised and scalar loops round differently), and the
    # interpreter follows the vectorised one
    text, ops = _program(name, leading)
    x = _inputs(DTYPES[name])
    want = run_graph(parse_module(text).funcs[0], [x])
    g = parse_pipeline("fusion").run(parse_module(text)).funcs[0]
    got = compile_function(g, backend)(x)
    wrong = [op for op, a, b in zip(ops, got, want) if not _same(a, b)]
    assert not wrong, wrong


GPU_ROUNDED = sorted(SCALAR_IN_OP_DTYPE)


@pytest.mark.parametrize("leading", [False, True])
def test_triton_rounds_the_scalar_of_remainder_atan2_hypot(leading: bool) -> None:
    """On a GPU eager keeps most scalars at f32 (the Triton back end does too), but ``%``,
    ``fmod``, ``atan2`` and ``hypot`` take the scalar in the tensor's dtype, as the interpreter
    does: the Triton back end agrees with it bit for bit on those (f16; in Triton's
    interpreter here, where bf16 conversions truncate)."""
    import os

    pytest.importorskip("triton")
    if not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("no GPU, and Triton was not imported in interpreter mode")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    args = "0.3, %x" if leading else "%x, 0.3"
    lines = [f"  %y{k} = {op} {args} : f16[2048]" for k, op in enumerate(GPU_ROUNDED)]
    outs = ", ".join(f"%y{k}" for k in range(len(GPU_ROUNDED)))
    types = ", ".join(["f16[2048]"] * len(GPU_ROUNDED))
    text = (
        f"func @f(%x: f16[2048]) -> ({types}) {{\n" + "\n".join(lines) + f"\n  return {outs}\n}}\n"
    )
    x = _inputs(torch.float16)
    want = run_graph(parse_module(text).funcs[0], [x])
    g = parse_pipeline("cuda").run(parse_module(text)).funcs[0]
    got = compile_function(g, "triton", device=device)(x.to(device))
    wrong = [op for op, a, b in zip(GPU_ROUNDED, got, want) if not _same(a.cpu(), b)]
    assert not wrong, wrong
