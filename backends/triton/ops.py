"""The Triton back end's tables: IR op -> Triton expression, dtype -> ``tl`` type, literals,
and what each reduction kind starts from.

Entries are ``str.format`` patterns over operand names (``{0}``, ``{1}``, ``{2}``); the helpers
they call (``fir_*``) are ``@triton.jit`` functions of :mod:`.helpers`, written once for every
dtype where the semantics differ (NaN-propagating ``maximum``). Ops missing here (``floordiv``,
``sigmoid`` …) reach the renderer written with others (:mod:`fir.backends.plan.lowering`). Math
goes through libdevice (``ld.*``), floor and ceil through helpers that keep subnormals
(libdevice flushes them); division and square root of f32 are IEEE's (``tl.div_rn``,
``tl.sqrt_rn``: Triton's ``/`` on f32 is CUDA's approximate one, and libdevice's ``sqrt``
flushes subnormals to zero, so ``rsqrt`` of 1e-40 would be inf). f16 and bf16 values are
computed in f32: loads widen, stores narrow, a ``cast`` to them rounds.
"""

from __future__ import annotations

import math

from fir.backends.plan import op_forms
from fir.ir.accumulators import extreme, merge, state
from fir.ir.dtypes import DType, literal_value, saturating_type, torch_name
from fir.ir.graph import Literal

# Elementwise ops over float (or any) operands: the operators, and libdevice's function of the
# op's name (``ld.OP``) for the math functions, but where an entry after them says otherwise
OPS: dict[str, str] = {
    **{op: f"{{0}} {sign} {{1}}" for op, sign in op_forms.OPERATORS.items()},
    **{op: f"ld.{op}({{0}})" for op in ("trunc", *op_forms.MATH1)},
    **{op: f"ld.{op}({{0}}, {{1}})" for op in op_forms.MATH2},
    **{op: f"fir_{op}({{0}})" for op in ("floor", "ceil", "lgamma", "digamma")},
    **{op: f"fir_{op}({{0}}, {{1}})" for op in ("shl", "shr")},
    "div": "tl.div_rn({0}, {1})",
    "neg": "-{0}",
    "abs": "tl.abs({0})",
    "maximum": "fir_max({0}, {1})",
    "minimum": "fir_min({0}, {1})",
    "round": "ld.rint({0})",
    "sqrt": "tl.sqrt_rn({0})",
    "sin": "tl.sin({0})",
    "cos": "tl.cos({0})",
    "isnan": "{0} != {0}",
    "signbit": "ld.signbit({0}) != 0",
    "logical_not": "{0} == 0",
    "logical_and": "({0} != 0) & ({1} != 0)",
    "logical_or": "({0} != 0) | ({1} != 0)",
    "logical_xor": "({0} != 0) ^ ({1} != 0)",
    "bitwise_not": "~{0}",
    "where": "tl.where({0}, {1}, {2})",
}

# f64 operands: tl.div_rn (IEEE division; Triton's ``/`` on f32 is approximate) takes f32 only,
# and f64's ``/`` is IEEE already
F64_OPS: dict[str, str] = {"sqrt": "ld.sqrt({0})", "div": "{0} / {1}"}

# Integer (and bool) operands: torch's semantics where they differ from the float entries
# (Triton's integer ops wrap in two's complement, as torch's do).
INT_OPS: dict[str, str] = {
    "div": "{0} / {1}",
    "tdiv": "{0} // {1}",  # plan primitives (backends/plan/instructions.py): C's, as Triton's
    "trem": "{0} % {1}",
    "abs": "tl.where({0} < 0, -{0}, {0})",
    "maximum": "tl.maximum({0}, {1})",
    "minimum": "tl.minimum({0}, {1})",
    **dict.fromkeys(op_forms.ROUNDING, "{0}"),
}
BOOL_OPS: dict[str, str] = {
    **{op: OPS[same] for op, same in op_forms.ON_BOOLS.items()},
    "bitwise_not": "{0} == 0",
    "shl": "{0} & ({1} == 0)",
    "shr": "{0} & ({1} == 0)",
}

# the ops this renderer writes itself: the others of fir.backends.plan.lowering are lowered
NATIVE_OPS = frozenset(OPS) | frozenset(INT_OPS)

# a dtype's ``tl`` type: torch's name, but for bool
TL: dict[DType, str] = {dt: "tl.int1" if dt.is_bool else f"tl.{torch_name(dt)}" for dt in DType}


def op_pattern(op: str, operand: DType) -> str | None:
    """The entry of ``op`` over operands of ``operand`` (``where``: of its values)."""
    tables = [F64_OPS] if operand is DType.F64 else []
    if not operand.is_float and op != "where":
        tables = [BOOL_OPS, INT_OPS] if operand.is_bool else [INT_OPS]
    return next((t[op] for t in [*tables, OPS] if op in t), None)


