"""The aten → FIR op table: one converter per aten overload.

A converter receives an :class:`~fir.frontend.fx_import.Emitter` and the node's arguments (FX
nodes already replaced by FIR values) and returns the FIR value(s) of the node. It raises
:class:`~fir.frontend.fx_import.Fallback` for a call it does not handle; the importer then runs
the aten op itself (an extern node). Result types always come from PyTorch's own shape
propagation (``node.meta['val']``); the emitter refuses ops whose FIR typing disagrees, so a
converter cannot silently change a dtype or a shape.

Typing in FIR is explicit: where PyTorch promotes (``int + float``), operands are cast to the
computation dtype first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from fir.ir.dtypes import DType
from fir.ir.graph import Literal, Value
from fir.ir.types import TensorType

from .fx_import import Emitter, Fallback

Converter = Callable[..., Any]
CONVERTERS: dict[str, Converter] = {}


def register(*names: str) -> Callable[[Converter], Converter]:
    def deco(fn: Converter) -> Converter:
        for n in names:
            CONVERTERS[n] = fn
        return fn

    return deco


def mapped_ops() -> list[str]:
    return sorted(CONVERTERS)


# ---------------------------------------------------------------------------------------------
# helpers


def _tensor(x: Any, what: str = "operand") -> Value:
    if not isinstance(x, Value):
        raise Fallback(f"{what} is not a tensor")
    return x


def _operand(em: Emitter, x: Any, dtype: DType) -> Value | Literal:
    if isinstance(x, Value):
        return em.cast(x, dtype)
    lit = em.literal(x)
    if lit.kind == "float" and not dtype.is_float:
        raise Fallback("float scalar with an integer computation")
    return lit


def _promoted(*xs: Any) -> DType:
    """The dtype PyTorch computes ``a op b`` in."""
    probes: list[Any] = []
    for x in xs:
        if isinstance(x, Value):
            probes.append(torch.empty((0,) * x.type.rank, dtype=x.type.dtype.to_torch()))
        elif isinstance(x, bool | int | float):
            probes.append(x)
        else:
            raise Fallback(f"operand {x!r} is not a tensor or a number")
    if len(probes) == 1:
        p = probes[0]
        return DType.from_torch(p.dtype if isinstance(p, torch.Tensor) else torch.tensor(p).dtype)
    dt = torch.result_type(probes[0], probes[1])
    for p in probes[2:]:
        dt = torch.promote_types(dt, p.dtype if isinstance(p, torch.Tensor) else torch.tensor(p).dtype)
    return DType.from_torch(dt)


def _norm_dims(dims: Any, rank: int) -> list[int] | None:
    """aten's ``dim`` argument: None or [] means every dimension."""
    if dims is None:
        return None
    if isinstance(dims, int):
        dims = [dims]
    if len(dims) == 0:
        return None
    return [d % max(rank, 1) for d in dims]


def _used_results(em: Emitter) -> set[int]:
    import operator

    used: set[int] = set()
    for user in em.node.users:
        if user.target is operator.getitem:
            used.add(user.args[1])
        else:
            used.update(range(8))
    return used


# ---------------------------------------------------------------------------------------------
# elementwise

