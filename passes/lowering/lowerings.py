"""One lowering per tensor-level op: the loop-level node(s) ``lower`` emits for it.

Each lowering receives the :class:`~fir.passes.lowering.graph_lowering.GraphLowering` of the function and the op,
and either emits loop nodes (through ``cx.pointwise`` / ``cx.reduction``), an extern node, or
records a view (``cx.set_view``: no node, readers load through the index map).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from fir.ir.dtypes import DType
from fir.ir.graph import BodyOperand, BodyValue, Literal, TensorOp, Value
from fir.ir.ops import OPS
from fir.ir.symbolic import as_expr, to_dim
from fir.ir.types import Dim, TensorType

from . import view_indexing
from .body_builder import BodyBuilder, broadcast_index
from .graph_lowering import GraphLowering, Lowering
from .view_indexing import Index, is_zero

LOWERINGS: dict[str, Lowering] = {}


def _lowers(*names: str) -> Callable[[Lowering], Lowering]:
    def deco(fn: Lowering) -> Lowering:
        for n in names:
            LOWERINGS[n] = fn
        return fn

    return deco


def _attr(n: TensorOp, name: str) -> Any:
    return OPS[n.op].attr(n.attrs, name)


def operand(
    cx: GraphLowering, b: BodyBuilder, o: Value | Literal, out_idx: tuple[Index, ...]
) -> BodyOperand:
    """An operand of an elementwise op at output element ``out_idx``, broadcast."""
    if isinstance(o, Literal):
        return o
    return b.load(cx.access(o), broadcast_index(o.type.shape, out_idx))


# ---------------------------------------------------------------------------------------------
# Elementwise


def _elementwise(cx: GraphLowering, n: TensorOp) -> None:
    out = n.result

    def body(b: BodyBuilder, idx: tuple[Index, ...]) -> BodyOperand:
        args = [operand(cx, b, o, idx) for o in n.operands]
        if n.op == "cast":
            return b.cast(args[0], out.type.dtype)
        return b.scalar(n.op, args)

    cx.pointwise(n, out, body)


for _name, _spec in OPS.items():
    if _spec.scalar:
        LOWERINGS[_name] = _elementwise


# no torch here: fir-opt lowers text without importing it
_INT_RANGE = {
    DType.I8: (-(2**7), 2**7 - 1),
    DType.I16: (-(2**15), 2**15 - 1),
    DType.I32: (-(2**31), 2**31 - 1),
    DType.I64: (-(2**63), 2**63 - 1),
    DType.U8: (0, 255),
}


def _int_bound(v: float | None, dtype: DType, rounding: Callable[[float], int]) -> int | None:
    """A clamp bound on an integer tensor, as the interpreter takes it: rounded inward, NaN
    ignored, limited to the dtype's range."""
    if v is None or math.isnan(v):
        return None
    lo, hi = _INT_RANGE[dtype]
    if math.isinf(v):
        return hi if v > 0 else lo
    return min(max(rounding(v), lo), hi)


@_lowers("clamp")
def _clamp(cx: GraphLowering, n: TensorOp) -> None:
    x = n.operands[0]
    assert isinstance(x, Value)
    dtype = x.type.dtype
    lo, hi = _attr(n, "min"), _attr(n, "max")
    if not dtype.is_float:
        lo, hi = _int_bound(lo, dtype, math.ceil), _int_bound(hi, dtype, math.floor)

    def body(b: BodyBuilder, idx: tuple[Index, ...]) -> BodyOperand:
        v: BodyOperand = operand(cx, b, x, idx)
        if lo is not None:
            v = b.scalar("maximum", [v, Literal(lo)])
        if hi is not None:
            v = b.scalar("minimum", [v, Literal(hi)])
        return v

    cx.pointwise(n, n.result, body)


@_lowers("masked_fill")
def _masked_fill(cx: GraphLowering, n: TensorOp) -> None:
    x, m, value = n.operands

    def body(b: BodyBuilder, idx: tuple[Index, ...]) -> BodyOperand:
        return b.scalar(
            "where", [operand(cx, b, m, idx), operand(cx, b, value, idx), operand(cx, b, x, idx)]
        )

    cx.pointwise(n, n.result, body)


