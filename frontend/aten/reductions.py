"""Reduction converters: ``sum``, ``mean``, ``amax``/``amin``, ``any``/``all``, ``prod``,
``logsumexp``, ``max``/``min`` (with indices), ``argmax``/``argmin``, ``var``/``std``/``var_mean``;
then compositions (``nansum``, ``count_nonzero``, ``aminmax``, ``std_mean``, vector norms, ``dist``).
"""

from __future__ import annotations

import math
from typing import Any

from fir.ir.dtypes import DType
from fir.ir.graph import Literal, Value

from ..emitter import Emitter, Fallback
from .common import (
    _auto,
    _cast_all,
    _float_only,
    _norm_dims,
    _tensor,
    _zero,
)
from .registry import Converter, register


def _reduce(fir_op: str) -> Converter:
    def conv(
        em: Emitter, x: Any, dim: Any = None, keepdim: bool = False, *, dtype: Any = None
    ) -> Value:
        x = _tensor(x)
        out = em.out_type()
        dims = _norm_dims(dim, x.type.rank)
        src = x if fir_op in ("any", "all") else em.cast(x, out.dtype)
        return em.op(fir_op, [src], out, {"dims": dims, "keepdim": keepdim or None})

    return conv


for _aten, _fir in (
    ("sum", "sum"),
    ("mean", "mean"),
    ("amax", "max"),
    ("amin", "min"),
    ("any", "any"),
    ("all", "all"),
):
    for _ov in ("default", "dim_IntList", "dim", "dims"):
        register(f"aten.{_aten}.{_ov}")(_reduce(_fir))


@register("aten.prod.default", "aten.prod.dim_int")
def _prod(
    em: Emitter, x: Any, dim: Any = None, keepdim: bool = False, *, dtype: Any = None
) -> Value:
    return _reduce("prod")(em, x, dim, keepdim)


@register("aten.logsumexp.default")
def _logsumexp(em: Emitter, x: Any, dim: Any, keepdim: bool = False) -> Value:
    return _reduce("logsumexp")(em, x, dim, keepdim)


@register("aten.max.dim", "aten.min.dim")
def _max_dim(em: Emitter, x: Any, dim: int, keepdim: bool = False) -> list[Value]:
    x = _tensor(x)
    kind = "max" if ".max." in str(em.node.target) else "min"
    d = dim % x.type.rank if x.type.rank else None  # a 0-d tensor reduces nothing
    dims = None if d is None else [d]
    values = em.op(kind, [x], em.out_type(0), {"dims": dims, "keepdim": keepdim or None})
    indices = em.op(
        f"arg{kind}", [x], em.out_type(1), {"dim": d, "keepdim": keepdim or None}, hint="idx"
    )
    return [values, indices]


@register("aten.max.default", "aten.min.default")
def _max_all(em: Emitter, x: Any) -> Value:
    kind = "max" if ".max." in str(em.node.target) else "min"
    return em.op(kind, [_tensor(x)], em.out_type())


@register("aten.argmax.default", "aten.argmin.default")
def _argmax(em: Emitter, x: Any, dim: Any = None, keepdim: bool = False) -> Value:
    x = _tensor(x)
    kind = "argmax" if "argmax" in str(em.node.target) else "argmin"
    d = None if dim is None or x.type.rank == 0 else dim % x.type.rank
    return em.op(kind, [x], em.out_type(), {"dim": d, "keepdim": keepdim or None})


def _correction(correction: Any, unbiased: Any = None) -> int:
    if correction is None:
        return 1 if unbiased is None or unbiased else 0
    if isinstance(correction, float) and not correction.is_integer():
        raise Fallback("fractional correction")
    return int(correction)


@register("aten.var.correction", "aten.std.correction", "aten.var.dim", "aten.std.dim")
def _var(
    em: Emitter, x: Any, dim: Any = None, *args: Any, correction: Any = None, keepdim: bool = False
) -> Value:
    x = _tensor(x)
    unbiased = None
    if args:  # var.dim(x, dim, unbiased, keepdim)
        unbiased = args[0]
        keepdim = args[1] if len(args) > 1 else keepdim
    kind = "var" if ".var." in str(em.node.target) else "std"
    attrs = {
        "dims": _norm_dims(dim, x.type.rank),
        "keepdim": keepdim or None,
        "correction": _correction(correction, unbiased),
    }
    if attrs["correction"] == 1:
        attrs["correction"] = None
    return em.op(kind, [x], em.out_type(), attrs)


