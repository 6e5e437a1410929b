"""Losses: ``nll_loss`` (and its 2-D and ``_forward`` forms), ``cross_entropy_loss``, kept
composite; then compositions (``mse_loss``, ``huber_loss``, ``smooth_l1_loss``,
``soft_margin_loss``, ``binary_cross_entropy`` with and without logits).
"""

from __future__ import annotations

from typing import Any

from fir.ir.dtypes import DType
from fir.ir.graph import Literal, Value
from fir.ir.types import TensorType

from ..emitter import Emitter, Fallback
from .common import (
    _auto,
    _cast_all,
    _expand_to,
    _float_only,
    _reshape_to,
    _static_shape,
    _tensor,
    _used_results,
)
from .nn import _log_sigmoid
from .registry import register

_REDUCTION = {0: "none", 1: "mean", 2: "sum"}


@register("aten.nll_loss_forward.default")
def _nll_loss_forward(
    em: Emitter, x: Any, target: Any, weight: Any, reduction: int, ignore_index: int
) -> list[Value]:
    ops: list[Any] = [_tensor(x), _tensor(target)]
    if weight is not None:
        ops.append(_tensor(weight))
    out = em.op(
        "nll_loss",
        ops,
        em.out_type(0),
        {"reduction": _REDUCTION[reduction], "ignore_index": ignore_index},
    )
    if 1 not in _used_results(em):
        return [out, out]
    return [out, _total_weight(em, _tensor(target), weight, ignore_index)]


def _total_weight(em: Emitter, t: Value, weight: Any, ignore_index: int) -> Value:
    """``nll_loss_forward``'s second result, which its backward reads (training): the summed
    class weight of the targets that are not ignored (their count without weights)."""
    stat = em.out_type(1)
    keep = em.op("ne", [t, Literal(ignore_index)], TensorType(DType.BOOL, t.type.shape))
    per = em.cast(keep, stat.dtype)
    if weight is not None:
        if t.type.rank != 1:
            raise Fallback("total_weight of a weighted loss over a 0-d target")
        w = _tensor(weight)
        # an ignored target may be out of the weight's range: read class 0 for it, then zero it
        safe = em.op("where", [keep, t, Literal(0)], t.type, hint="safe")
        picked = em.op(
            "index_select", [w, safe], TensorType(w.type.dtype, t.type.shape), {"dim": 0}
        )
        per = em.op("mul", [em.cast(picked, stat.dtype), per], per.type, hint="w")
    return em.op("sum", [per], stat, hint="total_weight")


@register("aten.nll_loss2d_forward.default")
def _nll_loss2d_forward(
    em: Emitter, x: Any, target: Any, weight: Any, reduction: int, ignore_index: int
) -> list[Value]:
    """[N, C, H, W] log-probabilities: the same loss over N*H*W rows of C classes."""
    if 1 in _used_results(em):
        raise Fallback("total_weight is read")
    x, t = _tensor(x), _tensor(target)
    shape = _static_shape(x)
    if x.type.rank != 4:
        raise Fallback("nll_loss2d of a non-4-D input")
    n, c, h, w = shape
    rows = _reshape_to(
        em, _auto(em, "permute", [x], {"dims": [0, 2, 3, 1]}), (n * h * w, c), hint="rows"
    )
    ops: list[Any] = [rows, _reshape_to(em, t, (n * h * w,), hint="trows")]
    if weight is not None:
        ops.append(_tensor(weight))
    red = _REDUCTION[reduction]
    out = em.out_type(0)
    if red == "none":
        flat = em.op(
            "nll_loss",
            ops,
            TensorType(out.dtype, (n * h * w,)),
            {"reduction": red, "ignore_index": ignore_index},
            hint="flat",
        )
        loss = em.op("reshape", [flat], out)
    else:
        loss = em.op("nll_loss", ops, out, {"reduction": red, "ignore_index": ignore_index})
    return [loss, loss]


@register("aten.nll_loss.default")
def _nll_loss(
    em: Emitter,
    x: Any,
    target: Any,
    weight: Any = None,
    reduction: int = 1,
    ignore_index: int = -100,
) -> Value:
    ops: list[Any] = [_tensor(x), _tensor(target)]
    if weight is not None:
        ops.append(_tensor(weight))
    return em.op(
        "nll_loss",
        ops,
        em.out_type(),
        {"reduction": _REDUCTION[reduction], "ignore_index": ignore_index},
    )


@register("aten.cross_entropy_loss.default")
def _cross_entropy(
    em: Emitter,
    x: Any,
    target: Any,
    weight: Any = None,
    reduction: int = 1,
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
) -> Value:
    t = _tensor(target)
    if t.type.dtype.is_float:
        raise Fallback("class probabilities as target")
    ops: list[Any] = [_tensor(x), t]
    if weight is not None:
        ops.append(_tensor(weight))
    attrs = {
        "reduction": _REDUCTION[reduction],
        "ignore_index": ignore_index,
        "label_smoothing": float(label_smoothing) or None,
    }
    return em.op("cross_entropy", ops, em.out_type(), attrs)


# ---------------------------------------------------------------------------------------------
# compositions: no FIR op of their own; each follows ATen's CPU kernel (see fir.frontend.aten)


