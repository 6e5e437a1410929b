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
        dt = torch.promote_types(
            dt, p.dtype if isinstance(p, torch.Tensor) else torch.tensor(p).dtype
        )
    return DType.from_torch(dt)


def _norm_dims(dims: Any, rank: int) -> list[int] | None:
    """aten's ``dim`` argument: None or [] means every dimension."""
    if dims is None:
        return None
    if isinstance(dims, int):
        dims = [dims]
    if len(dims) == 0 or rank == 0:
        return None  # a 0-d tensor accepts dim 0 or -1 and reduces nothing
    return [d % rank for d in dims]


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
for _aten, _fir in _BINARY.items():
    if _fir is None:
        continue
    for _ov in ("Tensor", "Scalar", "default"):
        register(f"aten.{_aten}.{_ov}")(_binary(_fir))
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
    device = kwargs.get("device")
    if device is not None and torch.device(device).type != "cpu":
        raise Fallback(f"copy to device {device}")
    out = em.out_type()
    return em.cast(_tensor(x), out.dtype)  # type: ignore[return-value]


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


# ---------------------------------------------------------------------------------------------
# reductions


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
# views and data movement


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
        list(split) if isinstance(split, (list, tuple)) else [split] * ((size + split - 1) // split)
    )
    outs, start = [], 0
    for k, s in enumerate(sizes):
        end = min(start + s, size)
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
# creation


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
    attrs = {
        "start": start if start != 0 else None,
        "end": end,
        "step": step if step != 1 else None,
    }
    return em.op("arange", [], em.out_type(), attrs)


# ---------------------------------------------------------------------------------------------
# indexing


@register("aten.embedding.default")
def _embedding(em: Emitter, weight: Any, indices: Any, padding_idx: int = -1, *args: Any) -> Value:
    return em.op("embedding", [_tensor(weight), _tensor(indices)], em.out_type())


def _index_tensor(em: Emitter, index: Any) -> Value:
    index = _tensor(index, "index")
    if index.type.dtype in (DType.I64, DType.I32):
        return index
    if not index.type.dtype.is_int:
        raise Fallback(f"{index.type.dtype} index")
    return em.cast(index, DType.I64)  # type: ignore[return-value]


@register("aten.gather.default")
def _gather(em: Emitter, x: Any, dim: int, index: Any, sparse_grad: bool = False) -> Value:
    x = _tensor(x)
    if x.type.rank == 0:
        raise Fallback("gather on a 0-d tensor")
    return em.op("gather", [x, _index_tensor(em, index)], em.out_type(), {"dim": dim})


@register("aten.index_select.default")
def _index_select(em: Emitter, x: Any, dim: int, index: Any) -> Value:
    x, index = _tensor(x), _index_tensor(em, index)
    out = em.out_type()
    if x.type.rank == 0:  # a 0-d tensor is indexed as a 1-element vector
        x1 = em.op("reshape", [x], TensorType(x.type.dtype, (1,)), hint="vec")
        idx1 = (
            index
            if index.type.rank == 1
            else em.op("reshape", [index], TensorType(index.type.dtype, (1,)), hint="idx")
        )
        sel = em.op(
            "index_select", [x1, idx1], TensorType(x.type.dtype, (1,)), {"dim": 0}, hint="sel"
        )
        return em.op("reshape", [sel], out)
    return em.op("index_select", [x, index], out, {"dim": dim})


# ---------------------------------------------------------------------------------------------
# matmul and friends (extern matmul at loop level; composite here)


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
def _layer_norm(
    em: Emitter,
    x: Any,
    shape: list[int],
    w: Any = None,
    b: Any = None,
    eps: float = 1e-5,
    cudnn: bool = True,
) -> Value:
    return em.op(
        "layer_norm",
        [_tensor(x), _opt(w), _opt(b)],
        em.out_type(),
        {"normalized_shape": list(shape), "eps": float(eps)},
    )


