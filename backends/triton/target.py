"""Compile a program's Triton kernels for a GPU target without a GPU: ``triton.compile`` down to
the target's binary (``cubin`` for CUDA), with the signature the driver launch uses
(:func:`.build.compile_kernel`), so that a kernel that would not compile, or that takes
parameters the launch does not expect, fails on a machine with no GPU (CI).
"""

from __future__ import annotations

import time

from fir.backends.plan import ProgramPlan
from fir.backends.plan.block_schedule import index_width

from .build import compile_kernel, load_module, module_path
from .render import jit_name, render_program


def compile_for_target(
    plan: ProgramPlan, arch: int = 90, backend: str = "cuda", warp_size: int = 32
) -> dict[str, tuple[float, list[str]]]:
    """Compile every kernel of ``plan`` for ``backend``/``arch``; return, by kernel, the seconds
    it took and the stages produced (``ttir``, ``ttgir``, ``llir``, ``ptx``, ``cubin``). A kernel
    that does not compile raises Triton's error."""
    if warp_size != 32:
        raise ValueError("FIR's kernels assume warps of 32 threads")
    source, configs = render_program(plan)
    module = load_module(module_path(source))
    out: dict[str, tuple[float, list[str]]] = {}
    for k in plan.kernels():
        cfg, fails = configs[k.name]
        # a kernel whose index width depends on its sizes: both variants (int32 first)
        variants = [False, True] if index_width(k) == "sizes" else [True]
        for index64 in variants:
            start = time.perf_counter()
            compiled, _ = compile_kernel(
                k, cfg, fails, getattr(module, jit_name(k.name)), arch, backend, index64
            )
            name = f"{k.name} (int64)" if index64 and len(variants) == 2 else k.name
            out[name] = (time.perf_counter() - start, list(compiled.asm))
    return out
