"""Matmul and friends: ``mm``/``bmm``/``matmul``, ``addmm``, ``linear`` (FIR ops that become
extern matmuls at loop level); then compositions (``dot``/``vdot``/``mv``, ``addmv``, ``baddbmm``,
``addbmm``, ``addr``, ``trace``, ``linalg_cross``).
"""

from __future__ import annotations

from typing import Any

from fir.ir.graph import Value
from fir.ir.types import TensorType

from ..emitter import Emitter
from .common import (
    _auto,
    _expand_to,
    _float_only,
    _scale,
    _static_shape,
    _tensor,
)
from .registry import register
from .views import _diagonal_view


@register("aten.mm.default", "aten.bmm.default", "aten.matmul.default")
def _matmul(em: Emitter, a: Any, b: Any) -> Value:
    return em.op("matmul", [_tensor(a), _tensor(b)], em.out_type())


@register("aten.addmm.default")
def _addmm(em: Emitter, bias: Any, a: Any, b: Any, *, beta: Any = 1, alpha: Any = 1) -> Value:
    attrs = {
        "beta": None if beta == 1 else float(beta),
        "alpha": None if alpha == 1 else float(alpha),
    }
    return em.op("addmm", [_tensor(bias), _tensor(a), _tensor(b)], em.out_type(), attrs)


@register("aten.linear.default")
def _linear(em: Emitter, x: Any, w: Any, b: Any = None) -> Value:
    ops: list[Any] = [_tensor(x), _tensor(w)]
    if b is not None:
        ops.append(_tensor(b))
    return em.op("linear", ops, em.out_type())


# ---------------------------------------------------------------------------------------------
# compositions: no FIR op of their own; each follows ATen's CPU kernel (see fir.frontend.aten)


@register("aten.dot.default", "aten.vdot.default", "aten.mv.default")
def _dot(em: Emitter, a: Any, b: Any) -> Value:
    return em.op("matmul", [_tensor(a), _tensor(b)], em.out_type())


def _beta_alpha(em: Emitter, bias: Any, prod: Value, beta: Any, alpha: Any) -> Value:
    """beta * bias + alpha * prod, where beta == 0 ignores bias (NaN included), as in BLAS."""
    out = em.out_type()
    _float_only(em)
    prod = _scale(em, prod, alpha)
    if beta == 0:
        return _expand_to(em, prod, out.shape)
    bias = _scale(em, em.cast(_tensor(bias), out.dtype), beta)
    return em.op("add", [bias, prod], out)


@register("aten.addmv.default")
def _addmv(em: Emitter, bias: Any, mat: Any, vec: Any, *, beta: Any = 1, alpha: Any = 1) -> Value:
    return _beta_alpha(em, bias, _auto(em, "matmul", [_tensor(mat), _tensor(vec)]), beta, alpha)


@register("aten.baddbmm.default")
def _baddbmm(em: Emitter, bias: Any, a: Any, b: Any, *, beta: Any = 1, alpha: Any = 1) -> Value:
    return _beta_alpha(em, bias, _auto(em, "matmul", [_tensor(a), _tensor(b)]), beta, alpha)


@register("aten.addbmm.default")
def _addbmm(em: Emitter, bias: Any, a: Any, b: Any, *, beta: Any = 1, alpha: Any = 1) -> Value:
    prod = _auto(em, "sum", [_auto(em, "matmul", [_tensor(a), _tensor(b)])], {"dims": [0]})
    return _beta_alpha(em, bias, prod, beta, alpha)


@register("aten.addr.default")
def _addr(em: Emitter, bias: Any, v1: Any, v2: Any, *, beta: Any = 1, alpha: Any = 1) -> Value:
    v1, v2 = _tensor(v1), _tensor(v2)
    outer = _auto(
        em,
        "mul",
        [_auto(em, "unsqueeze", [v1], {"dim": 1}), _auto(em, "unsqueeze", [v2], {"dim": 0})],
    )
    return _beta_alpha(em, bias, outer, beta, alpha)


@register("aten.trace.default")
def _trace(em: Emitter, x: Any) -> Value:
    x = _tensor(x)
    out = em.out_type()
    shape = _static_shape(x)
    n = min(shape)
    diag = _diagonal_view(em, em.cast(x, out.dtype), 0, 0, 1, TensorType(out.dtype, (n,)))
    return em.op("sum", [diag], out)


@register("aten.linalg_cross.default")
def _cross(em: Emitter, a: Any, b: Any, dim: int = -1) -> Value:
    out = em.out_type()
    a, b = (_expand_to(em, em.cast(_tensor(t), out.dtype), out.shape) for t in (a, b))
    d = dim % out.rank
    part = TensorType(out.dtype, out.shape[:d] + out.shape[d + 1 :])

    def comp(t: Value, k: int) -> Value:
        return em.op("select", [t], part, {"dim": d, "index": k}, hint=f"c{k}")

    ac, bc = [comp(a, k) for k in range(3)], [comp(b, k) for k in range(3)]
    pieces = []
    for i, j in ((1, 2), (2, 0), (0, 1)):  # c_k = a_i * b_j - a_j * b_i
        c = _auto(em, "sub", [_auto(em, "mul", [ac[i], bc[j]]), _auto(em, "mul", [ac[j], bc[i]])])
        pieces.append(_auto(em, "unsqueeze", [c], {"dim": d}))
    return em.op("cat", pieces, out, {"dim": d})
