"""Higher-order ops of aten graphs that FIR imports as extern calls: ``auto_functionalized_v2``.

A custom op that writes some of its arguments in place (``mylib::foo(Tensor(a!) x) -> ()``)
reaches FIR wrapped in ``auto_functionalized_v2(mylib.foo.default, **kwargs, _all_bases=[…])``:
the functional form of the call. Each mutated argument is named by the *base* tensor it is a
view of (``_x_base_index``) and how to rebuild the view from that base (nothing: the base
itself; ``_x_alias``; ``_x_slice_dim/_start/_end``; ``_x_size/_stride/_storage_offset``). The
call returns the op's own results followed by the new values of the bases.

FIR imports it as the same steps, written out as extern calls of aten and of the op:

1. each base gets a fresh copy, laid out as PyTorch lays the base out (so the view metadata,
   which is in the base's strides and storage offset, indexes the copy the same way):
   ``extern "aten.empty_strided.default"`` then ``extern "aten.copy_.default" {mutates = [0]}``;
2. each mutated argument is that copy, or a view of it (an ``AliasNode``: a view, never a copy);
3. the op is called once on them, ``{mutates = [positions of the written arguments]}`` (a
   ``Tensor(a!)[]`` argument is a list of values, all written), so every later reader of a copy
   is ordered after the call;
4. the node's value is the op's results, then the copies.

The copies are plain copies: the caller's tensors are never written. Anything this does not
cover (an out= op, a higher-order op in place of the operator, a written keyword-only argument)
is an :class:`~fir.frontend.emitter.UnsupportedError` naming it; a ``Fallback`` would make the
importer call the higher-order op itself, which is no operator.
"""

from __future__ import annotations

from typing import Any, cast

import torch
from fir.ir.dtypes import DType
from fir.ir.externs import encode_torch_object
from fir.ir.graph import AliasNode, ExternNode, Value
from fir.ir.types import Layout, TensorType, contiguous_strides

from ..emitter import (
    Emitter,
    UnsupportedError,
    extern_argument,
    meta_value,
    size_value,
    tensor_type,
)
from .collectives import TOKEN_TYPE
from .registry import register

AUTO_FUNCTIONALIZED = "auto_functionalized_v2"


@register(AUTO_FUNCTIONALIZED)
def _auto_functionalized_v2(em: Emitter, op: Any, **kwargs: Any) -> list[Any]:
    where = f"{AUTO_FUNCTIONALIZED}({op})"
    if not isinstance(op, torch._ops.OpOverload):
        raise UnsupportedError(
            f"{where}: the mutating callee is {type(op).__name__}, not an operator; FIR calls "
            "operators only"
        )
    schema = op._schema
    if torch._library.utils.is_out(op):
        raise UnsupportedError(f"{where}: an out= operator is not supported")
    kwargs = dict(kwargs)
    kwargs.pop("_only_clone_these_bases", None)  # FIR copies every base
    bases = kwargs.pop("_all_bases", [])
    fx_bases = cast("list[torch.fx.Node]", em.node.kwargs.get("_all_bases", []))
    metas = [meta_value(b) for b in fx_bases]
    copies = [_copy_base(em, b, m, where) for b, m in zip(bases, metas)]

    args: list[Any] = []
    call_kwargs: dict[str, Any] = {}
    written: list[int] = []
    missing = False  # a positional argument left to its default: the rest go by keyword
    for a in schema.arguments:
        if _is_written(a):
            value = _mutated_argument(em, a, kwargs, copies, metas, where)
            if value is None or value == []:
                value = None
            elif a.kwarg_only or missing:
                raise UnsupportedError(
                    f"{where}: argument '{a.name}' is written in place and passed by keyword; "
                    "FIR marks written arguments by position"
                )
            else:
                written.append(len(args))
        elif a.name in kwargs:
            value = extern_argument(kwargs.pop(a.name), where)
        elif a.has_default_value():
            if not a.kwarg_only:
                missing = True
            continue
        else:
            raise UnsupportedError(f"{where}: argument '{a.name}' is not given")
        if a.kwarg_only or missing:
            call_kwargs[a.name] = value
        else:
            args.append(value)
    leftover = sorted(k for k in kwargs if not k.startswith("_"))
    if leftover:
        raise UnsupportedError(f"{where}: unknown argument(s) {', '.join(leftover)}")

    val = meta_value(em.node)
    returns = len(schema.returns)
    outs = list(val[:returns]) if isinstance(val, (tuple, list)) else []
    results = _call(em, str(op), args, call_kwargs, written, outs, where)
    return [*(results if returns else [None]), *copies]


def _is_written(a: Any) -> bool:
    return a.alias_info is not None and a.alias_info.is_write


def _copy_base(em: Emitter, base: Any, meta: Any, where: str) -> Value:
    """A fresh tensor with ``base``'s values, laid out as PyTorch lays ``base`` out (offset 0)."""
    if not isinstance(base, Value) or not isinstance(meta, torch.Tensor):
        raise UnsupportedError(f"{where}: a base is not a tensor")
    shape = tuple(size_value(d) for d in meta.shape)
    strides = tuple(size_value(s) for s in meta.stride())
    if not _dense(shape, strides):
        raise UnsupportedError(
            f"{where}: a written base is laid out with strides {list(strides)} (overlapping or "
            "with gaps), which FIR cannot copy with its layout"
        )
    dtype = DType.from_torch(meta.dtype)
    layout = None if strides == contiguous_strides(shape) else Layout(strides, 0)
    t = TensorType(dtype, shape, layout)
    empty = ExternNode(
        results=[],
        callee="aten.empty_strided.default",
        args=[list(shape), list(strides)],
        kwargs={"dtype": dtype, "device": encode_torch_object(meta.device)},
    )
    empty.results = [Value(em.name("base"), t, empty, 0)]
    em.nodes.append(empty)
    copy = ExternNode(
        results=[],
        callee="aten.copy_.default",
        args=[empty.results[0], base],
        attrs={"mutates": [0]},
    )
    copy.results = [Value(em.name("copied"), t, copy, 0)]
    em.nodes.append(copy)
    return empty.results[0]


