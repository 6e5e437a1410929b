"""Helpers the converter families share: operands and promotion (:func:`_tensor`,
:func:`_operand`, :func:`_promoted`), ``dim`` arguments, which results of a node are read, and the
building blocks of compositions (:func:`_auto` emits an op whose result type FIR's typing rule
decides; :func:`_float_only` refuses the dtypes a composition cannot round like ATen).
"""

from __future__ import annotations

import math
import operator
from typing import Any, cast

import torch
from fir.ir.dtypes import DType
from fir.ir.graph import Literal, Value
from fir.ir.ops import OPS, TypeRule
from fir.ir.types import TensorType

from ..emitter import Emitter, Fallback, meta_value


def _tensor(x: Any, what: str = "operand") -> Value:
    if not isinstance(x, Value):
        raise Fallback(f"{what} is not a tensor")
    return x


def _operand(em: Emitter, x: Any, dtype: DType) -> Value | Literal:
    if isinstance(x, torch.SymInt | torch.SymFloat):
        if dtype.is_narrow_float:
            # ATen computes with the number in f32; a cast of it to the result dtype rounds it
            raise Fallback(f"a symbolic number with a {dtype} computation")
        x = em.symbolic(x)  # a 0-d argument (or a literal, for a number known here)
        if isinstance(x, Value) and x.type.dtype.is_float and not dtype.is_float:
            raise Fallback("float scalar with an integer computation")
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
        elif isinstance(x, torch.SymInt | torch.SymFloat):
            probes.append(1.0 if isinstance(x, torch.SymFloat) else 1)  # a number's kind
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
    used: set[int] = set()
    for user in em.node.users:
        if user.target is operator.getitem:
            used.add(cast(int, user.args[1]))  # getitem's index into a tuple result
        else:
            used.update(range(8))
    return used


def _auto(
    em: Emitter,
    opname: str,
    operands: list[Any],
    attrs: dict[str, Any] | None = None,
    hint: str = "",
) -> Value:
    """Emit an op whose result type FIR's typing rule decides (elementwise ops, reductions)."""
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
    multi = isinstance(meta_value(em.node), (tuple, list))
    out = em.out_type(0) if multi else em.out_type()
    if not out.dtype.is_float:
        raise Fallback(f"{out.dtype} result")
    if not half_ok and out.dtype.is_narrow_float:
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
    return tuple(x.type.shape)


def _arange_i64(em: Emitter, start: int, end: Any, step: int = 1, hint: str = "ar") -> Value:
    """``arange(start, end, step)`` in i64; ``end`` may be a symbolic size when it starts at 0
    by steps of 1 (its length is then ``end``)."""
    if isinstance(end, int):
        n = max(0, math.ceil((end - start) / step))
    elif start == 0 and step == 1:
        n = end
    else:
        raise Fallback("arange with symbolic bounds")
    attrs = {"start": start, "end": end, "step": step if step != 1 else None}
    return em.op("arange", [], TensorType(DType.I64, (n,)), attrs, hint=hint)


def _filled(em: Emitter, like: Value, value: Any, hint: str = "fill") -> Value:
    return em.op("full", [Literal(value)], TensorType(like.type.dtype, like.type.shape), hint=hint)


def _zero(dtype: DType) -> Literal:
    return Literal(False) if dtype.is_bool else Literal(0)


def _cast_all(em: Emitter, dtype: DType, *xs: Any) -> list[Value | Literal]:
    return [_operand(em, x, dtype) for x in xs]
