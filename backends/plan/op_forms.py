"""The forms an elementwise op takes in every renderer's op table, stated once.

Each back end writes an op it has natively (:mod:`.lowering` writes the others with these) in
one of a few forms, and names the same ops in each: an operator between its operands, spelt
alike by C++, by Python (Triton) and by llvmlite's comparisons (``icmp``/``fcmp`` predicates);
a function of the math library's name (C++'s ``fir_OP`` wrappers of libm, libdevice's
``ld.OP``, an LLVM intrinsic ``llvm.OP`` or libm's ``OP``); an op that leaves an integer as it
is. A renderer's table is one line per form plus its own exceptions, so adding an op of a form
is one word here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fir.ir.dtypes import DType
from fir.ir.graph import Literal
from fir.ir.ops import COMPARE, literal_in_op_dtype

# op -> its operator between two operands
OPERATORS = {
    **{"add": "+", "sub": "-", "mul": "*", "div": "/"},
    **{"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="},
    **{"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^"},
}
COMPARISONS = {op: OPERATORS[op] for op in COMPARE}

# float functions of one operand and of two, each the math library's function of the op's name
MATH1 = (
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "sin", "cos", "tan", "asin",
    "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc", "erfinv",
    "lgamma", "digamma",
)  # fmt: skip
MATH2 = ("fmod", "pow", "atan2", "hypot", "copysign")

# the rounding ops: an integer is whole, so each gives an integer operand back
ROUNDING = ("floor", "ceil", "round", "trunc")

# ops that are another on bools, as torch's are: True + True is True, a product of bools is
# their "and", the larger of two bools their "or"
ON_BOOLS = {
    "add": "bitwise_or", "mul": "bitwise_and", "maximum": "bitwise_or", "minimum": "bitwise_and",
}  # fmt: skip


def operand_dtype(
    op: str, args: Sequence[object], dtype: DType, dtypes: Mapping[str, DType]
) -> DType:
    """The dtype the operands of ``op`` (of result ``dtype``) are computed in: the result's for
    ``where`` (its values'; the condition is a bool), else that of its first named operand (a
    literal takes it), else, every operand a literal, the result's, except that a comparison or
    a cast goes by the first literal's kind, as the interpreter computes it (``1.5 < 2``
    compares floats: as bools it would be false). ``dtypes``: the named values'."""
    if op == "where":
        return dtype
    named = next((dtypes[a] for a in args if isinstance(a, str) and a in dtypes), None)
    if named is not None:
        return named
    if dtype is not DType.BOOL and op != "cast":
        return dtype
    kind = getattr(args[0], "kind", None)
    return {"bool": DType.BOOL, "int": DType.I64}.get(str(kind), DType.F32)


def operand_forms(op: str, args: Sequence[object], dtype: DType) -> list[tuple[DType, bool]]:
    """How each operand of ``op`` over operands of ``dtype`` (:func:`operand_dtype`) is
    written: its dtype (``where``'s condition is a bool), and whether a literal there is a
    value of that dtype (an f16 or bf16 literal rounded to it, as the interpreter makes it) or
    of its compute dtype: a trailing scalar of mul, div and floordiv, which eager PyTorch
    applies at the compute precision (:func:`~fir.ir.ops.literal_in_op_dtype`)."""
    leading_tensor = not isinstance(args[0], Literal)
    return [
        (
            DType.BOOL if op == "where" and k == 0 else dtype,
            literal_in_op_dtype(op, k, leading_tensor),
        )
        for k in range(len(args))
    ]
