"""The Triton back end: kernel plans as ``@triton.jit`` kernels for CUDA tensors.

:mod:`.render` writes the kernels (block layouts, masks, accumulators), :mod:`.build` puts the
module in the cache, imports it and launches its kernels; :mod:`.helpers` holds the jit
functions generated code calls. Under ``TRITON_INTERPRET=1`` the same kernels run in Triton's
interpreter on CPU tensors (the test suite's way to check them without a GPU).
"""

from __future__ import annotations

import os

from .build import TritonKernels, build_program
from .render import render_kernel, render_program

__all__ = [
    "TritonKernels",
    "build_program",
    "default_device",
    "render_kernel",
    "render_program",
]


def default_device() -> str:
    """Where Triton kernels run: CUDA, or the CPU under Triton's interpreter."""
    return "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda"
