"""The llvmlite back end: kernel plans as LLVM IR, compiled in the process (no toolchain).

:mod:`.render` builds the IR with ``llvmlite.ir`` (fixed helpers: ``prelude.ll``); :mod:`.build`
links the prelude in, optimises the module for this CPU and compiles it with MCJIT. Kernels
take the C++ back end's calling convention, so the shared runtime (``backends/runtime``: the
threads, OpenMP drivers and half conversions too) calls them alike.
"""

from __future__ import annotations

from .build import LLVMBuildError, LLVMKernels, build_program
from .render import UNSUPPORTED, LLVMRenderError, render_module

__all__ = [
    "UNSUPPORTED",
    "LLVMBuildError",
    "LLVMKernels",
    "LLVMRenderError",
    "build_program",
    "render_module",
]
