"""Compile and load: LLVM IR of a program -> optimised for this CPU -> MCJIT -> ctypes calls.

One module per program, the host CPU as the target (``get_host_cpu_name`` and its features),
optimised with llvmlite's new pass builder at O3 with loop and SLP vectorisation, compiled in
the process by MCJIT: no toolchain at all. A module LLVM's verifier rejects is an
``LLVMBuildError`` naming the program, with the IR written to a file for reading.
"""

from __future__ import annotations

import ctypes
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fir.backends.plan import ProgramPlan
from fir.ir.errors import FirError

from .render import render_module

_ready = False


class LLVMBuildError(FirError):
    """LLVM rejected a generated module (a bug of the renderer): the message says where the IR
    was written."""


def _initialise() -> None:
    global _ready
    if not _ready:
        import llvmlite.binding as llvm

        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        _ready = True


def target_machine() -> Any:
    import llvmlite.binding as llvm

    _initialise()
    target = llvm.Target.from_triple(llvm.get_process_triple())
    return target.create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3
    )


def symbol(name: str) -> str:
    return "fir_" + name  # never a libm or libc name


def optimise(ir_text: str, name: str) -> tuple[Any, Any]:
    """The module parsed, verified and optimised (O3, loop and SLP vectorisers on), and the
    target machine it was optimised for."""
    import llvmlite.binding as llvm

    tm = target_machine()
    try:
        mod = llvm.parse_assembly(ir_text)
        mod.verify()
    except RuntimeError as e:
        path = Path(tempfile.mkdtemp(prefix="fir-llvm-")) / f"{name}.ll"
        path.write_text(ir_text)
        raise LLVMBuildError(f"LLVM rejected the module of @{name} ({path}): {e}") from None
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    return mod, tm


class _Fn:
    __slots__ = ("args", "error", "error_ref", "fn", "nargs", "nsizes", "sizes")

    def __init__(self, address: int, nargs: int, nsizes: int) -> None:
        proto = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
        self.fn = proto(address)
        self.nargs, self.nsizes = nargs, nsizes
        self.args = (ctypes.c_uint64 * max(nargs, 1))()
        self.sizes = (ctypes.c_int64 * max(nsizes, 1))()
        self.error = ctypes.c_int64(0)
        self.error_ref = ctypes.addressof(self.error)


class LLVMKernels:
    """A program's kernels compiled by LLVM in this process; ``call`` as the C++ back end's."""

    def __init__(self, plan: ProgramPlan) -> None:
        import llvmlite.binding as llvm

        start = time.perf_counter()
        kernels = plan.kernels()
        module = render_module(kernels, symbol, llvm.get_process_triple())
        self.ir = str(module)
        self.module, tm = optimise(self.ir, plan.name)
        self.engine = llvm.create_mcjit_compiler(self.module, tm)
        self.engine.finalize_object()
        self.fns = {
            k.name: _Fn(self.engine.get_function_address(symbol(k.name)), len(k.args), len(k.sizes))
            for k in kernels
        }
        self.seconds = time.perf_counter() - start
        self.source = self.ir

    def names(self) -> list[str]:
        return list(self.fns)

    def call(self, name: str, args: Sequence[int], sizes: Sequence[int] = ()) -> tuple[int, int]:
        f = self.fns[name]
        if f.nargs:
            f.args[:] = args
        if f.nsizes:
            f.sizes[:] = sizes
        code = f.fn(ctypes.addressof(f.args), ctypes.addressof(f.sizes), f.error_ref)
        return code, (f.error.value if code else 0)


def build_program(plan: ProgramPlan) -> LLVMKernels:
    return LLVMKernels(plan)