def _reduce_loss(em: Emitter, loss: Value, reduction: int) -> Value:
    out = em.out_type()
    if reduction == 0:
        return (
            _expand_to(em, loss, out.shape) if tuple(loss.type.shape) != tuple(out.shape) else loss
        )
    kind = {1: "mean", 2: "sum"}.get(reduction)
    if kind is None:
        raise Fallback(f"reduction {reduction}")
    return em.op(kind, [loss], out)


@register("aten.mse_loss.default")
def _mse_loss(em: Emitter, x: Any, y: Any, reduction: int = 1) -> Value:
    dtype = _float_only(em)
    x, y = _cast_all(em, dtype, x, y)
    d = _auto(em, "sub", [x, y])
    return _reduce_loss(em, _auto(em, "mul", [d, d]), reduction)


@register("aten.huber_loss.default")
def _huber_loss(em: Emitter, x: Any, y: Any, reduction: int = 1, delta: float = 1.0) -> Value:
    dtype = _float_only(em)
    x, y = _cast_all(em, dtype, x, y)
    # ATen: z < delta ? 0.5 * z * z : delta * (z - 0.5 * delta)
    z = _auto(em, "abs", [_auto(em, "sub", [x, y])])
    small = _auto(em, "mul", [_auto(em, "mul", [z, Literal(0.5)]), z])
    large = _auto(
        em, "mul", [_auto(em, "sub", [z, Literal(0.5 * float(delta))]), Literal(float(delta))]
    )
    loss = _auto(em, "where", [_auto(em, "lt", [z, Literal(float(delta))]), small, large])
    return _reduce_loss(em, loss, reduction)


@register("aten.smooth_l1_loss.default")
def _smooth_l1_loss(em: Emitter, x: Any, y: Any, reduction: int = 1, beta: float = 1.0) -> Value:
    dtype = _float_only(em)
    x, y = _cast_all(em, dtype, x, y)
    z = _auto(em, "abs", [_auto(em, "sub", [x, y])])
    if float(beta) == 0:
        return _reduce_loss(em, z, reduction)
    # ATen: z < beta ? 0.5 * z * z / beta : z - 0.5 * beta
    small = _auto(
        em,
        "div",
        [_auto(em, "mul", [_auto(em, "mul", [z, Literal(0.5)]), z]), Literal(float(beta))],
    )
    large = _auto(em, "sub", [z, Literal(0.5 * float(beta))])
    loss = _auto(em, "where", [_auto(em, "lt", [z, Literal(float(beta))]), small, large])
    return _reduce_loss(em, loss, reduction)


@register("aten.soft_margin_loss.default")
def _soft_margin_loss(em: Emitter, x: Any, y: Any, reduction: int = 1) -> Value:
    dtype = _float_only(em)
    x, y = _cast_all(em, dtype, x, y)
    loss = _auto(em, "log1p", [_auto(em, "exp", [_auto(em, "mul", [_auto(em, "neg", [x]), y])])])
    return _reduce_loss(em, loss, reduction)


@register("aten.binary_cross_entropy.default")
def _bce(em: Emitter, x: Any, y: Any, weight: Any = None, reduction: int = 1) -> Value:
    dtype = _float_only(em)
    x, y = _cast_all(em, dtype, x, y)
    # ATen: (y - 1) * max(log1p(-x), -100) - y * max(log(x), -100)
    l1 = _auto(em, "clamp", [_auto(em, "log1p", [_auto(em, "neg", [x])])], {"min": -100.0})
    l2 = _auto(em, "clamp", [_auto(em, "log", [x])], {"min": -100.0})
    loss = _auto(
        em,
        "sub",
        [_auto(em, "mul", [_auto(em, "sub", [y, Literal(1)]), l1]), _auto(em, "mul", [y, l2])],
    )
    if weight is not None:
        loss = _auto(em, "mul", [loss, em.cast(_tensor(weight), dtype)])
    return _reduce_loss(em, loss, reduction)


@register("aten.binary_cross_entropy_with_logits.default")
def _bce_logits(
    em: Emitter, x: Any, y: Any, weight: Any = None, pos_weight: Any = None, reduction: int = 1
) -> Value:
    dtype = _float_only(em)
    x, y = _cast_all(em, dtype, x, y)
    if not isinstance(x, Value) or not isinstance(y, Value):
        raise Fallback("scalar operand")
    # ATen: (1 - y) * x - log_sigmoid(x) * (pos_weight ? (pos_weight - 1) * y + 1 : 1), * weight
    ls, _ = _log_sigmoid(em, x)
    if pos_weight is not None:
        pw = em.cast(_tensor(pos_weight), dtype)
        lw = _auto(
            em, "add", [_auto(em, "mul", [_auto(em, "sub", [pw, Literal(1)]), y]), Literal(1)]
        )
        ls = _auto(em, "mul", [ls, lw])
    loss = _auto(em, "sub", [_auto(em, "mul", [_auto(em, "sub", [Literal(1), y]), x]), ls])
    if weight is not None:
        loss = _auto(em, "mul", [loss, em.cast(_tensor(weight), dtype)])
    return _reduce_loss(em, loss, reduction)