# ---------------------------------------------------------------------------------------------
# Reductions


def _reduced_dims(n: TensorOp, rank: int) -> list[int]:
    dims = _attr(n, "dims")
    if dims is None:
        return list(range(rank))
    return [d % rank for d in dims]


def _reduced_numel(shape: tuple[Dim, ...], dims: list[int]) -> Dim:
    numel: Any = 1
    for d in dims:
        numel = numel * shape[d]
    return to_dim(numel)


def _source(n: TensorOp) -> Value:
    x = n.operands[0]
    assert isinstance(x, Value)
    return x


_IDENTITY: dict[str, Any] = {
    "sum": 0,
    "prod": 1,
    "any": False,
    "all": True,
    "mean": math.nan,
    "max": -math.inf,
    "min": math.inf,
    "argmax": 0,
    "argmin": 0,
}


def _empty_reduction(cx: GraphLowering, n: TensorOp, dims: list[int]) -> bool:
    """A reduction over no elements (a reduced size is 0) fills its result with the identity."""
    x = _source(n)
    if not any(is_zero(x.type.shape[d]) for d in dims):
        return False
    out = n.result
    value: Any = _IDENTITY[n.op]
    if out.type.dtype.is_float:
        value = float(value)
    elif out.type.dtype.is_bool:
        value = bool(value)
    else:
        lo, hi = _INT_RANGE[out.type.dtype]
        value = {math.inf: hi, -math.inf: lo}.get(value, value)
        value = 0 if isinstance(value, float) else int(value)
    cx.pointwise(n, out, lambda b, idx: Literal(value))
    return True


@_lowers("sum", "prod", "max", "min")
def _simple_reduction(cx: GraphLowering, n: TensorOp) -> None:
    x = _source(n)
    dims = _reduced_dims(n, x.type.rank)
    if _empty_reduction(cx, n, dims):
        return
    cx.reduction(n, [n.result], n.op, x.type.shape, dims, lambda b, idx: b.load(cx.access(x), idx))


def _as_bool(b: BodyBuilder, v: BodyValue, negate: bool) -> BodyValue:
    if v.dtype == DType.BOOL:
        return b.scalar("logical_not", [v]) if negate else v
    zero = Literal(0.0) if v.dtype is not None and v.dtype.is_float else Literal(0)
    return b.scalar("eq" if negate else "ne", [v, zero])


@_lowers("any")
def _any(cx: GraphLowering, n: TensorOp) -> None:
    x = _source(n)
    dims = _reduced_dims(n, x.type.rank)
    if _empty_reduction(cx, n, dims):
        return
    cx.reduction(
        n,
        [n.result],
        "any",
        x.type.shape,
        dims,
        lambda b, idx: _as_bool(b, b.load(cx.access(x), idx), negate=False),
    )


@_lowers("all")
def _all(cx: GraphLowering, n: TensorOp) -> None:
    """``all(x) = not any(not x)``: an ``any`` reduction and a pointwise ``logical_not``."""
    x = _source(n)
    dims = _reduced_dims(n, x.type.rank)
    if _empty_reduction(cx, n, dims):
        return
    out = n.result
    partial = cx.helper_value(out, "any", out.type)
    cx.reduction(
        n,
        [partial],
        "any",
        x.type.shape,
        dims,
        lambda b, idx: _as_bool(b, b.load(cx.access(x), idx), negate=True),
    )
    cx.pointwise(n, out, lambda b, idx: b.scalar("logical_not", [b.load(cx.access(partial), idx)]))


