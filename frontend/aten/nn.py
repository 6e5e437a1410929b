"""Neural-network ops other than norms and losses: ``softmax``/``log_softmax`` and the
activations FIR keeps composite (``gelu``, ``silu``, ``mish``, ``hardswish``, ``softplus``,
``leaky_relu``, ``elu``, ``hardtanh`` …: breaking them up is the ``decompose`` pass's job); then
compositions (``celu``, ``threshold``, shrinks, ``prelu``, ``log_sigmoid``, ``glu``, softmax
backward, ``_safe_softmax``, average pooling, dropout backward).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fir.ir.graph import Literal, Value
from fir.ir.types import TensorType

from ..emitter import Emitter, Fallback
from .common import (
    _auto,
    _cast_all,
    _float_only,
    _operand,
    _reshape_to,
    _scale,
    _static_shape,
    _tensor,
    _used_results,
)
from .registry import Converter, register


@register("aten._softmax.default", "aten._log_softmax.default")
def _softmax_internal(em: Emitter, x: Any, dim: int, half_to_float: bool) -> Value:
    if half_to_float:
        raise Fallback("half_to_float")
    kind = "log_softmax" if "log_softmax" in str(em.node.target) else "softmax"
    return em.op(kind, [_tensor(x)], em.out_type(), {"dim": dim})


@register("aten.softmax.int", "aten.log_softmax.int")
def _softmax(em: Emitter, x: Any, dim: int, dtype: Any = None) -> Value:
    out = em.out_type()
    kind = "log_softmax" if "log_softmax" in str(em.node.target) else "softmax"
    return em.op(kind, [em.cast(_tensor(x), out.dtype)], out, {"dim": dim})


@register("aten.gelu.default")
def _gelu(em: Emitter, x: Any, approximate: str = "none") -> Value:
    return em.op(
        "gelu",
        [_tensor(x)],
        em.out_type(),
        {"approximate": None if approximate == "none" else approximate},
    )


def _activation(fir_op: str) -> Converter:
    def conv(em: Emitter, x: Any) -> Value:
        return em.op(fir_op, [_tensor(x)], em.out_type())

    return conv


for _aten in ("silu", "mish", "hardswish", "hardsigmoid"):
    register(f"aten.{_aten}.default")(_activation(_aten))


@register("aten.softplus.default")
def _softplus(em: Emitter, x: Any, beta: Any = 1, threshold: Any = 20) -> Value:
    return em.op(
        "softplus",
        [_tensor(x)],
        em.out_type(),
        {
            "beta": None if beta == 1 else float(beta),
            "threshold": None if threshold == 20 else float(threshold),
        },
    )


@register("aten.leaky_relu.default")
def _leaky_relu(em: Emitter, x: Any, negative_slope: Any = 0.01) -> Value:
    return em.op(
        "leaky_relu",
        [_tensor(x)],
        em.out_type(),
        {"negative_slope": None if negative_slope == 0.01 else float(negative_slope)},
    )


@register("aten.elu.default")
def _elu(em: Emitter, x: Any, alpha: Any = 1, scale: Any = 1, input_scale: Any = 1) -> Value:
    x = _tensor(x)
    if scale == 1 and input_scale == 1:
        return em.op("elu", [x], em.out_type(), {"alpha": None if alpha == 1 else float(alpha)})
    return _scaled_elu(em, x, alpha, scale, input_scale)


def _scaled_elu(em: Emitter, x: Value, alpha: Any, scale: Any, input_scale: Any) -> Value:
    """ATen's elu kernel: ``x <= 0 ? expm1(x * input_scale) * alpha * scale : x * scale``."""
    _float_only(em)
    neg = _auto(em, "expm1", [_scale(em, x, input_scale)])
    neg = _scale(em, neg, float(alpha) * float(scale))
    pos = _scale(em, x, scale)
    return _auto(em, "where", [_auto(em, "le", [x, Literal(0)]), neg, pos])


@register("aten.celu.default")
def _celu(em: Emitter, x: Any, alpha: Any = 1.0) -> Value:
    return _scaled_elu(em, _tensor(x), alpha, 1.0, 1.0 / float(alpha))


@register("aten.hardtanh.default")
def _hardtanh(em: Emitter, x: Any, min_val: Any = -1.0, max_val: Any = 1.0) -> Value:
    return em.op(
        "hardtanh",
        [_tensor(x)],
        em.out_type(),
        {"min_val": float(min_val), "max_val": float(max_val)},
    )