_UNARY = {
    "abs": "abs", "neg": "neg", "exp": "exp", "exp2": "exp2", "expm1": "expm1", "log": "log",
    "log2": "log2", "log10": "log10", "log1p": "log1p", "sqrt": "sqrt", "rsqrt": "rsqrt",
    "sin": "sin", "cos": "cos", "tan": "tan", "asin": "asin", "acos": "acos", "atan": "atan",
    "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "asinh": "asinh", "acosh": "acosh",
    "atanh": "atanh", "sigmoid": "sigmoid", "erf": "erf", "erfc": "erfc", "erfinv": "erfinv",
    "lgamma": "lgamma", "digamma": "digamma", "reciprocal": "reciprocal", "relu": "relu",
    "floor": "floor", "ceil": "ceil", "trunc": "trunc", "sign": "sign", "isnan": "isnan",
    "isinf": "isinf", "isfinite": "isfinite", "signbit": "signbit", "logical_not": "logical_not",
    "bitwise_not": "bitwise_not", "square": "square", "round": "round",
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


def _binary(fir_op: str, compare: bool = False) -> Converter:
    def conv(em: Emitter, a: Any, b: Any) -> Value:
        out = em.out_type()
        dtype = _promoted(a, b) if compare or fir_op.startswith("logical_") else out.dtype
        return em.op(fir_op, [_operand(em, a, dtype), _operand(em, b, dtype)], out)

    return conv


_BINARY = {
    "mul": "mul", "maximum": "maximum", "minimum": "minimum", "atan2": "atan2",
    "hypot": "hypot", "fmod": "fmod", "remainder": "mod", "copysign": "copysign",
    "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor",
    "logical_and": "logical_and", "logical_or": "logical_or", "logical_xor": "logical_xor",
    "fmax": None, "fmin": None,
}
for _aten, _fir in _BINARY.items():
    if _fir is None:
        continue
    for _ov in ("Tensor", "Scalar", "default"):
        register(f"aten.{_aten}.{_ov}")(_binary(_fir))
for _cmp in ("eq", "ne", "lt", "le", "gt", "ge"):
    for _ov in ("Tensor", "Scalar"):
        register(f"aten.{_cmp}.{_ov}")(_binary(_cmp, compare=True))


@register("aten.add.Tensor", "aten.add.Scalar", "aten.sub.Tensor", "aten.sub.Scalar", "aten.rsub.Tensor", "aten.rsub.Scalar")
def _add_sub(em: Emitter, a: Any, b: Any, alpha: Any = 1) -> Value:
    out = em.out_type()
    name = str(em.node.target)
    op = "add" if ".add." in name else "sub"
    if ".rsub." in name:
        a, b = b, a
    dtype = out.dtype
    lhs, rhs = _operand(em, a, dtype), _operand(em, b, dtype)
    if alpha != 1:
        if isinstance(rhs, Literal):
            raise Fallback("alpha with a scalar operand")
        shape = rhs.type.shape
        rhs = em.op("mul", [rhs, _operand(em, alpha, dtype)], TensorType(dtype, shape), hint="alpha")
    return em.op(op, [lhs, rhs], out)


@register("aten.div.Tensor", "aten.div.Scalar", "aten.div.Tensor_mode", "aten.div.Scalar_mode")
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
    return em.op("clamp", [x], out, {"min": None if min is None else float(min), "max": None if max is None else float(max)})


@register("aten.clamp_min.default")
def _clamp_min(em: Emitter, x: Any, min: Any) -> Value:
    return _clamp(em, x, min=min)


@register("aten.clamp_max.default")
def _clamp_max(em: Emitter, x: Any, max: Any) -> Value:
    return _clamp(em, x, max=max)


@register("aten._to_copy.default", "aten.to.dtype", "aten._to_copy")
def _to_copy(em: Emitter, x: Any, *args: Any, **kwargs: Any) -> Value:
    device = kwargs.get("device")
    if device is not None and torch.device(device).type != "cpu":
        raise Fallback(f"copy to device {device}")
    out = em.out_type()
    return em.cast(_tensor(x), out.dtype)  # type: ignore[return-value]


@register(
    "aten.clone.default", "aten.contiguous.default", "aten.alias.default", "aten.detach.default",
    "aten.lift_fresh_copy.default", "aten.dropout.default", "aten.positive.default",
)
def _identity(em: Emitter, x: Any, *args: Any, **kwargs: Any) -> Value:
    name = str(em.node.target)
    if name == "aten.dropout.default":
        train = args[1] if len(args) > 1 else kwargs.get("train", False)
        if train:
            raise Fallback("dropout in training mode")
    return _tensor(x)


# ---------------------------------------------------------------------------------------------
# reductions


def _reduce(fir_op: str) -> Converter:
    def conv(em: Emitter, x: Any, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Value:
        x = _tensor(x)
        out = em.out_type()
        dims = _norm_dims(dim, x.type.rank)
        src = x if fir_op in ("any", "all") else em.cast(x, out.dtype)
        return em.op(fir_op, [src], out, {"dims": dims, "keepdim": keepdim or None})

    return conv


for _aten, _fir in (("sum", "sum"), ("mean", "mean"), ("amax", "max"), ("amin", "min"), ("any", "any"), ("all", "all")):
    for _ov in ("default", "dim_IntList", "dim", "dims"):
        register(f"aten.{_aten}.{_ov}")(_reduce(_fir))


@register("aten.prod.default", "aten.prod.dim_int")
def _prod(em: Emitter, x: Any, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Value:
    return _reduce("prod")(em, x, dim, keepdim)


@register("aten.logsumexp.default")
def _logsumexp(em: Emitter, x: Any, dim: Any, keepdim: bool = False) -> Value:
    return _reduce("logsumexp")(em, x, dim, keepdim)


@register("aten.max.dim", "aten.min.dim")
def _max_dim(em: Emitter, x: Any, dim: int, keepdim: bool = False) -> list[Value]:
    x = _tensor(x)
    kind = "max" if ".max." in str(em.node.target) else "min"
    d = dim % max(x.type.rank, 1)
    values = em.op(kind, [x], em.out_type(0), {"dims": [d], "keepdim": keepdim or None})
    indices = em.op(f"arg{kind}", [x], em.out_type(1), {"dim": d, "keepdim": keepdim or None}, hint="idx")
    return [values, indices]


@register("aten.max.default", "aten.min.default")
def _max_all(em: Emitter, x: Any) -> Value:
    kind = "max" if ".max." in str(em.node.target) else "min"
    return em.op(kind, [_tensor(x)], em.out_type())


@register("aten.argmax.default", "aten.argmin.default")
def _argmax(em: Emitter, x: Any, dim: Any = None, keepdim: bool = False) -> Value:
    x = _tensor(x)
    kind = "argmax" if "argmax" in str(em.node.target) else "argmin"
    d = None if dim is None else dim % max(x.type.rank, 1)
    return em.op(kind, [x], em.out_type(), {"dim": d, "keepdim": keepdim or None})


def _correction(correction: Any, unbiased: Any = None) -> int:
    if correction is None:
        return 1 if unbiased is None or unbiased else 0
    if isinstance(correction, float) and not correction.is_integer():
        raise Fallback("fractional correction")
    return int(correction)


@register("aten.var.correction", "aten.std.correction", "aten.var.dim", "aten.std.dim")
def _var(em: Emitter, x: Any, dim: Any = None, *args: Any, correction: Any = None, keepdim: bool = False) -> Value:
    x = _tensor(x)
    unbiased = None
    if args:  # var.dim(x, dim, unbiased, keepdim)
        unbiased = args[0]
        keepdim = args[1] if len(args) > 1 else keepdim
    kind = "var" if ".var." in str(em.node.target) else "std"
    attrs = {"dims": _norm_dims(dim, x.type.rank), "keepdim": keepdim or None, "correction": _correction(correction, unbiased)}
    if attrs["correction"] == 1:
        attrs["correction"] = None
    return em.op(kind, [x], em.out_type(), attrs)


@register("aten.var_mean.correction")
def _var_mean(em: Emitter, x: Any, dim: Any = None, *, correction: Any = None, keepdim: bool = False) -> list[Value]:
    x = _tensor(x)
    c = _correction(correction)
    attrs = {"dims": _norm_dims(dim, x.type.rank), "keepdim": keepdim or None, "correction": None if c == 1 else c}
    return em.op("var_mean", [x], [em.out_type(0), em.out_type(1)], attrs)


# ---------------------------------------------------------------------------------------------
# views and data movement


@register("aten.view.default", "aten.reshape.default", "aten._unsafe_view.default", "aten.flatten.using_ints", "aten.unflatten.int", "aten.view.dtype")
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
def _slice(em: Emitter, x: Any, dim: int = 0, start: Any = None, end: Any = None, step: int = 1) -> Value:
    x = _tensor(x)
    attrs: dict[str, Any] = {"dim": dim}
    if start not in (None, 0):
        attrs["start"] = start
    if end is not None and not (isinstance(end, int) and end >= 2**62):
        attrs["end"] = end
    if step != 1:
        attrs["step"] = step
    for v in (start, end):
        if v is not None and not isinstance(v, int):
            raise Fallback("symbolic slice bounds")
    return em.op("slice", [x], em.out_type(), attrs)


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
    xs = [em.cast(_tensor(t), out.dtype) for t in tensors]
    return em.op("cat", xs, out, {"dim": dim})


@register("aten.stack.default")
def _stack(em: Emitter, tensors: list[Any], dim: int = 0) -> Value:
    out = em.out_type()
    d = dim % out.rank
    parts = []
    for t in tensors:
        t = em.cast(_tensor(t), out.dtype)
        shape = list(t.type.shape)
        shape.insert(d, 1)
        parts.append(em.op("unsqueeze", [t], TensorType(out.dtype, tuple(shape)), {"dim": d}, hint="u"))
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
    sizes = list(split) if isinstance(split, (list, tuple)) else [split] * ((size + split - 1) // split)
    outs, start = [], 0
    for k, s in enumerate(sizes):
        end = min(start + s, size)
        outs.append(em.op("slice", [x], em.out_type(k), {"dim": d, "start": start or None, "end": end}, hint=f"s{k}"))
        start = end
    return outs


@register("aten.unbind.int")
def _unbind(em: Emitter, x: Any, dim: int = 0) -> list[Value]:
    x = _tensor(x)
    d = dim % x.type.rank
    n = x.type.shape[d]
    if not isinstance(n, int):
        raise Fallback("unbind of a symbolic dimension")
    return [em.op("select", [x], em.out_type(k), {"dim": d, "index": k}, hint=f"u{k}") for k in range(n)]


@register("aten.as_strided.default")
def _as_strided(em: Emitter, x: Any, size: list[int], stride: list[int], storage_offset: Any = None) -> Value:
    x = _tensor(x)
    if x.type.layout is not None:
        raise Fallback("as_strided of a non-contiguous input")
    attrs = {"strides": list(stride), "offset": storage_offset or None}
    return em.op("as_strided", [x], em.out_type(), attrs)


# ---------------------------------------------------------------------------------------------
# creation


@register(
    "aten.full.default", "aten.zeros.default", "aten.ones.default", "aten.full_like.default",
    "aten.zeros_like.default", "aten.ones_like.default", "aten.scalar_tensor.default",
    "aten.new_zeros.default", "aten.new_ones.default", "aten.new_full.default",
)
def _full(em: Emitter, *args: Any, **kwargs: Any) -> Value:
    name = str(em.node.target)
    device = kwargs.get("device")
    if device is not None and torch.device(device).type != "cpu":
        raise Fallback(f"tensor on device {device}")
    out = em.out_type()
    if "zeros" in name:
        value: Any = 0
    elif "ones" in name:
        value = 1
    elif name == "aten.scalar_tensor.default":
        value = args[0]
    elif name in ("aten.full.default", "aten.full_like.default", "aten.new_full.default"):
        value = args[1] if len(args) > 1 else kwargs["fill_value"]
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
    nums = [a for a in args if isinstance(a, int | float) and not isinstance(a, bool)]
    if len(nums) == 1:
        start, end, step = 0, nums[0], 1
    elif len(nums) == 2:
        start, end, step = nums[0], nums[1], 1
    elif len(nums) == 3:
        start, end, step = nums
    else:
        raise Fallback("arange with symbolic bounds")
    step = kwargs.get("step", step)
    attrs = {"start": start if start != 0 else None, "end": end, "step": step if step != 1 else None}
    return em.op("arange", [], em.out_type(), attrs)


# ---------------------------------------------------------------------------------------------
# indexing


@register("aten.embedding.default")
def _embedding(em: Emitter, weight: Any, indices: Any, padding_idx: int = -1, *args: Any) -> Value:
    return em.op("embedding", [_tensor(weight), _tensor(indices)], em.out_type())


@register("aten.gather.default")
def _gather(em: Emitter, x: Any, dim: int, index: Any, sparse_grad: bool = False) -> Value:
    return em.op("gather", [_tensor(x), _tensor(index)], em.out_type(), {"dim": dim})


@register("aten.index_select.default")
def _index_select(em: Emitter, x: Any, dim: int, index: Any) -> Value:
    return em.op("index_select", [_tensor(x), _tensor(index)], em.out_type(), {"dim": dim})


# ---------------------------------------------------------------------------------------------
# matmul and friends (extern matmul at loop level; composite here)


@register("aten.mm.default", "aten.bmm.default", "aten.matmul.default")
def _matmul(em: Emitter, a: Any, b: Any) -> Value:
    return em.op("matmul", [_tensor(a), _tensor(b)], em.out_type())


@register("aten.addmm.default")
def _addmm(em: Emitter, bias: Any, a: Any, b: Any, *, beta: Any = 1, alpha: Any = 1) -> Value:
    attrs = {"beta": None if beta == 1 else float(beta), "alpha": None if alpha == 1 else float(alpha)}
    return em.op("addmm", [_tensor(bias), _tensor(a), _tensor(b)], em.out_type(), attrs)


@register("aten.linear.default")
def _linear(em: Emitter, x: Any, w: Any, b: Any = None) -> Value:
    ops: list[Any] = [_tensor(x), _tensor(w)]
    if b is not None:
        ops.append(_tensor(b))
    return em.op("linear", ops, em.out_type())


# ---------------------------------------------------------------------------------------------
# composites kept composite (decompose is FIR's job)


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


def _opt(x: Any) -> Value | Literal:
    return Literal(None) if x is None else _tensor(x)


@register("aten.layer_norm.default")
def _layer_norm(em: Emitter, x: Any, shape: list[int], w: Any = None, b: Any = None, eps: float = 1e-5, cudnn: bool = True) -> Value:
    return em.op("layer_norm", [_tensor(x), _opt(w), _opt(b)], em.out_type(), {"normalized_shape": list(shape), "eps": float(eps)})


@register("aten.native_layer_norm.default")
def _native_layer_norm(em: Emitter, x: Any, shape: list[int], w: Any, b: Any, eps: float) -> list[Value]:
    x = _tensor(x)
    out = em.op("layer_norm", [x, _opt(w), _opt(b)], em.out_type(0), {"normalized_shape": list(shape), "eps": float(eps)})
    used = _used_results(em)
    if not used & {1, 2}:
        return [out, out, out]  # mean and rstd are never read
    dims = list(range(x.type.rank - len(shape), x.type.rank))
    stat = em.out_type(1)
    mean = em.op("mean", [x], stat, {"dims": dims, "keepdim": True}, hint="mean")
    var = em.op("var", [x], stat, {"dims": dims, "keepdim": True, "correction": 0}, hint="var")
    e = em.op("add", [var, Literal(float(eps))], stat, hint="veps")
    rstd = em.op("rsqrt", [e], em.out_type(2), hint="rstd")
    return [out, mean, rstd]


@register("aten.rms_norm.default")
def _rms_norm(em: Emitter, x: Any, shape: list[int], w: Any = None, eps: Any = None) -> Value:
    return em.op("rms_norm", [_tensor(x), _opt(w)], em.out_type(), {"normalized_shape": list(shape), "eps": None if eps is None else float(eps)})


@register("aten._native_batch_norm_legit_no_training.default")
def _batch_norm_nt(em: Emitter, x: Any, w: Any, b: Any, rm: Any, rv: Any, momentum: float, eps: float) -> list[Value]:
    if _used_results(em) & {1, 2}:
        raise Fallback("saved batch statistics are read")
    out = em.op("batch_norm", [_tensor(x), _opt(w), _opt(b), _tensor(rm), _tensor(rv)], em.out_type(0), {"eps": float(eps)})
    return [out, out, out]


@register("aten.batch_norm.default")
def _batch_norm(em: Emitter, x: Any, w: Any, b: Any, rm: Any, rv: Any, training: bool, momentum: float, eps: float, cudnn: bool = True) -> Value:
    if training:
        raise Fallback("batch_norm in training mode")
    return em.op("batch_norm", [_tensor(x), _opt(w), _opt(b), _tensor(rm), _tensor(rv)], em.out_type(), {"eps": float(eps)})


@register("aten.group_norm.default")
def _group_norm(em: Emitter, x: Any, groups: int, w: Any = None, b: Any = None, eps: float = 1e-5, cudnn: bool = True) -> Value:
    return em.op("group_norm", [_tensor(x), _opt(w), _opt(b)], em.out_type(), {"num_groups": groups, "eps": float(eps)})


@register("aten.native_group_norm.default")
def _native_group_norm(em: Emitter, x: Any, w: Any, b: Any, n: Any, c: Any, hw: Any, groups: int, eps: float) -> list[Value]:
    if _used_results(em) & {1, 2}:
        raise Fallback("saved group statistics are read")
    out = em.op("group_norm", [_tensor(x), _opt(w), _opt(b)], em.out_type(0), {"num_groups": groups, "eps": float(eps)})
    return [out, out, out]


@register("aten.gelu.default")
def _gelu(em: Emitter, x: Any, approximate: str = "none") -> Value:
    return em.op("gelu", [_tensor(x)], em.out_type(), {"approximate": None if approximate == "none" else approximate})


def _activation(fir_op: str) -> Converter:
    def conv(em: Emitter, x: Any) -> Value:
        return em.op(fir_op, [_tensor(x)], em.out_type())

    return conv


for _aten in ("silu", "mish", "hardswish", "hardsigmoid"):
    register(f"aten.{_aten}.default")(_activation(_aten))


@register("aten.softplus.default")
def _softplus(em: Emitter, x: Any, beta: Any = 1, threshold: Any = 20) -> Value:
    return em.op("softplus", [_tensor(x)], em.out_type(), {"beta": None if beta == 1 else float(beta), "threshold": None if threshold == 20 else float(threshold)})


@register("aten.leaky_relu.default")
def _leaky_relu(em: Emitter, x: Any, negative_slope: Any = 0.01) -> Value:
    return em.op("leaky_relu", [_tensor(x)], em.out_type(), {"negative_slope": None if negative_slope == 0.01 else float(negative_slope)})


@register("aten.elu.default")
def _elu(em: Emitter, x: Any, alpha: Any = 1, scale: Any = 1, input_scale: Any = 1) -> Value:
    if scale != 1 or input_scale != 1:
        raise Fallback("elu with scale")
    return em.op("elu", [_tensor(x)], em.out_type(), {"alpha": None if alpha == 1 else float(alpha)})


@register("aten.hardtanh.default")
def _hardtanh(em: Emitter, x: Any, min_val: Any = -1.0, max_val: Any = 1.0) -> Value:
    return em.op("hardtanh", [_tensor(x)], em.out_type(), {"min_val": float(min_val), "max_val": float(max_val)})


@register("aten.relu6.default")
def _relu6(em: Emitter, x: Any) -> Value:
    return em.op("hardtanh", [_tensor(x)], em.out_type(), {"min_val": 0.0, "max_val": 6.0})


_REDUCTION = {0: "none", 1: "mean", 2: "sum"}


@register("aten.nll_loss_forward.default")
def _nll_loss_forward(em: Emitter, x: Any, target: Any, weight: Any, reduction: int, ignore_index: int) -> list[Value]:
    if 1 in _used_results(em):
        raise Fallback("total_weight is read")
    ops: list[Any] = [_tensor(x), _tensor(target)]
    if weight is not None:
        ops.append(_tensor(weight))
    out = em.op("nll_loss", ops, em.out_type(0), {"reduction": _REDUCTION[reduction], "ignore_index": ignore_index})
    return [out, out]


@register("aten.nll_loss.default")
def _nll_loss(em: Emitter, x: Any, target: Any, weight: Any = None, reduction: int = 1, ignore_index: int = -100) -> Value:
    ops: list[Any] = [_tensor(x), _tensor(target)]
    if weight is not None:
        ops.append(_tensor(weight))
    return em.op("nll_loss", ops, em.out_type(), {"reduction": _REDUCTION[reduction], "ignore_index": ignore_index})


@register("aten.cross_entropy_loss.default")
def _cross_entropy(em: Emitter, x: Any, target: Any, weight: Any = None, reduction: int = 1, ignore_index: int = -100, label_smoothing: float = 0.0) -> Value:
    t = _tensor(target)
    if t.type.dtype.is_float:
        raise Fallback("class probabilities as target")
    ops: list[Any] = [_tensor(x), t]
    if weight is not None:
        ops.append(_tensor(weight))
    attrs = {"reduction": _REDUCTION[reduction], "ignore_index": ignore_index, "label_smoothing": float(label_smoothing) or None}
    return em.op("cross_entropy", ops, em.out_type(), attrs)
