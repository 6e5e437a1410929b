"""Passes that work on loop-level programs refuse a function that has not been lowered yet, in
the pipeline (so library users get the same error as fir-opt users); see issue 16."""

from __future__ import annotations

import pytest
from fir.ir.errors import PipelineError
from fir.ir.graph import LoopNode
from fir.ir.parser import parse_module
from fir.ir.printer import print_module
from fir.passes import registry
from fir.passes.pipeline import Pipeline, parse_pipeline

TENSOR = """func @f(%x: f32[8]) -> (f32[8]) {
  %y = exp %x : f32[8]
  %z = neg %y : f32[8]
  return %z
}
"""

MIXED = """func @g(%x: f32[8]) -> (f32[8]) {
  %p = pointwise : f32[8] over (i0 < 8) {
    %0 = load %x[i0]
    %1 = exp %0
    yield %1
  }
  %t = neg %p : f32[8]
  return %t
}
"""

LOOP_PASSES = ["fuse", "inline", "reorder", "split-reductions", "unroll-reductions"]


def test_input_levels() -> None:
    levels = {n: registry.get_pass_class(n).input_level for n in registry.pass_names()}
    assert {n for n, lv in levels.items() if lv == "loop"} == set(LOOP_PASSES)
    assert set(levels.values()) == {"any", "loop"}


@pytest.mark.parametrize("name", LOOP_PASSES)
def test_loop_pass_on_a_tensor_level_program_is_a_located_error(name: str) -> None:
    m = parse_module(TENSOR, "t.fir")
    with pytest.raises(PipelineError) as info:
        parse_pipeline(f"cleanup,{name}").run(m)
    e = info.value
    assert e.loc is not None and (e.loc.file, e.loc.line, e.loc.column) == ("<pipeline>", 1, 9)
    assert e.message.startswith(
        f"pass '{name}' works on loop-level programs, but @f is at tensor level "
        "(%y = exp at t.fir:2:8); run "
    )
    assert "'lowering'" in e.message


def test_a_pass_built_in_python_points_at_the_first_tensor_level_op() -> None:
    from fir.passes.fusion.fuse import FusePass

    m = parse_module(TENSOR, "t.fir")
    with pytest.raises(PipelineError) as info:
        Pipeline([FusePass()]).run(m)
    e = info.value
    assert e.loc is not None and (e.loc.file, e.loc.line, e.loc.column) == ("t.fir", 2, 8)
    assert e.message == (
        "pass 'fuse' works on loop-level programs, but @f is at tensor level (%y = exp); run "
        "the 'lowering' pipeline before it, e.g. -p 'lowering,fuse'"
    )


@pytest.mark.parametrize("text", ["lowering,fuse", "fusion", "decompose,lower,inline,reorder"])
def test_a_pipeline_that_lowers_first_runs(text: str) -> None:
    out = parse_pipeline(text).run(parse_module(TENSOR))
    assert all(isinstance(n, LoopNode) for n in out.funcs[0].nodes)


@pytest.mark.parametrize("name", LOOP_PASSES)
def test_a_partly_lowered_program_is_accepted(name: str) -> None:
    parse_pipeline(name).run(parse_module(MIXED))


@pytest.mark.parametrize("name", ["deps", "dce", "plan-memory", "cleanup", "verify"])
def test_passes_for_any_level_run_on_tensor_level_programs(name: str) -> None:
    out = parse_pipeline(name).run(parse_module(TENSOR))
    assert "exp %x" in print_module(out)
