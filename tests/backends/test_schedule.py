"""The loop schedule of the scalar loop-nest family (``backends/plan/schedule.py``): its
decisions, its text, and that both renderers write what it says."""

from __future__ import annotations

import dataclasses

import pytest
from fir.backends.cpp.render import render_kernel
from fir.backends.llvm.render import render_module
from fir.backends.plan import KernelPlan, plan_program
from fir.backends.plan.schedule import (
    CPP,
    GRAIN,
    LLVM,
    KernelSchedule,
    Kind,
    contiguous,
    keeps_scratch_rows,
    schedule,
)
from fir.ir.parser import parse_module
from fir.ir.verifier import verify_module
from fir.passes.pipeline import parse_pipeline

# the plan's innermost loop (x1) stores with a stride; x0 walks memory in order
INTERCHANGE = """
func @f(%x: f32[256, 192], %w: f32[192]) -> (f32[256, 192]) {
  %y = pointwise : f32[256, 192] over (i0 < 256, i1 < 192) order (i1 < 192, i0 < 256) {
    %0 = load %x[192*i0 + i1]
    %1 = load %w[i1]
    %2 = mul %0, %1
    yield %2
  }
  return %y
}
"""


def kernels(text: str, pipeline: str = "fusion") -> list[KernelPlan]:
    module = parse_module(text, "<test>")
    verify_module(module)
    module = parse_pipeline(pipeline).run(module)
    return list(plan_program(module.funcs[0]).kernels())


def one(text: str, family: object = CPP, pipeline: str = "fusion") -> KernelSchedule:
    (plan,) = kernels(text, pipeline)
    return schedule(plan, family)  # type: ignore[arg-type]


def test_interchange_runs_the_contiguous_loop_innermost() -> None:
    for family in (CPP, LLVM):
        (nest,) = one(INTERCHANGE, family, "").nests
        assert nest.order() == ["x1", "x0"]
    (cpp,) = one(INTERCHANGE, CPP, "").nests
    assert [(lp.var, lp.kind, lp.parallel) for lp in cpp.loops] == [
        ("x1", Kind.SERIAL, True),
        ("x0", Kind.VECTOR, False),
    ]
    # LLVM's threads split the plan's outermost loop, wherever it runs
    (llvm,) = one(INTERCHANGE, LLVM, "").nests
    assert [lp.parallel for lp in llvm.loops] == [False, True]


def test_renderers_follow_the_schedule_order() -> None:
    (plan,) = kernels(INTERCHANGE, "")
    cpp = render_kernel(plan)
    assert cpp.index("x1 = 0; x1 < 256") < cpp.index("x0 = 0; x0 < 192")
    llvm = str(render_module([plan], lambda n: n, ""))
    assert llvm.index("x1.cond:") < llvm.index("x0.cond:")


def test_tiles_column_blocks_and_split() -> None:
    tiled = one(
        "func @t(%x: f32[256, 256], %y: f32[256, 256]) -> (f32[256, 256]) {\n"
        "  %t = transpose %y {dim0 = 0, dim1 = 1} : f32[256, 256]\n"
        "  %z = add %x, %t : f32[256, 256]\n  return %z\n}\n"
    )
    # the transposed read of %y comes from a turned copy of each tile, whose side is 64
    assert tiled.nests[0].tile() == ("x0", "x1", 64)
    assert tiled.nests[0].turned == ("n0_1",)
    column = one(
        "func @s(%x: f32[512, 256]) -> (f32[256]) {\n"
        "  %s = sum %x {dims = [0]} : f32[256]\n  return %s\n}\n"
    )
    assert column.nests[0].has(Kind.COLUMNS)
    total = "func @s(%x: f32[256, 512]) -> (f32[]) {\n  %s = sum %x {dims = [0, 1]} : f32[]\n  return %s\n}\n"
    assert one(total, CPP).nests[0].has(Kind.SPLIT)
    assert not one(total, LLVM).nests[0].has(Kind.SPLIT)  # LLVM renders no split


def test_threads_and_grain() -> None:
    small = one(
        "func @f(%x: f32[8, 8]) -> (f32[8, 8]) {\n  %y = exp %x : f32[8, 8]\n  return %y\n}\n"
    )
    assert small.one_thread() and small.threads_text() == f"threads 1 (work 64 < {GRAIN})"
    sym = one(
        "func @f(%x: f32[n, 8]) -> (f32[n, 8]) {\n  %y = exp %x : f32[n, 8]\n  return %y\n}\n"
    )
    assert not sym.one_thread() and sym.threads_text().startswith("threads if ")


@pytest.mark.parametrize(
    ("family", "kinds", "size", "lanes"),
    [
        (CPP, ["sum"], 1024, 16),
        (CPP, ["sum"], 8, 0),  # a row shorter than the lanes never fills a block
        (CPP, ["max"], None, 16),  # a thread's part of a split loop: not known here
        (LLVM, ["sum"], 1024, 0),  # LLVM's vectoriser takes sums as reductions
        (LLVM, ["welford"], 1024, 32),
        (LLVM, ["argmax"], 16, 0),
    ],
)
def test_lanes(family: object, kinds: list[str], size: int | None, lanes: int) -> None:
    s = KernelSchedule("k", family, 1, ())  # type: ignore[arg-type]
    assert s.lanes_for(kinds, size) == lanes


def test_text_is_one_stable_line() -> None:
    s = one(INTERCHANGE, CPP, "")
    assert s.text() == "schedule y [cpp]: threads all; x1 parallel, x0 vector"
    assert s.text() == one(INTERCHANGE, CPP, "").text()
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.kernel = "z"  # type: ignore[misc]


