"""Compile and load: LLVM IR of a program -> optimised for this CPU -> MCJIT -> ctypes calls.

One module per program, the host CPU as the target (``get_host_cpu_name`` and its features),
optimised with llvmlite's new pass builder at O3 with loop and SLP vectorisation, compiled to
an object file, and loaded into MCJIT in the process: no toolchain at all. A module LLVM's
verifier rejects is an ``LLVMBuildError`` naming the program, with the IR written to a file for
reading.

The object code is cached on disk (:class:`~fir.backends.cache.Cache` ``llvm``), keyed by the
IR text, the llvmlite and LLVM versions, the host CPU's name and features and the optimisation
settings: a hit skips optimisation and code generation (most of a build) and loads the object
as it is. An entry whose checksum does not agree is built again, never loaded.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from fir.backends.cache import Cache, cache_key
from fir.backends.plan import KernelPlan, ProgramPlan
from fir.backends.plan.instructions import LoopBegin
from fir.backends.plan.program import shared_storage
from fir.backends.plan.schedule import LLVM, chunks
from fir.ir.errors import FirError
from fir.ir.types import dims_mul

from . import softfp
from .omp import CTX_FIELDS, gomp_function, gomp_library, max_threads
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


def target_cpu() -> str:
    """The CPU code is generated for: the host's, or ``$FIR_LLVM_CPU`` (an LLVM CPU name such
    as ``haswell`` or ``znver3``: code for an older CPU, run on a newer one, tests what users
    of that CPU get, e.g. the library calls LLVM makes where the host has instructions)."""
    import llvmlite.binding as llvm

    return os.environ.get("FIR_LLVM_CPU") or llvm.get_host_cpu_name()


def cpu_features() -> str:
    """The host CPU's features, and 512-bit vectors where it has AVX-512: LLVM's tuning for
    these CPUs prefers 256-bit ones, which left the compute-bound kernels slower (one thread:
    softmax 4096 x 2048 9.0 -> 6.8 ms, x.sum(0) 4.0 -> 2.5 ms; transposes and streaming
    kernels the same or better), as the C++ back end found (-mprefer-vector-width=512). Under
    ``$FIR_LLVM_CPU``, none: the CPU name implies them."""
    import llvmlite.binding as llvm

    if os.environ.get("FIR_LLVM_CPU"):
        return ""
    features = llvm.get_host_cpu_features().flatten()
    if "+avx512f" in features.split(","):
        features += ",-prefer-256-bit"
    return features


def target_machine() -> Any:
    """A new target machine for the CPU of :func:`target_cpu` (an engine consumes its own)."""
    import llvmlite.binding as llvm

    _initialise()
    target = llvm.Target.from_triple(llvm.get_process_triple())
    return target.create_target_machine(cpu=target_cpu(), features=cpu_features(), opt=3)


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
        where = failing_function(ir_text, str(e))
        what = f"function @{where} of program @{name}" if where else f"the module of @{name}"
        raise LLVMBuildError(f"LLVM rejected {what} (the IR is in {path}): {e}") from None
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    return mod, tm


def failing_function(ir_text: str, message: str) -> str | None:
    """The function of ``ir_text`` that LLVM's message is about: the one around the line a
    parse error names (``<string>:LINE:COL``), or around the first instruction a verifier
    error quotes; None where neither is found."""
    lines = ir_text.splitlines()
    at = None
    m = re.search(r":(\d+):\d+:", message)
    if m is not None:
        at = int(m.group(1)) - 1
    else:
        # the verifier prints names unquoted (%later where the text has %"later")
        plain = [line.replace('"', "").strip() for line in lines]
        quoted = [q.replace('"', "").strip() for q in message.splitlines()[1:] if q.strip()]
        for q in quoted:
            at = next((k for k, line in enumerate(plain) if line == q), None)
            if at is not None:
                break
    if at is None:
        return None
    for line in reversed(lines[: at + 1]):
        d = re.match(r"define\b.*?@\"?([\w.$]+)\"?\(", line)
        if d is not None:
            return d.group(1)
    return None


# how many modules this process optimised and compiled to objects (a cache hit does neither)
STATS = {"codegen": 0, "cache_hits": 0}


def object_key(ir_text: str) -> str:
    """The cache key of a module's object code: everything the object depends on."""
    import llvmlite
    import llvmlite.binding as llvm

    return cache_key(
        ir_text,
        llvmlite.__version__,
        ".".join(str(v) for v in llvm.llvm_version_info),
        llvm.get_process_triple(),
        target_cpu(),
        cpu_features(),
        "O3 loop-vectorize slp-vectorize",
    )


