"""Value ranges (:mod:`fir.ir.ranges`) and the index checks they remove: an indirect index the
program itself keeps inside its table (T5's relative-position bucket, [0, 31] into 32 rows) is
bound without a check; anything the analysis cannot prove keeps its check, which still fires."""

from __future__ import annotations

import math

import pytest
import torch
from fir.backends.compile import compile_function
from fir.backends.plan import plan_program
from fir.backends.plan.instructions import CheckIndex
from fir.ir.errors import KernelIndexError
from fir.ir.graph import LoopNode
from fir.ir.interpreter import run_graph
from fir.ir.parser import parse_module
from fir.ir.ranges import value_range
from fir.ir.verifier import verify_module
from fir.passes.pipeline import parse_pipeline
from t5_bucket import bucket_program, symbolic_bucket_program


def checks(text: str) -> list[CheckIndex]:
    g = parse_pipeline("fusion").run(parse_module(text)).funcs[0]
    return [i for k in plan_program(g).kernels() for i in k.instrs if isinstance(i, CheckIndex)]


def gather_range(text: str) -> tuple[float, float] | None:
    g = parse_pipeline("fusion").run(parse_module(text)).funcs[0]
    for n in g.nodes:
        if isinstance(n, LoopNode) and n.body is not None:
            for op in n.body.ops:
                if op.opcode == "indirect":
                    return value_range(op.operands[0], n)
    raise AssertionError("no indirect index")


@pytest.mark.parametrize("realized", [False, True])
def test_t5_bucket_lies_in_its_table(realized: bool) -> None:
    # inlined (one body) and realized (the load followed to the node that writes the buffer)
    text = bucket_program(realized=realized)
    assert gather_range(text) == (0, 29)
    found = checks(text)
    assert found and all(c.proven for c in found)


def test_a_bucket_over_a_symbolic_length_lies_in_its_table() -> None:
    # a dynamic T5: the positions run to s0 - 1 (s0 at most an int64), through mod and floor
    # division by s0; the bucket is still [0, 31], and the gather is not checked
    text = symbolic_bucket_program()
    assert gather_range(text) == (0, 31)
    found = checks(text)
    assert found and all(c.proven for c in found)
    assert not any(c.proven for c in checks(symbolic_bucket_program(rows=31)))


@pytest.mark.parametrize("backend", ["cpp", "llvm"])
def test_a_symbolic_bucket_gathers_as_the_interpreter_does(backend: str) -> None:
    text = symbolic_bucket_program()
    g = parse_pipeline("fusion").run(parse_module(text)).funcs[0]
    program = compile_function(g, backend)
    table = torch.randn(32, 2)
    for n in (5, 40, 300):  # buckets up to 16 + 15 past 128 positions
        x = torch.zeros(n)
        (want,) = run_graph(parse_module(text).funcs[0], [table, x])
        (got,) = program(table, x)
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("backend", ["cpp", "llvm"])
@pytest.mark.parametrize("realized", [False, True])
def test_unchecked_gather_matches_the_interpreter(backend: str, realized: bool) -> None:
    text = bucket_program(realized=realized)
    table = torch.randn(32, 2)
    want = run_graph(parse_module(text).funcs[0], [table])
    g = parse_pipeline("fusion").run(parse_module(text)).funcs[0]
    got = compile_function(g, backend)(table)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)


def test_one_row_short_is_still_checked_and_fails() -> None:
    # 29 rows: bucket 29 is out of range; the check stays and reports it, as the interpreter does
    text = bucket_program(rows=29)
    found = checks(text)
    assert found and not any(c.proven for c in found)
    table = torch.randn(29, 2)
    with pytest.raises(IndexError):  # the interpreter's error
        run_graph(parse_module(text).funcs[0], [table])
    g = parse_pipeline("fusion").run(parse_module(text)).funcs[0]
    with pytest.raises(KernelIndexError):
        compile_function(g, "cpp")(table)


