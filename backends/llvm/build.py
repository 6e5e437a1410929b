"""Compile and load: LLVM IR of a program -> optimised for this CPU -> MCJIT -> ctypes calls.

One module per program, the host CPU as the target (``get_host_cpu_name`` and its features),
optimised with llvmlite's new pass builder at O3 with loop and SLP vectorisation, compiled in
the process by MCJIT: no toolchain at all. A module LLVM's verifier rejects is an
``LLVMBuildError`` naming the program, with the IR written to a file for reading.
"""

from __future__ import annotations

import ctypes
import os
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from fir.backends.plan import KernelPlan, ProgramPlan
from fir.backends.plan.instructions import LoopBegin
from fir.ir.errors import FirError
from fir.ir.types import dims_mul

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


GRAIN = 32768  # element-iterations below which a kernel runs on one thread (as the C++ one)


def _threads() -> int:
    return max(1, min(os.cpu_count() or 1, int(os.environ.get("FIR_LLVM_THREADS", "0")) or 64))


class _Fn:
    """One kernel: its entry point, the size of its parallel loop and its work, and argument
    arrays per thread (a call writes them)."""

    def __init__(self, address: int, plan: KernelPlan) -> None:
        proto = ctypes.CFUNCTYPE(
            ctypes.c_int64,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_int64,
            ctypes.c_int64,
        )
        self.fn = proto(address)
        self.nargs, self.nsizes = len(plan.args), len(plan.sizes)
        outer = next((i for i in plan.instrs if isinstance(i, LoopBegin) and i.parallel), None)
        self.outer = outer.size if outer is not None else None  # Dim, or no parallel loop
        self.work = dims_mul((plan.numel, plan.rnumel)) if plan.reduction else plan.numel
        self.sizes_of = plan.sizes

    def run(
        self, args: Sequence[int], sizes: Sequence[int], start: int, stop: int
    ) -> tuple[int, int]:
        a = (ctypes.c_uint64 * max(self.nargs, 1))(*args)
        s = (ctypes.c_int64 * max(self.nsizes, 1))(*sizes)
        err = ctypes.c_int64(0)
        code = self.fn(ctypes.addressof(a), ctypes.addressof(s), ctypes.addressof(err), start, stop)
        return code, (err.value if code else 0)


def _value(d: Any, names: Sequence[str], sizes: Sequence[int]) -> int:
    if isinstance(d, int):
        return d
    return int(d.subs({sym: sizes[names.index(sym.name)] for sym in d.free_symbols}))


class LLVMKernels:
    """A program's kernels compiled by LLVM in this process; ``call`` as the C++ back end's. A
    kernel with a parallel loop and enough work runs on every core: its loop's range is split
    into one chunk per thread, each a ctypes call (which releases the GIL); the first failing
    chunk's error is the call's."""

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
            k.name: _Fn(self.engine.get_function_address(symbol(k.name)), k) for k in kernels
        }
        self.seconds = time.perf_counter() - start
        self.source = self.ir
        self.threads = _threads()
        self.pool: ThreadPoolExecutor | None = None

    def names(self) -> list[str]:
        return list(self.fns)

    def call(self, name: str, args: Sequence[int], sizes: Sequence[int] = ()) -> tuple[int, int]:
        f = self.fns[name]
        if len(args) != f.nargs or len(sizes) != f.nsizes:
            raise ValueError(
                f"kernel {name} takes {f.nargs} pointer(s) and {f.nsizes} size(s), "
                f"got {len(args)} and {len(sizes)}"
            )
        big = 1 << 62
        if f.outer is None or self.threads == 1:
            return f.run(args, sizes, 0, big)
        outer = _value(f.outer, f.sizes_of, sizes)
        work = _value(f.work, f.sizes_of, sizes)
        chunks = min(self.threads, outer, max(1, work // GRAIN))
        if chunks <= 1:
            return f.run(args, sizes, 0, big)
        if self.pool is None:
            self.pool = ThreadPoolExecutor(self.threads, thread_name_prefix="fir-llvm")
        step = -(-outer // chunks)
        futures = [
            self.pool.submit(f.run, args, sizes, lo, min(lo + step, outer))
            for lo in range(0, outer, step)
        ]
        results = [fu.result() for fu in futures]
        return next((r for r in results if r[0]), (0, 0))


def build_program(plan: ProgramPlan) -> LLVMKernels:
    return LLVMKernels(plan)
