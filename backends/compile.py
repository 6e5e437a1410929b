"""One call from a fused loop-level function to something that runs on torch tensors.

``compile_function(graph, backend)`` plans the function (:mod:`fir.backends.plan`), builds its
kernels with the chosen back end (:mod:`fir.backends.registry` lists them) and wraps both in
the shared runtime (:class:`~fir.backends.runtime.CompiledProgram`).
"""

from __future__ import annotations

from fir.ir.graph import Graph

from .registry import backend_named
from .runtime import CompiledProgram


def compile_function(
    g: Graph, backend: str = "cpp", device: str | None = None, autotune: bool = False
) -> CompiledProgram:
    """``g`` compiled by ``backend``: ``cpp`` or ``llvm`` for CPU tensors, ``triton`` for CUDA
    tensors (``device`` defaults to ``cuda``; under ``TRITON_INTERPRET=1`` to ``cpu``, where
    the interpreter runs the kernels on CPU tensors). ``autotune``: Triton kernels time a few
    configurations at their first launch and keep the fastest (:mod:`.runtime.triton_tune`)."""
    return backend_named(backend).compile(g, device, autotune)