@register("aten.relu6.default")
def _relu6(em: Emitter, x: Any) -> Value:
    return em.op("hardtanh", [_tensor(x)], em.out_type(), {"min_val": 0.0, "max_val": 6.0})


# ---------------------------------------------------------------------------------------------
# compositions: no FIR op of their own; each follows ATen's CPU kernel (see fir.frontend.aten)


@register("aten.threshold.default")
def _threshold(em: Emitter, x: Any, threshold: Any, value: Any) -> Value:
    out = em.out_type()
    x = em.cast(_tensor(x), out.dtype)
    cond = _auto(em, "le", [x, _operand(em, threshold, out.dtype)])
    return em.op("where", [cond, _operand(em, value, out.dtype), x], out)


@register("aten.softshrink.default")
def _softshrink(em: Emitter, x: Any, lambd: Any = 0.5) -> Value:
    _float_only(em)
    x, lam = _tensor(x), float(lambd)
    # ATen: x > l ? x - l : (x < -l ? x + l : x * 0)
    inner = _auto(
        em,
        "where",
        [
            _auto(em, "lt", [x, Literal(-lam)]),
            _auto(em, "add", [x, Literal(lam)]),
            _auto(em, "mul", [x, Literal(0)]),
        ],
    )
    return em.op(
        "where",
        [_auto(em, "gt", [x, Literal(lam)]), _auto(em, "sub", [x, Literal(lam)]), inner],
        em.out_type(),
    )


@register("aten.hardshrink.default")
def _hardshrink(em: Emitter, x: Any, lambd: Any = 0.5) -> Value:
    _float_only(em, half_ok=True)  # no arithmetic
    x, lam = _tensor(x), float(lambd)
    inside = _auto(
        em, "logical_and", [_auto(em, "ge", [x, Literal(-lam)]), _auto(em, "le", [x, Literal(lam)])]
    )
    return em.op("where", [inside, Literal(0), x], em.out_type())


@register("aten._prelu_kernel.default")
def _prelu(em: Emitter, x: Any, w: Any) -> Value:
    dtype = _float_only(em)
    x, w = _cast_all(em, dtype, x, w)
    return em.op(
        "where", [_auto(em, "gt", [x, Literal(0)]), x, _auto(em, "mul", [w, x])], em.out_type()
    )


@register("aten.log_sigmoid_forward.default")
def _log_sigmoid_forward(em: Emitter, x: Any) -> list[Value]:
    _float_only(em)
    out, z = _log_sigmoid(em, _tensor(x))
    out = _reshape_to(em, out, em.out_type(0).shape)
    buf = em.out_type(1)
    if tuple(buf.shape) != tuple(z.type.shape):
        if 1 in _used_results(em):
            raise Fallback("the buffer is read")
        return [out, out]
    return [out, z]


