"""The ``reorder`` pass and loop orders: the rules on small nodes, semantics with the reference
interpreter (kernels run tiled, in each node's loop order), kernels kept legal, deps kept up to
date, and the reordering round of ``fuse``. The golden tests are tests/lit/reorder."""

from __future__ import annotations

import glob
import os

import pytest
import strategies as S
import torch
from fir.ir.errors import FirError
from fir.ir.graph import Loop, LoopNode, LoopSchedule
from fir.ir.interpreter import run_graph
from fir.ir.memory_plan import plan_problems
from fir.ir.parser import parse_file, parse_module
from fir.ir.printer import print_module
from fir.ir.verifier import verify_module
from fir.passes.analysis.deps import canonical_prefix, local_deps
from fir.passes.fusion.loop_order import plan_loops
from fir.passes.fusion.reorder import kernel_problem
from fir.passes.pipeline import parse_pipeline
from fir.passes.verify import check_kernels
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensor_programs import random_program
from test_fuse import SETTINGS, assert_same, example_inputs, round_trip, run
from test_plan_memory import random_inputs, random_loop_program

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = sorted(glob.glob(os.path.join(ROOT, "examples", "**", "*.fir"), recursive=True))


def node(text: str) -> LoopNode:
    m = parse_module(text)
    verify_module(m)
    n = m.funcs[0].nodes[-1]
    assert isinstance(n, LoopNode)
    return n


def order_of(n: LoopNode) -> str:
    plan = plan_loops(n)
    n.schedule = plan.schedule
    from fir.ir.printer import schedule_str

    return schedule_str(n)


def one_node(
    over: str, loads: list[str], out: str = "f32[4, 8]", args: str = "%x: f32[4, 8]"
) -> str:
    body = "\n".join(f"    %{k} = load {ld}" for k, ld in enumerate(loads))
    acc = "%0"
    lines = [body]
    for k in range(1, len(loads)):
        lines.append(f"    %{len(loads) + k - 1} = add {acc}, %{k}")
        acc = f"%{len(loads) + k - 1}"
    return (
        f"func @f({args}) -> ({out}) {{\n  %y = pointwise : {out} over ({over}) {{\n"
        + "\n".join(lines)
        + f"\n    yield {acc}\n  }}\n  return %y\n}}\n"
    )


# ---------------------------------------------------------------------------------------------
# The rules


def test_row_major_merges_into_one_loop() -> None:
    n = node(one_node("i0 < 4, i1 < 8", ["%x[8*i0 + i1]"]))
    assert order_of(n) == "[i0, i1] < 32"


def test_votes_put_the_most_contiguous_loop_inside() -> None:
    args = "%x: f32[4, 8], %a: f32[8, 4], %b: f32[8, 4]"
    n = node(one_node("i0 < 4, i1 < 8", ["%a[i0 + 4*i1]", "%b[i0 + 4*i1]"], args=args))
    assert order_of(n) == "i1 < 8, i0 < 4"  # two reads along i0 beat the write along i1


def test_small_broadcast_parameters_do_not_outvote_the_streamed_tensors() -> None:
    """A batch norm's channel loop (i1) with four per-channel parameters: by count they outvote
    the read and the write contiguous along i2 (4 against 2), which put the channel loop
    innermost, 64 elements apart, and tiled the node; each vote weighs the elements its access
    touches, so the streamed tensors win and the parameters stay loop-invariant inside."""
    args = "%x: f32[8, 16, 64], %m: f32[16], %v: f32[16], %w: f32[16], %b: f32[16]"
    loads = ["%x[1024*i0 + 64*i1 + i2]", "%m[i1]", "%v[i1]", "%w[i1]", "%b[i1]"]
    n = node(one_node("i0 < 8, i1 < 16, i2 < 64", loads, out="f32[8, 16, 64]", args=args))
    plan = plan_loops(n)
    assert plan.tile is None
    assert order_of(n) == "i0 < 8, i1 < 16, i2 < 64"


def test_a_tie_keeps_the_order_of_the_ranges() -> None:
    args = "%x: f32[4, 8], %a: f32[8, 4]"
    n = node(one_node("i0 < 4, i1 < 8", ["%a[i0 + 4*i1]"], args=args))
    assert order_of(n) == "i0 < 4, i1 < 8"  # the read along i0, the write along i1


def test_size_one_loops_are_squeezed() -> None:
    n = node(one_node("i0 < 4, i1 < 1, i2 < 8", ["%x[8*i0 + i2]"], out="f32[4, 1, 8]"))
    assert order_of(n) == "[i0, i2] < 32"