@register("aten.var_mean.correction")
def _var_mean(
    em: Emitter, x: Any, dim: Any = None, *, correction: Any = None, keepdim: bool = False
) -> list[Value]:
    x = _tensor(x)
    c = _correction(correction)
    attrs = {
        "dims": _norm_dims(dim, x.type.rank),
        "keepdim": keepdim or None,
        "correction": None if c == 1 else c,
    }
    return em.op("var_mean", [x], [em.out_type(0), em.out_type(1)], attrs)


# ---------------------------------------------------------------------------------------------
# compositions: no FIR op of their own; each follows ATen's CPU kernel (see fir.frontend.aten)


@register("aten.nansum.default")
def _nansum(
    em: Emitter, x: Any, dim: Any = None, keepdim: bool = False, *, dtype: Any = None
) -> Value:
    x = _tensor(x)
    if x.type.dtype.is_float:
        x = _auto(em, "where", [_auto(em, "isnan", [x]), Literal(0), x])
    return _reduce("sum")(em, x, dim, keepdim)


@register("aten.count_nonzero.dim_IntList", "aten.count_nonzero.default")
def _count_nonzero(em: Emitter, x: Any, dim: Any = None) -> Value:
    x = _tensor(x)
    nz = em.cast(_auto(em, "ne", [x, _zero(x.type.dtype)]), DType.I64)
    return em.op("sum", [nz], em.out_type(), {"dims": _norm_dims(dim, x.type.rank)})


@register("aten.aminmax.default")
def _aminmax(em: Emitter, x: Any, *, dim: Any = None, keepdim: bool = False) -> list[Value]:
    x = _tensor(x)
    attrs = {"dims": _norm_dims(dim, x.type.rank), "keepdim": keepdim or None}
    return [
        em.op("min", [x], em.out_type(0), attrs, hint="min"),
        em.op("max", [x], em.out_type(1), attrs, hint="max"),
    ]


@register("aten.std_mean.correction")
def _std_mean(
    em: Emitter, x: Any, dim: Any = None, *, correction: Any = None, keepdim: bool = False
) -> list[Value]:
    var, mean = _var_mean(em, x, dim, correction=correction, keepdim=keepdim)
    return [em.op("sqrt", [var], em.out_type(0), hint="std"), mean]


def _vector_norm(em: Emitter, x: Value, ord: Any, dims: list[int] | None, keepdim: bool) -> Value:
    out = em.out_type()
    attrs = {"dims": dims, "keepdim": keepdim or None}
    x = em.cast(x, out.dtype)
    o = float(ord)
    if o == 2:
        return em.op("sqrt", [_auto(em, "sum", [_auto(em, "mul", [x, x])], attrs)], out)
    ax = _auto(em, "abs", [x])
    if o == 1:
        return em.op("sum", [ax], out, attrs)
    if math.isinf(o):
        if x.type.numel == 0:
            raise Fallback("infinity norm of an empty tensor")
        return em.op("max" if o > 0 else "min", [ax], out, attrs)
    if o == 0:
        return em.op("sum", [em.cast(_auto(em, "ne", [x, Literal(0)]), out.dtype)], out, attrs)
    s = _auto(em, "sum", [_auto(em, "pow", [ax, Literal(o)])], attrs)
    return em.op("pow", [s, Literal(1.0 / o)], out)


@register("aten.linalg_vector_norm.default")
def _linalg_vector_norm(
    em: Emitter, x: Any, ord: Any = 2, dim: Any = None, keepdim: bool = False, *, dtype: Any = None
) -> Value:
    _float_only(em)
    x = _tensor(x)
    return _vector_norm(em, x, ord, _norm_dims(dim, x.type.rank), keepdim)


@register("aten.norm.ScalarOpt_dim", "aten.norm.Scalar", "aten.norm.ScalarOpt_dim_dtype")
def _norm(
    em: Emitter, x: Any, p: Any = 2, dim: Any = None, keepdim: bool = False, **kw: Any
) -> Value:
    _float_only(em)
    x = _tensor(x)
    return _vector_norm(em, x, 2 if p is None else p, _norm_dims(dim, x.type.rank), keepdim)


@register("aten.dist.default")
def _dist(em: Emitter, a: Any, b: Any, p: Any = 2) -> Value:
    dtype = _float_only(em)
    a, b = _cast_all(em, dtype, a, b)
    return _vector_norm(em, _auto(em, "sub", [a, b]), p, None, False)
