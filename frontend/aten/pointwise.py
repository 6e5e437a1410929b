"""Elementwise converters: unary math and predicates, binary arithmetic (``add``/``sub`` with
``alpha``, ``div`` with rounding modes, ``pow`` …), comparisons, logical and bitwise ops, ``where``,
``masked_fill``, ``clamp`` and casts (``_to_copy``); then elementwise compositions (``lerp``,
``xlogy``, ``logaddexp``, ``fmax``, ``nan_to_num``, ``round.decimals`` …).

Typing in FIR is explicit: where PyTorch promotes (``int + float``), operands are cast to the
computation dtype first.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from fir.ir.dtypes import DType
from fir.ir.graph import Literal, Value
from fir.ir.types import TensorType

from ..emitter import Emitter, Fallback
from .common import (
    _auto,
    _cast_all,
    _expand_to,
    _filled,
    _float_only,
    _lit,
    _operand,
    _promoted,
    _tensor,
)
from .registry import Converter, register

_UNARY = {
    "abs": "abs",
    "neg": "neg",
    "exp": "exp",
    "exp2": "exp2",
    "expm1": "expm1",
    "log": "log",
    "log2": "log2",
    "log10": "log10",
    "log1p": "log1p",
    "sqrt": "sqrt",
    "rsqrt": "rsqrt",
    "sin": "sin",
    "cos": "cos",
    "tan": "tan",
    "asin": "asin",
    "acos": "acos",
    "atan": "atan",
    "sinh": "sinh",
    "cosh": "cosh",
    "tanh": "tanh",
    "asinh": "asinh",
    "acosh": "acosh",
    "atanh": "atanh",
    "sigmoid": "sigmoid",
    "erf": "erf",
    "erfc": "erfc",
    "erfinv": "erfinv",
    "lgamma": "lgamma",
    "digamma": "digamma",
    "reciprocal": "reciprocal",
    "relu": "relu",
    "floor": "floor",
    "ceil": "ceil",
    "trunc": "trunc",
    "sign": "sign",
    "isnan": "isnan",
    "isinf": "isinf",
    "isfinite": "isfinite",
    "signbit": "signbit",
    "logical_not": "logical_not",
    "bitwise_not": "bitwise_not",
    "square": "square",
    "round": "round",
}


def _unary(fir_op: str) -> Converter:
    def conv(em: Emitter, x: Any) -> Value:
        x = _tensor(x)
        out = em.out_type()
        if out.dtype == DType.BOOL and fir_op not in ("logical_not", "bitwise_not"):
            arg = x  # predicates (isnan …) keep their input dtype
        elif fir_op == "logical_not":
            arg = x
        else:
            arg = em.cast(x, out.dtype)
        return em.op(fir_op, [arg], out)

    return conv


for _aten, _fir in _UNARY.items():
    register(f"aten.{_aten}.default")(_unary(_fir))
register("aten.sgn.default")(_unary("sign"))


def _binary(fir_op: str, compare: bool = False) -> Converter:
    def conv(em: Emitter, a: Any, b: Any) -> Value:
        out = em.out_type()
        op = fir_op
        if out.dtype.is_bool and fir_op in _BOOL_ARITH:
            op = _BOOL_ARITH[fir_op]  # torch computes bool * bool as a logical and
        dtype = _promoted(a, b) if compare or op.startswith("logical_") else out.dtype
        return em.op(op, [_operand(em, a, dtype), _operand(em, b, dtype)], out)

    return conv


_BOOL_ARITH = {
    "mul": "logical_and",
    "maximum": "logical_or",
    "minimum": "logical_and",
    "add": "logical_or",
}


_BINARY = {
    "mul": "mul",
    "maximum": "maximum",
    "minimum": "minimum",
    "atan2": "atan2",
    "hypot": "hypot",
    "fmod": "fmod",
    "remainder": "mod",
    "copysign": "copysign",
    "bitwise_and": "bitwise_and",
    "bitwise_or": "bitwise_or",
    "bitwise_xor": "bitwise_xor",
    "logical_and": "logical_and",
    "logical_or": "logical_or",
    "logical_xor": "logical_xor",
    "fmax": None,
    "fmin": None,
}
for _aten, _binop in _BINARY.items():
    if _binop is None:
        continue
    for _ov in ("Tensor", "Scalar", "default"):
        register(f"aten.{_aten}.{_ov}")(_binary(_binop))
for _cmp in ("eq", "ne", "lt", "le", "gt", "ge"):
    for _ov in ("Tensor", "Scalar"):
        register(f"aten.{_cmp}.{_ov}")(_binary(_cmp, compare=True))


@register(
    "aten.add.Tensor",
    "aten.add.Scalar",
    "aten.sub.Tensor",
    "aten.sub.Scalar",
    "aten.rsub.Tensor",
    "aten.rsub.Scalar",
)
def _add_sub(em: Emitter, a: Any, b: Any, alpha: Any = 1) -> Value:
    out = em.out_type()
    name = str(em.node.target)
    op = "add" if ".add." in name else "sub"
    if ".rsub." in name:
        a, b = b, a
    dtype = out.dtype
    lhs, rhs = _operand(em, a, dtype), _operand(em, b, dtype)
    if dtype.is_bool:
        if op != "add" or alpha != 1:
            raise Fallback("bool arithmetic")
        return em.op("logical_or", [lhs, rhs], out)
    if alpha != 1:
        if isinstance(rhs, Literal):
            raise Fallback("alpha with a scalar operand")
        shape = rhs.type.shape
        rhs = em.op(
            "mul", [rhs, _operand(em, alpha, dtype)], TensorType(dtype, shape), hint="alpha"
        )
    return em.op(op, [lhs, rhs], out)


@register(
    "aten.div.Tensor",
    "aten.div.Scalar",
    "aten.div.Tensor_mode",
    "aten.div.Scalar_mode",
    "aten.true_divide.Tensor",
    "aten.true_divide.Scalar",
)
def _div(em: Emitter, a: Any, b: Any, rounding_mode: str | None = None) -> Value:
    out = em.out_type()
    if rounding_mode is None:
        return em.op("div", [_operand(em, a, out.dtype), _operand(em, b, out.dtype)], out)
    if rounding_mode == "floor":
        return em.op("floordiv", [_operand(em, a, out.dtype), _operand(em, b, out.dtype)], out)
    if rounding_mode == "trunc" and out.dtype.is_float:
        q = em.op("div", [_operand(em, a, out.dtype), _operand(em, b, out.dtype)], out, hint="q")
        return em.op("trunc", [q], out)
    raise Fallback(f"division with rounding_mode={rounding_mode!r} on {out.dtype}")


@register("aten.floor_divide.default", "aten.floor_divide.Scalar")
def _floor_divide(em: Emitter, a: Any, b: Any) -> Value:
    out = em.out_type()
    return em.op("floordiv", [_operand(em, a, out.dtype), _operand(em, b, out.dtype)], out)


@register("aten.pow.Tensor_Scalar", "aten.pow.Tensor_Tensor", "aten.pow.Scalar")
def _pow(em: Emitter, a: Any, b: Any) -> Value:
    out = em.out_type()
    if not out.dtype.is_float:
        raise Fallback("integer power")
    return em.op("pow", [_operand(em, a, out.dtype), _operand(em, b, out.dtype)], out)


@register("aten.where.self", "aten.where.ScalarSelf", "aten.where.ScalarOther", "aten.where.Scalar")
def _where(em: Emitter, cond: Any, a: Any, b: Any) -> Value:
    out = em.out_type()
    c = _tensor(cond, "condition")
    return em.op("where", [c, _operand(em, a, out.dtype), _operand(em, b, out.dtype)], out)


@register("aten.masked_fill.Scalar", "aten.masked_fill.Tensor")
def _masked_fill(em: Emitter, x: Any, mask: Any, value: Any) -> Value:
    out = em.out_type()
    v = em.cast(value, out.dtype) if isinstance(value, Value) else _operand(em, value, out.dtype)
    return em.op("masked_fill", [em.cast(_tensor(x), out.dtype), _tensor(mask), v], out)


@register("aten.clamp.default", "aten.clip.default")
def _clamp(em: Emitter, x: Any, min: Any = None, max: Any = None) -> Value:
    out = em.out_type()
    x = _tensor(x)
    if x.type.dtype != out.dtype:
        raise Fallback("clamp with promotion")
    for bound in (min, max):
        if bound is not None and not isinstance(bound, int | float):
            raise Fallback("tensor bounds")
    if not out.dtype.is_float and any(isinstance(v, float) for v in (min, max)):
        raise Fallback("float bounds on an integer tensor")
    return em.op(
        "clamp",
        [x],
        out,
        {"min": None if min is None else float(min), "max": None if max is None else float(max)},
    )


@register("aten.clamp_min.default")
def _clamp_min(em: Emitter, x: Any, min: Any) -> Value:
    return _clamp(em, x, min=min)


@register("aten.clamp_max.default")
def _clamp_max(em: Emitter, x: Any, max: Any) -> Value:
    return _clamp(em, x, max=max)


@register("aten._to_copy.default", "aten.to.dtype", "aten._to_copy")
def _to_copy(em: Emitter, x: Any, *args: Any, **kwargs: Any) -> Value:
    em.check_device(kwargs.get("device"), "copy")
    out = em.out_type()
    return em.cast(_tensor(x), out.dtype)


@register("prims.convert_element_type.default")
def _convert_element_type(em: Emitter, x: Any, dtype: Any) -> Value:
    """prims' cast (decompositions emit it): a FIR ``cast`` to the result's dtype."""
    return em.cast(_tensor(x), em.out_dtype())


# ---------------------------------------------------------------------------------------------
# compositions: no FIR op of their own; each follows ATen's CPU kernel (see fir.frontend.aten)


@register("aten.addcmul.default", "aten.addcdiv.default")
def _addc(em: Emitter, x: Any, t1: Any, t2: Any, *, value: Any = 1) -> Value:
    out = em.out_type()
    div = "addcdiv" in str(em.node.target)
    if div and not out.dtype.is_float:
        raise Fallback("integer addcdiv")
    if out.dtype.is_narrow_float:
        raise Fallback(f"{out.dtype}: ATen computes this in f32")
    x, t1, t2 = _cast_all(em, out.dtype, x, t1, t2)
    # ATen: self + value * t1 * t2 (or value * t1 / t2), left to right
    p = _auto(em, "mul", [t1, _lit(value)]) if value != 1 else t1
    p = _auto(em, "div" if div else "mul", [p, t2])
    return em.op("add", [x, p], out)


@register("aten.lerp.Scalar", "aten.lerp.Tensor")
def _lerp(em: Emitter, start: Any, end: Any, weight: Any) -> Value:
    dtype = _float_only(em)
    out = em.out_type()
    a, b = _cast_all(em, dtype, start, end)
    d = _auto(em, "sub", [b, a], hint="diff")
    if not isinstance(weight, Value):  # the branch is known now
        w: Value | Literal = _lit(weight)
        if abs(float(weight)) < 0.5:
            return em.op("add", [a, _auto(em, "mul", [w, d])], out)
        one_minus = float(
            torch.tensor(1.0, dtype=dtype.to_torch())
            - torch.tensor(float(weight), dtype=dtype.to_torch())
        )
        return em.op("sub", [b, _auto(em, "mul", [d, Literal(one_minus)])], out)
    w = em.cast(weight, dtype)
    small = _auto(em, "add", [a, _auto(em, "mul", [w, d])], hint="small")
    large = _auto(
        em, "sub", [b, _auto(em, "mul", [d, _auto(em, "sub", [Literal(1), w])])], hint="large"
    )
    cond = _auto(em, "lt", [_auto(em, "abs", [w]), Literal(0.5)])
    return em.op("where", [cond, small, large], out)


@register(
    "aten.xlogy.Tensor",
    "aten.xlogy.Scalar_Self",
    "aten.xlogy.Scalar_Other",
    "aten.special_xlogy.default",
    "aten.special_xlog1py.default",
)
def _xlogy(em: Emitter, x: Any, y: Any) -> Value:
    dtype = _float_only(em)
    out = em.out_type()
    x, y = _cast_all(em, dtype, x, y)
    if not isinstance(y, Value):
        raise Fallback("scalar y")
    log = "log1p" if "xlog1py" in str(em.node.target) else "log"
    # ATen: isnan(y) ? nan : x == 0 ? 0 : x * log(y)
    r = _auto(em, "mul", [x, _auto(em, log, [y])])
    if isinstance(x, Value):
        r = _auto(em, "where", [_auto(em, "eq", [x, Literal(0)]), Literal(0), r])
    elif x.value == 0:
        r = _expand_to(em, _auto(em, "where", [_auto(em, "isnan", [y]), y, Literal(0)]), out.shape)
        return r
    return em.op("where", [_auto(em, "isnan", [y]), y, r], out)


@register("aten.frac.default")
def _frac(em: Emitter, x: Any) -> Value:
    _float_only(em, half_ok=True)  # x - trunc(x) is exact
    x = _tensor(x)
    return em.op("sub", [x, _auto(em, "trunc", [x])], em.out_type())


@register("aten.deg2rad.default", "aten.rad2deg.default")
def _deg2rad(em: Emitter, x: Any) -> Value:
    dtype = _float_only(em, half_ok=True)
    k = 0.017453292519943295 if "deg2rad" in str(em.node.target) else 57.29577951308232
    return em.op("mul", [em.cast(_tensor(x), dtype), Literal(k)], em.out_type())


@register("aten.nan_to_num.default")
def _nan_to_num(
    em: Emitter, x: Any, nan: Any = None, posinf: Any = None, neginf: Any = None
) -> Value:
    x = _tensor(x)
    out = em.out_type()
    if not out.dtype.is_float:
        return em.cast(x, out.dtype)
    info = torch.finfo(out.dtype.to_torch())
    pos = float(info.max) if posinf is None else float(posinf)
    neg = float(info.min) if neginf is None else float(neginf)
    r = _auto(em, "where", [_auto(em, "eq", [x, Literal(float("inf"))]), Literal(pos), x])
    r = _auto(em, "where", [_auto(em, "eq", [x, Literal(float("-inf"))]), Literal(neg), r])
    nanv = 0.0 if nan is None else float(nan)
    return em.op("where", [_auto(em, "isnan", [x]), Literal(nanv), r], out)


@register("aten.logit.default")
def _logit(em: Emitter, x: Any, eps: Any = None) -> Value:
    dtype = _float_only(em)
    x = em.cast(_tensor(x), dtype)
    if eps is not None and float(eps) >= 0:
        lo = torch.tensor(float(eps), dtype=dtype.to_torch())
        hi = float(torch.tensor(1.0, dtype=dtype.to_torch()) - lo)  # 1 - eps in the tensor's dtype
        x = _auto(em, "clamp", [x], {"min": float(lo), "max": hi})
    ratio = _auto(em, "div", [x, _auto(em, "sub", [Literal(1), x])])
    return em.op("log", [ratio], em.out_type())


@register("aten.sinc.default")
def _sinc(em: Emitter, x: Any) -> Value:
    dtype = _float_only(em)
    x = em.cast(_tensor(x), dtype)
    p = _auto(em, "mul", [x, Literal(math.pi)])
    r = _auto(em, "div", [_auto(em, "sin", [p]), p])
    return em.op("where", [_auto(em, "eq", [x, Literal(0)]), Literal(1.0), r], em.out_type())


@register("aten.logaddexp.default", "aten.logaddexp2.default")
def _logaddexp(em: Emitter, a: Any, b: Any) -> Value:
    dtype = _float_only(em)
    a, b = _cast_all(em, dtype, a, b)
    if not (isinstance(a, Value) and isinstance(b, Value)):
        raise Fallback("scalar operand")
    two = "logaddexp2" in str(em.node.target)
    # ATen: isinf(a) && a == b ? a : max(a, b) + log1p(exp(-|a - b|))   (exp2 and / ln 2 for base 2)
    m = _auto(em, "maximum", [a, b])
    e = _auto(
        em,
        "exp2" if two else "exp",
        [_auto(em, "neg", [_auto(em, "abs", [_auto(em, "sub", [a, b])])])],
    )
    l1p = _auto(em, "log1p", [e])
    if two:
        l1p = _auto(em, "mul", [l1p, Literal(1.0 / math.log(2.0))])
    r = _auto(em, "add", [m, l1p])
    same_inf = _auto(em, "logical_and", [_auto(em, "isinf", [a]), _auto(em, "eq", [a, b])])
    return em.op("where", [same_inf, a, r], em.out_type())


@register("aten.fmax.default", "aten.fmin.default")
def _fmax(em: Emitter, a: Any, b: Any) -> Value:
    out = em.out_type()
    a, b = _cast_all(em, out.dtype, a, b)
    kind = "maximum" if "fmax" in str(em.node.target) else "minimum"
    if not out.dtype.is_float:
        return em.op(_BOOL_ARITH[kind] if out.dtype.is_bool else kind, [a, b], out)
    if not (isinstance(a, Value) and isinstance(b, Value)):
        raise Fallback("scalar operand")
    # std::fmax: a NaN operand loses to a number
    m = _auto(em, kind, [a, b])
    m = _auto(em, "where", [_auto(em, "isnan", [b]), a, m])
    return em.op("where", [_auto(em, "isnan", [a]), b, m], out)


@register("aten.clamp.Tensor", "aten.clamp_min.Tensor", "aten.clamp_max.Tensor")
def _clamp_tensor(em: Emitter, x: Any, *bounds: Any, **kw: Any) -> Value:
    name = str(em.node.target)
    if "clamp_min" in name:
        lo, hi = (bounds[0] if bounds else kw.get("min")), None
    elif "clamp_max" in name:
        lo, hi = None, (bounds[0] if bounds else kw.get("max"))
    else:
        lo = bounds[0] if bounds else kw.get("min")
        hi = bounds[1] if len(bounds) > 1 else kw.get("max")
    out = em.out_type()
    if out.dtype.is_bool:
        raise Fallback("bool clamp")
    r = em.cast(_tensor(x), out.dtype)
    # ATen: min(max(x, lo), hi); NaN anywhere gives NaN, like maximum/minimum
    if lo is not None:
        r = _auto(em, "maximum", [r, _operand(em, lo, out.dtype)])
    if hi is not None:
        r = _auto(em, "minimum", [r, _operand(em, hi, out.dtype)])
    return _expand_to(em, r, out.shape)


@register("aten.angle.default")
def _angle(em: Emitter, x: Any) -> Value:
    dtype = _float_only(em)
    x = em.cast(_tensor(x), dtype)
    r = _auto(
        em, "where", [_auto(em, "lt", [x, Literal(0)]), Literal(math.pi), _filled(em, x, 0.0)]
    )
    return em.op("where", [_auto(em, "isnan", [x]), x, r], em.out_type())


@register("aten.heaviside.default")
def _heaviside(em: Emitter, x: Any, values: Any) -> Value:
    out = em.out_type()
    x, v = _cast_all(em, out.dtype, x, values)
    if not isinstance(x, Value):
        raise Fallback("scalar input")
    pos = em.cast(_auto(em, "gt", [x, Literal(0)]), out.dtype)
    return em.op("where", [_auto(em, "eq", [x, Literal(0)]), v, pos], out)


@register("aten.isposinf.default", "aten.isneginf.default")
def _isposinf(em: Emitter, x: Any) -> Value:
    x = _tensor(x)
    out = em.out_type()
    if not x.type.dtype.is_float:
        return em.op("full", [Literal(False)], out)
    inf = float("inf") if "isposinf" in str(em.node.target) else float("-inf")
    return em.op("eq", [x, Literal(inf)], out)


@register("aten.round.decimals")
def _round_decimals(em: Emitter, x: Any, *, decimals: int = 0) -> Value:
    dtype = _float_only(em)
    x = _tensor(x)
    out = em.out_type()
    if decimals == 0:
        return em.op("round", [x], out)
    # ATen: nearbyint(x * 10^d) / 10^d, or nearbyint(x / 10^-d) * 10^-d for d < 0
    p = float(torch.tensor(10.0 ** abs(decimals), dtype=dtype.to_torch()))
    if decimals > 0:
        return em.op(
            "div", [_auto(em, "round", [_auto(em, "mul", [x, Literal(p)])]), Literal(p)], out
        )
    return em.op("mul", [_auto(em, "round", [_auto(em, "div", [x, Literal(p)])]), Literal(p)], out)


@register("aten.polygamma.default")
def _polygamma(em: Emitter, n: Any, x: Any) -> Value:
    dtype = _float_only(em, half_ok=True)
    if n != 0:
        raise Fallback(f"polygamma of order {n}")
    return em.op("digamma", [em.cast(_tensor(x), dtype)], em.out_type())


@register("aten.mvlgamma.default")
def _mvlgamma(em: Emitter, x: Any, p: int) -> Value:
    dtype = _float_only(em)
    x = em.cast(_tensor(x), dtype)
    # ATen: lgamma(x[..., None] + arange(-p/2 + 1/2, 1/2, 1/2)).sum(-1) + p(p-1)/4 log(pi)
    args = em.op(
        "arange",
        [],
        TensorType(dtype, (p,)),
        {"start": -p * 0.5 + 0.5, "end": 0.5, "step": 0.5},
        hint="args",
    )
    xs = _auto(em, "unsqueeze", [x], {"dim": x.type.rank})
    lg = _auto(em, "lgamma", [_auto(em, "add", [args, xs])])
    s = _auto(em, "sum", [lg], {"dims": [x.type.rank]})
    return em.op("add", [s, Literal(p * (p - 1) * math.log(math.pi) / 4)], em.out_type())


@register("aten.special_entr.default")
def _entr(em: Emitter, x: Any) -> Value:
    dtype = _float_only(em)
    x = em.cast(_tensor(x), dtype)
    # ATen: isnan(x) ? x : x > 0 ? -x * log(x) : x == 0 ? 0 : -inf
    r = _auto(
        em, "where", [_auto(em, "eq", [x, Literal(0)]), Literal(0.0), _filled(em, x, float("-inf"))]
    )
    r = _auto(
        em,
        "where",
        [
            _auto(em, "gt", [x, Literal(0)]),
            _auto(em, "mul", [_auto(em, "neg", [x]), _auto(em, "log", [x])]),
            r,
        ],
    )
    return em.op("where", [_auto(em, "isnan", [x]), x, r], em.out_type())


@register("aten.ldexp.Tensor")
def _ldexp(em: Emitter, x: Any, other: Any) -> Value:
    dtype = _float_only(em)
    x, o = _cast_all(em, dtype, x, other)
    return em.op("mul", [x, _auto(em, "pow", [Literal(2.0), o])], em.out_type())
