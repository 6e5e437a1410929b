"""The value facts the renderers share (``backends/plan/op_forms.py``, ``ir/accumulators.py``,
``ir/dtypes.py``) against what they state: the IR's ops, and the reference interpreter's
results (eager PyTorch)."""

from __future__ import annotations

import itertools
import math

import pytest

torch = pytest.importorskip("torch")

from fir.backends.plan import op_forms  # noqa: E402
from fir.backends.plan.instructions import PLAN_OPS  # noqa: E402
from fir.backends.plan.lowering import LOWERINGS  # noqa: E402
from fir.ir import ops as ir_ops  # noqa: E402
from fir.ir.accumulators import KINDS, merge, update  # noqa: E402
from fir.ir.dtypes import DType, literal_value, round_to, saturating_type  # noqa: E402
from fir.ir.interpreter import apply_elementwise, cast_tensor  # noqa: E402

SCALAR = {name for name, spec in ir_ops.OPS.items() if spec.scalar}


def test_every_op_of_a_form_is_one_renderers_write() -> None:
    # an op of a form is an elementwise op of the IR or a plan primitive, never one lowered
    forms = [op_forms.OPERATORS, op_forms.MATH1, op_forms.MATH2, op_forms.ROUNDING]
    named = [op for form in forms for op in form] + list(op_forms.ON_BOOLS.values())
    assert set(named) <= (SCALAR | PLAN_OPS) - set(LOWERINGS)
    assert set(op_forms.COMPARISONS) == set(ir_ops.COMPARE)
    assert not set(op_forms.MATH1) & set(op_forms.MATH2)


def _ints() -> torch.Tensor:
    return torch.tensor([-7, -1, 0, 1, 3, 100], dtype=torch.int32)


@pytest.mark.parametrize("op", [op for op in op_forms.OPERATORS if op != "div"])
def test_an_operator_is_its_op_on_integers(op: str) -> None:
    # Python's operator of the same spelling (C's, where integers do not overflow)
    a, b = _ints(), _ints().flip(0)
    expected = apply_elementwise(op, [a, b])
    assert torch.equal(eval(f"a {op_forms.OPERATORS[op]} b"), expected)


@pytest.mark.parametrize("op", op_forms.ROUNDING)
def test_rounding_leaves_an_integer(op: str) -> None:
    assert torch.equal(apply_elementwise(op, [_ints()]), _ints())


@pytest.mark.parametrize("op", sorted(op_forms.ON_BOOLS))
def test_an_op_on_bools_is_its_bitwise_one(op: str) -> None:
    pairs = list(itertools.product([False, True], repeat=2))
    a, b = (torch.tensor(side) for side in zip(*pairs))
    expected = apply_elementwise(op_forms.ON_BOOLS[op], [a, b])
    assert torch.equal(apply_elementwise(op, [a, b]).bool(), expected)


def test_operand_dtype() -> None:
    dtypes = {"x": DType.I32, "c": DType.BOOL}
    assert op_forms.operand_dtype("add", (1, "x"), DType.I32, dtypes) is DType.I32
    assert op_forms.operand_dtype("lt", ("x", 0), DType.BOOL, dtypes) is DType.I32
    assert op_forms.operand_dtype("where", ("c", "x", 0), DType.I64, dtypes) is DType.I64
    assert op_forms.operand_dtype("neg", (1.5,), DType.F32, dtypes) is DType.F32
    # literals only: a comparison or a cast goes by the first literal's kind, as the
    # interpreter computes it (1.5 < 2 compares floats: as bools it would be False)
    from fir.ir.graph import Literal

    lt = ("lt", (Literal(1.5), Literal(2)), DType.BOOL, dtypes)
    assert op_forms.operand_dtype(*lt) is DType.F32
    assert op_forms.operand_dtype("cast", (Literal(3),), DType.F32, dtypes) is DType.I64
    assert op_forms.operand_dtype("eq", (Literal(True), Literal(1)), DType.BOOL, {}) is DType.BOOL
    assert op_forms.operand_dtype("add", (Literal(1), Literal(2)), DType.I32, {}) is DType.I32


def test_operand_forms() -> None:
    from fir.ir.graph import Literal

    # where's condition is a bool; a trailing scalar of mul after a tensor is a value of the
    # compute dtype (f32 for f16), a leading one or one of add a value of the op's dtype
    forms = op_forms.operand_forms("where", ("c", "x", Literal(0.1)), DType.F16)
    assert forms == [(DType.BOOL, True), (DType.F16, True), (DType.F16, True)]
    assert op_forms.operand_forms("mul", ("x", Literal(0.1)), DType.F16)[1] == (DType.F16, False)
    assert op_forms.operand_forms("mul", (Literal(0.1), "x"), DType.F16)[0] == (DType.F16, True)
    assert op_forms.operand_forms("add", ("x", Literal(0.1)), DType.F16)[1] == (DType.F16, True)


@pytest.mark.parametrize("kind", KINDS)
def test_every_name_an_accumulator_step_reads_has_a_dtype(kind: str) -> None:
    for dtype in DType:
        for spec in (merge(kind, dtype), update(kind, dtype), update(kind, dtype, True)):
            for step in spec.steps:
                assert spec.dtypes[step.dst] is step.dtype
                assert all(a in spec.dtypes for a in step.args if isinstance(a, str))
            assert all(r in spec.dtypes for r in spec.results)
            if spec.guard is not None:
                assert spec.dtypes[spec.guard] is DType.BOOL


@pytest.mark.parametrize("dtype", [d for d in DType if d.is_float], ids=str)
def test_a_literal_value_is_what_a_tensor_of_it_holds(dtype: DType) -> None:
    for v in (0.1, -1.0e-8, 65519.0, 3.0e38, 1.0e300, -math.inf):
        exact = torch.tensor(v, dtype=dtype.to_torch()).to(dtype.compute_dtype.to_torch())
        assert literal_value(v, dtype, exact=True) == exact.item()
        assert literal_value(v, dtype) == round_to(v, dtype.compute_dtype)


@pytest.mark.parametrize("dtype", [d for d in DType if d.is_int], ids=str)
def test_a_float_converts_to_an_integer_through_its_saturating_type(dtype: DType) -> None:
    x = torch.tensor([-1.5, -300.7, 1.0e30, math.nan, 255.9, 70000.2], dtype=torch.float64)
    via = cast_tensor(x, saturating_type(dtype).to_torch())
    assert torch.equal(cast_tensor(x, dtype.to_torch()), via.to(dtype.to_torch()))


def test_which_divisions_are_checked_for_a_zero_divisor() -> None:
    """One rule for every renderer (``instructions.checks_divisor``): an integer division or
    remainder by a value, or by the literal 0, is checked; by another literal, or of floats or
    bools, it is not."""
    from fir.backends.plan.instructions import DIVIDES, Compute, checks_divisor
    from fir.ir.graph import Literal

    for op in sorted(DIVIDES):
        assert checks_divisor(Compute("q", op, ("a", "b"), DType.I32))
        assert checks_divisor(Compute("q", op, ("a", Literal(0)), DType.I64))
        assert not checks_divisor(Compute("q", op, ("a", Literal(3)), DType.I64))
        assert not checks_divisor(Compute("q", op, ("a", "b"), DType.F32))
        assert not checks_divisor(Compute("q", op, ("a", "b"), DType.BOOL))
    assert not checks_divisor(Compute("q", "add", ("a", "b"), DType.I32))