def test_broadcast_does_not_merge() -> None:
    args = "%x: f32[4, 8], %b: f32[8]"
    n = node(one_node("i0 < 4, i1 < 8", ["%x[8*i0 + i1]", "%b[i1]"], args=args))
    assert order_of(n) == "i0 < 4, i1 < 8"


def test_floordiv_blocks_merging() -> None:
    args = "%x: f32[4, 8], %z: f32[16]"
    n = node(one_node("i0 < 4, i1 < 8", ["%x[8*i0 + i1]", "%z[floordiv(8*i0 + i1, 2)]"], args=args))
    assert order_of(n) == "i0 < 4, i1 < 8"


def test_tiling_hint_names_two_loops_and_why() -> None:
    args = "%x: f32[4, 8], %a: f32[8, 4]"
    plan = plan_loops(
        node(one_node("i0 < 4, i1 < 8", ["%x[8*i0 + i1]", "%a[i0 + 4*i1]"], args=args))
    )
    assert plan.tile == ("i0", "i1")
    assert "along i0: %a (read)" in plan.tile_reason
    assert "along i1: %x (read), %y (written)" in plan.tile_reason


def test_indirect_loads_do_not_vote() -> None:
    text = """
func @f(%t: f32[10, 8], %ids: i64[4]) -> (f32[4, 8]) {
  %y = pointwise : f32[4, 8] over (i0 < 4, i1 < 8) {
    %0 = load %ids[i0]
    %1 = indirect %0 < 10
    %2 = load %t[8*%1 + i1]
    yield %2
  }
  return %y
}
"""
    assert order_of(node(text)) == "i0 < 4, i1 < 8"


def test_schedule_checked_by_the_verifier() -> None:
    """A schedule built in Python is checked as the parser checks the text."""
    m = parse_module(one_node("i0 < 4, i1 < 8", ["%x[8*i0 + i1]"]))
    y = m.funcs[0].nodes[0]
    assert isinstance(y, LoopNode)
    (i0, _), (i1, _) = y.ranges
    y.schedule = LoopSchedule([Loop((i1,), 8)])
    with pytest.raises(FirError, match="leaves out loop 'i0'"):
        verify_module(m)
    y.schedule = LoopSchedule([Loop((i0, i1), 30)])
    with pytest.raises(FirError, match="runs 32 times, not 30"):
        verify_module(m)
    y.schedule = LoopSchedule([Loop((i1,), 8), Loop((i0,), 4)])
    verify_module(m)
    assert "order (i1 < 8, i0 < 4)" in print_module(m)


# ---------------------------------------------------------------------------------------------
# Dependencies follow the loop order


def test_deps_follow_the_order_and_are_refreshed() -> None:
    text = one_node("i0 < 4, i1 < 8", ["%a[i0 + 4*i1]"], args="%x: f32[4, 8], %a: f32[8, 4]")
    m = run(text, "deps")
    n = m.funcs[0].nodes[0]
    assert isinstance(n, LoopNode) and n.deps is not None
    n.schedule = LoopSchedule([Loop((n.ranges[1][0],), 8), Loop((n.ranges[0][0],), 4)])
    d = local_deps(n, canonical_prefix(m.funcs[0]))
    assert [str(r.index) for r in d.reads] == ["4*c0 + c1"]  # contiguous along the inner loop
    assert [str(w.index) for w in d.writes] == ["c0 + 8*c1"]
    m = run(m, "reorder")
    n = m.funcs[0].nodes[0]
    assert n.deps is not None and n.deps.reads == local_deps(n, "c").reads


# ---------------------------------------------------------------------------------------------
# Semantics


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: os.path.relpath(p, ROOT))
def test_examples_keep_their_results(path: str) -> None:
    original = parse_file(path)
    inputs = example_inputs(original)
    expected = run_graph(original.funcs[0], inputs)
    for pipeline in (
        "decompose,lower,inline,deps,dce,reorder",
        "decompose,lower,inline{disable},deps,dce,fuse,reorder,plan-memory",
    ):
        m = round_trip(run(parse_file(path), pipeline))
        assert_same(run_graph(m.funcs[0], inputs, kernels="tiled"), expected, f"{path}: {pipeline}")
        for g in m.funcs:
            assert all(n.schedule is not None for n in g.nodes if isinstance(n, LoopNode))
            assert plan_problems(g) == []