@register("aten.native_layer_norm.default")
def _native_layer_norm(
    em: Emitter, x: Any, shape: list[int], w: Any, b: Any, eps: float
) -> list[Value]:
    x = _tensor(x)
    out = em.op(
        "layer_norm",
        [x, _opt(w), _opt(b)],
        em.out_type(0),
        {"normalized_shape": list(shape), "eps": float(eps)},
    )
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
    return em.op(
        "rms_norm",
        [_tensor(x), _opt(w)],
        em.out_type(),
        {"normalized_shape": list(shape), "eps": None if eps is None else float(eps)},
    )


@register("aten._native_batch_norm_legit_no_training.default")
def _batch_norm_nt(
    em: Emitter, x: Any, w: Any, b: Any, rm: Any, rv: Any, momentum: float, eps: float
) -> list[Value]:
    if _used_results(em) & {1, 2}:
        raise Fallback("saved batch statistics are read")
    out = em.op(
        "batch_norm",
        [_tensor(x), _opt(w), _opt(b), _tensor(rm), _tensor(rv)],
        em.out_type(0),
        {"eps": float(eps)},
    )
    return [out, out, out]


@register("aten.batch_norm.default")
def _batch_norm(
    em: Emitter,
    x: Any,
    w: Any,
    b: Any,
    rm: Any,
    rv: Any,
    training: bool,
    momentum: float,
    eps: float,
    cudnn: bool = True,
) -> Value:
    if training:
        raise Fallback("batch_norm in training mode")
    return em.op(
        "batch_norm",
        [_tensor(x), _opt(w), _opt(b), _tensor(rm), _tensor(rv)],
        em.out_type(),
        {"eps": float(eps)},
    )


@register("aten.group_norm.default")
def _group_norm(
    em: Emitter,
    x: Any,
    groups: int,
    w: Any = None,
    b: Any = None,
    eps: float = 1e-5,
    cudnn: bool = True,
) -> Value:
    return em.op(
        "group_norm",
        [_tensor(x), _opt(w), _opt(b)],
        em.out_type(),
        {"num_groups": groups, "eps": float(eps)},
    )


