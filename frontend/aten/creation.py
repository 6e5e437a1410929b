"""Tensor creation: ``full``, ``zeros``, ``ones`` (and their ``_like``/``new_`` forms),
``scalar_tensor``, ``arange``; then compositions (``fill``, ``zero``, ``empty``, ``copy``, ``eye``,
``linspace``, ``logspace``).
"""

from __future__ import annotations

from typing import Any

import torch
from fir.ir.graph import Literal, Value
from fir.ir.types import TensorType

from ..emitter import Emitter, Fallback, size_value
from .common import (
    _arange_i64,
    _auto,
    _expand_to,
    _float_only,
    _lit,
    _tensor,
    _zero,
)
from .registry import register


@register(
    "aten.full.default",
    "aten.zeros.default",
    "aten.ones.default",
    "aten.full_like.default",
    "aten.zeros_like.default",
    "aten.ones_like.default",
    "aten.scalar_tensor.default",
    "aten.new_zeros.default",
    "aten.new_ones.default",
    "aten.new_full.default",
)
def _full(em: Emitter, *args: Any, **kwargs: Any) -> Value:
    name = str(em.node.target)
    em.check_device(kwargs.get("device"))
    out = em.out_type()
    if "zeros" in name:
        value: Any = 0
    elif "ones" in name:
        value = 1
    elif name == "aten.scalar_tensor.default":
        value = args[0]
    elif name in ("aten.full.default", "aten.full_like.default"):
        value = args[1] if len(args) > 1 else kwargs["fill_value"]
    elif name == "aten.new_full.default":
        value = args[2] if len(args) > 2 else kwargs["fill_value"]
    else:
        raise Fallback("unknown creation op")
    if isinstance(value, Value):
        raise Fallback("tensor fill value")
    if out.dtype.is_float:
        value = float(value)
    elif out.dtype.is_bool:
        value = bool(value)
    elif isinstance(value, float):
        if not value.is_integer():
            raise Fallback("fractional fill for an integer tensor")
        value = int(value)
    return em.op("full", [em.literal(value)], out)


@register("aten.arange.default", "aten.arange.start", "aten.arange.start_step")
def _arange(em: Emitter, *args: Any, **kwargs: Any) -> Value:
    em.check_device(kwargs.get("device"))
    bounds = [_arange_bound(a) for a in args[:3]]
    if "start" in kwargs:
        bounds.insert(0, _arange_bound(kwargs["start"]))
    if "end" in kwargs:
        bounds.append(_arange_bound(kwargs["end"]))
    if len(bounds) == 1:
        start, end, step = 0, bounds[0], 1
    elif len(bounds) == 2:
        start, end, step = bounds[0], bounds[1], 1
    elif len(bounds) == 3:
        start, end, step = bounds
    else:
        raise Fallback("arange without bounds")
    if "step" in kwargs:
        step = _arange_bound(kwargs["step"])
    if not isinstance(step, int | float):
        raise Fallback("arange with a symbolic step")
    attrs = {
        "start": start if start != 0 else None,
        "end": end,
        "step": step if step != 1 else None,
    }
    # the length is PyTorch's (the result type); a symbolic bound is a size expression, which
    # the lowering and the interpreter evaluate like any symbolic attribute
    return em.op("arange", [], em.out_type(), attrs)


def _arange_bound(a: Any) -> Any:
    """A bound of ``arange``: a number, or a symbolic integer as a FIR size expression."""
    if isinstance(a, bool) or not isinstance(a, int | float | torch.SymInt):
        raise Fallback(f"arange bound {a!r} is not a number or a symbolic integer")
    return size_value(a) if isinstance(a, torch.SymInt) else a


# ---------------------------------------------------------------------------------------------
# compositions: no FIR op of their own; each follows ATen's CPU kernel (see fir.frontend.aten)


