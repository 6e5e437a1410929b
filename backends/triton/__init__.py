"""The Triton back end: kernel plans as ``@triton.jit`` kernels for CUDA tensors.

:mod:`.render` writes the kernels (block layouts, masks, accumulators), :mod:`.build` puts the
module in the cache, imports it and launches its kernels; :mod:`.helpers` holds the jit
functions generated code calls. Under ``TRITON_INTERPRET=1`` the same kernels run in Triton's
interpreter on CPU tensors (the test suite's way to check them without a GPU).
"""

from __future__ import annotations

import os

from fir.backends.plan import ProgramPlan, plan_program
from fir.backends.plan.block_schedule import keeps_rows
from fir.ir.graph import Graph

from .build import TritonKernels, build_program
from .render import Config, choose_config, render_kernel, render_program

__all__ = [
    "Config",
    "TritonKernels",
    "build_program",
    "choose_config",
    "default_device",
    "keeps_rows",
    "plan_for_triton",
    "render_kernel",
    "render_program",
]


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def default_device() -> str:
    """Where Triton kernels run: CUDA, or the CPU under Triton's interpreter."""
    return "cpu" if interpreting() else "cuda"


def plan_for_triton(g: Graph) -> ProgramPlan:
    """``g``'s plan, with scratch rows only where a row stays in registers (a persistent
    reduction)."""
    return plan_program(g, scratch_rows=keeps_rows)
