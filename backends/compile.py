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

BACKENDS = ("cpp", "triton", "llvm")


def compile_function(
    g: Graph, backend: str = "cpp", device: str | None = None, autotune: bool = False
) -> CompiledProgram:
    """``g`` compiled by ``backend``: ``cpp`` for CPU tensors, ``triton`` for CUDA tensors
    (``device`` defaults to ``cuda``; under ``TRITON_INTERPRET=1`` to ``cpu``, where the
    interpreter runs the kernels on CPU tensors). ``autotune``: Triton kernels time a few
    configurations at their first launch and keep the fastest (:mod:`.triton.tune`)."""
    if backend not in BACKENDS:
        raise FirError(f"unknown code generator '{backend}' (choose from {', '.join(BACKENDS)})")
    if backend == "triton":
        from .triton import build_program as build_triton
        from .triton import default_device, plan_for_triton

        device = device or default_device()
        plan = plan_for_triton(g)
        return CompiledProgram(plan, build_triton(plan, device, autotune=autotune), device)
    if backend == "llvm":
        from .llvm import build_program as build_llvm
        from .llvm.render import scratch_rows

        plan = plan_program(g, scratch_rows=scratch_rows)
        return CompiledProgram(plan, build_llvm(plan))
    plan = plan_program(g)
    from .cpp import build_program

    return CompiledProgram(plan, build_program(plan))