@register("aten.native_group_norm.default")
def _native_group_norm(
    em: Emitter, x: Any, w: Any, b: Any, n: Any, c: Any, hw: Any, groups: int, eps: float
) -> list[Value]:
    x = _tensor(x)
    out = em.op(
        "group_norm",
        [x, _opt(w), _opt(b)],
        em.out_type(0),
        {"num_groups": groups, "eps": float(eps)},
    )
    if not _used_results(em) & {1, 2}:
        return [out, out, out]  # mean and rstd are never read
    stat = em.out_type(1)  # [N, G]
    shape = _static_shape(x)
    per_group = (shape[1] // groups) * (x.type.numel // max(shape[0] * shape[1], 1))
    rows = _reshape_to(em, x, (shape[0], groups, per_group), hint="groups")
    mean = em.op("mean", [rows], stat, {"dims": [2]}, hint="mean")
    var = em.op("var", [rows], stat, {"dims": [2], "correction": 0}, hint="var")
    rstd = em.op(
        "rsqrt", [_auto(em, "add", [var, Literal(float(eps))])], em.out_type(2), hint="rstd"
    )
    return [out, mean, rstd]


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


_REDUCTION = {0: "none", 1: "mean", 2: "sum"}


@register("aten.nll_loss_forward.default")
def _nll_loss_forward(
    em: Emitter, x: Any, target: Any, weight: Any, reduction: int, ignore_index: int
) -> list[Value]:
    if 1 in _used_results(em):
        raise Fallback("total_weight is read")
    ops: list[Any] = [_tensor(x), _tensor(target)]
    if weight is not None:
        ops.append(_tensor(weight))
    out = em.op(
        "nll_loss",
        ops,
        em.out_type(0),
        {"reduction": _REDUCTION[reduction], "ignore_index": ignore_index},
    )
    return [out, out]


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
# compositions: aten ops with no FIR op of their own, written with FIR tensor ops. Each follows
# the formula of ATen's CPU kernel (order of operations, NaN and infinity cases), so the
# interpreter's result matches eager; where a case cannot be matched the converter falls back.


def _auto(
    em: Emitter,
    opname: str,
    operands: list[Any],
    attrs: dict[str, Any] | None = None,
    hint: str = "",
) -> Value:
    """Emit an op whose result type FIR's typing rule decides (elementwise ops, reductions)."""
    from fir.ir.ops import OPS, TypeRule

    types = [o.type if isinstance(o, Value) else o for o in operands]
    attrs = {k: v for k, v in (attrs or {}).items() if v is not None}
    try:
        (t,) = OPS[opname].infer(types, attrs, [])[:1]
    except TypeRule as e:
        raise Fallback(f"{opname}: {e}") from None
    return em.op(opname, operands, t, attrs, hint=hint or opname)


def _float_only(em: Emitter, half_ok: bool = False) -> DType:
    """The dtype of the (first) result, which must be floating point. ATen's kernels compute
    f16/bf16 in f32 and round once; a composition of FIR ops rounds after every op, so unless
    the composition is a single rounding step (``half_ok``) those dtypes fall back."""
    from .fx_import import meta_value

    multi = isinstance(meta_value(em.node), (tuple, list))
    out = em.out_type(0) if multi else em.out_type()
    if not out.dtype.is_float:
        raise Fallback(f"{out.dtype} result")
    if not half_ok and out.dtype in (DType.F16, DType.BF16):
        raise Fallback(f"{out.dtype}: ATen computes this in f32")
    return out.dtype


def _scale(em: Emitter, x: Value, k: Any) -> Value:
    return x if k == 1 else _auto(em, "mul", [x, _lit(k)])


def _lit(v: Any) -> Literal:
    if isinstance(v, torch.SymInt | torch.SymFloat | torch.SymBool):
        raise Fallback("symbolic scalar argument")
    if not isinstance(v, bool | int | float):
        raise Fallback(f"argument {v!r} is not a scalar")
    return Literal(v)


def _reshape_to(em: Emitter, x: Value, shape: Any, hint: str = "rs") -> Value:
    shape = tuple(shape)
    if tuple(x.type.shape) == shape:
        return x
    return em.op("reshape", [x], TensorType(x.type.dtype, shape), hint=hint)


def _expand_to(em: Emitter, x: Value, shape: Any, hint: str = "ex") -> Value:
    shape = tuple(shape)
    if tuple(x.type.shape) == shape:
        return x
    return em.op("expand", [x], TensorType(x.type.dtype, shape), hint=hint)


def _static_shape(x: Value) -> tuple[int, ...]:
    if not all(isinstance(d, int) for d in x.type.shape):
        raise Fallback("symbolic shape")
    return tuple(x.type.shape)  # type: ignore[return-value]


def _arange_i64(em: Emitter, start: int, end: int, step: int = 1, hint: str = "ar") -> Value:
    import math

    n = max(0, math.ceil((end - start) / step))
    attrs = {"start": start, "end": end, "step": step if step != 1 else None}
    return em.op("arange", [], TensorType(DType.I64, (n,)), attrs, hint=hint)


def _filled(em: Emitter, like: Value, value: Any, hint: str = "fill") -> Value:
    return em.op("full", [Literal(value)], TensorType(like.type.dtype, like.type.shape), hint=hint)


def _zero(dtype: DType) -> Literal:
    return Literal(False) if dtype.is_bool else Literal(0)


def _cast_all(em: Emitter, dtype: DType, *xs: Any) -> list[Value | Literal]:
    return [_operand(em, x, dtype) for x in xs]


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


# -- elementwise


register("aten.sgn.default")(_unary("sign"))


@register("aten.addcmul.default", "aten.addcdiv.default")
def _addc(em: Emitter, x: Any, t1: Any, t2: Any, *, value: Any = 1) -> Value:
    out = em.out_type()
    div = "addcdiv" in str(em.node.target)
    if div and not out.dtype.is_float:
        raise Fallback("integer addcdiv")
    if out.dtype in (DType.F16, DType.BF16):
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
        w = _lit(weight)
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
        return em.cast(x, out.dtype)  # type: ignore[return-value]
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


@register("aten.threshold.default")
def _threshold(em: Emitter, x: Any, threshold: Any, value: Any) -> Value:
    out = em.out_type()
    x = em.cast(_tensor(x), out.dtype)
    cond = _auto(em, "le", [x, _operand(em, threshold, out.dtype)])
    return em.op("where", [cond, _operand(em, value, out.dtype), x], out)


@register("aten.sinc.default")
def _sinc(em: Emitter, x: Any) -> Value:
    dtype = _float_only(em)
    x = em.cast(_tensor(x), dtype)
    import math

    p = _auto(em, "mul", [x, Literal(math.pi)])
    r = _auto(em, "div", [_auto(em, "sin", [p]), p])
    return em.op("where", [_auto(em, "eq", [x, Literal(0)]), Literal(1.0), r], em.out_type())


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
        import math

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
    return _expand_to(em, r, out.shape)  # type: ignore[arg-type]


@register("aten.angle.default")
def _angle(em: Emitter, x: Any) -> Value:
    dtype = _float_only(em)
    import math

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
    import math

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


# -- reductions


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
    import math

    out = em.out_type()
    attrs = {"dims": dims, "keepdim": keepdim or None}
    x = em.cast(x, out.dtype)  # type: ignore[assignment]
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


# -- matmul family


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
    bias = _scale(em, em.cast(_tensor(bias), out.dtype), beta)  # type: ignore[arg-type]
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


# -- losses


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


# -- views and data movement


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
def _roll(em: Emitter, x: Any, shifts: list[int], dims: list[int] = ()) -> Value:
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


def _triangle_mask(em: Emitter, m: int, n: int, k: int, lower: bool) -> Value:
    row = _auto(em, "unsqueeze", [_arange_i64(em, 0, m, hint="row")], {"dim": 1})
    col = _arange_i64(em, 0, n, hint="col")
    diff = _auto(em, "sub", [col, row])  # col - row, [m, n]
    return _auto(em, "le" if lower else "ge", [diff, Literal(k)], hint="mask")


@register("aten.tril.default", "aten.triu.default")
def _tril(em: Emitter, x: Any, diagonal: int = 0) -> Value:
    x = _tensor(x)
    shape = _static_shape(x)
    if x.type.rank < 2:
        raise Fallback("tril of a vector")
    mask = _triangle_mask(em, shape[-2], shape[-1], diagonal, "tril" in str(em.node.target))
    return em.op("where", [mask, x, _zero(x.type.dtype)], em.out_type())


def _diagonal_view(
    em: Emitter, x: Value, offset: int, dim1: int, dim2: int, out: TensorType
) -> Value:
    from fir.ir.types import contiguous_strides

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


@register("aten.trace.default")
def _trace(em: Emitter, x: Any) -> Value:
    x = _tensor(x)
    out = em.out_type()
    shape = _static_shape(x)
    n = min(shape)
    diag = _diagonal_view(em, em.cast(x, out.dtype), 0, 0, 1, TensorType(out.dtype, (n,)))  # type: ignore[arg-type]
    return em.op("sum", [diag], out)


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
    from fir.ir.types import contiguous_strides

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
def _rot90(em: Emitter, x: Any, k: int = 1, dims: list[int] = (0, 1)) -> Value:
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


@register("aten.slice_scatter.default")
def _slice_scatter(
    em: Emitter, x: Any, src: Any, dim: int = 0, start: Any = None, end: Any = None, step: int = 1
) -> Value:
    x = _tensor(x)
    out = em.out_type()
    shape = _static_shape(x)
    d = dim % x.type.rank
    n = shape[d]
    if step != 1:
        return _strided_slice_scatter(em, x, _tensor(src), d, start, end, step)
    s, e, _ = slice(start, end, 1).indices(n)
    e = max(e, s)
    parts = []
    for lo, hi, hint in ((0, s, "pre"), (e, n, "post")):
        if hi > lo:
            t = list(shape)
            t[d] = hi - lo
            parts.append(
                (
                    lo,
                    em.op(
                        "slice",
                        [x],
                        TensorType(x.type.dtype, tuple(t)),
                        {"dim": d, "start": lo or None, "end": hi},
                        hint=hint,
                    ),
                )
            )
    mid = em.cast(_tensor(src), x.type.dtype)
    parts.append((s, mid))
    parts.sort(key=lambda p: p[0])
    return em.op("cat", [p for _, p in parts], out, {"dim": d})


def _strided_slice_scatter(
    em: Emitter, x: Value, src: Value, d: int, start: Any, end: Any, step: int
) -> Value:
    """x with x[start:end:step] along d replaced by src: a mask along d picks which positions
    take src, and an index_select spreads src's rows onto them."""
    out = em.out_type()
    n = x.type.shape[d]
    s, e, _ = slice(start, end, step).indices(n)
    count = src.type.shape[d]
    if not isinstance(count, int) or step <= 0:
        raise Fallback("symbolic slice_scatter")
    if count == 0:
        return _reshape_to(em, x, out.shape)
    idx = _arange_i64(em, 0, n, hint="pos")
    rel = _auto(em, "sub", [idx, Literal(s)])
    inside = _auto(
        em, "logical_and", [_auto(em, "ge", [idx, Literal(s)]), _auto(em, "lt", [idx, Literal(e)])]
    )
    on_step = _auto(em, "eq", [_auto(em, "mod", [rel, Literal(step)]), Literal(0)])
    mask = _auto(em, "logical_and", [inside, on_step], hint="mask")
    row = _auto(em, "maximum", [_auto(em, "floordiv", [rel, Literal(step)]), Literal(0)])
    row = _auto(em, "minimum", [row, Literal(count - 1)], hint="row")
    spread = em.op(
        "index_select", [em.cast(src, x.type.dtype), row], x.type, {"dim": d}, hint="spread"
    )
    view = [1] * x.type.rank
    view[d] = n
    mask = _reshape_to(em, mask, tuple(view), hint="maskv")
    return em.op("where", [mask, spread, x], out)


@register("aten.select_scatter.default")
def _select_scatter(em: Emitter, x: Any, src: Any, dim: int, index: int) -> Value:
    x = _tensor(x)
    shape = _static_shape(x)
    d = dim % x.type.rank
    i = index % shape[d]
    src = _auto(em, "unsqueeze", [em.cast(_tensor(src), x.type.dtype)], {"dim": d})
    return _slice_scatter(em, x, src, d, i, i + 1)


@register("aten.index.Tensor", "aten._unsafe_index.Tensor")
def _index(em: Emitter, x: Any, indices: list[Any]) -> Value:
    """Advanced indexing with integer tensors: move the indexed dimensions to the front, flatten
    them, and gather rows with one ``index_select`` of the linearized (wrapped) indices."""
    from fir.ir.types import broadcast_shapes

    x = _tensor(x)
    out = em.out_type()
    shape = _static_shape(x)
    idx = list(indices) + [None] * (x.type.rank - len(indices))
    positions = [k for k, t in enumerate(idx) if t is not None]
    if not positions or x.type.rank == 0:
        raise Fallback("no index tensor")
    tensors = []
    for k in positions:
        t = _tensor(idx[k], "index")
        if t.type.dtype.is_bool or t.type.dtype == DType.U8:
            raise Fallback("boolean mask index")
        t = _index_tensor(em, t)
        if t.type.dtype != DType.I64:
            t = em.cast(t, DType.I64)
        # negative indices count from the end
        t = _auto(
            em,
            "where",
            [_auto(em, "lt", [t, Literal(0)]), _auto(em, "add", [t, Literal(shape[k])]), t],
            hint="wrap",
        )
        tensors.append(t)
    bshape = broadcast_shapes(*[t.type.shape for t in tensors])
    if bshape is None:
        raise Fallback("index shapes do not broadcast")
    rest = [k for k in range(x.type.rank) if k not in positions]
    perm = positions + rest
    xp = x if perm == list(range(x.type.rank)) else _auto(em, "permute", [x], {"dims": perm})
    sizes = [shape[k] for k in positions]
    total = 1
    for s in sizes:
        total *= s
    rest_shape = tuple(shape[k] for k in rest)
    xr = _reshape_to(em, xp, (total, *rest_shape), hint="rows")
    lin: Value | None = None
    for j, t in enumerate(tensors):
        stride = 1
        for s in sizes[j + 1 :]:
            stride *= s
        term = _scale(em, t, stride)
        lin = term if lin is None else _auto(em, "add", [lin, term], hint="lin")
    assert lin is not None
    lin = _expand_to(em, lin, bshape)
    numel = 1
    for s in bshape:
        numel *= s
    flat = _reshape_to(em, lin, (numel,), hint="flat")
    rows = em.op(
        "index_select",
        [xr, flat],
        TensorType(x.type.dtype, (numel, *rest_shape)),
        {"dim": 0},
        hint="rows",
    )
    y = _reshape_to(em, rows, (*bshape, *rest_shape), hint="g")
    adjacent = positions == list(range(positions[0], positions[-1] + 1))
    p0 = positions[0]
    if adjacent and p0 > 0:
        nb = len(bshape)
        dims = (
            [nb + j for j in range(p0)] + list(range(nb)) + [nb + j for j in range(p0, len(rest))]
        )
        return em.op("permute", [y], out, {"dims": dims})
    return _reshape_to(em, y, out.shape)


# -- creation


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
    device = kwargs.get("device")
    if device is not None and torch.device(device).type != "cpu":
        raise Fallback(f"tensor on device {device}")
    return em.op("full", [_zero(out.dtype)], out)


@register("aten.copy.default")
def _copy(em: Emitter, x: Any, src: Any, non_blocking: bool = False) -> Value:
    out = em.out_type()
    return _expand_to(em, em.cast(_tensor(src), out.dtype), out.shape)  # type: ignore[arg-type]


@register("aten.eye.default", "aten.eye.m")
def _eye(em: Emitter, n: int, *args: Any, **kwargs: Any) -> Value:
    out = em.out_type()
    m = args[0] if args and isinstance(args[0], int) else n
    if not isinstance(n, int) or not isinstance(m, int):
        raise Fallback("symbolic size")
    row = _auto(em, "unsqueeze", [_arange_i64(em, 0, n, hint="row")], {"dim": 1})
    eq = _auto(em, "eq", [row, _arange_i64(em, 0, m, hint="col")])
    return em.cast(eq, out.dtype)  # type: ignore[return-value]


# -- softmax helpers


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
    masked = _auto(
        em,
        "all",
        [_auto(em, "eq", [x, Literal(float("-inf"))])],
        {"dims": [d] if x.type.rank else None, "keepdim": True},
    )
    return em.op("where", [masked, Literal(0.0), sm], out)


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


# -- more views, pads, pools and losses

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


@register("aten.zero.default")
def _zero_fill(em: Emitter, x: Any) -> Value:
    out = em.out_type()
    return em.op("full", [_zero(out.dtype)], out)


@register("aten.take.default")
def _take(em: Emitter, x: Any, index: Any) -> Value:
    x = _tensor(x)
    idx = em.cast(_index_tensor(em, index), DType.I64)
    numel = x.type.numel
    if not isinstance(numel, int):
        raise Fallback("symbolic size")
    flat = _reshape_to(em, x, (numel,), hint="flat")
    wrapped = _auto(
        em,
        "where",
        [_auto(em, "lt", [idx, Literal(0)]), _auto(em, "add", [idx, Literal(numel)]), idx],
        hint="wrap",
    )
    count = idx.type.numel
    rows = _reshape_to(em, wrapped, (count,), hint="idx")
    sel = em.op(
        "index_select", [flat, rows], TensorType(x.type.dtype, (count,)), {"dim": 0}, hint="sel"
    )
    return em.op("reshape", [sel], em.out_type())


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


@register("aten.linalg_cross.default")
def _cross(em: Emitter, a: Any, b: Any, dim: int = -1) -> Value:
    out = em.out_type()
    a, b = (_expand_to(em, em.cast(_tensor(t), out.dtype), out.shape) for t in (a, b))  # type: ignore[arg-type]
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
    stride: list[int] = (),
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


@register(
    "aten._native_batch_norm_legit_functional.default",
    "aten._native_batch_norm_legit.no_stats",
    "aten._batch_norm_with_update_functional.default",
)
def _batch_norm_train(em: Emitter, x: Any, w: Any, b: Any, *args: Any) -> list[Value]:
    """Training-mode batch norm from the batch statistics, as ATen's CPU kernel computes it:
    invstd = 1 / sqrt(var + eps), out = x * (invstd * w) + (b - mean * invstd * w), and the
    running statistics moved by ``momentum`` (the unbiased variance for running_var)."""
    name = str(em.node.target)
    functional = "functional" in name
    with_update = "with_update" in name  # results: out, mean, invstd, reserve, running stats
    if with_update:
        rm, rv, momentum, eps = args
        training = True
    elif functional:
        rm, rv, training, momentum, eps = args
    else:
        rm = rv = None
        training, momentum, eps = args
    if not training:
        raise Fallback("inference mode")
    dtype = _float_only(em)
    x = _tensor(x)
    shape = _static_shape(x)
    if x.type.rank < 2:
        raise Fallback("batch_norm of a vector")
    c = shape[1]
    dims = [0] + list(range(2, x.type.rank))
    stat = TensorType(dtype, (c,))
    mean = em.op("mean", [x], stat, {"dims": dims}, hint="mean")
    var = em.op("var", [x], stat, {"dims": dims, "correction": 0}, hint="var")
    invstd = _auto(
        em,
        "reciprocal",
        [_auto(em, "sqrt", [_auto(em, "add", [var, Literal(float(eps))])])],
        hint="invstd",
    )
    alpha = (
        invstd
        if w is None
        else _auto(em, "mul", [invstd, em.cast(_tensor(w), dtype)], hint="alpha")
    )
    shift = _auto(em, "mul", [mean, alpha])
    beta = (
        _auto(em, "neg", [shift])
        if b is None
        else _auto(em, "sub", [em.cast(_tensor(b), dtype), shift], hint="beta")
    )
    per_channel = (c,) + (1,) * (x.type.rank - 2)
    alpha_c, beta_c = (
        _reshape_to(em, alpha, per_channel, "alpha_c"),
        _reshape_to(em, beta, per_channel, "beta_c"),
    )
    out = em.op("add", [_auto(em, "mul", [x, alpha_c]), beta_c], em.out_type(0))
    results = [
        out,
        _reshape_to(em, mean, em.out_type(1).shape),
        _reshape_to(em, invstd, em.out_type(2).shape),
    ]
    if with_update:
        reserve = em.out_type(3)
        results.append(
            em.op("full", [_zero(reserve.dtype)], reserve, hint="reserve")
        )  # empty on CPU
    if functional:
        m = float(momentum)
        unbiased = em.op("var", [x], stat, {"dims": dims}, hint="uvar")
        for k, (run, batch) in enumerate(((rm, mean), (rv, unbiased)), start=len(results)):
            run = em.cast(_tensor(run), dtype)
            moved = _auto(
                em,
                "add",
                [_auto(em, "mul", [batch, Literal(m)]), _auto(em, "mul", [run, Literal(1.0 - m)])],
            )
            results.append(_reshape_to(em, moved, em.out_type(k).shape))
    return results


@register("aten.native_dropout_backward.default")
def _native_dropout_backward(em: Emitter, grad: Any, mask: Any, scale: float) -> Value:
    dtype = _float_only(em)
    g = em.cast(_tensor(grad), dtype)
    m = em.cast(_tensor(mask), dtype)
    # ATen: grad * mask * scale
    return em.op("mul", [_auto(em, "mul", [g, m]), Literal(float(scale))], em.out_type())
