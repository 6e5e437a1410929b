"""The GPU kernels of FIR's own operators (:mod:`fir.ir.fir_ops`), registered with the
dispatcher for ``CUDA`` when the runtime first resolves a ``fir.*`` callee.

A kernel here computes the same function as the operator's portable definition, and falls back
to it for operands it does not take (the tests compare the two). Triton is imported at the
first call on a GPU, never on a machine that only runs CPU code.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

import torch
from fir.ir import fir_ops

_lock = threading.Lock()
_registered = False


def fits(a: Any, w: Any) -> bool:
    """Whether TMA can read the operands: 2-d f16/bf16 of one dtype, rows contiguous, row
    strides and base addresses multiples of 16 bytes."""
    if a.dim() != 2 or w.dim() != 2 or a.dtype != w.dtype:
        return False
    if a.dtype not in (torch.float16, torch.bfloat16) or a.shape[1] != w.shape[1]:
        return False
    size = a.element_size()
    for t in (a, w):
        if t.stride(1) != 1 or (t.stride(0) * size) % 16 or t.data_ptr() % 16:
            return False
    return a.shape[1] > 0


def _mm_t_cuda(a: Any, w: Any) -> Any:
    kernels = _triton_matmul() if fits(a, w) and _hopper(a.device.index) else None
    if kernels is not None:
        return kernels.mm_t(a, w)
    return fir_ops.mm_t_reference(a, w)


@functools.cache
def _hopper(device: int | None) -> bool:
    """Whether the kernel was measured on this GPU's kind: TMA and wgmma are Hopper's (sm_90)
    and later; elsewhere cuBLAS's product is the safer choice."""
    return torch.cuda.get_device_capability(device)[0] >= 9


@functools.cache
def _triton_matmul() -> Any:
    """The kernel's module, or None where this Triton has no host-side tensor descriptors
    (before 3.4)."""
    try:
        from . import triton_matmul
    except ImportError:
        return None
    return triton_matmul


def register() -> None:
    """Define the ``fir`` operators and add their CUDA kernels, once per process."""
    global _registered
    with _lock:
        if not _registered:
            fir_ops.define().impl("mm_t", _mm_t_cuda, "CUDA")
            _registered = True