def test_contiguous_counts_loads_too() -> None:
    """The rule both renderers share: stores in order and no more strided loads than loads
    in order (a transposed copy keeps the plan's order rather than scatter-gather)."""
    (plan,) = kernels(INTERCHANGE, "")
    from fir.backends.plan.loop_tree import chain, loop_tree

    (top,) = loop_tree(plan.instrs)
    body = chain(top)[-1].body  # type: ignore[arg-type]
    assert contiguous(body, "x0") and not contiguous(body, "x1")


def test_llvm_plans_with_the_schedules_scratch_rule() -> None:
    from fir.backends.registry import backend_named

    assert backend_named("llvm").scratch_rows() is keeps_scratch_rows


def transposed_add(rows: int, cols: int) -> str:
    strided = f"strided [1, {rows}]"
    return (
        f"func @f(%c: f32[{rows}, {cols}] {strided}, %d: f32[{rows}, {cols}] {strided})"
        f" -> (f32[{rows}, {cols}]) {{\n  %y = add %c, %d : f32[{rows}, {cols}]\n  return %y\n}}\n"
    )


@pytest.mark.parametrize(
    ("rows", "cols", "interchanged"),
    [(48, 4096, True), (40, 1024, True), (4096, 48, False), (1024, 40, False)],
)
def test_untiled_transpose_keeps_the_narrower_stride(
    rows: int, cols: int, interchanged: bool
) -> None:
    """Too small to tile (a side under 64): the loads walk one loop in order, the store the
    other; the order whose strided accesses have the smaller stride runs (stores in order
    when the store stride is the wider)."""
    (plan,) = kernels(transposed_add(rows, cols))
    for family in (CPP, LLVM):
        (nest,) = schedule(plan, family).nests
        plan_order = [lp.var for lp in nest.loops]
        assert (plan_order != ["x0", "x1"]) == interchanged


# -- the block family (Triton): backends/plan/block_schedule.py


def triton_kernels(text: str) -> list[KernelPlan]:
    from fir.backends.plan.block_schedule import keeps_rows

    module = parse_module(text, "<test>")
    verify_module(module)
    module = parse_pipeline("cuda").run(module)
    return list(plan_program(module.funcs[0], scratch_rows=keeps_rows).kernels())


COLMAJOR = """
func @f(%c: f32[32, 64] strided [1, 32], %d: f32[32, 64] strided [1, 32]) -> (f32[32, 64]) {
  %y = pointwise : f32[32, 64] over (i0 < 32, i1 < 64) {
    %0 = load %c[i0 + 32*i1]
    %1 = load %d[i0 + 32*i1]
    %2 = add %0, %1
    yield %2
  }
  return %y
}
"""


def test_block_schedule_decides_the_strategy() -> None:
    from fir.backends.plan.block_schedule import block_schedule

    def strategy(shape: str, dims: str) -> str:
        text = (
            f"func @f(%x: f32[{shape}]) -> (f32[{dims}]) {{\n"
            f"  %s = sum %x {{dims = [1]}} : f32[{dims}]\n  return %s\n}}\n"
        )
        (k,) = triton_kernels(text)
        return block_schedule(k).strategy()

    assert strategy("512, 256", "512") == "persistent"
    assert strategy("1024, 16384", "1024") == "looped"
    (pw,) = triton_kernels(COLMAJOR)
    s = block_schedule(pw)
    assert (s.kind, s.strategy(), s.order) == ("pointwise", "", ("x1", "x0"))


def test_triton_renders_what_the_block_schedule_says() -> None:
    """The generated kernel's comment is the schedule's text, its flat index splits in the
    schedule's order, and a different order (decided elsewhere) renders as that order."""
    from fir.backends.plan.block_schedule import block_schedule
    from fir.backends.triton.render import render_kernel

    (k,) = triton_kernels(COLMAJOR)
    s = block_schedule(k)
    source, used, _ = render_kernel(k)
    assert used == s and f"# {s.text()}" in source
    assert "x0 = xindex % 64" in source and "x1 = xindex // 64" in source
    other, _, _ = render_kernel(k, dataclasses.replace(s, order=("x0", "x1")))
    assert "x1 = xindex % 32" in other and "x0 = xindex // 32" in other


def test_triton_keeps_rows_by_the_block_schedule() -> None:
    from fir.backends.plan.block_schedule import block_schedule, keeps_rows
    from fir.backends.registry import backend_named

    text = (
        "func @f(%x: f32[512, 256]) -> (f32[512, 256]) {\n"
        "  %s = softmax %x {dim = 1} : f32[512, 256]\n  return %s\n}\n"
    )
    (k,) = triton_kernels(text)
    assert keeps_rows(k) and block_schedule(k).persistent
    assert backend_named("triton").scratch_rows()(k) == keeps_rows(k)  # type: ignore[misc]


def test_block_schedule_line() -> None:
    from fir.backends.plan.block_schedule import BlockSchedule

    s = BlockSchedule("tiled", 64, YBLOCK=64, num_warps=4, tile=("x1", "x2"), order=("x0",))
    assert s.line("z") == (
        "schedule z [triton]: tiled: YBLOCK=64, XBLOCK=64, num_warps=4; x order x0; "
        "tile x1 (y), x2 (x)"
    )
    assert s.blocks() == ("YBLOCK", "XBLOCK") and s.strategy() == ""