@_lowers("mean")
def _mean(cx: GraphLowering, n: TensorOp) -> None:
    """``mean = sum / count``: a ``sum`` reduction (in f32 for f16/bf16) and a pointwise divide
    that keeps the op's name, so ``inline`` can fold the divide into its readers."""
    x = _source(n)
    dims = _reduced_dims(n, x.type.rank)
    if _empty_reduction(cx, n, dims):
        return
    out = n.result
    dtype = out.type.dtype
    acc = dtype.compute_dtype
    total = cx.helper_value(out, "sum", TensorType(acc, out.type.shape))
    cx.reduction(
        n,
        [total],
        "sum",
        x.type.shape,
        dims,
        lambda b, idx: b.cast(b.load(cx.access(x), idx), acc),
    )
    count = _reduced_numel(x.type.shape, dims)

    def divide(b: BodyBuilder, idx: tuple[Index, ...]) -> BodyOperand:
        s = b.load(cx.access(total), idx)
        if isinstance(count, int):
            d: BodyOperand = Literal(float(count))
        else:
            d = b.cast(b.index(count), acc)
        return b.cast(b.scalar("div", [s, d]), dtype)

    cx.pointwise(n, out, divide)


@_lowers("argmax", "argmin")
def _arg_reduction(cx: GraphLowering, n: TensorOp) -> None:
    x = _source(n)
    dim = _attr(n, "dim")
    dims = list(range(x.type.rank)) if dim is None else [dim % max(x.type.rank, 1)]
    if x.type.rank == 0:
        dims = []
    if _empty_reduction(cx, n, dims):
        return
    cx.reduction(n, [n.result], n.op, x.type.shape, dims, lambda b, idx: b.load(cx.access(x), idx))


@_lowers("welford")
def _welford(cx: GraphLowering, n: TensorOp) -> None:
    """One ``reduction welford`` node with the op's three results; f16 and bf16 accumulate in
    f32 (three helper results ``%R.f32``) and are cast back by three pointwise nodes."""
    x = _source(n)
    dims = _reduced_dims(n, x.type.rank)
    dtype = x.type.dtype
    if any(is_zero(x.type.shape[d]) for d in dims):
        for r in n.results:  # no elements: mean 0, m2 0, count 0
            cx.pointwise(n, r, lambda b, idx: Literal(0.0))
        return
    if not dtype.is_narrow_float:
        cx.reduction(
            n, n.results, "welford", x.type.shape, dims, lambda b, idx: b.load(cx.access(x), idx)
        )
        return
    wide = [cx.helper_value(r, "f32", r.type.with_dtype(DType.F32)) for r in n.results]
    cx.reduction(
        n,
        wide,
        "welford",
        x.type.shape,
        dims,
        lambda b, idx: b.cast(b.load(cx.access(x), idx), DType.F32),
    )
    for r, w in zip(n.results, wide):
        cx.pointwise(n, r, lambda b, idx, w=w: b.cast(b.load(cx.access(w), idx), dtype))  # type: ignore[misc]  # a default-argument capture (python/mypy#15459)


# ---------------------------------------------------------------------------------------------
# Views: no node, an index map


def _view(fn: Callable[[view_indexing.Access, TensorOp], view_indexing.Access]) -> Lowering:
    def lower(cx: GraphLowering, n: TensorOp) -> None:
        cx.set_view(n.result, fn(cx.access(_source(n)), n))

    return lower


def _out_shape(n: TensorOp) -> tuple[Dim, ...]:
    return tuple(n.result.type.shape)


LOWERINGS["reshape"] = _view(lambda a, n: view_indexing.reshape(a, _out_shape(n)))
LOWERINGS["permute"] = _view(lambda a, n: view_indexing.permute(a, n.attrs["dims"]))
LOWERINGS["transpose"] = _view(
    lambda a, n: view_indexing.transpose(a, n.attrs["dim0"], n.attrs["dim1"])
)
LOWERINGS["expand"] = _view(lambda a, n: view_indexing.expand(a, _out_shape(n)))
LOWERINGS["slice"] = _view(
    lambda a, n: view_indexing.slice_(
        a, n.attrs["dim"], _attr(n, "start"), _attr(n, "end"), _attr(n, "step"), _out_shape(n)
    )
)
LOWERINGS["select"] = _view(
    lambda a, n: view_indexing.select(a, n.attrs["dim"], n.attrs["index"], _out_shape(n))
)
LOWERINGS["squeeze"] = _view(lambda a, n: view_indexing.squeeze(a, _attr(n, "dims")))
LOWERINGS["unsqueeze"] = _view(lambda a, n: view_indexing.unsqueeze(a, n.attrs["dim"]))
LOWERINGS["as_strided"] = _view(
    lambda a, n: view_indexing.as_strided(a, _out_shape(n), n.attrs["strides"], _attr(n, "offset"))
)