def test_without_the_where_refinement_the_log_of_zero_is_unbounded() -> None:
    # the same bucket without `where`: log(0) = -inf at the diagonal, the cast saturates
    text = bucket_program().replace("%14 = where %5, %4, %13", "%14 = minimum %13, %4")
    r = gather_range(text)
    assert r is not None and r[0] < 0
    assert not any(c.proven for c in checks(text))


def test_data_indices_and_float_conditions_stay_checked() -> None:
    # token ids from an input: nothing is known
    ids = """
func @f(%ids: i64[8], %emb: f32[16, 4]) -> (f32[8, 4]) {
  %out = pointwise : f32[8, 4] over (i0 < 8, i1 < 4) {
    %0 = load %ids[i0]
    %1 = indirect %0 < 16
    %2 = load %emb[4*%1 + i1]
    yield %2
  }
  return %out
}
"""
    assert not any(c.proven for c in checks(ids))
    # a float condition: NaN fails `x < 4.0`, so the else branch is not narrowed to x >= 4
    nan_path = """
func @f(%x: f32[8], %emb: f32[16, 4]) -> (f32[8, 4]) {
  %out = pointwise : f32[8, 4] over (i0 < 8, i1 < 4) {
    %0 = load %x[i0]
    %1 = lt %0, 4.0
    %2 = maximum %0, 0.0
    %3 = minimum %2, 15.0
    %4 = cast %3 : i64
    %5 = where %1, 0, %4
    %6 = indirect %5 < 16
    %7 = load %emb[4*%6 + i1]
    yield %7
  }
  return %out
}
"""
    # maximum/minimum of an unknown input are unknown: still checked
    assert not any(c.proven for c in checks(nan_path))


def test_casts_saturate_and_include_zero() -> None:
    text = """
func @f() -> (i32[8]) {
  %out = pointwise : i32[8] over (i0 < 8) {
    %0 = index i0 : i64
    %1 = cast %0 : f32
    %2 = add %1, 2.5
    %3 = cast %2 : i32
    yield %3
  }
  return %out
}
"""
    m = parse_module(text)
    verify_module(m)  # fills in the body values' dtypes
    n = m.funcs[0].nodes[0]
    assert isinstance(n, LoopNode) and n.body is not None
    # i0 in [0, 7] -> [2.5, 9.5] (widened) -> truncated [0, 9]: 0 for a NaN, never below it
    assert value_range(n.body.result, n) == (0, 9)
    exp = """
func @f() -> (i64[8]) {
  %out = pointwise : i64[8] over (i0 < 8) {
    %0 = index i0 : i64
    %1 = cast %0 : f32
    %2 = mul %1, 1000.0
    %3 = exp %2
    %4 = cast %3 : i64
    yield %4
  }
  return %out
}
"""
    m = parse_module(exp)
    verify_module(m)
    n = m.funcs[0].nodes[0]
    assert isinstance(n, LoopNode) and n.body is not None
    lo, hi = value_range(n.body.result, n)  # type: ignore[misc]
    assert lo == 0 and hi >= 2**63 - 1 and not math.isinf(hi)  # saturated, not infinite


def test_bounds_divide_by_a_size_symbol_in_its_range() -> None:
    from fir.ir.symbolic import FloorDiv, Modulo, bounds, index_var, size_symbol

    i, s = index_var("i0"), size_symbol("s0")
    ranges = {i: (0, 99), s: (4, 10)}
    assert bounds(Modulo(i, s), ranges) == (0, 9)
    assert bounds(FloorDiv(i, s), ranges) == (0, 24)
    assert bounds(FloorDiv(i - 50, s), ranges) is None  # a numerator that may be negative
    assert bounds(Modulo(i, s), {i: (0, 99)}) is None  # a divisor of unknown sign
    assert bounds(Modulo(i, s), {i: (0, 3), s: (4, 10)}) == (0, 3)
