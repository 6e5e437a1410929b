"""``unroll-reductions``: which reductions become pointwise nodes, that ``inline`` then takes
them into their readers, and that the program computes the same values (the reference
interpreter and the C++ back end, random inputs, NaNs among them)."""

from __future__ import annotations

import pytest
import test_cpp_render as cpp
import torch
from fir.ir.graph import LoopNode
from fir.ir.interpreter import run_graph
from fir.ir.parser import parse_module
from fir.passes.pipeline import parse_pipeline

# Llama's backward of grouped attention: the 4 query heads that share a key head sum their key
# gradients, then the rotary embedding's backward reads that sum at two positions (a rotation
# by half the head). Cut to 2 x 4 key heads of 64 tokens x 16.
GROUPED_KEY_GRAD = """func @f(%cos: bf16[64, 16], %sin: bf16[64, 16], %dk: bf16[2, 16, 64, 16]) -> (bf16[2, 4, 64, 16]) {
  %v = reshape %dk : bf16[2, 4, 4, 64, 16]
  %s = sum %v {dims = [2], keepdim = true} : bf16[2, 4, 1, 64, 16]
  %q = squeeze %s {dims = [2]} : bf16[2, 4, 64, 16]
  %a = mul %q, %sin : bf16[2, 4, 64, 16]
  %lo = slice %a {dim = 3, end = 8} : bf16[2, 4, 64, 8]
  %hi = slice %a {dim = 3, start = 8, end = 16} : bf16[2, 4, 64, 8]
  %n = neg %lo : bf16[2, 4, 64, 8]
  %p0 = pad %n {pad = [8, 0], value = 0.0} : bf16[2, 4, 64, 16]
  %p1 = pad %hi {pad = [0, 8], value = 0.0} : bf16[2, 4, 64, 16]
  %r = add %p0, %p1 : bf16[2, 4, 64, 16]
  %c = mul %q, %cos : bf16[2, 4, 64, 16]
  %out = add %r, %c : bf16[2, 4, 64, 16]
  return %out
}
"""


def _nodes(text: str, pipeline: str) -> list[LoopNode]:
    module = parse_pipeline(pipeline).run(parse_module(text, "<test>"))
    return [n for n in module.funcs[0].nodes if isinstance(n, LoopNode)]


def _reduce_then_scale(op: str, dtype: str, shape: str, out: str, dims: str) -> str:
    return (
        f"func @f(%x: {dtype}[{shape}]) -> ({dtype}[{out}]) {{\n"
        f"  %y = {op} %x {{dims = [{dims}]}} : {dtype}[{out}]\n"
        f"  %z = add %y, %y : {dtype}[{out}]\n  return %z\n}}\n"
    )


def test_a_small_reduction_read_by_a_loop_node_becomes_pointwise() -> None:
    text = _reduce_then_scale("sum", "f32", "6, 4", "6", "1")
    nodes = _nodes(text, "decompose,lower,unroll-reductions")
    y = next(n for n in nodes if n.results[0].name == "y")
    assert y.reduction is None and not y.reduction_ranges and y.body is not None
    assert y.attrs["unrolled"] == "sum over 4 elements"
    # each element read once, in the order the reduction loop met them
    assert [str(op.index) for op in y.body.loads()] == ["4*i0", "4*i0 + 1", "4*i0 + 2", "4*i0 + 3"]


@pytest.mark.parametrize(
    "text",
    [
        _reduce_then_scale("sum", "f32", "6, 9", "6", "1"),  # 9 elements: past max-size
        "func @f(%x: f32[6, 4]) -> (f32[6]) {\n  %y = sum %x {dims = [1]} : f32[6]\n  return %y\n}\n",
        "func @f(%x: f32[6, n]) -> (f32[6]) {\n  %y = sum %x {dims = [1]} : f32[6]\n"
        "  %z = add %y, %y : f32[6]\n  return %z\n}\n",
        "func @f(%x: f32[6, 4]) -> (i64[6]) {\n  %y = argmax %x {dim = 1} : i64[6]\n"
        "  %z = add %y, %y : i64[6]\n  return %z\n}\n",
    ],
    ids=["too-many-elements", "graph-output", "symbolic", "argmax"],
)
def test_reductions_that_stay(text: str) -> None:
    nodes = _nodes(text, "decompose,lower,unroll-reductions")
    assert any(n.reduction is not None for n in nodes)
    assert not any("unrolled" in n.attrs for n in nodes)


def _kernels(pipeline: str) -> int:
    from fir.backends.plan.program import plan_program

    g = parse_pipeline(pipeline).run(parse_module(GROUPED_KEY_GRAD, "<test>")).funcs[0]
    return len(list(plan_program(g).kernels()))


def test_the_grouped_key_gradient_is_one_kernel() -> None:
    # the sum and the rotation's backward were two kernels (the sum realized as a reduction)
    assert _kernels("cuda") == 1
    without = "decompose,pad-matmul,cse,lower,inline,split-reductions,deps,dce,fuse,reorder"
    assert _kernels(without) == 2


PROGRAMS = {
    "bf16-sum-rotation": GROUPED_KEY_GRAD,
    "f32-max": _reduce_then_scale("max", "f32", "5, 3, 7", "5, 7", "1"),
    "f32-min-two-dims": _reduce_then_scale("min", "f32", "5, 2, 7, 4", "5, 7", "1, 3"),
    "f32-prod": _reduce_then_scale("prod", "f32", "9, 5", "9", "1"),
    "f16-sum": _reduce_then_scale("sum", "f16", "9, 8", "9", "1"),
    "i32-sum": _reduce_then_scale("sum", "i32", "9, 8", "9", "1"),
    "bool-any": "func @f(%x: f32[9, 3]) -> (bool[9]) {\n  %p = gt %x, 0.5 : bool[9, 3]\n"
    "  %y = any %p {dims = [1]} : bool[9]\n  %z = logical_not %y : bool[9]\n  return %z\n}\n",
    "softmax-of-four": "func @f(%x: f32[7, 4]) -> (f32[7, 4]) {\n"
    "  %y = softmax %x {dim = 1} : f32[7, 4]\n  return %y\n}\n",
}


def _inputs(text: str, nans: bool) -> list[torch.Tensor]:
    ref = parse_module(text, "<ref>").funcs[0]
    xs = cpp.random_inputs(ref, seed=3)
    if nans:
        for x in xs:
            if x.dtype.is_floating_point and x.numel() > 3:
                x.view(-1)[::5] = float("nan")
    return xs


@pytest.mark.parametrize("nans", [False, True])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_the_pipelines_keep_the_values(name: str, nans: bool) -> None:
    text = PROGRAMS[name]
    xs = _inputs(text, nans)
    want = run_graph(parse_module(text, "<ref>").funcs[0], [x.clone() for x in xs])
    for pipeline in ("fusion", "cuda"):
        nodes = parse_pipeline(pipeline).run(parse_module(text, "<t>")).funcs[0]
        got = run_graph(nodes, [x.clone() for x in xs])
        for w, o in zip(want, got):
            torch.testing.assert_close(o, w, rtol=1e-3, atol=1e-3, equal_nan=True)
    # the C++ back end keeps a fused chain of bf16/f16 ops in f32 where the interpreter rounds
    # each op (the same without this pass): a unit in the last place of values up to 8
    narrow = "f16[" in text
    tol = 0.07 if narrow else 1e-3
    cpp.check_against_interpreter(text, [x.clone() for x in xs], rtol=tol, atol=tol)
