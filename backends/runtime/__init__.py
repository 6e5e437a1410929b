"""The runtime every back end shares: what runs a compiled program on torch tensors.

* :mod:`.program`: :class:`CompiledProgram`, the general call (inputs checked and laid out,
  steps walked, storages allocated as the memory plan says, outputs returned as eager would);
* :mod:`.fast_call` and :mod:`.call_source`: a static program's call resolved once and written
  out as a Python function (kernel launches, extern calls, allocations);
* :mod:`.buffers`: allocation (a pool for large buffers); :mod:`.layouts`: storages and views;
* :mod:`.cuda_graphs`: a CUDA program captured in a CUDA graph;
* the back ends' run-time parts: Triton's launches (:mod:`.triton_launch`), autotuning
  (:mod:`.triton_tune`), compile memo (:mod:`.triton_kernel_memo`) and libdevice under the
  interpreter (:mod:`.triton_interp_math`); the llvm back end's threads (:mod:`.llvm_threads`),
  OpenMP drivers (:mod:`.llvm_omp`) and half conversions for MCJIT (:mod:`.llvm_softfp`).

The back ends' own parts (``cpp``, ``llvm``, ``triton``) build kernels; this package calls them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .compiled_program import (
        CompiledProgram,
        Kernels,
        RuntimeInputError,
        element_count,
        size_function,
    )

__all__ = ["CompiledProgram", "Kernels", "RuntimeInputError", "element_count", "size_function"]


def __getattr__(name: str) -> Any:
    """The program's names, imported at first use: :mod:`.compiled_program` imports torch, and a
    torch-free part of this package (:mod:`.llvm_threads`, which the llvm back end's build
    imports) must not pull it into ``fir-translate --target llvm`` (a second of startup)."""
    if name in __all__:
        return getattr(importlib.import_module(".compiled_program", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