@register("aten.glu.default")
def _glu(em: Emitter, x: Any, dim: int = -1) -> Value:
    _float_only(em)
    x = _tensor(x)
    d = dim % x.type.rank
    n = x.type.shape[d]
    if not isinstance(n, int):
        raise Fallback("symbolic size")
    half = list(x.type.shape)
    half[d] = n // 2
    ht = TensorType(x.type.dtype, tuple(half))
    a = em.op("slice", [x], ht, {"dim": d, "end": n // 2}, hint="a")
    b = em.op("slice", [x], ht, {"dim": d, "start": n // 2}, hint="b")
    return em.op("mul", [a, _auto(em, "sigmoid", [b])], em.out_type())


@register("aten._softmax_backward_data.default", "aten._log_softmax_backward_data.default")
def _softmax_backward(em: Emitter, grad: Any, y: Any, dim: int, input_dtype: Any) -> Value:
    dtype = _float_only(em)
    grad, y = _tensor(grad), _tensor(y)
    if grad.type.dtype != dtype or y.type.dtype != dtype:
        raise Fallback("mixed dtypes")
    d = dim % max(y.type.rank, 1)
    red = {"dims": [d] if y.type.rank else None, "keepdim": True}
    if "log_softmax" in str(em.node.target):
        # grad - exp(y) * sum(grad)
        s = _auto(em, "sum", [grad], red)
        return em.op("sub", [grad, _auto(em, "mul", [_auto(em, "exp", [y]), s])], em.out_type())
    # y * (grad - sum(grad * y))
    gy = _auto(em, "mul", [grad, y])
    s = _auto(em, "sum", [gy], red)
    return em.op("mul", [y, _auto(em, "sub", [grad, s])], em.out_type())


@register("aten._safe_softmax.default")
def _safe_softmax(em: Emitter, x: Any, dim: int, dtype: Any = None) -> Value:
    out = em.out_type()
    x = em.cast(_tensor(x), out.dtype)
    sm = _auto(em, "softmax", [x], {"dim": dim})
    d = dim % max(x.type.rank, 1)
    ninf = Literal(float("-inf"))
    if x.type.rank:
        # a row is all -inf exactly where its max is -inf (a NaN is neither: max keeps it).
        # The softmax's own max is this one (cse merges the two where the softmax computes
        # in x's dtype), so an attention softmax with a mask makes two row reductions, not
        # three: one cross-warp reduction less in its kernel (BERT's, f32 rows of 256)
        top = _auto(em, "max", [x], {"dims": [d], "keepdim": True})
        masked = _auto(em, "eq", [top, ninf])
    else:
        masked = _auto(em, "all", [_auto(em, "eq", [x, ninf])], {"dims": None, "keepdim": True})
    return em.op("where", [masked, Literal(0.0), sm], out)


def _pool_windows(em: Emitter, x: Value, windows: list[int]) -> tuple[Value, list[int]]:
    """[..., H, W] with H, W divisible by the windows -> [..., H/kh, kh, W/kw, kw]."""
    shape = _static_shape(x)
    k = len(windows)
    lead, spatial = shape[: len(shape) - k], shape[len(shape) - k :]
    split: list[int] = []
    for n, w in zip(spatial, windows):
        if w <= 0 or n % w:
            raise Fallback("windows that do not tile the input")
        split += [n // w, w]
    y = _reshape_to(em, x, (*lead, *split), hint="windows")
    return y, [len(lead) + 2 * j + 1 for j in range(k)]


@register("aten._adaptive_avg_pool2d.default", "aten._adaptive_avg_pool3d.default")
def _adaptive_avg_pool(em: Emitter, x: Any, output_size: list[int]) -> Value:
    _float_only(em)
    x = _tensor(x)
    shape = _static_shape(x)
    k = len(output_size)
    # with an output size that divides the input every window has the same size, n / out
    windows = [n // o if o and n % o == 0 else 0 for n, o in zip(shape[-k:], output_size)]
    y, dims = _pool_windows(em, x, windows)
    return em.op("mean", [y], em.out_type(), {"dims": dims})


@register("aten.avg_pool2d.default", "aten.avg_pool3d.default")
def _avg_pool(
    em: Emitter,
    x: Any,
    kernel: list[int],
    stride: Sequence[int] = (),
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: Any = None,
) -> Value:
    _float_only(em)
    x = _tensor(x)
    k = 3 if "3d" in str(em.node.target) else 2
    kernel = list(kernel) * (k if len(kernel) == 1 else 1)
    stride = list(stride or kernel)
    stride = stride * (k if len(stride) == 1 else 1)
    pads = (
        [padding] * k
        if isinstance(padding, int)
        else list(padding) * (k if len(padding) == 1 else 1)
    )
    if stride != kernel or any(pads) or divisor_override is not None:
        raise Fallback("overlapping or padded windows")
    y, dims = _pool_windows(em, x, kernel)
    return em.op("mean", [y], em.out_type(), {"dims": dims})


def _log_sigmoid(em: Emitter, x: Value) -> tuple[Value, Value]:
    """ATen's CPU log_sigmoid: m = max(0, -x); z = exp(-m) + exp(-x - m); -(m + log z)."""
    nx = _auto(em, "neg", [x])
    m = _auto(em, "maximum", [nx, Literal(0)])
    z = _auto(
        em,
        "add",
        [_auto(em, "exp", [_auto(em, "neg", [m])]), _auto(em, "exp", [_auto(em, "sub", [nx, m])])],
    )
    return _auto(em, "neg", [_auto(em, "add", [m, _auto(em, "log", [z])])], hint="logsig"), z


@register("aten.native_dropout_backward.default")
def _native_dropout_backward(em: Emitter, grad: Any, mask: Any, scale: float) -> Value:
    dtype = _float_only(em)
    g = em.cast(_tensor(grad), dtype)
    m = em.cast(_tensor(mask), dtype)
    # ATen: grad * mask * scale
    return em.op("mul", [_auto(em, "mul", [g, m]), Literal(float(scale))], em.out_type())