def compile_object(ir_text: str, name: str, cache: Cache | None = None) -> bytes:
    """The object code of a module: from the cache, or optimised, compiled and stored."""
    cache = cache or Cache("llvm")
    entry = object_key(ir_text) + ".o"
    hit = cache.read(entry)  # trusted (ours, private, no link) and whole, read through one fd
    if hit is not None:
        STATS["cache_hits"] += 1
        return hit
    module, tm = optimise(ir_text, name)
    data = tm.emit_object(module)
    STATS["codegen"] += 1
    with contextlib.suppress(OSError):  # not even the temporary folder: the code still runs
        cache.store(entry, lambda tmp: tmp.write_bytes(data))
    return data


def _forced_threads() -> int:
    return int(os.environ.get("FIR_LLVM_THREADS", "0") or 0)


def _cores() -> int:
    """The cores this process may run on. Not ``os.cpu_count()``, which counts the machine's
    even where the process's CPU set (a container's) is smaller."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)


def _threads() -> int:
    """The threads a kernel's parallel loop is split over: ``FIR_LLVM_THREADS`` if set, else the
    OpenMP runtime's team size, read at each call as the C++ back end's regions do (it follows
    ``OMP_NUM_THREADS`` and ``torch.set_num_threads``), else the cores this process may run on.
    A team larger than PyTorch's (``FIR_LLVM_THREADS=64`` on 16 cores) leaves the extra threads
    spinning over PyTorch's BLAS after each kernel."""
    forced = _forced_threads()
    if forced > 0:
        return forced
    team = max_threads()
    return max(1, team) if team is not None else _cores()


def uses_omp() -> bool:
    """Whether kernels split their parallel loop over an OpenMP team (more than one core, or
    threads asked for, and a libgomp to call), which gives each kernel a driver in the module."""
    return (_forced_threads() or _cores()) > 1 and gomp_library() is not None


