"""What a reduction accumulates in: the state of each reduction kind, stated once.

A reduction node (``sum``, ``prod``, ``max``, ``min``, ``any``, ``argmax``, ``argmin``,
``welford``) keeps a state of one or more components while it reads its values. Which dtype
each component has, and the value it starts from (the kind's identity: what masked-out lanes
contribute too), is a fact about the op, not about a back end: the C++, llvm and Triton
renderers write each component in their own syntax from :func:`state`.

The rules follow PyTorch's:

* sums and products of floats in f32 (f64 for f64: f16/bf16 are computed in f32, see
  :attr:`~fir.ir.dtypes.DType.compute_dtype`); of integers and bools in i64 (torch's rule:
  the same result modulo 2^n once stored);
* ``max``/``min`` keep a value of the reduced dtype, starting from its lowest (highest) value,
  -inf (inf) for floats; ``argmax``/``argmin`` add the i64 index of that value, starting at -1;
* ``any`` is a bool starting false;
* ``welford`` (mean, M2, count) in f64 for f64 and for 32- and 64-bit integers, else f32, all
  starting at 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .dtypes import DType

KINDS = ("sum", "prod", "max", "min", "any", "argmax", "argmin", "welford")


@dataclass(frozen=True)
class Component:
    """One component of a reduction's state: its dtype and its start value (a Python number:
    ``-inf``/``inf`` for float extremes, ``True``/``False`` for bools)."""

    dtype: DType
    start: float | int | bool


def state(kind: str, dtype: DType) -> tuple[Component, ...]:
    """The state of a ``kind`` reduction over values of ``dtype``, component by component;
    ``KeyError`` for an unknown kind."""
    if kind in ("sum", "prod"):
        start = 0 if kind == "sum" else 1
        if dtype.is_float:
            return (Component(DType.F64 if dtype is DType.F64 else DType.F32, float(start)),)
        return (Component(DType.I64, start),)
    if kind == "any":
        return (Component(DType.BOOL, False),)
    if kind in ("max", "min", "argmax", "argmin"):
        value = Component(dtype, extreme(dtype, lowest=kind in ("max", "argmax")))
        return (value, Component(DType.I64, -1)) if kind.startswith("arg") else (value,)
    if kind == "welford":
        t = DType.F64 if dtype in (DType.F64, DType.I64, DType.I32) else DType.F32
        return (Component(t, 0.0),) * 3
    raise KeyError(f"unknown reduction kind '{kind}'")


def extreme(dtype: DType, lowest: bool) -> float | int | bool:
    """The lowest (or highest) value of ``dtype``: -inf (inf) for floats, False (True) for
    bools, the integer range's end for integers."""
    if dtype.is_float:
        return -math.inf if lowest else math.inf
    if dtype.is_bool:
        return not lowest
    if dtype is DType.U8:
        return 0 if lowest else 255
    bits = dtype.itemsize * 8
    return -(2 ** (bits - 1)) if lowest else 2 ** (bits - 1) - 1
