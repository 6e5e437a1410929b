"""Indexing, gather and scatter: ``embedding``, ``gather``, ``index_select``; then compositions
(``slice_scatter``, ``select_scatter``, advanced indexing ``index.Tensor``, ``take``).
"""

from __future__ import annotations

from typing import Any

from fir.ir.dtypes import DType
from fir.ir.graph import Literal, Value
from fir.ir.types import TensorType, broadcast_shapes

from ..emitter import Emitter, Fallback
from .common import (
    _arange_i64,
    _auto,
    _expand_to,
    _reshape_to,
    _scale,
    _static_shape,
    _tensor,
)
from .registry import register


@register("aten.embedding.default")
def _embedding(em: Emitter, weight: Any, indices: Any, padding_idx: int = -1, *args: Any) -> Value:
    return em.op("embedding", [_tensor(weight), _tensor(indices)], em.out_type())


def _index_tensor(em: Emitter, index: Any) -> Value:
    index = _tensor(index, "index")
    if index.type.dtype in (DType.I64, DType.I32):
        return index
    if not index.type.dtype.is_int:
        raise Fallback(f"{index.type.dtype} index")
    return em.cast(index, DType.I64)


@register("aten.gather.default")
def _gather(em: Emitter, x: Any, dim: int, index: Any, sparse_grad: bool = False) -> Value:
    x = _tensor(x)
    if x.type.rank == 0:
        raise Fallback("gather on a 0-d tensor")
    return em.op("gather", [x, _index_tensor(em, index)], em.out_type(), {"dim": dim})


@register("aten.index_select.default")
def _index_select(em: Emitter, x: Any, dim: int, index: Any) -> Value:
    x, index = _tensor(x), _index_tensor(em, index)
    out = em.out_type()
    if x.type.rank == 0:  # a 0-d tensor is indexed as a 1-element vector
        x1 = em.op("reshape", [x], TensorType(x.type.dtype, (1,)), hint="vec")
        idx1 = (
            index
            if index.type.rank == 1
            else em.op("reshape", [index], TensorType(index.type.dtype, (1,)), hint="idx")
        )
        sel = em.op(
            "index_select", [x1, idx1], TensorType(x.type.dtype, (1,)), {"dim": 0}, hint="sel"
        )
        return em.op("reshape", [sel], out)
    return em.op("index_select", [x, index], out, {"dim": dim})


# ---------------------------------------------------------------------------------------------
# compositions: no FIR op of their own; each follows ATen's CPU kernel (see fir.frontend.aten)


@register("aten.slice_scatter.default")
def _slice_scatter(
    em: Emitter, x: Any, src: Any, dim: int = 0, start: Any = None, end: Any = None, step: int = 1
) -> Value:
    x = _tensor(x)
    out = em.out_type()
    shape = _static_shape(x)
    d = dim % x.type.rank
    n = shape[d]
    if step != 1:
        return _strided_slice_scatter(em, x, _tensor(src), d, start, end, step)
    s, e, _ = slice(start, end, 1).indices(n)
    e = max(e, s)
    parts = []
    for lo, hi, hint in ((0, s, "pre"), (e, n, "post")):
        if hi > lo:
            t = list(shape)
            t[d] = hi - lo
            parts.append(
                (
                    lo,
                    em.op(
                        "slice",
                        [x],
                        TensorType(x.type.dtype, tuple(t)),
                        {"dim": d, "start": lo or None, "end": hi},
                        hint=hint,
                    ),
                )
            )
    mid = em.cast(_tensor(src), x.type.dtype)
    parts.append((s, mid))
    parts.sort(key=lambda p: p[0])
    return em.op("cat", [p for _, p in parts], out, {"dim": d})


def _strided_slice_scatter(
    em: Emitter, x: Value, src: Value, d: int, start: Any, end: Any, step: int
) -> Value:
    """x with x[start:end:step] along d replaced by src: a mask along d picks which positions
    take src, and an index_select spreads src's rows onto them."""
    out = em.out_type()
    n = x.type.shape[d]
    s, e, _ = slice(start, end, step).indices(n)
    count = src.type.shape[d]
    if not isinstance(count, int) or step <= 0:
        raise Fallback("symbolic slice_scatter")
    if count == 0:
        return _reshape_to(em, x, out.shape)
    idx = _arange_i64(em, 0, n, hint="pos")
    rel = _auto(em, "sub", [idx, Literal(s)])
    inside = _auto(
        em, "logical_and", [_auto(em, "ge", [idx, Literal(s)]), _auto(em, "lt", [idx, Literal(e)])]
    )
    on_step = _auto(em, "eq", [_auto(em, "mod", [rel, Literal(step)]), Literal(0)])
    mask = _auto(em, "logical_and", [inside, on_step], hint="mask")
    row = _auto(em, "maximum", [_auto(em, "floordiv", [rel, Literal(step)]), Literal(0)])
    row = _auto(em, "minimum", [row, Literal(count - 1)], hint="row")
    spread = em.op(
        "index_select", [em.cast(src, x.type.dtype), row], x.type, {"dim": d}, hint="spread"
    )
    view = [1] * x.type.rank
    view[d] = n
    mask = _reshape_to(em, mask, tuple(view), hint="maskv")
    return em.op("where", [mask, spread, x], out)