def module_text(plan: ProgramPlan) -> str:
    """The LLVM IR of ``plan``'s kernels as this process compiles them (``fir-translate
    --target llvm`` prints this)."""
    import llvmlite.binding as llvm

    kernels = plan.kernels()
    aliased = {k.name: shared_storage(plan, k) for k in kernels}
    triple = llvm.get_process_triple()
    return str(render_module(kernels, symbol, triple, omp=uses_omp(), aliased=aliased))


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
        self.omp: Any = None  # the OpenMP driver (backends/llvm/omp.py), where there is one
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
    into the schedule's chunks (the LLVM family's ``chunks_per_thread`` a thread, none below
    the grain), each a ctypes call (which releases the GIL),
    taken in turn by the pool's threads and the calling one; the first failing chunk's error
    (in the loop's order) is the call's."""

    def __init__(self, plan: ProgramPlan, cache: Cache | None = None) -> None:
        import llvmlite.binding as llvm

        start = time.perf_counter()
        kernels = plan.kernels()
        self.threads = _threads()
        self.forced = _forced_threads() > 0
        omp = uses_omp()
        self.ir = module_text(plan)
        self.name = plan.name
        self.object = obj = compile_object(self.ir, plan.name, cache)  # kept while loaded
        softfp.register(target_machine)  # the half conversions LLVM may call
        missing = softfp.unresolved_symbols(obj)
        if missing:  # MCJIT would leave each a call to address 0: a crash at the first call
            raise LLVMBuildError(
                f"the code of @{plan.name} calls {', '.join(missing)}, which this process does "
                f"not provide (LLVM {'.'.join(map(str, llvm.llvm_version_info))}, CPU "
                f"{target_cpu()}); the llvm back end cannot run it here"
            )
        # the engine holds an empty module and the object file, which MCJIT links and loads
        # (relocations, libm symbols) without code generation
        self.engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), target_machine())
        self.engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
        self.engine.finalize_object()
        self._module: Any = None
        self.fns = {
            k.name: _Fn(self.engine.get_function_address(symbol(k.name)), k) for k in kernels
        }
        self.team: Any = None
        if omp:
            self.team = gomp_function("omp_get_max_threads", ctypes.c_int)
            driver = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32)
            for k in kernels:
                address = self.engine.get_function_address(symbol(k.name) + "_omp")
                self.fns[k.name].omp = driver(address)
        self.seconds = time.perf_counter() - start
        self.source = self.ir
        self.pool: ThreadPoolExecutor | None = None

    @property
    def module(self) -> Any:
        """The optimised module (for reading: ``fir-translate --opt``, tests), optimised again
        on demand: a cache hit never optimised it."""
        if self._module is None:
            self._module = optimise(self.ir, self.name)[0]
        return self._module

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
        threads = self.threads
        if f.omp is not None and not self.forced:
            threads = max(1, int(self.team()))
        if f.outer is None or threads == 1:
            return f.run(args, sizes, 0, big)
        outer = _value(f.outer, f.sizes_of, sizes)
        work = _value(f.work, f.sizes_of, sizes)
        n = chunks(LLVM, threads, outer, work)
        if n <= 1:
            return f.run(args, sizes, 0, big)
        step = -(-outer // n)
        n = -(-outer // step)
        if f.omp is not None:
            return self._call_omp(f, args, sizes, outer, step, n, threads)
        ranges = iter(enumerate(range(0, outer, step)))
        results: dict[int, tuple[int, int]] = {}
        lock = threading.Lock()

        def drain() -> None:  # take the next chunk until none is left
            while True:
                with lock:
                    k, lo = next(ranges, (-1, 0))
                if k < 0:
                    return
                results[k] = f.run(args, sizes, lo, min(lo + step, outer))

        workers = min(threads, n) - 1  # and this thread
        if self.pool is None:
            self.pool = ThreadPoolExecutor(self.threads - 1, thread_name_prefix="fir-llvm")
        futures = [self.pool.submit(drain) for _ in range(workers)]
        drain()
        for fu in futures:
            fu.result()
        return next((results[k] for k in sorted(results) if results[k][0]), (0, 0))

    def _call_omp(
        self,
        f: _Fn,
        args: Sequence[int],
        sizes: Sequence[int],
        outer: int,
        step: int,
        chunks: int,
        threads: int,
    ) -> tuple[int, int]:
        """The kernel's range in ``chunks`` chunks over an OpenMP team, in one call."""
        a = (ctypes.c_uint64 * max(f.nargs, 1))(*args)
        s = (ctypes.c_int64 * max(f.nsizes, 1))(*sizes)
        results = (ctypes.c_int64 * (2 * chunks))()
        ctx = (ctypes.c_int64 * CTX_FIELDS)(
            ctypes.addressof(a), ctypes.addressof(s), ctypes.addressof(results), outer, step,
            chunks, 0,
        )  # fmt: skip
        # the whole team even where there are fewer chunks (the idle threads find none left):
        # a region smaller than the last one makes libgomp shrink its pool and grow it again at
        # the next full region, PyTorch's BLAS ones included. With teams of min(threads,
        # chunks), T5 on 16 cores took 30.6 ms against the C++ back end's 15.3 (whose regions
        # always take the whole team); with the whole team 14.0 against 13.1
        f.omp(ctypes.addressof(ctx), threads)
        for k in range(chunks):  # the first failing chunk in the loop's order
            if results[2 * k]:
                return results[2 * k], results[2 * k + 1]
        return 0, 0


def build_program(plan: ProgramPlan, cache: Cache | None = None) -> LLVMKernels:
    return LLVMKernels(plan, cache)
