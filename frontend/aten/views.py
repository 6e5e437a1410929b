"""Views, layout and data movement: ``view``/``reshape``, ``permute``, ``transpose``, ``expand``,
``slice``, ``select``, ``squeeze``/``unsqueeze``, ``cat``/``stack``, ``split``/``unbind``,
``as_strided``, ``constant_pad_nd``, identities (``clone``, ``contiguous``, ``alias``, eval
``dropout``); then compositions (``flip``, ``roll``, ``repeat``, ``tril``/``triu``, ``diagonal``,
``diag_embed``, ``unfold``, ``rot90``, pixel and channel shuffles, ``narrow``, reflection and
replication pads) and the ``*_copy`` variants, which are the views themselves (FIR values never
alias).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from fir.ir.graph import Literal, Value
from fir.ir.types import TensorType, contiguous_strides

from ..emitter import Emitter, Fallback, size_value
from .common import (
    _arange_i64,
    _auto,
    _expand_to,
    _reshape_to,
    _static_shape,
    _tensor,
    _zero,
)
from .registry import CONVERTERS, register


@register(
    "aten.clone.default",
    "aten.contiguous.default",
    "aten.alias.default",
    "aten.detach.default",
    "aten.lift_fresh_copy.default",
    "aten.dropout.default",
    "aten.positive.default",
)
def _identity(em: Emitter, x: Any, *args: Any, **kwargs: Any) -> Value:
    name = str(em.node.target)
    if name == "aten.dropout.default":
        train = args[1] if len(args) > 1 else kwargs.get("train", False)
        if train:
            raise Fallback("dropout in training mode")
    return _tensor(x)


@register(
    "aten.view.default",
    "aten.reshape.default",
    "aten._unsafe_view.default",
    "aten.flatten.using_ints",
    "aten.unflatten.int",
    "aten.view.dtype",
)
def _reshape(em: Emitter, x: Any, *args: Any) -> Value:
    x = _tensor(x)
    out = em.out_type()
    if out.dtype != x.type.dtype:
        raise Fallback("view as another dtype")
    return em.op("reshape", [x], out)


@register("aten.permute.default")
def _permute(em: Emitter, x: Any, dims: list[int]) -> Value:
    return em.op("permute", [_tensor(x)], em.out_type(), {"dims": list(dims)})


@register("aten.transpose.int")
def _transpose(em: Emitter, x: Any, dim0: int, dim1: int) -> Value:
    return em.op("transpose", [_tensor(x)], em.out_type(), {"dim0": dim0, "dim1": dim1})


@register("aten.t.default", "aten.numpy_T.default")
def _t(em: Emitter, x: Any) -> Value:
    x = _tensor(x)
    if x.type.rank < 2:
        return x
    return em.op("permute", [x], em.out_type(), {"dims": list(reversed(range(x.type.rank)))})


@register("aten.expand.default", "aten.expand_as.default", "aten.broadcast_to.default")
def _expand(em: Emitter, x: Any, *args: Any, **kwargs: Any) -> Value:
    return em.op("expand", [_tensor(x)], em.out_type())


@register("aten.slice.Tensor")
def _slice(
    em: Emitter, x: Any, dim: int = 0, start: Any = None, end: Any = None, step: int = 1
) -> Value:
    x = _tensor(x)
    if isinstance(start, torch.SymInt) or isinstance(end, torch.SymInt):
        start, end = _symbolic_slice_bounds(em, dim, start, end)
    attrs: dict[str, Any] = {"dim": dim}
    if start not in (None, 0):
        attrs["start"] = start
    if end is not None and not (isinstance(end, int) and end >= 2**62):
        attrs["end"] = end
    if step != 1:
        attrs["step"] = step
    return em.op("slice", [x], em.out_type(), attrs)


def _symbolic_slice_bounds(em: Emitter, dim: int, start: Any, end: Any) -> tuple[Any, Any]:
    """Symbolic ``start``/``end`` of a slice as FIR size expressions. FIR's slice takes bounds
    inside the dimension (no clamping), so each must be known, from what the shape environment
    has guarded, to lie in ``[0, size]``; an end known to reach the size is dropped. The
    emitter then checks that FIR's length is PyTorch's."""
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    src = em.node.args[0]
    val = src.meta.get("val") if isinstance(src, torch.fx.Node) else None
    if not isinstance(val, torch.Tensor):
        raise Fallback("slice of a value without shape information")
    size = val.shape[dim]

    def bound(v: Any, what: str) -> Any:
        if not isinstance(v, torch.SymInt):
            return v
        if not (statically_known_true(v >= 0) and statically_known_true(v <= size)):
            raise Fallback(f"symbolic slice {what} {v} may lie outside the dimension ({size})")
        return size_value(v)

    if isinstance(end, torch.SymInt) and statically_known_true(end >= size):
        end = None
    return bound(start, "start"), bound(end, "end")


@register("aten.select.int")
def _select(em: Emitter, x: Any, dim: int, index: int) -> Value:
    if not isinstance(index, int):
        raise Fallback("symbolic index")
    return em.op("select", [_tensor(x)], em.out_type(), {"dim": dim, "index": index})


@register("aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default")
def _squeeze(em: Emitter, x: Any, dims: Any = None) -> Value:
    x = _tensor(x)
    d = None if dims is None else ([dims] if isinstance(dims, int) else list(dims))
    return em.op("squeeze", [x], em.out_type(), {"dims": d})


@register("aten.unsqueeze.default")
def _unsqueeze(em: Emitter, x: Any, dim: int) -> Value:
    return em.op("unsqueeze", [_tensor(x)], em.out_type(), {"dim": dim})


@register("aten.cat.default", "aten.concat.default", "aten.concatenate.default")
def _cat(em: Emitter, tensors: list[Any], dim: int = 0) -> Value:
    out = em.out_type()
    d = dim % max(out.rank, 1)
    # operands with no element along the dimension add nothing; PyTorch also skips 1-D empty
    # tensors whatever their rank (a cache that starts as torch.tensor([]))
    kept = [
        t
        for t in (_tensor(t) for t in tensors)
        if not (t.type.rank == 1 and t.type.shape[0] == 0)
        and not (t.type.rank == out.rank and t.type.shape[d] == 0)
    ]
    if not kept:  # nothing left: the result has no element along dim
        return em.op("full", [Literal(False if out.dtype.is_bool else 0)], out)
    xs = [em.cast(t, out.dtype) for t in kept]
    if len(xs) == 1 and xs[0].type.shape == out.shape:
        return xs[0]
    return em.op("cat", xs, out, {"dim": d})


@register("aten.stack.default")
def _stack(em: Emitter, tensors: list[Any], dim: int = 0) -> Value:
    out = em.out_type()
    d = dim % out.rank
    parts = []
    for t in tensors:
        t = em.cast(_tensor(t), out.dtype)
        shape = list(t.type.shape)
        shape.insert(d, 1)
        parts.append(
            em.op("unsqueeze", [t], TensorType(out.dtype, tuple(shape)), {"dim": d}, hint="u")
        )
    return em.op("cat", parts, out, {"dim": d})


@register("aten.constant_pad_nd.default")
def _pad(em: Emitter, x: Any, pad: list[int], value: Any = 0) -> Value:
    x = _tensor(x)
    v = value
    if x.type.dtype.is_float:
        v = float(value)
    elif isinstance(value, float):
        if not value.is_integer():
            raise Fallback("float pad value for an integer tensor")
        v = int(value)
    return em.op("pad", [x], em.out_type(), {"pad": list(pad), "value": v})


@register("aten.split.Tensor", "aten.split_with_sizes.default")
def _split(em: Emitter, x: Any, split: Any, dim: int = 0) -> list[Value]:
    x = _tensor(x)
    d = dim % x.type.rank
    size = x.type.shape[d]
    if not isinstance(size, int):
        raise Fallback("split of a symbolic dimension")
    sizes = (
        [size_value(s) for s in split]
        if isinstance(split, (list, tuple))
        else [split] * ((size + split - 1) // split)
    )
    outs, start = [], 0
    for k, s in enumerate(sizes):
        # a symbolic split size (``x.tolist()``'s, ``u0``): the sizes add up to the dimension
        end = min(start + s, size) if isinstance(start + s, int) else start + s
        outs.append(
            em.op(
                "slice",
                [x],
                em.out_type(k),
                {"dim": d, "start": start or None, "end": end},
                hint=f"s{k}",
            )
        )
        start = end
    return outs


@register("aten.unbind.int")
def _unbind(em: Emitter, x: Any, dim: int = 0) -> list[Value]:
    x = _tensor(x)
    d = dim % x.type.rank
    n = x.type.shape[d]
    if not isinstance(n, int):
        raise Fallback("unbind of a symbolic dimension")
    return [
        em.op("select", [x], em.out_type(k), {"dim": d, "index": k}, hint=f"u{k}") for k in range(n)
    ]


@register("aten.as_strided.default")
def _as_strided(
    em: Emitter, x: Any, size: list[int], stride: list[int], storage_offset: Any = None
) -> Value:
    x = _tensor(x)
    src = em.node.args[0]
    val = (
        src.meta.get("val", src.meta.get("example_value"))
        if isinstance(src, torch.fx.Node)
        else None
    )
    # aten.as_strided indexes the storage of its input; FIR's indexes the input's values in
    # row-major order: the two agree only for a contiguous input that starts its storage
    if (
        x.type.layout is not None
        or not isinstance(val, torch.Tensor)
        or not val.is_contiguous()
        or val.storage_offset() != 0
    ):
        raise Fallback("as_strided of a non-contiguous input")
    attrs = {"strides": list(stride), "offset": storage_offset or None}
    return em.op("as_strided", [x], em.out_type(), attrs)


# ---------------------------------------------------------------------------------------------
# compositions: no FIR op of their own; each follows ATen's CPU kernel (see fir.frontend.aten)


@register("aten.flip.default")
def _flip(em: Emitter, x: Any, dims: list[int]) -> Value:
    x = _tensor(x)
    shape = _static_shape(x)
    for d in sorted({d % max(x.type.rank, 1) for d in dims}):
        if x.type.rank == 0 or shape[d] <= 1:
            continue
        idx = _arange_i64(em, shape[d] - 1, -1, -1, hint="rev")
        x = em.op("index_select", [x, idx], x.type, {"dim": d}, hint="flip")
    return _reshape_to(em, x, em.out_type().shape)  # a no-op flip still yields a new value


@register("aten.roll.default")
def _roll(em: Emitter, x: Any, shifts: list[int], dims: Sequence[int] = ()) -> Value:
    x = _tensor(x)
    out = em.out_type()
    _static_shape(x)
    if not dims:  # roll the flattened tensor
        flat = _reshape_to(em, x, (x.type.numel,), hint="flat")
        return _reshape_to(em, _roll_dim(em, flat, sum(shifts), 0), out.shape, hint="roll")
    for s, d in zip(shifts, dims):
        x = _roll_dim(em, x, s, d % x.type.rank)
    return x


def _roll_dim(em: Emitter, x: Value, shift: int, d: int) -> Value:
    n = x.type.shape[d]
    if not isinstance(n, int) or not isinstance(shift, int):
        raise Fallback("symbolic roll")
    if n == 0 or shift % n == 0:
        return x
    s = shift % n
    tail_shape, head_shape = list(x.type.shape), list(x.type.shape)
    tail_shape[d], head_shape[d] = s, n - s
    tail = em.op(
        "slice",
        [x],
        TensorType(x.type.dtype, tuple(tail_shape)),
        {"dim": d, "start": n - s},
        hint="tail",
    )
    head = em.op(
        "slice",
        [x],
        TensorType(x.type.dtype, tuple(head_shape)),
        {"dim": d, "end": n - s},
        hint="head",
    )
    return em.op("cat", [tail, head], x.type, {"dim": d}, hint="roll")


@register("aten.repeat.default")
def _repeat(em: Emitter, x: Any, repeats: list[int]) -> Value:
    x = _tensor(x)
    out = em.out_type()
    shape = _static_shape(x)
    if not all(isinstance(r, int) for r in repeats):
        raise Fallback("symbolic repeats")
    padded = (1,) * (len(repeats) - len(shape)) + shape
    inter = tuple(v for s in padded for v in (1, s))
    wide = tuple(v for r, s in zip(repeats, padded) for v in (r, s))
    y = _reshape_to(em, x, inter, hint="rs")
    y = _expand_to(em, y, wide, hint="ex")
    return em.op("reshape", [y], out)


def _triangle_mask(em: Emitter, m: Any, n: Any, k: int, lower: bool) -> Value:
    row = _auto(em, "unsqueeze", [_arange_i64(em, 0, m, hint="row")], {"dim": 1})
    col = _arange_i64(em, 0, n, hint="col")
    diff = _auto(em, "sub", [col, row])  # col - row, [m, n]
    return _auto(em, "le" if lower else "ge", [diff, Literal(k)], hint="mask")


@register("aten.tril.default", "aten.triu.default")
def _tril(em: Emitter, x: Any, diagonal: int = 0) -> Value:
    x = _tensor(x)
    shape = x.type.shape  # symbolic sizes are fine: the mask compares two aranges
    if x.type.rank < 2:
        raise Fallback("tril of a vector")
    if not isinstance(diagonal, int):
        raise Fallback("symbolic diagonal")
    mask = _triangle_mask(em, shape[-2], shape[-1], diagonal, "tril" in str(em.node.target))
    return em.op("where", [mask, x, _zero(x.type.dtype)], em.out_type())


def _diagonal_view(
    em: Emitter, x: Value, offset: int, dim1: int, dim2: int, out: TensorType
) -> Value:
    shape = _static_shape(x)
    rank = len(shape)
    d1, d2 = dim1 % rank, dim2 % rank
    strides = contiguous_strides(shape)
    if offset >= 0:
        n = max(0, min(shape[d1], shape[d2] - offset))
        start = offset * strides[d2]
    else:
        n = max(0, min(shape[d1] + offset, shape[d2]))
        start = -offset * strides[d1]
    keep = [k for k in range(rank) if k not in (d1, d2)]
    out_strides = [strides[k] for k in keep] + [strides[d1] + strides[d2]]
    if n == 0:
        start = 0
    # FIR's as_strided indexes the operand's values in row-major order, so this is exact for
    # any operand, whatever the strides of the PyTorch tensor it stands for
    return em.op("as_strided", [x], out, {"strides": out_strides, "offset": start or None})


@register("aten.diagonal.default", "aten.diagonal_copy.default")
def _diagonal(em: Emitter, x: Any, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Value:
    return _diagonal_view(em, _tensor(x), offset, dim1, dim2, em.out_type())


@register("aten.diag_embed.default")
def _diag_embed(em: Emitter, x: Any, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Value:
    x = _tensor(x)
    out = em.out_type()
    shape = _static_shape(x)
    if x.type.rank == 0:
        raise Fallback("diag_embed of a 0-d tensor")
    n = shape[-1]
    m = n + abs(offset)
    xp = x
    if offset:
        xp = em.op(
            "pad",
            [x],
            TensorType(x.type.dtype, shape[:-1] + (m,)),
            {"pad": [0, abs(offset)], "value": _zero(x.type.dtype).value},
            hint="pad",
        )
    # out[..., i, j] = xp[i] (offset >= 0) or xp[j] (offset < 0) where j - i == offset, else 0
    v = _auto(em, "unsqueeze", [xp], {"dim": xp.type.rank - (0 if offset >= 0 else 1)})
    row = _auto(em, "unsqueeze", [_arange_i64(em, 0, m, hint="row")], {"dim": 1})
    col = _arange_i64(em, 0, m, hint="col")
    mask = _auto(em, "eq", [_auto(em, "sub", [col, row]), Literal(offset)], hint="mask")
    y = _auto(em, "where", [mask, v, _zero(x.type.dtype)])
    rank = out.rank
    d1, d2 = dim1 % rank, dim2 % rank
    batch = iter(range(rank - 2))
    perm = [rank - 2 if p == d1 else rank - 1 if p == d2 else next(batch) for p in range(rank)]
    if perm == list(range(rank)):
        return _reshape_to(em, y, out.shape)
    return em.op("permute", [y], out, {"dims": perm})


@register("aten.unfold.default")
def _unfold(em: Emitter, x: Any, dim: int, size: int, step: int) -> Value:
    x = _tensor(x)
    shape = _static_shape(x)
    out = em.out_type()
    if x.type.rank == 0:  # a 0-d tensor unfolds into one window of size 1
        return em.op("reshape", [x], out)
    d = dim % x.type.rank
    strides = list(contiguous_strides(shape))
    out_strides = strides[:d] + [strides[d] * step] + strides[d + 1 :] + [strides[d]]
    return em.op("as_strided", [x], out, {"strides": out_strides})


@register("aten.rot90.default")
def _rot90(em: Emitter, x: Any, k: int = 1, dims: Sequence[int] = (0, 1)) -> Value:
    x = _tensor(x)
    out = em.out_type()
    rank = x.type.rank
    d0, d1 = dims[0] % rank, dims[1] % rank
    k %= 4

    def flip(v: Value, ds: list[int]) -> Value:
        shape = _static_shape(v)
        for d in ds:
            if shape[d] > 1:
                v = em.op(
                    "index_select",
                    [v, _arange_i64(em, shape[d] - 1, -1, -1, hint="rev")],
                    v.type,
                    {"dim": d},
                    hint="flip",
                )
        return v

    if k == 0:
        return _reshape_to(em, x, out.shape)
    if k == 2:
        return _reshape_to(em, flip(x, [d0, d1]), out.shape)
    y = flip(x, [d1] if k == 1 else [d0])
    return em.op("transpose", [y], out, {"dim0": d0, "dim1": d1})


@register("aten.pixel_shuffle.default", "aten.pixel_unshuffle.default")
def _pixel_shuffle(em: Emitter, x: Any, r: int) -> Value:
    x = _tensor(x)
    out = em.out_type()
    shape = _static_shape(x)
    *batch, c, h, w = shape
    b = len(batch)
    if "unshuffle" in str(em.node.target):
        # [*, C, H*r, W*r] -> [*, C, H, r, W, r] -> [*, C, r, r, H, W] -> [*, C*r*r, H, W]
        y = _reshape_to(em, x, (*batch, c, h // r, r, w // r, r))
        perm = list(range(b)) + [b, b + 2, b + 4, b + 1, b + 3]
    else:
        # [*, C*r*r, H, W] -> [*, C, r, r, H, W] -> [*, C, H, r, W, r] -> [*, C, H*r, W*r]
        y = _reshape_to(em, x, (*batch, c // (r * r), r, r, h, w))
        perm = list(range(b)) + [b, b + 3, b + 1, b + 4, b + 2]
    y = _auto(em, "permute", [y], {"dims": perm})
    return em.op("reshape", [y], out)


@register("aten.channel_shuffle.default", "aten.native_channel_shuffle.default")
def _channel_shuffle(em: Emitter, x: Any, groups: int) -> Value:
    x = _tensor(x)
    shape = _static_shape(x)
    n, c, *rest = shape
    y = _reshape_to(em, x, (n, groups, c // groups, *rest))
    y = _auto(em, "transpose", [y], {"dim0": 1, "dim1": 2})
    return em.op("reshape", [y], em.out_type())


@register("aten.narrow_copy.default", "aten.narrow.default")
def _narrow(em: Emitter, x: Any, dim: int, start: Any, length: Any) -> Value:
    x = _tensor(x)
    if not isinstance(start, int) or not isinstance(length, int):
        raise Fallback("symbolic narrow")
    d = dim % x.type.rank
    n = x.type.shape[d]
    if not isinstance(n, int):
        raise Fallback("symbolic size")
    s = start % n if start < 0 else start
    return em.op("slice", [x], em.out_type(), {"dim": d, "start": s or None, "end": s + length})


@register(
    "aten.reflection_pad1d.default",
    "aten.reflection_pad2d.default",
    "aten.reflection_pad3d.default",
    "aten.replication_pad1d.default",
    "aten.replication_pad2d.default",
    "aten.replication_pad3d.default",
)
def _index_pad(em: Emitter, x: Any, padding: list[int]) -> Value:
    """Reflect / replicate padding as one index_select per padded dimension, with the source
    index computed from an arange: reflect i -> (n-1) - |(n-1) - |i||, replicate i -> clamp."""
    x = _tensor(x)
    shape = _static_shape(x)
    reflect = "reflection" in str(em.node.target)
    y = x
    for k in range(len(padding) // 2):
        lo, hi = padding[2 * k], padding[2 * k + 1]
        d = x.type.rank - 1 - k
        n = shape[d]
        if lo == 0 and hi == 0:
            continue
        if reflect and (lo >= n or hi >= n):
            raise Fallback("reflection padding as wide as the input")
        if lo < 0 or hi < 0:
            raise Fallback("negative padding")
        i = _auto(em, "sub", [_arange_i64(em, 0, n + lo + hi, hint="o"), Literal(lo)])
        if reflect:
            inner = _auto(em, "abs", [_auto(em, "sub", [Literal(n - 1), _auto(em, "abs", [i])])])
            src = _auto(em, "sub", [Literal(n - 1), inner], hint="src")
        else:
            src = _auto(
                em, "minimum", [_auto(em, "maximum", [i, Literal(0)]), Literal(n - 1)], hint="src"
            )
        new_shape = list(y.type.shape)
        new_shape[d] = n + lo + hi
        y = em.op(
            "index_select",
            [y, src],
            TensorType(x.type.dtype, tuple(new_shape)),
            {"dim": d},
            hint="pad",
        )
    return _reshape_to(em, y, em.out_type().shape)


# ---------------------------------------------------------------------------------------------
# the *_copy variants

_COPY_VARIANTS = {
    "aten.view_copy.default": "aten.view.default",
    "aten.permute_copy.default": "aten.permute.default",
    "aten.t_copy.default": "aten.t.default",
    "aten.transpose_copy.int": "aten.transpose.int",
    "aten.unsqueeze_copy.default": "aten.unsqueeze.default",
    "aten.squeeze_copy.default": "aten.squeeze.default",
    "aten.squeeze_copy.dim": "aten.squeeze.dim",
    "aten.squeeze_copy.dims": "aten.squeeze.dims",
    "aten.expand_copy.default": "aten.expand.default",
    "aten.unbind_copy.int": "aten.unbind.int",
    "aten.split_copy.Tensor": "aten.split.Tensor",
    "aten.split_with_sizes_copy.default": "aten.split_with_sizes.default",
    "aten.unsafe_split.Tensor": "aten.split.Tensor",
    "aten.unsafe_split_with_sizes.default": "aten.split_with_sizes.default",
    "aten.alias_copy.default": "aten.alias.default",
    "aten.detach_copy.default": "aten.detach.default",
    "aten.slice_copy.Tensor": "aten.slice.Tensor",
    "aten.select_copy.int": "aten.select.int",
    "aten.unfold_copy.default": "aten.unfold.default",
    "aten.as_strided_copy.default": "aten.as_strided.default",
}
for _copy, _view in _COPY_VARIANTS.items():
    CONVERTERS[_copy] = CONVERTERS[_view]  # FIR values never alias: a copy is the view itself
