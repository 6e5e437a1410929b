"""The verifier's per-node cache: a node verified once is not re-checked while nothing its checks
read has changed, and any change a pass makes in place (an opcode, an index, a buffer, a dtype, the
loops, an attribute list) is checked again. Each test verifies a program (filling the cache),
mutates one thing the way a buggy pass would, and expects the verifier to catch it."""

from __future__ import annotations

import pytest
from fir.ir.dtypes import DType
from fir.ir.errors import FirError, VerifyError
from fir.ir.graph import LoopNode, Module, TensorOp, Value
from fir.ir.parser import parse_module
from fir.ir.symbolic import index_var
from fir.ir.types import TensorType
from fir.ir.verifier import verify_module
from fir.passes.base import Pass
from fir.passes.pipeline import Pipeline, parse_pipeline

LOOP = """
func @f(%x: f32[4, 8], %w: f32[8]) -> (f32[4, 8]) {
  %y = pointwise : f32[4, 8] over (i0 < 4, i1 < 8) {
    %0 = load %x[8*i0 + i1]
    %1 = load %w[i1]
    %2 = mul %0, %1
    %3 = exp %2
    yield %3
  }
  return %y
}
"""

TENSOR = """
func @g(%x: f32[4, 8]) -> (f32[4]) {
  %s = sum %x {dims = [1]} : f32[4]
  return %s
}
"""


def verified(text: str) -> Module:
    m = parse_module(text)
    verify_module(m)
    verify_module(m)  # the second run is served from the cache
    return m


def loop_node(m: Module) -> LoopNode:
    n = m.funcs[0].nodes[0]
    assert isinstance(n, LoopNode) and n.body is not None
    return n


def test_an_unchanged_node_is_not_checked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    from fir.ir import verifier

    m = verified(LOOP)
    calls: list[object] = []
    real = verifier._GraphVerifier.check_loop_node
    monkeypatch.setattr(
        verifier._GraphVerifier,
        "check_loop_node",
        lambda self, n: (calls.append(n), real(self, n))[1],
    )
    verify_module(m)
    assert calls == []
    loop_node(m).body.ops[3].opcode = "log"  # type: ignore[union-attr]
    verify_module(m)
    assert len(calls) == 1


def test_opcode_changed_in_place() -> None:
    m = verified(LOOP)
    loop_node(m).body.ops[3].opcode = "argmax"  # type: ignore[union-attr]
    with pytest.raises(VerifyError, match="'argmax' cannot appear in a loop body"):
        verify_module(m)


def test_index_changed_in_place() -> None:
    m = verified(LOOP)
    op = loop_node(m).body.ops[1]  # type: ignore[union-attr]
    op.index = index_var("i1") + 1
    with pytest.raises(VerifyError, match="load of %w is out of bounds"):
        verify_module(m)


def test_index_with_an_unknown_variable() -> None:
    m = verified(LOOP)
    loop_node(m).body.ops[1].index = index_var("i7")  # type: ignore[union-attr]
    with pytest.raises(VerifyError, match="index uses unknown variable 'i7'"):
        verify_module(m)


def test_buffer_substituted_by_an_undefined_value() -> None:
    m = verified(LOOP)
    loop_node(m).body.ops[1].buffer = Value("ghost", TensorType(DType.F32, (8,)))  # type: ignore[union-attr]
    with pytest.raises(VerifyError, match="%ghost is used before it is defined"):
        verify_module(m)


def test_buffer_substituted_by_a_smaller_one() -> None:
    m = verified(LOOP)
    g = m.funcs[0]
    small = Value("small", TensorType(DType.F32, (4,)))
    g.args.append(small)
    loop_node(m).body.ops[1].buffer = small  # type: ignore[union-attr]
    with pytest.raises(VerifyError, match="load of %small is out of bounds"):
        verify_module(m)


def test_buffer_type_replaced() -> None:
    m = verified(LOOP)
    m.funcs[0].args[1].type = TensorType(DType.I32, (8,))
    with pytest.raises(VerifyError, match="%1 has dtype f32, expected i32"):
        verify_module(m)


def test_loops_changed() -> None:
    m = verified(LOOP)
    n = loop_node(m)
    n.ranges = [(index_var("i0"), 4), (index_var("i1"), 4)]
    with pytest.raises(VerifyError, match="the loops cover 16 elements"):
        verify_module(m)


def test_result_type_changed() -> None:
    m = verified(LOOP)
    loop_node(m).results[0].type = TensorType(DType.F16, (4, 8))
    m.funcs[0].output_types = [TensorType(DType.F16, (4, 8))]
    with pytest.raises(VerifyError, match="has dtype f16, but the node produces f32"):
        verify_module(m)


def test_operands_list_mutated_in_place() -> None:
    m = verified(LOOP)
    ops = loop_node(m).body.ops  # type: ignore[union-attr]
    ops[2].operands.append(ops[0].result)
    with pytest.raises(VerifyError, match="'mul' takes"):
        verify_module(m)


def test_tensor_op_attribute_list_mutated_in_place() -> None:
    m = verified(TENSOR)
    n = m.funcs[0].nodes[0]
    assert isinstance(n, TensorOp)
    n.attrs["dims"].append(5)  # type: ignore[union-attr]
    with pytest.raises(VerifyError):
        verify_module(m)


def test_tensor_op_operand_replaced() -> None:
    m = verified(TENSOR)
    n = m.funcs[0].nodes[0]
    assert isinstance(n, TensorOp)
    n.operands = [Value("ghost", TensorType(DType.F32, (4, 8)))]
    with pytest.raises(VerifyError, match="%ghost is used before it is defined"):
        verify_module(m)


def test_node_moved_before_its_input() -> None:
    text = LOOP.replace(
        "  return %y",
        "  %z = pointwise : f32[4, 8] over (i0 < 4, i1 < 8) {\n"
        "    %0 = load %y[8*i0 + i1]\n    yield %0\n  }\n  return %z",
    )
    m = verified(text)
    g = m.funcs[0]
    g.nodes.reverse()
    with pytest.raises(VerifyError, match="%y is used before it is defined"):
        verify_module(m)


class BreakBodyPass(Pass):
    """A buggy pass: changes a verified body in place."""

    name = "break-body"

    def apply(self, module: Module) -> Module:
        for n in module.funcs[0].nodes:
            if isinstance(n, LoopNode) and n.body is not None:
                n.body.ops[-1].opcode = "argmax"
        return module


def test_verify_each_catches_a_pass_that_breaks_a_cached_node() -> None:
    m = parse_module(LOOP)
    p = parse_pipeline("cse,deps")
    p.passes.append(BreakBodyPass())
    with pytest.raises(FirError, match="after pass 'break-body': 'argmax' cannot appear"):
        Pipeline(p.passes).run(m)
