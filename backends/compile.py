"""One call from a fused loop-level function to something that runs on torch tensors.

``compile_function(graph, backend)`` plans the function (:mod:`fir.backends.plan`), builds its
kernels with the chosen back end (``cpp``: C++/OpenMP, see :mod:`fir.backends.cpp`) and wraps
both in the shared runtime (:class:`~fir.backends.runtime.CompiledProgram`).
"""

from __future__ import annotations

from fir.ir.errors import FirError
from fir.ir.graph import Graph

from .plan import plan_program
from .runtime import CompiledProgram

BACKENDS = ("cpp",)


def compile_function(g: Graph, backend: str = "cpp") -> CompiledProgram:
    if backend not in BACKENDS:
        raise FirError(f"unknown code generator '{backend}' (choose from {', '.join(BACKENDS)})")
    plan = plan_program(g)
    from .cpp import build_program

    return CompiledProgram(plan, build_program(plan))