def _dense(shape: tuple[Any, ...], strides: tuple[Any, ...]) -> bool:
    """Whether a layout covers a block of storage once (a permutation of row-major)."""
    if strides == contiguous_strides(shape):
        return True
    if not all(isinstance(d, int) for d in (*shape, *strides)):
        return False
    dims = sorted((s, d) for d, s in zip(shape, strides) if d != 1)
    expected = 1
    for s, d in dims:
        if s != expected:
            return False
        expected *= d
    return True


def _mutated_argument(
    em: Emitter,
    a: Any,
    kwargs: dict[str, Any],
    copies: list[Value],
    metas: list[Any],
    where: str,
) -> Any:
    """A written argument rebuilt from the copies of the bases and its view metadata."""
    if torch._library.utils.is_tensorlist_like_type(a.type):
        length = kwargs.pop(f"_{a.name}_length", None)
        if length is None:
            return None
        items = [_view(em, f"_{a.name}_{k}", kwargs, copies, metas, where) for k in range(length)]
        if any(x is None for x in items):
            raise UnsupportedError(f"{where}: a list argument written in place holds None")
        return items
    if not torch._library.utils.is_tensor_like_type(a.type):
        raise UnsupportedError(f"{where}: written argument '{a.name}' of type {a.type}")
    return _view(em, f"_{a.name}", kwargs, copies, metas, where)


def _view(
    em: Emitter,
    prefix: str,
    kwargs: dict[str, Any],
    copies: list[Value],
    metas: list[Any],
    where: str,
) -> Value | None:
    index = kwargs.pop(f"{prefix}_base_index", None)
    if index is None:
        return None
    base, meta = copies[index], metas[index]
    if kwargs.pop(f"{prefix}_alias", None) is not None:
        return base  # the same elements, the same layout
    if f"{prefix}_storage_offset" in kwargs:
        size = [size_value(d) for d in kwargs.pop(f"{prefix}_size")]
        stride = [size_value(s) for s in kwargs.pop(f"{prefix}_stride")]
        # the copy starts where the base starts: offsets move by the base's own offset
        offset = size_value(kwargs.pop(f"{prefix}_storage_offset")) - size_value(
            meta.storage_offset()
        )
        return _alias(em, base, tuple(size), tuple(stride), offset, where)
    if f"{prefix}_slice_dim" in kwargs:
        dim = kwargs.pop(f"{prefix}_slice_dim")
        start = size_value(kwargs.pop(f"{prefix}_slice_start"))
        end = size_value(kwargs.pop(f"{prefix}_slice_end"))
        shape = list(base.type.shape)
        dim = dim % len(shape)
        if all(isinstance(x, int) for x in (start, end, shape[dim])) and not (
            0 <= start <= end <= shape[dim]
        ):
            raise UnsupportedError(f"{where}: slice [{start}:{end}] of a dimension of {shape[dim]}")
        strides = base.type.strides
        offset = start * strides[dim]
        shape[dim] = end - start
        return _alias(em, base, tuple(shape), tuple(strides), offset, where)
    return base


def _alias(
    em: Emitter,
    base: Value,
    shape: tuple[Any, ...],
    strides: tuple[Any, ...],
    offset: Any,
    where: str,
) -> Value:
    if isinstance(offset, int) and offset < 0:
        raise UnsupportedError(f"{where}: a view starts before its base")
    t = TensorType(base.type.dtype, shape, Layout(strides, offset)).normalized()
    node = AliasNode(results=[], base=base)
    node.results = [Value(em.name("view"), t, node, 0)]
    em.nodes.append(node)
    return node.results[0]


def _call(
    em: Emitter,
    callee: str,
    args: list[Any],
    kwargs: dict[str, Any],
    written: list[int],
    outs: list[Any],
    where: str,
) -> list[Any]:
    """The op's call. Its tensor results are values; a call that returns none has one empty
    result (a token), which nothing reads (the call stays: it writes its arguments)."""
    kept = [k for k, v in enumerate(outs) if isinstance(v, torch.Tensor)]
    for k, v in enumerate(outs):
        if not isinstance(v, (torch.Tensor, type(None))):
            raise UnsupportedError(f"{where}: result #{k} is a {type(v).__name__}, not a tensor")
    node = ExternNode(results=[], callee=callee, args=args, kwargs=kwargs)
    if written:
        node.attrs["mutates"] = written
    if kept:
        types = [tensor_type(outs[k], keep_layout=True) for k in kept]
        if len(kept) != len(outs):
            node.attrs["results"] = kept
    else:
        types = [TOKEN_TYPE]
    node.results = [
        Value(em.name("" if k == 0 else str(k)), t, node, k) for k, t in enumerate(types)
    ]
    em.nodes.append(node)
    by_position = dict(zip(kept, node.results))
    return [by_position.get(k) for k in range(len(outs))]