@_lowers("dropout")
def _dropout(cx: GraphLowering, n: TensorOp) -> None:
    """Dropout in eval mode is the identity: a view of its operand. In training it draws random
    numbers and stays a library call."""
    if _attr(n, "train"):
        cx.extern_fallback(n)
    else:
        cx.set_view(n.result, cx.access(_source(n)))


# ---------------------------------------------------------------------------------------------
# Data movement: masked and indirect loads


@_lowers("cat")
def _cat(cx: GraphLowering, n: TensorOp) -> None:
    """Each input is a masked load at the output index shifted by its start; ``where`` picks the
    input whose range holds the index."""
    rank = n.result.type.rank
    dim = n.attrs["dim"] % rank
    pieces: list[tuple[Value, Dim, Dim]] = []  # (input, start, end) along dim
    start: Any = 0
    for o in n.operands:
        assert isinstance(o, Value)
        size = o.type.shape[dim]
        end = to_dim(start + size)
        if not is_zero(size):
            pieces.append((o, start, end))
        start = end

    def body(b: BodyBuilder, idx: tuple[Index, ...]) -> BodyOperand:
        if len(pieces) == 1:
            return b.load(cx.access(pieces[0][0]), idx)
        pos = b.index(idx[dim])
        values: list[tuple[BodyValue, BodyValue]] = []
        for k, (o, lo, hi) in enumerate(pieces):
            conds = []
            if k > 0:
                conds.append(b.scalar("ge", [pos, b.int_operand(lo)]))
            if k < len(pieces) - 1:
                conds.append(b.scalar("lt", [pos, b.int_operand(hi)]))
            mask = conds[0] if len(conds) == 1 else b.scalar("logical_and", conds)
            shifted = list(idx)
            shifted[dim] = to_dim(idx[dim] - lo) if not is_zero(lo) else idx[dim]
            values.append((mask, b.load(cx.access(o), shifted, mask)))
        acc: BodyOperand = values[-1][1]
        for mask, v in reversed(values[:-1]):
            acc = b.scalar("where", [mask, v, acc])
        return acc

    cx.pointwise(n, n.result, body)


