"""Building loop bodies: the iteration spaces of ``lower`` and a builder of scalar body ops.

The builder names body values ``%0, %1, …`` in the order it emits them, fills in every dtype
(so a body can be run before the verifier sees it) and emits a load, an ``index`` or a scalar op
with the same operands only once per body (``mul %x, %x`` loads ``%x`` once).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import sympy
from fir.ir.dtypes import DType
from fir.ir.graph import Body, BodyOp, BodyOperand, BodyValue, Literal, Value
from fir.ir.ops import BINARY_LOGICAL, COMPARE, UNARY_TO_BOOL_FLOAT
from fir.ir.symbolic import index_var, indirect_symbol
from fir.ir.types import Dim

from .view_indexing import Access, Index, is_one

_BOOL_RESULT = frozenset(COMPARE + BINARY_LOGICAL + UNARY_TO_BOOL_FLOAT + ["logical_not"])

Ranges = list[tuple[sympy.Symbol, Dim]]


LoopNames = tuple[str, str]  # prefixes of pointwise and reduction loop variables
LOOP_NAMES: LoopNames = ("i", "r")


def pointwise_space(
    shape: Sequence[Dim], names: LoopNames = LOOP_NAMES
) -> tuple[Ranges, tuple[Index, ...]]:
    ranges, idx = _pointwise_space(tuple(shape), names)
    return list(ranges), idx


@lru_cache(maxsize=4096)
def _pointwise_space(
    shape: tuple[Dim, ...], names: LoopNames
) -> tuple[tuple[tuple[sympy.Symbol, Dim], ...], tuple[Index, ...]]:
    """Loops ``i0, i1, …`` over the dimensions of ``shape`` that are not of size 1, and the
    index of each dimension (its loop variable, or 0). An all-ones shape keeps its loops."""
    keep_ones = bool(shape) and all(is_one(d) for d in shape)
    ranges: Ranges = []
    idx: list[Index] = []
    for d in shape:
        if is_one(d) and not keep_ones:
            idx.append(0)
            continue
        v = index_var(f"{names[0]}{len(ranges)}")
        ranges.append((v, d))
        idx.append(v)
    return tuple(ranges), tuple(idx)


def reduction_space(
    shape: Sequence[Dim], reduced: Sequence[int], names: LoopNames = LOOP_NAMES
) -> tuple[Ranges, Ranges, tuple[Index, ...]]:
    """Pointwise loops over the kept dimensions, reduction loops ``r0, r1, …`` over ``reduced``
    (size-1 dimensions omitted, at least one reduction loop), and the operand's index."""
    red = set(reduced)
    ranges: Ranges = []
    rranges: Ranges = []
    idx: list[Index] = []
    for k, d in enumerate(shape):
        if is_one(d):
            idx.append(0)
            continue
        if k in red:
            v = index_var(f"{names[1]}{len(rranges)}")
            rranges.append((v, d))
        else:
            v = index_var(f"{names[0]}{len(ranges)}")
            ranges.append((v, d))
        idx.append(v)
    if not rranges:
        rranges.append((index_var(f"{names[1]}0"), 1))
    return ranges, rranges, tuple(idx)


@lru_cache(maxsize=65536)
def broadcast_index(shape: tuple[Dim, ...], out_idx: tuple[Index, ...]) -> tuple[Index, ...]:
    """The index into an operand of ``shape`` broadcast to an output indexed by ``out_idx``."""
    lead = len(out_idx) - len(shape)
    return tuple(0 if is_one(d) else out_idx[lead + k] for k, d in enumerate(shape))


class BodyBuilder:
    def __init__(self, ranges: Ranges) -> None:
        self.ranges: dict[sympy.Symbol, Dim] = dict(ranges)
        self.ops: list[BodyOp] = []
        self._seen: dict[Any, BodyValue] = {}

    def _emit(self, key: Any, op: BodyOp) -> BodyValue:
        if key is not None:
            old = self._seen.get(key)
            if old is not None:
                return old
            self._seen[key] = op.result
        op.result.name = str(len(self.ops))
        op.result.owner = op
        self.ops.append(op)
        return op.result

    def load(
        self,
        access: Access,
        idx: Sequence[Index],
        mask: BodyValue | None = None,
        other: Literal | None = None,
    ) -> BodyValue:
        """Element ``idx`` of the tensor that ``access`` reads; where ``mask`` is false, ``other``
        (default 0 of the buffer's dtype) without touching memory."""
        return self.load_flat(access.buffer, access.index(idx, self.ranges), mask, other)

    def load_flat(
        self,
        buffer: Value,
        index: Index,
        mask: BodyValue | None = None,
        other: Literal | None = None,
    ) -> BodyValue:
        dtype = buffer.type.dtype
        if mask is not None and other is None:
            other = zero(dtype)
        key = ("load", id(buffer), index, id(mask) if mask is not None else None, _lit_key(other))
        op = BodyOp("load", BodyValue("", dtype), buffer=buffer, index=index)
        if mask is not None:
            op.mask, op.other = mask, other
        return self._emit(key, op)

    def index(self, expr: Index, dtype: DType = DType.I64) -> BodyValue:
        op = BodyOp("index", BodyValue("", dtype), index=expr, dtype=dtype)
        return self._emit(("index", expr, dtype), op)

    def indirect(self, value: BodyValue, bound: Dim) -> sympy.Symbol:
        """Turn a loaded integer into an index symbol valid in ``[0, bound)``."""
        op = BodyOp("indirect", BodyValue("", DType.I64), operands=[value], bound=bound)
        v = self._emit(("indirect", id(value), bound), op)
        return indirect_symbol("%" + v.name)

    def cast(self, value: BodyOperand, dtype: DType) -> BodyOperand:
        if isinstance(value, BodyValue) and value.dtype == dtype:
            return value
        op = BodyOp("cast", BodyValue("", dtype), operands=[value], dtype=dtype)
        return self._emit(("cast", _operand_key(value), dtype), op)

    def scalar(self, opcode: str, operands: Sequence[BodyOperand]) -> BodyValue:
        """An elementwise op; its dtype is bool for comparisons and logical ops, else the dtype
        of its (data) operands."""
        if opcode in _BOOL_RESULT:
            dtype: DType | None = DType.BOOL
        else:
            data = operands[1:] if opcode == "where" else operands
            dtype = next((o.dtype for o in data if isinstance(o, BodyValue)), None)
        op = BodyOp(opcode, BodyValue("", dtype), operands=list(operands))
        return self._emit((opcode, tuple(_operand_key(o) for o in operands)), op)

    def int_operand(self, value: Dim) -> BodyOperand:
        """An integer size as a body operand: a literal, or an ``index`` of a symbolic size."""
        if isinstance(value, int):
            return Literal(value)
        return self.index(value)

    def build(self, result: BodyOperand) -> Body:
        return Body(self.ops, result)


def zero(dtype: DType) -> Literal:
    if dtype.is_bool:
        return Literal(False)
    if dtype.is_float:
        return Literal(0.0)
    return Literal(0)


def _lit_key(lit: Literal | None) -> Any:
    if lit is None:
        return None
    return (type(lit.value).__name__, repr(lit.value))


def _operand_key(o: BodyOperand) -> Any:
    if isinstance(o, BodyValue):
        return id(o)
    return _lit_key(o)
