"""Functional collectives (``torch.distributed._functional_collectives``) as ordered extern calls.

In an aten graph a collective is two calls: ``_c10d_functional.all_reduce`` (and
``all_gather_into_tensor``, ``reduce_scatter_tensor`` …) starts the communication and returns a
tensor that is complete only after ``_c10d_functional.wait_tensor`` of it. FIR has no op for
either: both become extern nodes that call the real ops, marked ``effect = "collective"``:

* ``deps`` orders every effectful call after the previous one (a weak dependency), so no pass
  swaps two collectives or moves one across a wait;
* the wait is written as an in-place write of the collective's result (``mutates = [0]``), and
  every later reader reads that buffer, so the mutation dependencies put the readers after the
  wait, and ``plan-memory`` never frees or reuses the buffer while the data is in flight;
* ``fuse`` does not fuse loop nodes that lie on different sides of a collective call; the
  pointwise work between two collectives fuses as usual.

:func:`effect_extern` is shared with the importer, which uses it for assertions and for the ops
AOTAutograd wraps in ``with_effects``.
"""

from __future__ import annotations

from typing import Any

import torch
from fir.ir.dtypes import DType
from fir.ir.graph import ExternNode, Value
from fir.ir.types import TensorType

from ..emitter import Emitter, UnsupportedError, meta_value, size_value, tensor_type
from .registry import register

EFFECT = "effect"  # the extern attribute naming the effect chain a call belongs to
COLLECTIVE = "collective"
# the result of a call that returns nothing (an assertion, ``aten._print``): an empty tensor,
# the type of AOTAutograd's effect tokens
TOKEN_TYPE = TensorType(DType.F32, (0,))

COLLECTIVE_OPS = (
    "_c10d_functional.all_reduce.default",
    "_c10d_functional.all_reduce_coalesced.default",
    "_c10d_functional.all_gather_into_tensor.default",
    "_c10d_functional.all_gather_into_tensor_coalesced.default",
    "_c10d_functional.reduce_scatter_tensor.default",
    "_c10d_functional.reduce_scatter_tensor_coalesced.default",
    "_c10d_functional.all_to_all_single.default",
    "_c10d_functional.broadcast.default",
)
WAIT_OP = "_c10d_functional.wait_tensor.default"


def effect_extern(
    em: Emitter,
    callee: str,
    args: list[Any],
    kwargs: dict[str, Any],
    effect: str,
    results: list[Any],
    attrs: dict[str, Any] | None = None,
) -> list[Value]:
    """Emit ``extern callee(args, kwargs) {effect = …}``: a call that keeps its place among the
    effectful calls of the function. ``args`` are already extern arguments; ``results`` are the
    example values of its results (tensors), or ``[None]`` for a call that returns nothing,
    whose one result is then an empty token."""
    if all(r is None for r in results):
        types = [TOKEN_TYPE]
    else:
        types = []
        for k, r in enumerate(results):
            if not isinstance(r, torch.Tensor):
                raise UnsupportedError(
                    f"{callee} returns a {type(r).__name__} as result #{k}; FIR needs tensors"
                )
            # kept as PyTorch lays it out: the runtime then adopts the op's own memory, which
            # a collective still writes until its wait
            types.append(tensor_type(r, keep_layout=True))
    node = ExternNode(
        results=[], callee=callee, args=args, kwargs=kwargs, attrs={EFFECT: effect, **(attrs or {})}
    )
    node.results = [
        Value(em.name("" if k == 0 else str(k)), t, node, k) for k, t in enumerate(types)
    ]
    em.nodes.append(node)
    return node.results


def is_collective(v: Any) -> bool:
    """Whether ``v`` is a result of a collective call (not of its wait)."""
    owner = getattr(v, "owner", None)
    return (
        isinstance(owner, ExternNode)
        and owner.attrs.get(EFFECT) == COLLECTIVE
        and "mutates" not in owner.attrs
    )


def _arg(a: Any, op: str) -> Any:
    """A collective's argument as an extern argument: tensors, reduce ops and group names
    (strings), sizes and ranks. Anything else makes the graph run with PyTorch: as a plain
    (unordered) extern call the collective could be reordered."""
    if a is None or isinstance(a, (bool, int, float, str, Value)):
        return a
    if isinstance(a, torch.SymInt):
        return size_value(a)
    if isinstance(a, (list, tuple)):
        return [_arg(x, op) for x in a]
    raise UnsupportedError(f"{op}: argument {a!r} of type {type(a).__name__} is not supported")


@register(*COLLECTIVE_OPS)
def _collective(em: Emitter, *args: Any, **kwargs: Any) -> Any:
    op = str(em.node.target)
    val = meta_value(em.node)
    multi = isinstance(val, (list, tuple))
    outs = effect_extern(
        em,
        op,
        [_arg(a, op) for a in args],
        {k: _arg(v, op) for k, v in kwargs.items()},
        COLLECTIVE,
        list(val) if multi else [val],
    )
    return outs if multi else outs[0]


@register(WAIT_OP)
def _wait(em: Emitter, t: Any) -> Value:
    """``wait_tensor(t)`` returns ``t`` itself once the communication is done: an in-place write
    of ``t``, whose readers from here on read ``t``."""
    if not is_collective(t):
        raise UnsupportedError(f"{WAIT_OP} of a value that is not a collective's result")
    effect_extern(em, WAIT_OP, [t], {}, COLLECTIVE, [em.out_meta()], {"mutates": [0]})
    return t
