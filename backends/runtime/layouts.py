"""Buffers as tensors: a storage is a flat tensor, and a buffer a strided view of it.

Offsets here are relative to the flat tensor's first element, whatever that tensor's own
offset in its memory (a caller's input can be a view that starts inside a larger tensor):
``torch.as_strided`` takes an absolute storage offset, so every view adds the flat tensor's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from fir.ir.errors import FirError

from ..plan import ProgramPlan


def _as_strided(
    flat: torch.Tensor, shape: Sequence[int], strides: Sequence[int], offset: int
) -> torch.Tensor:
    return torch.as_strided(flat, shape, strides, flat.storage_offset() + offset)


def _reinterpreter() -> Any:
    """PyTorch's C++ view maker (what Inductor's generated code calls: half the cost of
    ``torch.as_strided``, 0.48 against 0.94 us, its offset relative already), where this
    PyTorch has it and it does what this module expects."""
    try:
        from torch._C._dynamo.guards import (  # type: ignore[attr-defined]  # private, unstubbed
            _reinterpret_tensor,
        )
    except ImportError:
        return _as_strided
    try:
        # this module is often first imported while torch.compile traces (fake tensors, a
        # dispatch mode): the probe must run on real tensors, or it fails and every call
        # pays for the slower view
        from torch.utils._python_dispatch import _disable_current_modes

        with _disable_current_modes():
            probe = torch.arange(4.0)[1:]
            if _reinterpret_tensor(probe, (2,), (1,), 1).tolist() == [2.0, 3.0]:
                return _reinterpret_tensor
    except Exception:  # noqa: BLE001 - a private API: any surprise means the public one
        pass
    return _as_strided


# ``view(flat, shape, strides, offset)``: the buffer of ``shape``/``strides`` that starts at
# element ``offset`` of ``flat``
view = _reinterpreter()


def same_layout(x: torch.Tensor, shape: Sequence[int], strides: Sequence[int]) -> bool:
    return all(n == 1 or s == w for n, s, w in zip(shape, x.stride(), strides))


def flat_view(x: torch.Tensor, offset: int) -> tuple[torch.Tensor, int]:
    """``x``'s whole memory as a flat tensor, and the position in it of index 0 of the layout
    the function expects (``x``'s first element is at index ``offset``)."""
    storage_elements = x.untyped_storage().nbytes() // x.element_size()
    flat = torch.as_strided(x, (storage_elements,), (1,), 0)
    # a SymInt only while tracing symbolically; the real tensors of a call give an int (no
    # cast: this runs per call)
    return flat, x.storage_offset() - offset  # type: ignore[return-value]


def scatter(
    flat: torch.Tensor, x: torch.Tensor, shape: list[int], strides: list[int], offset: int
) -> None:
    """Write ``x`` into ``flat`` laid out as ``shape``/``strides`` from element ``offset``. A
    layout in which several elements share a position (a stride 0) takes one of them, as the
    function expects them equal."""
    if any(s == 0 and n > 1 for n, s in zip(shape, strides)):
        index = torch.full(shape, offset, dtype=torch.int64, device=flat.device)
        for k, (n, s) in enumerate(zip(shape, strides)):
            dims = [1] * len(shape)
            dims[k] = n
            index = index + torch.arange(n, device=flat.device).view(dims) * s
        flat[index.reshape(-1)] = x.reshape(-1).to(flat.dtype)
        return
    view(flat, shape, strides, offset).copy_(x)


def storage_dtype(plan: ProgramPlan, number: int) -> torch.dtype:
    """The dtype of storage ``number``: that of the buffers it holds."""
    for b in plan.buffers.values():
        if b.storage == number:
            return b.type.dtype.to_torch()
    raise FirError(f"storage {number} holds no buffer")  # pragma: no cover