@SETTINGS
@given(st.data())
def test_random_programs_with_views_match_eager(data: st.DataObject) -> None:
    """Random tensor programs weighted to views (permute, transpose, reshape, expand, slices)
    next to elementwise ops and reductions; reorder alone and after fuse."""
    families = ("view", "view", "unary", "binary", "reduction")
    p = random_program(
        S.HypothesisChooser(data.draw), num_ops=data.draw(st.integers(2, 10)), families=families
    )
    inline = data.draw(st.sampled_from(["inline", "inline{disable}"]))
    tail = data.draw(
        st.sampled_from(["reorder", "fuse,reorder", "reorder,fuse", "fuse{reorder=false},reorder"])
    )
    m = round_trip(run(p.text, f"decompose,lower,{inline},deps,dce,{tail},plan-memory"))
    assert_same(run_graph(m.funcs[0], p.inputs, kernels="tiled"), p.expected, p.text)


@settings(max_examples=S.examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**31 - 1), st.sampled_from(["reorder", "fuse,reorder", "reorder,fuse"]))
def test_random_loop_programs_keep_their_results(seed: int, pipeline: str) -> None:
    text = random_loop_program(seed)
    original = parse_module(text)
    inputs = random_inputs(original.funcs[0], seed)
    expected = run_graph(original.funcs[0], inputs)
    m = round_trip(run(text, pipeline))
    assert_same(run_graph(m.funcs[0], inputs, kernels="tiled"), expected, text)
    for k in m.funcs[0].kernels:
        assert kernel_problem(m.funcs[0], k) is None


def test_reorder_keeps_kernels_legal() -> None:
    """Kernels whose nodes the stride votes would reorder apart keep their order."""
    text = """
func @f(%x: f32[16, 16], %y: f32[16, 16]) -> (f32[16, 16], f32[16, 16]) {
  %e = exp %x : f32[16, 16]
  %et = transpose %e {dim0 = 0, dim1 = 1} : f32[16, 16]
  %t = add %et, %y : f32[16, 16]
  return %e, %t
}
"""
    fused = run(text, "decompose,lower,inline,deps,dce,fuse")
    g = fused.funcs[0]
    assert len(g.kernels) == 1
    reordered = run(fused, "reorder")
    g = reordered.funcs[0]
    check_kernels(reordered)
    t = g.kernels[0].nodes[1]
    assert isinstance(t, LoopNode) and t.schedule is not None
    assert [loop.vars[0].name for loop in t.schedule.loops] == ["i1", "i0"]
    x, y = torch.randn(16, 16), torch.randn(16, 16)
    e, tt = run_graph(g, [x, y], kernels="tiled")
    torch.testing.assert_close(tt, torch.exp(x).t() + y)


def test_reordering_round_unlocks_the_transposed_fusion() -> None:
    text = one_node(
        "i0 < 8, i1 < 8", ["%p[i0 + 8*i1]"], out="f32[8, 8]", args="%x: f32[8, 8]"
    ).replace(
        "  %y = pointwise",
        "  %p = pointwise : f32[8, 8] over (i0 < 8, i1 < 8) {\n    %0 = load %x[8*i0 + i1]\n"
        "    %1 = exp %0\n    yield %1\n  }\n  %y = pointwise",
    )
    assert len(run(text, "fuse").funcs[0].kernels) == 1
    assert not run(text, "fuse{reorder=false}").funcs[0].kernels
    x = torch.randn(8, 8)
    m = run(text, "fuse")
    torch.testing.assert_close(run_graph(m.funcs[0], [x], kernels="tiled")[0], torch.exp(x).t())


def test_random_loop_programs_exercise_the_rules() -> None:
    """The random programs above are not vacuous: loops get reordered, merged and tiled."""
    totals: dict[str, int] = {}
    for seed in range(40):
        p = parse_pipeline("fuse,reorder")
        p.run(parse_module(random_loop_program(seed)))
        for key, value in p.passes[1].statistics.items():
            totals[key] = totals.get(key, 0) + value
    assert totals["reordered"] >= 3 and totals["merged"] >= 20 and totals["tiled"] >= 3, totals
    assert totals["kept-for-kernels"] >= 1, totals


def test_doc_examples() -> None:
    """The example of docs/passes/reorder.md is reorder's output for its input (order clauses
    and tiling hints removed), and the language reference shows the same."""
    import re

    for doc in ("docs/passes/reorder.md", "docs/language.md"):
        with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
            text = f.read()
        block = text.split("```fir\nfunc @ordered(")[1].split("```")[0]
        block = "func @ordered(" + block
        source = re.sub(r" order \([^)]*\)", "", block)
        source = re.sub(r" \{tile = .*?\"\}", "", source)
        m = run(source, "reorder")
        assert print_module(m) == block, doc
        run_graph(m.funcs[0], example_inputs(m), kernels="tiled")
