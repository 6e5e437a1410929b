"""A kernel's loops as the schedule runs them (``backends/plan/loop_nest.py``): the tree both
scalar renderers walk, for each shape of nest the schedule decides (the plan's order,
interchanged, tiles with a turned load, column blocks, a split whole-tensor reduction)."""

from __future__ import annotations

from typing import Any

import pytest
from fir.backends.plan import KernelPlan, plan_program
from fir.backends.plan.loop_nest import (
    NODE_HANDLER,
    Columns,
    Lanes,
    Node,
    Run,
    Span,
    Turn,
    loop_nest,
)
from fir.backends.plan.schedule import CPP, LLVM, Family, schedule
from fir.ir.parser import parse_module
from fir.ir.verifier import verify_module
from fir.passes.pipeline import parse_pipeline
from test_schedule import INTERCHANGE  # a nest whose innermost loop stores with a stride


def kernels(text: str, pipeline: str = "fusion") -> list[KernelPlan]:
    module = parse_module(text, "<test>")
    verify_module(module)
    module = parse_pipeline(pipeline).run(module)
    return list(plan_program(module.funcs[0]).kernels())


def tree(text: str, family: Family, pipeline: str = "fusion") -> list[Node]:
    (plan,) = kernels(text, pipeline)
    return loop_nest(plan, schedule(plan, family))


def shape(nodes: list[Node]) -> list[Any]:
    """The nodes as nested tuples: a run ``(var, span, block, threads, body)`` (a reduction's
    in lanes: ``(var, span, "lanes", lanes, body)``), the plan's instructions as ``"code"``."""
    out: list[Any] = []
    for n in nodes:
        if isinstance(n, Run) and n.lanes:
            out.append((n.var, n.span.value, "lanes", n.lanes, shape(n.body)))
        elif isinstance(n, Run):
            out.append((n.var, n.span.value, n.block, n.threads, shape(n.body)))
        elif isinstance(n, Turn):
            out.append(("turn", n.outer.var, n.inner.var, n.side, [t.load.dst for t in n.loads]))
        elif isinstance(n, Columns):
            out.append(("columns", [i.acc for i in n.accs], shape(n.segments)))
        elif isinstance(n, Lanes):
            out.append(("lanes", n.loop.var, n.per_lane is not None))
        elif not out or out[-1] != "code":
            out.append("code")
    return out


def in_lanes(var: str, span: str, lanes: int) -> tuple[Any, ...]:
    """The shape of reduction loop ``var`` in ``lanes``: its whole blocks of lanes, each
    block's lanes running the body, then the remainder."""
    blocks = (var, "lanes", lanes, 0, [("lanes", var, False)])
    return (var, span, "lanes", lanes, [blocks, (var, "rest", 0, 0, ["code"])])


TRANSPOSE_ADD = """
func @f(%x: f32[256, 256], %y: f32[256, 256]) -> (f32[256, 256]) {
  %t = transpose %y {dim0 = 0, dim1 = 1} : f32[256, 256]
  %z = add %x, %t : f32[256, 256]
  return %z
}
"""


@pytest.mark.parametrize(("family", "threads"), [(CPP, 2), (LLVM, 1)])
def test_a_tiled_nest_turns_its_transposed_load(family: Family, threads: int) -> None:
    nodes = tree(TRANSPOSE_ADD, family)
    elements = ("x0", "tile", 64, 0, [("x1", "tile", 64, 0, ["code"])])
    turn = ("turn", "x0", "x1", 64, ["n0_1"])
    tiles = ("x1", "tiles", 64, 0, [turn, elements])
    assert shape(nodes) == [("x0", "tiles", 64, threads, [tiles])]
    (top,) = nodes
    assert isinstance(top, Run)
    (inner,) = top.body
    assert isinstance(inner, Run)
    copy = inner.body[0]
    assert isinstance(copy, Turn)
    assert [t.along for t in copy.loads] == [256]  # y's stride along x1