@_lowers("pad")
def _pad(cx: GraphLowering, n: TensorOp) -> None:
    """A masked load at the output index shifted by the low padding; the pad value where the
    index falls outside the input."""
    x = _source(n)
    pad = n.attrs["pad"]
    value = Literal(_attr(n, "value"))
    rank = x.type.rank
    lows = [0] * rank
    highs = [0] * rank
    for k in range(len(pad) // 2):
        lows[rank - 1 - k] = pad[2 * k]
        highs[rank - 1 - k] = pad[2 * k + 1]

    def body(b: BodyBuilder, idx: tuple[Index, ...]) -> BodyOperand:
        shifted = [to_dim(i - lo) if lo else i for i, lo in zip(idx, lows)]
        conds: list[BodyValue] = []
        for k in range(rank):
            if lows[k] <= 0 and highs[k] <= 0:
                continue
            pos = b.index(shifted[k])
            if lows[k] > 0:
                conds.append(b.scalar("ge", [pos, Literal(0)]))
            if highs[k] > 0:
                conds.append(b.scalar("lt", [pos, b.int_operand(x.type.shape[k])]))
        mask: BodyValue | None = None
        if conds:
            mask = conds[0]
            for c in conds[1:]:
                mask = b.scalar("logical_and", [mask, c])
        return b.load(cx.access(x), shifted, mask, value if mask is not None else None)

    cx.pointwise(n, n.result, body)


def _indirect_load(
    cx: GraphLowering,
    b: BodyBuilder,
    table: Value,
    dim: int,
    indices: Value,
    index_idx: tuple[Index, ...],
    idx: list[Index],
) -> BodyValue:
    """Load ``indices`` at ``index_idx``, then ``table`` at ``idx`` with dimension ``dim``
    replaced by the loaded value (bounded by that dimension's size)."""
    k = b.load(cx.access(indices), index_idx)
    idx[dim] = b.indirect(k, table.type.shape[dim])
    return b.load(cx.access(table), idx)


@_lowers("gather")
def _gather(cx: GraphLowering, n: TensorOp) -> None:
    x, index = n.operands
    assert isinstance(x, Value) and isinstance(index, Value)
    dim = n.attrs["dim"] % max(x.type.rank, 1)

    def body(b: BodyBuilder, idx: tuple[Index, ...]) -> BodyOperand:
        return _indirect_load(cx, b, x, dim, index, idx, list(idx))

    cx.pointwise(n, n.result, body)


@_lowers("index_select")
def _index_select(cx: GraphLowering, n: TensorOp) -> None:
    x, index = n.operands
    assert isinstance(x, Value) and isinstance(index, Value)
    dim = n.attrs["dim"] % max(x.type.rank, 1)

    def body(b: BodyBuilder, idx: tuple[Index, ...]) -> BodyOperand:
        return _indirect_load(cx, b, x, dim, index, (idx[dim],), list(idx))

    cx.pointwise(n, n.result, body)


@_lowers("embedding")
def _embedding(cx: GraphLowering, n: TensorOp) -> None:
    weight, index = n.operands
    assert isinstance(weight, Value) and isinstance(index, Value)

    def body(b: BodyBuilder, idx: tuple[Index, ...]) -> BodyOperand:
        return _indirect_load(cx, b, weight, 0, index, idx[:-1], [0, idx[-1]])

    cx.pointwise(n, n.result, body)


# ---------------------------------------------------------------------------------------------
# Creation


@_lowers("full")
def _full(cx: GraphLowering, n: TensorOp) -> None:
    value = n.operands[0]
    assert isinstance(value, Literal)
    cx.pointwise(n, n.result, lambda b, idx: value)


@_lowers("arange")
def _arange(cx: GraphLowering, n: TensorOp) -> None:
    """``start + step*i0``: an ``index`` for integer starts and steps (cast to a float result);
    float ones are computed in f64 and cast, as torch computes them."""
    start, step = _attr(n, "start"), _attr(n, "step")
    dtype = n.result.type.dtype

    def body(b: BodyBuilder, idx: tuple[Index, ...]) -> BodyOperand:
        (i,) = idx
        if not isinstance(start, float) and not isinstance(step, float):
            expr = to_dim(as_expr(start) + step * i) if not isinstance(i, int) else start
            if dtype.is_float:
                return b.cast(b.index(expr), dtype)
            return b.index(expr, dtype)
        pos = b.cast(b.index(i), DType.F64)
        v = b.scalar("add", [b.scalar("mul", [pos, Literal(float(step))]), Literal(float(start))])
        return b.cast(v, dtype)

    cx.pointwise(n, n.result, body)


def _flatten(value: Any) -> list[Any]:
    if isinstance(value, list):
        return [x for v in value for x in _flatten(v)]
    return [value]


@_lowers("constant")
def _constant(cx: GraphLowering, n: TensorOp) -> None:
    """A one-element constant is a pointwise node yielding the literal; a larger one is built by
    ``torch.tensor`` (an extern call: a body would need one ``where`` per element)."""
    value = n.attrs["value"]
    flat = _flatten(value)
    if len(flat) == 1:
        cx.pointwise(n, n.result, lambda b, idx: Literal(flat[0]))
    else:
        cx.extern(n, "torch.tensor", [value], {"dtype": n.result.type.dtype})
