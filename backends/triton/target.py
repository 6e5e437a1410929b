"""Compile a program's Triton kernels for a GPU target without a GPU: ``triton.compile`` down to
the target's binary (``cubin`` for CUDA), so that a kernel that would not compile fails on a
machine with no GPU (CI). The signature comes from the plan: a pointer per buffer argument (of
its storage's element type), the error buffer, an ``i64`` per size symbol, and the blocks of the
kernel's configuration as constants.
"""

from __future__ import annotations

import time
from typing import Any

from fir.backends.plan import ProgramPlan
from fir.ir.dtypes import DType

from .build import load_module, module_path
from .helpers import FIR_LAUNCH
from .render import render_program

POINTER: dict[DType, str] = {
    DType.BOOL: "*i1",
    DType.I8: "*i8",
    DType.I16: "*i16",
    DType.I32: "*i32",
    DType.I64: "*i64",
    DType.U8: "*u8",
    DType.F16: "*fp16",
    DType.BF16: "*bf16",
    DType.F32: "*fp32",
    DType.F64: "*fp64",
}


def compile_for_target(
    plan: ProgramPlan, arch: int = 90, backend: str = "cuda", warp_size: int = 32
) -> dict[str, tuple[float, list[str]]]:
    """Compile every kernel of ``plan`` for ``backend``/``arch``; return, by kernel, the seconds
    it took and the stages produced (``ttir``, ``ttgir``, ``llir``, ``ptx``, ``cubin``). A kernel
    that does not compile raises Triton's error."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    source, configs = render_program(plan)
    module = load_module(module_path(source))
    target = GPUTarget(backend, arch, warp_size)
    out: dict[str, tuple[float, list[str]]] = {}
    for k in plan.kernels():
        cfg, fails = configs[k.name]
        fn: Any = getattr(module, k.name)
        signature: dict[str, str] = {}
        names = list(fn.arg_names)
        pos = 0
        for a in k.args:
            signature[names[pos]] = POINTER[a.dtype]
            pos += 1
        if fails:
            signature[names[pos]] = "*i64"
            pos += 1
        for _ in k.sizes:
            signature[names[pos]] = "i64"
            pos += 1
        constants = {n: getattr(cfg, n) for n in names[pos:]}
        for n in constants:
            signature[n] = "constexpr"
        start = time.perf_counter()
        compiled = triton.compile(
            ASTSource(fn, signature, constexprs=constants),
            target=target,
            options={"num_warps": cfg.num_warps, **FIR_LAUNCH},
        )
        out[k.name] = (time.perf_counter() - start, list(compiled.asm))
    return out
