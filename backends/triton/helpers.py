"""``@triton.jit`` helpers that generated kernels call: torch's semantics where Triton's
operators differ (NaN-propagating max/min, shifts past the width),
and digamma (libdevice has none).

Generated modules import everything here (``from fir.backends.triton.helpers import *``) and
call math through ``ld``: CUDA's libdevice when compiling, and the runtime's
:mod:`~fir.backends.runtime.triton_interp_math` (numpy) under ``TRITON_INTERPRET=1``, where
libdevice's externs cannot run.
"""

from __future__ import annotations

import os

import triton
import triton.language as tl

if os.environ.get("TRITON_INTERPRET") == "1":  # pragma: no cover - chosen at import
    from fir.backends.runtime import triton_interp_math as ld
else:
    # the same role as triton_interp_math, chosen at import (mypy takes the first binding's type)
    from triton.language.extra import libdevice as ld  # type: ignore[no-redef]


def _launch_options() -> dict[str, object]:
    """Compile options of every launch, where this Triton has them:

    * libdevice without flushing subnormals to zero (Triton turns the flush on by default;
      torch's CUDA kernels keep subnormals, and floor, fmod, sqrt or lgamma of one would
      differ);
    * multiply-adds fused (``enable_fp_fusion``), as nvcc does for torch's own kernels and as
      Triton 3.6 does by default: said explicitly because Triton 3.9 warns that its default
      turns to unfused in 3.10, which would change FIR's results and speed with the version."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        return {}
    try:
        from triton.backends.nvidia.compiler import CUDAOptions
    except ImportError:  # pragma: no cover - a Triton without the CUDA back end
        return {}
    fields = getattr(CUDAOptions, "__dataclass_fields__", {})
    wanted = {"enable_reflect_ftz": False, "enable_fp_fusion": True}
    return {k: v for k, v in wanted.items() if k in fields}


FIR_LAUNCH = _launch_options()


@triton.jit
def fir_fdiv(a, b):
    # IEEE division of tensors: tl.div_rn takes f32 only, and f64's `/` is IEEE already
    if a.dtype == tl.float64:
        return a / b
    else:
        return tl.div_rn(a, b)


@triton.jit
def fir_max(a, b):
    # NaN wins, as in torch.maximum
    return tl.where((a != a) | (a > b), a, b)


@triton.jit
def fir_min(a, b):
    return tl.where((a != a) | (a < b), a, b)


@triton.jit
def fir_idiv(a, b):
    # index expressions: floor division by a positive divisor, any dividend
    q = a // b
    return tl.where((a % b) < 0, q - 1, q)


@triton.jit
def fir_imod(a, b):
    r = a % b
    return tl.where(r < 0, r + b, r)


@triton.jit
def fir_shl(a, b):
    bits: tl.constexpr = a.dtype.primitive_bitwidth
    inside = (b >= 0) & (b < bits)
    return tl.where(inside, a << tl.where(inside, b, 0), 0)


@triton.jit
def fir_shr(a, b):
    bits: tl.constexpr = a.dtype.primitive_bitwidth
    inside = (b >= 0) & (b < bits)
    # past the width, as torch: the sign's bits of a signed dtype, 0 of an unsigned one
    fill = tl.where(a < 0, a >> (bits - 1), a - a)
    return tl.where(inside, a >> tl.where(inside, b, 0), fill)


@triton.jit
def fir_digamma(x):
    # reflection below zero, the recurrence up to 10, then the asymptotic series (its next term
    # is below 1e-16 there); digamma(+-0) is -+inf and a negative integer NaN, as torch's.
    # Constants go through tl.full: a Python float would be rounded to f32 first.
    neg = x < 0
    y = tl.where(neg, 1.0 - x, x)
    one = tl.full(y.shape, 1.0, y.dtype)
    acc = tl.zeros_like(y)
    for _ in tl.static_range(10):
        small = y < 10.0
        acc = acc - tl.where(small, fir_fdiv(one, y), 0.0)
        y = tl.where(small, y + 1.0, y)
    z = fir_fdiv(one, y * y)
    series = tl.full(y.shape, 0.021092796092796094, y.dtype)
    series = tl.full(y.shape, 0.007575757575757576, y.dtype) - z * series
    series = tl.full(y.shape, 0.004166666666666667, y.dtype) - z * series
    series = tl.full(y.shape, 0.003968253968253968, y.dtype) - z * series
    series = tl.full(y.shape, 0.008333333333333333, y.dtype) - z * series
    series = z * (tl.full(y.shape, 0.08333333333333333, y.dtype) - z * series)
    r = acc + ld.log(y) - 0.5 * fir_fdiv(one, y) - series
    # the reflection term pi / tan(pi * x) in f64, with x's fractional part for x (tan has
    # period pi): near a pole an f32 product pi * x would carry |x| ulps into tan; torch
    # computes this term in f64 on the CPU and the GPU alike
    x64 = x.to(tl.float64)
    frac = x64 - tl.where(x64 < 0, tl.ceil(x64), tl.floor(x64))
    pi = tl.full(y.shape, 3.141592653589793, tl.float64)
    reflect = (pi / ld.tan(pi * frac)).to(y.dtype)
    r = tl.where(neg, r - reflect, r)
    whole = (x == tl.floor(x)) & (x < 0)
    r = tl.where(whole, float("nan"), r)
    # (+-0 by its sign bit: the GPU may compute -x as 0 - x, which loses the sign of zero)
    inf = tl.where(ld.signbit(x) != 0, float("inf"), float("-inf"))
    return tl.where(x == 0, inf, r)


@triton.jit
def fir_lgamma(x):
    # libdevice flushes an f32 subnormal to zero (lgamma: inf); there lgamma(x) = -log|x| to
    # f32's precision, and log keeps subnormals
    if x.dtype == tl.float32:
        tiny = tl.abs(x) < 1.1754943508222875e-38
        return tl.where(tiny & (x != 0), -ld.log(tl.abs(x)), ld.lgamma(x))
    else:
        return ld.lgamma(x)


@triton.jit
def fir_floor(x):
    # libdevice (and so tl.floor) flushes an f32 subnormal to zero: floor(-1e-40) is -1
    if x.dtype == tl.float32:
        tiny = (tl.abs(x) < 1.1754943508222875e-38) & (x != 0)
        return tl.where(tiny, tl.where(x < 0, -1.0, 0.0), tl.floor(x))
    else:
        return tl.floor(x)


@triton.jit
def fir_ceil(x):
    if x.dtype == tl.float32:
        tiny = (tl.abs(x) < 1.1754943508222875e-38) & (x != 0)
        return tl.where(tiny, tl.where(x > 0, 1.0, -0.0), tl.ceil(x))
    else:
        return tl.ceil(x)


# what ``from fir.backends.triton.helpers import *`` gives a generated module: every helper
__all__ = ["FIR_LAUNCH", "ld", "tl", "triton", *(n for n in dir() if n.startswith("fir_"))]