@register("aten.fill.Scalar")
def _fill(em: Emitter, x: Any, value: Any) -> Value:
    out = em.out_type()
    v = _lit(value)
    if out.dtype.is_float:
        v = Literal(float(value))
    elif out.dtype.is_bool:
        v = Literal(bool(value))
    elif isinstance(value, float):
        if not value.is_integer():
            raise Fallback("fractional fill for an integer tensor")
        v = Literal(int(value))
    return em.op("full", [v], out)


@register("aten.empty_like.default", "aten.empty.memory_format", "aten.new_empty.default")
def _empty(em: Emitter, *args: Any, **kwargs: Any) -> Value:
    # the contents are unspecified; zeros are as good as any
    out = em.out_type()
    em.check_device(kwargs.get("device"))
    return em.op("full", [_zero(out.dtype)], out)


@register("aten.copy.default")
def _copy(em: Emitter, x: Any, src: Any, non_blocking: bool = False) -> Value:
    out = em.out_type()
    return _expand_to(em, em.cast(_tensor(src), out.dtype), out.shape)


@register("aten.eye.default", "aten.eye.m")
def _eye(em: Emitter, n: int, *args: Any, **kwargs: Any) -> Value:
    out = em.out_type()
    m = args[0] if args and isinstance(args[0], int) else n
    if not isinstance(n, int) or not isinstance(m, int):
        raise Fallback("symbolic size")
    row = _auto(em, "unsqueeze", [_arange_i64(em, 0, n, hint="row")], {"dim": 1})
    eq = _auto(em, "eq", [row, _arange_i64(em, 0, m, hint="col")])
    return em.cast(eq, out.dtype)


@register("aten.linspace.default")
def _linspace(em: Emitter, start: Any, end: Any, steps: int, **kwargs: Any) -> Value:
    dtype = _float_only(em)
    out = em.out_type()
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (start, end, steps)):
        raise Fallback("tensor or symbolic bounds")
    if steps <= 1:
        return em.op("full", [Literal(float(start))], out)
    t = dtype.to_torch()
    lo, hi = float(torch.tensor(start, dtype=t)), float(torch.tensor(end, dtype=t))
    step = float(torch.tensor((hi - lo) / (steps - 1), dtype=t))
    # ATen: i < steps / 2 ? start + step * i : end - step * (steps - i - 1)
    i = em.op("arange", [], TensorType(dtype, (steps,)), {"end": steps}, hint="i")
    first = _auto(em, "add", [Literal(lo), _auto(em, "mul", [Literal(step), i])], hint="lo")
    back = _auto(em, "sub", [Literal(float(steps - 1)), i])
    second = _auto(em, "sub", [Literal(hi), _auto(em, "mul", [Literal(step), back])], hint="hi")
    return em.op("where", [_auto(em, "lt", [i, Literal(steps // 2)]), first, second], out)


@register("aten.zero.default")
def _zero_fill(em: Emitter, x: Any) -> Value:
    out = em.out_type()
    return em.op("full", [_zero(out.dtype)], out)


@register("aten.logspace.default")
def _logspace(
    em: Emitter, start: Any, end: Any, steps: int, base: Any = 10.0, **kwargs: Any
) -> Value:
    dtype = _float_only(em)
    out = em.out_type()
    if not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in (start, end, steps, base)
    ):
        raise Fallback("tensor or symbolic bounds")
    if steps <= 1:
        return em.op("full", [Literal(float(base) ** float(start))], out)
    step = (float(end) - float(start)) / (steps - 1)
    # ATen: pow(base, i < steps / 2 ? start + step * i : end - step * (steps - i - 1))
    i = em.op("arange", [], TensorType(dtype, (steps,)), {"end": steps}, hint="i")
    first = _auto(
        em, "add", [Literal(float(start)), _auto(em, "mul", [Literal(step), i])], hint="lo"
    )
    back = _auto(em, "sub", [Literal(float(steps - 1)), i])
    second = _auto(
        em, "sub", [Literal(float(end)), _auto(em, "mul", [Literal(step), back])], hint="hi"
    )
    e = _auto(em, "where", [_auto(em, "lt", [i, Literal(steps // 2)]), first, second])
    return em.op("pow", [Literal(float(base)), e], out)