@pytest.mark.parametrize("family", [CPP, LLVM], ids=["cpp", "llvm"])
def test_a_tiled_nest_with_nothing_to_turn_has_no_turn(family: Family) -> None:
    """f64 transposed reads keep the vectoriser's gathers: the tiles hold the element loops
    alone (no copy, and no edge arithmetic for one)."""
    nodes = tree(TRANSPOSE_ADD.replace("f32", "f64"), family)
    (top,) = nodes
    assert isinstance(top, Run)
    (tiles,) = top.body
    assert isinstance(tiles, Run) and tiles.span is Span.TILES
    assert not any(isinstance(n, Turn) for n in tiles.body)
    assert [n.span for n in tiles.body if isinstance(n, Run)] == [Span.TILE]


def test_the_schedules_order_moves_the_body_innermost() -> None:
    text = INTERCHANGE  # the plan's innermost loop stores with a stride
    for family in (CPP, LLVM):
        nodes = tree(text, family, "")
        assert shape(nodes) == [("x1", "whole", 0, 1, [("x0", "whole", 0, 0, ["code"])])]
        # the plan's outermost loop (x0), whose range LLVM's runtime splits, runs innermost
        (top,) = nodes
        assert isinstance(top, Run) and isinstance(top.body[0], Run)
        assert (top.loop.parallel, top.body[0].loop.parallel) == (False, True)


def test_a_kernel_of_one_loop_hoists_nothing() -> None:
    text = """
func @f(%x: f32[100000]) -> (f32[100000]) {
  %y = exp %x : f32[100000]
  return %y
}
"""
    (top,) = tree(text, CPP)
    assert isinstance(top, Run)
    assert (top.threads, top.hoists, top.items is not None) == (1, False, True)


def test_a_column_reduction_runs_each_segment_over_a_block() -> None:
    text = """
func @f(%x: f32[512, 256]) -> (f32[256]) {
  %s = sum %x {dims = [0]} : f32[256]
  return %s
}
"""
    for family in (CPP, LLVM):
        segments = [("lanes", "x0", False), ("r0", "whole", 0, 0, [("lanes", "x0", True)])]
        segments.append(("lanes", "x0", False))
        columns = ("columns", ["acc0"], segments)
        assert shape(tree(text, family)) == [("x0", "blocks", 64, 1, [columns])]


def test_a_row_reductions_lanes_are_the_familys() -> None:
    text = """
func @f(%x: f32[256, 512]) -> (f32[256], f32[256], f32[256]) {
  %s = sum %x {dims = [1]} : f32[256]
  %m = mean %x {dims = [1]} : f32[256]
  %v = var %x {dims = [1]} : f32[256]
  return %s, %m, %v
}
"""

    def rows(family: Family) -> list[Any]:
        (top,) = tree(text, family)
        assert isinstance(top, Run) and top.phases
        return [n for n in shape(top.body) if n != "code"]

    # every kind in C++'s 16 lanes; LLVM vectorises a sum itself, Welford in its 32 lanes
    assert rows(CPP) == [in_lanes("r0", "whole", 16)] * 2
    assert rows(LLVM) == [("r0", "whole", 0, 0, ["code"]), in_lanes("r0", "whole", 32)]
    # Welford's count, the same in every lane, is read once per block
    (top,) = tree(text, LLVM)
    welford = [n for n in top.body if isinstance(n, Run) and n.lanes]
    (lanes,) = welford[0].body[0].body
    assert isinstance(lanes, Lanes) and lanes.lanes == 32 and len(lanes.counted) == 1


def test_only_cpp_splits_a_whole_tensor_reduction() -> None:
    text = """
func @f(%x: f32[4096, 64]) -> (f32[]) {
  %s = sum %x : f32[]
  return %s
}
"""
    split = in_lanes("r0", "split", 16)
    assert shape(tree(text, CPP)) == ["code", split, "code"]
    assert shape(tree(text, LLVM)) == ["code", ("r0", "whole", 0, 0, ["code"]), "code"]


def test_both_renderers_handle_every_node() -> None:
    pytest.importorskip("llvmlite")
    from fir.backends.cpp.loops import KernelWriter
    from fir.backends.llvm.render import _Kernel

    for walker in (KernelWriter, _Kernel):
        assert [h for h in NODE_HANDLER.values() if not callable(getattr(walker, h, None))] == []
