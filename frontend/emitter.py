"""What an aten converter works with, shared by the importer and the converter tables.

:class:`Emitter` builds the FIR ops of one FX node and checks each against its typing rule as it
is emitted; a converter raises :class:`Fallback` for a call it does not handle, and the importer
then keeps the node as an extern call of the aten op. :func:`meta_value` and :func:`tensor_type`
read what PyTorch's shape propagation says a node produces, as a FIR type. The importer
(:mod:`fir.frontend.fx_import`) and the tables (:mod:`fir.frontend.aten`) both import this
module; the tables never import the importer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, overload

import torch
import torch.fx
from fir.ir.dtypes import DType
from fir.ir.errors import FirError
from fir.ir.externs import encode_torch_object
from fir.ir.graph import Literal, Node, TensorOp, Value
from fir.ir.ops import OPS, TypeRule
from fir.ir.types import Layout, TensorType, contiguous_strides


class UnsupportedError(FirError):
    """The graph uses something FIR cannot import at all (not even as an extern call)."""


class Fallback(Exception):
    """Raised by a converter that cannot map this particular call; the node becomes an extern."""


# ---------------------------------------------------------------------------------------------
# types


def size_value(d: Any) -> Any:
    """A PyTorch size, stride or offset (an int or a ``SymInt``) as a FIR size: an int, or a
    sympy expression over FIR's size symbols (PyTorch's own sympy functions rewritten into
    FIR's index forms by :func:`fir.frontend.sizes.to_fir_expr`)."""
    if isinstance(d, int):
        return d
    if isinstance(d, torch.SymInt):
        expr = d.node.expr
        if isinstance(expr, int) or getattr(expr, "is_Integer", False):
            return int(expr)
        from .sizes import UnsupportedSize, to_fir_expr

        try:
            return to_fir_expr(expr)
        except UnsupportedSize as e:
            raise UnsupportedError(str(e)) from None
    raise UnsupportedError(f"size {d!r} is not supported")


def tensor_type(t: torch.Tensor, keep_layout: bool = False) -> TensorType:
    try:
        dtype = DType.from_torch(t.dtype)
    except KeyError:
        raise UnsupportedError(f"dtype {t.dtype} is not supported") from None
    shape = tuple(size_value(d) for d in t.shape)
    layout = None
    if keep_layout:
        strides = tuple(size_value(s) for s in t.stride())
        offset = size_value(t.storage_offset())
        if strides != contiguous_strides(shape) or offset != 0:
            layout = Layout(strides, offset)
    return TensorType(dtype, shape, layout)


def meta_value(node: torch.fx.Node) -> Any:
    if "val" in node.meta:
        return node.meta["val"]
    if "example_value" in node.meta:
        return node.meta["example_value"]
    raise UnsupportedError(f"node {node.name} has no shape information (run shape propagation)")


# ---------------------------------------------------------------------------------------------


class ValueNames(Protocol):
    """Where an emitter gets the names of the values it defines (the importer, one per graph)."""

    def value_name(self, fx_name: str) -> str: ...

    def unique(self, base: str) -> str: ...


