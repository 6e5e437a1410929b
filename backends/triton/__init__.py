"""The Triton back end: kernel plans as ``@triton.jit`` kernels for CUDA tensors.

:mod:`.render` writes the kernels (block layouts, masks, accumulators), :mod:`.build` puts the
module in the cache, imports it and launches its kernels; :mod:`.helpers` holds the jit
functions generated code calls. Under ``TRITON_INTERPRET=1`` the same kernels run in Triton's
interpreter on CPU tensors (the test suite's way to check them without a GPU; the registry's
``default_device`` is then the CPU).
"""

from __future__ import annotations

from .build import TritonKernels, build_program
from .render import render_kernel, render_program

__all__ = [
    "TritonKernels",
    "build_program",
    "render_kernel",
    "render_program",
]