@register("aten.select_scatter.default")
def _select_scatter(em: Emitter, x: Any, src: Any, dim: int, index: int) -> Value:
    x = _tensor(x)
    shape = _static_shape(x)
    d = dim % x.type.rank
    i = index % shape[d]
    src = _auto(em, "unsqueeze", [em.cast(_tensor(src), x.type.dtype)], {"dim": d})
    return _slice_scatter(em, x, src, d, i, i + 1)


@register("aten.index.Tensor", "aten._unsafe_index.Tensor")
def _index(em: Emitter, x: Any, indices: list[Any]) -> Value:
    """Advanced indexing with integer tensors: move the indexed dimensions to the front, flatten
    them, and gather rows with one ``index_select`` of the linearized (wrapped) indices."""
    x = _tensor(x)
    out = em.out_type()
    shape = _static_shape(x)
    idx = list(indices) + [None] * (x.type.rank - len(indices))
    positions = [k for k, t in enumerate(idx) if t is not None]
    if not positions or x.type.rank == 0:
        raise Fallback("no index tensor")
    tensors = []
    for k in positions:
        t = _tensor(idx[k], "index")
        if t.type.dtype.is_bool or t.type.dtype == DType.U8:
            raise Fallback("boolean mask index")
        t = _index_tensor(em, t)
        if t.type.dtype != DType.I64:
            t = em.cast(t, DType.I64)
        # negative indices count from the end
        t = _auto(
            em,
            "where",
            [_auto(em, "lt", [t, Literal(0)]), _auto(em, "add", [t, Literal(shape[k])]), t],
            hint="wrap",
        )
        tensors.append(t)
    bshape = broadcast_shapes(*[t.type.shape for t in tensors])
    if bshape is None:
        raise Fallback("index shapes do not broadcast")
    rest = [k for k in range(x.type.rank) if k not in positions]
    perm = positions + rest
    xp = x if perm == list(range(x.type.rank)) else _auto(em, "permute", [x], {"dims": perm})
    sizes = [shape[k] for k in positions]
    total = 1
    for s in sizes:
        total *= s
    rest_shape = tuple(shape[k] for k in rest)
    xr = _reshape_to(em, xp, (total, *rest_shape), hint="rows")
    lin: Value | None = None
    for j, t in enumerate(tensors):
        stride = 1
        for s in sizes[j + 1 :]:
            stride *= s
        term = _scale(em, t, stride)
        lin = term if lin is None else _auto(em, "add", [lin, term], hint="lin")
    assert lin is not None
    lin = _expand_to(em, lin, bshape)
    numel = 1
    for s in bshape:
        numel *= s
    flat = _reshape_to(em, lin, (numel,), hint="flat")
    rows = em.op(
        "index_select",
        [xr, flat],
        TensorType(x.type.dtype, (numel, *rest_shape)),
        {"dim": 0},
        hint="rows",
    )
    y = _reshape_to(em, rows, (*bshape, *rest_shape), hint="g")
    adjacent = positions == list(range(positions[0], positions[-1] + 1))
    p0 = positions[0]
    if adjacent and p0 > 0:
        nb = len(bshape)
        dims = (
            [nb + j for j in range(p0)] + list(range(nb)) + [nb + j for j in range(p0, len(rest))]
        )
        return em.op("permute", [y], out, {"dims": dims})
    return _reshape_to(em, y, out.shape)


@register("aten.take.default")
def _take(em: Emitter, x: Any, index: Any) -> Value:
    x = _tensor(x)
    idx = em.cast(_index_tensor(em, index), DType.I64)
    numel = x.type.numel
    if not isinstance(numel, int):
        raise Fallback("symbolic size")
    flat = _reshape_to(em, x, (numel,), hint="flat")
    wrapped = _auto(
        em,
        "where",
        [_auto(em, "lt", [idx, Literal(0)]), _auto(em, "add", [idx, Literal(numel)]), idx],
        hint="wrap",
    )
    count = idx.type.numel
    rows = _reshape_to(em, wrapped, (count,), hint="idx")
    sel = em.op(
        "index_select", [flat, rows], TensorType(x.type.dtype, (count,)), {"dim": 0}, hint="sel"
    )
    return em.op("reshape", [sel], em.out_type())