class Emitter:
    """Builds FIR ops for one FX node; every op is type-checked when it is emitted."""

    def __init__(self, importer: ValueNames, node: torch.fx.Node) -> None:
        self.importer = importer
        self.node = node
        self.nodes: list[Node] = []
        self.count = 0

    # -- what the FX node produces

    def out_meta(self, k: int | None = None) -> torch.Tensor:
        val = meta_value(self.node)
        if k is not None:
            val = val[k]
        if not isinstance(val, torch.Tensor):
            raise Fallback(f"result is {type(val).__name__}, not a tensor")
        return val

    def out_type(self, k: int | None = None) -> TensorType:
        return tensor_type(self.out_meta(k))

    def out_dtype(self, k: int | None = None) -> DType:
        return self.out_type(k).dtype

    # -- building

    def name(self, hint: str = "") -> str:
        base = self.importer.value_name(self.node.name)
        if self.count == 0 and not hint:
            self.count += 1
            return self.importer.unique(base)
        self.count += 1
        return self.importer.unique(f"{base}_{hint or self.count}")

    def op(
        self,
        opname: str,
        operands: Sequence[Value | Literal],
        result: TensorType | list[TensorType],
        attrs: dict[str, Any] | None = None,
        hint: str = "",
    ) -> Any:
        """Emit one op; returns its Value (or list of Values for several results)."""
        spec = OPS[opname]
        types = result if isinstance(result, list) else [result]
        attrs = {
            k: v for k, v in (attrs or {}).items() if v is not None or k in ("eps", "min", "max")
        }
        operand_types = [o.type if isinstance(o, Value) else o for o in operands]
        try:
            inferred = spec.infer(operand_types, attrs, types)
        except TypeRule as e:
            raise Fallback(f"{opname}: {e}") from None
        for d, i in zip(types, inferred):
            if d.dtype != i.dtype or tuple(d.shape) != tuple(i.shape):
                raise Fallback(f"{opname} would produce {i}, PyTorch produces {d}")
        n = TensorOp(results=[], attrs=attrs, op=opname, operands=list(operands))
        n.results = [
            Value(self.name(hint if k == 0 else f"{hint}{k}"), t, n, k) for k, t in enumerate(types)
        ]
        self.nodes.append(n)
        return n.results if isinstance(result, list) else n.results[0]

    @overload
    def cast(self, v: Value, dtype: DType) -> Value: ...

    @overload
    def cast(self, v: Literal, dtype: DType) -> Literal: ...

    @overload
    def cast(self, v: Value | Literal, dtype: DType) -> Value | Literal: ...

    def cast(self, v: Value | Literal, dtype: DType) -> Value | Literal:
        if isinstance(v, Literal) or v.type.dtype == dtype:
            return v
        return self.op("cast", [v], TensorType(dtype, v.type.shape), hint="cast")

    def symbolic(self, x: Any) -> Value | Literal:
        """A symbolic number (``SymInt``, ``SymFloat``) used as a value: the 0-d argument the
        importer makes for it (its value computed from the call's inputs), or a literal."""
        make = getattr(self.importer, "scalar_argument", None)
        if make is None:
            raise Fallback("symbolic scalar argument")
        return make(x)

    def check_device(self, device: Any, what: str = "tensor") -> None:
        """A tensor the node makes (``full``, ``arange``, a copy) on ``device``: FIR makes it
        where the program runs, the device of the graph's tensors (the importer's ``device``,
        CPU where it has none), so another device falls back."""
        if device is None:
            return
        d = torch.device(device)
        home = getattr(self.importer, "device", None) or torch.device("cpu")
        if d.type != home.type or (
            d.index is not None and home.index is not None and d.index != home.index
        ):
            raise Fallback(f"{what} on device {device}")

    def literal(self, x: Any) -> Literal:
        if isinstance(x, torch.SymInt | torch.SymFloat | torch.SymBool):
            raise Fallback("symbolic scalar argument")
        if x is None or isinstance(x, bool | int | float):
            return Literal(x)
        raise Fallback(f"argument {x!r} is not a scalar")


def extern_argument(a: Any, where: str) -> Any:
    """An op argument as an extern call's argument (numbers, strings, values, dtypes, sizes,
    devices and layouts as ``torch:`` strings, lists of these); ``where`` names the call in the
    error for anything else."""
    if a is None or isinstance(a, (bool, int, float, str, Value)):
        return a
    if isinstance(a, (list, tuple)):
        return [extern_argument(x, where) for x in a]
    if isinstance(a, torch.dtype):
        return DType.from_torch(a)
    if isinstance(a, torch.SymInt):
        return size_value(a)
    enc = encode_torch_object(a)
    if enc is not None:
        return enc
    raise UnsupportedError(
        f"{where}: argument {a!r} of type {type(a).__name__} cannot be passed to an extern call"
    )