def combine_source(name: str, kind: str, dtype: DType) -> str:
    """A ``@triton.jit`` function ``name`` that ``tl.reduce`` merges two states of a ``kind``
    reduction over ``dtype`` values with: the steps of :func:`fir.ir.accumulators.merge`,
    each a line of the tables."""
    spec = merge(kind, dtype)
    states = [f"{side}{k}" for side in "ab" for k in range(len(state(kind, dtype)))]
    lines = ["@triton.jit", f"def {name}({', '.join(states)}):"]
    for step in spec.steps:
        operand = op_forms.operand_dtype(step.op, step.args, step.dtype, spec.dtypes)
        args = [a if isinstance(a, str) else literal(Literal(a), operand) for a in step.args]
        pattern = op_pattern(step.op, operand)
        assert pattern is not None, step.op
        lines.append(f"    {step.dst} = {pattern.format(*args)}")
    lines.append(f"    return {', '.join(spec.results)}")
    return "\n".join(lines) + "\n"


def compute_type(dtype: DType) -> str:
    """The ``tl`` type values of ``dtype`` are computed in (f16 and bf16 in f32)."""
    return TL[dtype.compute_dtype]


def cast_expr(value: str, source: DType, target: DType) -> str:
    """``value`` (computed as ``source``) converted to ``target`` as the interpreter does: to
    bool by comparing with zero, to f16/bf16 by rounding (and computing on in f32)."""
    if target is DType.BOOL:
        return f"({value} != 0)"
    if target.is_narrow_float:
        return f"{value}.to({TL[target]}).to(tl.float32)"
    if source is DType.BOOL and target.is_float:
        return f"{value}.to(tl.int8).to({TL[target]})"
    if source.is_float and not target.is_float:
        return float_to_int(value, target, wide=source is DType.F64)
    return f"{value}.to({TL[target]})"


def float_to_int(value: str, target: DType, wide: bool = False) -> str:
    """A float ``value`` (a name) as the integer ``target``, by docs/ops.md's rule for ``cast``:
    toward zero, saturating, NaN to 0; u8 through i64, keeping the low bits. i32 and i64 take
    libdevice's ``float2int_rz``/``float2ll_rz`` (the GPU's ``cvt.rzi``, which saturates; the
    i64 one gives the smallest i64 for NaN, so NaN is selected apart): one instruction where the
    comparisons cost a T5 attention softmax a tenth of its time. Other widths are written out
    with ``tl.where``; under ``TRITON_INTERPRET=1`` ``ld`` is
    :mod:`fir.backends.runtime.triton_interp_math`, which converts as the GPU does. ``wide``:
    ``value`` is an f64 (``double2*_rz``)."""
    kind = "double" if wide else "float"
    if target is DType.I32:
        if wide:  # NaN measured for the f32 conversion only
            return f"tl.where({value} != {value}, 0, ld.double2int_rz({value}))"
        return f"ld.float2int_rz({value})"
    via = saturating_type(target)
    if via is DType.I64:
        out = f"tl.where({value} != {value}, 0, ld.{kind}2ll_rz({value}))"
        return out if via is target else f"{out}.to({TL[target]})"
    smallest, largest = extreme(via, lowest=True), extreme(via, lowest=False)
    top = float(-smallest)  # a power of two, exact in f32 and f64: the comparisons are exact
    t = TL[via]
    inside = f"tl.where(({value} >= {-top!r}) & ({value} < {top!r}), {value}, 0.0).to({t})"
    return (
        f"tl.where({value} >= {top!r}, {largest}, "
        f"tl.where({value} < {-top!r}, {smallest}, {inside})).to({t})"
    )


def literal(lit: Literal | bool | int | float | None, dtype: DType, exact: bool = False) -> str:
    """``lit`` as a Triton operand of ``dtype``'s compute type. ``exact``: round it to
    ``dtype`` first (f16/bf16), as the interpreter does where a literal becomes a tensor."""
    text = scalar(lit, dtype, exact)
    if dtype is DType.F64 and text[0] in "-0123456789":
        # Triton makes a Python float an f32 constant: an f64 one must say so
        return f"tl.full([], {text}, tl.float64)"
    return text


def scalar(lit: Literal | bool | int | float | None, dtype: DType, exact: bool = False) -> str:
    """``lit`` as the Python value of a ``tl.full`` of ``dtype``."""
    value = lit.value if isinstance(lit, Literal) else lit
    if value is None:
        value = 0
    if dtype.is_bool:
        return "1" if value else "0"
    if not dtype.is_float:
        return str(int(value))
    v = literal_value(float(value), dtype, exact)
    if not math.isfinite(v):
        return f"float('{v}')"  # nan, inf or -inf
    return repr(v)


def identity(kind: str, dtype: DType) -> str:
    """The value an accumulator of ``kind`` over ``dtype`` values starts from (and masked-out
    lanes contribute): the first component of :func:`fir.ir.accumulators.state`, as the
    Python value of a ``tl.full`` (a finite float as an integer: ``tl.full`` converts it)."""
    first = state(kind, dtype)[0]
    if isinstance(first.start, float) and math.isfinite(first.start):
        return str(int(first.start))
    return scalar(first.start, first.dtype)


def accumulator_type(kind: str, dtype: DType) -> str:
    """The ``tl`` type of an accumulator's value component
    (:func:`fir.ir.accumulators.state`)."""
    return compute_type(state(kind, dtype)[0].dtype)
